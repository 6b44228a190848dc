"""The RMSNorm, QK-norm attention and DyT checks on the catalogue in tests/submissions/large_models/,
and the facts about torch the statement relies on.

Correct submissions pass every part; each bug fails exactly the parts it breaks, with the phrase
that names its misconception; cheats are graded in the sandbox, as nbgrader grades them.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from autograder.exercises.ex08_large_models import checks, hints, reference
from catalogue import Catalogue, no_points, tampering

ASSIGNMENT = "08_large_models"
PARTS = {
    "rms_forward": lambda ns, full: checks.check_rms_norm_forward(ns["RMSNorm"], full=full),
    "rms_contract": lambda ns, full: checks.check_rms_norm_contract(ns["RMSNorm"], full=full),
    "qk": lambda ns, full: checks.check_qk_norm_attention(ns["QKNormAttention"], ns["RMSNorm"], full=full),
    "dyt": lambda ns, full: checks.check_dyt(ns["DyT"], full=full),
}
RMS_WRONG = "your RMSNorm itself differs from torch.nn.RMSNorm"
BUGS = {
    "bug_rms_subtracts_mean": {"rms_forward": "that is LayerNorm", "qk": RMS_WRONG},
    "bug_rms_eps_outside_sqrt": {"rms_forward": "inside the square root", "qk": RMS_WRONG},
    "bug_rms_eps_default_1e5": {"rms_forward": "LayerNorm's default"},  # the block passes its eps: Part 3 is right
    "bug_rms_eps_of_input_dtype": {"rms_forward": "float16's own eps"},
    "bug_rms_eps_float32_always": {"rms_forward": "float32's eps for every input"},
    "bug_rms_statistics_in_half": {"rms_forward": "you compute mean(x²) in float16"},
    "bug_rms_weight_before_normalizing": {"rms_forward": "applied before normalizing", "qk": RMS_WRONG},
    "bug_rms_last_dim_only": {"rms_forward": "last dimension only"},
    "bug_rms_detached_statistics": {"rms_forward": "detached", "qk": RMS_WRONG},
    "bug_rms_has_bias": {"rms_contract": "unexpected ['bias']", "qk": "your state_dict holds"},
    "bug_rms_no_shape_check": {"rms_contract": "torch raises RuntimeError"},
    "bug_rms_eps_resolved_in_init": {"rms_contract": "attribute `eps`", "rms_forward": "float32's eps for every input"},
    "bug_qk_norm_over_d_model": {"qk": "OLMo 2's variant"},
    "bug_qk_no_scale": {"qk": "not divided by √head_dim"},
    "bug_qk_not_causal": {"qk": "not causal"},
    "bug_qk_heads_first": {"qk": "view(B, n_heads, T, head_dim)"},
    "bug_qk_normalizes_values": {"qk": "normalize the values too"},
    "bug_qk_eps_not_passed": {"qk": "do not use the block's eps"},
    "bug_qk_out_proj_name": {"qk": "Name the modules q_proj, k_proj, v_proj, o_proj"},
    "bug_dyt_alpha_per_channel": {"dyt": "ONE learnable scalar"},
    "bug_dyt_alpha_0d": {"dyt": "1-element tensor"},
    "bug_dyt_alpha_starts_at_one": {"dyt": "it must start at alpha_init"},
    "bug_dyt_alpha_outside_tanh": {"dyt": "INSIDE tanh"},
    "bug_dyt_affine_inside_tanh": {"dyt": "weight and bias come after tanh"},
}
CHEATS = {
    "cheat_functional_rms_norm": no_points("rms_forward", "rms_contract", "qk"),
    "cheat_aten_rms_norm": no_points("rms_forward", "rms_contract", "qk"),
    "cheat_subclass_torch": no_points("rms_forward", "rms_contract", "qk"),
    "cheat_torch_rms_norm_in_attention": no_points("qk"),
    "cheat_grader_reference": no_points("qk", "dyt"),
    "cheat_patch_assert_close": tampering(PARTS),
}
CATALOGUE = Catalogue(ASSIGNMENT, PARTS, BUGS, CHEATS)


@pytest.mark.parametrize("name", sorted(CATALOGUE.correct()))
def test_correct_submission_passes_every_part(name):
    CATALOGUE.assert_correct(name)


def test_every_catalogue_file_has_an_expectation():
    CATALOGUE.assert_complete()


@pytest.mark.parametrize("name", sorted(BUGS))
def test_bug_fails_the_parts_it_breaks_with_its_misconception(name):
    CATALOGUE.assert_bug(name)


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheat_earns_nothing_for_the_parts_it_cheats_on(name, tmp_path):
    CATALOGUE.assert_cheat(name, str(tmp_path))


def test_the_released_stub_fails_every_part():
    CATALOGUE.assert_stub_fails()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_eps_none_is_the_eps_of_the_dtype_torch_computes_in(dtype):
    """What the statement and Question 1 say: float32's eps for float16 and bfloat16 inputs (torch
    upcasts them), the input's own for float32 and float64; the output has the input's dtype."""
    x = (torch.randn(3, 64, dtype=torch.float64) * 1e-3).to(dtype)
    layer = nn.RMSNorm(64, dtype=dtype)
    wide = x.double()
    for eps, right in ((hints.default_eps(dtype), True), (torch.finfo(dtype).eps, dtype in (torch.float32, torch.float64))):
        expected = (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)).to(dtype)
        close = torch.allclose(layer(x).double(), expected.double(), rtol=1e-2 if dtype in hints.HALF else 1e-6, atol=0)
        assert close == right, (dtype, eps)
    assert layer(x).dtype == dtype
    assert hints.default_eps(torch.float16) == 2.0 ** -23


def test_the_reference_attention_is_qwen3s_and_attend_is_the_reference():
    """The reference block computes what Qwen3's attention computes (without its rotary embedding
    and with the same eps), and the hints' functional form agrees with it exactly."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen3 import modeling_qwen3 as qwen3

    config = transformers.Qwen3Config(hidden_size=16, num_attention_heads=4, num_key_value_heads=4, head_dim=4,
                                      rms_norm_eps=1e-6, attention_bias=False, attn_implementation="sdpa")
    torch.manual_seed(0)
    theirs = qwen3.Qwen3Attention(config, layer_idx=0).double().eval()
    ours = reference.QKNormAttention(16, 4, eps=1e-6, dtype=torch.float64)
    with torch.no_grad():
        for name in ("q_norm.weight", "k_norm.weight"):
            theirs.get_parameter(name).uniform_(0.5, 1.5)
    assert ours.load_state_dict(theirs.state_dict(), strict=True)
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    identity = (torch.ones(2, 5, 4, dtype=torch.float64), torch.zeros(2, 5, 4, dtype=torch.float64))  # no rotation
    expected, _ = theirs(x, position_embeddings=identity, attention_mask=None)
    # Qwen3RMSNorm computes in float32 even in a float64 model: agreement to float32's precision.
    torch.testing.assert_close(ours(x), expected, rtol=1e-5, atol=1e-6)
    state = {k: v.clone() for k, v in ours.state_dict().items()}
    torch.testing.assert_close(reference.attend(x, state, 4, 1e-6), ours(x), rtol=0, atol=1e-12)


def test_the_hidden_cases_are_only_in_the_graders_file():
    """checks.py reaches hidden.py only when a check runs with full=True."""
    source = (checks.__file__)
    text = open(source).read()
    assert "import hidden" not in text and "from autograder.exercises.ex08_large_models import hidden" not in text
    assert text.count("_hidden().") == 6
