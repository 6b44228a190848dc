"""The reference of exercise 05: scikit-learn's ``StandardScaler``, computed with torch, and the
hints about ``transform`` and ``inverse_transform`` built on it. Grader only.

This is the ``Standardizer``'s solution: only the grader holds it (:mod:`autograder.grading.parts`),
and the checks reach it through :func:`autograder.exercises.ex05_data_vs_layer_norm.reference.grader_only`;
in the student's install they ask scikit-learn instead.

One statistic per index of axis 1, over every other axis; the population variance (ddof=0);
scale 1 for a feature whose training values are all equal.  ``tests/test_data_norm_checks.py``
asserts that it equals ``StandardScaler`` on every configuration :mod:`autograder.exercises.ex05_data_vs_layer_norm.checks`
uses (images: on the data permuted to (N·H·W, C)).  scikit-learn itself is not imported: the
clean re-check imports every module of this package for every assignment, and importing
``sklearn.preprocessing`` costs about half as much as importing torch; torch's functions are in
the integrity baseline already.

Computed in float64 (:func:`exact_statistics`) it is what the checks judge against, and what
the hints start from.
"""
from __future__ import annotations

import torch

from autograder.core.numerics import matches
from autograder.exercises.ex05_data_vs_layer_norm.reference import F64, Statistics, f64, reduce_dims, view


def statistics(x: torch.Tensor) -> Statistics:
    """StandardScaler's statistics of ``x``, in ``x``'s dtype and on its device."""
    dims = reduce_dims(x.dim())
    var, mean = torch.var_mean(x, dim=dims, correction=0)
    constant = x.amax(dim=dims) == x.amin(dim=dims)
    scale = torch.where(constant, torch.ones_like(var), var.sqrt())
    return Statistics(mean, var, scale, constant)


def exact_statistics(x: torch.Tensor) -> Statistics:
    """:func:`statistics` of ``x`` in float64 on the CPU: what results are judged against."""
    return statistics(x.detach().to("cpu", F64))


def standardized(x: torch.Tensor, mean: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``transform``: (x − mean) / scale, per feature (channel)."""
    return (x - view(mean, x.dim())) / view(scale, x.dim())


def inverse(z: torch.Tensor, mean: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``inverse_transform``: z · scale + mean, per feature (channel)."""
    return z * view(scale, z.dim()) + view(mean, z.dim())


# --- hints about transform and inverse_transform (they hold both formulas) ---------------------

def transform_hint(out: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor,
                   scale: torch.Tensor, exact_out: torch.Tensor) -> str:
    x64 = f64(x)
    own = exact_statistics(x)
    nd = x.dim()
    candidates = [
        (standardized(x64, own.mean, own.scale),
         "transform standardized the new data with *its own* mean and spread. transform must reuse "
         "the statistics fit stored (mean_, scale_): statistics computed on validation or test data "
         "leak them into the model, and a single sample would always become 0."),
        ((x64 - view(mean, nd)) / view(var, nd), "transform divides by var_; divide by scale_ (the standard deviation)."),
        ((x64 - view(mean, nd)) / view(var.sqrt(), nd),
         "transform divides by √var_, which is 0 for a constant feature; divide by scale_ (1 there)."),
        ((x64 - view(mean, nd)) * view(scale, nd), "transform multiplies by scale_; standardizing divides by it."),
        (x64 / view(scale, nd), "transform forgot to subtract mean_."),
        (x64 - view(mean, nd), "transform forgot to divide by scale_."),
        (x64 * view(scale, nd) + view(mean, nd), "transform computes the inverse, z · scale_ + mean_."),
    ]
    if nd > 2 and x.shape[-1] == x.shape[1]:
        last = [1] * (nd - 1) + [-1]
        candidates.append((
            (x64 - mean.reshape(last)) / scale.reshape(last),
            "mean_ and scale_ of shape (C,) broadcast against the *last* axis (W) of (N, C, H, W) data; "
            "reshape them to (1, C, 1, 1) first.",
        ))
    return _closest(candidates, out, exact_out) or "transform(x) is (x − mean_) / scale_, per feature (channel), with the fitted statistics."


def inverse_hint(out: torch.Tensor, z: torch.Tensor, mean: torch.Tensor, var: torch.Tensor,
                 scale: torch.Tensor, exact_out: torch.Tensor) -> str:
    z64 = f64(z)
    nd = z.dim()
    m, s = view(mean, nd), view(scale, nd)
    own = exact_statistics(z)
    candidates = [
        (z64 * s, "inverse_transform forgot to add mean_ back."),
        (z64 / s + m, "inverse_transform divides by scale_; undoing a division multiplies."),
        ((z64 + m) * s, "inverse_transform adds mean_ before multiplying; multiply by scale_ first, then add mean_."),
        (z64 * view(var, nd) + m, "inverse_transform multiplies by var_; multiply by scale_ (1 for a constant feature)."),
        (z64 * s - m, "inverse_transform subtracts mean_; it must add it back."),
        ((z64 - m) / s, "inverse_transform applies the forward transform (x − mean_) / scale_."),
        (z64 * view(own.scale, nd) + view(own.mean, nd),
         "inverse_transform used statistics of its own input; use the fitted mean_ and scale_."),
    ]
    return _closest(candidates, out, exact_out) or "inverse_transform(z) is z · scale_ + mean_, per feature (channel)."


def _closest(candidates, out: torch.Tensor, exact_out: torch.Tensor) -> str | None:
    best, best_distance = None, float("inf")
    s = f64(out)
    for value, explanation in candidates:
        if value.shape == s.shape and matches(value, out, exact_out):
            distance = float((value - s).abs().max())
            if distance < best_distance:
                best, best_distance = explanation, distance
    return best
