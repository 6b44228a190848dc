"""The checks of exercise 01_covariate_shift on the catalogue in tests/submissions/covariate_shift/."""
from __future__ import annotations

import pytest

from autograder.exercises.ex01_covariate_shift import checks
from catalogue import Catalogue, no_points, tampering

ASSIGNMENT = "01_covariate_shift"
PARTS = {
    "stats": lambda ns, full: checks.check_activation_stats(ns["activation_stats"], full=full),
    "input": lambda ns, full: checks.check_layer_input(ns["layer_input"], full=full),
    "shift": lambda ns, full: checks.check_distribution_shift(ns["distribution_shift"], full=full),
    "standardize": lambda ns, full: checks.check_batch_standardize(ns["BatchStandardize"], full=full),
}
BUGS = {
    "bug_autograd_on": {"stats": "autograd on"},
    "bug_hooks_leak_on_error": {"stats": "when the model's forward raised"},
    "bug_hooks_not_removed": {"stats": "left 2 hook(s)"},
    "bug_switches_to_eval": {"stats": "changed the train/eval mode"},
    "bug_unbiased_std": {"stats": "unbiased standard deviation"},
    "bug_nearest_rank_percentiles": {"stats": "nearest-rank percentile"},
    "bug_saturation_upper_only": {"stats": "count both ends"},
    "bug_saturation_inclusive": {"stats": "the inequalities are strict"},
    "bug_layer_input_is_output": {"input": "that is the layer's output"},
    "bug_layer_input_not_cloned": {"input": "changed later by an in-place operation"},
    "bug_stats_not_cloned": {"stats": "changed later by an in-place operation"},
    "bug_shift_signed": {"shift": "take the absolute value"},
    "bug_shift_unbiased": {"shift": "population standard deviation"},
    "bug_standardize_unbiased": {"standardize": "unbiased variance"},
    "bug_standardize_eps_outside": {"standardize": "inside the square root"},
    "bug_standardize_detached": {"standardize": "detached"},
    "bug_standardize_per_sample": {"standardize": "per sample"},
}
CHEATS = {
    "cheat_patch_allclose": tampering(PARTS),
    # torch's normalization inside BatchStandardize: only Part 4 is lost.
    "cheat_functional_batch_norm": no_points("standardize"),
    "cheat_layer_norm_transposed": no_points("standardize"),
}
CATALOGUE = Catalogue(ASSIGNMENT, PARTS, BUGS, CHEATS)


@pytest.mark.parametrize("name", sorted(CATALOGUE.correct()))
def test_correct_submission_passes_every_part(name):
    CATALOGUE.assert_correct(name)


def test_every_catalogue_file_has_an_expectation():
    CATALOGUE.assert_complete()


@pytest.mark.parametrize("name", sorted(BUGS))
def test_bug_fails_the_part_it_breaks_with_its_misconception(name):
    CATALOGUE.assert_bug(name)


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheat_earns_nothing_for_the_part_it_cheats_on(name, tmp_path):
    CATALOGUE.assert_cheat(name, str(tmp_path))


def test_the_released_stub_fails_every_part():
    CATALOGUE.assert_stub_fails()
