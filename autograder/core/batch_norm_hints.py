"""Misconceptions about BatchNorm, recognised from the first difference the engine finds.

Each hint recomputes, in float64, what a layer with one specific misconception would have
produced at the failing step, and names that misconception when the student's value matches.
"""
from __future__ import annotations

import torch

from autograder.core.engine import BUFFERS, GRAD_INPUT, GRAD_PARAMS, OUTPUT, RAISES, Finding
from autograder.core.numerics import closest_explanation, matches


def per_channel(x: torch.Tensor) -> torch.Tensor:
    """(N, C, *) -> (C, N·∏spatial): one row of values per channel."""
    return x.transpose(0, 1).reshape(x.shape[1], -1)


def _broadcast(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return v.reshape([1, -1] + [1] * (like.dim() - 2))


def _affine(xhat: torch.Tensor, finding: Finding) -> torch.Tensor:
    state = finding.case.state
    if finding.case.kwargs.get("affine", True) and "weight" in state:
        return xhat * _broadcast(state["weight"], xhat) + _broadcast(state["bias"], xhat)
    return xhat


def _normalized(x, mean, var, eps, eps_inside=True) -> torch.Tensor:
    denominator = (var + eps).sqrt() if eps_inside else var.sqrt() + eps
    return (x - _broadcast(mean, x)) / _broadcast(denominator, x)


def _eps(finding: Finding) -> float:
    return finding.case.kwargs.get("eps", 1e-5)


def _output_hint(f: Finding) -> str | None:
    x = f.step.x.to(f.case.dtype).double()
    values = per_channel(x)
    mean, biased, n = values.mean(1), values.var(1, correction=0), values.shape[1]
    eps = _eps(f)
    if f.step.mode == "eval" and f.state_before.get("running_mean") is None:
        return (
            "with track_running_stats=False there are no running statistics: eval mode "
            "normalizes with the batch statistics, exactly as in training."
        )
    if f.case.dtype != torch.float64 and float((mean.abs() / biased.sqrt()).max()) > 100:
        return (
            "your float32 result is inaccurate for inputs with a large mean (here ~"
            f"{float(mean.abs().max()):.0f}, spread ~{float(biased.sqrt().max()):.2g}): E[x²] − E[x]² "
            "cancels catastrophically. Subtract the mean before squaring (two passes), or compute "
            "the statistics in float64."
        )
    uses_batch = f.step.mode == "train"
    if not uses_batch:
        if matches(_affine(_normalized(x, mean, biased, eps), f), f.student, f.exact):
            return (
                "in eval mode BatchNorm normalizes with running_mean and running_var, not with the "
                "statistics of the current batch (model.eval() must make outputs independent of batch mates)."
            )
        return "in eval mode, use (x − running_mean) / sqrt(running_var + eps), then γ and β."
    candidates = [
        (_normalized(x, mean, values.var(1, correction=1), eps),
         f"you normalize with the unbiased variance (÷ (n − 1) = {n - 1}); BatchNorm normalizes with "
         f"the biased one (÷ n = {n}) and uses the unbiased one only to update running_var."),
        (_normalized(x, mean, biased, eps, eps_inside=False),
         "ε belongs inside the square root: (x − μ) / sqrt(σ² + ε), not (x − μ) / (sqrt(σ²) + ε)."),
        (_normalized(x, mean, biased, 0.0),
         "ε is missing: divide by sqrt(σ² + ε)."),
        (_normalized(x, mean, biased, 1e-5),
         f"you use ε = 1e-5 instead of the layer's `eps` ({eps:g})."),
    ]
    if x.dim() > 2:
        per_position = x.mean(0, keepdim=True), x.var(0, correction=0, keepdim=True)
        candidates.append((
            (x - per_position[0]) / (per_position[1] + eps).sqrt(),
            "your statistics are per position: for a channel, average over the batch AND every "
            f"spatial position, i.e. over dims {(0,) + tuple(range(2, x.dim()))}, since a conv "
            "channel is one feature.",
        ))
    if x.dim() > 2:
        mixed = x.reshape(x.shape[1], -1)  # a reshape without moving the channel axis first
        m, v = mixed.mean(1), mixed.var(1, correction=0)
        candidates.append((
            _normalized(x, m, v, eps),
            "x.reshape(C, -1) (or .view) mixes samples and channels because the batch axis comes "
            "first: move the channel axis to the front (x.transpose(0, 1)) before flattening, or "
            "reduce with mean/var over the non-channel dims directly.",
        ))
        channels_last = x.reshape(-1, x.shape[1])  # rows are not samples unless C is last
        candidates.append((
            _normalized(x, channels_last.mean(0), channels_last.var(0, correction=0), eps),
            "x.reshape(-1, C) mixes channels because the channel axis is dim 1, not the last one: "
            "permute it to the end first (x.permute(0, 2, 3, 1).reshape(-1, C) for 4D input).",
        ))
        spatial = tuple(range(1, x.dim() - 1))
        candidates.append((
            _normalized(x, mean, x.var(0, correction=0).mean(dim=spatial), eps),
            "you average per-position variances: the variance must be taken over all n = N·∏spatial "
            "values of a channel at once (the spread between positions counts too).",
        ))
    global_stats = x.mean(), x.var(correction=0)
    candidates.append((
        (x - global_stats[0]) / (global_stats[1] + eps).sqrt(),
        "your statistics mix all channels: compute one mean and one variance per channel (dim 1).",
    ))
    sample_dims = tuple(range(1, x.dim()))
    candidates.append((
        (x - x.mean(sample_dims, keepdim=True)) / (x.var(sample_dims, correction=0, keepdim=True) + eps).sqrt(),
        "your statistics are per sample (that is LayerNorm); BatchNorm averages each channel over the batch.",
    ))
    xhat = _normalized(x, mean, biased, eps)
    found = closest_explanation([(_affine(c, f), m) for c, m in candidates], f.student, f.exact)
    if found:
        return found
    if "weight" in f.case.state and matches(xhat, f.student, f.exact):
        return "γ (weight) and β (bias) are not applied: y = γ·x̂ + β."
    if "weight" in f.case.state:
        w, b = _broadcast(f.case.state["weight"], x), _broadcast(f.case.state["bias"], x)
        if matches(xhat * b + w, f.student, f.exact):
            return "weight and bias are swapped: scale by weight (γ) and shift by bias (β), y = weight·x̂ + bias."
    return None


def running_after(old: torch.Tensor, batch_values: list[torch.Tensor], momentum, tracked_before: int) -> torch.Tensor:
    """A running buffer after one update per batch statistic in ``batch_values``, in order, as
    torch updates it (``momentum``, or 1/num_batches_tracked after incrementing it when None)."""
    value = old.double()
    for k, batch in enumerate(batch_values):
        factor = 1.0 / (tracked_before + k + 1) if momentum is None else momentum
        value = (1 - factor) * value + factor * batch.double()
    return value


def biased_running_var(n: int) -> str:
    """The hint for a running_var updated with the biased variance of ``n`` values per channel."""
    return (f"running_var is off by a factor n/(n − 1) = {n}/{n - 1}: PyTorch updates it with the "
            "unbiased batch variance (but normalizes with the biased one).")


def wrong_count(n: int, what: str, wrong: str) -> str:
    """The hint for an unbiased correction σ²·n/(n − 1) computed with the wrong count."""
    return f"the unbiased correction must use n = {n} values per channel ({what}), not {wrong}."


def running_var_misreadings(old: torch.Tensor, batches: list[torch.Tensor], momentum, tracked_before: int,
                            wrong_counts: list[tuple[int, str]], what: str) -> list[tuple[torch.Tensor, str]]:
    """What running_var would be after updates from ``batches`` (each (C, n) values per channel,
    one update each) with the biased variance, or with the unbiased correction of each wrong count
    in ``wrong_counts`` ((count, how the hint names it)); ``what`` names the right count."""
    biased = [b.var(1, correction=0) for b in batches]
    n = batches[0].shape[1]
    candidates = [(running_after(old, biased, momentum, tracked_before), biased_running_var(n))]
    for count, wrong in wrong_counts:
        if count > 1:
            candidates.append((running_after(old, [v * count / (count - 1) for v in biased], momentum, tracked_before),
                               wrong_count(n, what, wrong)))
    return candidates


def _buffer_hint(f: Finding) -> str | None:
    name, before = f.name, f.state_before
    if f.detail == "carries autograd history":
        return (
            f"{name} was updated from tensors that require grad, so it now has a grad_fn and the "
            "graph grows every step. Update buffers under torch.no_grad() (or from detached statistics)."
        )
    if f.step.mode == "eval" and f.student is not None and before.get(name) is not None:
        if torch.equal(before[name].cpu(), f.exact.cpu().to(before[name].dtype)):
            return "eval mode must not change running statistics or num_batches_tracked."
    if f.step.no_grad and f.student is not None and before.get(name) is not None:
        if torch.allclose(f.student.cpu().double(), before[name].cpu().double()):
            return (
                "a training forward under torch.no_grad() must still update the running statistics "
                "and num_batches_tracked: no_grad switches off autograd, not training mode."
            )
    if name == "num_batches_tracked":
        if f.step.no_grad:
            return "num_batches_tracked counts every training forward, also those under torch.no_grad()."
        return "num_batches_tracked is an int64 buffer that grows by 1 on each training forward (never in eval)."
    if f.student is None or f.exact is None or before.get(name) is None:
        return None
    x = f.step.x.to(f.case.dtype).double()
    values = per_channel(x)
    old = before[name].double()
    momentum = f.case.kwargs.get("momentum", 0.1)
    tracked = int(before["num_batches_tracked"]) + 1
    factor = 1.0 / tracked if momentum is None else momentum
    batch = values.mean(1) if name == "running_mean" else values.var(1, correction=1)
    candidates = [
        (old, f"{name} is not updated in training mode."),
        ((1 - factor) * batch + factor * old,
         "the momentum is reversed: PyTorch computes running = (1 − momentum)·running + momentum·batch "
         "(CS231n's convention is the opposite)."),
    ]
    if name == "running_var":
        wrong = [(x.shape[0], f"N = {x.shape[0]}")] if x.dim() > 2 else []
        candidates[:0] = running_var_misreadings(old, [values], momentum, tracked - 1, wrong, "N·∏spatial")
    if momentum is None:
        candidates.append((
            0.9 * old + 0.1 * batch,
            "with momentum=None PyTorch uses a cumulative average: factor 1/num_batches_tracked "
            "(after incrementing it), not 0.1.",
        ))
        candidates.append((
            batch,
            "with momentum=None the factor is 1/num_batches_tracked after incrementing it, so only the first batch replaces the running value.",
        ))
    return closest_explanation(candidates, f.student, f.exact)


def _raises_hint(f: Finding) -> str | None:
    detail = f.detail
    if "ZeroDivisionError" in detail and f.case.kwargs.get("momentum", 0.1) is None:
        return "with momentum=None, add 1 to num_batches_tracked before dividing by it."
    if "more than 1 value per channel" in detail and detail.startswith("yours raised"):
        return (
            "torch does not raise here: this forward normalizes with the running statistics (eval mode "
            "with track_running_stats=True), so one value per channel is fine. Raise the one-value "
            "error only when batch statistics are used (training, or track_running_stats=False)."
        )
    if "more than 1 value per channel" in detail:
        return (
            "with a single value per channel the batch variance is 0. Like torch, raise "
            "ValueError(\"Expected more than 1 value per channel when training, got input size ...\") "
            "whenever batch statistics are used (training, or eval with track_running_stats=False)."
        )
    if "expected" in detail and "D input" in detail:
        return (
            "check the input's number of dimensions first and raise ValueError like torch: "
            "BatchNorm1d takes (N, C) or (N, C, L), BatchNorm2d takes (N, C, H, W)."
        )
    return None


def hint(f: Finding) -> str | None:
    """The likely misconception behind a finding, or None when none of ours fits."""
    if f.aspect == RAISES:
        return _raises_hint(f)
    if f.aspect == OUTPUT and f.student is not None and f.exact is not None and f.student.shape == f.exact.shape:
        return _output_hint(f)
    if f.aspect == GRAD_INPUT:
        return (
            "the output is right but the input gradient is not: most likely μ or σ² is computed "
            "from a detached tensor (.detach(), .item(), torch.no_grad() or numpy), so autograd "
            "ignores that they depend on x."
        )
    if f.aspect == GRAD_PARAMS:
        if f.student is None:
            return "γ and β must be nn.Parameters used in the forward so that they receive gradients."
        return "check how γ (weight) and β (bias) enter the output: y = γ·x̂ + β."
    if f.aspect == BUFFERS:
        return _buffer_hint(f)
    return None
