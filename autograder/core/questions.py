"""Graded questions: a student answers in a variable, the grader compares it with the key.

A question cell in an exercise defines ``answer_q1`` (a choice: a string of one letter, or of
several), ``answer_q2`` (a number) or ``why_q3`` (a one-line justification, a string). Its test
cell checks the answer's *form* visibly, so a student knows the answer will be read::

    questions.check_choice(answer_q1, "Q1", options="abcd")

and, in nbgrader's hidden tests (which only ``solutions/`` holds and which run in the grader,
never in the student's kernel), compares it with the key and explains the reasoning when it is
wrong; that explanation reaches the student with their feedback::

    questions.grade_choice(answer_q1, "Q1", key=..., why="...")

The keys and explanations live in the hidden tests only: never in this package, the release or
the book. Answers are read as plain data (:mod:`autograder.sandbox.observe_answers`), so an
answer object cannot pretend to equal the key.
"""
from __future__ import annotations

import math

from autograder.core.messages import fail
from autograder.core.side import student


def _value(answer, question: str):
    """The student's answer as plain data (a string, a number, a list of them, or None)."""
    __tracebackhide__ = True
    report = student(answer, question).report("observe_answers.answer")
    if "value" not in report:
        fail(f"{question}: your answer must be a string or a number (or a list of them); "
             f"it is {report.get('type', 'something else')}.")
    return report["value"]


def _letters(value, question: str, options: str, multiple: bool) -> str:
    """A choice answer as the sorted string of its letters, once its form is right."""
    __tracebackhide__ = True
    allowed = ", ".join(repr(o) for o in options)
    how = f"a string of one or more of {allowed}, e.g. {options[0] + options[-1]!r}" if multiple else f"one of {allowed}"
    if not isinstance(value, str) or not value.strip():
        fail(f"{question}: answer with {how}; your answer is {value!r}.")
    letters = "".join(c for c in value.lower() if not c.isspace() and c not in ",;()[].")  # "(a)", "a." too
    wrong = sorted(set(c for c in letters if c not in options))
    if wrong or (not multiple and len(letters) != 1) or len(set(letters)) != len(letters):
        fail(f"{question}: answer with {how}; your answer is {value!r}.")
    return "".join(sorted(letters))


def _number(value, question: str) -> float:
    __tracebackhide__ = True
    if type(value) not in (int, float) or not math.isfinite(value):
        fail(f"{question}: answer with a finite number (a Python float or int); your answer is {value!r}.")
    return float(value)


def check_choice(answer, question: str, options: str, multiple: bool = False) -> None:
    """Visible: the answer is a choice among ``options`` (one letter; several when ``multiple``)."""
    __tracebackhide__ = True
    _letters(_value(answer, question), question, options, multiple)


def check_number(answer, question: str) -> None:
    """Visible: the answer is a finite number."""
    __tracebackhide__ = True
    _number(_value(answer, question), question)


def check_justification(text, question: str, min_words: int = 4) -> None:
    """Visible: a justification of at least ``min_words`` words, printed so that the instructor
    reads it beside the answer (in the autograded notebook and the formgrader)."""
    __tracebackhide__ = True
    value = _value(text, question)
    if not isinstance(value, str) or len(value.split()) < min_words:
        fail(f"{question}: justify your answer in one sentence (a string of at least {min_words} words); "
             f"yours is {value!r}.")
    print(f"{question}, your justification: {value}")


def grade_choice(answer, question: str, key: str, why: str, options: str | None = None) -> None:
    """Hidden: the answer's letters equal the key's (order, case and spaces do not matter)."""
    __tracebackhide__ = True
    options = options or "abcdefgh"
    got = _letters(_value(answer, question), question, options, multiple=True)
    if got != "".join(sorted(key.lower())):
        fail(f"{question}: your answer {got!r} is not right. {why}")


def grade_observation(answer, question: str, holds: dict[str, bool], otherwise: str, why: str,
                      observed: str = "") -> None:
    """Hidden: a choice among statements about the student's own result, recomputed by the grader.
    Any statement that ``holds`` for that result is right (several may); ``otherwise`` is right
    when none does. ``observed`` shows the result a wrong answer is judged on."""
    __tracebackhide__ = True
    options = "".join(sorted(set(holds) | {otherwise}))
    got = _letters(_value(answer, question), question, options, multiple=False)
    right = [letter for letter, true in holds.items() if true] or [otherwise]
    if got not in right:
        shown = " or ".join(repr(r) for r in right)
        fail(f"{question}: your answer {got!r} is not right: on your result the right answer is {shown}. {why}"
             + (f" Your result: {observed}." if observed else ""))


def grade_number(answer, question: str, key: float, why: str, rtol: float = 0.02, atol: float = 0.0) -> None:
    """Hidden: the answer is within ``atol + rtol·|key|`` of the key."""
    __tracebackhide__ = True
    got = _number(_value(answer, question), question)
    if not abs(got - key) <= atol + rtol * abs(key):
        fail(f"{question}: your answer {got:.6g} is not right. {why}")
