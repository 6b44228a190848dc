"""Read a student's answer to a graded question, as plain data.

Runs where the student's code runs.  An answer is a string, a number or a short list of them;
a one-element tensor or a numpy number counts as the number it holds.  Whether it is right is
decided on the trusted side (:mod:`autograder.core.questions`), by a key that never comes here.
"""
from __future__ import annotations

import numbers

import torch

MAX_TEXT = 2000  # characters kept of a text answer
MAX_ITEMS = 16  # items kept of a list answer


def _plain(value, depth: int = 0):
    if value is None or type(value) is bool:
        return value
    if isinstance(value, str):
        return str.__str__(value)[:MAX_TEXT]
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise TypeError(f"a tensor of {value.numel()} elements")
        return float(torch.Tensor.as_subclass(value, torch.Tensor).detach().cpu().double().item())
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if depth == 0 and isinstance(value, (list, tuple)) and len(value) <= MAX_ITEMS:
        return [_plain(v, depth + 1) for v in value]
    raise TypeError(type(value).__name__)


def answer(value) -> dict:
    """``{"value": plain data}``, or ``{"type": what it is}`` when it cannot be read as an answer."""
    try:
        return {"value": _plain(value)}
    except Exception as error:  # noqa: BLE001 - a student's object may raise anywhere
        return {"type": str(error)[:200] or type(value).__name__}
