"""Hidden cases of exercise 07: the cases the hidden tests add to each part's visible ones.

Only the grader holds this file (:mod:`autograder.grading.parts`). The checks reach it through
:func:`autograder.core.withheld.of` when ``full=True`` and run these cases after the visible ones.
"""
from __future__ import annotations

from autograder.core.engine import Case
from autograder.exercises.ex07_practice_lab.checks import (BF16, F32, F64, _frozen_case, _half_case, _masked_case,
                                                           _ReplicaCase, _single_process_case)


# --- part 1: SyncBatchNorm2d ------------------------------------------------------------------

def sync_structure_kwargs() -> list[dict]:
    """Part 1's hidden constructor options, whose attributes and state must be BatchNorm2d's."""
    return [{"affine": False}, {"track_running_stats": False}]


def single_process_cases(device) -> list[Case]:
    """Part 1's hidden cases without a process group, on ``device``."""
    return [_single_process_case((3, 2, 3, 3), {"momentum": None}, seed=21, device=device)]


def replica_cases() -> list[_ReplicaCase]:
    """Part 1's hidden runs in 2 to 4 processes: uneven shards, every option, process groups."""
    return [
        _ReplicaCase([1, 4], seed=3, note="one process holds a single sample"),
        _ReplicaCase([2, 3, 1], channels=2, spatial=(3, 5), seed=4, note="three processes, uneven"),
        _ReplicaCase([2, 2], kwargs={"momentum": None}, modes=("train", "train", "train", "eval"), seed=5),
        _ReplicaCase([3, 2], kwargs={"affine": False, "eps": 1e-3}, seed=6),
        _ReplicaCase([2, 4], kwargs={"track_running_stats": False}, seed=7),
        _ReplicaCase([2, 3], modes=("train-no-grad", "train", "eval"), seed=8, note="first step under no_grad"),
        _ReplicaCase([4, 4], kwargs={"momentum": 0.3}, dtype=F32, mean=50.0, seed=9, note="float32, mean 50"),
        _ReplicaCase([2, 3, 2, 1], groups=[[0, 1], [2, 3]], seed=10),
        _ReplicaCase([2, 3], kwargs={"momentum": 0.0}, seed=11, note="momentum 0: the running statistics stay"),
    ]


# --- part 2: MaskedBatchNorm1d ----------------------------------------------------------------

def masked_cases(device) -> list[Case]:
    """Part 2's hidden cases on ``device``: no padding, every option, left padding."""
    d = dict(device=device)
    return [
        _masked_case([6, 6, 6], seed=3, note="no padding: plain BatchNorm1d", **d),
        _masked_case([1, 5], kwargs={"momentum": None}, modes=("train", "train", "train", "eval"), seed=4, **d),
        _masked_case([4, 2], kwargs={"affine": False, "eps": 1e-3}, seed=5, pad_value=0.0, **d),
        _masked_case([3, 2], kwargs={"track_running_stats": False}, seed=6, **d),
        _masked_case([2, 3, 1, 4], channels=5, modes=("train-no-grad", "train", "eval"), seed=7, **d),
        _masked_case([3, 5], dtype=F32, mean=40.0, seed=8, note="float32, mean 40", **d),
        _masked_case([4, 1, 3], seed=9, left=True, pad_value=-7.0, note="padded on the left", **d),
        _masked_case([3, 4], kwargs={"momentum": 0.0}, seed=10, note="momentum 0: the running statistics stay", **d),
    ]


# --- part 3: FrozenBatchNorm2d ----------------------------------------------------------------

def frozen_structure_kwargs() -> list[dict]:
    """Part 3's hidden constructor options, whose attributes and buffers must be FrozenReference's."""
    return [{"eps": 1e-3}]


def frozen_cases(device) -> list[Case]:
    """Part 3's hidden cases on ``device``: another eps, a first step under no_grad, float32."""
    return [_frozen_case((2, 5, 2, 4), {"eps": 1e-3}, seed=2, device=device),
            _frozen_case((1, 3, 4, 4), seed=3, modes=("train-no-grad", "train"), device=device),
            _frozen_case((6, 4, 2, 2), seed=4, dtype=F32, device=device)]


# --- part 4: recalibrate_bn -------------------------------------------------------------------

def recalibration_cases() -> list[tuple[str, int, dict]]:
    """Part 4's hidden (description, seed, options): uneven and single batches, momenta, modes, BatchNorm kinds."""
    return [("batches of 8, 5 and 3 samples, a loader of [input, target] lists", 3, {"sizes": (8, 5, 3), "pairs": "list"}),
            ("every BatchNorm with momentum 0.1", 4, {"momenta": (0.1, 0.1, 0.1)}),
            ("one batch", 5, {"sizes": (6,)}),
            ("batches of 8 and 2 samples", 7, {"sizes": (8, 2)}),
            ("a model in eval mode, momenta None, 0.5, 0.01", 6, {"training": False, "momenta": (None, 0.5, 0.01)}),
            ("a model in training mode whose second BatchNorm2d was put in eval mode (bn.eval())", 8,
             {"eval_modules": (4,)}),
            ("a model with a SyncBatchNorm, a BatchNorm3d and a BatchNorm1d", 9, {"kinds": ("sync", "3d", "1d")})]


# --- part 5: Float32StatsLayerNorm --------------------------------------------------------------

def half_cases(device) -> list[Case]:
    """Part 5's hidden cases on ``device``: larger spreads, a tiny eps, 2D normalized shapes, float32 and float64."""
    d = dict(device=device)
    return [
        _half_case((2, 8, 128), 128, mean=200.0, std=400.0, seed=3, note="mean 200, std 400", **d),
        _half_case((4, 16), 16, {"eps": 1e-8}, std=1e-3, seed=4, note="eps 1e-8 (0 in float16), std 1e-3", **d),
        _half_case((2, 3, 4, 8), (4, 8), dtype=BF16, mean=-3000.0, std=20.0, seed=5, note="mean −3000", **d),
        _half_case((3, 2, 24), 24, {"bias": False}, mean=30.0, std=400.0, seed=6, **d),
        _half_case((2, 4, 16), 16, {"elementwise_affine": False}, std=500.0, seed=7, **d),
        _half_case((2, 5, 16), 16, dtype=F32, mean=1e3, seed=8, note="mean 1e3", **d),
        _half_case((2, 5, 16), 16, dtype=F64, seed=9, **d),
    ]
