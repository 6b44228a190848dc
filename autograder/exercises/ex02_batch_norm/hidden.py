"""The hidden cases of ``02_batch_norm``, which only the grader holds.

:mod:`autograder.exercises.ex02_batch_norm.checks` adds them to its visible cases when a check
runs with ``full=True``; the student's install has no copy of this file.
"""
from __future__ import annotations

from autograder.core.engine import Case
from autograder.core.inputs import channel_state
from autograder.exercises.ex02_batch_norm.checks import F32, F64, RUNNING_STEPS, _case, _input_steps


def statistics_inputs() -> list[tuple]:
    """The hidden inputs of ``batch_mean_var``: (shape, mean, std, dtype)."""
    return [
        ((2, 4), 0.0, 1.0, F64),
        ((3, 2, 4, 6), -2.0, 1e-3, F64),
        ((1, 3, 4, 5), 0.0, 1.0, F64),
        ((8, 3, 6, 5), 1e3, 1.0, F32),
        ((64, 5), 1e3, 1.0, F32),
    ]


def training_cases(device) -> list[Case]:
    """The hidden training-mode cases on ``device``."""
    d = dict(device=device)
    return [
        _case("BatchNorm1d", (2, 4), seed=4, note="N = 2", **d),
        _case("BatchNorm1d", (5, 3), seed=5, std=1e-3, note="low variance (std 1e-3)", **d),
        _case("BatchNorm1d", (5, 3), {"eps": 1e-3}, seed=6, std=1e-2, note="std 1e-2", **d),
        _case("BatchNorm1d", (5, 3), {"affine": False}, seed=7, **d),
        _case("BatchNorm1d", (2, 3, 1), seed=8, note="N = 2, L = 1", **d),
        _case("BatchNorm1d", (16, 3), dtype=F32, mean=1e3, seed=9, note="mean 1e3", **d),
        _case("BatchNorm1d", (4, 3, 6), {"momentum": None}, seed=19, **d),
        _case("BatchNorm2d", (3, 4, 2, 6), seed=10, std=1e-3, mean=-2.0, note="low variance (std 1e-3)", **d),
        _case("BatchNorm2d", (4, 2, 3, 5), {"eps": 1e-2}, seed=11, std=0.1, note="std 0.1", **d),
        _case("BatchNorm2d", (4, 3, 6, 5), dtype=F32, mean=1e3, seed=12, note="mean 1e3", **d),
        _case("BatchNorm2d", (4, 3, 6, 5), dtype=F32, seed=13, **d),
        _case("BatchNorm2d", (2, 3, 5, 4), {"affine": False, "track_running_stats": False}, seed=14, **d),
        _case("BatchNorm2d", (1, 3, 4, 5), seed=15, note="N = 1 (20 values per channel)", **d),
        _case("BatchNorm2d", (5, 2, 1, 1), seed=16, note="H = W = 1", **d),
    ]


def running_cases(device) -> list[Case]:
    """The hidden running-statistics cases on ``device``."""
    d = dict(device=device, steps=RUNNING_STEPS)
    untracked = dict(device=device, steps=("train", "train", "train-no-grad", "eval", "train"))
    return [
        _case("BatchNorm1d", (2, 4), {"momentum": 0.5}, seed=24, note="N = 2", state=channel_state(4, 24, tracked=True, batches=7), **d),
        _case("BatchNorm2d", (3, 2, 4, 3), {"momentum": None}, seed=25, note="num_batches_tracked starts at 5", state=channel_state(2, 25, tracked=True, batches=5), **d),
        # Without running statistics eval uses the batch; one-sample batches are left to
        # the input checks of the contract part.
        _case("BatchNorm2d", (2, 3, 2, 3), {"track_running_stats": False}, seed=26, **untracked),
        _case("BatchNorm1d", (3, 4), {"track_running_stats": False}, seed=27, **untracked),
        _case("BatchNorm2d", (3, 3, 2, 5), {"affine": False, "momentum": 0.3}, seed=28,
              state=channel_state(3, 28, affine=False, tracked=True, batches=2), **d),
        _case("BatchNorm2d", (4, 3, 5, 6), dtype=F32, mean=1e3, seed=29, note="mean 1e3", state=channel_state(3, 29, tracked=True), **d),
        _case("BatchNorm1d", (8, 5), dtype=F32, seed=30, state=channel_state(5, 30, tracked=True), **d),
        _case("BatchNorm1d", (5, 3, 4), {"momentum": 1.0}, seed=31, state=channel_state(3, 31, tracked=True), **d),
        _case("BatchNorm2d", (2, 3, 3, 2), {"eps": 1e-3, "momentum": 0.0}, seed=32, std=1e-2, state=channel_state(3, 32, tracked=True), **d),
        _positional_case(device),
    ]


def _positional_case(device) -> Case:
    """Constructor arguments passed by position, in torch's order (eps, momentum, affine, tracking)."""
    case = _case("BatchNorm2d", (3, 2, 4, 5), seed=33, std=1e-2, device=device,
                 steps=("train", "train", "eval"), state=channel_state(2, 33, affine=False, tracked=True),
                 note="arguments by position")
    case.args = (2, 1e-3, 0.3, False, True)
    return case


def input_check_cases(device) -> list[Case]:
    """The hidden input checks on ``device``: inputs torch accepts or refuses."""
    return [
        Case("BatchNorm1d", (4,), {}, _input_steps(("train", (4,)), ("train", (1, 4, 1)), ("train", (1, 4, 3))), device=device),
        Case("BatchNorm1d", (4,), {"track_running_stats": False}, _input_steps(("eval", (1, 4)), ("eval", (2, 4))), device=device),
        Case("BatchNorm2d", (3,), {}, _input_steps(("train", (2, 3, 4, 5, 2)), ("eval", (2, 3, 4)), ("train", (1, 3, 2, 1))), device=device),
        Case("BatchNorm2d", (3,), {"track_running_stats": False}, _input_steps(("eval", (1, 3, 1, 1)),), device=device),
    ]


def contract_variants() -> list[dict]:
    """The hidden constructor keyword sets of the contract check."""
    return [{"affine": False, "track_running_stats": False}, {"eps": 1e-3, "momentum": None}]


def contract_dtypes() -> list:
    """The dtypes the hidden contract check adds to float32."""
    return [F64]
