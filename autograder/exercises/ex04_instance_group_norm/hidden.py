"""The hidden cases of ``04_instance_group_norm``, which only the grader holds.

:mod:`autograder.exercises.ex04_instance_group_norm.checks` adds them to its visible cases when a
check runs with ``full=True``; the student's install has no copy of this file.
"""
from __future__ import annotations

import torch

from autograder.core.engine import Case
from autograder.exercises.ex04_instance_group_norm.checks import (
    F32, F64, TRACKED_STEPS, _case, _group_input_steps, _instance_input_steps)


def group_cases(device) -> list[Case]:
    """The hidden ``GroupNorm`` forward cases on ``device``."""
    d = dict(device=device)
    return [
        _case("GroupNorm", (1, 4), (2, 4, 3, 3), seed=3, note="one group (LayerNorm over C, H, W)", **d),
        _case("GroupNorm", (4, 4), (2, 4, 3, 5), seed=4, note="one channel per group (InstanceNorm)", **d),
        _case("GroupNorm", (3, 6), (4, 6), seed=5, note="(N, C) input", **d),
        _case("GroupNorm", (2, 8), (1, 8, 4, 4), seed=6, note="batch of one", **d),
        _case("GroupNorm", (2, 4), (2, 4, 3, 3), {"eps": 1e-3}, seed=7, std=1e-2, note="std 1e-2", **d),
        _case("GroupNorm", (2, 4), (3, 4, 2, 5), seed=8, std=1e-3, note="low variance (std 1e-3)", **d),
        _case("GroupNorm", (3, 6), (2, 6, 4, 3), {"affine": False}, seed=9, **d),
        _case("GroupNorm", (4, 8), (2, 8, 5, 6), seed=10, layout="channels_last", **d),
        _case("GroupNorm", (2, 6), (3, 6, 4, 5), seed=11, layout="transposed", **d),
        _case("GroupNorm", (4, 16), (4, 16, 6, 6), dtype=F32, mean=1e3, seed=12, note="mean 1e3", **d),
        _case("GroupNorm", (8, 32), (4, 32, 8, 8), dtype=F32, seed=13, **d),
        _case("GroupNorm", (2, 4), (2, 4, 1, 1), dtype=F32, std=1e-2, seed=14,
              note="H = W = 1, two channels per group", **d),
    ]


def instance_cases(device) -> list[Case]:
    """The hidden ``InstanceNorm2d`` forward cases on ``device``."""
    d = dict(device=device)
    return [
        _case("InstanceNorm2d", (4,), (3, 4, 3, 3), {"affine": True}, seed=23, **d),
        _case("InstanceNorm2d", (2,), (2, 5, 4), seed=24, note="unbatched (C, H, W)", **d),
        _case("InstanceNorm2d", (2,), (2, 5, 4), {"affine": True, "track_running_stats": True}, seed=25,
              steps=TRACKED_STEPS, note="unbatched (C, H, W)", **d),
        _case("InstanceNorm2d", (3,), (1, 3, 4, 4), {"track_running_stats": True, "momentum": 0.5}, seed=26,
              steps=TRACKED_STEPS, note="batch of one", **d),
        _case("InstanceNorm2d", (3,), (4, 3, 2, 3), {"eps": 1e-3, "affine": True}, seed=27, std=1e-2, note="std 1e-2", **d),
        _case("InstanceNorm2d", (3,), (2, 3, 4, 4), seed=28, std=1e-3, note="low variance (std 1e-3)", **d),
        _case("InstanceNorm2d", (4,), (2, 4, 5, 6), {"affine": True}, seed=29, layout="channels_last", **d),
        _case("InstanceNorm2d", (3,), (2, 3, 4, 5), {"track_running_stats": True}, seed=30,
              steps=TRACKED_STEPS, layout="transposed", **d),
        _case("InstanceNorm2d", (3,), (4, 3, 8, 8), {"affine": True}, dtype=F32, mean=1e3, seed=31, note="mean 1e3", **d),
        _case("InstanceNorm2d", (5,), (3, 5, 6, 6), {"affine": True, "track_running_stats": True}, dtype=F32,
              seed=32, steps=TRACKED_STEPS, **d),
    ]


def group_input_cases(device) -> list[Case]:
    """The hidden ``GroupNorm`` input checks on ``device``: inputs torch refuses."""
    return [
        Case("GroupNorm", (2, 4), {}, _group_input_steps((2, 6, 3),), device=device),
        Case("GroupNorm", (2, 4), {}, _group_input_steps((4,),), device=device),
    ]


def instance_input_cases(device) -> list[Case]:
    """The hidden ``InstanceNorm2d`` input checks on ``device``: inputs torch refuses."""
    return [
        Case("InstanceNorm2d", (3,), {}, _instance_input_steps((3, 4, 4), (2, 3, 4, 4, 2)), device=device),
        Case("InstanceNorm2d", (3,), {}, _instance_input_steps((5, 3),), device=device),
    ]


def group_contract_variants() -> list[tuple]:
    """The hidden (args, kwargs) of the ``GroupNorm`` contract check."""
    return [((1, 5), {"eps": 1e-3}), ((6, 6), {})]


def instance_contract_variants() -> list[dict]:
    """The hidden constructor keyword sets of the ``InstanceNorm2d`` contract check."""
    return [{"affine": True, "track_running_stats": True, "momentum": 0.3, "eps": 1e-3}]


def contract_dtypes() -> list[torch.dtype]:
    """The dtypes the hidden contract checks add to float32."""
    return [F64]
