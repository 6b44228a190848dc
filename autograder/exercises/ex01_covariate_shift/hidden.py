"""The hidden cases of ``01_covariate_shift``, which only the grader holds.

:mod:`autograder.exercises.ex01_covariate_shift.checks` adds them to its visible cases when a
check runs with ``full=True``; the student's install has no copy of this file.
"""
from __future__ import annotations

import torch

from autograder.core.engine import Case
from autograder.exercises.ex01_covariate_shift.checks import _standardize_case


def dtypes() -> list[torch.dtype]:
    """The dtypes the hidden checks of the tools add to float32."""
    return [torch.float64]


def activation_configs() -> list[tuple]:
    """The hidden probes of ``activation_stats``: (widths, layer names, saturation, batch,
    training mode, Linear followed by nn.ReLU(inplace=True))."""
    return [
        ([5, 12, 12, 12, 3], ["fc1", "act1", "act3", "fc4"], 0.05, 17, False, None),
        ([4, 8, 3], ["act1"], 0.1, 2, True, None),
        # the ReLU overwrites fc2's output in place: statistics of a reference kept without a
        # copy, computed after the forward, are those of the ReLU's output
        ([5, 12, 12, 3], ["fc2", "act2"], 0.05, 15, True, "fc2"),
        # "spy" passes x through unchanged, and x holds values exactly at s and 1 − s (0.25 and
        # 0.75 are exact in binary): the inequalities must be strict
        ([4, 8, 3], ["spy", "act1"], 0.25, 6, True, None),
    ]


def layer_input_configs() -> list[tuple]:
    """The hidden probes of ``layer_input``: (widths, layer name, training mode, Linear followed
    by nn.ReLU(inplace=True) named "relu")."""
    return [
        ([5, 12, 12, 3], "act2", False, None),
        ([4, 8, 3], "fc1", True, None),
        # the ReLU overwrites the tensor its pre-hook receives: a reference kept without a copy changes
        ([5, 12, 12, 3], "relu", False, "fc2"),
    ]


def shift_pairs() -> list[tuple]:
    """The hidden inputs of ``distribution_shift``: (shape, shift, scale, a constant feature in `before`)."""
    return [((3, 4), -2.0, 0.5, False), ((40, 6), 0.0, 1.0, True), ((128, 3), 5.0, 3.0, False)]


def standardize_cases(device) -> list[Case]:
    """The hidden ``BatchStandardize`` cases on ``device``."""
    case = _standardize_case
    return [
        case(device, (2, 4), seed=3, note="N = 2"),
        case(device, (5, 3), seed=4, std=1e-3, note="low variance (std 1e-3)"),
        case(device, (5, 3), {"eps": 1e-2}, seed=5, std=0.1, note="std 0.1"),
        case(device, (64, 4), dtype=torch.float32, mean=1e3, seed=6, note="mean 1e3"),
        case(device, (16, 3, 7), dtype=torch.float32, seed=7),
    ]
