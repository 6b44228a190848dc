"""Misconceptions about the ``Standardizer`` of exercise 05, recognised from the difference a
check of :mod:`autograder.exercises.ex05_data_vs_layer_norm.checks` finds.

Each hint recomputes, in float64, what a standardizer with one specific misconception would have
produced from the same data and fitted statistics (or reads the shape of a statistic, or the
buffers of the returned BatchNorm), and names that misconception when the student's value
matches; otherwise it restates the rule.  :func:`broadcast_hint` and :func:`attribute_hint`
explain an exception the student's code raised instead (a :class:`~autograder.core.wire.RemoteError`),
or return ``None``.  Every value here is plain data: copies the student's side reported.

The hints about ``transform`` and ``inverse_transform`` hold both formulas, so they are the
grader's alone (:mod:`autograder.exercises.ex05_data_vs_layer_norm.hidden_reference`).
"""
from __future__ import annotations

import math

import torch

from autograder.core.messages import shape_str
from autograder.core.numerics import matches
from autograder.exercises.ex05_data_vs_layer_norm.reference import F64, Statistics, f64, reduce_dims, view
from autograder.core.wire import RemoteError


# --- Part 1: the fitted statistics ------------------------------------------------------------

def shape_hint(shape: tuple[int, ...], x: torch.Tensor) -> str:
    n, c = x.shape[0], x.shape[1]
    dims = tuple(reduce_dims(x.dim()))
    if shape == ():
        return f"you reduced over all values at once; reduce over dims {dims} only, keeping axis 1."
    if x.dim() == 2 and shape == (n,):
        return "you reduced over dim 1 (the features of each sample); statistics of a feature are over the samples, dim 0."
    if x.dim() > 2 and shape == tuple(x.shape[1:]):
        return (
            "one value per channel *and pixel*: you reduced over dim 0 only, as for (N, D) features. "
            f"A channel's statistics are over the batch and both spatial axes, dims {dims}."
        )
    if x.dim() > 2 and shape == (n,):
        return f"one value per sample (over dims 1, 2, 3, as LayerNorm does); per-channel statistics reduce over dims {dims}."
    if x.dim() > 2 and shape == (n, c):
        return f"one value per sample and channel (over H and W, as InstanceNorm does); reduce over the batch too, dims {dims}."
    if math.prod(shape) == c:
        return f"keep the shape ({c},), as StandardScaler does (no keepdim); reshape to {shape_str(view(torch.zeros(c), x.dim()).shape)} where you broadcast."
    return f"reduce over every dimension except the channel axis 1, i.e. dims {dims}."


def _unbiased_factor(x: torch.Tensor) -> tuple[int, float]:
    n = x.numel() // x.shape[1]
    return n, (n / (n - 1) if n > 1 else float("nan"))


def _by_reshape(x64: torch.Tensor, exact_statistics) -> Statistics:
    """The statistics of ``x.reshape(-1, C)``: channels mixed, for data with more than 2 dims."""
    return exact_statistics(x64.reshape(-1, x64.shape[1]))


def _large_mean(exact: Statistics) -> bool:
    return bool((exact.mean.abs() > 100 * exact.var.sqrt()).any())


def statistic_hint(name: str, value: torch.Tensor, x: torch.Tensor, exact: Statistics, exact_statistics) -> str:
    """``exact_statistics``: the reference's (:func:`autograder.exercises.ex05_data_vs_layer_norm.reference.grader_only`,
    or scikit-learn's), for the statistics of data reshaped the wrong way."""
    x64, v = f64(x), f64(value)
    dims = tuple(reduce_dims(x.dim()))
    n, factor = _unbiased_factor(x)
    varying = ~exact.constant
    if x.dim() > 2:
        mixed = _by_reshape(x64, exact_statistics)
        if matches(mixed.get(name), v, exact.get(name)):
            return (
                "x.reshape(-1, C) on (N, C, H, W) data mixes the channels (its rows are not pixels). "
                f"Move the channel axis last first, x.permute(0, 2, 3, 1).reshape(-1, C), or reduce over dims {dims}."
            )
    if name == "var_":
        if n > 1 and matches(exact.var * factor, v, exact.var):
            return (
                f"var_ is n/(n − 1) = {factor:.4g} times too large: that is the unbiased variance "
                f"(÷ (n − 1) = {n - 1}). StandardScaler uses the population variance (÷ n = {n}, ddof=0): "
                "pass correction=0 (unbiased=False)."
            )
        if matches(exact.var.sqrt(), v, exact.var):
            return "var_ holds the standard deviation; var_ is the variance σ² and scale_ is σ."
    if name == "scale_":
        if n > 1 and matches(torch.where(varying, exact.scale * math.sqrt(factor), exact.scale), v, exact.scale):
            return (
                f"scale_ is off by a factor √(n/(n − 1)) = {math.sqrt(factor):.4g}: that is the unbiased "
                f"standard deviation (÷ (n − 1) = {n - 1}). StandardScaler divides by n = {n} (ddof=0): "
                "pass correction=0 (unbiased=False)."
            )
        if matches(torch.where(varying, exact.var, exact.scale), v, exact.scale):
            return "scale_ holds the variance; it is the standard deviation √var_."
        if bool(varying.any()) and bool(torch.isfinite(v).all()):
            inside = (v**2 - exact.var)[varying]
            outside = (v - exact.var.sqrt())[varying]
            for implied, formula in ((inside, "√(var_ + ε)"), (outside, "√var_ + ε")):
                if bool((implied > 0).all()) and float(implied.max()) <= 1.05 * float(implied.min()):
                    return (
                        f"scale_ = {formula} with ε ≈ {float(implied.mean()):.1g}. StandardScaler adds no ε: "
                        "scale_ is √var_, and 1 for a feature whose training values are all equal "
                        "(that is how it avoids dividing by zero)."
                    )
    if name != "mean_" and x.dtype != F64 and _large_mean(exact):
        return (
            f"your {str(x.dtype).replace('torch.', '')} {name} is inaccurate for data whose mean is large "
            f"compared with its spread: E[x²] − E[x]² cancels catastrophically. Subtract the mean before "
            "squaring (two passes), or compute the statistics in float64 and convert back."
        )
    return {
        "mean_": f"mean_[c] is the mean of all values of feature (channel) c, over dims {dims}.",
        "var_": f"var_ is the population variance, the mean of (x − mean_)² over dims {dims} (÷ n, ddof=0).",
        "scale_": "scale_ is √var_, and 1 for a feature whose training values are all equal.",
    }[name]


# --- Parts 2 and 3: transform, inverse_transform, constant features ---------------------------

def broadcast_hint(x: torch.Tensor):
    def hint(error: Exception) -> str | None:
        if x.dim() > 2 and "must match the size" in str(error):
            return (
                "mean_ and scale_ have shape (C,), which broadcasts against the last axis of "
                "(N, C, H, W) data; reshape them to (1, C, 1, 1) first."
            )
        return None
    return hint


def constant_hint(scale: float, var: float, j: int, training_value: float) -> str:
    if scale == 0.0:
        return (
            f"scale_ is 0 for feature {j}, whose training values are all {training_value:g}: transform would "
            "divide 0 by 0 (NaN). StandardScaler gives a feature that does not vary scale 1."
        )
    if not math.isfinite(scale):
        return f"scale_ is {scale} for feature {j}, whose training values are all {training_value:g}; StandardScaler uses scale 1 there."
    if var > 0 and abs(scale * scale - var) <= 1e-3 * var and scale < 1e-3 * max(1.0, abs(training_value)):
        return (
            f"feature {j} has all training values equal ({training_value:g}), but its computed variance is "
            f"{var:.2g}, a rounding error (the mean of equal numbers can be off in the last bit), so a test "
            "`var == 0` misses it. Decide 'constant' by comparing values, x.amax(dims) == x.amin(dims), "
            "and use scale 1 there."
        )
    if 0.0 < scale < 0.1 and var == 0.0:
        return (
            f"scale_ is {scale:.3g} = √{scale * scale:.1g} for feature {j}, whose training values are all "
            f"{training_value:g}: adding ε avoids the division by zero, but StandardScaler's rule is scale 1 "
            "for a constant feature and exactly √var_ for the others."
        )
    return f"feature {j} is constant in the training data (all {training_value:g}); StandardScaler gives it scale 1."


# --- Part 4: the standardizer as a frozen BatchNorm -------------------------------------------

def attribute_hint(error: RemoteError) -> str | None:
    if error.is_a(AttributeError):
        return "as_batch_norm may use only the fitted attributes mean_, var_, scale_ and ndim_ of the standardizer it receives."
    return None


def batch_norm_hint(layer: dict, fitted) -> str:
    """``fitted``: the grader's fitted statistics (``mean_``, ``var_``, ``scale_``); ``layer``: the returned BatchNorm's ``running_mean``, ``running_var``, ``weight`` and
    ``bias`` (tensors, or None) and its ``eps`` (a float), as its side reported them."""
    mean, var, scale = f64(fitted.mean_), f64(fitted.var_), f64(fitted.scale_)
    rm, rv, eps = f64(layer["running_mean"]), f64(layer["running_var"]), float(layer["eps"])
    w = f64(layer["weight"]) if layer["weight"] is not None else torch.ones_like(mean)
    b = f64(layer["bias"]) if layer["bias"] is not None else torch.zeros_like(mean)

    def close(a, target):
        return bool(((a - target).abs() <= 1e-5 * (1 + target.abs())).all())

    bad = (rv + eps <= 0).nonzero()
    if len(bad):
        j = int(bad[0])
        constant = " (a constant feature, var_ = 0)" if float(var[j]) == 0 else ""
        return (
            f"running_var + eps is {float(rv[j] + eps):.3g} for feature {j}{constant}, and BatchNorm divides by "
            "√(running_var + eps). Make running_var + eps equal scale_², which is 1 for a constant feature."
        )
    if close(w, torch.ones_like(w)) and close(b, torch.zeros_like(b)) and close(rm, mean):
        if eps > 0 and (close(rv, scale**2) or close(rv, var)):
            return (
                f"BatchNorm divides by √(running_var + eps) with eps = {eps:g}, not by √running_var. Build it with "
                "eps=0 and running_var = scale_², or keep eps and store running_var = scale_² − eps."
            )
        if close(rv, scale):
            return "running_var holds scale_, a standard deviation; BatchNorm expects a variance, scale_²."
    if not close(rm, mean) and close(w, torch.ones_like(w)):
        return "running_mean must be mean_."
    return (
        "in eval mode BatchNorm computes (x − running_mean) / √(running_var + eps) · weight + bias; choose "
        "them so that this is (x − mean_) / scale_: running_mean = mean_, running_var + eps = scale_², "
        "weight = 1, bias = 0 (or affine=False)."
    )
