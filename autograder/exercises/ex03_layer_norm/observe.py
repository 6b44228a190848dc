"""Drive the student's SigLIP vision encoder (exercise 3, part 3) and report what it did.

Like :mod:`autograder.sandbox.observe`, every function runs where the student's code runs, takes
the student's objects and plain values, and returns plain data: the encoder itself goes back as
a handle, an exception of the student's code as a :class:`~autograder.core.wire.RemoteError`.  The
verdicts (how many LayerNorms, which eps, how far the output is from Hugging Face's) are
reached by :mod:`autograder.exercises.ex03_layer_norm.checks`, on the trusted side.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from autograder.exercises.ex03_layer_norm import siglip_reference
from autograder.sandbox.observe import _ops, _plain_tensor, _recording
from autograder.core.wire import RemoteError

F64 = torch.float64


def _not_a_tensor(value) -> RemoteError:
    return RemoteError.of(TypeError(f"forward returned {type(value).__name__}, not a Tensor"))


def _eps_report(module) -> dict:
    """``{"value": eps}`` when the attribute is a plain number (or missing: ``None``), else its repr."""
    eps = getattr(module, "eps", None)
    if eps is None or type(eps) in (bool, int, float):
        return {"value": eps}
    return {"repr": repr(eps)[:200]}


def build(cls, layer_norm_cls, fields: dict) -> dict:
    """``cls(config)`` for the configuration with these ``fields`` (the config is built here,
    from plain data), and the instances of ``layer_norm_cls`` among its submodules, each with its ``eps``.

    Returns ``{"error": RemoteError}`` when building raised, else ``{"model": the encoder (a
    handle), "is_module": bool, "layer_norms": [[submodule name, eps report], ...]}``; the list
    is a ``RemoteError`` when looking through the submodules raised.
    """
    config = siglip_reference.SiglipVisionConfig(**fields)
    try:
        model = cls(config)
    except Exception as error:  # noqa: BLE001 - the student's exception is the observation
        return {"error": RemoteError.of(error)}
    if not isinstance(model, nn.Module):
        return {"model": model, "is_module": False, "layer_norms": []}
    try:
        norms = [[str(n), _eps_report(m)] for n, m in model.named_modules() if isinstance(m, layer_norm_cls)]
    except Exception as error:  # noqa: BLE001
        norms = RemoteError.of(error)
    return {"model": model, "is_module": True, "layer_norms": norms}


def load_weights(model, device, weights: dict) -> dict:
    """``model.to(device, float64)``, then ``load_state_dict(weights, strict=False)`` on what
    ``to`` returned, then ``eval()``.

    Returns ``{"model": the evaluated encoder (a handle), "missing": [...], "unexpected": [...]}``
    or ``{"error": RemoteError}``.
    """
    try:
        model = model.to(device=device, dtype=F64)
        result = model.load_state_dict({k: v.to(device) for k, v in weights.items()}, strict=False)
        missing = [str(k) for k in result.missing_keys]
        unexpected = [str(k) for k in result.unexpected_keys]
        model = model.eval()
    except Exception as error:  # noqa: BLE001
        return {"error": RemoteError.of(error)}
    return {"model": model, "missing": missing, "unexpected": unexpected}


def forward(model, pixel_values: torch.Tensor, device) -> dict:
    """``model(pixel_values)`` under ``torch.no_grad()`` with the op recorder on.

    Returns ``{"error": RemoteError}`` when it raised, else ``{"output": a plain tensor, or
    None with "type": the type name of what came back, "normalization_ops": [...]}``.
    """
    pixels = pixel_values.to(device, F64)
    recorder = _recording(True)
    try:
        with recorder, torch.no_grad():
            out = model(pixels.clone())
    except Exception as error:  # noqa: BLE001
        return {"error": RemoteError.of(error)}
    if isinstance(out, torch.Tensor):
        return {"output": _plain_tensor(out), "type": "Tensor", "normalization_ops": _ops(recorder)}
    return {"output": None, "type": type(out).__name__, "normalization_ops": _ops(recorder)}


class _ReferenceLayerNorm(nn.Module):
    """The grader's stand-in for the student's LayerNorm: over the last dimension,
    ``y = (h − μ) / sqrt(σ² + ε) · weight + bias`` with the biased σ², from primitives."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor, eps: float):
        super().__init__()
        self.weight, self.bias, self.eps = weight, bias, eps

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        mean = h.mean(-1, keepdim=True)
        var = (h - mean).pow(2).mean(-1, keepdim=True)
        return (h - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


def _with_reference_norms(model, layer_norm_cls, eps: float):
    """A copy of ``model`` in which every instance of ``layer_norm_cls`` is replaced by a
    :class:`_ReferenceLayerNorm` holding that instance's loaded ``weight`` and ``bias``."""
    model = copy.deepcopy(model)
    for name, module in list(model.named_modules()):
        if not name or not isinstance(module, layer_norm_cls):
            continue
        weight, bias = getattr(module, "weight", None), getattr(module, "bias", None)
        if not isinstance(weight, torch.Tensor) or not isinstance(bias, torch.Tensor):
            raise TypeError(f"`{name}` has no weight and bias tensors to hand to a reference LayerNorm")
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, _ReferenceLayerNorm(weight.detach().clone(), bias.detach().clone(), eps))
    return model


def forward_with_reference_norms(model, layer_norm_cls, eps: float, pixel_values: torch.Tensor, device) -> dict:
    """As :func:`forward`, on a copy of ``model`` whose LayerNorms (the instances of
    ``layer_norm_cls``) are :class:`_ReferenceLayerNorm`: the student's wiring with a correct
    LayerNorm, so that a LayerNorm bug is charged to the LayerNorm parts only."""
    try:
        swapped = _with_reference_norms(model, layer_norm_cls, eps)
    except Exception as error:  # noqa: BLE001
        return {"error": RemoteError.of(error)}
    return forward(swapped, pixel_values, device)


def layer_norm_alone(cls, hidden_size: int, eps: float, device, x: torch.Tensor, weight: torch.Tensor,
                     bias: torch.Tensor) -> dict:
    """``cls(hidden_size, eps=eps, device=device, dtype=float64)``, holding ``weight`` and ``bias``
    (not ones and zeros, so that a bug in the affine step shows), applied to ``x`` under
    ``torch.no_grad()``: ``{"output": plain tensor}`` or ``{"error": RemoteError}`` (a forward that
    returns no tensor counts as a ``TypeError``)."""
    try:
        layer = cls(hidden_size, eps=eps, device=device, dtype=F64)
        with torch.no_grad():
            layer.weight.copy_(weight.to(device, F64))
            layer.bias.copy_(bias.to(device, F64))
            out = layer(x.to(device, F64))
        if not isinstance(out, torch.Tensor):
            return {"error": _not_a_tensor(out)}
        return {"output": _plain_tensor(out)}
    except Exception as error:  # noqa: BLE001
        return {"error": RemoteError.of(error)}
