"""Exercise 07: SyncBatchNorm2d over real gloo processes, MaskedBatchNorm1d, FrozenBatchNorm2d,
recalibrate_bn and Float32StatsLayerNorm. Correct submissions pass, each bug fails the part it
breaks with its misconception named, and torch's own normalization (or update_bn) earns nothing.
The catalogue is tests/submissions/practice_lab/."""
from __future__ import annotations

import multiprocessing

import pytest

from autograder.exercises.ex07_practice_lab import checks
from catalogue import Catalogue, no_points
from course import load_namespace

ASSIGNMENT = "07_practice_lab"
PARTS = {
    "sync": lambda ns, full: checks.check_sync_batch_norm(ns["SyncBatchNorm2d"], full=full),
    "masked": lambda ns, full: checks.check_masked_batch_norm(ns["MaskedBatchNorm1d"], full=full),
    "frozen": lambda ns, full: checks.check_frozen_batch_norm(ns["FrozenBatchNorm2d"], full=full),
    "recalibrate": lambda ns, full: checks.check_recalibrate_bn(ns["recalibrate_bn"], full=full),
    "half": lambda ns, full: checks.check_float32_stats_layer_norm(ns["Float32StatsLayerNorm"], full=full),
}
BUGS = {
    "bug_sync_local_statistics": {"sync": "each process normalized its own shard"},
    "bug_sync_plain_all_reduce": {"sync": "A plain dist.all_reduce is invisible to autograd"},
    "bug_sync_biased_running_var": {"sync": "unbiased"},
    "bug_sync_local_count": {"sync": "not this process's count"},
    "bug_masked_counts_padding": {"masked": "your statistics include the padded positions"},
    "bug_masked_padding_not_zero": {"masked": "the padded positions of the output must be 0"},
    "bug_masked_eval_padding_not_zero": {"masked": "is False): the padded positions of the output must be 0, in eval mode too"},
    "bug_frozen_batch_statistics": {"frozen": "uses its running statistics in training mode too"},
    "bug_frozen_rejects_batch_norm_state": {"frozen": "num_batches_tracked"},
    "bug_frozen_parameters": {"frozen": "none as nn.Parameter"},
    "bug_recalibrate_no_reset": {"recalibrate": "reset them first"},
    "bug_recalibrate_keeps_momentum": {"recalibrate": "kept each BatchNorm's momentum"},
    "bug_recalibrate_mode_not_restored": {"recalibrate": "restore the mode it had"},
    "bug_half_statistics_in_input_dtype": {"half": "overflowed or lost precision in float16"},
    "bug_sync_ignores_process_group": {"sync": "not over its process_group"},
    "bug_masked_assumes_right_padding": {"masked": "padding can come first too"},
    "bug_frozen_drops_key_without_prefix": {"frozen": "inside a model the keys carry a prefix"},
    "bug_recalibrate_pairs_by_length": {"recalibrate": "batches of 8 and 2 samples"},
    "bug_frozen_eps_outside_sqrt": {"frozen": "eps belongs inside the square root"},
    "bug_recalibrate_with_autograd": {"recalibrate": "ran with autograd on"},
    "bug_recalibrate_leaves_autograd_off": {"recalibrate": "recalibrate_bn left autograd switched off"},
    "bug_recalibrate_leaves_parameters_frozen": {"recalibrate": "left 12 parameters frozen"},
    "bug_recalibrate_lists_two_classes": {"recalibrate": "your function leaves out SyncBatchNorm"},
    "bug_recalibrate_skips_batch_norm_1d": {"recalibrate": "your function leaves out BatchNorm1d"},
    "bug_recalibrate_train_only_if_eval": {"recalibrate": "layer 4 (BatchNorm2d) were reset but never updated"},
    "bug_sync_synchronizes_in_eval": {"sync": "your layer synchronized in eval mode"},
    "bug_sync_averages_variances": {"sync": "you averaged the per-process variances"},
    "bug_masked_divides_by_positions": {"masked": "divided by N·L"},
    "bug_masked_running_var_counts_padding": {"masked": "not N·L"},
}
CHEATS = {
    "cheat_sync_functional_batch_norm": no_points("sync"),
    "cheat_recalibrate_update_bn": no_points("recalibrate"),
    "cheat_frozen_subclass": no_points("frozen"),
    "cheat_half_layer_norm_kernel": no_points("half"),
    "cheat_masked_torch_batch_norm": no_points("masked"),
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


def test_no_replica_process_outlives_the_check():
    """Every forked replica is joined or killed before the check returns."""
    namespace = load_namespace(ASSIGNMENT, CATALOGUE.correct()["notebook_solution"])
    checks.check_sync_batch_norm(namespace["SyncBatchNorm2d"])
    assert multiprocessing.active_children() == []


def test_a_replica_that_never_joins_the_collective_is_stopped_in_time():
    """A layer whose process 1 skips the all-reduce leaves process 0 waiting: the check ends with a
    timeout message, not a hang, and no process is left."""
    import time

    import torch
    import torch.distributed as dist
    from torch import nn

    class Deadlocks(nn.Module):
        def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                     process_group=None, device=None, dtype=None):
            super().__init__()

        def forward(self, x):
            if dist.get_rank() == 0:
                dist.all_reduce(torch.ones(1))
            return x

    from autograder.core.side import student

    case = checks._ReplicaCase([2, 2], seed=1)
    start = time.monotonic()
    report = student(Deadlocks, "SyncBatchNorm2d").report(
        "observe_distributed.run_replicas", (3,), {}, case.state, case.plain_steps(), case.dtype, 3.0)
    assert time.monotonic() - start < 20
    rank0 = report["replicas"][0]
    # gloo's own timeout (the run's 3 s) ends the waiting collective with an error, or the replica is killed
    assert "error" in rank0 or rank0["steps"][0]["error"] is not None, rank0
    assert multiprocessing.active_children() == []


def test_a_notebook_with_its_own_process_group_is_told_so_not_failed_for_its_layer():
    """A student who tried their layer in a process group of one, in the notebook, learns why the
    check cannot start its processes (and how to fix it), rather than that the class is wrong."""
    import datetime

    import torch.distributed as dist

    from autograder import CheckFailed

    namespace = load_namespace(ASSIGNMENT, CATALOGUE.correct()["notebook_solution"])
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=10))
    try:
        with pytest.raises(CheckFailed, match="destroy_process_group"):
            checks.check_sync_batch_norm(namespace["SyncBatchNorm2d"])
    finally:
        dist.destroy_process_group()
    checks.check_sync_batch_norm(namespace["SyncBatchNorm2d"])


@pytest.mark.parametrize("route", [
    "from torch.optim import swa_utils\n_copy = swa_utils.update_bn",
    "layer = torch.nn.RMSNorm(8)",
    "mode = torch.utils._python_dispatch._get_current_dispatch_mode()",
    "pd = getattr(torch.utils, name)\nmode = pd._get_current_dispatch_mode()",
])
def test_the_scan_flags_the_routes_around_this_exercise_s_observations(route):
    from autograder.grading.scan import scan_source

    assert scan_source([(0, route)]), route


def test_outside_linux_the_replicas_are_not_started_and_the_student_is_told_why(monkeypatch):
    """fork, prctl and the interface lo are Linux's: on a student's Mac the check says it needs the
    course hub instead of blaming the layer."""
    import sys

    from autograder import CheckFailed

    namespace = load_namespace(ASSIGNMENT, CATALOGUE.correct()["notebook_solution"])
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(CheckFailed, match=r"this test needs Linux \(the course hub\).*\(darwin\).*not judged"):
        checks.check_sync_batch_norm(namespace["SyncBatchNorm2d"])
    assert multiprocessing.active_children() == []
