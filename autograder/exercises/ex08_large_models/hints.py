"""The misconceptions exercise 08's checks recognise, one hint function per part.

Each hint recomputes in float64 what the student's layer would output with one misreading and
names the one the student matches (:func:`autograder.core.numerics.closest_explanation`).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from autograder.core.engine import GRAD_INPUT, GRAD_PARAMS, OUTPUT, RAISES, Finding
from autograder.core.numerics import closest_explanation
from autograder.exercises.ex08_large_models.reference import attend

HALF = (torch.float16, torch.bfloat16)
RMS_GRADIENT_ADVICE = (
    "the output is right but the input gradient is not: most likely mean(x²) is computed from a detached "
    "tensor (.detach(), .item(), torch.no_grad() or numpy), so autograd ignores that it depends on x."
)


def as_tuple(normalized_shape) -> tuple[int, ...]:
    return (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)


def default_eps(dtype: torch.dtype) -> float:
    """What torch.nn.RMSNorm adds when ``eps=None``: the machine epsilon of the dtype it computes
    in, which is float32 for float16 and bfloat16 inputs (torch upcasts them first)."""
    return torch.finfo(torch.float32 if dtype in HALF else dtype).eps


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# --- Parts 1 and 2: RMSNorm -------------------------------------------------------------------

def _rms(x, dims, eps, weight=None, *, center=False, eps_inside=True, total=False):
    """x / sqrt(mean(x²) + eps) · weight over ``dims``, in float64, with one misreading."""
    centered = x - x.mean(dims, keepdim=True) if center else x
    square = centered.pow(2).sum(dims, keepdim=True) if total else centered.pow(2).mean(dims, keepdim=True)
    y = centered / (square.sqrt() + eps if not eps_inside else (square + eps).sqrt())
    return y * weight if weight is not None else y


def _eps_misreadings(f: Finding, eps_given) -> list[tuple[float, str]]:
    dtype = f.case.dtype
    right = default_eps(dtype) if eps_given is None else eps_given
    found = []
    if eps_given is None:
        found += [
            (1e-5, "with eps=None you add 1e-5 (LayerNorm's default); torch.nn.RMSNorm then adds "
                   f"torch.finfo(...).eps of the dtype it computes in ({right:.3g} here), read at forward time."),
            (1e-6, "with eps=None you add 1e-6 (a model's rms_norm_eps); torch.nn.RMSNorm then adds "
                   f"torch.finfo(...).eps of the dtype it computes in ({right:.3g} here)."),
        ]
        if dtype in HALF:
            found.append((torch.finfo(dtype).eps,
                          f"with eps=None you add {_name(dtype)}'s own eps ({torch.finfo(dtype).eps:.3g}); torch "
                          f"computes {_name(dtype)} inputs in float32 and adds float32's eps ({right:.3g})."))
        if dtype == torch.float64:
            found.append((torch.finfo(torch.float32).eps,
                          "with eps=None you add float32's eps for every input; torch adds the eps of the input's "
                          f"own dtype (float64: {right:.3g}), read at forward time from x.dtype."))
    else:
        found += [(default_eps(dtype), f"you ignore the layer's eps ({eps_given:g}) and add the eps=None default."),
                  (1e-5, f"you add 1e-5 instead of the layer's eps ({eps_given:g}).")]
    return [(e, text) for e, text in found if not math.isclose(e, right)]


def _low_precision(x: torch.Tensor, dims, eps: float, weight, dtype) -> torch.Tensor:
    """RMSNorm computed in ``dtype`` itself (no upcast), as a float64 tensor."""
    low = x.to(dtype)
    y = low * torch.rsqrt(low.pow(2).mean(dims, keepdim=True) + eps)
    return (y * weight.to(dtype) if weight is not None else y).double()


def rms_norm(f: Finding) -> str | None:
    if f.aspect == RAISES and "torch raises RuntimeError" in f.detail:
        return ("like torch, refuse an input whose last dimensions differ from normalized_shape: raise "
                "RuntimeError before computing anything (even without a weight whose shape would clash).")
    if f.aspect == GRAD_INPUT:
        return RMS_GRADIENT_ADVICE
    if f.aspect == GRAD_PARAMS:
        if f.student is None:
            return "weight must be an nn.Parameter used in forward, so that it receives a gradient."
        return "check how weight (γ) enters the output: y = x / sqrt(mean(x²) + ε) · weight."
    if f.aspect != OUTPUT or f.student is None or f.exact is None or f.student.shape != f.exact.shape:
        return None
    case = f.case
    x = f.step.x.to(case.dtype).double()
    k = len(as_tuple(case.args[0]))
    dims = tuple(range(x.dim() - k, x.dim()))
    eps_given = case.kwargs.get("eps")
    eps = default_eps(case.dtype) if eps_given is None else eps_given
    w = case.state.get("weight")
    w = None if w is None else w.to(case.dtype).double()
    candidates = [
        (_rms(x, dims, eps, w, center=True),
         "you subtract the mean: that is LayerNorm. RMSNorm divides x itself by its root mean square, "
         "sqrt(mean(x²) + ε), and keeps the mean."),
        (_rms(x, dims, eps, w, eps_inside=False), "ε belongs inside the square root: x / sqrt(mean(x²) + ε)."),
        (_rms(x, dims, eps, w, total=True), "you divide by sqrt(sum(x²) + ε); RMSNorm takes the MEAN of x²."),
        (_rms(x, dims, 0.0, w), "ε is missing: divide by sqrt(mean(x²) + ε)."),
        (x / (x.var(dims, correction=0, keepdim=True) + eps).sqrt() * (w if w is not None else 1.0),
         "you divide by the standard deviation (which subtracts the mean); RMSNorm divides by sqrt(mean(x²) + ε)."),
    ]
    candidates += [(_rms(x, dims, e, w), text) for e, text in _eps_misreadings(f, eps_given)]
    if w is not None:
        candidates += [
            (_rms(x * w, dims, eps, None), "γ (weight) is applied before normalizing; RMSNorm normalizes x, then "
                                           "multiplies by weight: y = x / sqrt(mean(x²) + ε) · weight."),
            (_rms(x, dims, eps, None), "weight (γ) is not applied: y = x / sqrt(mean(x²) + ε) · weight."),
        ]
    if k > 1:
        last = (x.dim() - 1,)
        candidates.append((_rms(x, last, eps, w), f"you take the mean over the last dimension only; normalized_shape "
                                                  f"{case.args[0]} means one mean of x² over the last {k} dimensions together."))
    if x.dim() - 1 > k:
        every = tuple(range(1, x.dim()))
        candidates.append((_rms(x, every, eps, w), "you take the mean over every dimension but the batch; RMSNorm uses "
                                                   "only the last len(normalized_shape) dimensions."))
    if case.dtype in HALF:
        candidates.append((_low_precision(x, dims, eps, w, case.dtype),
                           f"you compute mean(x²) in {_name(case.dtype)}: a square above 65504 is inf in float16 (so "
                           "1/sqrt(inf) = 0), and bfloat16 keeps 8 significant bits. Like torch, compute in float32 "
                           "(x.float()) and cast the result back to the input's dtype."))
    return closest_explanation(candidates, f.student, f.exact)


# --- Part 3: QK-norm attention ------------------------------------------------------------------

def qk_norm_attention(f: Finding) -> str | None:
    if f.aspect == GRAD_INPUT:
        return "the output is right but the input gradient is not: is part of the computation detached (.detach(), .item(), torch.no_grad())?"
    if f.aspect == GRAD_PARAMS:
        if f.student is None:
            return f"`{f.name.removesuffix('.grad')}` receives no gradient: is it used in forward, as an nn.Parameter?"
        return None
    if f.aspect != OUTPUT or f.student is None or f.exact is None or f.student.shape != f.exact.shape:
        return None
    case = f.case
    x = f.step.x.to(case.dtype)
    d_model, n_heads = case.args
    eps = case.kwargs.get("eps", 1e-6)
    head_dim = d_model // n_heads

    def variant(**changes):
        return attend(x, case.state, n_heads, changes.pop("eps", eps), **changes)

    candidates = [
        (variant(normed=""), "q_norm and k_norm are not applied: normalize the queries and keys of each head before the dot product."),
        (variant(normed="q"), "only the queries are normalized: QK-norm applies k_norm to the keys too."),
        (variant(normed="k"), "only the keys are normalized: QK-norm applies q_norm to the queries too."),
    ]
    values = "you normalize the values too; QK-norm normalizes only queries and keys (the logits)."
    candidates += [(variant(normed="qkv", value_weight=weight), values) for weight in (None, "q_norm.weight", "k_norm.weight")]
    candidates += [
        (variant(scale=1.0), f"the logits are not divided by √head_dim = √{head_dim}: softmax(q·kᵀ / √head_dim)."),
        (variant(scale=1.0 / head_dim), f"you divide the logits by head_dim = {head_dim}; divide by √head_dim."),
        (variant(scale=1.0 / math.sqrt(d_model)), f"you divide the logits by √d_model = √{d_model}; divide by √head_dim = √{head_dim}."),
        (variant(causal=False), "the attention is not causal: token t may attend only to tokens 0…t (is_causal=True)."),
        (variant(heads_first=True), "the heads are cut as view(B, n_heads, T, head_dim); the projection's features "
                                    "are per token: view(B, T, n_heads, head_dim), then transpose(1, 2)."),
        (variant(eps=None), f"q_norm and k_norm do not use the block's eps ({eps:g}): pass eps=eps to both."),
        (variant(eps=1e-5), f"q_norm and k_norm use eps=1e-5, not the block's eps ({eps:g}): pass eps=eps to both."),
    ]
    return closest_explanation(candidates, f.student, f.exact)


RMS_NORM_FIRST = (
    "your RMSNorm itself differs from torch.nn.RMSNorm (Part 1 says how); q_norm and k_norm use it, so fix it first."
)
QK_NORM_OVER_D_MODEL = (
    "QK-norm here normalizes each head's query and key on its own: RMSNorm(head_dim) on the (B, T, n_heads, "
    "head_dim) view, one weight of shape (head_dim,) shared by all heads, as Qwen3 does. RMSNorm(d_model) over "
    "the whole projection is OLMo 2's variant, not this one."
)


# --- Part 4: DyT ------------------------------------------------------------------------------

def dyt(f: Finding) -> str | None:
    if f.aspect == GRAD_INPUT:
        return "the output is right but the input gradient is not: is part of the computation detached?"
    if f.aspect == GRAD_PARAMS:
        if f.student is None:
            return f"`{f.name.removesuffix('.grad')}` receives no gradient: it must be an nn.Parameter used in forward."
        if f.name == "alpha.grad":
            return "alpha must multiply x inside tanh, as one learnable scalar: tanh(alpha · x)."
        return "check how weight (γ) and bias (β) enter the output: y = weight · tanh(alpha · x) + bias."
    if f.aspect != OUTPUT or f.student is None or f.exact is None or f.student.shape != f.exact.shape:
        return None
    x = f.step.x.to(f.case.dtype).double()
    s = {name: value.to(f.case.dtype).double() for name, value in f.case.state.items()}
    a, w, b = s["alpha"], s["weight"], s["bias"]
    candidates = [
        (a * torch.tanh(x) * w + b, "alpha multiplies x INSIDE tanh: weight · tanh(alpha · x) + bias."),
        (torch.tanh(x) * w + b, "alpha is missing: weight · tanh(alpha · x) + bias."),
        (torch.tanh(a * (x * w + b)), "weight and bias come after tanh: weight · tanh(alpha · x) + bias."),
        (torch.tanh(a * x * w) + b, "weight (γ) comes after tanh, per channel: weight · tanh(alpha · x) + bias."),
        (torch.tanh(a * x) * b + w, "weight and bias are swapped: weight · tanh(alpha · x) + bias."),
        (torch.tanh(a * x), "weight and bias are not applied: weight · tanh(alpha · x) + bias."),
        (torch.tanh(a * x) * w, "bias (β) is not added: weight · tanh(alpha · x) + bias."),
        (torch.tanh(a * x) + b, "weight (γ) is not applied: weight · tanh(alpha · x) + bias."),
        (F.layer_norm(x, x.shape[-1:]) * w + b, "that is LayerNorm; DyT replaces it with weight · tanh(alpha · x) + bias."),
    ]
    return closest_explanation(candidates, f.student, f.exact)


DYT_ALPHA_PER_CHANNEL = (
    "alpha is ONE learnable scalar shared by all channels (shape (1,), as in the authors' code); "
    "weight (γ) and bias (β) are the per-channel parameters."
)
DYT_ALPHA_0D = (
    "make alpha a 1-element tensor, torch.full((1,), alpha_init): the authors' code and checkpoints "
    "store alpha with shape (1,), and load_state_dict refuses a 0-d alpha for it."
)
