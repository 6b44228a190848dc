"""The backward exercise (02b): correct derivations pass, the classic wrong ones fail with the
misconception named, and a Function that lets autograd (or torch's kernels) do the work earns
nothing. The catalogue is tests/submissions/batch_norm_backward/."""
from __future__ import annotations

import pytest

from autograder.exercises.ex02b_batch_norm_backward import checks
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
    "bug_means_over_batch_only": both("the means in your backward run over dims (0,)"),
    "bug_unbiased_in_forward": both("you normalize with the unbiased variance"),
    "bug_no_eps_in_backward": both("ε is missing in your backward"),
    "bug_layer_norm_gamma_outside_means": {"ln": "γ is applied outside the means"},
    # fails a visible check: images normalized over (C, H, W) are among the visible cases
    "bug_layer_norm_last_dim_only": {"ln": "your statistics run over dims (3,)"},
}
CHEATS = {
    "cheat_autograd_in_backward": no_points(*BOTH),
    "cheat_graph_saved_in_forward": no_points(*BOTH),
    "cheat_torch_kernels": no_points(*BOTH),
    "cheat_no_function": dict.fromkeys(BOTH, "not your"),
    "cheat_func_vjp": no_points(*BOTH),
    "cheat_func_jacfwd": no_points(*BOTH),
    "cheat_thread_autograd": no_points(*BOTH),
    # the grader's closed form is grader-only (hidden_formulas.py): in the sandbox its import
    # fails, so the cell that defines the Functions fails and nothing is defined
    "cheat_grader_formula": dict.fromkeys(BOTH, "does not define `"),
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


def test_layer_norm_over_the_last_dim_only_fails_a_visible_check():
    """Images normalized over (C, H, W) are a visible case: a LayerNorm over the last dim only,
    right for tokens, does not pass every check a student can run."""
    got = CATALOGUE.results(CATALOGUE._code("bug", "bug_layer_norm_last_dim_only"), full=False)
    assert got["bn"] is None and "your statistics run over dims (3,)" in got["ln"], got


def test_what_going_further_says_about_double_backward():
    """The notebook's last section: a backward that uses the x̂ and 1/σ saved by forward passes
    gradcheck and fails gradgradcheck; one that recomputes them from the saved inputs passes both."""
    import torch
    from course import load_namespace, solution_code

    x = torch.randn(6, 3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).requires_grad_()
    weight = (torch.rand(3, dtype=torch.float64) + 0.5).requires_grad_()
    bias = torch.rand(3, dtype=torch.float64).requires_grad_()
    results = {}
    for name, code in (("saved", solution_code(ASSIGNMENT)), ("recomputed", CATALOGUE.correct()["correct_recomputes_in_backward"])):
        function = load_namespace(ASSIGNMENT, code)["BatchNormFunction"]
        apply = lambda *t, f=function: f.apply(*t, 1e-5)
        results[name] = (torch.autograd.gradcheck(apply, (x, weight, bias), raise_exception=False),
                         torch.autograd.gradgradcheck(apply, (x, weight, bias), raise_exception=False))
    assert results == {"saved": (True, False), "recomputed": (True, True)}, results
