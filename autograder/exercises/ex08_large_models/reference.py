"""The references of exercise 08 that ``torch.nn`` has no class for, built from torch's own parts.

* :class:`QKNormAttention`: causal multi-head self-attention with RMSNorm on each head's queries
  and keys before the dot product, as Qwen3 does (``transformers.models.qwen3.modeling_qwen3``:
  ``q_norm``/``k_norm`` over ``head_dim``), from ``nn.Linear``, ``nn.RMSNorm`` and
  ``F.scaled_dot_product_attention``.
* :class:`DyT`: Dynamic Tanh, ``weight · tanh(alpha · x) + bias`` over the last dimension, as defined
  by Zhu, Chen, He, LeCun and Liu, "Transformers without Normalization" (CVPR 2025), with the
  parameters of the authors' code: ``alpha`` of shape (1,), ``weight`` ones, ``bias`` zeros.

The grader runs them; :func:`attend` computes the attention from a ``state_dict`` with one
thing changed, for the hints.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class QKNormAttention(nn.Module):
    """The contract of Part 3: ``QKNormAttention(d_model, n_heads, eps=1e-6, device=None, dtype=None)``."""

    def __init__(self, d_model: int, n_heads: int, eps: float = 1e-6, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False, **factory)
        self.k_proj = nn.Linear(d_model, d_model, bias=False, **factory)
        self.v_proj = nn.Linear(d_model, d_model, bias=False, **factory)
        self.o_proj = nn.Linear(d_model, d_model, bias=False, **factory)
        self.q_norm = nn.RMSNorm(self.head_dim, eps=eps, **factory)
        self.k_norm = nn.RMSNorm(self.head_dim, eps=eps, **factory)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        shape = (B, T, self.n_heads, self.head_dim)
        q = self.q_norm(self.q_proj(x).view(shape)).transpose(1, 2)  # (B, heads, T, head_dim)
        k = self.k_norm(self.k_proj(x).view(shape)).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # scale 1/√head_dim
        return self.o_proj(out.transpose(1, 2).reshape(B, T, self.d_model))


def attend(x: torch.Tensor, state: dict, n_heads: int, eps: float | None, *, normed: str = "qk",
           value_weight: str | None = None, scale: float | None = None, causal: bool = True,
           heads_first: bool = False) -> torch.Tensor:
    """:class:`QKNormAttention`'s output in float64 for the parameters ``state`` (by ``state_dict``
    name), with one misreading switched on: ``normed`` the tensors RMSNorm is applied to ("qk",
    "q", "k", "qkv", ""), the values with the weight ``value_weight`` ("q_norm.weight",
    "k_norm.weight"; None: ones), ``scale`` the logits' factor (None: 1/√head_dim), ``causal`` the
    mask, ``heads_first`` the heads cut as ``view(B, heads, T, head_dim)``, without the transpose."""
    x = x.double()
    w = {name: value.double() for name, value in state.items()}
    B, T, D = x.shape
    hd = D // n_heads

    def heads(t):
        return t.reshape(B, n_heads, T, hd) if heads_first else t.reshape(B, T, n_heads, hd).transpose(1, 2)

    def norm(t, which):
        weight = w[f"{which}_norm.weight"] if which != "v" else (w[value_weight] if value_weight else None)
        return F.rms_norm(t, (hd,), weight, eps) if which in normed else t

    q = norm(heads(F.linear(x, w["q_proj.weight"])), "q")
    k = norm(heads(F.linear(x, w["k_proj.weight"])), "k")
    v = norm(heads(F.linear(x, w["v_proj.weight"])), "v")
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    return F.linear(out.transpose(1, 2).reshape(B, T, D), w["o_proj.weight"])


class DyT(nn.Module):
    """The contract of Part 4: ``DyT(num_features, alpha_init=0.5, device=None, dtype=None)``."""

    def __init__(self, num_features: int, alpha_init: float = 0.5, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.num_features, self.alpha_init = num_features, alpha_init
        self.alpha = nn.Parameter(torch.full((1,), alpha_init, **factory))
        self.weight = nn.Parameter(torch.ones(num_features, **factory))
        self.bias = nn.Parameter(torch.zeros(num_features, **factory))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.alpha * x) * self.weight + self.bias
