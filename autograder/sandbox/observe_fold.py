"""Run a student's ``fold_batch_norm(conv, bn)`` (exercise 06) and report what it did.

The convolution and the BatchNorm are built here from plain descriptions, in eval mode; the
student's function gets them, and the report says what came back (its type, weight and bias, its
output on the grader's input), whether the two modules were changed, which normalization kernels
ran, and whether torch's own fusion helpers ran (found by their code objects, however the
student imported them). :mod:`autograder.training_dynamics` judges the report.
"""
from __future__ import annotations

import sys

import torch
from torch import nn
from torch.nn.utils import fusion

from autograder.sandbox.observe import _ops, _plain_tensor, _recording
from autograder.wire import RemoteError

_TORCH_FUSION = {fusion.fuse_conv_bn_eval.__code__, fusion.fuse_conv_bn_weights.__code__}


def _state_of(module: nn.Module) -> dict:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _build(conv_kwargs: dict, conv_state: dict, bn_kwargs: dict, bn_state: dict, device, dtype):
    conv = nn.Conv2d(**conv_kwargs, device=device, dtype=dtype)
    bn = nn.BatchNorm2d(**bn_kwargs, device=device, dtype=dtype)
    with torch.no_grad():
        conv.load_state_dict({k: v.to(device) for k, v in conv_state.items()})
        bn.load_state_dict({k: v.to(device) for k, v in bn_state.items()})
    return conv.eval(), bn.eval()


def fold(fn, conv_kwargs: dict, conv_state: dict, bn_kwargs: dict, bn_state: dict, device, dtype,
         x: torch.Tensor) -> dict:
    """``fn(conv, bn)`` and, when it returns a module, that module (eval mode, no autograd) on ``x``."""
    conv, bn = _build(conv_kwargs, conv_state, bn_kwargs, bn_state, device, dtype)
    before = (_state_of(conv), _state_of(bn))
    entered: list[str] = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in _TORCH_FUSION:
            entered.append(frame.f_code.co_name)

    recorder = _recording(True)
    previous = sys.getprofile()
    try:
        sys.setprofile(profile)
        with recorder:
            folded = fn(conv, bn)
    except Exception as error:  # noqa: BLE001 - the student's exception is the observation
        return {"error": RemoteError.of(error)}
    finally:
        sys.setprofile(previous)
    changed = not all(
        torch.equal(a[k], b[k]) for a, b in zip(before, (_state_of(conv), _state_of(bn))) for k in a
    )
    report = {"type": type(folded).__name__, "is_conv": isinstance(folded, nn.Conv2d), "modules_changed": changed,
              "torch_fusion": sorted(set(entered)), "normalization_ops": _ops(recorder)}
    if not isinstance(folded, nn.Module):
        return report
    try:
        weight, bias = getattr(folded, "weight", None), getattr(folded, "bias", None)
        report["weight"] = _plain_tensor(weight) if isinstance(weight, torch.Tensor) else None
        report["bias"] = _plain_tensor(bias) if isinstance(bias, torch.Tensor) else None
        folded.eval()
        with torch.no_grad():
            out = folded(x.to(device, dtype))
        report["output"] = _plain_tensor(out) if isinstance(out, torch.Tensor) else None
    except Exception as error:  # noqa: BLE001
        report["output_error"] = RemoteError.of(error)
    return report
