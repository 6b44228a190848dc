"""The clean-process re-check: tampering gains nothing, crashes and hangs cost only the cell."""
from __future__ import annotations


from autograder.isolation import recheck
from course import GRADER_DISABLING_CELL, is_test_cell, notebook_with_code, solution_code

ASSIGNMENT = "02_batch_norm"


def cells_of(nb):
    return [(i, "test" if is_test_cell(c) else "code", c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"]


def run(code: str, tmp_path, extra_cells=(), timeout=120, cell_timeout=60):
    nb = notebook_with_code(ASSIGNMENT, code, list(extra_cells))
    cells = cells_of(nb)
    verdicts, problem = recheck(cells, str(tmp_path), timeout, cell_timeout)
    tests = [i for i, kind, _ in cells if kind == "test"]
    return [verdicts.get(i, "missing") for i in tests], problem


def test_solution_passes_every_test_cell(tmp_path):
    verdicts, problem = run(solution_code(ASSIGNMENT), tmp_path)
    assert verdicts == [None, None, None, None], verdicts
    assert problem == ""


def test_buggy_code_fails_even_when_it_disables_the_grader(tmp_path):
    # Unbiased variance in the normalization, and every autograder function made a no-op.
    buggy = solution_code(ASSIGNMENT).replace("var = (centered * centered).mean(dim=dims)",
                                              "var = (centered * centered).sum(dim=dims) / (x.numel() // x.shape[1] - 1)")
    assert buggy != solution_code(ASSIGNMENT)
    verdicts, _ = run(buggy, tmp_path, extra_cells=[GRADER_DISABLING_CELL])
    assert all(v and "the notebook replaced autograder." in v for v in verdicts), verdicts


def test_swapping_a_code_object_is_noticed(tmp_path):
    tamper = "import autograder.batch_norm as b\nb.check_module_contract.__code__ = (lambda *a, **k: None).__code__"
    verdicts, _ = run(solution_code(ASSIGNMENT), tmp_path, extra_cells=[tamper])
    assert all(v and "autograder.batch_norm.check_module_contract" in v for v in verdicts), verdicts


def test_rebinding_torch_functions_earns_nothing_even_for_correct_code(tmp_path):
    code = solution_code(ASSIGNMENT) + "\nimport torch\ntorch.allclose = lambda *a, **k: True\n"
    verdicts, _ = run(code, tmp_path)
    assert all(v and "torch.allclose" in v for v in verdicts), verdicts


def test_replacing_the_reference_class_does_not_make_it_compare_with_itself(tmp_path):
    buggy = solution_code(ASSIGNMENT).replace("torch.sqrt(var.reshape(shape) + self.eps)", "(torch.sqrt(var.reshape(shape)) + self.eps)")
    assert buggy != solution_code(ASSIGNMENT)
    code = buggy + "\nimport torch\ntorch.nn.BatchNorm1d = BatchNorm1d\ntorch.nn.BatchNorm2d = BatchNorm2d\n"
    verdicts, _ = run(code, tmp_path)
    assert all(v and "torch.nn.BatchNorm2d" in v for v in verdicts), verdicts


def test_sys_exit_in_a_cell_costs_only_what_depends_on_it(tmp_path):
    verdicts, problem = run(solution_code(ASSIGNMENT), tmp_path, extra_cells=["import sys\nsys.exit(3)"])
    assert verdicts == [None, None, None, None]


def test_a_dying_process_fails_the_cells_it_did_not_reach(tmp_path):
    verdicts, problem = run(solution_code(ASSIGNMENT), tmp_path, extra_cells=["import os\nos._exit(1)"])
    assert verdicts == ["missing"] * 4
    assert "died" in problem


def test_a_hanging_cell_times_out(tmp_path):
    hang = "import time\nwhile True:\n    try:\n        time.sleep(1)\n    except BaseException:\n        pass"
    verdicts, problem = run(solution_code(ASSIGNMENT), tmp_path, extra_cells=[hang], timeout=6, cell_timeout=2)
    assert verdicts == ["missing"] * 4
    assert "longer than" in problem
