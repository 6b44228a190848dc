"""Exercise 06: GhostBatchNorm, the two diagnostics and the BN fold. Correct submissions pass,
each bug fails the part it breaks with its misconception named, and torch's own normalization or
fusion helpers earn nothing. The catalogue is tests/submissions/training_dynamics/."""
from __future__ import annotations

import pytest

from autograder.exercises.ex06_training_dynamics import checks
from catalogue import Catalogue, no_points
from course import load_namespace, solution_code, source_notebook

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
    "bug_rate_float64": {"diagnostics": "computed in float64 (w.double()) and not cast back"},
    "bug_ratio_divides_by_after": {"diagnostics": "as makemore's notebook does"},
    "bug_ghost_running_var_biased": {"ghost": "n/(n − 1) = 4/3"},
    "bug_ghost_running_var_whole_count": {"ghost": "not the whole batch's"},
    # Passes Parts 1-3 (its layer is right on every graded case); its Question 3 is below.
    "bug_ghost_zero_in_sweep": {},
    "bug_ghost_detached_in_sweep": {},
}
# Layers that compute something else only inside the sweep of Question 3: the question is graded
# on torch's sweep instead, so the answer the layer would have dictated is wrong.
SWEEP_BUGS = {  # file -> (the answer its own sweep would make right, what the sweep's check says)
    "bug_ghost_zero_in_sweep": ("c", "its output at step 1 differs"),
    "bug_ghost_detached_in_sweep": ("c", r"at step 1 no gradient flowed back through its output \(is it detached\?\)"),
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


def test_the_sweep_of_question_3_trains_the_student_s_own_layer_the_same_way_twice():
    """The notebook's sweep and the grader's rerun use the student's GhostBatchNorm and agree; the
    reference solution's sweep shows what the notebook's answer says (a: larger weights, higher loss)."""
    layer = load_namespace(ASSIGNMENT, solution_code(ASSIGNMENT))["GhostBatchNorm"]
    losses = checks.ghost_sweep(layer)
    assert len(losses) == len(checks.SWEEP_SCALES) and all(len(r) == len(checks.SWEEP_VIRTUAL_BATCH_SIZES) for r in losses)
    assert checks.sweep_for_grading(layer) == (losses, "your GhostBatchNorm")
    assert all(c[0] < c[1] < c[2] for c in zip(*losses)), checks.sweep_table(losses)
    from autograder.exercises.ex06_training_dynamics import observe_sweep

    whole = load_namespace(ASSIGNMENT, CATALOGUE._code("bug", "bug_whole_batch"))["GhostBatchNorm"]
    assert observe_sweep.sweep(whole, checks.SWEEP_SCALES, checks.SWEEP_VIRTUAL_BATCH_SIZES)["losses"] != losses  # the student's layer is what trains


def _grade_question_3(namespace: dict) -> None:
    """The hidden test cell of Question 3, run as the grader runs it."""
    cell = next(c for c in source_notebook(ASSIGNMENT).cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "test_question_3")
    exec(compile(cell.source, "<test_question_3>", "exec"), namespace)


@pytest.mark.parametrize("name", sorted(SWEEP_BUGS))
def test_a_layer_that_differs_only_in_the_sweep_is_graded_on_torch_s_sweep(name):
    from autograder import CheckFailed

    namespace = load_namespace(ASSIGNMENT, CATALOGUE._code("bug", name))
    answer, said = SWEEP_BUGS[name]
    with pytest.raises(CheckFailed, match=f"differed from the reference .*initial scale 0.1 and virtual batch size 4: {said}"):
        checks.ghost_sweep(namespace["GhostBatchNorm"])
    losses, whose = checks.sweep_for_grading(namespace["GhostBatchNorm"])
    assert "differed from the reference during the sweep" in whose and losses == checks.ghost_sweep(checks.GhostReference)
    namespace.update(answer_q3=answer, why_q3="The plot shows it.")
    with pytest.raises(CheckFailed, match="not right: on your result the right answer is 'a'.*differed from the reference during the sweep"):
        _grade_question_3(namespace)


def test_a_layer_that_does_not_run_is_told_so_and_graded_on_torch_s_sweep():
    from torch import nn

    from autograder import CheckFailed

    class Broken(nn.Module):
        def __init__(self, num_features, virtual_batch_size, **kwargs):
            super().__init__()

        def forward(self, x):
            raise NotImplementedError("not written yet")

    with pytest.raises(CheckFailed, match="could not train with your GhostBatchNorm.*NotImplementedError: not written yet"):
        checks.ghost_sweep(Broken)
    losses, whose = checks.sweep_for_grading(Broken)
    assert whose.startswith("torch's BatchNorm on each virtual batch") and losses == checks.ghost_sweep(checks.GhostReference)


def test_a_numpy_float_is_a_python_float_and_is_judged_on_the_value_it_holds():
    """numpy.float64 subclasses float: it passes as one; a float subclass that lies in __float__
    is read with float's own method."""
    import math

    import numpy as np

    from autograder import CheckFailed

    def rate(w, lr):
        return lr / w.detach().flatten(1).pow(2).sum(dim=1)

    checks.check_diagnostics(rate, lambda before, after: np.log10(((after - before).std() / before.std()).item()))

    class Lying(float):
        def __float__(self):
            return -3.0

    with pytest.raises(CheckFailed, match="your ratio is"):
        checks.check_diagnostics(rate, lambda b, a: Lying(math.log10(((a - b).std() / b.std()).item()) + 1))
