"""The standardization formula and its common misreadings, shared by the hints of every chapter.

    x̂ = (x − μ) / sqrt(σ² + ε),   μ, σ² the mean and *biased* variance over ``dims``.

Each misreading below is what a student's layer would output with one specific misconception;
the chapter hints compare the student's output with them (:func:`autograder.core.numerics.closest_explanation`).
"""
from __future__ import annotations

import math

import torch


def standardize(x: torch.Tensor, dims, eps: float, correction: int = 0, eps_inside: bool = True) -> torch.Tensor:
    """(x − mean) / sqrt(var + eps) over ``dims`` (or / (std + eps) with ``eps_inside=False``)."""
    dims = tuple(dims)
    mean = x.mean(dims, keepdim=True)
    var = x.var(dims, correction=correction, keepdim=True)
    return (x - mean) / ((var + eps).sqrt() if eps_inside else var.sqrt() + eps)


def count(x: torch.Tensor, dims) -> int:
    """How many values one statistic averages over."""
    return math.prod(x.shape[d] for d in dims)


def statistic_misreadings(x: torch.Tensor, dims, eps: float, default_eps: float = 1e-5) -> list[tuple[torch.Tensor, str]]:
    """(output, explanation) for the misconceptions about the statistics themselves."""
    n = count(x, dims)
    found = [
        (standardize(x, dims, eps, eps_inside=False),
         "ε belongs inside the square root: (x − μ) / sqrt(σ² + ε), not (x − μ) / (sqrt(σ²) + ε)."),
        (standardize(x, dims, 0.0), "ε is missing: divide by sqrt(σ² + ε)."),
    ]
    if n > 1:
        found.insert(0, (
            standardize(x, dims, eps, correction=1),
            f"you normalize with the unbiased variance (÷ (n − 1) = {n - 1}); normalization layers use "
            f"the biased one (÷ n = {n}): unbiased=False / correction=0.",
        ))
    if eps != default_eps:
        found.append((standardize(x, dims, default_eps), f"you use ε = {default_eps:g} instead of the layer's `eps` ({eps:g})."))
    return found


def one_pass_is_inaccurate(x: torch.Tensor, dims, dtype: torch.dtype) -> bool:
    """Whether E[x²] − E[x]² in ``dtype`` would be far off here: low precision and |mean| ≫ std."""
    if dtype == torch.float64:
        return False
    mean = x.mean(tuple(dims)).abs()
    std = x.std(tuple(dims), correction=0)
    return bool((mean > 100 * std).any())


ONE_PASS_ADVICE = (
    "your low-precision result is inaccurate for inputs with a large mean: E[x²] − E[x]² cancels "
    "catastrophically. Subtract the mean before squaring (two passes), or compute the statistics in float64."
)
