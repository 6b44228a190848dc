"""Drive a student's ``torch.autograd.Function`` (exercise 02b) and report what it did.

Runs where the student's code runs and decides nothing: it applies the Function to leaves that
require gradients, asks autograd for the gradients with the grader's upstream gradient, and
reports the output, the gradients, which node autograd recorded, and the aten ops the Function
ran, in particular any that ran with gradients enabled (a Function whose forward or backward
builds a graph lets autograd do the differentiation). :mod:`autograder.exercises.ex02b_batch_norm_backward.checks` judges it.
"""
from __future__ import annotations

import contextlib

import torch
from torch._functorch import eager_transforms
from torch.autograd import forward_ad

from autograder.sandbox.observe import OpRecorder, _plain_tensor
from autograder.sandbox.tripwire import tripwires
from autograder.core.wire import RemoteError

MAX_OPS_SHOWN = 8


# aten ops that only forward-mode AD runs here: the checks of make_dual (torch.autograd.forward_ad,
# torch.func.jvp, jacfwd, linearize).
FORWARD_AD_OPS = {"aten::_has_same_storage_numel", "aten::_make_dual", "aten::_unpack_dual"}


class _GradModeRecorder(OpRecorder):
    """An :class:`OpRecorder` that also notes the ops run while gradients were enabled, and those
    of forward-mode AD."""

    def __init__(self) -> None:
        super().__init__()
        self.with_grad: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.is_grad_enabled() or func.name() in FORWARD_AD_OPS:
            self.with_grad.add(func.name())
        return super().__torch_dispatch__(func, types, args, kwargs)


# The Python entry points every forward-mode derivative goes through (torch.autograd.forward_ad,
# and torch.func's jvp, jacfwd, linearize via _jvp_with_argnums).
_FORWARD_AD = [forward_ad.make_dual, forward_ad.unpack_dual, eager_transforms._jvp_with_argnums]


@contextlib.contextmanager
def _counting_engine_runs(runs: list):
    """Count every run of the autograd engine (``torch.autograd.grad``, ``.backward()``,
    ``torch.func.vjp``), from any thread, while active."""
    originals = (torch.autograd._engine_run_backward, torch.autograd.graph._engine_run_backward)

    def counted(*args, **kwargs):
        runs.append(1)
        return originals[1](*args, **kwargs)

    torch.autograd._engine_run_backward = torch.autograd.graph._engine_run_backward = counted
    try:
        yield
    finally:
        torch.autograd._engine_run_backward, torch.autograd.graph._engine_run_backward = originals


def function_info(fn) -> dict:
    """Whether ``fn`` is a ``torch.autograd.Function`` subclass, and its class chain."""
    if not isinstance(fn, type):
        return {"is_function": False, "type": type(fn).__name__, "mro": []}
    return {
        "is_function": issubclass(fn, torch.autograd.Function),
        "type": "type",
        "mro": [[str(getattr(k, "__module__", "")), str(getattr(k, "__qualname__", ""))] for k in fn.__mro__],
    }


def _leaf(t: torch.Tensor, device) -> torch.Tensor:
    return t.to(device).detach().requires_grad_()  # .to keeps the memory format (channels_last)


def apply(fn, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float, device,
          grad_output: torch.Tensor | None = None) -> dict:
    """``fn.apply(x, weight, bias, eps)`` on fresh leaves on ``device``, then, when
    ``grad_output`` is given, ``torch.autograd.grad`` of the output for the three inputs (under
    ``torch.no_grad()``: only the Function itself could turn gradients on).

    Returns ``{"error": RemoteError, "stage": "forward" | "backward"}``, or ``{"output",
    "node": the type name of output.grad_fn, "node_is_theirs", "input_unchanged",
    "normalization_ops", "ops_with_grad", "grads": [dx, dweight, dbias] (None where the
    Function gave none) or None}``.
    """
    x, weight, bias = _leaf(x, device), _leaf(weight, device), _leaf(bias, device)
    x_before = x.detach().clone()
    recorder, engine_runs, forward_mode = _GradModeRecorder(), [], []
    try:
        with _counting_engine_runs(engine_runs), tripwires(_FORWARD_AD) as calls, recorder, torch.enable_grad():
            out = fn.apply(x, weight, bias, eps)  # enable_grad: gradcheck calls this from a backward
            forward_mode += calls
    except Exception as error:  # noqa: BLE001 - the student's exception is the observation
        return {"error": RemoteError.of(error), "stage": "forward"}
    if not isinstance(out, torch.Tensor):
        return {"error": RemoteError.of(TypeError(f"forward returned {type(out).__name__}, not a Tensor")),
                "stage": "forward"}
    node = out.grad_fn
    backward_cls = getattr(fn, "_backward_cls", None)
    report = {
        "output": _plain_tensor(out),
        "node": type(node).__name__ if node is not None else None,
        "node_is_theirs": node is not None and backward_cls is not None and type(node) is backward_cls,
        "input_unchanged": bool(torch.equal(x.detach(), x_before)),
        "grads": None,
    }
    if grad_output is not None and out.requires_grad:
        try:
            with _counting_engine_runs(engine_runs), tripwires(_FORWARD_AD) as calls, recorder, torch.no_grad():
                grads = torch.autograd.grad(out, (x, weight, bias), grad_output.to(device, out.dtype),
                                            allow_unused=True)
                forward_mode += calls
        except Exception as error:  # noqa: BLE001
            return {"error": RemoteError.of(error), "stage": "backward"}
        report["grads"] = [None if g is None else _plain_tensor(g) for g in grads]
        engine_runs.pop()  # this function's own run
    report["normalization_ops"] = recorder.normalization_ops()
    report["ops_with_grad"] = sorted(recorder.with_grad)[:MAX_OPS_SHOWN]
    report["engine_runs"] = len(engine_runs)
    used = {name.rsplit(".", 1)[-1] for name in forward_mode}
    report["forward_mode_ad"] = sorted(used)
    return report
