"""Hidden cases of exercise 06: the cases the hidden tests add to each part's visible ones.

Only the grader holds this file (:mod:`autograder.grading.parts`). The checks reach it through
:func:`autograder.core.withheld.of` when ``full=True`` and run these cases after the visible ones.
"""
from __future__ import annotations

import torch

from autograder.core.engine import Case
from autograder.exercises.ex06_training_dynamics.checks import F32, F64, _ghost_case


def ghost_cases(device) -> list[Case]:
    """Part 1's hidden GhostBatchNorm cases on ``device``: 3D input, every option, uneven and single virtual batches."""
    d = dict(device=device)
    return [
        _ghost_case((6, 2, 5), 3, seed=4, **d),
        _ghost_case((8, 3), 4, {"momentum": None}, modes=("train", "train", "train", "eval"), seed=5, **d),
        _ghost_case((8, 3, 2, 2), 2, {"affine": False}, seed=6, **d),
        _ghost_case((8, 3), 4, {"track_running_stats": False}, seed=7, **d),
        _ghost_case((6, 3), 8, note="one virtual batch: plain BatchNorm", seed=8, **d),
        _ghost_case((12, 3), 5, note="virtual batches of 5, 5 and 2 (x.split, not x.chunk)", seed=11, **d),
        _ghost_case((8, 3), 4, modes=("train-no-grad", "train", "eval"), seed=9, tracked_state=True, **d),
        _ghost_case((16, 4), 4, {"eps": 1e-3}, dtype=F32, mean=100.0, note="float32, mean 100", seed=10, **d),
    ]


def diagnostic_cases() -> list[tuple[tuple, float, torch.dtype]]:
    """Part 2's hidden (shape of w, lr, dtype): linear, 1x1 and 1D weights, float16 and bfloat16."""
    return [((5, 8), 0.5, F32), ((2, 4, 1, 1), 1e-3, F64), ((8, 2, 5), 0.05, F32),
            ((6, 4), 0.1, torch.float16), ((3, 2, 3, 3), 0.01, torch.bfloat16)]


def fold_cases() -> list[tuple[dict, dict, torch.dtype, str]]:
    """Part 3's hidden (conv kwargs, bn kwargs, dtype, note): groups, stride, no affine, float32, dilation."""
    return [
        ({"in_channels": 4, "out_channels": 6, "kernel_size": 3, "groups": 2, "stride": 2}, {"num_features": 6}, F64, "groups=2, stride 2"),
        ({"in_channels": 3, "out_channels": 5, "kernel_size": 1}, {"num_features": 5, "affine": False}, F64, "BN without affine"),
        ({"in_channels": 3, "out_channels": 4, "kernel_size": 3, "padding": 1}, {"num_features": 4, "eps": 1e-3}, F32, "float32, eps 1e-3"),
        ({"in_channels": 4, "out_channels": 4, "kernel_size": 3, "groups": 4, "bias": False}, {"num_features": 4}, F32, "depthwise, float32"),
        ({"in_channels": 3, "out_channels": 4, "kernel_size": 3, "padding": 2, "dilation": 2, "padding_mode": "reflect"},
         {"num_features": 4}, F64, "dilation 2, reflect padding"),
    ]
