"""Hidden cases of exercise 05: the data the hidden tests add to each part's visible data.

Only the grader holds this file (:mod:`autograder.grading.parts`). The checks reach it through
:func:`autograder.core.withheld.of` when ``full=True`` and run these cases after the visible ones.
"""
from __future__ import annotations

from autograder.exercises.ex05_data_vs_layer_norm.checks import F32, Data
from autograder.exercises.ex05_data_vs_layer_norm.reference import F64


def fit_data() -> list[Data]:
    """Part 1's hidden (N, D) data: N = 2, one feature, large means and tiny spreads."""
    return [
        Data((2, 3), F64, seed=4, note="N = 2"),
        Data((2, 3), F32, mean=1.0, seed=5, note="N = 2"),
        Data((200, 6), F64, mean=-5.0, std=3.0, seed=7),
        Data((9, 1), F64, mean=0.5, seed=8, note="one feature"),
        Data((7, 3), F32, std=1e-3, seed=9),
        Data((5, 4), F64, mean=1e3, std=1e-3, seed=10),
    ]


def transform_data() -> list[Data]:
    """Part 2's hidden (N, D) data: a large mean, a single new sample, more constant features."""
    return [
        Data((64, 4), F32, mean=1e3, seed=14),
        Data((2, 3), F64, seed=15, new_n=1, note="N = 2, then a single new sample"),
        Data((13, 6), F32, seed=16, constant=((0, 0.0), (2, 0.1), (5, 1000.1)), note="features 0, 2, 5 constant"),
        Data((5, 3), F64, std=1e-3, seed=17, constant=((2, -4.2),), note="feature 2 constant"),
    ]


def image_data() -> list[Data]:
    """Part 3's hidden (N, C, H, W) images: W = C, N = 1, one channel, a large mean, a tiny spread."""
    return [
        Data((2, 3, 4, 3), F64, seed=23, note="W = C"),
        Data((1, 2, 3, 4), F64, seed=24, note="N = 1"),
        Data((6, 1, 8, 8), F32, mean=0.3, seed=25, note="one channel"),
        Data((3, 4, 5, 5), F32, mean=1e3, seed=26),
        Data((2, 3, 2, 2), F64, std=1e-3, seed=27),
    ]


def batch_norm_data() -> list[Data]:
    """Part 4's hidden data, (N, D) and (N, C, H, W): a single new sample, a constant channel, one channel."""
    return [
        Data((64, 5), F32, mean=1e3, seed=33),
        Data((2, 3), F64, seed=34, new_n=1, note="N = 2, then a single new sample"),
        Data((2, 2, 3, 4), F64, std=1e-3, seed=35, constant=((1, 0.5),), note="channel 1 constant"),
        Data((5, 1, 4, 4), F32, seed=36, note="one channel"),
        Data((4, 3, 2, 2), F32, std=1e-3, seed=37),
    ]
