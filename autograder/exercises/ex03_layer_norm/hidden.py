"""The hidden cases of ``03_layer_norm``, which only the grader holds.

:mod:`autograder.exercises.ex03_layer_norm.checks` adds them to its visible cases when a check
runs with ``full=True``; the student's install has no copy of this file.
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from autograder.core.engine import Case
from autograder.core.seeding import generator
from autograder.exercises.ex03_layer_norm import siglip_reference
from autograder.exercises.ex03_layer_norm.checks import F32, F64, _case, _input_steps

EMPTY_SHAPE = "an empty normalized_shape: torch builds the layer, and its forward raises RuntimeError"


def forward_cases(device) -> list[Case]:
    """The hidden forward cases on ``device``."""
    d = dict(device=device)
    return [
        _case((4, 3, 5, 6), (5, 6), seed=3, note="over (H, W)", **d),
        _case((2, 6), [6], seed=4, note="normalized_shape as a list", **d),
        _case((7,), 7, seed=5, note="one unbatched sample", **d),
        _case((1, 3, 8), 8, seed=6, note="batch of one", **d),
        _case((3, 2, 4), 4, {"eps": 1e-6}, seed=7, std=1e-3, note="std 1e-3, eps 1e-6 as in SigLIP", **d),
        _case((3, 2, 4), 4, {"eps": 1e-3}, seed=8, std=1e-2, note="std 1e-2", **d),
        _case((4, 3, 4), 4, seed=9, std=1e-3, note="low variance (std 1e-3)", **d),
        _case((2, 3, 6), 6, {"elementwise_affine": False}, seed=10, **d),
        _case((2, 3, 6), (3, 6), {"bias": False}, seed=11, **d),
        _case((2, 4, 64), 64, dtype=F32, mean=1e3, seed=12, note="mean 1e3", **d),
        _case((8, 16, 32), 32, dtype=F32, seed=13, **d),
        _case((2, 2, 3), 3, seed=14, note="D = 3", **d),
    ]


def input_check_cases(device) -> list[Case]:
    """The hidden input checks on ``device``: inputs and shapes torch refuses."""
    return [
        Case("LayerNorm", ((3, 4),), {}, _input_steps((2, 4, 3), (4,), (2, 3, 4)), device=device),
        Case("LayerNorm", ((2, 3),), {"elementwise_affine": False}, _input_steps((5, 3, 2)), device=device),
        # torch builds LayerNorm(()) (γ and β of shape ()) and refuses it in forward, every input
        Case("LayerNorm", ((),), {}, _input_steps((2, 3), (4,)), device=device, note=EMPTY_SHAPE),
        Case("LayerNorm", ([],), {"elementwise_affine": False}, _input_steps((3, 2, 5)), device=device, note=EMPTY_SHAPE),
    ]


def contract_variants() -> list[tuple]:
    """The hidden (args, kwargs) of the contract check."""
    return [((5,), {"eps": 1e-6}), (([4, 2],), {}), (((3, 2, 2),), {"elementwise_affine": False, "bias": False})]


def contract_dtypes() -> list[torch.dtype]:
    """The dtypes the hidden contract check adds to float32."""
    return [F64]


# The SigLIP configuration the hidden encoder check adds to "small", the seed of its weights,
# and its stored outputs (written by ``python -m autograder.exercises.ex03_layer_norm.siglip_reference``).
ENCODER_CONFIGS = {
    "odd": siglip_reference.SiglipVisionConfig(hidden_size=24, intermediate_size=40, num_hidden_layers=3,
                                               num_attention_heads=3, image_size=12, patch_size=3),
}
ENCODER_SEEDS = {"odd": 11}
DATA_FILE = Path(__file__).with_name("hidden.pt")
FRESH_PIXELS_SEED = 3_011


def encoder_configs() -> dict[str, siglip_reference.SiglipVisionConfig]:
    """The SigLIP configurations the hidden encoder check adds to "small", by name."""
    return dict(ENCODER_CONFIGS)


def stored_references() -> dict:
    """The stored outputs of :data:`ENCODER_CONFIGS` (CPU, float64), keyed by name."""
    return torch.load(DATA_FILE, weights_only=True)


def fresh_references(configs: dict, stored: dict) -> dict[str, dict]:
    """Hugging Face's outputs for each configuration in ``configs``, with its stored weights, on
    pixel values no stored file holds (:func:`fresh_reference`)."""
    return {name: fresh_reference(config, stored[name]["weights"]) for name, config in configs.items()}


def fresh_reference(config, weights: dict) -> dict:
    """Hugging Face's outputs (float64, CPU) for ``config`` with the stored ``weights``, on pixel
    values that no stored file holds: at grading time they are drawn from the course's secret
    and the submission (:mod:`autograder.core.seeding`), so grading twice gives the same.

    The stored outputs ship with the package, so a forward could look them up instead of
    computing; these cannot be.  Imports ``transformers`` (seconds), so only the hidden check uses it.
    """
    from dataclasses import asdict

    from transformers import SiglipVisionConfig as HFConfig
    from transformers import SiglipVisionModel

    hf_config = HFConfig(**asdict(config), attn_implementation="sdpa", vision_use_head=False)
    with torch.random.fork_rng(devices=[]):  # its random initialization leaves the notebook's RNG alone
        model = SiglipVisionModel(hf_config).to(F64).eval()
    model.load_state_dict(weights, strict=True)
    g = generator(FRESH_PIXELS_SEED)  # at grading time: drawn from the course's secret and the student
    shape = (2, config.num_channels, config.image_size, config.image_size)
    pixels = torch.rand(shape, generator=g, dtype=F64) * 2 - 1
    with torch.no_grad():
        out = model(pixel_values=pixels, output_hidden_states=True)
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.eps = 1e-5
        default_eps = model(pixel_values=pixels)
    return {
        "pixel_values": pixels,
        "last_hidden_state": out.last_hidden_state.detach().clone(),
        "eps_1e-5": default_eps.last_hidden_state.detach().clone(),
        "before_post_layernorm": out.hidden_states[-1].detach().clone(),
    }
