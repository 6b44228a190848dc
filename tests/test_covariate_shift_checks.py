"""The checks of exercise 01_covariate_shift on the catalogue in tests/submissions/covariate_shift/."""
from __future__ import annotations

import pytest

from autograder import covariate_shift as checks
from course import is_solution_cell, load_namespace, recheck_notebook, release_notebook, run_parts, solution_code, submission_files

ASSIGNMENT = "01_covariate_shift"
PARTS = {
    "stats": lambda ns, full: checks.check_activation_stats(ns["activation_stats"], full=full),
    "input": lambda ns, full: checks.check_layer_input(ns["layer_input"], full=full),
    "shift": lambda ns, full: checks.check_distribution_shift(ns["distribution_shift"], full=full),
    "standardize": lambda ns, full: checks.check_batch_standardize(ns["BatchStandardize"], full=full),
}
CORRECT = {p.stem: p.read_text() for p in submission_files(ASSIGNMENT, "correct")}
CORRECT["notebook_solution"] = solution_code(ASSIGNMENT)

BUGS = {
    "bug_autograd_on": {"stats": "autograd on"},
    "bug_hooks_leak_on_error": {"stats": "when the model's forward raised"},
    "bug_hooks_not_removed": {"stats": "left 2 hook(s)"},
    "bug_switches_to_eval": {"stats": "changed the train/eval mode"},
    "bug_unbiased_std": {"stats": "unbiased standard deviation"},
    "bug_nearest_rank_percentiles": {"stats": "nearest-rank percentile"},
    "bug_saturation_upper_only": {"stats": "count both ends"},
    "bug_layer_input_is_output": {"input": "that is the layer's output"},
    "bug_shift_signed": {"shift": "take the absolute value"},
    "bug_shift_unbiased": {"shift": "population standard deviation"},
    "bug_standardize_unbiased": {"standardize": "unbiased variance"},
    "bug_standardize_eps_outside": {"standardize": "inside the square root"},
    "bug_standardize_detached": {"standardize": "detached"},
    "bug_standardize_per_sample": {"standardize": "per sample"},
}
CHEATS = {p.stem: p for p in submission_files(ASSIGNMENT, "cheat")}


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_correct_submission_passes_every_part(name):
    namespace = load_namespace(ASSIGNMENT, CORRECT[name])
    assert run_parts(namespace, PARTS) == dict.fromkeys(PARTS)
    assert run_parts(namespace, PARTS, full=False) == dict.fromkeys(PARTS)


def test_every_bug_in_the_catalogue_has_an_expectation():
    assert sorted(p.stem for p in submission_files(ASSIGNMENT, "bug")) == sorted(BUGS)


@pytest.mark.parametrize("name", sorted(BUGS))
def test_bug_fails_the_part_it_breaks_with_its_misconception(name):
    path = next(p for p in submission_files(ASSIGNMENT, "bug") if p.stem == name)
    got = run_parts(load_namespace(ASSIGNMENT, path.read_text()), PARTS)
    for part in PARTS:
        if part in BUGS[name]:
            assert got[part] is not None and BUGS[name][part] in got[part], (part, got[part])
        else:
            assert got[part] is None, f"{part} should pass (partial credit): {got[part]}"


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheat_earns_nothing_for_the_part_it_cheats_on(name, tmp_path):
    verdicts = recheck_notebook(ASSIGNMENT, CHEATS[name].read_text(), str(tmp_path))
    if name == "cheat_patch_allclose":
        assert all(v and "the notebook replaced" in v for v in verdicts), verdicts
    else:  # torch's normalization inside BatchStandardize: only Part 4 is lost
        assert verdicts[:3] == [None, None, None], verdicts
        assert verdicts[3] and "earns no points" in verdicts[3], verdicts


def test_the_released_stub_fails_every_part():
    stub = "\n\n".join(c.source for c in release_notebook(ASSIGNMENT).cells if is_solution_cell(c))
    got = run_parts(load_namespace(ASSIGNMENT, stub), PARTS, full=False)
    assert all(message and "NotImplementedError" in message for message in got.values()), got
