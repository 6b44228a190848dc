"""The backward pass of a normalization, closed form, and the classic wrong versions of it.

With x̂ = (x − μ)/σ, σ = sqrt(σ² + ε) over the m elements of one statistic, y = γ·x̂ + β and
upstream gradient g = ∂L/∂y, write ĝ = γ·g (= ∂L/∂x̂). Then

    ∂L/∂x = (1/σ) · (ĝ − mean(ĝ) − x̂ · mean(ĝ · x̂)),    ∂L/∂γ = Σ g·x̂,    ∂L/∂β = Σ g,

the means over the statistic's elements, the sums over everything γ is shared across. For
BatchNorm the statistic's elements are a channel's values (dims 0, 2, 3, ...) and γ is per
channel; for LayerNorm they are one sample's trailing dims and γ is per trailing element. Both
are the same function with other axes (:class:`Axes`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


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
