"""A realistic class for every exercise: correct, partly correct, the common bugs, the cheats, and
notebooks that misbehave (hang, ignore interrupts, kill their kernel, eat memory, flood the output,
call sys.exit, do not parse). The expected points of each test cell are part of the class.

    python tests/demo_class.py /tmp/demo-course      # builds the course and its submissions
    cd /tmp/demo-course && python -m autograder.grade 02_batch_norm --workers 2

The test suite grades it (tests/test_nbgrader_roundtrip.py) and asserts every score.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from course import ASSIGNMENTS, GRADER_DISABLING_CELL, REPO, SUBMISSIONS, notebook_with_code, solution_code, source_notebook, tool_env

NOT_GRADED = None  # expected points of a submission the grader must give up on (and say why)


def questions(n: int) -> list[str]:
    """The test cells of an exercise's graded questions, at the end of the notebook."""
    return [f"test_question_{i}" for i in range(1, n + 1)]


TEST_CELLS = {
    "01_covariate_shift": ["test_activation_stats", "test_layer_input", "test_distribution_shift", "test_batch_standardize",
                           *questions(2)],
    "02_batch_norm": ["test_batch_mean_var", "test_training_forward", "test_running_statistics", "test_module_contract",
                      *questions(2)],
    "03_layer_norm": ["test_forward", "test_module_contract", "test_siglip_encoder", *questions(3)],
    "04_instance_group_norm": ["test_group_norm_forward", "test_group_norm_contract",
                               "test_instance_norm_forward", "test_instance_norm_contract", *questions(2)],
    "05_data_vs_layer_norm": ["test_fit", "test_transform", "test_images", "test_as_batch_norm", *questions(3)],
    "02b_batch_norm_backward": ["test_batch_norm_function", "test_layer_norm_function", *questions(3)],
    "06_training_dynamics": ["test_ghost_batch_norm", "test_diagnostics", "test_fold_batch_norm", *questions(3)],
    "07_practice_lab": ["test_sync_batch_norm", "test_masked_batch_norm", "test_frozen_batch_norm", "test_recalibrate_bn",
                        "test_float32_stats_layer_norm", *questions(2)],
    "08_large_models": ["test_rms_norm_forward", "test_rms_norm_contract", "test_qk_norm_attention", "test_dyt",
                        *questions(2)],
}
# Expected points are per test cell, in that order. The code parts come first, the questions
# last. A submission built from a catalogue file (notebook_with_code) leaves the answer cells
# empty and earns nothing for the questions; the source notebook and the notebooks built from
# solution_code (every solution cell, answers included) earn them.

# The 02_batch_norm source notebook with wrong answers, the misconceptions the questions name:
# full points for the code, none for the questions, and feedback that explains both.
WRONG_ANSWERS = {
    "answer_q1": "answer_q1 = 1.4  # the biased variance fed to running_var",
    "answer_q2": 'answer_q2 = "a"\nwhy_q2 = "The channel is constant, so its variance is zero and only beta remains."',
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


def with_answers(assignment: str, answers: dict[str, str]) -> nbformat.NotebookNode:
    """The source notebook with the answer cells named in ``answers`` (grade id -> source) replaced."""
    nb = source_notebook(assignment)
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
    for grade_id, source in answers.items():
        cells[grade_id].source = source
    return nb


def batch_norm_class() -> dict[str, tuple[nbformat.NotebookNode, list[float]]]:
    """student id -> (notebook, expected points per test cell) for 02_batch_norm."""
    a = "02_batch_norm"
    solution = solution_code(a)
    return {
        "solution": (source_notebook(a), [2, 2, 3, 1, 1, 1]),
        "wrong_answers": (with_answers(a, WRONG_ANSWERS), [2, 2, 3, 1, 0, 0]),
        "stub": (release(a), [0, 0, 0, 0, 0, 0]),
        "welford": (notebook_with_code(a, catalogue(a, "correct_welford")), [2, 2, 3, 1, 0, 0]),
        "running_var_biased": (notebook_with_code(a, catalogue(a, "bug_running_var_biased")), [2, 2, 0, 1, 0, 0]),
        "eps_outside_sqrt": (notebook_with_code(a, catalogue(a, "bug_eps_outside_sqrt")), [2, 0, 0, 1, 0, 0]),
        "no_input_check": (notebook_with_code(a, catalogue(a, "bug_no_input_check")), [2, 2, 3, 0, 0, 0]),
        # Right statistics, torch's own batch norm in the modules.
        "subclass_cheat": (notebook_with_code(a, catalogue(a, "cheat_subclass_torch")), [2, 0, 0, 0, 0, 0]),
        # A bug plus a cell that disables the grader in the kernel: the grader's side of the
        # conversation is gone with it, nothing can be checked, and nothing is credited.
        "grader_disabled": (notebook_with_code(a, catalogue(a, "bug_running_var_biased"), [GRADER_DISABLING_CELL]), [0] * 6),
        # Correct code that rebinds torch.allclose: the verdicts do not depend on it, but tampering
        # with torch earns nothing.
        "allclose_rebound": (notebook_with_code(a, solution + "\nimport torch\ntorch.allclose = lambda *a, **k: True\n"), [0] * 6),
        # A notebook that calls sys.exit() in a cell of its own still gets graded.
        "sys_exit": (notebook_with_code(a, solution, ["import sys\nsys.exit(0)"]), [2, 2, 3, 1, 1, 1]),
        "syntax_error": (notebook_with_code(a, "def batch_mean_var(x):\n    return (x.mean(0)"), [0] * 6),
        # Test cells edited or deleted by the student: nbgrader restores edited ones; a deleted
        # one scores nothing.
        "edited_test": (edit_test_cell(a, catalogue(a, "bug_running_var_biased"), "test_running_statistics"), [2, 2, 0, 1, 0, 0]),
        "deleted_test": (delete_test_cell(a, solution, "test_module_contract"), [2, 2, 3, 0, 1, 1]),
    }


def covariate_shift_class() -> dict[str, tuple[nbformat.NotebookNode, list[float]]]:
    a = "01_covariate_shift"
    return {
        "solution": (source_notebook(a), [2, 2, 2, 2, 1, 1]),
        "stub": (release(a), [0] * 6),
        "alternatives": (notebook_with_code(a, catalogue(a, "correct_alternatives")), [2, 2, 2, 2, 0, 0]),
        "hooks_not_removed": (notebook_with_code(a, catalogue(a, "bug_hooks_not_removed")), [0, 2, 2, 2, 0, 0]),
        # right on every visible check; the hidden in-place ReLU case overwrites the output it kept
        "stats_not_cloned": (notebook_with_code(a, catalogue(a, "bug_stats_not_cloned")), [0, 2, 2, 2, 0, 0]),
        "standardize_unbiased": (notebook_with_code(a, catalogue(a, "bug_standardize_unbiased")), [2, 2, 2, 0, 0, 0]),
        "layer_norm_cheat": (notebook_with_code(a, catalogue(a, "cheat_layer_norm_transposed")), [2, 2, 2, 0, 0, 0]),
        "grader_disabled": (notebook_with_code(a, catalogue(a, "bug_unbiased_std"), [GRADER_DISABLING_CELL]), [0] * 6),
    }


def layer_norm_class() -> dict[str, tuple[nbformat.NotebookNode, list[float]]]:
    a = "03_layer_norm"
    return {
        "solution": (source_notebook(a), [3, 1, 3, 1, 1, 1]),
        "stub": (release(a), [0] * 6),
        "welford": (notebook_with_code(a, catalogue(a, "correct_welford")), [3, 1, 3, 0, 0, 0]),
        "eps_hardcoded": (notebook_with_code(a, catalogue(a, "bug_eps_hardcoded")), [0, 1, 3, 0, 0, 0]),  # Part 3 grades the wiring
        "siglip_default_eps": (notebook_with_code(a, catalogue(a, "bug_siglip_default_eps")), [3, 1, 0, 0, 0, 0]),
        "functional_cheat": (notebook_with_code(a, catalogue(a, "cheat_functional_layer_norm")), [0] * 6),
        "torch_norm_in_encoder": (notebook_with_code(a, catalogue(a, "cheat_torch_layernorm_in_encoder")), [3, 1, 0, 0, 0, 0]),
    }


def instance_group_norm_class() -> dict[str, tuple[nbformat.NotebookNode, list[float]]]:
    a = "04_instance_group_norm"
    return {
        "solution": (source_notebook(a), [3.5, 0.5, 3.5, 0.5, 1, 1]),
        "stub": (release(a), [0] * 6),
        "einsum": (notebook_with_code(a, catalogue(a, "correct_einsum_permute")), [3.5, 0.5, 3.5, 0.5, 0, 0]),
        "strided_groups": (notebook_with_code(a, catalogue(a, "bug_gn_strided_groups")), [0, 0.5, 3.5, 0.5, 0, 0]),
        "running_var_biased": (notebook_with_code(a, catalogue(a, "bug_in_running_var_biased")), [3.5, 0.5, 0, 0.5, 0, 0]),
        "batch_norm_cheat": (notebook_with_code(a, catalogue(a, "cheat_instance_via_batch_norm")), [3.5, 0.5, 0, 0, 0, 0]),
    }


def data_norm_class() -> dict[str, tuple[nbformat.NotebookNode, list[float]]]:
    a = "05_data_vs_layer_norm"
    return {
        "solution": (source_notebook(a), [2, 2, 1, 2, 1, 1, 1]),
        "stub": (release(a), [0] * 7),
        "welford": (notebook_with_code(a, catalogue(a, "correct_welford")), [2, 2, 1, 2, 0, 0, 0]),
        "unbiased": (notebook_with_code(a, catalogue(a, "bug_unbiased_variance")), [0, 2, 1, 2, 0, 0, 0]),
        "per_pixel": (notebook_with_code(a, catalogue(a, "bug_images_per_pixel")), [2, 2, 0, 2, 0, 0, 0]),
        "bn_default_eps": (notebook_with_code(a, catalogue(a, "bug_bn_default_eps")), [2, 2, 1, 0, 0, 0, 0]),
        # Takes the data to numpy/scikit-learn and back: only the BatchNorm part is honest.
        "sklearn_cheat": (notebook_with_code(a, catalogue(a, "cheat_sklearn_roundtrip")), [0, 0, 0, 2, 0, 0, 0]),
        "grader_disabled": (notebook_with_code(a, catalogue(a, "bug_unbiased_variance"), [GRADER_DISABLING_CELL]), [0] * 7),
    }


def backward_class() -> dict[str, tuple[nbformat.NotebookNode, list[float]]]:
    a = "02b_batch_norm_backward"
    return {
        "solution": (source_notebook(a), [4, 3, 1, 1, 1]),
        "stub": (release(a), [0] * 5),
        "step_by_step": (notebook_with_code(a, catalogue(a, "correct_step_by_step")), [4, 3, 0, 0, 0]),
        "no_mean_path": (notebook_with_code(a, catalogue(a, "bug_no_mean_path")), [0, 0, 0, 0, 0]),
        "param_grads_swapped": (notebook_with_code(a, catalogue(a, "bug_param_grads_swapped")), [0, 0, 0, 0, 0]),
        "gamma_outside_means": (notebook_with_code(a, catalogue(a, "bug_layer_norm_gamma_outside_means")), [4, 0, 0, 0, 0]),
        # Right numbers, but autograd differentiates inside the Function: nothing for either part.
        "autograd_cheat": (notebook_with_code(a, catalogue(a, "cheat_autograd_in_backward")), [0, 0, 0, 0, 0]),
        "grader_disabled": (notebook_with_code(a, catalogue(a, "bug_no_mean_path"), [GRADER_DISABLING_CELL]), [0] * 5),
    }


def training_dynamics_class() -> dict[str, tuple[nbformat.NotebookNode, list[float]]]:
    a = "06_training_dynamics"
    return {
        "solution": (source_notebook(a), [3, 2, 2, 1, 1, 1]),
        "stub": (release(a), [0] * 6),
        "explicit_loops": (notebook_with_code(a, catalogue(a, "correct_explicit_loops")), [3, 2, 2, 0, 0, 0]),
        "whole_batch": (notebook_with_code(a, catalogue(a, "bug_whole_batch")), [0, 2, 2, 0, 0, 0]),
        "fold_no_eps": (notebook_with_code(a, catalogue(a, "bug_fold_no_eps")), [3, 2, 0, 0, 0, 0]),
        "fuse_helper_cheat": (notebook_with_code(a, catalogue(a, "cheat_fuse_helper")), [3, 2, 0, 0, 0, 0]),
        # The false passes of the last review: a tensor for the ratio, float64 rates for float32 weights.
        "ratio_tensor": (notebook_with_code(a, catalogue(a, "bug_ratio_tensor")), [3, 0, 2, 0, 0, 0]),
        "rate_float64": (notebook_with_code(a, catalogue(a, "bug_rate_float64")), [3, 0, 2, 0, 0, 0]),
    }


def practice_lab_class() -> dict[str, tuple[nbformat.NotebookNode, list[float]]]:
    a = "07_practice_lab"
    return {
        "solution": (source_notebook(a), [3, 1.5, 1, 1.5, 1, 1, 1]),
        "stub": (release(a), [0] * 7),
        "alternative": (notebook_with_code(a, catalogue(a, "correct_alternative")), [3, 1.5, 1, 1.5, 1, 0, 0]),
        "local_statistics": (notebook_with_code(a, catalogue(a, "bug_sync_local_statistics")), [0, 1.5, 1, 1.5, 1, 0, 0]),
        "update_bn_cheat": (notebook_with_code(a, catalogue(a, "cheat_recalibrate_update_bn")), [3, 1.5, 1, 0, 1, 0, 0]),
        # The false pass of the last review: the right statistics, computed with autograd on.
        "recalibrate_autograd": (notebook_with_code(a, catalogue(a, "bug_recalibrate_with_autograd")), [3, 1.5, 1, 0, 1, 0, 0]),
    }


def large_models_class() -> dict[str, tuple[nbformat.NotebookNode, list[float]]]:
    a = "08_large_models"
    return {
        "solution": (source_notebook(a), [3, 1, 2.5, 1.5, 1, 1]),
        "stub": (release(a), [0] * 6),
        "alternatives": (notebook_with_code(a, catalogue(a, "correct_alternatives")), [3, 1, 2.5, 1.5, 0, 0]),
        # The documentation's torch.finfo(x.dtype).eps read literally: wrong for float16 inputs only.
        "eps_of_input_dtype": (notebook_with_code(a, catalogue(a, "bug_rms_eps_of_input_dtype")), [0, 1, 2.5, 1.5, 0, 0]),
        # A forward bug of the RMSNorm costs the attention block that uses it too.
        "subtracts_mean": (notebook_with_code(a, catalogue(a, "bug_rms_subtracts_mean")), [0, 1, 0, 1.5, 0, 0]),
        "alpha_per_channel": (notebook_with_code(a, catalogue(a, "bug_dyt_alpha_per_channel")), [3, 1, 2.5, 0, 0, 0]),
        "functional_cheat": (notebook_with_code(a, catalogue(a, "cheat_functional_rms_norm")), [0, 0, 0, 1.5, 0, 0]),
        "torch_norm_in_attention": (notebook_with_code(a, catalogue(a, "cheat_torch_rms_norm_in_attention")),
                                    [3, 1, 0, 1.5, 0, 0]),
    }


CLASSES = {
    "01_covariate_shift": covariate_shift_class,
    "02_batch_norm": batch_norm_class,
    "03_layer_norm": layer_norm_class,
    "04_instance_group_norm": instance_group_norm_class,
    "05_data_vs_layer_norm": data_norm_class,
    "02b_batch_norm_backward": backward_class,
    "06_training_dynamics": training_dynamics_class,
    "07_practice_lab": practice_lab_class,
    "08_large_models": large_models_class,
}



# Notebooks that misbehave. Each is the correct solution plus one cell of its own, so that what
# the grader does with the misbehaviour is the only thing that changes the outcome.
MISBEHAVING_CELLS = {
    "hangs": "import time\ntime.sleep(10**6)",
    "ignores_interrupts": "import time\nwhile True:\n    try:\n        time.sleep(0.5)\n    except BaseException:\n        pass",
    "kills_kernel": "import os\nos._exit(1)",
    "eats_memory": "hog = []\nwhile True:\n    hog.append(bytearray(10**8))",
    "floods_output": "while True:\n    print('x' * 10_000)",
}
MISBEHAVING_EXPECTED = {  # their code is solution_code: the answers to the questions included
    "hangs": [2, 2, 3, 1, 1, 1],  # the sleeping cell is interrupted at the cell timeout; the rest runs
    "ignores_interrupts": NOT_GRADED,
    "kills_kernel": NOT_GRADED,
    "eats_memory": [2, 2, 3, 1, 1, 1],  # MemoryError at the memory limit, in that cell only
    "floods_output": [2, 2, 3, 1, 1, 1],
}


def misbehaving_class() -> dict[str, tuple[nbformat.NotebookNode, list[float] | None]]:
    a = "02_batch_norm"
    solution = solution_code(a)
    return {name: (notebook_with_code(a, solution, [cell]), MISBEHAVING_EXPECTED[name]) for name, cell in MISBEHAVING_CELLS.items()}


HOSTILE = SUBMISSIONS / "hostile"
# Expected points of each hostile notebook (tests/submissions/hostile/README.md). All but one
# answer with the unsolved release, so every point would be undeserved.
HOSTILE_EXPECTED = {
    "reads_course": [0] * 6,
    "writes_grades": [0] * 6,
    "disables_checks": [0] * 6,
    "forges_reports": [0] * 6,
    "lying_tensors": [0] * 6,
    "symlinks": [0] * 6,
    # The correct solution, answers included: attacking the machine must cost nothing but must
    # harm no one either.
    "signals_and_daemons": [2, 2, 3, 1, 1, 1],
    # torch's own batch norm in a thread: the forward hides from the recorder, the backward
    # (run by autograd on the checking thread) does not; the report also lists it for review.
    "hidden_torch_norm": [0] * 6,
    # torch's batch norm with the recorder switched off, forward and backward: undetectable where
    # it runs, so it earns what torch's outputs earn; the report lists it for review. Its answer
    # cells are the release's, unanswered.
    "no_dispatch_torch_norm": [0, 2, 3, 1, 0, 0],
    # The same, executed from a hex string: it scores as that one does, and the scan lists the
    # code built at run time for review.
    "hex_torch_norm": [0, 2, 3, 1, 0, 0],
    # Script meant for the instructor's browser: the correct solution, so that the outputs must
    # cost nothing, and none of them may reach a page as markup.
    "runs_in_browser": [2, 2, 3, 1, 1, 1],
}
HOSTILE_ANSWERS = {"signals_and_daemons": "solution", "runs_in_browser": "solution"}
# Links the demo class puts into a submission folder: name -> target (relative to the course).
HOSTILE_LINKS = {"symlinks": {"course_solution.ipynb": "solutions/02_batch_norm/02_batch_norm.ipynb", "zero": "/dev/zero"}}


def stub_code(assignment: str) -> str:
    """The unsolved answer cells of the release, joined."""
    return "\n\n".join(c.source for c in release(assignment).cells if c.metadata.get("nbgrader", {}).get("solution"))


def hostile_class() -> dict[str, tuple[nbformat.NotebookNode, list[float]]]:
    a = "02_batch_norm"
    answers = {"solution": solution_code(a)}
    return {
        name: (notebook_with_code(a, answers.get(HOSTILE_ANSWERS.get(name), stub_code(a)),
                                  [(HOSTILE / f"{name}.py").read_text()]), expected)
        for name, expected in HOSTILE_EXPECTED.items()
    }


def demo_class() -> dict[str, dict[str, tuple[nbformat.NotebookNode, list[float] | None]]]:
    """assignment -> student -> (notebook, expected points per test cell, or NOT_GRADED)."""
    classes = {assignment: CLASSES[assignment]() for assignment in ASSIGNMENTS}
    classes["02_batch_norm"].update(misbehaving_class())
    classes["02_batch_norm"].update(hostile_class())
    return classes


def build_course(root: Path) -> dict:
    """A course directory with every assignment generated and the demo class submitted."""
    classes = demo_class()
    build_class_course(root, classes)
    return classes


def build_class_course(root: Path, classes: dict, db_url: str | None = None) -> None:
    """A course directory with ``classes``' assignments generated and their students' notebooks
    submitted; ``db_url``: the gradebook's database (default: the course's SQLite file)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "nbgrader_config.py", root)
    if db_url is not None:
        with open(root / "nbgrader_config.py", "a") as config:
            config.write(f"\nc.CourseDirectory.db_url = {db_url!r}\n")
    shutil.copytree(REPO / "solutions", root / "solutions", dirs_exist_ok=True)
    for assignment in classes:
        done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force"],
                              cwd=root, capture_output=True, text=True, env=tool_env())
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-3000:])
    for assignment, students in classes.items():
        for student, (nb, _) in students.items():
            folder = root / "submitted" / student / assignment
            folder.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, folder / f"{assignment}.ipynb")
            for link, target in HOSTILE_LINKS.get(student, {}).items():
                (folder / link).symlink_to(target if target.startswith("/") else root / target)

if __name__ == "__main__":
    target = Path(sys.argv[1]).resolve()
    built = build_course(target)
    print(f"Built {target}: " + ", ".join(f"{a} ({len(s)} submissions)" for a, s in built.items()))
    print(f"Grade one assignment:  cd {target} && python -m autograder.grade 02_batch_norm "
          "--workers 2 --cell-timeout 15 --timeout 120   (short limits: the misbehaving notebooks cost seconds)")
