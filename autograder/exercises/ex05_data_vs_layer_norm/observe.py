"""Drive the student's ``Standardizer`` and ``as_batch_norm`` (exercise 05) and report what they
did, as plain data.

:mod:`autograder.exercises.ex05_data_vs_layer_norm.checks` asks for these observations through
:class:`autograder.core.side.Student`; it never touches the student's objects.  What the grader cannot
see from copies is measured here: whether a call took the data out of torch (numpy,
scikit-learn, Python lists), changed a tensor argument in place, returned the standardizer
itself, and whether a layer's tensors share memory with the standardizer's statistics.
Nothing here decides a verdict: the student's exceptions come back as
:class:`~autograder.core.wire.RemoteError` values.
"""
from __future__ import annotations

import contextlib

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from autograder.core import wire
from autograder.core.wire import RemoteError

STATISTICS = ("mean_", "var_", "scale_")
FITTED = STATISTICS + ("ndim_",)
# Tensor methods through which data leaves torch (for numpy, scikit-learn or Python lists).
CONVERSIONS = ("numpy", "__array__", "tolist", "__dlpack__")
BATCH_NORMS = {"BatchNorm1d": nn.BatchNorm1d, "BatchNorm2d": nn.BatchNorm2d}
LAYER_TENSORS = ("running_mean", "running_var", "weight", "bias")
CROSSING_DTYPES = set(wire.DTYPES.values())


class ConversionRecorder(TorchFunctionMode):
    """Records the tensor methods through which data leaves torch while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.found: set[str] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in CONVERSIONS:
            self.found.add(name)
        return func(*args, **(kwargs or {}))


class Held:
    """A tensor the student's code received, kept here so that a later observation can change it
    (it crosses as a handle)."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


# --- describing values ----------------------------------------------------------------------

def _text(value, limit: int = 200) -> str:
    try:
        return str(value)[:limit]
    except Exception:  # noqa: BLE001 - a student's __str__ or __repr__ may raise
        return "<unprintable>"


def describe(value, shown: bool = False) -> dict:
    """A value as the checks need it: its type's name and top-level module; for a tensor also its
    shape, dtype and device (as text) and a plain copy (when its dtype can cross); with ``shown``
    also the repr of anything else, and its value when it is a Python int."""
    kind = type(value)
    found = {"type": _text(kind.__name__), "module": _text(kind.__module__).split(".")[0]}
    if isinstance(value, torch.Tensor):
        found.update(shape=tuple(int(s) for s in value.shape), dtype=str(value.dtype), device=str(value.device))
        if value.dtype in CROSSING_DTYPES:
            found["tensor"] = torch.Tensor.as_subclass(value, torch.Tensor).detach().clone()
    elif shown:
        try:
            found["repr"] = _text(repr(value))
        except Exception:  # noqa: BLE001
            found["repr"] = "<unprintable>"
        if isinstance(value, int) and not isinstance(value, bool):
            found["int"] = int.__index__(value)
    return found


def _read(obj, name: str) -> dict:
    """``getattr(obj, name)`` described; ``{"missing": True}`` for an AttributeError, the error
    for any other exception (a property of the student's that raises)."""
    try:
        value = getattr(obj, name)
    except AttributeError:
        return {"missing": True}
    except Exception as error:  # noqa: BLE001 - the student's exception is the observation
        return {"error": RemoteError.of(error)}
    return describe(value, shown=True)


# --- calling the student's code ---------------------------------------------------------------

def _run(function, args: tuple, target=None, method: str | None = None, no_grad: bool = False,
         hold: bool = False) -> dict:
    """``function(*args)`` (or ``target.<method>(*args)``) while recording conversions out of
    torch.  Reports its error or result (described; ``module``: a result that is an nn.Module,
    as a handle), the conversions, whether it returned ``target`` itself and which tensor
    arguments it changed in place; with ``hold``, the arguments as :class:`Held` handles."""
    kept = [a.detach().clone() if isinstance(a, torch.Tensor) else None for a in args]
    recorder = ConversionRecorder()
    error = result = None
    try:
        if method is not None:
            function = getattr(target, method)
        with recorder, torch.no_grad() if no_grad else contextlib.nullcontext():
            result = function(*args)
    except Exception as e:  # noqa: BLE001 - the student's exception is the observation
        error = RemoteError.of(e)
    changed = [k is not None and not (a.shape == k.shape and torch.equal(a.detach(), k)) for a, k in zip(args, kept)]
    report = {
        "error": error,
        "conversions": sorted(recorder.found),
        "value": None if error is not None else describe(result),
        "returned_self": error is None and target is not None and result is target,
        "module": result if error is None and isinstance(result, nn.Module) else None,
        "inputs_changed": changed,
    }
    if hold:
        report["held"] = [Held(a) for a in args]
    return report


def call(function, *args, no_grad: bool = False) -> dict:
    """``function(*args)`` (a layer's forward too; under ``torch.no_grad()`` with ``no_grad``):
    the report of :func:`_run`."""
    return _run(function, args, no_grad=no_grad)


def method(obj, name: str, *args, hold: bool = False) -> dict:
    """``obj.<name>(*args)`` (``fit``, ``transform``...): the report of :func:`_run`, with
    ``returned_self``; with ``hold`` the arguments stay here, as handles (:func:`change_in_place`)."""
    return _run(None, args, target=obj, method=name, hold=hold)


def change_in_place(held: Held) -> None:
    """``x.mul_(-2).add_(7)`` on a tensor the student's code received (and may have kept)."""
    with torch.no_grad():
        held.tensor.mul_(-2.0).add_(7.0)


def fitted(standardizer) -> dict:
    """``mean_``, ``var_``, ``scale_`` and ``ndim_`` as the standardizer holds them (see :func:`_read`)."""
    return {name: _read(standardizer, name) for name in FITTED}


# --- as_batch_norm ----------------------------------------------------------------------------

class FittedStandardizer:
    """What ``as_batch_norm`` receives in Part 4: a fitted standardizer's attributes as the grader
    sent them (plain tensors and an int), so that Part 4 does not depend on the student's Parts 1-3.
    Data only: it computes nothing."""

    def __init__(self, mean: torch.Tensor, var: torch.Tensor, scale: torch.Tensor, ndim: int) -> None:
        self.mean_, self.var_, self.scale_, self.ndim_ = mean, var, scale, ndim

    def __repr__(self) -> str:
        return f"FittedStandardizer(ndim_={self.ndim_}, {self.mean_.numel()} features, {self.mean_.dtype}, {self.mean_.device})"


def as_batch_norm(function, mean: torch.Tensor, var: torch.Tensor, scale: torch.Tensor, ndim: int) -> dict:
    """``function(standardizer)`` for a standardizer fitted by the grader: the report of
    :func:`_run`, plus ``fitted``, that standardizer (a handle, for :func:`fitted` and
    :func:`batch_norm_layer`)."""
    standardizer = FittedStandardizer(mean, var, scale, ndim)
    report = _run(function, (standardizer,))
    report["fitted"] = standardizer
    return report


def _shares_memory(a, b) -> bool:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.numel() == 0:
        return False
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def batch_norm_layer(layer, standardizer) -> dict:
    """What Part 4 checks of the layer ``as_batch_norm`` returned: its class (exactly which of
    torch's BatchNorm classes, which it is an instance of), whether its forward is replaced or
    hooked, its running statistics and affine tensors (described, ``None`` when None), and which
    of the standardizer's statistics each of those shares memory with."""
    cls = type(layer)
    statistics = {stat: getattr(standardizer, stat, None) for stat in STATISTICS}
    found = {
        "type": _text(cls.__name__),
        "qualname": _text(getattr(cls, "__qualname__", cls.__name__)),
        "exactly": next((name for name, torch_cls in BATCH_NORMS.items() if cls is torch_cls), None),
        "instance_of": [name for name, torch_cls in BATCH_NORMS.items() if isinstance(layer, torch_cls)],
        "replaced": bool("forward" in vars(layer) or getattr(layer, "_forward_hooks", None)
                         or getattr(layer, "_forward_pre_hooks", None)),
        "tensors": {},
        "shares_memory": {},
    }
    for name in LAYER_TENSORS:
        try:
            tensor = getattr(layer, name)
        except Exception:  # noqa: BLE001 - a deleted buffer: as good as None
            tensor = None
        found["tensors"][name] = None if tensor is None else describe(tensor)
        found["shares_memory"][name] = [stat for stat, t in statistics.items() if _shares_memory(tensor, t)]
    return found
