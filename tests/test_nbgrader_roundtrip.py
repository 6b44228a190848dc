"""The real nbgrader pipeline on a temporary copy of the course.

generate_assignment must reproduce the committed release; autograde must give the solution
full marks, the stub zero, bugs partial credit and cheats nothing for the parts they cheat on;
feedback must show the checks' messages and no hidden test source; export must list the grades.
Scores are read from the gradebook.
"""
from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from leaks import html_text, leaked
from course import ASSIGNMENTS, GRADER_DISABLING_CELL, REPO, SUBMISSIONS, notebook_with_code, solution_code, source_notebook, tool_env

pytestmark = pytest.mark.slow
NBGRADER = [sys.executable, "-m", "nbgrader"]
TEST_CELLS = {
    "01_covariate_shift": ["test_activation_stats", "test_layer_input", "test_distribution_shift", "test_batch_standardize"],
    "02_batch_norm": ["test_batch_mean_var", "test_training_forward", "test_running_statistics", "test_module_contract"],
}


def catalogue(assignment: str, name: str) -> str:
    return (SUBMISSIONS / assignment.split("_", 1)[1] / f"{name}.py").read_text()


def edit_test_cell(assignment: str, code: str, grade_id: str) -> nbformat.NotebookNode:
    nb = notebook_with_code(assignment, code)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id).source = "pass"
    return nb


def delete_test_cell(assignment: str, code: str, grade_id: str) -> nbformat.NotebookNode:
    nb = notebook_with_code(assignment, code)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != grade_id]
    return nb


def release(assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(REPO / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)


def batch_norm_class() -> dict[str, tuple[nbformat.NotebookNode, list[float]]]:
    """student id -> (notebook, expected points per test cell) for 02_batch_norm."""
    a = "02_batch_norm"
    solution = solution_code(a)
    return {
        "solution": (source_notebook(a), [2, 3, 3, 2]),
        "stub": (release(a), [0, 0, 0, 0]),
        "welford": (notebook_with_code(a, catalogue(a, "correct_welford")), [2, 3, 3, 2]),
        "running_var_biased": (notebook_with_code(a, catalogue(a, "bug_running_var_biased")), [2, 3, 0, 2]),
        "eps_outside_sqrt": (notebook_with_code(a, catalogue(a, "bug_eps_outside_sqrt")), [2, 0, 0, 2]),
        "no_input_check": (notebook_with_code(a, catalogue(a, "bug_no_input_check")), [2, 3, 3, 0]),
        # Right statistics, torch's own batch norm in the modules.
        "subclass_cheat": (notebook_with_code(a, catalogue(a, "cheat_subclass_torch")), [2, 0, 0, 0]),
        # A bug plus a cell that disables the grader in the kernel: the clean re-check notices
        # the tampering, and nothing after it is credited.
        "grader_disabled": (notebook_with_code(a, catalogue(a, "bug_running_var_biased"), [GRADER_DISABLING_CELL]), [0, 0, 0, 0]),
        # Correct code that rebinds torch.allclose: nothing is credited after the rebinding.
        "allclose_rebound": (notebook_with_code(a, solution + "\nimport torch\ntorch.allclose = lambda *a, **k: True\n"), [0, 0, 0, 0]),
        # A notebook that calls sys.exit() in a cell of its own still gets graded.
        "sys_exit": (notebook_with_code(a, solution, ["import sys\nsys.exit(0)"]), [2, 3, 3, 2]),
        "syntax_error": (notebook_with_code(a, "def batch_mean_var(x):\n    return (x.mean(0)"), [0, 0, 0, 0]),
        # Test cells edited or deleted by the student: nbgrader restores edited ones; a deleted
        # one scores nothing.
        "edited_test": (edit_test_cell(a, catalogue(a, "bug_running_var_biased"), "test_running_statistics"), [2, 3, 0, 2]),
        "deleted_test": (delete_test_cell(a, solution, "test_module_contract"), [2, 3, 3, 0]),
    }


def covariate_shift_class() -> dict[str, tuple[nbformat.NotebookNode, list[float]]]:
    a = "01_covariate_shift"
    return {
        "solution": (source_notebook(a), [3, 2, 2, 3]),
        "stub": (release(a), [0, 0, 0, 0]),
        "alternatives": (notebook_with_code(a, catalogue(a, "correct_alternatives")), [3, 2, 2, 3]),
        "hooks_not_removed": (notebook_with_code(a, catalogue(a, "bug_hooks_not_removed")), [0, 2, 2, 3]),
        "standardize_unbiased": (notebook_with_code(a, catalogue(a, "bug_standardize_unbiased")), [3, 2, 2, 0]),
        "layer_norm_cheat": (notebook_with_code(a, catalogue(a, "cheat_layer_norm_transposed")), [3, 2, 2, 0]),
        "grader_disabled": (notebook_with_code(a, catalogue(a, "bug_unbiased_std"), [GRADER_DISABLING_CELL]), [0, 0, 0, 0]),
    }


CLASSES = {"01_covariate_shift": covariate_shift_class, "02_batch_norm": batch_norm_class}


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(NBGRADER + list(args), cwd=course, capture_output=True, text=True, timeout=1800, env=tool_env())


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("course")
    shutil.copy(REPO / "nbgrader_config.py", root)
    shutil.copytree(REPO / "solutions", root / "solutions")
    for assignment in ASSIGNMENTS:
        done = nbgrader(root, "generate_assignment", assignment, "--force")
        assert done.returncode == 0, done.stderr
    return root


@pytest.fixture(scope="module")
def graded(course: Path) -> dict[str, dict]:
    classes = {assignment: CLASSES[assignment]() for assignment in ASSIGNMENTS}
    for assignment, students in classes.items():
        for student, (nb, _) in students.items():
            folder = course / "submitted" / student / assignment
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / f"{assignment}.ipynb")
    for assignment, students in classes.items():
        start = time.monotonic()
        done = nbgrader(course, "autograde", assignment, "--create", "--force")
        elapsed = time.monotonic() - start
        print(f"\nnbgrader autograde {assignment}: {len(students)} submissions in {elapsed:.1f} s "
              f"({elapsed / len(students):.1f} s each, nbgrader start-up included)")
        assert done.returncode == 0, done.stderr[-3000:]
    return classes


def test_every_assignment_has_a_class():
    assert sorted(CLASSES) == sorted(ASSIGNMENTS)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_generate_assignment_reproduces_the_committed_release(course, assignment):
    generated = course / "exercises" / assignment / f"{assignment}.ipynb"
    committed = REPO / "exercises" / assignment / f"{assignment}.ipynb"
    assert generated.read_bytes() == committed.read_bytes(), (
        f"exercises/ is out of date: run `nbgrader generate_assignment {assignment} --force` and commit it"
    )
    assert sorted(p.name for p in generated.parent.iterdir()) == sorted(p.name for p in committed.parent.iterdir())


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_autograde_scores_every_student_as_expected(course, graded, assignment):
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student, (_, expected) in graded[assignment].items():
            submission = gradebook.find_submission_notebook(assignment, assignment, student)
            points = {g.name: g.score for g in submission.grades}
            assert [points[t] for t in TEST_CELLS[assignment]] == expected, (student, points)


def test_rechecked_cells_say_why_they_lost_their_points(course, graded):
    path = course / "autograded" / "grader_disabled" / "02_batch_norm" / "02_batch_norm.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_running_statistics")
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert errors and errors[-1].ename == "RecheckFailed"
    assert "the notebook replaced autograder." in errors[-1].evalue


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_feedback_shows_messages_but_no_hidden_tests(course, graded, assignment):
    done = nbgrader(course, "generate_feedback", assignment, "--force")
    assert done.returncode == 0, done.stderr[-3000:]
    pages = {p.parts[-3]: html_text(p.read_text()) for p in (course / "feedback").glob(f"*/{assignment}/*.html")}
    assert set(pages) == set(graded[assignment])
    for student, text in pages.items():
        assert leaked(text, kinds=("HIDDEN TESTS",)) == [], student
        # Test cells show the message only: no frames of the grader (a student's own cells keep
        # their tracebacks, which show only the student's code).
        assert "autograder/" not in text and "check_untampered" not in text, student
        assert "RecheckFailed" in pages["grader_disabled"]
    if assignment == "02_batch_norm":
        assert "running_var is off by a factor n/(n − 1)" in pages["running_var_biased"]
    else:
        assert "unbiased variance" in pages["standardize_unbiased"]


def test_export_lists_every_students_grade(course, graded):
    done = nbgrader(course, "export", "--to", str(course / "grades.csv"))
    assert done.returncode == 0, done.stderr[-3000:]
    with open(course / "grades.csv") as f:
        rows = {(row["assignment"], row["student_id"]): float(row["score"]) for row in csv.DictReader(f)}
    everyone = {student for students in graded.values() for student in students}
    expected = {
        # nbgrader lists every student for every assignment; no submission scores 0.
        (assignment, student): float(sum(graded[assignment][student][1])) if student in graded[assignment] else 0.0
        for assignment in graded
        for student in everyone
    }
    assert rows == expected
