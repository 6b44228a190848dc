"""The real nbgrader pipeline, driven by the class-grading command, on the demo class.

generate_assignment must reproduce the committed release; ``python -m autograder.grade`` must
give the solution full marks, the stub zero, bugs partial credit, cheats nothing for the parts
they cheat on, and grade everyone else when some notebooks hang, kill their kernel or flood
their output; it must list the submissions that need attention and why. Feedback must show the
checks' messages and no hidden test source; export must list the grades. Scores are read from
the gradebook.
"""
from __future__ import annotations

import csv
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from course import ASSIGNMENTS, REPO, tool_env
from demo_class import CLASSES, NOT_GRADED, TEST_CELLS, build_course
from leaks import html_text, leaked

pytestmark = pytest.mark.slow
NBGRADER = [sys.executable, "-m", "nbgrader"]
# Short limits so that the misbehaving notebooks cost seconds, not minutes.
GRADE_OPTIONS = ["--workers", "2", "--cell-timeout", "15", "--timeout", "120", "--memory-mb", "3072"]


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(NBGRADER + list(args), cwd=course, capture_output=True, text=True, timeout=1800, env=tool_env())


def grade(course: Path, assignment: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "autograder.grade", assignment, *GRADE_OPTIONS]
    return subprocess.run(command, cwd=course, capture_output=True, text=True, timeout=3600, env=tool_env())


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("course")
    return root, build_course(root)


@pytest.fixture(scope="module")
def graded(course) -> dict[str, subprocess.CompletedProcess]:
    root, classes = course
    runs = {}
    for assignment, students in classes.items():
        start = time.monotonic()
        runs[assignment] = grade(root, assignment)
        elapsed = time.monotonic() - start
        print(f"\nautograder.grade {assignment}: {len(students)} submissions in {elapsed:.1f} s "
              f"({elapsed / len(students):.1f} s each, 2 workers)\n{runs[assignment].stdout[-2500:]}")
    return runs


def scores(root: Path, assignment: str) -> dict[str, list[float] | None]:
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        graded = {s.student.id for s in gradebook.find_assignment(assignment).submissions}
        result = {}
        for student in graded:
            notebook = gradebook.find_submission_notebook(assignment, assignment, student)
            points = {g.name: g.score for g in notebook.grades}
            result[student] = [points[t] for t in TEST_CELLS[assignment]]
    return result


def test_every_assignment_has_a_class():
    assert sorted(CLASSES) == sorted(ASSIGNMENTS)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_generate_assignment_reproduces_the_committed_release(course, assignment):
    root, _ = course
    generated = root / "exercises" / assignment / f"{assignment}.ipynb"
    committed = REPO / "exercises" / assignment / f"{assignment}.ipynb"
    assert generated.read_bytes() == committed.read_bytes(), (
        f"exercises/ is out of date: run `nbgrader generate_assignment {assignment} --force` and commit it"
    )
    assert sorted(p.name for p in generated.parent.iterdir()) == sorted(p.name for p in committed.parent.iterdir())


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_student_scores_as_expected(course, graded, assignment):
    root, classes = course
    got = scores(root, assignment)
    expected = {s: points for s, (_, points) in classes[assignment].items() if points is not NOT_GRADED}
    assert got == expected
    ungraded = sorted(s for s, (_, points) in classes[assignment].items() if points is NOT_GRADED)
    # The command exits 1 exactly when some submission could not be graded.
    assert graded[assignment].returncode == (1 if ungraded else 0), graded[assignment].stderr[-3000:]
    for student in ungraded:
        assert f"{student}: NOT GRADED:" in graded[assignment].stdout


def test_the_report_says_why_submissions_need_attention(graded):
    report = graded["02_batch_norm"].stdout.split("need attention:", 1)[1]
    assert "ignores_interrupts: NOT GRADED:" in report and "kills_kernel: NOT GRADED:" in report
    assert "kernel died" in report
    assert "test cell test_running_statistics was edited" in report
    assert "test cell test_module_contract was deleted" in report
    assert "tampering with torch, numpy or autograder detected" in report  # grader_disabled, allclose_rebound
    assert "uses torch's own normalization" in report  # subclass_cheat
    assert "welford:" not in report and "eps_outside_sqrt:" not in report  # honest work is not listed


def test_grading_again_gives_the_same_scores(course, graded):
    root, _ = course
    assignment = "03_layer_norm"
    before = scores(root, assignment)
    again = grade(root, assignment)
    assert again.returncode == 0, again.stdout[-3000:]
    assert scores(root, assignment) == before


def test_rechecked_cells_say_why_they_lost_their_points(course, graded):
    root, _ = course
    path = root / "autograded" / "grader_disabled" / "02_batch_norm" / "02_batch_norm.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_running_statistics")
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert errors and errors[-1].ename == "RecheckFailed"
    assert "the notebook replaced autograder." in errors[-1].evalue


FEEDBACK_PHRASES = {
    "01_covariate_shift": ("standardize_unbiased", "unbiased variance"),
    "02_batch_norm": ("running_var_biased", "running_var is off by a factor n/(n − 1)"),
    "03_layer_norm": ("siglip_default_eps", "has eps=1e-05"),
    "04_instance_group_norm": ("strided_groups", "strided"),
    "05_data_vs_layer_norm": ("unbiased", "unbiased variance"),
}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_feedback_shows_messages_but_no_hidden_tests(course, graded, assignment):
    root, classes = course
    done = nbgrader(root, "generate_feedback", assignment, "--force")
    assert done.returncode == 0, done.stderr[-3000:]
    pages = {p.parts[-3]: html_text(p.read_text()) for p in (root / "feedback").glob(f"*/{assignment}/*.html")}
    assert set(pages) == {s for s, (_, points) in classes[assignment].items() if points is not NOT_GRADED}
    for student, text in pages.items():
        assert leaked(text, kinds=("HIDDEN TESTS",)) == [], student
        # Test cells show the message only: no frames of the grader (a student's own cells keep
        # their tracebacks, which show only the student's code).
        assert "autograder/" not in text and "check_untampered" not in text, student
    if "grader_disabled" in pages:
        assert "RecheckFailed" in pages["grader_disabled"]
    student, phrase = FEEDBACK_PHRASES[assignment]
    assert phrase in pages[student]


def test_export_lists_every_students_grade(course, graded):
    root, classes = course
    done = nbgrader(root, "export", "--to", str(root / "grades.csv"))
    assert done.returncode == 0, done.stderr[-3000:]
    with open(root / "grades.csv") as f:
        rows = {(row["assignment"], row["student_id"]): float(row["score"]) for row in csv.DictReader(f)}
    everyone = {student for students in classes.values() for student in students}
    expected = {
        # nbgrader lists every student for every assignment; no graded submission scores 0.
        (assignment, student): float(sum(classes[assignment][student][1] or []))
        if student in classes[assignment] else 0.0
        for assignment in classes
        for student in everyone
    }
    assert rows == expected
