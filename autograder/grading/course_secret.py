"""The course's secret, from which the grader draws every check's inputs (:mod:`autograder.core.seeding`).

Made once, the first time the course is graded, as ``grading_secret.txt`` in the course
directory beside the gradebook, readable by its owner only; it never reaches a release, a
sandbox or a student's package.  Keep it with the gradebook: grading again with the same
secret gives the same inputs and the same scores, and a new secret draws new ones.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

FILE = "grading_secret.txt"


def read_or_create(course: Path) -> bytes:
    path = Path(course) / FILE
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_hex(32) + "\n")
    text = path.read_text().strip()
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) < 16:
        raise ValueError(f"{path} does not hold a secret (32 random bytes in hex); delete it to make a new one")
    return secret


def write(folder: Path, secret: bytes) -> None:
    """Put ``secret`` into a private course (the grade command's batches)."""
    descriptor = os.open(Path(folder) / FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(secret.hex() + "\n")
