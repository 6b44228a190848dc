"""Which files of the grader reach the student's side: the allow-list of autograder.grading.parts."""
from __future__ import annotations

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
