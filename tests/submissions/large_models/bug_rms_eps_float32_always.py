"""KIND: bug
Takes float32's eps for every dtype, float64 too.
"""
import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x²) + eps) · γ over the last len(normalized_shape) dims."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def forward(self, x):
        k = len(self.normalized_shape)
        if tuple(x.shape[x.dim() - k:]) != self.normalized_shape:
            raise RuntimeError(f"expected input with last dimensions {self.normalized_shape}, got {tuple(x.shape)}")
        wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        eps = torch.finfo(torch.float32).eps if self.eps is None else self.eps
        dims = tuple(range(-k, 0))
        y = wide * torch.rsqrt(wide.pow(2).mean(dim=dims, keepdim=True) + eps)
        y = y.to(x.dtype)
        return y * self.weight if self.weight is not None else y


class QKNormAttention(nn.Module):
    """Causal multi-head self-attention with RMSNorm on each head's queries and keys (Qwen3)."""

    def __init__(self, d_model, n_heads, eps=1e-6, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False, **factory)
        self.k_proj = nn.Linear(d_model, d_model, bias=False, **factory)
        self.v_proj = nn.Linear(d_model, d_model, bias=False, **factory)
        self.o_proj = nn.Linear(d_model, d_model, bias=False, **factory)
        self.q_norm = RMSNorm(self.head_dim, eps=eps, **factory)
        self.k_norm = RMSNorm(self.head_dim, eps=eps, **factory)

    def forward(self, x):
        B, T, D = x.shape
        heads = (B, T, self.n_heads, self.head_dim)
        q = self.q_norm(self.q_proj(x).view(heads)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(heads)).transpose(1, 2)
        v = self.v_proj(x).view(heads).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, D))


class DyT(nn.Module):
    """Dynamic Tanh: weight · tanh(alpha · x) + bias over the last dimension."""

    def __init__(self, num_features, alpha_init=0.5, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.num_features, self.alpha_init = num_features, alpha_init
        self.alpha = nn.Parameter(torch.full((1,), alpha_init, **factory))
        self.weight = nn.Parameter(torch.ones(num_features, **factory))
        self.bias = nn.Parameter(torch.zeros(num_features, **factory))

    def forward(self, x):
        return self.weight * torch.tanh(self.alpha * x) + self.bias
