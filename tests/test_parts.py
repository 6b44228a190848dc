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
# --- the student's view: the visible checks of 02b and 05 without the grader-only references -----

# Run in a subprocess whose PYTHONPATH is a copy of the student's files only: each submission's
# set-up cell, code and given cells, then each visible check cell of the released notebook, as a
# student's kernel runs them. A check cell's verdict: None (passed) or the CheckFailed message;
# any other exception is a crash and fails the run.
STUDENT_KERNEL = r'''
import json, sys
from pathlib import Path

import autograder
from autograder import CheckFailed

assert Path(autograder.__file__).resolve().is_relative_to(Path.cwd().resolve()), autograder.__file__
results = {}
for label, (source, cells) in json.loads(sys.stdin.read()).items():
    namespace = {"__name__": "__main__"}
    exec(compile(source, label, "exec"), namespace)
    verdicts = []
    for cell in cells:
        try:
            exec(compile(cell, label + " (check cell)", "exec"), namespace)
        except CheckFailed as failure:
            verdicts.append(str(failure))
        else:
            verdicts.append(None)
    results[label] = verdicts
print(json.dumps(results))
'''
# Distinctive lines of the grader-only references: the closed-form backward and the standardizer.
SOLUTION_LINES = {
    "exercises/ex02b_batch_norm_backward/hidden_formulas.py": [
        "var, mean = torch.var_mean(x, dim=axes.stat_dims, correction=correction, keepdim=True)",
        "out = out - xhat * reduce(ghat * xhat, dim=d, keepdim=True)",
        "def input_gradient(",
    ],
    "exercises/ex05_data_vs_layer_norm/hidden_reference.py": [
        "constant = x.amax(dim=dims) == x.amin(dim=dims)",
        "scale = torch.where(constant, torch.ones_like(var), var.sqrt())",
        "return (x - view(mean, x.dim())) / view(scale, x.dim())",
        "return z * view(scale, z.dim()) + view(mean, z.dim())",
    ],
}


def _student_package(folder):
    package = REPO / "autograder"
    for name in parts.student_files(package):
        target = folder / "autograder" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((package / name).read_bytes())
    return folder


def test_no_student_file_holds_the_closed_form_backward_or_the_standardizer():
    package = REPO / "autograder"
    student = {str(name): (package / name).read_text() for name in parts.student_files(package) if name.suffix == ".py"}
    for module, lines in SOLUTION_LINES.items():
        assert module not in student and all(line in (package / module).read_text() for line in lines), module
        assert not [(name, line) for name, text in student.items() for line in lines if line in text]


def test_the_visible_checks_of_02b_and_05_run_in_the_students_install(tmp_path):
    import json
    import os
    import subprocess
    import sys

    from course import given_sources, is_test_cell, release_notebook, setup_source, solution_code, submission_files

    def submission(assignment, code):
        source = "\n\n".join([setup_source(assignment), code, *given_sources(assignment)])
        cells = [c.source for c in release_notebook(assignment).cells if is_test_cell(c) and "checks.check_" in c.source]
        return source, cells

    def bug(assignment, name):
        return next(p for p in submission_files(assignment, "bug") if p.stem == name).read_text()

    backward, data = "02b_batch_norm_backward", "05_data_vs_layer_norm"
    runs = {
        "02b solution": submission(backward, solution_code(backward)),
        "02b no mean path": submission(backward, bug(backward, "bug_no_mean_path")),
        "05 solution": submission(data, solution_code(data)),
        "05 transform by var": submission(data, bug(data, "bug_transform_by_var")),
        "05 unbiased variance": submission(data, bug(data, "bug_unbiased_variance")),
    }
    folder = _student_package(tmp_path)
    assert not list(folder.rglob("hidden*"))
    env = {**os.environ, "PYTHONPATH": str(folder)}
    done = subprocess.run([sys.executable, "-c", STUDENT_KERNEL], input=json.dumps(runs), cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["02b solution"] == [None, None] and got["05 solution"] == [None] * 4, got
    # the gradient's hint is the grader's: the message says what differs and points to the chapter
    for message in got["02b no mean path"]:
        assert message and "∂L/∂x differs from the reference" in message, message
        assert "book/02b_batch_norm_backward.md" in message and "path through the mean" not in message, message
    fit, transform, images, batch_norm = got["05 transform by var"]
    assert fit is None and images is None and batch_norm is None, got["05 transform by var"]
    assert transform and "transform(x_new)" in transform and "book/05_data_vs_layer_norm.md" in transform, transform
    assert "divides by var_" not in transform, transform
    # the hints that hold no formula stay on the student's side
    fit, *others = got["05 unbiased variance"]
    assert fit and "unbiased variance" in fit and others == [None] * 3, got["05 unbiased variance"]
