"""Drive the student's objects and report what they did, as plain data.

Each function takes the student's objects (resolved from handles by the agent) and plain values,
runs the student's code, and returns plain values: tensors, numbers, strings, lists and dicts,
:class:`~autograder.core.wire.RemoteError` for an exception the student's code raised.  An object
that is not plain data goes back as a handle the grader can pass to a later call.

The grader's comparisons never run here; :mod:`autograder.core.engine` and the chapter modules
compare what these functions report with torch's answers on the trusted side.
"""
from __future__ import annotations

import contextlib
import re

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.core.wire import RemoteError

NORMALIZATION_OP = re.compile(r"(batch|layer|group|instance|rms)_norm")
# torch's normalizations that never reach the dispatcher as one op: ``rms_norm`` is composite, it
# decomposes into pow, mean and rsqrt above it (F.rms_norm, torch.rms_norm, torch.ops.aten.rms_norm
# and nn.RMSNorm alike), so a dispatch mode sees only those.  Their calls are noticed as calls.
COMPOSITE_NORMALIZATION = re.compile(r"rms_norm")


class _CompositeCalls(TorchFunctionMode):
    """Adds to ``ops`` the name of every call of a composite normalization (see above)."""

    def __init__(self, ops: set) -> None:
        super().__init__()
        self.ops = ops

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = str(getattr(func, "__name__", "")).split(".")[0]
        if COMPOSITE_NORMALIZATION.search(name):
            self.ops.add(name)
        return func(*args, **(kwargs or {}))


class OpRecorder(TorchDispatchMode):
    """Records the names of the aten ops run while it is active (torch's own normalization
    kernels among them: ``native_batch_norm``, ``cudnn_batch_norm``, ``native_layer_norm``...),
    and the calls of the composite normalizations, which no kernel of their own reveals (``rms_norm``)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()
        self._calls: list[_CompositeCalls] = []

    def __enter__(self):
        calls = _CompositeCalls(self.ops)
        calls.__enter__()
        self._calls.append(calls)
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._calls.pop().__exit__(*exc)

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch would otherwise wrap __torch_dispatch__ with a dynamo guard whose first call
        # imports torch._dynamo (~3 s) and rebinds torch.manual_seed.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func.name())
        return func(*args, **(kwargs or {}))

    def normalization_ops(self) -> list[str]:
        return sorted(op for op in self.ops if NORMALIZATION_OP.search(op))


def _recording(record: bool):
    return OpRecorder() if record else contextlib.nullcontext()


def _ops(recorder) -> list[str]:
    # the class's method, not the instance's attribute: a notebook that finds the active mode
    # cannot silence it by assigning recorder.normalization_ops
    return OpRecorder.normalization_ops(recorder) if isinstance(recorder, OpRecorder) else []


def _plain_tensor(t: torch.Tensor) -> torch.Tensor:
    return torch.Tensor.as_subclass(t, torch.Tensor).detach().clone()


# --- classes and instances -------------------------------------------------------------------

def class_info(cls) -> dict:
    """What the grader needs to see whether ``cls`` is a module class and what it inherits."""
    if not isinstance(cls, type):
        return {"is_class": False, "type": type(cls).__name__, "mro": [], "is_module": False}
    return {
        "is_class": True,
        "type": "type",
        "mro": [[str(getattr(k, "__module__", "")), str(getattr(k, "__qualname__", ""))] for k in cls.__mro__],
        "is_module": issubclass(cls, nn.Module),
    }


def construct(cls, args: tuple, kwargs: dict):
    """``cls(*args, **kwargs)``: the new object (a handle for the grader), or the error it raised."""
    try:
        return cls(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - the student's exception is the observation
        return RemoteError.of(error)


def built(cls, args: tuple, kwargs: dict, names: list) -> dict:
    """``cls(*args, **kwargs)`` and, in the same request, what the engine looks at first: its
    submodules, its registered tensors and the attributes ``names`` (see the functions below)."""
    layer = construct(cls, args, kwargs)
    if isinstance(layer, RemoteError):
        return {"layer": layer}
    return {"layer": layer, "submodules": submodules(layer), "tensors": tensors(layer),
            "attributes": attribute_infos(layer, names)}


def submodules(module) -> list:
    """``[name, class module, class qualname]`` of every submodule, the module itself included."""
    if not isinstance(module, nn.Module):
        return []
    return [[name, type(m).__module__, type(m).__qualname__] for name, m in module.named_modules()]


def _tensor_info(t, value: bool = False) -> dict:
    info = {"dtype": t.dtype, "device": t.device.type, "shape": tuple(t.shape), "requires_grad": bool(t.requires_grad),
            "parameter": isinstance(t, nn.Parameter)}
    if value:
        info["value"] = _plain_tensor(t)
    return info


def tensors(module, values: bool = False) -> dict:
    """Registered parameters and buffers (their dtype, device, shape, and with ``values`` their
    values) and the names registered as None."""
    if not isinstance(module, nn.Module):
        return {"is_module": False}
    return {
        "is_module": True,
        "parameters": {n: _tensor_info(p, values) for n, p in module._parameters.items() if p is not None},
        "buffers": {n: _tensor_info(b, values) for n, b in module._buffers.items() if b is not None},
        "none_parameters": [n for n, p in module._parameters.items() if p is None],
        "none_buffers": [n for n, b in module._buffers.items() if b is None],
    }


def attribute(obj, name: str):
    """``obj``'s attribute ``name``; a dotted name (``q_norm.weight``) walks into submodules, as
    ``state_dict`` names their tensors."""
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def attribute_infos(obj, names: list) -> dict:
    """For each name (dotted for a submodule's): ``None`` when missing, else its tensor info, or ``{"type": ...}``."""
    found = {}
    for name in names:
        try:
            value = attribute(obj, name)
        except Exception:  # noqa: BLE001
            found[name] = None
            continue
        found[name] = _tensor_info(value) if isinstance(value, torch.Tensor) else {"type": type(value).__name__}
    return found


def plain_attributes(obj, names: list) -> dict:
    """Attribute values that are plain data (``eps``, ``normalized_shape``...); ``{"missing": True}``
    when absent, ``{"object": type name}`` when not plain."""
    found = {}
    for name in names:
        try:
            value = getattr(obj, name)
        except Exception:  # noqa: BLE001
            found[name] = {"missing": True}
            continue
        found[name] = {"value": value} if _is_plain(value) else {"object": type(value).__name__}
    return found


def _is_plain(value, depth: int = 0) -> bool:
    if depth > 5:
        return False
    if value is None or type(value) in (bool, int, float, str):
        return True
    if type(value) in (tuple, list):
        return all(_is_plain(v, depth + 1) for v in value)
    return False


def load_state(module, state: dict, dtype) -> None:
    """Copy the case's initial values (rounded to ``dtype``) into same-named tensors (dotted
    names for a submodule's)."""
    with torch.no_grad():
        for name, value in state.items():
            try:
                target = attribute(module, name)
            except Exception:  # noqa: BLE001 - a missing tensor is reported by the checks
                target = None
            if isinstance(target, torch.Tensor) and target.shape == value.shape:
                rounded = value.to(dtype) if value.is_floating_point() else value
                target.copy_(rounded.to(target.device, target.dtype))


# --- running a layer ---------------------------------------------------------------------------

def upstream_gradient(output: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The fixed, non-uniform gradient fed back through every output (rounded to ``dtype``)."""
    g = torch.Generator().manual_seed(1234)
    values = torch.randn(output.shape, generator=g, dtype=torch.float64).to(dtype)
    return values.to(output.device, output.dtype)


_MISSING = object()


def _attribute_or(obj, name: str, default):
    try:
        return attribute(obj, name)
    except Exception:  # noqa: BLE001 - the student's __getattr__ may raise anything
        return default


def run_steps(layer, steps: list, case_dtype, device, dtype, param_names: list, buffer_names: list,
              record: bool = False, state: dict | None = None, round_input: bool = True) -> dict:
    """Run ``layer`` through ``steps`` (dicts: mode 'train'/'eval', input x, no_grad, optional
    ``extra`` arguments after x) and record,
    after each, its error or output, the input and parameter gradients, and every buffer.

    The input is rounded to ``case_dtype`` (unless not ``round_input``: the grader's nearby
    inputs, already rounded and then moved), then given to the layer in ``dtype``; each forward is followed by a backward of
    ``sum(output · upstream_gradient)`` unless the step runs under ``torch.no_grad()``.
    ``state``: initial values to load first (:func:`load_state`, rounded to ``case_dtype``).
    Returns ``{"steps": [...], "normalization_ops": [...]}``.
    """
    if state:
        load_state(layer, state, case_dtype)
    results = []
    recorder = _recording(record)
    for step in steps:
        result = {"error": None, "output": None, "grad_input": None, "grad_params": {}, "buffers": {},
                  "buffers_with_history": []}
        try:
            layer.train(step["mode"] == "train")
            for p in layer.parameters():
                p.grad = None
            x = step["x"].to(case_dtype) if round_input else step["x"]
            x = x.to(device, dtype).detach().requires_grad_(not step["no_grad"])
            with recorder:
                original = x.detach().clone()
                extra = [e.to(device) if isinstance(e, torch.Tensor) else e for e in step.get("extra", ())]
                with torch.no_grad() if step["no_grad"] else torch.enable_grad():
                    out = layer(x, *extra)
                if not isinstance(out, torch.Tensor):
                    raise TypeError(f"forward returned {type(out).__name__}, not a Tensor")
                if not torch.equal(x.detach(), original):
                    raise RuntimeError("forward modified its input in place; torch's layer leaves it unchanged")
                if not step["no_grad"] and out.requires_grad:
                    (out * upstream_gradient(out, case_dtype)).sum().backward()
        except Exception as error:  # noqa: BLE001 - the student's exception is the observation
            result["error"] = RemoteError.of(error)
        else:
            result["output"] = _plain_tensor(out)
            result["grad_input"] = None if x.grad is None else _plain_tensor(x.grad)
            for name in param_names:
                p = _attribute_or(layer, name, None)
                result["grad_params"][name] = (
                    _plain_tensor(p.grad) if isinstance(p, torch.Tensor) and p.grad is not None else None
                )
        for name in buffer_names:
            b = _attribute_or(layer, name, _MISSING)
            if isinstance(b, torch.Tensor):
                if b.requires_grad or b.grad_fn is not None:
                    result["buffers_with_history"].append(name)
                result["buffers"][name] = _plain_tensor(b)
            elif b is _MISSING:
                result["buffers"][name] = {"missing": True}
            else:
                result["buffers"][name] = b if b is None else {"object": type(b).__name__}
        results.append(result)
    return {"steps": results, "normalization_ops": _ops(recorder)}


def call(fn, args: tuple, kwargs: dict | None = None, record: bool = False, floats: bool = False) -> dict:
    """``fn(*args, **kwargs)``: its result (or error), the normalization kernels it ran, which
    tensor arguments it modified in place, and the result's type by name (for messages: a result
    that is not plain data crosses as a handle). ``floats``: a result of a subclass of ``float``
    (``numpy.float64``) crosses as the plain float it holds."""
    kept = [a.detach().clone() if isinstance(a, torch.Tensor) else None for a in args]
    recorder = _recording(record)
    try:
        with recorder:
            result = fn(*args, **(kwargs or {}))
    except Exception as error:  # noqa: BLE001
        result = RemoteError.of(error)
    changed = [k is not None and not (a.shape == k.shape and torch.equal(a.detach(), k)) for a, k in zip(args, kept)]
    kind = _type_name(result)
    if floats and isinstance(result, float) and type(result) is not float:
        result = float.__float__(result)  # a numpy float64 is a float: its value, read by float's own method
    return {"result": result, "normalization_ops": _ops(recorder), "inputs_changed": changed, "result_type": kind}


def _type_name(value) -> str:
    """``float``, ``torch.Tensor``, ``numpy.float64``: the type of ``value`` as a reader knows it."""
    try:
        kind = type(value)
        name = f"{kind.__module__}.{kind.__qualname__}".removeprefix("builtins.")
        return str(name)[:100]
    except Exception:  # noqa: BLE001 - a student's metaclass may raise
        return "?"


# --- state_dict -----------------------------------------------------------------------------

def state_dict(module) -> dict:
    """The module's ``state_dict`` as plain tensors (or the error it raised)."""
    try:
        return {"state": {str(k): _plain_tensor(v) for k, v in module.state_dict().items()}}
    except Exception as error:  # noqa: BLE001
        return {"error": RemoteError.of(error)}


def load_state_dict(module, state: dict) -> dict:
    """``module.load_state_dict(state, strict=True)``, then its ``state_dict`` as plain tensors."""
    try:
        module.load_state_dict(state, strict=True)
    except Exception as error:  # noqa: BLE001
        return {"error": RemoteError.of(error)}
    return state_dict(module)


def load_nested_state_dict(module, state: dict) -> dict:
    """``module`` as submodule ``0`` of an ``nn.Sequential`` that loads ``state`` (keys "0.<name>",
    strict), as a checkpoint of a whole model loads; then the module's ``state_dict``."""
    try:
        nn.Sequential(module).load_state_dict(state, strict=True)
    except Exception as error:  # noqa: BLE001
        return {"error": RemoteError.of(error)}
    return state_dict(module)


def to(module, device, dtype):
    """``module.to(device=..., dtype=...)``: the moved module, or the error it raised."""
    try:
        return module.to(device=device, dtype=dtype)
    except Exception as error:  # noqa: BLE001
        return RemoteError.of(error)
