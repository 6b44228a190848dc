"""The exception a failed check raises, and helpers to phrase its message."""
from __future__ import annotations

import math
import textwrap

WIDTH = 80  # columns of a failed check's message where IPython shows it


class CheckFailed(AssertionError):
    """A check found a difference; the message says what differs and the likely cause."""

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for it (in the live notebook and in nbgrader's Validate): the
        message alone, without the grader's frames. IPython calls this hook instead of
        formatting a traceback; the message already names the case, what differs and why.
        Lines are wrapped at :data:`WIDTH` columns: Validate's dialog shows them in a box that
        does not wrap, and ``nbgrader validate`` cuts every line at 87 columns."""
        lines = []
        for line in f"CheckFailed: {self}".splitlines():
            lines += textwrap.wrap(line, WIDTH, subsequent_indent="  ", break_long_words=False,
                                   break_on_hyphens=False) or [""]
        return ["\x1b[0;31mCheckFailed\x1b[0m" + "\n".join(lines)[len("CheckFailed"):]]


def fail(message: str) -> None:
    """Raise :class:`CheckFailed` with ``message`` (traceback frames of the grader hidden)."""
    __tracebackhide__ = True
    raise CheckFailed(message)


def shape_str(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def two_values(a: float, b: float, digits: int = 6) -> tuple[str, str]:
    """``a`` and ``b`` with ``digits`` significant digits, or with more where that prints two
    different numbers the same (-1.5637 and -1.5637 for -1.5637002 and -1.5637008): a message
    that says two values differ shows them differing, with the same number of digits
    (-1.563700 and -1.563701, not -1.5637 and -1.563701). 17 digits tell every two float64 apart."""
    if a == b or not (math.isfinite(a) and math.isfinite(b)) or f"{a:.{digits}g}" != f"{b:.{digits}g}":
        return f"{a:.{digits}g}", f"{b:.{digits}g}"
    for shown in range(digits + 1, 18):
        x, y = (f"{v:#.{shown}g}".rstrip(".") for v in (a, b))  # '#': trailing zeros kept
        if x != y:
            break
    return x, y
