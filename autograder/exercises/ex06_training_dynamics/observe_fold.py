"""Run a student's ``fold_batch_norm(conv, bn)`` (exercise 06) and report what it did.

The convolution and the BatchNorm are built here from plain descriptions, in eval mode; the
student's function gets them, and the report says what came back (its type, weight and bias, its
output on the grader's input), whether the two modules were changed, which normalization kernels
ran, and whether any of torch's fusion helpers ran (:mod:`autograder.sandbox.tripwire`, however
the student imported them). :mod:`autograder.exercises.ex06_training_dynamics.checks` judges the report.
"""
from __future__ import annotations

import types

import torch
from torch import nn
from torch.nn.utils import fusion

from autograder.sandbox.observe import _ops, _plain_tensor, _recording
from autograder.sandbox.tripwire import tripwires
from autograder.core.wire import RemoteError

# Every function of torch.nn.utils.fusion (conv and linear, eval and weights).
_TORCH_FUSION = [f for f in vars(fusion).values() if isinstance(f, types.FunctionType) and f.__module__ == fusion.__name__]


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
    recorder = _recording(True)
    entered: list[str] = []
    try:
        with tripwires(_TORCH_FUSION) as entered, recorder:
            folded = fn(conv, bn)
    except Exception as error:  # noqa: BLE001 - the student's exception is the observation
        if entered:
            return {"error": RemoteError.of(error), "torch_fusion": sorted({n.rsplit(".", 1)[-1] for n in entered})}
        return {"error": RemoteError.of(error)}
    changed = not all(
        torch.equal(a[k], b[k]) for a, b in zip(before, (_state_of(conv), _state_of(bn))) for k in a
    )
    report = {"type": type(folded).__name__, "is_conv": isinstance(folded, nn.Conv2d), "modules_changed": changed,
              "torch_fusion": sorted({n.rsplit(".", 1)[-1] for n in entered}), "normalization_ops": _ops(recorder)}
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
