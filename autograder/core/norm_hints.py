"""Misconception hints for the per-sample normalizations: LayerNorm, InstanceNorm, GroupNorm.

A layer is described by its :class:`Grouping`: the view of the input in which one statistic is
taken over ``dims``.  The hint recomputes, in float64, what a layer would have produced with each
known misreading (of the formula, or of the grouping), and names the one the student matches.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from autograder.core.engine import GRAD_INPUT, GRAD_PARAMS, OUTPUT, RAISES, Finding, Hint
from autograder.core.formulas import ONE_PASS_ADVICE, one_pass_is_inaccurate, standardize, statistic_misreadings
from autograder.core.numerics import closest_explanation, matches


@dataclass(frozen=True)
class Grouping:
    """One statistic per slice of ``view(x)`` over ``dims``; the result is reshaped back to x."""

    dims: tuple[int, ...]
    view: Callable[[torch.Tensor], torch.Tensor] = lambda x: x

    def normalize(self, x: torch.Tensor, eps: float, **kwargs) -> torch.Tensor:
        return standardize(self.view(x), self.dims, eps, **kwargs).reshape(x.shape)


Affine = Callable[[torch.Tensor, Finding], torch.Tensor]
GROUPING_FACTORY = Callable[[torch.Tensor, Finding], "tuple[Grouping, list[tuple[Grouping, str]]]"]

GRADIENT_ADVICE = (
    "the output is right but the input gradient is not: most likely μ or σ² is computed from a "
    "detached tensor (.detach(), .item(), torch.no_grad() or numpy), so autograd ignores that they depend on x."
)


def _output_hint(f: Finding, groupings: GROUPING_FACTORY, affine: Affine) -> str | None:
    x = f.step.x.to(f.case.dtype).double()
    eps = f.case.kwargs.get("eps", 1e-5)
    right, wrong = groupings(x, f)
    if one_pass_is_inaccurate(right.view(x), right.dims, f.case.dtype):
        return ONE_PASS_ADVICE
    candidates = [(c.reshape(x.shape), text) for c, text in statistic_misreadings(right.view(x), right.dims, eps)]
    candidates += [(grouping.normalize(x, eps), text) for grouping, text in wrong]
    found = closest_explanation([(affine(c, f), text) for c, text in candidates], f.student, f.exact)
    if found:
        return found
    state = f.case.state
    xhat = right.normalize(x, eps)
    if "weight" in state and matches(xhat, f.student, f.exact):
        return "γ (weight) and β (bias) are not applied: y = γ·x̂ + β."
    if "weight" in state and "bias" in state and state["weight"].shape == state["bias"].shape:
        swapped = {**state, "weight": state["bias"], "bias": state["weight"]}
        if matches(affine(xhat, _with_state(f, swapped)), f.student, f.exact):
            return "weight and bias are swapped: y = weight·x̂ + bias."
    return None


def _with_state(f: Finding, state: dict) -> Finding:
    case = type(f.case)(**{**f.case.__dict__, "state": state})
    return Finding(case, f.step_index, f.aspect, f.name, f.student, f.exact, f.discrepancy, f.state_before, f.detail)


def make_hint(groupings: GROUPING_FACTORY, affine: Affine, extra: Hint | None = None) -> Hint:
    """A hint function for the engine: ``extra`` first (raises, buffers), then the shared rules."""

    def hint(f: Finding) -> str | None:
        if extra is not None:
            found = extra(f)
            if found:
                return found
        if f.aspect == RAISES and "view size is not compatible" in f.detail:
            return "x.view needs a contiguous tensor; use x.reshape, which copies only when it must."
        if f.aspect == OUTPUT and f.student is not None and f.exact is not None and f.student.shape == f.exact.shape:
            return _output_hint(f, groupings, affine)
        if f.aspect == GRAD_INPUT:
            return GRADIENT_ADVICE
        if f.aspect == GRAD_PARAMS:
            if f.student is None:
                return "γ and β must be nn.Parameters used in the forward so that they receive gradients."
            return "check how γ (weight) and β (bias) enter the output: y = γ·x̂ + β."
        return None

    return hint
