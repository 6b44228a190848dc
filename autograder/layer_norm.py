"""Checks for the exercise ``03_layer_norm``: ``LayerNorm`` and a SigLIP vision encoder built on it.

Parts 1 and 2 run the shared engine against ``torch.nn.LayerNorm``.  Part 3 loads Hugging Face
``SiglipVisionModel`` weights into the student's encoder and compares its output with the model's,
stored in float64 by :mod:`autograder.siglip_reference`.
"""
from __future__ import annotations

import torch
from torch import nn

from autograder import engine, forbidden, integrity, siglip_reference, structure
from autograder.devices import devices_for
from autograder.engine import FORWARD_ASPECTS, RAISES, Case, Finding, Step
from autograder.inputs import random_tensor, sample_input
from autograder.messages import fail, shape_str
from autograder.norm_hints import Grouping, make_hint
from autograder.numerics import discrepancy, matches

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
        if full:
            cases += [
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
    return cases


def _input_check_cases(full: bool) -> list[Case]:
    def steps(*shapes):
        return [Step("train", sample_input(shape, seed=40 + i)) for i, shape in enumerate(shapes)]

    cases = []
    for device in devices_for(full):
        cases.append(Case("LayerNorm", (4,), {"elementwise_affine": False}, steps((3, 5), (2, 4)), device=device))
        if full:
            cases += [
                Case("LayerNorm", ((3, 4),), {}, steps((2, 4, 3), (4,), (2, 3, 4)), device=device),
                Case("LayerNorm", ((2, 3),), {"elementwise_affine": False}, steps((5, 3, 2)), device=device),
            ]
    return cases


def _check_class(LayerNorm) -> None:
    __tracebackhide__ = True
    integrity.check_untampered()
    forbidden.check_not_torch_norm_class(LayerNorm, "LayerNorm")


def check_forward(LayerNorm, full: bool = False) -> None:
    """Outputs and the gradients of the input, ``weight`` and ``bias``, in training and eval mode."""
    __tracebackhide__ = True
    _check_class(LayerNorm)
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
    _check_class(LayerNorm)
    variants = [((6,), {}), ((6,), {"elementwise_affine": False}), (((2, 3),), {"bias": False})]
    if full:
        variants += [((5,), {"eps": 1e-6}), (([4, 2],), {}), (((3, 2, 2),), {"elementwise_affine": False, "bias": False})]
    dtypes = [F32, F64] if full else [F32]
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

def _build_encoder(SiglipVisionTransformer, LayerNorm, config, reference, device, where):
    __tracebackhide__ = True
    try:
        model = SiglipVisionTransformer(config)
    except Exception as error:  # noqa: BLE001
        fail(f"{where}: SiglipVisionTransformer(config) raised {type(error).__name__}: {error}")
    if not isinstance(model, nn.Module):
        fail(f"{where}: SiglipVisionTransformer must be an nn.Module.")
    forbidden.check_no_torch_norm_submodule(model, "SiglipVisionTransformer")
    norms = [name for name, m in model.named_modules() if isinstance(m, LayerNorm)]
    wanted = 2 * config.num_hidden_layers + 1
    if len(norms) != wanted:
        fail(
            f"{where}: your model holds {len(norms)} instances of your LayerNorm ({norms}); SigLIP has "
            f"{wanted}: layer_norm1 and layer_norm2 in each of the {config.num_hidden_layers} encoder "
            "layers, and post_layernorm at the end. Use your own LayerNorm class for all of them."
        )
    wrong_eps = [(n, getattr(model.get_submodule(n), "eps", None)) for n in norms
                 if getattr(model.get_submodule(n), "eps", None) != config.layer_norm_eps]
    if wrong_eps:
        name, eps = wrong_eps[0]
        fail(
            f"{where}: `{name}` has eps={eps!r}, but SigLIP's LayerNorms use config.layer_norm_eps = "
            f"{config.layer_norm_eps:g} (torch's default 1e-5 is not SigLIP's). Pass eps=config.layer_norm_eps."
        )
    model = model.to(device=device, dtype=F64)
    weights = {k: v.to(device) for k, v in reference["weights"].items()}
    result = model.load_state_dict(weights, strict=False)
    if result.missing_keys or result.unexpected_keys:
        fail(
            f"{where}: Hugging Face's weights do not fit your module names. Missing in yours: "
            f"{result.missing_keys[:6]}; unexpected: {result.unexpected_keys[:6]}. The names must be "
            "embeddings, encoder.layers.<i>.{layer_norm1, self_attn, layer_norm2, mlp} and post_layernorm "
            "(not post_layer_norm as in the source snippet)."
        )
    return model.eval()


def _layer_norm_differs(LayerNorm, config, device) -> str | None:
    """Whether the student's LayerNorm alone already disagrees with torch's at SigLIP's settings."""
    x = sample_input((2, 5, config.hidden_size), seed=77).to(device)
    theirs = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, device=device, dtype=F64)
    try:
        mine = LayerNorm(config.hidden_size, eps=config.layer_norm_eps, device=device, dtype=F64)
        with torch.no_grad():
            got = mine(x)
    except Exception as error:  # noqa: BLE001
        return f"your LayerNorm raised {type(error).__name__} on a (2, 5, {config.hidden_size}) input: {error}"
    with torch.no_grad():
        expected = theirs(x)
    gap = discrepancy(got, expected, expected)
    if gap is None:
        return None
    return (
        f"your LayerNorm itself differs from torch.nn.LayerNorm({config.hidden_size}, eps={config.layer_norm_eps:g}) "
        f"by up to {gap.max_error:.3g} on a (2, 5, {config.hidden_size}) input; Parts 1 and 2 say why. Fix it first."
    )


def _encoder_hint(got: torch.Tensor, reference: dict, LayerNorm, config, device) -> str:
    differs = _layer_norm_differs(LayerNorm, config, device)
    if differs:
        return differs
    if matches(reference["before_post_layernorm"], got, reference["last_hidden_state"]):
        return "the final post_layernorm is missing: apply it to the encoder's output."
    if matches(reference["eps_1e-5"], got, reference["last_hidden_state"]):
        return "your LayerNorms compute with eps = 1e-5; SigLIP's layer_norm_eps is 1e-6."
    return (
        "check the pre-LN wiring of each encoder layer: h = h + attn(layer_norm1(h)), then "
        "h = h + mlp(layer_norm2(h)); then post_layernorm on the last layer's output."
    )


def check_siglip_encoder(SiglipVisionTransformer, LayerNorm, full: bool = False) -> None:
    """Your encoder with your LayerNorm reproduces ``transformers.SiglipVisionModel`` (float64)."""
    __tracebackhide__ = True
    _check_class(LayerNorm)
    stored = siglip_reference.load()
    names = ["small", "odd"] if full else ["small"]
    for device in devices_for(full):
        for name in names:
            config = siglip_reference.config(name)
            reference = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in stored[name].items()}
            where = (
                f"SiglipVisionTransformer with hidden_size={config.hidden_size}, {config.num_hidden_layers} layers, "
                f"{config.num_attention_heads} heads, {config.image_size}×{config.image_size} images in "
                f"{config.patch_size}×{config.patch_size} patches (float64, {device.type})"
            )
            model = _build_encoder(SiglipVisionTransformer, LayerNorm, config, reference, device, where)
            pixels = reference["pixel_values"]
            recorder = forbidden.OpRecorder()
            try:
                with recorder, torch.no_grad():
                    got = model(pixels.clone())
            except Exception as error:  # noqa: BLE001
                fail(f"{where}: forward on pixel_values {shape_str(pixels.shape)} raised {type(error).__name__}: {error}")
            forbidden.report_normalization_ops(recorder.normalization_ops(), "SiglipVisionTransformer")
            expected = reference["last_hidden_state"]
            if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
                shown = shape_str(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
                fail(f"{where}: forward must return last_hidden_state of shape {shape_str(expected.shape)} "
                     f"(batch, patches, hidden_size); got {shown}.")
            gap = discrepancy(got, expected, expected)
            if gap is not None:
                fail(
                    f"{where}: your last_hidden_state differs from SiglipVisionModel's by up to "
                    f"{gap.max_error:.3g} (allowed {gap.allowed:.1g}).\nLikely cause: {_encoder_hint(got, reference, LayerNorm, config, device)}"
                )


integrity.remember()
