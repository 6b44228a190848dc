"""Reach an exercise's hidden cases, which only the grader holds (withheld from the student).

Each exercise keeps the cases its hidden tests add in ``autograder/exercises/<exercise>/hidden.py``.
The student's package and the grading sandbox do not contain that file
(:mod:`autograder.grading.parts`), so a submission cannot read which shapes, settings or
values the grader will try; their values are drawn from the course's secret besides
(:mod:`autograder.core.seeding`).  A check asks for them only when ``full=True``, which only
the instructor's test cells pass.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType



class HiddenCasesUnavailable(RuntimeError):
    """``full=True`` where the exercise's hidden cases do not exist: the student's install.
    Not a :class:`~autograder.core.messages.CheckFailed`: it says nothing about the student's code."""


def of(exercise_package: str) -> ModuleType:
    """The ``hidden`` module of ``exercise_package`` (pass the checks module's ``__package__``)."""
    name = f"{exercise_package}.hidden"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name != name:
            raise
        raise HiddenCasesUnavailable(
            "the hidden cases of this exercise are not part of your install: they run when your "
            "instructor grades the notebook. Run the check without full=True.") from None


def check_present() -> None:
    """Raise :class:`HiddenCasesUnavailable` unless every exercise's hidden cases can be loaded:
    the grader checks it before any student, so an install without them never grades a class
    (every hidden test would fail, and every student lose its points)."""
    package = Path(__file__).resolve().parent.parent / "exercises"
    for folder in sorted(p for p in package.iterdir() if (p / "checks.py").is_file()):
        name = f"autograder.exercises.{folder.name}"
        try:
            importlib.import_module(f"{name}.hidden")
        except ImportError:
            raise HiddenCasesUnavailable(
                f"this grader has no hidden cases for {folder.name} ({folder / 'hidden.py'}): it is a "
                "student's install. Grade with the instructor's repository and its environment.") from None
