"""The GroupNorm and InstanceNorm2d checks on the catalogue in tests/submissions/instance_group_norm/.

Correct submissions pass every part; each bug fails exactly the parts it breaks, with the phrase
that names its misconception; cheats are graded in the clean re-check, as nbgrader grades them.
"""
from __future__ import annotations

import pytest

from autograder.exercises.ex04_instance_group_norm import checks
from catalogue import Catalogue, no_points

ASSIGNMENT = "04_instance_group_norm"
PARTS = {
    "gn_forward": lambda ns, full: checks.check_group_norm_forward(ns["GroupNorm"], full=full),
    "gn_contract": lambda ns, full: checks.check_group_norm_contract(ns["GroupNorm"], full=full),
    "in_forward": lambda ns, full: checks.check_instance_norm_forward(ns["InstanceNorm2d"], full=full),
    "in_contract": lambda ns, full: checks.check_instance_norm_contract(ns["InstanceNorm2d"], full=full),
}
BUGS = {
    "bug_gn_batch_mixed": {"gn_forward": "mix the samples of the batch"},
    "bug_gn_eps_outside_sqrt": {"gn_forward": "inside the square root"},
    "bug_gn_no_divisibility_check": {"gn_contract": "must be divisible by num_groups"},
    "bug_gn_per_group_affine": {"gn_forward": "your `weight` has shape (8); in the reference (torch.nn.GroupNorm) it has (32)",
                                "gn_contract": "parameter `weight` has shape (4,), torch's has (8,)"},
    "bug_gn_strided_groups": {"gn_forward": "strided"},
    "bug_gn_unbiased": {"gn_forward": "unbiased variance"},
    "bug_gn_view": {"gn_forward": "use x.reshape"},
    "bug_in_batch_statistics": {"in_forward": "that is BatchNorm"},
    "bug_in_batchnorm_defaults": {"in_forward": "differs from the reference (torch.nn.InstanceNorm2d)",
                                  "in_contract": "attribute `affine` is True, torch's is False"},
    "bug_in_counts_batches": {"in_forward": "never counts batches"},
    "bug_in_eval_ignores_running_stats": {"in_forward": "eval mode normalizes with running_mean and running_var"},
    "bug_in_no_unbatched_input": {"in_forward": "unbatched (C, H, W)", "in_contract": "unbatched (C, H, W)"},
    "bug_in_running_var_biased": {"in_forward": "per-instance *unbiased* variances"},
    "bug_in_running_var_from_all_values": {"in_forward": "not the variance of all N·H·W values"},
}
CHEATS = {
    "cheat_functional_group_norm": no_points("gn_forward", "gn_contract"),
    "cheat_group_norm_holds_torch_module": no_points("gn_forward", "gn_contract"),
    "cheat_instance_via_batch_norm": no_points("in_forward", "in_contract"),
    "cheat_subclass_instance_norm": no_points("in_forward", "in_contract"),
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
    CATALOGUE.assert_cheat(name, str(tmp_path))


def test_the_released_stub_fails_every_part():
    CATALOGUE.assert_stub_fails()
