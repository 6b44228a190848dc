"""The hidden cases of exercise 08, which only the grader holds (:mod:`autograder.core.withheld`).

Each function adds to the visible cases of the same name in :mod:`.checks`, for one device.
"""
from __future__ import annotations

import torch

from autograder.core.engine import Case, Step
from autograder.core.inputs import sample_input
from autograder.exercises.ex08_large_models.checks import attention_case, dyt_case, rms_case

F64, F32, F16, BF16 = torch.float64, torch.float32, torch.float16, torch.bfloat16


def rms_forward_cases(device) -> list[Case]:
    d = dict(device=device)
    return [
        rms_case((3, 4, 5, 6), (5, 6), seed=11, note="over the last two dimensions", **d),
        rms_case((2, 3, 4), [3, 4], {"eps": 1e-3}, seed=12, std=0.05, note="normalized_shape as a list", **d),
        rms_case((7,), 7, seed=13, note="one unbatched token", **d),
        rms_case((2, 3, 6), 6, {"elementwise_affine": False}, seed=14, mean=2.0, **d),
        rms_case((2, 4, 64), 64, dtype=F32, mean=1e3, seed=15, note="mean 1e3", **d),
        rms_case((3, 5, 32), 32, dtype=BF16, std=0.03, seed=16, note="eps=None, std 0.03: bfloat16's own eps would show", **d),
        rms_case((2, 5, 32), 32, dtype=BF16, mean=1000.0, seed=17, note="mean 1000", **d),
        rms_case((2, 3, 48), 48, {"eps": 1e-5}, dtype=F16, mean=200.0, std=400.0, seed=18, note="mean 200, std 400", **d),
        rms_case((2, 3, 4, 8), (4, 8), dtype=F16, std=0.02, seed=19, note="eps=None over two dimensions", **d),
        rms_case((4, 3, 8), 8, {"eps": 1e-6}, dtype=F64, std=1e-3, seed=20, **d),
    ]


def rms_contract_variants() -> list[tuple[tuple, dict]]:
    return [(([4, 2],), {}), ((5,), {"eps": None}), (((3, 2, 2),), {"elementwise_affine": False, "eps": 1e-4})]


def rms_input_check_cases(device) -> list[Case]:
    def steps(*shapes):
        return [Step("train", sample_input(shape, seed=50 + i)) for i, shape in enumerate(shapes)]

    return [
        Case("RMSNorm", ((3, 4),), {}, steps((2, 4, 3), (2, 3, 4)), device=device),
        Case("RMSNorm", ((2, 3),), {"elementwise_affine": False}, steps((5, 3, 2)), device=device),
    ]


def attention_cases(device) -> list[Case]:
    d = dict(device=device)
    return [
        attention_case(1, 7, 32, 4, seed=11, note="one sequence of 7 tokens", **d),
        attention_case(3, 4, 12, 3, {"eps": 1e-3}, std=1e-2, seed=12, note="small inputs: eps shows", **d),
        attention_case(2, 5, 16, 1, seed=13, note="one head", **d),
        attention_case(2, 8, 32, 8, dtype=F32, scale=8.0, seed=14, note="head_dim 4, very large projections", **d),
        attention_case(2, 3, 8, 2, {"eps": 1e-6}, seed=15, **d),
    ]


def dyt_init_variants() -> list[tuple[tuple, dict]]:
    return [((3,), {"alpha_init": 2.0}), ((16,), {"alpha_init": 0.05})]


def dyt_cases(device) -> list[Case]:
    d = dict(device=device)
    return [
        dyt_case((4, 3), 1.0, seed=11, note="(N, C)", **d),
        dyt_case((2, 3, 4, 5), seed=12, mean=1.0, note="channels last over (N, H, W, C)", **d),
        dyt_case((7,), 0.2, seed=13, note="one unbatched token", **d),
        dyt_case((2, 6, 16), dtype=F32, mean=5.0, std=10.0, seed=14, note="large inputs", **d),
        dyt_case((3, 5, 8), dtype=BF16, seed=15, **d),
    ]
