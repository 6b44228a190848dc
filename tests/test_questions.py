"""Graded questions: the form is checked visibly, the key only in hidden tests, and an answer is
read as plain data (an object cannot claim to equal the key). Then the questions of the
exercises: each one graded by a hidden key with an explanation, the source answers right, and
no key, explanation or answer where students can read it."""
from __future__ import annotations

import ast
import functools
import re

import nbformat
import numpy as np
import pytest
import torch

from autograder.core import questions
from autograder.core.messages import CheckFailed
from course import ASSIGNMENTS, REPO, is_test_cell, load_namespace, nbgrader_meta, setup_source, solution_code
from leaks import (
    ANSWER_LINE, grade_calls, hidden_part, keyword, question_secrets, secrets_in, source_notebooks, visible_part,
)


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


def test_an_observation_accepts_every_statement_that_holds_on_the_student_s_result():
    holds = {"a": True, "b": False, "c": True}
    for right in ("a", "C"):
        questions.grade_observation(right, "Q3", holds, otherwise="d", why="unused")
    with pytest.raises(CheckFailed, match=r"Q3: your answer 'b' is not right: on your result the right answer is "
                                          r"'a' or 'c'\. Because\. Your result: 0\.3, 0\.5\."):
        questions.grade_observation("b", "Q3", holds, otherwise="d", why="Because.", observed="0.3, 0.5")
    none = dict.fromkeys("abc", False)
    questions.grade_observation("d", "Q3", none, otherwise="d", why="unused")
    with pytest.raises(CheckFailed, match="the right answer is 'd'"):
        questions.grade_observation("a", "Q3", none, otherwise="d", why="unused")
    with pytest.raises(CheckFailed, match="answer with one of"):
        questions.grade_observation("ab", "Q3", holds, otherwise="d", why="unused")


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


# ------------------------------------------------------------------ the questions of the exercises


def question_cells():
    """(notebook, answer cell, test cell) for every graded question of every source notebook."""
    found = []
    for path in source_notebooks():
        cells = nbformat.read(path, as_version=4).cells
        for i, cell in enumerate(cells):
            if is_test_cell(cell) and nbgrader_meta(cell)["grade_id"].startswith("test_question_"):
                n = nbgrader_meta(cell)["grade_id"].rsplit("_", 1)[1]
                answer = next(c for c in cells[:i] if c.cell_type == "code" and nbgrader_meta(c).get("solution")
                              and re.search(rf"^answer_q{n}\s*=", c.source, re.M))
                found.append((path.parent.name, answer, cell))
    return found


def test_every_exercise_has_graded_questions_and_rewards_understanding():
    """10 points per exercise; at least a fifth for the questions, at most a tenth for module
    contracts (names, None registration, device/dtype, exception types)."""
    for assignment in ASSIGNMENTS:
        cells = nbformat.read(REPO / "solutions" / assignment / f"{assignment}.ipynb", as_version=4).cells
        points = {nbgrader_meta(c)["grade_id"]: nbgrader_meta(c)["points"] for c in cells if is_test_cell(c)}
        assert sum(points.values()) == 10, (assignment, points)
        questions_ = {g: p for g, p in points.items() if g.startswith("test_question_")}
        assert 2 <= len(questions_) <= 3 and set(questions_.values()) == {1}, (assignment, questions_)
        assert sum(p for g, p in points.items() if "contract" in g) <= 1, (assignment, points)
        assert list(points)[-len(questions_):] == sorted(questions_), "the questions come after the parts"


def test_every_question_checks_its_form_visibly_and_its_key_only_in_hidden_tests():
    cells = question_cells()
    assert len(cells) >= 2 * len(ASSIGNMENTS)
    for assignment, answer, test in cells:
        where = (assignment, nbgrader_meta(test)["grade_id"])
        visible, hidden = visible_part(test.source), hidden_part(test.source)
        assert grade_calls(visible) == [], where
        checks = [n for n in ast.walk(ast.parse(visible)) if isinstance(n, ast.Call)
                  and isinstance(n.func, ast.Attribute) and n.func.attr in ("check_choice", "check_number")]
        calls = grade_calls(hidden)
        assert len(checks) == 1 and len(calls) == 1, where
        name = ast.unparse(checks[0].args[0])
        assert ast.unparse(calls[0].args[0]) == name and re.fullmatch(r"answer_q\d+", name), where
        assert len(keyword(calls[0], "why").split()) >= 15, f"{where}: the explanation should teach"
        if calls[0].func.attr == "grade_choice":
            assert checks[0].func.attr == "check_choice", where
            options = keyword(calls[0], "options") or keyword(checks[0], "options")
            assert set(keyword(calls[0], "key")) <= set(options), where
        elif calls[0].func.attr == "grade_observation":  # the key is computed from the student's own result
            assert checks[0].func.attr == "check_choice", where
            holds = next(k.value for k in calls[0].keywords if k.arg == "holds")
            letters = {ast.literal_eval(k) for k in holds.keys} | {keyword(calls[0], "otherwise")}
            assert letters == set(keyword(checks[0], "options")), where
        else:
            assert checks[0].func.attr == "check_number", where
        # The answer cell hides its answer in a solution region, so the release has none.
        assert "### BEGIN SOLUTION" in answer.source and re.search(rf"^{name}\s*=", answer.source, re.M), where


def test_the_source_answers_score_and_a_wrong_answer_is_told_why(capsys):
    """Each question cell, hidden tests included, as the grader runs it: the source's answers pass;
    a plausible wrong answer fails with the explanation."""
    for assignment, answer, test in question_cells():
        where = (assignment, nbgrader_meta(test)["grade_id"])
        namespace: dict = {}
        call = grade_calls(hidden_part(test.source))[0]
        if call.func.attr == "grade_observation":  # graded on a result of the notebook's own code
            exec(setup_source(assignment) + "\n" + solution_code(assignment), namespace)
        exec(answer.source, namespace)
        exec(test.source, namespace)
        name = ast.unparse(call.args[0])
        if call.func.attr == "grade_choice":
            wrong = next(o for o in keyword(call, "options", "abcd") if o not in keyword(call, "key"))
        elif call.func.attr == "grade_observation":
            wrong = next(o for o in "abcd" if o != namespace[name])
        else:
            wrong = keyword(call, "key") * 1.5 + 1.0
        namespace[name] = wrong
        with pytest.raises(CheckFailed) as failure:
            exec(test.source, namespace)
        assert "is not right" in str(failure.value) and keyword(call, "why") in str(failure.value), where
    assert "answer recorded" in capsys.readouterr().out


def test_no_key_explanation_or_answer_reaches_students():
    """The explanations of the hidden tests and the answer cells' solutions are nowhere in the
    release, the autograder package students install, or the book's sources."""
    secrets = question_secrets()
    assert len(secrets) >= 2 * 2 * len(ASSIGNMENTS)  # an explanation and an answer line per question
    assert all(ANSWER_LINE.match(s) or len(s.split()) >= 15 for s in secrets)
    found = []
    for place in (REPO / "exercises", REPO / "autograder", REPO / "book"):
        found += secrets_in(place, secrets)
    assert found == []


# The rule every exercise states once, in these words, above its questions.
SCORING_RULE = (
    "**What earns the point.** Your answer (the letter or the number) decides the point. Where a reason "
    "is asked for, `why_q1` (and so on) must hold a sentence of at least four words, or the question "
    "earns nothing. The grader does not score what the sentence says; your instructor reads it beside "
    "your answer and may take the point away if it shows a right answer reached for a wrong reason."
)
STATES_THE_RULE = ["01_covariate_shift", "02_batch_norm", "02b_batch_norm_backward", "03_layer_norm",
                   "04_instance_group_norm", "05_data_vs_layer_norm", "06_training_dynamics", "07_practice_lab",
                   "08_large_models"]


@pytest.mark.parametrize("assignment", STATES_THE_RULE)
def test_the_notebook_says_what_earns_a_question_its_point(assignment):
    cells = nbformat.read(REPO / "solutions" / assignment / f"{assignment}.ipynb", as_version=4).cells
    text = " ".join(" ".join(c.source.split()) for c in cells if c.cell_type == "markdown")
    assert SCORING_RULE in text


@functools.lru_cache(maxsize=None)
def solution_namespace(assignment: str) -> dict:
    return load_namespace(assignment, solution_code(assignment))


def test_the_stated_rule_holds_a_reason_is_needed_and_not_scored():
    """As the rule says: without a sentence in why_qN the right answer earns nothing; with any
    sentence of four words the grader gives the point (the instructor may take it back by hand)."""
    checked = 0
    for assignment, answer, test in question_cells():
        if "check_justification" not in visible_part(test.source):
            continue
        where = (assignment, nbgrader_meta(test)["grade_id"])
        why = re.search(r"^(why_q\d+)\s*=", answer.source, re.M).group(1)
        for sentence, scores in (("", False), ("because", False), ("this is my reason", True)):
            # The solution's namespace: a question may be graded on what the student's code does
            # (06's Question 3 runs the sweep with their GhostBatchNorm).
            namespace = dict(solution_namespace(assignment))
            exec(answer.source, namespace)
            namespace[why] = sentence
            if scores:
                exec(test.source, namespace)
            else:
                with pytest.raises(CheckFailed, match="justify your answer"):
                    exec(test.source, namespace)
        checked += 1
    assert checked >= 6, checked


# The naive wrong answers of each numeric question (what a student who makes the classic slip gets):
# the key's tolerance must reject every one of them and accept the right answer at the precision the
# question asks for.
NAIVE_ANSWERS = {
    ("01_covariate_shift", 2): [1 / 3.5 ** 0.5, 0.75 / 3.5 ** 0.5],  # 1/σ: μ and σ² held constant; σ² held constant
    ("02_batch_norm", 1): [1.4, 1.9, 2 / 3, 6.1],  # biased variance; m = N; starting from 0; momentum swapped
    ("02b_batch_norm_backward", 3): [(14 / 3) ** -0.5, 7.0, 0.534522 / 4, 0.5],  # unbiased; x for x̂; mean; one digit
    ("03_layer_norm", 2): [1.5, 1.0, 3.0],  # unbiased; BatchNorm's pooling; no division
    ("05_data_vs_layer_norm", 2): [0.5, 0.5 / (1 + 1e-5) ** 0.5],  # transform's value; s² = 1 with ε
    ("06_training_dynamics", 2): [0.9, 0.1, 0.9 ** 15],  # one update per step; momentum itself; off by one
    ("07_practice_lab", 2): [1.0, 192 / 191, 16 / 15, 65536 / 65535],  # no correction; local count; images; n·H·W twice
    # float16's own eps (the docs read literally); LayerNorm's default; a config's rms_norm_eps; bfloat16's; float64's
    ("08_large_models", 1): [2.0 ** -10, 1e-5, 1e-6, 2.0 ** -7, 2.0 ** -52],
    ("08_large_models", 2): [64.0, 1.0, 1 / 8, 8 ** 0.5],  # no 1/√d; unit vectors (cosine); 1/√d alone; √√d
}
# The right answer, as written at the precision the question asks for.
ROUNDED_RIGHT = {
    ("01_covariate_shift", 2): [0.0, 1e-5],
    ("02_batch_norm", 1): [1.567, 1.57],
    ("02b_batch_norm_backward", 3): [0.53, 0.535],
    ("03_layer_norm", 2): [1.732, 1.7320508],  # without ε, the same to six digits
    ("05_data_vs_layer_norm", 2): [158.1, 158.0],
    ("06_training_dynamics", 2): [0.185, 0.1853],
    ("07_practice_lab", 2): [1.000978, 1.00098],
    ("08_large_models", 1): [1.19e-7, 1.1920929e-07],
    ("08_large_models", 2): [8, 8.0],
}


def test_every_numeric_key_tells_the_right_answer_from_the_naive_ones():
    numeric = {}
    for assignment, answer, test in question_cells():
        call = grade_calls(hidden_part(test.source))[0]
        if call.func.attr == "grade_number":
            numeric[(assignment, int(nbgrader_meta(test)["grade_id"].rsplit("_", 1)[1]))] = call
    # every numeric question of these exercises has its naive answers here
    assert {k for k in numeric if k[0] in STATES_THE_RULE} <= set(NAIVE_ANSWERS), sorted(numeric)
    for where, call in numeric.items():
        if where not in NAIVE_ANSWERS:
            continue
        tolerance = {"key": keyword(call, "key"), "rtol": keyword(call, "rtol", 0.02), "atol": keyword(call, "atol", 0.0)}
        for right in ROUNDED_RIGHT[where]:
            questions.grade_number(right, "Q", why="", **tolerance)
        for naive in NAIVE_ANSWERS[where]:
            with pytest.raises(CheckFailed, match="not right"):
                questions.grade_number(naive, "Q", why="", **tolerance)


def test_the_stated_tolerance_is_the_keys():
    """A question that says "graded within 1 % (or 10⁻⁴) of the right value" is graded so."""
    stated = 0
    for path in source_notebooks():
        cells = nbformat.read(path, as_version=4).cells
        for i, cell in enumerate(cells):
            if not (is_test_cell(cell) and nbgrader_meta(cell)["grade_id"].startswith("test_question_")):
                continue
            call = grade_calls(hidden_part(cell.source))[0]
            text = " ".join(next(c.source for c in reversed(cells[:i]) if c.cell_type == "markdown").split())
            percent = re.search(r"graded within (\d+(?:\.\d+)?) % of the right value", text)
            power = re.search(r"graded within \$10\^\{(-\d+)\}\$ of the right value", text)
            if percent or power:
                stated += 1
                rtol, atol = keyword(call, "rtol", 0.02), keyword(call, "atol", 0.0)
                expected = (float(percent.group(1)) / 100, 0.0) if percent else (0.0, 10.0 ** int(power.group(1)))
                assert (rtol, atol) == pytest.approx(expected), (path.parent.name, call.args[1], (rtol, atol), expected)
    assert stated >= 4, stated
