"""Checks for the exercise ``03_layer_norm``: ``LayerNorm`` and a SigLIP vision encoder built on it.

Parts 1 and 2 run the shared engine against ``torch.nn.LayerNorm``.  Part 3 loads Hugging Face
``SiglipVisionModel`` weights into the student's encoder (on the student's side, through
:mod:`autograder.exercises.ex03_layer_norm.observe`) and compares its output with the model's, stored in
float64 by :mod:`autograder.exercises.ex03_layer_norm.siglip_reference`; the hidden check also compares it with the model
run here, by ``transformers``, on pixel values drawn at check time (``hidden.py``, which only the
grader holds).
"""
from __future__ import annotations

from dataclasses import asdict

import torch
import torch.nn.functional as F
from torch import nn

from autograder.core import engine, forbidden, withheld, integrity, structure
from autograder.exercises.ex03_layer_norm import siglip_reference
from autograder.core.devices import devices_for
from autograder.core.engine import FORWARD_ASPECTS, RAISES, Case, Finding, Step
from autograder.core.inputs import random_tensor, sample_input
from autograder.core.side import Student, students
from autograder.core.wire import RemoteError
from autograder.core.messages import fail, shape_str
from autograder.core.norm_hints import Grouping, make_hint
from autograder.core.numerics import discrepancy, matches

F64, F32 = torch.float64, torch.float32



def _as_tuple(normalized_shape) -> tuple[int, ...]:
    return (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)


# --- hints ----------------------------------------------------------------------------------

def _groupings(x: torch.Tensor, f: Finding):
    k = len(_as_tuple(f.case.args[0]))
    last = tuple(range(x.dim() - k, x.dim()))
    wrong = [(Grouping((0,)), "your statistics are over the batch (that is BatchNorm); LayerNorm normalizes each sample on its own.")]
    if k > 1:
        wrong.append((Grouping((x.dim() - 1,)),
                      f"you normalize over the last dimension only; normalized_shape {f.case.args[0]} means "
                      f"one mean and variance over the last {k} dimensions together, dims {last}."))
    if x.dim() - 1 > k:
        wrong.append((Grouping(tuple(range(1, x.dim()))),
                      f"you normalize over every dimension but the batch; LayerNorm uses only the last "
                      f"len(normalized_shape) = {k} dims {last}."))
        wrong.append((Grouping(tuple(range(1, 1 + k))),
                      f"you reduce over dims {tuple(range(1, 1 + k))}, right after the batch; normalized_shape "
                      f"describes the LAST {k} dimension(s), dims {last}."))
    if x.dim() > 1 and k == 1:
        wrong.append((Grouping(tuple(range(x.dim() - 1))),
                      "your statistics are per feature, over the batch and the tokens; LayerNorm computes "
                      "them per token, over its features (the last dimension)."))
    return Grouping(last), wrong


def _affine(xhat: torch.Tensor, f: Finding) -> torch.Tensor:
    state = f.case.state
    y = xhat * state["weight"] if "weight" in state else xhat
    return y + state["bias"] if "bias" in state else y


def _raises_hint(f: Finding) -> str | None:
    if f.aspect != RAISES or "torch raises RuntimeError" not in f.detail:
        return None
    if not _as_tuple(f.case.args[0]):
        return (
            "like torch, build a LayerNorm with an empty normalized_shape but refuse to run it: an empty "
            "shape names no dimension to normalize over (and x.mean(dim=()) would average over ALL "
            "dimensions). Raise RuntimeError(\"Expected normalized_shape to be at least 1-dimensional, i.e., "
            "containing at least one element, but got normalized_shape = []\") in forward."
        )
    return (
        "like torch, refuse an input whose last dimensions differ from normalized_shape: raise "
        "RuntimeError(f\"Given normalized_shape={list(self.normalized_shape)}, expected input with shape "
        "[*, ...], but got input of size {list(x.shape)}\") before computing anything."
    )


hint = make_hint(_groupings, _affine, _raises_hint)


# --- cases ----------------------------------------------------------------------------------

def _state(normalized_shape, seed: int, affine: bool = True, bias: bool = True) -> dict:
    shape = _as_tuple(normalized_shape)
    state = {}
    if affine:
        state["weight"] = random_tensor(shape, seed, 0.5, 1.5)
        if bias:
            state["bias"] = random_tensor(shape, seed + 1, -0.5, 0.5)
    return state


def _case(shape, normalized_shape, kwargs=None, dtype=F64, device=None, mean=0.0, std=1.0, note="", seed=0,
          steps=("train", "eval", "train-no-grad")):
    kwargs = dict(kwargs or {})
    built = []
    for i, mode in enumerate(steps):
        x = sample_input(shape, seed=seed * 100 + i, mean=mean, std=std)
        built.append(Step("eval" if mode == "eval" else "train", x, mode.endswith("no-grad")))
    state = _state(normalized_shape, seed, kwargs.get("elementwise_affine", True), kwargs.get("bias", True))
    return Case("LayerNorm", (normalized_shape,), kwargs, built, dtype, device or torch.device("cpu"), state, note)


def _forward_cases(full: bool) -> list[Case]:
    cases = []
    for device in devices_for(full):
        d = dict(device=device)
        cases += [
            _case((2, 5, 8), 8, seed=1, note="tokens (B, T, D)", **d),
            _case((3, 4, 5, 6), (4, 5, 6), seed=2, note="images (N, C, H, W) over (C, H, W)", **d),
        ]
        cases += withheld.of(__package__).forward_cases(device) if full else []
    return cases


def _input_steps(*shapes) -> list[Step]:
    """One training step per input shape, for the input checks: torch must accept or refuse each."""
    return [Step("train", sample_input(shape, seed=40 + i)) for i, shape in enumerate(shapes)]


def _input_check_cases(full: bool) -> list[Case]:
    cases = []
    for device in devices_for(full):
        cases.append(Case("LayerNorm", (4,), {"elementwise_affine": False}, _input_steps((3, 5), (2, 4)), device=device))
        cases += withheld.of(__package__).input_check_cases(device) if full else []
    return cases


def _check_class(LayerNorm) -> Student:
    """The student's LayerNorm as the checks hold it, once it is known to be a module of their own."""
    __tracebackhide__ = True
    return forbidden.own_classes((LayerNorm, "LayerNorm"))[0]


def check_forward(LayerNorm, full: bool = False) -> None:
    """Outputs and the gradients of the input, ``weight`` and ``bias``, in training and eval mode."""
    __tracebackhide__ = True
    LayerNorm = _check_class(LayerNorm)
    for case in _forward_cases(full):
        engine.compare_case(LayerNorm, nn.LayerNorm, case, FORWARD_ASPECTS, hint, "LayerNorm")


LAYER_NORM_PARAMETERS = (
    "Register γ as `weight` (ones) and β as `bias` (zeros) with nn.Parameter of shape normalized_shape; "
    "with elementwise_affine=False both are None, with bias=False only `bias` is None."
)
NO_BUFFERS = "LayerNorm keeps no running statistics, so it has no buffers."


def check_module_contract(LayerNorm, full: bool = False) -> None:
    """Constructor, attributes, parameters (``None`` when off), no buffers, ``state_dict``, input checks."""
    __tracebackhide__ = True
    LayerNorm = _check_class(LayerNorm)
    variants = [((6,), {}), ((6,), {"elementwise_affine": False}), (((2, 3),), {"bias": False})]
    variants += withheld.of(__package__).contract_variants() if full else []
    dtypes = [F32] + (withheld.of(__package__).contract_dtypes() if full else [])
    attributes = ("normalized_shape", "eps", "elementwise_affine")
    for device in devices_for(full):
        for dtype in dtypes:
            for args, kwargs in variants:
                structure.compare_structure(LayerNorm, nn.LayerNorm, args, kwargs, device, dtype, "LayerNorm",
                                            attributes, LAYER_NORM_PARAMETERS, NO_BUFFERS)
    structure.compare_structure(LayerNorm, nn.LayerNorm, (4,), {}, None, None, "LayerNorm", attributes,
                                LAYER_NORM_PARAMETERS, NO_BUFFERS)
    for case in _input_check_cases(full):
        engine.compare_case(LayerNorm, nn.LayerNorm, case, (RAISES,), hint, "LayerNorm")


# --- part 3: the SigLIP vision encoder --------------------------------------------------------

ENCODER = "SiglipVisionTransformer"
FRESH_PIXELS = "pixel_values drawn at check time"


def _where(config, device, note: str = "") -> str:
    """How messages name one configuration of the encoder."""
    return (
        f"SiglipVisionTransformer with hidden_size={config.hidden_size}, {config.num_hidden_layers} layers, "
        f"{config.num_attention_heads} heads, {config.image_size}×{config.image_size} images in "
        f"{config.patch_size}×{config.patch_size} patches (float64, {device.type}{', ' + note if note else ''})"
    )


def _eps_shown(report: dict) -> str:
    return report["repr"] if "repr" in report else repr(report.get("value"))


def _check_layer_norms(norms, config, where) -> None:
    """The encoder holds one instance of the student's LayerNorm per SigLIP norm, each with SigLIP's eps."""
    __tracebackhide__ = True
    if isinstance(norms, RemoteError):
        fail(f"{where}: looking for your LayerNorm among your model's submodules raised {norms.name}: {norms}")
    names = [name for name, _ in norms]
    wanted = 2 * config.num_hidden_layers + 1
    if len(names) != wanted:
        fail(
            f"{where}: your model holds {len(names)} instances of your LayerNorm ({names}); SigLIP has "
            f"{wanted}: layer_norm1 and layer_norm2 in each of the {config.num_hidden_layers} encoder "
            "layers, and post_layernorm at the end. Use your own LayerNorm class for all of them."
        )
    wrong_eps = [(n, eps) for n, eps in norms if "repr" in eps or eps.get("value") != config.layer_norm_eps]
    if wrong_eps:
        name, eps = wrong_eps[0]
        fail(
            f"{where}: `{name}` has eps={_eps_shown(eps)}, but SigLIP's LayerNorms use config.layer_norm_eps = "
            f"{config.layer_norm_eps:g} (torch's default 1e-5 is not SigLIP's). Pass eps=config.layer_norm_eps."
        )


def _build_encoder(Encoder: Student, LayerNorm: Student, config, weights: dict, device, where) -> Student:
    """The student's encoder for ``config``, built on its side with its own LayerNorms, in
    float64 on ``device``, holding Hugging Face's ``weights``, in eval mode."""
    __tracebackhide__ = True
    built = Encoder.call("observe_siglip.build", LayerNorm.handle, asdict(config))
    if "error" in built:
        error = built["error"]
        fail(f"{where}: SiglipVisionTransformer(config) raised {error.name}: {error}")
    model = Encoder.adopt(built["model"], ENCODER)
    if not built["is_module"] or not isinstance(model, Student):
        fail(f"{where}: SiglipVisionTransformer must be an nn.Module.")
    forbidden.check_no_torch_norm_submodule(model, ENCODER)
    _check_layer_norms(built["layer_norms"], config, where)
    loaded = model.call("observe_siglip.load_weights", device, weights)
    if "error" in loaded:
        error = loaded["error"]
        fail(f"{where}: loading Hugging Face's weights into your model raised {error.name}: {error}")
    if loaded["missing"] or loaded["unexpected"]:
        fail(
            f"{where}: Hugging Face's weights do not fit your module names. Missing in yours: "
            f"{loaded['missing'][:6]}; unexpected: {loaded['unexpected'][:6]}. The names must be "
            "embeddings, encoder.layers.<i>.{layer_norm1, self_attn, layer_norm2, mlp} and post_layernorm "
            "(not post_layer_norm as in the source snippet)."
        )
    return model.adopt(loaded["model"], ENCODER)


def _layer_norm_differs(LayerNorm: Student, config, device) -> str | None:
    """Whether the student's LayerNorm alone already disagrees with torch's at SigLIP's settings."""
    shape = (2, 5, config.hidden_size)
    x = sample_input(shape, seed=77).to(device)
    weight = random_tensor((config.hidden_size,), 78, 0.5, 1.5)
    bias = random_tensor((config.hidden_size,), 79, -0.5, 0.5)
    report = LayerNorm.call("observe_siglip.layer_norm_alone", config.hidden_size, config.layer_norm_eps, device, x,
                            weight, bias)
    if "error" in report:
        error = report["error"]
        return f"your LayerNorm raised {error.name} on a (2, 5, {config.hidden_size}) input: {error}"
    expected = F.layer_norm(x, (config.hidden_size,), weight.to(device), bias.to(device), config.layer_norm_eps)
    got = report["output"]
    if tuple(got.shape) != shape:
        return (f"your LayerNorm returns shape {shape_str(got.shape)} on a (2, 5, {config.hidden_size}) input; "
                f"torch.nn.LayerNorm returns {shape_str(shape)}. Parts 1 and 2 say why. Fix it first.")
    gap = discrepancy(got, expected, expected)
    if gap is None:
        return None
    return (
        f"your LayerNorm itself differs from torch.nn.LayerNorm({config.hidden_size}, eps={config.layer_norm_eps:g}) "
        f"by up to {gap.max_error:.3g} on a (2, 5, {config.hidden_size}) input; Parts 1 and 2 say why. Fix it first."
    )


def _wiring_hint(got: torch.Tensor, reference: dict) -> str:
    """What a wrongly wired encoder (with a correct LayerNorm) most likely does."""
    if matches(reference["before_post_layernorm"], got, reference["last_hidden_state"]):
        return "the final post_layernorm is missing: apply it to the encoder's output."
    if matches(reference["eps_1e-5"], got, reference["last_hidden_state"]):
        return "your LayerNorms compute with eps = 1e-5; SigLIP's layer_norm_eps is 1e-6."
    return (
        "check the pre-LN wiring of each encoder layer: h = h + attn(layer_norm1(h)), then "
        "h = h + mlp(layer_norm2(h)); then post_layernorm on the last layer's output."
    )


def _forward(model: Student, pixels: torch.Tensor, device, expected_shape, LayerNorm: Student | None = None,
             eps: float | None = None) -> torch.Tensor | str:
    """The encoder's output on ``pixels`` (with reference LayerNorms in place of the student's
    when ``LayerNorm`` is given), or what went wrong: an exception or a wrong shape.  Calling
    torch's normalization fails at once: that is never excused."""
    __tracebackhide__ = True
    if LayerNorm is None:
        report = model.call("observe_siglip.forward", pixels, device)
    else:
        report = model.call("observe_siglip.forward_with_reference_norms", LayerNorm.handle, eps, pixels, device)
    if "error" in report:
        error = report["error"]
        return f"forward on pixel_values {shape_str(pixels.shape)} raised {error.name}: {error}"
    forbidden.report_normalization_ops(list(report["normalization_ops"]), ENCODER)
    got = report["output"]
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(expected_shape):
        shown = shape_str(got.shape) if isinstance(got, torch.Tensor) else report["type"]
        return (f"forward must return last_hidden_state of shape {shape_str(expected_shape)} "
                f"(batch, patches, hidden_size); got {shown}.")
    return got


def _judge(got: torch.Tensor | str, reference: dict) -> str | None:
    """What is wrong with an encoder output (``None``: it matches Hugging Face's)."""
    if isinstance(got, str):
        return got
    expected = reference["last_hidden_state"]
    gap = discrepancy(got, expected, expected)
    if gap is None:
        return None
    return (f"your last_hidden_state differs from SiglipVisionModel's by up to {gap.max_error:.3g} "
            f"(allowed {gap.allowed:.1g}).")


def _check_output(model: Student, LayerNorm: Student, config, reference: dict, device, where) -> None:
    """The encoder's forward on the reference's pixel values gives its ``last_hidden_state``,
    without torch's normalization kernels.

    Part 3 grades the wiring, not the LayerNorm a second time: when the output is wrong and the
    student's LayerNorm alone differs from torch's, the same encoder with reference LayerNorms in
    their places must match; then the part passes and a note names the LayerNorm as the cause.
    """
    __tracebackhide__ = True
    pixels, shape = reference["pixel_values"], reference["last_hidden_state"].shape
    got = _forward(model, pixels, device, shape)
    problem = _judge(got, reference)
    if problem is None:
        return
    differs = _layer_norm_differs(LayerNorm, config, device)
    if differs is None:
        hint = f"\nLikely cause: {_wiring_hint(got, reference)}" if isinstance(got, torch.Tensor) else ""
        fail(f"{where}: {problem}{hint}")
    rewired = _forward(model, pixels, device, shape, LayerNorm=LayerNorm, eps=config.layer_norm_eps)
    rewired_problem = _judge(rewired, reference)
    if rewired_problem is not None:
        hint = f" And {_wiring_hint(rewired, reference)}" if isinstance(rewired, torch.Tensor) else ""
        fail(f"{where}: {problem} With a reference LayerNorm in place of yours: {rewired_problem} "
             f"So the wiring is wrong too.\nLikely causes: {differs}{hint}")
    print(f"Note ({where}): your encoder is wired right: with a reference LayerNorm in place of yours it "
          f"matches SiglipVisionModel. With yours, {problem} The cause: {differs} "
          "(That bug is graded in Parts 1 and 2, not here.)")


def check_siglip_encoder(SiglipVisionTransformer, LayerNorm, full: bool = False) -> None:
    """Your encoder with your LayerNorm reproduces ``transformers.SiglipVisionModel`` (float64).

    Both checks compare with the stored outputs.  ``full=True`` adds what ``hidden.py`` holds,
    which only the grader has: a second stored configuration, and Hugging Face's outputs on pixel
    values drawn at check time, which no stored file holds.
    """
    __tracebackhide__ = True
    Encoder, LayerNorm = students((SiglipVisionTransformer, ENCODER), (LayerNorm, "LayerNorm"))
    _check_class(LayerNorm)
    configs, stored, fresh = dict(siglip_reference.CONFIGS), siglip_reference.load(), {}
    if full:
        hidden = withheld.of(__package__)
        configs |= hidden.encoder_configs()
        stored |= hidden.stored_references()
        fresh = hidden.fresh_references(configs, stored)
    for device in devices_for(full):
        for name, config in configs.items():
            model = _build_encoder(Encoder, LayerNorm, config, stored[name]["weights"], device, _where(config, device))
            _check_output(model, LayerNorm, config, stored[name], device, _where(config, device))
            if name in fresh:
                _check_output(model, LayerNorm, config, fresh[name], device, _where(config, device, FRESH_PIXELS))


integrity.remember()
