"""Notice calls of given Python functions, however the caller got hold of them.

While :func:`tripwires` is active, each function's code object is swapped for one that records
the call and then runs the original, so an alias imported long before (``from torch.nn.utils.fusion
import fuse_conv_bn_eval as merge``), a call from another thread, or a call from inside torch all
count. Runs where the student's code runs, like every observation: it reports, it decides nothing.
"""
from __future__ import annotations

import contextlib
import types

_CALLS = "__autograder_tripwire_calls__"
_ORIGINALS = "__autograder_tripwire_originals__"


def _recording_code(key: str) -> types.CodeType:
    """Code that appends ``key`` to the module's call list and calls the original function."""
    namespace: dict = {}
    exec(f"def tripped(*args, **kwargs):\n    {_CALLS}.append({key!r})\n"
         f"    return {_ORIGINALS}[{key!r}](*args, **kwargs)\n", namespace)
    return namespace["tripped"].__code__


@contextlib.contextmanager
def tripwires(functions):
    """Yield the list of the names of ``functions`` that are called while active, in order."""
    calls: list[str] = []
    swapped = []
    try:
        for f in functions:
            if not isinstance(f, types.FunctionType) or f.__code__.co_freevars:
                continue
            key = f"{f.__module__}.{f.__qualname__}"
            original = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
            original.__kwdefaults__ = f.__kwdefaults__
            f.__globals__[_CALLS] = calls
            f.__globals__.setdefault(_ORIGINALS, {})[key] = original
            swapped.append((f, f.__code__, f.__defaults__, f.__kwdefaults__))
            f.__defaults__, f.__kwdefaults__ = None, None
            f.__code__ = _recording_code(key)
        yield calls
    finally:
        for f, code, defaults, kwdefaults in swapped:
            f.__code__, f.__defaults__, f.__kwdefaults__ = code, defaults, kwdefaults
            f.__globals__.pop(_CALLS, None)
            f.__globals__.pop(_ORIGINALS, None)
