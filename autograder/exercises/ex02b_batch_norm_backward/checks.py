"""Checks for the exercise ``02b_batch_norm_backward``: ``BatchNormFunction`` and ``LayerNormFunction``.

The student writes each as a ``torch.autograd.Function`` whose ``backward`` computes the input,
γ and β gradients by their own formula. A check applies the Function in the student's process
(:mod:`autograder.exercises.ex02b_batch_norm_backward.observe`) and compares, here, the output and the three
gradients with torch's ``F.batch_norm`` / ``F.layer_norm`` differentiated by autograd (float32
results against float64, as everywhere: :mod:`autograder.core.numerics`). It also requires that the
output's ``grad_fn`` is the student's node and that their Function never runs an op with
gradients enabled (no graph built inside forward or backward: autograd must not do the work),
and runs ``torch.autograd.gradcheck`` in float64, here, on a Function whose forward and backward
are the student's, called over the wire.

A wrong gradient's message names the likely misconception with the grader's own closed form
(:mod:`autograder.exercises.ex02b_batch_norm_backward.hidden_formulas`), which only the grader
holds: it is the solution. In the student's kernel the same check fails with the same verdict,
says what differs and points to the chapter instead.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from autograder.core import forbidden, withheld, integrity
from autograder.core.formulas import standardize, statistic_misreadings
from autograder.core.devices import devices_for
from autograder.core.seeding import generator
from autograder.core.inputs import channel_input, random_tensor, sample_input
from autograder.core.messages import fail, shape_str
from autograder.core.numerics import closest_explanation, discrepancy
from autograder.core.side import Student, student

F64, F32 = torch.float64, torch.float32
EPS = 1e-5
GRADIENTS = ("the input's gradient ∂L/∂x", "weight's gradient ∂L/∂γ", "bias's gradient ∂L/∂β")


@dataclass(frozen=True)
class Axes:
    """Which dims one statistic covers, and the shape γ broadcasts as."""

    stat_dims: tuple[int, ...]
    param_view: tuple[int, ...]

    @classmethod
    def batch_norm(cls, x: torch.Tensor) -> "Axes":
        return cls((0, *range(2, x.dim())), (1, x.shape[1], *[1] * (x.dim() - 2)))

    @classmethod
    def layer_norm(cls, x: torch.Tensor, normalized_dims: int) -> "Axes":
        k = normalized_dims
        return cls(tuple(range(x.dim() - k, x.dim())), (*[1] * (x.dim() - k), *x.shape[x.dim() - k:]))

    @property
    def param_dims(self) -> tuple[int, ...]:
        """The dims γ's gradient sums over: those where γ broadcasts."""
        return tuple(d for d, size in enumerate(self.param_view) if size == 1)


@dataclass(frozen=True)
class Kind:
    """What differs between the two Functions: their name, torch's reference and their axes."""

    name: str
    reference: str  # how messages name torch's answer

    def axes(self, x: torch.Tensor, param_shape) -> Axes:
        if self.name == "BatchNormFunction":
            return Axes.batch_norm(x)
        return Axes.layer_norm(x, len(param_shape))

    def torch_output(self, x, weight, bias, eps):
        if self.name == "BatchNormFunction":
            return F.batch_norm(x, None, None, weight, bias, training=True, eps=eps)
        return F.layer_norm(x, tuple(weight.shape), weight, bias, eps)


BATCH_NORM = Kind("BatchNormFunction", "F.batch_norm(x, None, None, γ, β, training=True)")
LAYER_NORM = Kind("LayerNormFunction", "F.layer_norm(x, γ.shape, γ, β)")


@dataclass(frozen=True)
class Case:
    x: torch.Tensor  # float64, the values (the case's dtype and memory format are applied when sent)
    param_shape: tuple[int, ...]
    dtype: torch.dtype = F64
    channels_last: bool = False
    note: str = ""
    seed: int = 0
    eps: float = EPS

    def inputs(self, device) -> tuple[torch.Tensor, ...]:
        """x, γ, β and the upstream gradient g, in the case's dtype on ``device``."""
        weight = random_tensor(self.param_shape, self.seed + 1, 0.5, 1.5)
        bias = random_tensor(self.param_shape, self.seed + 2, -0.5, 0.5)
        g = torch.randn(self.x.shape, generator=generator(self.seed + 3), dtype=F64)
        x = self.x
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return tuple(t.to(device=device, dtype=self.dtype) for t in (x, weight, bias, g))

    def where(self, kind: Kind, device) -> str:
        layout = ", channels_last" if self.channels_last else ""
        note = (f", eps={self.eps:g}" if self.eps != EPS else "") + (f", {self.note}" if self.note else "")
        return (f"{kind.name} on a {str(self.dtype).replace('torch.', '')} input of shape "
                f"{shape_str(self.x.shape)}{layout} on {device.type}{note}")


def _batch_norm_cases(full: bool) -> list[Case]:
    cases = [
        Case(channel_input((6, 3), seed=1), (3,)),
        Case(channel_input((2, 3, 4, 4), seed=2), (3,), eps=1e-3),
        Case(channel_input((8, 3), seed=3, mean=100.0), (3,), F32, note="mean 100"),
    ]
    cases += withheld.of(__package__).batch_norm_cases() if full else []
    return cases


def _layer_norm_cases(full: bool) -> list[Case]:
    cases = [
        Case(sample_input((4, 6), seed=11), (6,)),
        Case(sample_input((2, 3, 5), seed=12), (5,), note="tokens (B, T, D)", eps=1e-3),
        Case(sample_input((3, 8), seed=13, mean=100.0), (8,), F32, note="mean 100"),
        Case(sample_input((2, 3, 4, 4), seed=14), (3, 4, 4), note="images, normalized over (C, H, W)"),
    ]
    cases += withheld.of(__package__).layer_norm_cases() if full else []
    return cases


def _reference(kind: Kind, x, weight, bias, g, eps: float):
    """torch's output and (∂L/∂x, ∂L/∂γ, ∂L/∂β) for these tensors, by autograd."""
    leaves = [t.detach().clone().requires_grad_() for t in (x, weight, bias)]
    out = kind.torch_output(*leaves, eps)
    return out.detach(), torch.autograd.grad(out, leaves, g)


def wrong_dims(kind: Kind, x: torch.Tensor, axes: Axes) -> list[tuple[int, ...]]:
    """Reductions over another layer's axes: the batch only, or each sample (LayerNorm's)."""
    if kind is BATCH_NORM:
        options = [(0,), tuple(range(1, x.dim()))]
    else:
        options = [(0,), (x.dim() - 1,)]  # the batch; the last dim only, whatever γ's shape
    return [d for d in options if d != axes.stat_dims]


def dims_hint(kind: Kind, dims: tuple[int, ...], axes: Axes, backward: bool) -> str:
    extent = "the last weight.dim() dims" if kind is LAYER_NORM else "every dim except the channel dim 1"
    if backward:
        return (f"the means in your backward run over dims {dims}, but {kind.name}'s statistics cover dims "
                f"{axes.stat_dims} ({extent}); the means must cover the same dims.")
    return f"your statistics run over dims {dims}, but {kind.name} normalizes over dims {axes.stat_dims} ({extent})."


def _output_hint(kind: Kind, got: torch.Tensor, x, weight, bias, exact, eps: float) -> str | None:
    """The classic misconception behind a wrong output: the statistics misread (the shared list of
    every chapter, :func:`autograder.core.formulas.statistic_misreadings`), or taken over other dims."""
    x, weight, bias = x.double().cpu(), weight.double().cpu(), bias.double().cpu()
    axes = kind.axes(x, weight.shape)
    candidates = statistic_misreadings(x, axes.stat_dims, eps)
    candidates += [(standardize(x, dims, eps), dims_hint(kind, dims, axes, backward=False))
                   for dims in wrong_dims(kind, x, axes)]
    affine = [(c * weight.reshape(axes.param_view) + bias.reshape(axes.param_view), text) for c, text in candidates]
    affine.append((standardize(x, axes.stat_dims, eps), "γ (weight) and β (bias) are not applied: y = γ·x̂ + β."))
    return closest_explanation(affine, got, exact)


BOOK = ("\nCompare your derivation, path by path, with the closed form in chapter 2.1, "
        "book/02b_batch_norm_backward.md (the hints that name the likely mistake in a gradient run when "
        "your instructor grades).")


def _grader_only_formulas():
    """:mod:`~autograder.exercises.ex02b_batch_norm_backward.hidden_formulas`, the closed form and
    the gradient hints built on it, or None where it is missing: the student's install and the
    sandbox (it is the exercise's solution, :mod:`autograder.grading.parts`)."""
    name = f"{__package__}.hidden_formulas"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name != name:
            raise
        return None


def _gradient_advice(kind: Kind, index: int, got: torch.Tensor, x, weight, g, exact, eps: float) -> str:
    """The line a wrong gradient's message ends with: the classic misconception it matches (the
    grader's hints), nothing when none matches, or the pointer to the chapter where the hints are
    missing."""
    formulas = _grader_only_formulas()
    if formulas is None:
        return BOOK
    hint = formulas.gradient_hint(kind, index, got, x, weight, g, exact, eps)
    return f"\nLikely cause: {hint}" if hint else ""


def _judge(kind: Kind, report: dict, case: Case, device, with_grads: bool = True) -> None:
    """Fail on the first difference between the student's report and torch's answers."""
    __tracebackhide__ = True
    where = case.where(kind, device)
    if "error" in report:
        error = report["error"]
        fail(f"{where}: your {report['stage']} raised {error.name}: {error}")
    forbidden.report_normalization_ops(list(report["normalization_ops"]), kind.name)
    if not report["node_is_theirs"]:
        fail(f"{where}: the output's grad_fn is {report['node']}, not your {kind.name}'s backward node: call "
             f"{kind.name}.apply(x, weight, bias, eps) and return its result unchanged, so that autograd calls your "
             "backward.")
    if report["forward_mode_ad"]:
        fail(f"{where}: your Function used forward-mode AD ({', '.join(report['forward_mode_ad'])}: torch.func.jvp, "
             "jacfwd, linearize or torch.autograd.forward_ad). The exercise is to compute the gradients with your "
             "own formula. This part earns no points.")
    if report["engine_runs"]:
        fail(f"{where}: the autograd engine ran {report['engine_runs']} time(s) inside your Function "
             "(torch.autograd.grad, .backward() or torch.func.vjp, in any thread). The exercise is to compute the "
             "gradients with your own formula. This part earns no points.")
    if report["ops_with_grad"]:
        fail(f"{where}: your Function ran {', '.join('aten::' + o.split('::')[-1] for o in report['ops_with_grad'])} "
             "with gradients enabled or with forward-mode AD, so autograd recorded a graph or computed "
             "derivatives inside your forward or backward. The exercise is to compute the gradients with your own "
             "formula (no torch.enable_grad, autograd.grad, .backward(), forward_ad or torch.func inside the "
             "Function). This part earns no points.")
    if not report["input_unchanged"]:
        fail(f"{where}: your forward modified its input x in place; torch's leaves it unchanged.")
    x, weight, bias, g = case.inputs(device)
    same_out, same_grads = _reference(kind, x, weight, bias, g, case.eps)
    exact_out, exact_grads = _reference(kind, x.double(), weight.double(), bias.double(), g.double(), case.eps)
    got = report["output"]
    if not isinstance(got, torch.Tensor) or got.shape != exact_out.shape:
        fail(f"{where}: forward returned shape {shape_str(got.shape)}; expected {shape_str(exact_out.shape)}.")
    gap = discrepancy(got, same_out, exact_out)
    if gap is not None:
        hint = _output_hint(kind, got, x, weight, bias, exact_out, case.eps)
        fail(f"{where}: your output differs from the reference ({kind.reference}) by up to {gap.max_error:.3g} at "
             f"{list(gap.index)} (yours {gap.shown[0]}, torch {gap.shown[1]}; allowed "
             f"{gap.allowed:.1g})." + (f"\nLikely cause: {hint}" if hint else ""))
    if not with_grads:
        return
    grads = report["grads"]
    for index, (name, mine, same, exact) in enumerate(zip(GRADIENTS, grads, same_grads, exact_grads)):
        if mine is None:
            fail(f"{where}: your backward returned None for {name}; return a gradient for x, weight and bias "
                 "(and None for eps).")
        if mine.shape != exact.shape:
            fail(f"{where}: {name} has shape {shape_str(mine.shape)}; expected {shape_str(exact.shape)}, the shape of "
                 f"{['x', 'weight', 'bias'][index]}.")
        gap = discrepancy(mine, same, exact)
        if gap is not None:
            fail(f"{where}: {name} differs from the reference (autograd through {kind.reference}) by up to "
                 f"{gap.max_error:.3g} at {list(gap.index)} (yours {gap.shown[0]}, torch "
                 f"{gap.shown[1]}; allowed {gap.allowed:.1g})."
                 + _gradient_advice(kind, index, mine, x, weight, g, exact, case.eps))


class _Theirs(torch.autograd.Function):
    """The student's Function seen from here: forward and backward run on their side, over the
    wire, so that ``torch.autograd.gradcheck`` can compare their backward with finite differences
    of their forward."""

    @staticmethod
    def forward(ctx, x, weight, bias, fn: Student, eps: float):
        ctx.save_for_backward(x, weight, bias)
        ctx.fn, ctx.eps = fn, eps
        report = fn.report("observe_backward.apply", x, weight, bias, eps, x.device)
        if "error" in report:
            raise _GradcheckStopped(f"your {report['stage']} raised {report['error'].name}: {report['error']}")
        return report["output"]

    @staticmethod
    def backward(ctx, g):
        x, weight, bias = ctx.saved_tensors
        report = ctx.fn.report("observe_backward.apply", x, weight, bias, ctx.eps, x.device, g)
        if "error" in report or report["grads"] is None or any(t is None for t in report["grads"]):
            raise _GradcheckStopped("your backward gave no gradient here")
        return (*report["grads"], None, None)


class _GradcheckStopped(Exception):
    pass


def _gradcheck(kind: Kind, fn: Student, case: Case) -> None:
    """``torch.autograd.gradcheck`` in float64 on the student's forward and backward."""
    __tracebackhide__ = True
    x, weight, bias, _ = case.inputs(torch.device("cpu"))
    inputs = tuple(t.detach().requires_grad_() for t in (x, weight, bias))
    try:
        ok = torch.autograd.gradcheck(lambda *t: _Theirs.apply(*t, fn, case.eps), inputs, eps=1e-6, atol=1e-6, rtol=1e-4,
                                      raise_exception=True)
    except _GradcheckStopped as stopped:
        fail(f"torch.autograd.gradcheck on {case.where(kind, x.device)}: {stopped}.")
    except Exception as error:  # noqa: BLE001 - gradcheck's own report of a mismatch
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        fail(f"torch.autograd.gradcheck on {case.where(kind, x.device)}: your backward disagrees with finite "
             f"differences of your forward ({first}).")
    assert ok


def _check(kind: Kind, fn, cases: list[Case], full: bool) -> None:
    __tracebackhide__ = True
    integrity.check_untampered()
    theirs = student(fn, kind.name)
    info = theirs.report("observe_backward.function_info")
    if not info["is_function"]:
        fail(f"`{kind.name}` must be a subclass of torch.autograd.Function (with static forward and backward); "
             f"it is {'a class that is not' if info['type'] == 'type' else 'a ' + info['type'] + ', not'} one.")
    for device in devices_for(full):
        for case in cases:
            x, weight, bias, g = case.inputs(device)
            report = theirs.report("observe_backward.apply", x, weight, bias, case.eps, device, g)
            _judge(kind, report, case, device)
    _gradcheck(kind, theirs, cases[0])


def check_batch_norm_function(BatchNormFunction, full: bool = False) -> None:
    """BatchNorm in training mode as your own autograd Function: output and the three gradients
    equal torch's, computed by your backward, and gradcheck passes."""
    __tracebackhide__ = True
    _check(BATCH_NORM, BatchNormFunction, _batch_norm_cases(full), full)


def check_layer_norm_function(LayerNormFunction, full: bool = False) -> None:
    """LayerNorm over γ's trailing dims as your own autograd Function (same checks)."""
    __tracebackhide__ = True
    _check(LAYER_NORM, LayerNormFunction, _layer_norm_cases(full), full)


integrity.remember()
