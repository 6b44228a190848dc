"""The plain-data format that crosses the trust boundary.

Only these values cross, in either direction: ``None``, ``bool``, ``int``, ``float`` (NaN and
infinities included), ``str``, lists, tuples, dicts with ``str`` keys, ``torch.dtype``,
``torch.device``, tensors of a few dtypes, :class:`Handle` (a number naming an object that stays
on the student's side) and :class:`RemoteError` (an exception's class names and message).

A message is a JSON header followed by the raw bytes of every tensor (dtype, shape and bytes;
never pickle).  Decoding builds fresh, plain ``torch.Tensor`` objects from those bytes, so a
tensor subclass, a ``__torch_function__`` or a lying ``__eq__`` on the student's side cannot
reach the checks: they only ever see numbers.  Anything else the student's side sends is a
:class:`WireError`.
"""
from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass

import torch

MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # one reply: far above any check's tensors
MAX_TEXT = 2000  # characters of a student's string (an exception message) that cross
MAX_DEPTH = 20

DTYPES = {
    str(dt).removeprefix("torch."): dt
    for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.int16,
               torch.int32, torch.int64, torch.uint8, torch.bool)
}


class WireError(ValueError):
    """The other side sent something that is not plain data."""


@dataclass(frozen=True)
class Handle:
    """An object that stays on the student's side, named by a number."""

    number: int


@dataclass(frozen=True)
class RemoteError:
    """An exception raised by the student's code: its class names (most derived first) and text."""

    names: tuple[str, ...]
    message: str

    @property
    def name(self) -> str:
        return self.names[0] if self.names else "Exception"

    def is_a(self, exception_type: type) -> bool:
        return exception_type.__name__ in self.names

    def __str__(self) -> str:
        return self.message

    @classmethod
    def of(cls, error: BaseException) -> "RemoteError":
        names = tuple(str(getattr(k, "__name__", "?")) for k in type(error).__mro__)
        try:
            text = str(error)
        except Exception:  # noqa: BLE001 - a student's __str__ may raise
            text = "<unprintable>"
        return cls(names[:20], text[:MAX_TEXT])


def _memory_order(t: torch.Tensor) -> list[int]:
    """The dims from outermost to innermost in memory (a channels_last or transposed tensor
    crosses with its layout, so a check of non-contiguous inputs stays one)."""
    return sorted(range(t.dim()), key=lambda d: (-t.stride(d), d)) if t.numel() > 1 else list(range(t.dim()))


def _tensor_bytes(t: torch.Tensor, order: list[int]) -> bytes:
    flat = torch.Tensor.as_subclass(t, torch.Tensor).detach().to("cpu").permute(order).contiguous().reshape(-1)
    if flat.numel() == 0:
        return b""
    return flat.view(torch.uint8).numpy().tobytes()


def encode(value, handle_of=None) -> bytes:
    """``value`` as one message. ``handle_of(obj)`` names objects that are not plain data
    (only the student's side passes it; elsewhere such an object is an error)."""
    blobs: list[bytes] = []

    def enc(v, depth=0):
        if depth > MAX_DEPTH:
            raise WireError("value nested too deeply")
        if v is None or isinstance(v, (bool, str)) and type(v) in (bool, str):
            return v
        if type(v) is int:
            return v
        if type(v) is float:
            return v if math.isfinite(v) else {"f": repr(v)}
        if isinstance(v, torch.Tensor):
            dtype = str(v.dtype).removeprefix("torch.")
            if dtype not in DTYPES:
                return enc(handle_of(v), depth) if handle_of else _refuse(v)
            order = _memory_order(v)
            blobs.append(_tensor_bytes(v, order))
            return {"t": len(blobs) - 1, "dtype": dtype, "shape": [int(s) for s in v.shape], "order": order,
                    "device": v.device.type, "grad": bool(v.requires_grad), "param": isinstance(v, torch.nn.Parameter)}
        if isinstance(v, torch.dtype):
            return {"dtype": str(v).removeprefix("torch.")}
        if isinstance(v, torch.device):
            return {"device": str(v)}
        if isinstance(v, Handle):
            return {"h": v.number}
        if isinstance(v, RemoteError):
            return {"error": list(v.names), "message": v.message}
        if type(v) in (list, tuple):
            return {"list" if type(v) is list else "tuple": [enc(x, depth + 1) for x in v]}
        if type(v) is torch.Size:
            return {"tuple": [int(x) for x in v]}
        if type(v) is dict and all(type(k) is str for k in v):
            return {"dict": {k: enc(x, depth + 1) for k, x in v.items()}}
        if handle_of is not None:
            return enc(handle_of(v), depth)
        return _refuse(v)

    header = json.dumps(enc(value)).encode()
    parts = [struct.pack("<Q", len(header)), header, struct.pack("<Q", len(blobs))]
    for blob in blobs:
        parts += [struct.pack("<Q", len(blob)), blob]
    return b"".join(parts)


def _refuse(v):
    raise WireError(f"{type(v).__name__} is not plain data")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = memoryview(data), 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.at + n > len(self.data):
            raise WireError("message truncated")
        chunk = self.data[self.at:self.at + n]
        self.at += n
        return chunk

    def number(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]


def one_line(text: str) -> str:
    """A student's text as one line: every line break (``str.splitlines``'s) becomes " ⏎ ".

    Checks quote a student's text (an exception message, a type name, a key) inside their own
    messages; one line keeps it from starting a line of its own there, such as a forged
    "Likely cause: ..." that the class report would count as the grader's."""
    lines = text.splitlines()
    return " ⏎ ".join(lines) if len(lines) != 1 else lines[0]  # a trailing break goes too


def decode(data: bytes, device_ok=None, text=None):
    """The value of one message, built from plain data only; :class:`WireError` otherwise.

    Tensors are rebuilt on the CPU, then moved to the device they came from when
    ``device_ok(device_type)`` says that device exists here. ``text``, when given, is applied
    to every string (values, keys, error names and messages): the grader passes
    :func:`one_line` for what the student's side sends.
    """
    clean = text or (lambda s: s)
    if len(data) > MAX_MESSAGE_BYTES:
        raise WireError("message too large")
    reader = _Reader(data)
    try:
        header = json.loads(bytes(reader.take(reader.number())))
    except (ValueError, RecursionError) as error:
        raise WireError(f"unreadable header ({type(error).__name__})") from None
    count = reader.number()
    if count > 100_000:
        raise WireError("too many tensors")
    blobs = [bytes(reader.take(reader.number())) for _ in range(count)]
    if reader.at != len(reader.data):
        raise WireError("trailing bytes")

    def dec(v, depth=0):
        if depth > MAX_DEPTH:
            raise WireError("value nested too deeply")
        if type(v) is str:
            return clean(v)
        if v is None or type(v) in (bool, int):
            return v
        if type(v) is float:
            return v
        if type(v) is not dict or len(v) == 0:
            raise WireError(f"unexpected {type(v).__name__}")
        if "f" in v and len(v) == 1 and v["f"] in ("nan", "inf", "-inf"):
            return float(v["f"])
        if "t" in v:
            return _tensor(v, blobs, device_ok)
        if set(v) == {"dtype"} and v["dtype"] in DTYPES:
            return DTYPES[v["dtype"]]
        if set(v) == {"device"} and type(v["device"]) is str:
            try:
                return torch.device(v["device"])
            except RuntimeError:
                raise WireError("bad device") from None
        if set(v) == {"h"} and type(v["h"]) is int:
            return Handle(v["h"])
        if set(v) == {"error", "message"} and type(v["error"]) is list and type(v["message"]) is str:
            if not all(type(n) is str for n in v["error"]):
                raise WireError("bad error")
            return RemoteError(tuple(clean(n[:200]) for n in v["error"][:20]), clean(v["message"][:MAX_TEXT]))
        if set(v) == {"list"} and type(v["list"]) is list:
            return [dec(x, depth + 1) for x in v["list"]]
        if set(v) == {"tuple"} and type(v["tuple"]) is list:
            return tuple(dec(x, depth + 1) for x in v["tuple"])
        if set(v) == {"dict"} and type(v["dict"]) is dict:
            return {clean(str(k)): dec(x, depth + 1) for k, x in v["dict"].items()}
        raise WireError("unknown value")

    return dec(header)


def _tensor(v: dict, blobs: list[bytes], device_ok) -> torch.Tensor:
    if set(v) != {"t", "dtype", "shape", "order", "device", "grad", "param"} or v["dtype"] not in DTYPES:
        raise WireError("bad tensor")
    index, shape, order = v["t"], v["shape"], v["order"]
    if type(index) is not int or not 0 <= index < len(blobs):
        raise WireError("bad tensor index")
    if type(shape) is not list or len(shape) > 16 or not all(type(s) is int and s >= 0 for s in shape):
        raise WireError("bad tensor shape")
    if type(order) is not list or sorted(order) != list(range(len(shape))) or not all(type(d) is int for d in order):
        raise WireError("bad tensor layout")
    dtype = DTYPES[v["dtype"]]
    numel = math.prod(shape)
    blob = blobs[index]
    if len(blob) != numel * torch.empty((), dtype=dtype).element_size():
        raise WireError("tensor size does not match its shape")
    if numel == 0:
        t = torch.empty(shape, dtype=dtype)
    else:
        stored = [shape[d] for d in order]
        t = torch.frombuffer(bytearray(blob), dtype=torch.uint8).view(dtype).reshape(stored).clone()
        t = t.permute([order.index(d) for d in range(len(shape))])
    device = v["device"]
    if type(device) is str and device != "cpu" and device_ok is not None and device_ok(device):
        t = t.to(device)
    if v["grad"] is True and t.is_floating_point():
        t.requires_grad_(True)  # a flag the checks read; the values never carry history
    if v["param"] is True and t.is_floating_point():
        t = torch.nn.Parameter(t.detach(), requires_grad=bool(v["grad"]))
    return t


def same_device_types(device_type: str) -> bool:
    """``device_ok`` for :func:`decode`: move tensors to ``cuda`` when this process has it."""
    return device_type == "cuda" and torch.cuda.is_available()
