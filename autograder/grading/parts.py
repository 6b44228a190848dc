"""Which files of the ``autograder`` package reach the student's side.

The student's side is the student's install (the student release, the hub's student
environment) and, at grading time, the sandbox.  It gets the shared core, every exercise's
visible checks, hints and observers, and the sandbox's runner.  It never gets:

* ``grading/``: the grader itself (it never runs student code, and students have no use for it);
* ``grade.py``: the class-grading command, a front for ``grading``;
* any ``hidden.py`` or other file named ``hidden.*`` (``hidden.pt``): an exercise's hidden cases
  and their data, which only the grader draws;
* ``__pycache__`` folders: compiled copies, which would carry a hidden module's constants.

One rule, used by the release (``tools/student_release.py``) and by the sandbox, which masks
everything else of the package.
"""
from __future__ import annotations

from pathlib import Path, PurePosixPath

INSTRUCTOR_ONLY_FOLDERS = frozenset({"grading", "__pycache__"})
INSTRUCTOR_ONLY_FILES = frozenset({"hidden.py"})
INSTRUCTOR_ONLY_TOP_FILES = frozenset({"grade.py"})


def is_student_file(relative: PurePosixPath | str) -> bool:
    """Whether a file, named relative to the package folder, belongs to the student's side."""
    parts = PurePosixPath(relative).parts
    if not parts:
        return False
    if any(part in INSTRUCTOR_ONLY_FOLDERS for part in parts[:-1]):
        return False
    name = parts[-1]
    if name in INSTRUCTOR_ONLY_FILES or name.startswith("hidden.") or name.endswith(".pyc"):
        return False
    return not (len(parts) == 1 and name in INSTRUCTOR_ONLY_TOP_FILES)


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


def instructor_only_paths(package_dir: Path) -> list[Path]:
    """What the sandbox must mask: instructor-only files and the topmost instructor-only
    folders of the package, as absolute paths, sorted."""
    package_dir = Path(package_dir)
    masked: list[Path] = []
    for path in sorted(package_dir.rglob("*")):
        if path.is_symlink() or any(parent in masked for parent in path.parents):
            continue
        relative = PurePosixPath(path.relative_to(package_dir).as_posix())
        if path.is_dir() and relative.name in INSTRUCTOR_ONLY_FOLDERS:
            masked.append(path)
        elif path.is_file() and not is_student_file(relative):
            masked.append(path)
    return masked
