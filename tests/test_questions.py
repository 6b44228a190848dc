"""Graded questions: the form is checked visibly, the key only in hidden tests, and an answer is
read as plain data (an object cannot claim to equal the key)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from autograder import questions
from autograder.messages import CheckFailed


def test_a_choice_is_one_of_the_options():
    questions.check_choice("b", "Q1", options="abcd")
    questions.check_choice(" A, c ", "Q1", options="abcd", multiple=True)
    for wrong_form in (5, "", "e", "ab", None, ["a"], torch.ones(2)):
        with pytest.raises(CheckFailed, match="Q1: "):
            questions.check_choice(wrong_form, "Q1", options="abcd")


def test_a_number_is_a_finite_number_in_any_of_its_usual_types():
    for number in (3, 0.25, np.float32(0.25), np.int64(2), torch.tensor(0.5), torch.tensor([[1.5]])):
        questions.check_number(number, "Q2")
    for wrong_form in ("0.25", float("nan"), float("inf"), None, torch.ones(3), [0.25]):
        with pytest.raises(CheckFailed, match="Q2: (answer with a finite number|your answer must be)"):
            questions.check_number(wrong_form, "Q2")


def test_the_key_decides_and_a_wrong_answer_is_told_why():
    questions.grade_choice("Ca", "Q3", key="ac", why="unused")
    questions.grade_number(0.2505, "Q4", key=0.25, why="unused")
    with pytest.raises(CheckFailed, match=r"Q3: your answer 'a' is not right\. Both a and c\."):
        questions.grade_choice("a", "Q3", key="ac", why="Both a and c.")
    with pytest.raises(CheckFailed, match=r"Q4: your answer 0\.3 is not right\. One quarter\."):
        questions.grade_number(0.3, "Q4", key=0.25, why="One quarter.")


class EqualsEverything(str):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


class AlwaysClose(float):
    def __sub__(self, other):
        return 0.0

    def __abs__(self):
        return 0.0


def test_an_answer_is_compared_as_the_plain_data_it_holds():
    """Subclasses that lie about equality or distance are read as the string or number they hold."""
    with pytest.raises(CheckFailed, match="not right"):
        questions.grade_choice(EqualsEverything("b"), "Q1", key="a", why="")
    with pytest.raises(CheckFailed, match="not right"):
        questions.grade_number(AlwaysClose(7.0), "Q2", key=0.25, why="")

    class Anything:
        def __eq__(self, other):
            return True

    with pytest.raises(CheckFailed, match="must be a string or a number"):
        questions.grade_choice(Anything(), "Q1", key="a", why="")


def test_a_justification_is_a_sentence_and_is_shown_to_the_instructor(capsys):
    questions.check_justification("the mean of each channel is removed", "Q5")
    assert "Q5, your justification: the mean of each channel is removed" in capsys.readouterr().out
    for too_short in ("", "because", 42):
        with pytest.raises(CheckFailed, match="Q5: justify your answer"):
            questions.check_justification(too_short, "Q5")
