"""KIND: bug
LayerNorm forgets to add β (invisible with the default β = 0); the encoder is wired right, so Part 3 keeps its points.
"""
import torch
from torch import nn
import torch.nn.functional as F


class LayerNorm(nn.Module):
    """y = (x − E[x]) / sqrt(Var[x] + eps) · γ + β over the last len(normalized_shape) dims."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        factory = {"device": device, "dtype": dtype}
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.normalized_shape, **factory))
            if bias:
                self.bias = nn.Parameter(torch.zeros(self.normalized_shape, **factory))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = len(self.normalized_shape)
        if k == 0:
            raise RuntimeError(
                "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, "
                "but got normalized_shape = []"
            )
        if x.dim() < k or tuple(x.shape[x.dim() - k:]) != self.normalized_shape:
            raise RuntimeError(
                f"Given normalized_shape={list(self.normalized_shape)}, expected input with shape "
                f"[*, {', '.join(str(s) for s in self.normalized_shape)}], but got input of size {list(x.shape)}"
            )
        dims = tuple(range(x.dim() - k, x.dim()))
        mean = x.mean(dim=dims, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
        y = (x - mean) / torch.sqrt(var + self.eps)
        if self.weight is not None:
            y = y * self.weight
        return y


class SiglipEncoderLayer(nn.Module):
    """Pre-LN transformer layer: h + attn(LN1(h)), then h + mlp(LN2(h))."""

    def __init__(self, config):
        super().__init__()
        self.layer_norm1 = LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.self_attn = SiglipAttention(config)
        self.layer_norm2 = LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.mlp = SiglipMLP(config)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h + self.self_attn(self.layer_norm1(h))
        return h + self.mlp(self.layer_norm2(h))


class SiglipEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList([SiglipEncoderLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            h = layer(h)
        return h


class SiglipVisionTransformer(nn.Module):
    """pixel_values (B, C, H, W) → embeddings → encoder → post_layernorm → (B, T, D)."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embeddings = SiglipVisionEmbeddings(config)
        self.encoder = SiglipEncoder(config)
        self.post_layernorm = LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.post_layernorm(self.encoder(self.embeddings(pixel_values)))
