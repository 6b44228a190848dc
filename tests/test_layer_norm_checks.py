"""The LayerNorm and SigLIP checks on the catalogue in tests/submissions/layer_norm/, and the
stored SigLIP reference against a live run of Hugging Face ``transformers``.

Correct submissions pass every part; each bug fails exactly the parts it breaks, with the phrase
that names its misconception; cheats are graded in the clean re-check, as nbgrader grades them.
"""
from __future__ import annotations

import pytest
import torch

from autograder.exercises.ex03_layer_norm import checks
from autograder.exercises.ex03_layer_norm import siglip_reference
from catalogue import Catalogue, no_points, tampering
from course import load_namespace, run_parts

ASSIGNMENT = "03_layer_norm"
PARTS = {
    "forward": lambda ns, full: checks.check_forward(ns["LayerNorm"], full=full),
    "contract": lambda ns, full: checks.check_module_contract(ns["LayerNorm"], full=full),
    "siglip": lambda ns, full: checks.check_siglip_encoder(ns["SiglipVisionTransformer"], ns["LayerNorm"], full=full),
}
LN_WRONG = "your LayerNorm itself differs from torch.nn.LayerNorm"
BUGS = {
    "bug_affine_off_keeps_parameters": {"contract": "torch has the parameters none"},
    "bug_batch_statistics": {"forward": "over the batch (that is BatchNorm)"},
    "bug_bias_flag_ignored": {"contract": "unexpected ['bias']"},
    "bug_detached_statistics": {"forward": "detached"},
    "bug_empty_normalized_shape": {"contract": "empty normalized_shape but refuse to run it"},
    "bug_eps_hardcoded": {"forward": "instead of the layer's `eps` (1e-06)"},
    "bug_eps_outside_sqrt": {"forward": "inside the square root"},
    "bug_first_dims_after_batch": {"forward": "right after the batch"},
    "bug_last_dim_only": {"forward": "last dimension only"},
    "bug_no_shape_check": {"contract": "torch raises RuntimeError"},
    "bug_normalized_shape_not_tuple": {"contract": "attribute `normalized_shape` is 6, torch's is (6,)"},
    "bug_one_pass_variance": {"forward": "cancels catastrophically"},
    "bug_siglip_default_eps": {"siglip": "has eps=1e-05"},
    "bug_siglip_post_layernorm_unused": {"siglip": "post_layernorm is missing"},
    "bug_siglip_post_ln_wiring": {"siglip": "pre-LN wiring"},
    "bug_siglip_shared_norm": {"siglip": "holds 3 instances of your LayerNorm"},
    "bug_siglip_source_name": {"siglip": "not post_layer_norm"},
    "bug_forgets_bias": {"forward": "your output differs from the reference (torch.nn.LayerNorm)"},
    "bug_siglip_wiring_and_unbiased": {"forward": "unbiased variance", "siglip": "So the wiring is wrong too"},
    "bug_unbiased_variance": {"forward": "unbiased variance"},
}
CHEATS = {
    "cheat_aten_layer_norm": no_points("forward", "contract", "siglip"),
    "cheat_functional_layer_norm": no_points("forward", "contract", "siglip"),
    "cheat_subclass_torch": no_points("forward", "contract", "siglip"),
    "cheat_torch_layernorm_in_encoder": no_points("siglip"),
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


def test_stored_siglip_reference_matches_transformers():
    """The grader's stored outputs are what Hugging Face's SiglipVisionModel computes today."""
    pytest.importorskip("transformers")
    from autograder.exercises.ex03_layer_norm import hidden

    stored = siglip_reference.load() | hidden.stored_references()
    fresh = siglip_reference.compute_all() | siglip_reference.compute_all(hidden.ENCODER_CONFIGS, hidden.ENCODER_SEEDS)
    assert sorted(stored) == sorted(fresh)
    for name in fresh:
        assert stored[name]["config"] == fresh[name]["config"]
        for key in ("pixel_values", "last_hidden_state", "eps_1e-5", "before_post_layernorm"):
            torch.testing.assert_close(stored[name][key], fresh[name][key], rtol=0, atol=1e-12, msg=f"{name}/{key}")
        assert stored[name]["weights"].keys() == fresh[name]["weights"].keys()
        for key, value in fresh[name]["weights"].items():
            assert torch.equal(stored[name]["weights"][key], value), key


# A forward that never computes: it looks up the package's stored output for pixel values of
# the same shape (the stored file ships with the grader, so the student's process can read it).
REPLAY_STORED_OUTPUT = '''
from autograder.exercises.ex03_layer_norm import siglip_reference as _stored_reference


def _replay_stored_output(self, pixel_values):
    for entry in torch.load(_stored_reference.DATA_FILE, weights_only=True).values():
        if tuple(entry["pixel_values"].shape) == tuple(pixel_values.shape):
            return entry["last_hidden_state"].to(pixel_values.device)
    raise RuntimeError("no stored output for these pixel values")


SiglipVisionTransformer.forward = _replay_stored_output
'''


def test_forward_replaying_the_stored_output_fails_the_hidden_check():
    """The hidden check also compares with Hugging Face's outputs on pixel values drawn at check
    time, so returning the packaged ``last_hidden_state`` earns nothing there."""
    code = CATALOGUE.correct()["notebook_solution"] + "\n\n" + REPLAY_STORED_OUTPUT
    siglip = {"siglip": PARTS["siglip"]}
    namespace = load_namespace(ASSIGNMENT, code)
    assert run_parts(namespace, siglip, full=False) == {"siglip": None}  # the stored case alone is fooled
    message = run_parts(namespace, siglip, full=True)["siglip"]
    assert message is not None and checks.FRESH_PIXELS in message, message
    assert "differs from SiglipVisionModel's" in message, message


def test_a_layer_norm_bug_is_not_charged_twice(capsys):
    """Part 3 grades the wiring: an encoder wired right on a wrong LayerNorm passes it, and a note
    names the LayerNorm as what makes its output differ."""
    namespace = load_namespace(ASSIGNMENT, CATALOGUE._code("bug", "bug_unbiased_variance"))
    assert run_parts(namespace, {"siglip": PARTS["siglip"]}, full=False) == {"siglip": None}
    printed = capsys.readouterr().out
    assert "your encoder is wired right" in printed and LN_WRONG in printed, printed
