"""Inputs designed to expose bugs: every channel gets its own mean and spread.

Distinct per-channel statistics make reductions over the wrong axes visible; a low spread makes
the placement and value of ε visible; a large mean breaks the one-pass variance in float32; a
batch of two makes the biased/unbiased confusion large (a factor of 2).
"""
from __future__ import annotations

import torch

from autograder.core.seeding import generator


def channel_input(
    shape: tuple[int, ...],
    seed: int,
    mean: float = 0.0,
    std: float = 1.0,
    channel_dim: int = 1,
) -> torch.Tensor:
    """A float64 tensor whose channel ``c`` has mean ≈ ``mean + c`` and std ≈ ``std·(1 + c/2)``."""
    g = generator(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    channels = shape[channel_dim] if len(shape) > channel_dim else 1
    view = [1] * len(shape)
    if len(shape) > channel_dim:
        view[channel_dim] = channels
    c = torch.arange(channels, dtype=torch.float64).reshape(view)
    return mean + c + std * (1 + c / 2) * x


def random_tensor(shape: tuple[int, ...], seed: int, low: float, high: float) -> torch.Tensor:
    """Uniform values in [low, high), float64, reproducible."""
    g = generator(seed)
    return low + (high - low) * torch.rand(shape, generator=g, dtype=torch.float64)


def sample_input(shape: tuple[int, ...], seed: int, mean: float = 0.0, std: float = 1.0) -> torch.Tensor:
    """A float64 tensor whose sample ``n`` (dim 0) has mean ≈ ``mean + n`` and std ≈ ``std·(1 + n/2)``,
    and whose last dimension drifts by ``std/2`` per index, so that statistics over the wrong
    dimensions (the batch, only the last dim, or one dim too many) give different answers."""
    g = generator(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    n = torch.arange(shape[0], dtype=torch.float64).reshape([-1] + [1] * (len(shape) - 1))
    drift = torch.arange(shape[-1], dtype=torch.float64) * (std / 2) if len(shape) > 1 else 0.0
    return mean + n + std * (1 + n / 2) * (x + drift)


def channel_state(channels: int, seed: int, affine: bool = True, tracked: bool = False, batches: int = 0) -> dict:
    """Random γ, β (and running statistics, ``num_batches_tracked`` = ``batches``) of a layer with
    per-channel state, by torch's names, so that no bug hides behind ones and zeros."""
    state = {}
    if affine:
        state["weight"] = random_tensor((channels,), seed, 0.5, 1.5)
        state["bias"] = random_tensor((channels,), seed + 1, -0.5, 0.5)
    if tracked:
        state["running_mean"] = random_tensor((channels,), seed + 2, -1.0, 1.0)
        state["running_var"] = random_tensor((channels,), seed + 3, 0.5, 2.0)
        state["num_batches_tracked"] = torch.tensor(batches, dtype=torch.long)
    return state
