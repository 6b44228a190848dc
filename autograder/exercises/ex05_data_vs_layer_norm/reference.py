"""The reference of exercise 05: scikit-learn's ``StandardScaler``, computed with torch.

One statistic per index of axis 1, over every other axis; the population variance (ddof=0);
scale 1 for a feature whose training values are all equal.  ``tests/test_data_norm_checks.py``
asserts that it equals ``StandardScaler`` on every configuration :mod:`autograder.exercises.ex05_data_vs_layer_norm.checks`
uses (images: on the data permuted to (N·H·W, C)).  scikit-learn itself is not imported: the
clean re-check imports every module of this package for every assignment, and importing
``sklearn.preprocessing`` costs about half as much as importing torch; torch's functions are in
the integrity baseline already.

Computed in float64 (:func:`exact_statistics`) it is what the checks judge against, and what
the hints of :mod:`autograder.exercises.ex05_data_vs_layer_norm.hints` start from.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

F64 = torch.float64


def reduce_dims(ndim: int) -> list[int]:
    """Every axis except the feature/channel axis 1."""
    return [0] + list(range(2, ndim))


def view(v: torch.Tensor, ndim: int) -> torch.Tensor:
    """(C,) -> (1, C, 1, ...), to broadcast against data with ``ndim`` dimensions."""
    return v.reshape([1, -1] + [1] * (ndim - 2))


@dataclass
class Statistics:
    """StandardScaler's fitted statistics: one value per feature (channel)."""

    mean: torch.Tensor
    var: torch.Tensor
    scale: torch.Tensor
    constant: torch.Tensor  # bool: all training values of the feature are equal

    def get(self, name: str) -> torch.Tensor:
        return {"mean_": self.mean, "var_": self.var, "scale_": self.scale}[name]


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


def f64(t: torch.Tensor) -> torch.Tensor:
    """``t`` detached, in float64 on the CPU."""
    return t.detach().to("cpu", F64)


class FittedStandardizer:
    """What ``as_batch_norm`` receives in Part 4: a standardizer's fitted attributes, set from the
    reference, so that Part 4 does not depend on the student's Parts 1-3."""

    def __init__(self, x: torch.Tensor) -> None:
        exact = exact_statistics(x)
        self.mean_ = exact.mean.to(x.dtype).to(x.device)
        self.var_ = exact.var.to(x.dtype).to(x.device)
        self.scale_ = exact.scale.to(x.dtype).to(x.device)
        self.ndim_ = x.dim()

    def __repr__(self) -> str:
        return f"FittedStandardizer(ndim_={self.ndim_}, {self.mean_.numel()} features, {self.mean_.dtype}, {self.mean_.device})"
