"""Which files of the grader reach the student's side: the allow-list of autograder.grading.parts."""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder.grading import parts
from course import REPO


@pytest.mark.parametrize("name", [
    "__init__.py", "core/engine.py", "exercises/ex02_batch_norm/checks.py",
    "exercises/ex03_layer_norm/siglip_reference.pt", "sandbox/agent.py", "core/withheld.py",
])
def test_the_student_part_is_let_through(name):
    assert parts.is_student_file(name)


@pytest.mark.parametrize("name", [
    "grade.py", "grading/sandbox.py", "grading/templates/course_feedback/index.html.j2",
    "exercises/ex02_batch_norm/hidden.py", "exercises/ex03_layer_norm/hidden.pt",
    "exercises/ex02_batch_norm/__pycache__/checks.cpython-311.pyc",
    # what editors and JupyterLab leave beside the files (an attacking student's finds)
    "exercises/ex03_layer_norm/.ipynb_checkpoints/hidden-checkpoint.py",
    "exercises/ex03_layer_norm/.ipynb_checkpoints/checks-checkpoint.py",
    "exercises/ex03_layer_norm/.hidden.py.swp", "exercises/ex03_layer_norm/#hidden.py#",
    "exercises/ex03_layer_norm/hidden/cases.py", "exercises/ex03_layer_norm/Hidden.py",
    "exercises/ex03_layer_norm/hidden_v2.py", "exercises/ex03_layer_norm/checks.py~",
    "exercises/ex03_layer_norm/checks.py.orig", "exercises/ex03_layer_norm/notes.txt",
])
def test_the_graders_part_and_droppings_are_not(name):
    assert not parts.is_student_file(name)


def test_the_student_files_of_this_package_hold_every_exercise_and_no_hidden_case():
    found = [str(name) for name in parts.student_files(REPO / "autograder")]
    exercises = sorted(p.name for p in (REPO / "autograder" / "exercises").iterdir() if p.name.startswith("ex"))
    assert exercises and all(f"exercises/{ex}/checks.py" in found for ex in exercises)
    assert not [name for name in found if "hidden" in name or name.startswith("grading/")]


def test_a_grader_without_the_hidden_cases_refuses_to_grade(tmp_path):
    """A student's install (no hidden.py) must never grade: every hidden test would fail."""
    import shutil
    import subprocess
    import sys

    student = tmp_path / "autograder"
    for name in parts.student_files(REPO / "autograder"):
        (student / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / "autograder" / name, student / name)
    code = ("from autograder.core import withheld\n"
            "try:\n    withheld.check_present()\nexcept withheld.HiddenCasesUnavailable as e:\n    print('refused:', e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert done.stdout.startswith("refused: this grader has no hidden cases for ex01_covariate_shift"), done.stderr
    from autograder.core import withheld
    withheld.check_present()  # the instructor's install has them all


def test_a_course_inside_a_folder_the_sandbox_shows_is_refused(tmp_path):
    import sys

    from autograder.grading import sandbox
    with pytest.raises(sandbox.SandboxUnavailable, match="move the course elsewhere"):
        sandbox.check_course_outside(Path("/usr/local/src/course"))
    with pytest.raises(sandbox.SandboxUnavailable):
        sandbox.check_course_outside(Path(sys.prefix) / "course")
    sandbox.check_course_outside(tmp_path)  # the tests' courses live in the temp folder
