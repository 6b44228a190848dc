"""KIND: cheat
Subclasses torch.nn.LayerNorm.
"""
import torch
from torch import nn
import torch.nn.functional as F


class LayerNorm(nn.LayerNorm):
    """torch's own layer under the exercise's name."""


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
