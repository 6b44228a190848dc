"""The exception a failed check raises, and helpers to phrase its message."""
from __future__ import annotations


class CheckFailed(AssertionError):
    """A check found a difference; the message says what differs and the likely cause."""


def fail(message: str) -> None:
    """Raise :class:`CheckFailed` with ``message`` (traceback frames of the grader hidden)."""
    __tracebackhide__ = True
    raise CheckFailed(message)


def shape_str(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"
