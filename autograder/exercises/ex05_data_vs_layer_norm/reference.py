"""The reference of exercise 05, scikit-learn's ``StandardScaler``, as the checks reach it.

One statistic per index of axis 1, over every other axis; the population variance (ddof=0);
scale 1 for a feature whose training values are all equal.

The grader computes it with torch, in float64, in
:mod:`autograder.exercises.ex05_data_vs_layer_norm.hidden_reference`, together with the hints
built on it.  That code is the ``Standardizer``'s solution, so only the grader holds it (no
student file has "hidden" in its path: :mod:`autograder.grading.parts`); the checks reach it
through :func:`grader_only`.  Where it is missing, in the student's install, the visible checks
ask scikit-learn itself (the functions below), which every student environment has.  A
``Standardizer`` that calls scikit-learn fails every part anyway: it takes the data out of torch.
scikit-learn is imported only then: the clean re-check, which imports every module of this
package, does not pay for it (about half of importing torch).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

import torch

F64 = torch.float64


def reduce_dims(ndim: int) -> list[int]:
    """Every axis except the feature/channel axis 1."""
    return [0] + list(range(2, ndim))


def view(v: torch.Tensor, ndim: int) -> torch.Tensor:
    """(C,) -> (1, C, 1, ...), to broadcast against data with ``ndim`` dimensions."""
    return v.reshape([1, -1] + [1] * (ndim - 2))


def f64(t: torch.Tensor) -> torch.Tensor:
    """``t`` detached, in float64 on the CPU."""
    return t.detach().to("cpu", F64)


@dataclass
class Statistics:
    """StandardScaler's fitted statistics: one value per feature (channel)."""

    mean: torch.Tensor
    var: torch.Tensor
    scale: torch.Tensor
    constant: torch.Tensor  # bool: all training values of the feature are equal

    def get(self, name: str) -> torch.Tensor:
        return {"mean_": self.mean, "var_": self.var, "scale_": self.scale}[name]


def grader_only():
    """The grader's reference and hints (``hidden_reference``), or None where they are missing:
    the student's install and the sandbox."""
    name = f"{__package__}.hidden_reference"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name != name:
            raise
        return None


# --- the student's install: scikit-learn itself -----------------------------------------------

def _table(x: torch.Tensor):
    """(N, D) as it is; (N, C, H, W) as (N·H·W, C): every pixel a sample, every channel a
    feature. A float64 numpy array."""
    return f64(x).movedim(1, -1).reshape(-1, x.shape[1]).numpy()


def _as_data(table, like: torch.Tensor) -> torch.Tensor:
    """A (rows, C) table back in the layout of ``like``, float64 on the CPU."""
    n, c, *spatial = like.shape
    return torch.from_numpy(table).to(F64).reshape([n, *spatial, c]).movedim(-1, 1)


def _scaler(mean: torch.Tensor, scale: torch.Tensor):
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler()
    scaler.mean_, scaler.scale_ = f64(mean).numpy(), f64(scale).numpy()
    scaler.var_ = scaler.scale_ ** 2
    scaler.n_features_in_ = scaler.mean_.shape[0]
    return scaler


def exact_statistics(x: torch.Tensor) -> Statistics:
    """StandardScaler's statistics of ``x`` in float64 on the CPU."""
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(_table(x))
    mean, var, scale = (torch.from_numpy(a).to(F64) for a in (scaler.mean_, scaler.var_, scaler.scale_))
    return Statistics(mean, var, scale, (scale == 1.0) & (var != 1.0))


def statistics(x: torch.Tensor) -> Statistics:
    """:func:`exact_statistics` in ``x``'s dtype and on its device."""
    exact = exact_statistics(x)
    return Statistics(*(t.to(x.device, x.dtype) for t in (exact.mean, exact.var, exact.scale)),
                      exact.constant.to(x.device))


def standardized(x: torch.Tensor, mean: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``StandardScaler.transform`` with these statistics, in ``x``'s dtype and on its device."""
    return _as_data(_scaler(mean, scale).transform(_table(x)), x).to(x.device, x.dtype)


def inverse(z: torch.Tensor, mean: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``StandardScaler.inverse_transform`` with these statistics, in ``z``'s dtype and on its device."""
    return _as_data(_scaler(mean, scale).inverse_transform(_table(z)), z).to(z.device, z.dtype)
