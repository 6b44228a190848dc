"""The hidden cases of ``02b_batch_norm_backward``, which only the grader holds.

:mod:`autograder.exercises.ex02b_batch_norm_backward.checks` adds them to its visible cases when a
check runs with ``full=True``; the student's install has no copy of this file.
"""
from __future__ import annotations

from autograder.core.inputs import channel_input, sample_input
from autograder.exercises.ex02b_batch_norm_backward.checks import F32, Case


def batch_norm_cases() -> list[Case]:
    """The hidden cases of ``BatchNormFunction``."""
    return [
        Case(channel_input((2, 4), seed=4), (4,), note="N = 2"),
        Case(channel_input((3, 2, 5), seed=5), (2,)),
        Case(channel_input((2, 3, 4, 5), seed=6), (3,), channels_last=True),
        Case(channel_input((4, 2, 3, 3), seed=7, std=1e-3), (2,), note="std 1e-3: ε matters"),
        Case(channel_input((16, 3, 4, 4), seed=8, mean=1e3), (3,), F32, note="mean 1000"),
        Case(channel_input((4, 3, 5, 5), seed=9), (3,), F32, channels_last=True),
    ]


def layer_norm_cases() -> list[Case]:
    """The hidden cases of ``LayerNormFunction``."""
    return [
        Case(sample_input((5, 2), seed=15), (2,), note="two features"),
        Case(sample_input((3, 4, 6), seed=16, std=1e-3), (6,), note="std 1e-3: ε matters"),
        Case(sample_input((2, 4, 3, 3), seed=17), (4, 3, 3), F32, channels_last=True),
        Case(sample_input((4, 5, 16), seed=18, mean=1e3), (16,), F32, note="mean 1000"),
    ]
