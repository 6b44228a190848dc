"""Run a student's ``recalibrate_bn(model, loader)`` (exercise 07) on a model built here.

The model is built from a plain description (:func:`build_model`, also used by the grader for
``torch.optim.swa_utils.update_bn``'s answer), with stale running statistics; the loader is a list
of batches (tensors, or ``(input, target)`` pairs, :func:`make_loader`).  The report holds the model's ``state_dict``
after the call, each BatchNorm's ``momentum`` and every module's ``training`` flag before and
after, whether parameters changed or got gradients, how each BatchNorm forward ran (with autograd
on or off, in training or eval mode: a forward pre-hook on every BatchNorm records it), whether
autograd was left switched off (switched back on here, so that later checks are unaffected) or
parameters left frozen (``requires_grad`` turned off) after the call, and whether torch's ``update_bn`` ran (:mod:`autograder.sandbox.tripwire`).  :mod:`autograder.exercises.ex07_practice_lab.checks` judges it.
"""
from __future__ import annotations

import inspect

import torch
from torch import nn
from torch.optim import swa_utils

from autograder.sandbox.observe import _plain_tensor
from autograder.sandbox.tripwire import tripwires
from autograder.core.wire import RemoteError


def architecture(spec: dict) -> nn.Module:
    """A small CNN with three BatchNorms whose momenta ``spec`` gives, in float64: BatchNorm2d,
    BatchNorm2d and BatchNorm1d, or with ``spec["kinds"] == ["sync", "3d", "1d"]`` a SyncBatchNorm
    (a plain BatchNorm without a process group) and a BatchNorm3d (on the activations seen as 5D)
    in place of the two BatchNorm2d."""
    c, hidden = spec["channels"], spec["hidden"]
    first, second, third = spec["momenta"]
    kinds = spec.get("kinds", ["2d", "2d", "1d"])
    norm1 = nn.SyncBatchNorm(hidden, momentum=first) if kinds[0] == "sync" else nn.BatchNorm2d(hidden, momentum=first)
    norm2 = (nn.Sequential(nn.Unflatten(1, (hidden, 1)), nn.BatchNorm3d(hidden, momentum=second), nn.Flatten(1, 2))
             if kinds[1] == "3d" else nn.BatchNorm2d(hidden, momentum=second))
    return nn.Sequential(
        nn.Conv2d(c, hidden, 3, padding=1, bias=False), norm1, nn.ReLU(),
        nn.Conv2d(hidden, hidden, 3, padding=1, bias=False), norm2, nn.ReLU(),
        nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(4 * hidden, 8), nn.BatchNorm1d(8, momentum=third),
        nn.Linear(8, 3),
    ).to(torch.float64)


def build_model(spec: dict, state: dict) -> nn.Module:
    """:func:`architecture` holding ``state`` (stale running statistics), in the mode ``spec`` says:
    ``training`` for the model, and ``eval_modules`` (indices into the Sequential) put in eval mode
    after it, as a fine-tuning script freezes a BatchNorm with ``bn.eval()``."""
    model = architecture(spec)
    with torch.no_grad():
        model.load_state_dict(state)
    model.train(spec["training"])
    for index in spec.get("eval_modules", ()):
        model[index].eval()
    return model


def batch_norms(model: nn.Module) -> list[nn.Module]:
    """Every BatchNorm of the model, as ``update_bn`` finds them."""
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


def make_loader(batches: list, pairs) -> list:
    """The loader: the batches themselves, or ``(input, target)`` pairs as tuples (``pairs`` true)
    or as lists (``pairs == "list"``)."""
    if not pairs:
        return list(batches)
    made = [(x, torch.zeros(len(x), dtype=torch.long)) for x in batches]
    return [list(pair) for pair in made] if pairs == "list" else made


def _modes(model: nn.Module) -> list[bool]:
    return [m.training for m in model.modules()]


def _momenta(model: nn.Module) -> list:
    return [m.momentum for m in batch_norms(model)]


def recalibrate(fn, spec: dict, state: dict, batches: list, pairs: bool) -> dict:
    """``fn(model, loader)`` and what it left behind."""
    model = build_model(spec, state)
    loader = make_loader(batches, pairs)
    parameters = {n: p.detach().clone() for n, p in model.named_parameters()}
    modes_before, momenta_before = _modes(model), _momenta(model)
    forwards = []  # (autograd on, training) of every BatchNorm forward

    def watch(module, args):
        forwards.append((torch.is_grad_enabled(), module.training))

    hooks = [m.register_forward_pre_hook(watch) for m in batch_norms(model)]
    grad_before = torch.is_grad_enabled()
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    try:
        with tripwires([inspect.unwrap(swa_utils.update_bn)]) as entered:
            fn(model, loader)
    except Exception as error:  # noqa: BLE001 - the student's exception is the observation
        return {"error": RemoteError.of(error), "update_bn": bool(entered)}
    finally:
        for hook in hooks:
            hook.remove()
        grad_after = torch.is_grad_enabled()
        torch.set_grad_enabled(grad_before)
    named = dict(model.named_parameters())
    frozen = sorted(n for n, p in named.items() if flags.get(n) and not p.requires_grad)
    return {
        "autograd_left_off": grad_before and not grad_after,
        "parameters_frozen": frozen,
        "state": {str(k): _plain_tensor(v) for k, v in model.state_dict().items()},
        "modes_before": modes_before, "modes_after": _modes(model),
        "momenta_before": momenta_before, "momenta_after": _momenta(model),
        "parameters_changed": sorted(n for n, p in parameters.items() if n not in named or not torch.equal(named[n].detach(), p)),
        "gradients_left": sorted(n for n, p in named.items() if p.grad is not None),
        "update_bn": bool(entered),
        "batch_norm_forwards": len(forwards),
        "forwards_with_autograd": sum(1 for grad, _ in forwards if grad),
        "forwards_in_eval": sum(1 for _, training in forwards if not training),
    }
