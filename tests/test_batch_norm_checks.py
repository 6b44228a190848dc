"""The BatchNorm checks, run in-process on the catalogue in tests/submissions/batch_norm/.

Every correct submission (the notebook's solution and unusual but correct ones) must pass every
part; every bug must fail exactly the parts it breaks, with the message that names its
misconception. Cheats are graded in the clean re-check process (tests/test_cheats.py).
"""
from __future__ import annotations

import pytest

from autograder.exercises.ex02_batch_norm import checks
from catalogue import Catalogue
from course import submission_files

ASSIGNMENT = "02_batch_norm"
PARTS = {
    "statistics": lambda ns, full: checks.check_batch_mean_var(ns["batch_mean_var"], full=full),
    "training": lambda ns, full: checks.check_training_forward(ns["BatchNorm1d"], ns["BatchNorm2d"], full=full),
    "running": lambda ns, full: checks.check_running_statistics(ns["BatchNorm1d"], ns["BatchNorm2d"], full=full),
    "contract": lambda ns, full: checks.check_module_contract(ns["BatchNorm1d"], ns["BatchNorm2d"], full=full),
}


# For each bug: the parts it must fail, each with a phrase its message must contain. Every part
# not listed must pass (the bug costs those points only).
BUGS = {
    "bug_affine_false_keeps_params": {"contract": "torch has the parameters none"},
    "bug_assert_input_dim": {"contract": "raise ValueError like torch"},
    "bug_batch_check_training_only": {"contract": "eval with track_running_stats=False"},
    "bug_one_value_error_in_eval": {"running": "torch does not raise here", "contract": "torch does not raise here"},
    "bug_batch_mean_var_unbiased": {"statistics": "unbiased variance"},
    "bug_bn1d_2d_only": {"statistics": "one value per channel", "training": "RuntimeError",
                         "running": "RuntimeError", "contract": "RuntimeError"},
    "bug_correction_uses_batch_size": {"training": "ZeroDivisionError", "running": "not N = 2",
                                       "contract": "ZeroDivisionError"},
    "bug_detached_stats": {"training": "detached", "running": "detached"},
    "bug_eps_hardcoded": {"training": "instead of the layer's `eps`", "running": "instead of the layer's `eps`"},
    "bug_eps_outside_sqrt": {"training": "inside the square root", "running": "inside the square root"},
    "bug_eval_updates_running": {"running": "eval mode must not change", "contract": "ZeroDivisionError"},
    "bug_eval_uses_batch_stats": {"running": "not with the statistics of the current batch",
                                  "contract": "Expected more than 1 value per channel"},
    "bug_factory_kwargs_ignored": {"training": "Pass device= and dtype=", "running": "Pass device= and dtype=",
                                   "contract": "Pass device= and dtype="},
    "bug_gamma_beta_names": {"training": "`weight` (γ)", "running": "`weight` (γ)", "contract": "missing ['weight', 'bias']"},
    "bug_momentum_none_as_default": {"running": "cumulative average"},
    "bug_momentum_none_no_update": {"running": "not updated in training mode"},
    "bug_momentum_reversed": {"running": "momentum is reversed"},
    "bug_nbt_float": {"running": "int64", "contract": "torch.int64"},
    "bug_nbt_incremented_in_eval": {"running": "eval mode must not change"},
    "bug_nbt_not_incremented": {"training": "add 1 to num_batches_tracked", "running": "grows by 1"},
    "bug_nbt_skipped_under_no_grad": {"running": "no_grad switches off autograd"},
    "bug_no_batch_size_check": {"contract": "Expected more than 1 value per channel"},
    "bug_no_input_check": {"contract": "raise ValueError like torch"},
    "bug_one_pass_variance": {"statistics": "cancels catastrophically", "training": "cancels catastrophically",
                              "running": "cancels catastrophically"},
    "bug_reshape_without_permute": {"statistics": "except the channel dimension", "training": "x.reshape(-1, C)",
                                    "running": "x.reshape(-1, C)"},
    "bug_running_stats_with_history": {"running": "grad_fn"},
    "bug_running_var_biased": {"running": "n/(n − 1)"},
    "bug_stats_over_all_dims": {"statistics": "one value per channel", "training": "mix all channels",
                                "running": "mix all channels"},
    "bug_unbiased_normalize": {"training": "normalize with the unbiased variance",
                               "running": "normalize with the unbiased variance"},
    "bug_untracked_creates_buffers": {"running": "there are no running statistics", "contract": "torch has the buffers none"},
    "bug_var_within_positions": {"statistics": "except the channel dimension", "training": "per-position variances",
                                 "running": "per-position variances"},
    "bug_weight_as_buffer": {"training": "must be nn.Parameters", "running": "must be nn.Parameters",
                             "contract": "missing ['weight', 'bias']"},
    "bug_weight_plain_tensor": {"training": "weight.grad", "running": "weight.grad", "contract": "missing ['weight', 'bias']"},
    "bug_weight_random_init": {"contract": "weight starts at ones"},
    "bug_nbt_python_int": {"running": "not a tensor", "contract": "missing ['num_batches_tracked']"},
    "bug_inplace_input": {"running": "modified its input in place"},
    "bug_weight_bias_swapped": {"training": "weight and bias are swapped", "running": "weight and bias are swapped"},
}


CATALOGUE = Catalogue(ASSIGNMENT, PARTS, BUGS)  # the cheats are graded in tests/test_cheats.py


@pytest.mark.parametrize("name", sorted(CATALOGUE.correct()))
def test_correct_submission_passes_every_part(name):
    CATALOGUE.assert_correct(name)


def test_every_bug_in_the_catalogue_has_an_expectation():
    assert sorted(p.stem for p in submission_files(ASSIGNMENT, "bug")) == sorted(BUGS)


@pytest.mark.parametrize("name", sorted(BUGS))
def test_bug_fails_the_parts_it_breaks_with_its_misconception(name):
    CATALOGUE.assert_bug(name)


def test_the_released_stub_fails_every_part():
    CATALOGUE.assert_stub_fails()
