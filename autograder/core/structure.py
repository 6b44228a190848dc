"""Compare the *structure* of a student's layer with torch's: the contract ``load_state_dict``
and every user of ``torch.nn`` rely on.

Parameters and buffers must have torch's names, shapes, dtypes, devices, ``requires_grad`` and
initial values; those torch registers as ``None`` (``affine=False``, ``track_running_stats=False``)
must exist and be ``None``; ``state_dict`` keys, shapes and dtypes must agree, and a state dict
must load strictly in both directions.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from autograder.core import forbidden
from autograder.core.inputs import random_tensor
from autograder.core.messages import fail, shape_str
from autograder.core.side import Student, student
from autograder.core.wire import RemoteError

def _call(args, kwargs, device, dtype) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    if device is not None:
        parts.append(f"device={str(device)!r}")
    if dtype is not None:
        parts.append(f"dtype={dtype}")
    return ", ".join(parts)


def _registered(module: nn.Module) -> tuple[dict, dict, list, list]:
    """Parameters and buffers that are tensors, and the names registered as None."""
    params = {n: p for n, p in module._parameters.items() if p is not None}
    buffers = {n: b for n, b in module._buffers.items() if b is not None}
    none_params = [n for n, p in module._parameters.items() if p is None]
    none_buffers = [n for n, b in module._buffers.items() if b is None]
    return params, buffers, none_params, none_buffers


def _compare_tensors(kind: str, where: str, mine: dict, theirs: dict, advice: str) -> None:
    __tracebackhide__ = True
    missing = [n for n in theirs if n not in mine]
    extra = [n for n in mine if n not in theirs]
    if missing or extra:
        fail(
            f"{where}: torch has the {kind}s {sorted(theirs) or 'none'}, yours "
            f"{sorted(mine) or 'none'}" + (f" (missing {missing})" if missing else "")
            + (f" (unexpected {extra})" if extra else "") + f". {advice}"
        )
    for name, ref in theirs.items():
        got = mine[name]  # as observe.tensors reports it
        if kind == "parameter" and not got["parameter"]:
            fail(f"{where}: `{name}` must be an nn.Parameter so optimizers and state_dict see it.")
        for prop, a, b in (
            ("shape", tuple(got["shape"]), tuple(ref.shape)),
            ("dtype", got["dtype"], ref.dtype),
            ("device type", got["device"], ref.device.type),
            ("requires_grad", got["requires_grad"], ref.requires_grad),
        ):
            if a != b:
                advice = (
                    " Pass device= and dtype= on to every floating-point tensor you create."
                    if prop in ("dtype", "device type") and ref.is_floating_point() else ""
                )
                fail(f"{where}: {kind} `{name}` has {prop} {a}, torch's has {b}.{advice}")
        if not torch.equal(got["value"].cpu(), ref.detach().cpu()):
            fail(
                f"{where}: {kind} `{name}` starts as {got['value'].cpu().tolist()}, torch's as "
                f"{ref.detach().cpu().tolist()} (weight starts at ones, bias at zeros, "
                "running_mean at zeros, running_var at ones, num_batches_tracked at 0)."
            )


PARAMETER_ADVICE = "Register γ as `weight` and β as `bias` with nn.Parameter, only when affine=True."
BUFFER_ADVICE = (
    "Use self.register_buffer(...) for running_mean, running_var and num_batches_tracked, "
    "only when track_running_stats=True."
)


def compare_structure(cls, reference_cls, args, kwargs, device, dtype, what, attributes=(),
                      parameter_advice=PARAMETER_ADVICE, buffer_advice=BUFFER_ADVICE) -> None:
    """Build both layers with the same arguments and compare everything ``state_dict`` sees,
    plus the public ``attributes`` torch's layer exposes (``eps``, ``normalized_shape``, ...)."""
    __tracebackhide__ = True
    factory = {k: v for k, v in (("device", device), ("dtype", dtype)) if v is not None}
    where = f"{what}({_call(args, kwargs, device, dtype)})"
    layer = student(cls, what).construct(args, {**kwargs, **factory})
    if isinstance(layer, RemoteError):
        fail(f"{where} raised {layer.name}: {layer}")
    if not isinstance(layer, Student):
        fail(f"{where} did not give a module.")
    forbidden.check_no_torch_norm_submodule(layer, what)
    reference = reference_cls(*args, **kwargs, **factory)
    ref_params, ref_buffers, ref_none_params, ref_none_buffers = _registered(reference)
    shown_attributes = layer.call("observe.plain_attributes", list(attributes))
    for name in attributes:
        mine, theirs = shown_attributes[name], getattr(reference, name)
        if "value" not in mine or type(mine["value"]) is not type(theirs) or mine["value"] != theirs:
            shown = "missing" if mine.get("missing") else repr(mine["value"]) if "value" in mine else f"a {mine['object']}"
            fail(
                f"{where}: attribute `{name}` is {shown}, torch's is {theirs!r}. Code that uses "
                f"torch's layer reads it; store it the way torch does."
            )
    registered = layer.call("observe.tensors", values=True)
    if not registered["is_module"]:
        fail(f"{where}: your {what} is not an nn.Module.")
    _compare_tensors("parameter", where, registered["parameters"], ref_params, parameter_advice)
    _compare_tensors("buffer", where, registered["buffers"], ref_buffers, buffer_advice)
    for kind, names in (("parameter", ref_none_params), ("buffer", ref_none_buffers)):
        found = layer.call("observe.attribute_infos", names)
        for name in names:
            value = found[name]
            if value is not None and value.get("type") == "NoneType":
                continue
            state = "is missing" if value is None else f"is a {value.get('type', 'Tensor')}"
            fail(
                f"{where}: torch registers the {kind} `{name}` as None here, so code can test "
                f"`layer.{name} is None`; yours {state}. Use "
                f"self.register_{'parameter' if kind == 'parameter' else 'buffer'}('{name}', None)."
            )
    _compare_state_dicts(layer, reference, where)


def _compare_state_dicts(layer: Student, reference: nn.Module, where: str) -> None:
    __tracebackhide__ = True
    reported = layer.call("observe.state_dict")
    if "error" in reported:
        fail(f"{where}: state_dict() raised {reported['error'].name}: {reported['error']}")
    mine, theirs = reported["state"], reference.state_dict()
    if set(mine) != set(theirs):
        fail(f"{where}: state_dict keys are {sorted(mine)}, torch's are {sorted(theirs)}.")
    for key, value in theirs.items():
        if tuple(mine[key].shape) != tuple(value.shape) or mine[key].dtype != value.dtype:
            fail(
                f"{where}: state_dict['{key}'] is {mine[key].dtype} {shape_str(mine[key].shape)}, "
                f"torch's is {value.dtype} {shape_str(value.shape)}."
            )
    # A trained torch layer's state must load into yours, and yours into torch's.
    with torch.no_grad():
        for i, (key, value) in enumerate(theirs.items()):
            if value.is_floating_point():
                value.copy_(random_tensor(tuple(value.shape), 90 + i, 0.5, 1.5))
            else:
                value.fill_(3)
    loaded = layer.call("observe.load_state_dict", dict(reference.state_dict()))
    if "error" in loaded:
        fail(f"{where}: load_state_dict(torch_layer.state_dict()) failed: {loaded['error'].name}: {loaded['error']}")
    for key, value in reference.state_dict().items():
        mine = loaded["state"].get(key)
        if not isinstance(mine, torch.Tensor) or mine.shape != value.shape or not torch.equal(mine.cpu(), value.cpu()):
            fail(f"{where}: after load_state_dict, your `{key}` does not hold the loaded values.")
    try:
        copy.deepcopy(reference).load_state_dict(loaded["state"], strict=True)
    except Exception as error:  # noqa: BLE001
        fail(f"{where}: torch's layer cannot load your state_dict: {type(error).__name__}: {error}")
