"""Checks for the exercise ``08_large_models``: RMSNorm, QK-norm attention and DyT.

Parts 1 and 2 run the shared engine against ``torch.nn.RMSNorm``; Part 3 against a causal
attention block built from ``nn.Linear``, ``nn.RMSNorm`` and ``F.scaled_dot_product_attention``
(:mod:`.reference`), with the student's parameters loaded by ``state_dict`` name; Part 4 against
the paper's DyT (:mod:`.reference`).  The visible cases are here; ``full=True`` adds the hidden
ones, which only the grader holds (:mod:`autograder.core.withheld`).
"""
from __future__ import annotations

import torch
from torch import nn

from autograder.core import engine, forbidden, withheld, integrity, structure
from autograder.core.devices import devices_for
from autograder.core.engine import FORWARD_ASPECTS, RAISES, Case, Step
from autograder.core.inputs import random_tensor, sample_input
from autograder.core.seeding import generator
from autograder.core.messages import CheckFailed, fail, shape_str
from autograder.core.side import Student
from autograder.exercises.ex08_large_models import hints, reference
from autograder.exercises.ex08_large_models.hints import as_tuple

F64, F32, F16, BF16 = torch.float64, torch.float32, torch.float16, torch.bfloat16
STEPS = ("train", "eval", "train-no-grad")


def token_input(shape, seed: int, mean: float = 0.0, std: float = 1.0) -> torch.Tensor:
    """``mean + std·(s·z + o + d)``, float64: ``z`` standard normal, and per token (all dims but
    the last) a spread ``s`` in [0.5, 1.5) and an offset ``o`` in [−0.5, 0.5), per feature a drift
    ``d`` from −0.5 to 0.5. Every token has its own root mean square, so statistics over the wrong
    dimensions show, and |x| stays below about ``|mean| + 7·std``, finite in float16 for std 300."""
    g = generator(seed)
    z = torch.randn(shape, generator=g, dtype=F64)
    per_token = tuple(shape[:-1]) + (1,)
    spread = 0.5 + torch.rand(per_token, generator=g, dtype=F64)
    offset = torch.rand(per_token, generator=g, dtype=F64) - 0.5
    drift = torch.linspace(-0.5, 0.5, shape[-1], dtype=F64)
    return mean + std * (spread * z + offset + drift)


def _steps(shape, seed: int, mean: float = 0.0, std: float = 1.0, draw=sample_input) -> list[Step]:
    return [Step("eval" if mode == "eval" else "train", draw(shape, seed=seed * 100 + i, mean=mean, std=std),
                 mode.endswith("no-grad")) for i, mode in enumerate(STEPS)]


# --- Parts 1 and 2: RMSNorm -------------------------------------------------------------------

def rms_case(shape, normalized_shape, kwargs=None, dtype=F64, device=None, mean=0.0, std=1.0, seed=0, note="") -> Case:
    kwargs = dict(kwargs or {})
    state = {"weight": random_tensor(as_tuple(normalized_shape), seed, 0.5, 1.5)} if kwargs.get(
        "elementwise_affine", True) else {}
    return Case("RMSNorm", (normalized_shape,), kwargs, _steps(shape, seed, mean, std, token_input), dtype,
                device or torch.device("cpu"), state, note)


def rms_forward_cases(device) -> list[Case]:
    d = dict(device=device)
    return [
        rms_case((2, 5, 8), 8, seed=1, note="tokens (B, T, D), eps=None", **d),
        rms_case((3, 4, 6), 6, seed=2, std=1e-2, note="eps=None, std 0.01: a wrong default eps shows", **d),
        rms_case((3, 4, 16), 16, {"eps": 1e-6}, dtype=F32, std=1e-3, seed=3, note="eps 1e-6, std 1e-3", **d),
        rms_case((4, 6, 32), 32, dtype=F16, std=300.0, seed=4, note="std 300: x² overflows float16 (max 65504)", **d),
        rms_case((2, 6, 32), 32, dtype=F16, std=0.03, seed=5, note="eps=None, std 0.03: float16's own eps would show", **d),
    ]


def rms_input_check_cases(device) -> list[Case]:
    def steps(*shapes):
        return [Step("train", sample_input(shape, seed=40 + i)) for i, shape in enumerate(shapes)]

    return [Case("RMSNorm", (4,), {}, steps((3, 5), (2, 4)), device=device)]


def _own(*named) -> list[Student]:
    __tracebackhide__ = True
    return forbidden.own_classes(*named)


def _hidden():
    return withheld.of(__package__)


def check_rms_norm_forward(RMSNorm, full: bool = False) -> None:
    """Outputs and the gradients of the input and ``weight`` against ``torch.nn.RMSNorm``."""
    __tracebackhide__ = True
    RMSNorm = _own((RMSNorm, "RMSNorm"))[0]
    for device in devices_for(full):
        cases = rms_forward_cases(device) + (_hidden().rms_forward_cases(device) if full else [])
        for case in cases:
            engine.compare_case(RMSNorm, nn.RMSNorm, case, FORWARD_ASPECTS, hints.rms_norm, "RMSNorm")


RMS_PARAMETERS = ("Register γ as `weight` (ones, shape normalized_shape) with nn.Parameter; with "
                  "elementwise_affine=False register it as None. RMSNorm has no bias.")
NO_BUFFERS = "It keeps no running statistics, so it has no buffers."
RMS_ATTRIBUTES = ("normalized_shape", "eps", "elementwise_affine")


def rms_contract_variants() -> list[tuple[tuple, dict]]:
    return [((6,), {}), ((6,), {"eps": 1e-6}), (((2, 3),), {"elementwise_affine": False})]


def check_rms_norm_contract(RMSNorm, full: bool = False) -> None:
    """Constructor, attributes, ``weight`` (``None`` when off), no bias, no buffers, ``state_dict``
    both ways, ``device=``/``dtype=``, the ``RuntimeError`` for a wrongly shaped input."""
    __tracebackhide__ = True
    RMSNorm = _own((RMSNorm, "RMSNorm"))[0]
    variants = rms_contract_variants() + (_hidden().rms_contract_variants() if full else [])
    for device in devices_for(full):
        for dtype in ([F32, F64, BF16] if full else [F32]):
            for args, kwargs in variants:
                structure.compare_structure(RMSNorm, nn.RMSNorm, args, kwargs, device, dtype, "RMSNorm",
                                            RMS_ATTRIBUTES, RMS_PARAMETERS, NO_BUFFERS)
        cases = rms_input_check_cases(device) + (_hidden().rms_input_check_cases(device) if full else [])
        for case in cases:
            engine.compare_case(RMSNorm, nn.RMSNorm, case, (RAISES,), hints.rms_norm, "RMSNorm")
    structure.compare_structure(RMSNorm, nn.RMSNorm, (4,), {}, None, None, "RMSNorm", RMS_ATTRIBUTES,
                                RMS_PARAMETERS, NO_BUFFERS)


# --- Part 3: QK-norm attention --------------------------------------------------------------------

ATTENTION = "QKNormAttention"
ATTENTION_REFERENCE = "a reference built from nn.Linear, nn.RMSNorm and F.scaled_dot_product_attention"


def attention_state(d_model: int, n_heads: int, seed: int, scale: float = 1.0) -> dict:
    """Random projections (entries up to ``scale``/√d_model) and norm weights in [0.5, 1.5)."""
    bound = scale / d_model ** 0.5
    state = {f"{p}_proj.weight": random_tensor((d_model, d_model), seed + i, -bound, bound)
             for i, p in enumerate("qkvo")}
    for i, p in enumerate("qk"):
        state[f"{p}_norm.weight"] = random_tensor((d_model // n_heads,), seed + 4 + i, 0.5, 1.5)
    return state


def attention_case(batch: int, tokens: int, d_model: int, n_heads: int, kwargs=None, dtype=F64, device=None,
                   std=1.0, scale=1.0, seed=0, note="") -> Case:
    return Case(ATTENTION, (d_model, n_heads), dict(kwargs or {}), _steps((batch, tokens, d_model), seed, 0.0, std),
                dtype, device or torch.device("cpu"), attention_state(d_model, n_heads, seed, scale), note,
                reference=ATTENTION_REFERENCE)


def attention_cases(device) -> list[Case]:
    d = dict(device=device)
    return [
        attention_case(2, 5, 16, 4, seed=1, note="head_dim 4", **d),
        attention_case(2, 6, 24, 2, {"eps": 1e-5}, dtype=F32, scale=4.0, seed=2, note="large projections", **d),
    ]


def _check_attention_structure(Attention: Student, RMSNorm: Student, device) -> None:
    """The block's ``state_dict`` names and shapes, and its norms: the student's own RMSNorm on
    ``head_dim``."""
    __tracebackhide__ = True
    d_model, n_heads = 16, 4
    where = f"{ATTENTION}({d_model}, {n_heads})"
    layer = Attention.construct((d_model, n_heads), {"device": device, "dtype": F64})
    if not isinstance(layer, Student):
        fail(f"{where} raised {layer.name}: {layer}" if hasattr(layer, "name") else f"{where} did not give a module.")
    forbidden.check_no_torch_norm_submodule(layer, ATTENTION)
    reported = layer.call("observe.state_dict")
    if "error" in reported:
        fail(f"{where}: state_dict() raised {reported['error'].name}: {reported['error']}")
    shapes = {name: tuple(value.shape) for name, value in reported["state"].items()}
    expected = {name: tuple(value.shape) for name, value in reference.QKNormAttention(d_model, n_heads).state_dict().items()}
    if shapes.get("q_norm.weight") == (d_model,) or shapes.get("k_norm.weight") == (d_model,):
        fail(f"{where}: q_norm.weight / k_norm.weight have shape ({d_model},) = (d_model,); they should have "
             f"(head_dim,) = ({d_model // n_heads},).\nLikely cause: {hints.QK_NORM_OVER_D_MODEL}")
    if shapes != expected:
        fail(f"{where}: your state_dict holds {sorted(shapes.items())}; the statement's names and shapes are "
             f"{sorted(expected.items())}. Name the modules q_proj, k_proj, v_proj, o_proj (nn.Linear without "
             "bias), q_norm and k_norm (your RMSNorm(head_dim)).")
    own = tuple(RMSNorm.call("observe.class_info")["mro"][0])
    kinds = {name: (module, qualname) for name, module, qualname in layer.call("observe.submodules")}
    for name in ("q_norm", "k_norm"):
        if kinds.get(name) != own:
            shown = ".".join(kinds[name]) if name in kinds else "missing"
            fail(f"{where}: `{name}` is {shown}; it must be an instance of your RMSNorm class from Part 1.")
    structure.compare_structure(Attention, reference.QKNormAttention, (d_model, n_heads), {}, device, F64, ATTENTION)


def check_qk_norm_attention(QKNormAttention, RMSNorm, full: bool = False) -> None:
    """Outputs and the gradients of the input and every parameter against the reference."""
    __tracebackhide__ = True
    Attention, RMSNorm = _own((QKNormAttention, ATTENTION), (RMSNorm, "RMSNorm"))
    for device in devices_for(full):
        _check_attention_structure(Attention, RMSNorm, device)
        cases = attention_cases(device) + (_hidden().attention_cases(device) if full else [])
        for case in cases:
            try:
                engine.compare_case(Attention, reference.QKNormAttention, case, FORWARD_ASPECTS,
                                    hints.qk_norm_attention, ATTENTION)
            except CheckFailed as failure:
                if _rms_norm_differs(RMSNorm, device):
                    fail(f"{failure}\n{'Also' if 'Likely cause' in str(failure) else 'Likely cause'}: {hints.RMS_NORM_FIRST}")
                raise


def _rms_norm_differs(RMSNorm: Student, device) -> bool:
    """Whether the student's RMSNorm alone differs from torch's on a block's head_dim (Part 1's bug)."""
    case = rms_case((2, 3, 4), 4, {"eps": 1e-6}, seed=70, device=device, note="as q_norm")
    try:
        engine.compare_case(RMSNorm, nn.RMSNorm, case, FORWARD_ASPECTS, None, "RMSNorm")
    except CheckFailed:
        return True
    return False


# --- Part 4: DyT ------------------------------------------------------------------------------

DYT_PARAMETERS = ("Register alpha (shape (1,), starting at alpha_init), weight (γ, ones) and bias (β, zeros) "
                  "of shape (num_features,) with nn.Parameter.")
DYT_ATTRIBUTES = ("num_features", "alpha_init")


def dyt_case(shape, alpha_init=None, dtype=F64, device=None, mean=0.0, std=1.0, seed=0, note="") -> Case:
    features = shape[-1]
    state = {"alpha": random_tensor((1,), seed, 0.3, 1.5), "weight": random_tensor((features,), seed + 1, 0.5, 1.5),
             "bias": random_tensor((features,), seed + 2, -0.5, 0.5)}
    kwargs = {} if alpha_init is None else {"alpha_init": alpha_init}
    return Case("DyT", (features,), kwargs, _steps(shape, seed, mean, std), dtype, device or torch.device("cpu"), state,
                note, reference="the paper's DyT, weight · tanh(alpha · x) + bias")


def dyt_cases(device) -> list[Case]:
    d = dict(device=device)
    return [dyt_case((2, 5, 8), seed=1, note="tokens (B, T, C)", **d),
            dyt_case((3, 4, 6), 0.8, dtype=F32, std=3.0, seed=2, note="std 3: tanh saturates", **d)]


def dyt_init_variants() -> list[tuple[tuple, dict]]:
    return [((8,), {}), ((5,), {"alpha_init": 1.2})]


def _check_dyt_init(DyT: Student, args, kwargs, device) -> None:
    """alpha: one scalar of shape (1,) at alpha_init, weight ones, bias zeros; then the shared
    structure check (attributes, state_dict both ways)."""
    __tracebackhide__ = True
    where = f"DyT({', '.join([repr(a) for a in args] + [f'{k}={v!r}' for k, v in kwargs.items()])})"
    layer = DyT.construct(args, {**kwargs, "device": device, "dtype": F32})
    if not isinstance(layer, Student):
        fail(f"{where} raised {layer.name}: {layer}" if hasattr(layer, "name") else f"{where} did not give a module.")
    params = layer.call("observe.tensors", values=True).get("parameters", {})
    alpha = params.get("alpha")
    if alpha is not None and tuple(alpha["shape"]) != (1,):
        advice = hints.DYT_ALPHA_0D if tuple(alpha["shape"]) == () else hints.DYT_ALPHA_PER_CHANNEL
        fail(f"{where}: alpha has shape {shape_str(alpha['shape'])}; the statement's is (1,).\nLikely cause: {advice}")
    alpha_init = kwargs.get("alpha_init", 0.5)
    if alpha is not None and float(alpha["value"].double().reshape(-1)[0]) != torch.tensor(alpha_init, dtype=F32).item():
        fail(f"{where}: alpha starts at {alpha['value'].reshape(-1)[0].item():g}; it must start at alpha_init = "
             f"{alpha_init:g} (the paper's default is 0.5).")
    structure.compare_structure(DyT, reference.DyT, args, kwargs, device, F32, "DyT", DYT_ATTRIBUTES,
                                DYT_PARAMETERS, NO_BUFFERS)


def check_dyt(DyT, full: bool = False) -> None:
    """Parameters, their initial values and names, then outputs and the gradients of the input,
    ``alpha``, ``weight`` and ``bias`` against the paper's definition."""
    __tracebackhide__ = True
    DyT = _own((DyT, "DyT"))[0]
    for device in devices_for(full):
        for args, kwargs in dyt_init_variants() + (_hidden().dyt_init_variants() if full else []):
            _check_dyt_init(DyT, args, kwargs, device)
        for case in dyt_cases(device) + (_hidden().dyt_cases(device) if full else []):
            engine.compare_case(DyT, reference.DyT, case, FORWARD_ASPECTS, hints.dyt, "DyT")


integrity.remember()
