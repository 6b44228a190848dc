"""Reference outputs of Hugging Face's ``SiglipVisionModel`` for small random configurations.

Exercise 3 asks students to assemble a SigLIP vision encoder around their own ``LayerNorm`` and
checks it against ``transformers.SiglipVisionModel``.  Importing ``transformers`` costs about 6 s,
far more than the grading budget of a whole notebook, so the outputs are computed once, stored in
``siglip_reference.pt`` beside this module (the hidden configuration's in ``hidden.pt``, which only
the grader holds) and checked against a live ``transformers`` run by the test suite
(``tests/test_layer_norm_checks.py``); ``python -m autograder.exercises.ex03_layer_norm.siglip_reference`` rewrites the file.

Each stored configuration holds the model's config (Hugging Face's field names), its random
weights (every parameter redrawn, LayerNorm γ and β included, so a forgotten affine cannot hide
behind ones and zeros), an input batch and, all in float64:

* ``last_hidden_state``: the model's output;
* ``eps_1e-5``: the same model built with ``layer_norm_eps=1e-5`` (torch's default);
* ``before_post_layernorm``: the encoder's output without the final ``post_layernorm``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch

DATA_FILE = Path(__file__).with_name("siglip_reference.pt")


@dataclass(frozen=True)
class SiglipVisionConfig:
    """The fields of ``transformers.SiglipVisionConfig`` that the vision encoder reads."""

    hidden_size: int = 32
    intermediate_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_channels: int = 3
    image_size: int = 16
    patch_size: int = 4
    layer_norm_eps: float = 1e-6
    hidden_act: str = "gelu_pytorch_tanh"
    attention_dropout: float = 0.0


# The visible configuration and the seed of its weights; the hidden one is in hidden.py.
CONFIGS = {"small": SiglipVisionConfig()}
SEEDS = {"small": 10}


def _randomize(model: torch.nn.Module, seed: int) -> None:
    """Redraw every parameter: weights ~ N(0, 1/fan_in), γ in [0.5, 1.5), β and biases in [-0.5, 0.5)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name or "layernorm" in name:
                low = 0.5 if name.endswith("weight") else -0.5
                p.copy_(low + torch.rand(p.shape, generator=g, dtype=p.dtype))
            elif name.endswith("bias"):
                p.copy_(torch.rand(p.shape, generator=g, dtype=p.dtype) - 0.5)
            else:
                fan_in = p[0].numel() if p.dim() > 1 else p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) / fan_in**0.5)


def compute_with_transformers(config: SiglipVisionConfig, seed: int) -> dict:
    """Build ``SiglipVisionModel`` (float64, random weights) and record its outputs."""
    from transformers import SiglipVisionConfig as HFConfig
    from transformers import SiglipVisionModel

    # sdpa keeps float64 throughout; the eager path computes its softmax in float32.
    def build(eps: float) -> torch.nn.Module:
        fields = {**asdict(config), "layer_norm_eps": eps}
        model = SiglipVisionModel(HFConfig(**fields, attn_implementation="sdpa")).double().eval()
        _randomize(model, seed)
        return model

    model, default_eps_model = build(config.layer_norm_eps), build(1e-5)
    g = torch.Generator().manual_seed(seed + 1)
    pixels = torch.rand((2, config.num_channels, config.image_size, config.image_size), generator=g, dtype=torch.float64) * 2 - 1
    with torch.no_grad():
        out = model(pixel_values=pixels, output_hidden_states=True)
        other = default_eps_model(pixel_values=pixels)
    weights = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("head.")}
    return {
        "config": asdict(config),
        "weights": weights,
        "pixel_values": pixels,
        "last_hidden_state": out.last_hidden_state.clone(),
        "eps_1e-5": other.last_hidden_state.clone(),
        "before_post_layernorm": out.hidden_states[-1].clone(),
    }


def compute_all(configs: dict | None = None, seeds: dict | None = None) -> dict:
    configs, seeds = (CONFIGS, SEEDS) if configs is None else (configs, seeds)
    return {name: compute_with_transformers(config, seed=seeds[name]) for name, config in configs.items()}


def load() -> dict:
    """The stored reference (CPU, float64), keyed by configuration name."""
    return torch.load(DATA_FILE, weights_only=True)


def config(name: str) -> SiglipVisionConfig:
    return CONFIGS[name]


if __name__ == "__main__":  # rewrites this file and the grader's hidden.pt
    from autograder.exercises.ex03_layer_norm import hidden

    for path, stored in ((DATA_FILE, compute_all()),
                         (hidden.DATA_FILE, compute_all(hidden.ENCODER_CONFIGS, hidden.ENCODER_SEEDS))):
        torch.save(stored, path)
        print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")
