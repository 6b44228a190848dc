"""Exercise 06: GhostBatchNorm, the two diagnostics and the BN fold. Correct submissions pass,
each bug fails the part it breaks with its misconception named, and torch's own normalization or
fusion helpers earn nothing. The catalogue is tests/submissions/training_dynamics/."""
from __future__ import annotations

import pytest

from autograder import training_dynamics as checks
from catalogue import Catalogue, no_points

ASSIGNMENT = "06_training_dynamics"
PARTS = {
    "ghost": lambda ns, full: checks.check_ghost_batch_norm(ns["GhostBatchNorm"], full=full),
    "diagnostics": lambda ns, full: checks.check_diagnostics(ns["effective_learning_rate"], ns["update_to_data_ratio"], full=full),
    "fold": lambda ns, full: checks.check_fold_batch_norm(ns["fold_batch_norm"], full=full),
}
BUGS = {
    "bug_whole_batch": {"ghost": "normalized the whole batch at once"},
    "bug_running_once_per_step": {"ghost": "once per virtual batch"},
    "bug_nbt_once_per_step": {"ghost": "num_batches_tracked grows by one per virtual batch"},
    "bug_rate_not_squared": {"diagnostics": "divide by the squared norm"},
    "bug_rate_whole_tensor": {"diagnostics": "one number for the whole tensor"},
    "bug_ratio_not_log": {"diagnostics": "return log10 of the ratio"},
    "bug_fold_no_eps": {"fold": "ε is missing"},
    "bug_fold_drops_conv_bias": {"fold": "the conv's own bias must be shifted and scaled too"},
    "bug_fold_in_place": {"fold": "it changed conv or bn"},
    "bug_fold_drops_groups": {"fold": "groups"},
    "bug_ghost_chunk": {"ghost": "virtual batches of 5, 5 and 2"},
    "bug_fold_no_dilation": {"fold": "dilation"},
    "bug_ratio_tensor": {"diagnostics": "return a Python float"},
    "bug_rate_float64": {"diagnostics": "computed in float64"},
    "bug_ratio_divides_by_after": {"diagnostics": "as makemore's notebook does"},
    "bug_ghost_running_var_biased": {"ghost": "n/(n − 1) = 4/3"},
    "bug_ghost_running_var_whole_count": {"ghost": "not the whole batch's"},
}
CHEATS = {
    "cheat_fuse_helper": no_points("fold"),
    "cheat_ghost_torch_bn": no_points("ghost"),
    "cheat_fuse_helper_profiler_off": no_points("fold"),
    "cheat_fuse_linear_helper": no_points("fold"),
}
CATALOGUE = Catalogue(ASSIGNMENT, PARTS, BUGS, CHEATS)


@pytest.mark.parametrize("name", sorted(CATALOGUE.correct()))
def test_correct_submission_passes_every_part(name):
    CATALOGUE.assert_correct(name)


def test_every_catalogue_file_has_an_expectation():
    CATALOGUE.assert_complete()


@pytest.mark.parametrize("name", sorted(BUGS))
def test_bug_fails_the_parts_it_breaks_with_its_misconception(name):
    CATALOGUE.assert_bug(name)


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheat_earns_nothing_for_the_parts_it_cheats_on(name, tmp_path):
    CATALOGUE.assert_cheat(name, tmp_path)


def test_the_released_stub_fails_every_part():
    CATALOGUE.assert_stub_fails()
