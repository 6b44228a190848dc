"""Which files of the ``autograder`` package reach the student's side.

The student's side is the student's install (the student release, the hub's student
environment) and, at grading time, the sandbox.  It gets the shared core, every exercise's
visible checks, hints and observers, and the sandbox's runner.

The rule is an allow-list: a file reaches the student only when

* it is a Python module or a data file (``*.py``, ``*.pt``) whose name and folders are plain
  lower-case identifiers, so editor and notebook droppings (``.ipynb_checkpoints/``,
  ``.hidden.py.swp``, ``#checks.py#``, ``hidden-checkpoint.py``) never do;
* no part of its path contains ``hidden`` (any case): an exercise's ``hidden.py``, ``hidden.pt``
  and whatever else holds its hidden cases are the grader's alone;
* it is not in ``grading/`` (the grader itself) or ``__pycache__/`` (compiled copies), and it is
  not ``grade.py`` (the class-grading command).

One rule, used by the release (``tools/student_release.py``), the hub's student copy
(``hub/prepare.py``) and the sandbox (:func:`autograder.grading.sandbox.student_view`).
"""
from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

INSTRUCTOR_ONLY_FOLDERS = frozenset({"grading", "__pycache__"})
INSTRUCTOR_ONLY_TOP_FILES = frozenset({"grade.py"})
FOLDER = re.compile(r"[a-z_][a-z0-9_]*")
FILE = re.compile(r"[a-z_][a-z0-9_]*\.(py|pt)")


def is_student_file(relative: PurePosixPath | str) -> bool:
    """Whether a file, named relative to the package folder, belongs to the student's side."""
    parts = PurePosixPath(relative).parts
    if not parts or any("hidden" in part.lower() for part in parts):
        return False
    *folders, name = parts
    if any(folder in INSTRUCTOR_ONLY_FOLDERS or not FOLDER.fullmatch(folder) for folder in folders):
        return False
    if not FILE.fullmatch(name):
        return False
    return not (not folders and name in INSTRUCTOR_ONLY_TOP_FILES)


def student_files(package_dir: Path) -> list[PurePosixPath]:
    """The student's files of the package at ``package_dir``, relative to it, sorted."""
    package_dir = Path(package_dir)
    found = []
    for path in package_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            relative = PurePosixPath(path.relative_to(package_dir).as_posix())
            if is_student_file(relative):
                found.append(relative)
    return sorted(found)
