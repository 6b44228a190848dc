"""The exception a failed check raises, and helpers to phrase its message."""
from __future__ import annotations

import math


class CheckFailed(AssertionError):
    """A check found a difference; the message says what differs and the likely cause."""

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for it (in the live notebook and in nbgrader's Validate): the
        message alone, without the grader's frames. IPython calls this hook instead of
        formatting a traceback; the message already names the case, what differs and why."""
        return [f"\x1b[0;31mCheckFailed\x1b[0m: {self}"]


def fail(message: str) -> None:
    """Raise :class:`CheckFailed` with ``message`` (traceback frames of the grader hidden)."""
    __tracebackhide__ = True
    raise CheckFailed(message)


def shape_str(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def two_values(a: float, b: float, digits: int = 6) -> tuple[str, str]:
    """``a`` and ``b`` with ``digits`` significant digits, or with more where that prints two
    different numbers the same (-1.5637 and -1.5637 for -1.563702 and -1.563708): a message
    that says two values differ shows them differing. 17 digits tell every two float64 apart."""
    for shown in range(digits, 18):
        x, y = f"{a:.{shown}g}", f"{b:.{shown}g}"
        if x != y or a == b or not (math.isfinite(a) and math.isfinite(b)):
            return x, y
    return x, y
