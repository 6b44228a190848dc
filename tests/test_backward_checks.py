"""The backward exercise (02b): correct derivations pass, the classic wrong ones fail with the
misconception named, and a Function that lets autograd (or torch's kernels) do the work earns
nothing. The catalogue is tests/submissions/batch_norm_backward/."""
from __future__ import annotations

import pytest

from autograder import backward as checks
from catalogue import Catalogue, no_points

ASSIGNMENT = "02b_batch_norm_backward"
PARTS = {
    "bn": lambda ns, full: checks.check_batch_norm_function(ns["BatchNormFunction"], full=full),
    "ln": lambda ns, full: checks.check_layer_norm_function(ns["LayerNormFunction"], full=full),
}
BOTH = ("bn", "ln")


def both(phrase: str) -> dict[str, str]:
    return dict.fromkeys(BOTH, phrase)


BUGS = {
    "bug_no_mean_path": both("the path through the mean is missing"),
    "bug_no_variance_path": both("the path through the variance is missing"),
    "bug_statistics_as_constants": both("μ and σ were treated as constants"),
    "bug_grad_of_xhat": both("this is ∂L/∂x̂ = γ·g, not ∂L/∂x"),
    "bug_unbiased_in_backward": both("unbiased variance"),
    "bug_sums_not_means": both("sums where it needs means"),
    "bug_forgets_gamma": both("γ is missing"),
    "bug_param_grads_swapped": both("that is ∂L/∂β (Σ g); ∂L/∂γ = Σ g·x̂"),
    "bug_weight_grad_uses_x": both("uses x̂ (the normalized input), not x"),
    "bug_param_grads_averaged": both("a mean where a sum belongs"),
    "bug_eps_hardcoded": both("eps=0.001"),
    "bug_means_over_batch_only": {"bn": "the means run over dims (0,)", "ln": "the means run over dims (0,)"},
}
CHEATS = {
    "cheat_autograd_in_backward": no_points(*BOTH),
    "cheat_graph_saved_in_forward": no_points(*BOTH),
    "cheat_torch_kernels": no_points(*BOTH),
    "cheat_no_function": dict.fromkeys(BOTH, "not your"),
    "cheat_func_vjp": no_points(*BOTH),
    "cheat_func_jacfwd": no_points(*BOTH),
    "cheat_thread_autograd": no_points(*BOTH),
    "cheat_grader_formula": no_points(*BOTH),
}
CATALOGUE = Catalogue(ASSIGNMENT, PARTS, BUGS, CHEATS)


@pytest.mark.parametrize("name", sorted(CATALOGUE.correct()))
def test_correct_derivation_passes_every_part(name):
    CATALOGUE.assert_correct(name)


def test_every_catalogue_file_has_an_expectation():
    CATALOGUE.assert_complete()


@pytest.mark.parametrize("name", sorted(BUGS))
def test_wrong_backward_fails_with_its_misconception(name):
    CATALOGUE.assert_bug(name)


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_letting_autograd_or_torch_do_the_work_earns_nothing(name, tmp_path):
    CATALOGUE.assert_cheat(name, tmp_path)


def test_the_released_stub_fails_every_part():
    CATALOGUE.assert_stub_fails()
