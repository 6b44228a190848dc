"""The random generators behind every check's inputs.

A check names its inputs by a seed.  Where a student runs the visible checks, the seed is used
as it is, so the same check gives the same message every time.  Where the grader runs them
(``nbgrader autograde``, in the grader's process), :func:`course_secret` is in force: each seed
is mixed with the course's secret and the submission's name, its assignment and student
(HMAC-SHA256), so the values of every input, hidden cases included, are drawn afresh for each
student, the same for every grading of that submission, and cannot be known from the
installed package nor from a classmate's feedback.  Shapes, dtypes and the family each input is drawn from stay
as the checks define them.
"""
from __future__ import annotations

import hashlib
import hmac
from contextlib import contextmanager

import torch

# The secret in force, in a dict: the package's names must keep pointing where they did when it
# loaded (autograder.core.integrity takes a rebinding for tampering).
_IN_FORCE: dict[str, object] = {"secret": None, "context": ""}


def generator(seed: int) -> torch.Generator:
    """A CPU generator for ``seed``, mixed with the course's secret when one is in force."""
    return torch.Generator().manual_seed(mixed(seed))


def mixed(seed: int) -> int:
    secret = _IN_FORCE["secret"]
    if secret is None:
        return seed
    message = f"{_IN_FORCE['context']}\0{int(seed)}".encode()
    digest = hmac.new(secret, message, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "little") >> 1  # a non-negative 63-bit seed


@contextmanager
def course_secret(secret: bytes | None, context: str = ""):
    """Draw every input from ``secret`` (None: the seeds as they are) inside the block; with a
    ``context`` (``"<assignment>/<student>"``), from the two together."""
    before = dict(_IN_FORCE)
    _IN_FORCE.update(secret=secret, context=context)
    try:
        yield
    finally:
        _IN_FORCE.update(before)
