"""The backward pass of a normalization, closed form, the classic wrong versions of it, and the
hints built on them. Grader only.

Only the grader holds this file (:mod:`autograder.grading.parts`: no student file has "hidden"
in its path): it *is* the solution of exercise 02b, so the student's install and the grading
sandbox do not get it.  The checks compare with autograd through ``F.batch_norm`` /
``F.layer_norm`` (:mod:`autograder.exercises.ex02b_batch_norm_backward.checks`), and reach this
module lazily, only to name the likely mistake behind a wrong gradient; where it is missing (the
student's kernel) a failing check says what differs and points to the chapter.

With x̂ = (x − μ)/σ, σ = sqrt(σ² + ε) over the m elements of one statistic, y = γ·x̂ + β and
upstream gradient g = ∂L/∂y, write ĝ = γ·g (= ∂L/∂x̂). Then

    ∂L/∂x = (1/σ) · (ĝ − mean(ĝ) − x̂ · mean(ĝ · x̂)),    ∂L/∂γ = Σ g·x̂,    ∂L/∂β = Σ g,

the means over the statistic's elements, the sums over everything γ is shared across. For
BatchNorm the statistic's elements are a channel's values (dims 0, 2, 3, ...) and γ is per
channel; for LayerNorm they are one sample's trailing dims and γ is per trailing element. Both
are the same function with other axes
(:class:`~autograder.exercises.ex02b_batch_norm_backward.checks.Axes`).
"""
from __future__ import annotations

import torch

from autograder.core.numerics import closest_explanation
from autograder.exercises.ex02b_batch_norm_backward.checks import LAYER_NORM, Axes, Kind, dims_hint, wrong_dims


def normalized(x: torch.Tensor, axes: Axes, eps: float, correction: int = 0):
    """x̂ and 1/σ over ``axes.stat_dims`` (``correction=1``: the unbiased variance)."""
    var, mean = torch.var_mean(x, dim=axes.stat_dims, correction=correction, keepdim=True)
    inv_std = torch.rsqrt(var + eps)
    return (x - mean) * inv_std, inv_std


def input_gradient(x, weight, g, axes: Axes, eps: float, mean_path: bool = True, var_path: bool = True,
                   correction: int = 0, reduce=torch.mean, reduce_dims: tuple[int, ...] | None = None,
                   scale_eps: float | None = None) -> torch.Tensor:
    """∂L/∂x by the closed form; the flags drop a path, change a reduction or the dims it runs
    over, or (``scale_eps``) put another ε in the final 1/σ than in x̂ (wrong versions)."""
    xhat, inv_std = normalized(x, axes, eps, correction)
    if scale_eps is not None:
        inv_std = normalized(x, axes, scale_eps, correction)[1]
    ghat = g * weight.reshape(axes.param_view)
    d = axes.stat_dims if reduce_dims is None else reduce_dims
    out = ghat
    if mean_path:
        out = out - reduce(ghat, dim=d, keepdim=True)
    if var_path:
        out = out - xhat * reduce(ghat * xhat, dim=d, keepdim=True)
    return out * inv_std


def gradient_hint(kind: Kind, index: int, got: torch.Tensor, x, weight, g, exact, eps: float) -> str | None:
    """The classic misconception behind a wrong gradient, when the student's matches it."""
    x, weight, g = x.double().cpu(), weight.double().cpu(), g.double().cpu()
    axes = kind.axes(x, weight.shape)
    if index == 0:
        args = (x, weight, g, axes, eps)
        candidates = [
            (input_gradient(*args, mean_path=False),
             "the path through the mean is missing: μ depends on every x, which adds −mean(γ·g)/σ; a correct ∂L/∂x "
             "sums to zero over each statistic's elements."),
            (input_gradient(*args, var_path=False),
             "the path through the variance is missing: σ² depends on every x, which adds −x̂·mean(γ·g·x̂)/σ."),
            (input_gradient(*args, mean_path=False, var_path=False),
             "μ and σ were treated as constants (∂L/∂x = γ·g/σ): add the paths through the mean and the variance."),
            (g * weight.reshape(axes.param_view),
             "this is ∂L/∂x̂ = γ·g, not ∂L/∂x: divide by σ and remove the components along 1 and x̂."),
            (input_gradient(*args, correction=1),
             "σ was computed with the unbiased variance (÷ (m − 1)); the forward normalizes with the biased one (÷ m)."),
            (input_gradient(*args, reduce=torch.sum),
             "the projection uses sums where it needs means: mean(ĝ) and mean(ĝ·x̂), i.e. divide the sums by m."),
            (input_gradient(x, torch.ones_like(weight), g, axes, eps),
             "γ is missing: the gradient reaching x̂ is ĝ = γ·g."),
            (input_gradient(*args, scale_eps=0.0),
             "ε is missing in your backward: 1/σ = 1/sqrt(σ² + ε), the same σ as in the forward."),
            (input_gradient(x, weight, g, axes, 0.0),
             "ε is missing in your backward: 1/σ = 1/sqrt(σ² + ε), the same σ as in the forward."),
        ]
        if kind == LAYER_NORM:
            candidates.append((
                weight.reshape(axes.param_view) * input_gradient(x, torch.ones_like(weight), g, axes, eps),
                "γ is applied outside the means: in LayerNorm γ varies along the normalized dims, so form "
                "ĝ = γ·g first and take mean(ĝ) and mean(ĝ·x̂) of it (in BatchNorm γ is constant over a "
                "channel, so there both orders agree)."))
        for dims in wrong_dims(kind, x, axes):
            candidates.append((input_gradient(*args, reduce_dims=dims),
                               dims_hint(kind, dims, axes, backward=True)))
        return closest_explanation(candidates, got, exact)
    xhat, _ = normalized(x, axes, eps)
    d, shape = axes.param_dims, exact.shape
    if index == 1:
        candidates = [
            (g.sum(dim=d).reshape(shape), "that is ∂L/∂β (Σ g); ∂L/∂γ = Σ g·x̂."),
            ((g * xhat).mean(dim=d).reshape(shape), "a mean where a sum belongs: ∂L/∂γ = Σ g·x̂ over every element γ scales."),
            ((g * x).sum(dim=d).reshape(shape), "∂L/∂γ uses x̂ (the normalized input), not x: Σ g·x̂."),
        ]
    else:
        candidates = [
            ((g * xhat).sum(dim=d).reshape(shape), "that is ∂L/∂γ (Σ g·x̂); ∂L/∂β = Σ g."),
            (g.mean(dim=d).reshape(shape), "a mean where a sum belongs: ∂L/∂β = Σ g over every element β shifts."),
        ]
    return closest_explanation(candidates, got, exact)
