"""Checks for the exercise ``06_training_dynamics``: ``GhostBatchNorm``, two training
diagnostics, and ``fold_batch_norm``.

* ``GhostBatchNorm(num_features, virtual_batch_size, ...)`` is compared, step by step by
  :mod:`autograder.core.engine`, with torch's BatchNorm applied to each virtual batch in turn
  (:class:`GhostReference`): outputs, gradients, running statistics, ``num_batches_tracked``.
* ``effective_learning_rate(w, lr)`` and ``update_to_data_ratio(before, after)`` against their
  definitions, computed here.
* ``fold_batch_norm(conv, bn)`` against ``torch.nn.utils.fusion.fuse_conv_bn_eval`` and against
  conv → BN itself; it runs in the student's process on modules built there
  (:mod:`autograder.exercises.ex06_training_dynamics.observe_fold`).

Each public function is one graded part; ``full=False`` runs the visible cases a visible test
cell uses (on the notebook's device), ``full=True`` adds the hidden cases of
:mod:`autograder.exercises.ex06_training_dynamics.hidden`, which only the grader holds (and runs
them on every available device).
"""
from __future__ import annotations

import copy
import math

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from autograder.core import batch_norm_hints, engine, forbidden, withheld, integrity
from autograder.core.devices import devices_for
from autograder.core.engine import ALL_ASPECTS, BUFFERS, OUTPUT, Case, Finding, Step
from autograder.core.inputs import channel_input, channel_state, random_tensor
from autograder.core.messages import CheckFailed, fail, shape_str, two_values
from autograder.core.numerics import closest_explanation, discrepancy, matches
from autograder.core.side import StudentCodeFailed, student
from autograder.core.wire import RemoteError

F64, F32 = torch.float64, torch.float32
GHOST = "GhostBatchNorm"


class GhostReference(nn.modules.batchnorm._BatchNorm):
    """torch's BatchNorm applied to each virtual batch in turn (``x.split(virtual_batch_size)``)
    whenever batch statistics are used; eval mode with running statistics is plain BatchNorm."""

    def __init__(self, num_features, virtual_batch_size, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.virtual_batch_size = virtual_batch_size

    def _check_input_dim(self, x):
        if x.dim() not in (2, 3, 4):
            raise ValueError(f"expected 2D, 3D or 4D input (got {x.dim()}D input)")

    def forward(self, x):
        if not self.training and self.track_running_stats:
            return super().forward(x)
        return torch.cat([super(GhostReference, self).forward(chunk) for chunk in x.split(self.virtual_batch_size)])


def _steps(shape, seed, modes, mean=0.0, std=1.0):
    return [Step("eval" if m.startswith("eval") else "train",
                 channel_input(shape, seed=seed * 10 + i, mean=mean, std=std), m.endswith("no-grad"))
            for i, m in enumerate(modes)]




def _ghost_case(shape, vbs, kwargs=None, modes=("train", "train", "eval"), dtype=F64, device=None, mean=0.0,
                note="", seed=0, tracked_state=False):
    kwargs = dict(kwargs or {})
    note = f"virtual batches of {vbs}" + (f", {note}" if note else "")
    return Case(GHOST, (shape[1], vbs), kwargs, _steps(shape, seed, modes, mean=mean), dtype,
                device or torch.device("cpu"), channel_state(shape[1], seed, kwargs.get("affine", True), tracked_state),
                note, reference="torch's BatchNorm applied to each virtual batch in turn")


def _ghost_cases(full: bool) -> list[Case]:
    cases = []
    for device in devices_for(full):
        d = dict(device=device)
        cases += [
            _ghost_case((8, 3), 4, seed=1, **d),
            _ghost_case((12, 3, 4, 4), 4, seed=2, **d),
            _ghost_case((10, 3), 4, note="the last virtual batch holds 2", seed=3, **d),
        ]
        cases += (withheld.of(__package__).ghost_cases(device) if full else [])
    return cases


def _one_update(f: Finding, stats_of) -> torch.Tensor | None:
    """The running buffer after one update per step from ``stats_of(x)`` (the wrong schedule)."""
    momentum = f.case.kwargs.get("momentum", 0.1)
    old = f.state_before.get(f.name)
    if momentum is None or not isinstance(old, torch.Tensor):
        return None
    x = f.step.x.double()
    mean, var = stats_of(x)
    new = mean if f.name == "running_mean" else var
    return (1 - momentum) * old.double() + momentum * new


def _ghost_hint(f: Finding) -> str | None:
    vbs = f.case.args[1]
    x = f.step.x.double()
    dims = [0] + list(range(2, x.dim()))
    if f.aspect == OUTPUT and f.student is not None and f.exact is not None and f.student.shape == f.exact.shape:
        var, mean = torch.var_mean(x, dim=dims, correction=0, keepdim=True)
        whole = (x - mean) / torch.sqrt(var + f.case.kwargs.get("eps", 1e-5))
        if f.case.kwargs.get("affine", True):
            view = [1, -1] + [1] * (x.dim() - 2)
            whole = whole * f.case.state["weight"].reshape(view) + f.case.state["bias"].reshape(view)
        if matches(whole, f.student, f.exact):
            return (f"you normalized the whole batch at once; a ghost BatchNorm normalizes each virtual batch of "
                    f"{vbs} samples with its own statistics (x.split({vbs})).")
        return None
    if f.aspect == BUFFERS and f.name == "num_batches_tracked":
        return f"num_batches_tracked grows by one per virtual batch ({math.ceil(x.shape[0] / vbs)} per step here), as torch's BatchNorm applied chunk by chunk counts it."
    if f.aspect == BUFFERS and f.name in ("running_mean", "running_var") and f.student is not None and f.exact is not None:
        whole = _one_update(f, lambda t: (t.mean(dim=dims), t.var(dim=dims, correction=1)))
        chunks = x.split(vbs)
        averaged = _one_update(f, lambda t: (torch.stack([c.mean(dim=dims) for c in chunks]).mean(0),
                                             torch.stack([c.var(dim=dims, correction=1) for c in chunks]).mean(0)))
        candidates = [(c, text) for c, text in (
            (whole, "the running statistics were updated once per step with the whole batch's statistics; torch's "
                    f"BatchNorm applied chunk by chunk updates them once per virtual batch ({len(chunks)} times here), "
                    "each time with that virtual batch's statistics."),
            (averaged, "the running statistics were updated once per step with the average of the virtual batches' "
                       f"statistics; update them once per virtual batch ({len(chunks)} times here), in order."),
        ) if c is not None]
        tracked = f.state_before.get("num_batches_tracked")
        if f.name == "running_var" and isinstance(tracked, torch.Tensor) and isinstance(f.state_before.get(f.name), torch.Tensor):
            n_all = x.numel() // x.shape[1]
            candidates += batch_norm_hints.running_var_misreadings(
                f.state_before[f.name], [batch_norm_hints.per_channel(c) for c in chunks], f.case.kwargs.get("momentum", 0.1),
                int(tracked), [(n_all, f"the whole batch's {n_all}")], "those of one virtual batch")
        return closest_explanation(candidates, f.student, f.exact)
    return None


def check_ghost_batch_norm(GhostBatchNorm, full: bool = False) -> None:
    """``GhostBatchNorm`` equals torch's BatchNorm applied to each virtual batch in turn."""
    __tracebackhide__ = True
    (cls,) = forbidden.own_classes((GhostBatchNorm, GHOST))
    for case in _ghost_cases(full):
        engine.compare_case(cls, GhostReference, case, ALL_ASPECTS, _ghost_hint, GHOST)
    layer = cls.construct((3, 4))
    if isinstance(layer, RemoteError):
        fail(f"GhostBatchNorm(3, 4) raised {layer.name}: {layer}")
    report = layer.report("observe.state_dict")
    wanted = sorted(nn.BatchNorm1d(3).state_dict())
    if "error" in report or sorted(report["state"]) != wanted:
        got = report.get("state", {})
        fail(f"GhostBatchNorm(3, 4).state_dict() has keys {sorted(got)}; a checkpoint of torch's BatchNorm1d(3) has "
             f"{wanted}, and the two must load into each other.")


# --- part 2: diagnostics -----------------------------------------------------------------------

def effective_rate(w: torch.Tensor, lr: float) -> torch.Tensor:
    """lr / ‖w_c‖² for every output unit c (the rows of ``w.flatten(1)``)."""
    return lr / w.flatten(1).pow(2).sum(dim=1)


def _call(fn, name, args, where, floats=False):
    __tracebackhide__ = True
    report = fn.report("observe.call", tuple(args), record=False, floats=floats)
    got = report["result"]
    if isinstance(got, RemoteError):
        fail(f"{where} raised {got.name}: {got}")
    if any(report["inputs_changed"]):
        fail(f"{where} modified its input in place; a diagnostic must leave the weights alone.")
    return got, str(report.get("result_type", "?"))


def _rate_hint(got, w, lr, exact) -> str | None:
    w = w.double().cpu()
    rows = w.flatten(1)
    candidates = [
        (torch.full_like(exact, lr / float(w.pow(2).sum())), "one number for the whole tensor: each output unit's "
         "weights w_c are scale-invariant on their own (BN normalizes each channel), so lr / ‖w_c‖² per row of w.flatten(1)."),
        (lr / rows.norm(dim=1), "divide by the squared norm ‖w_c‖², not the norm: the gradient scales as 1/‖w‖ and "
         "the angle it turns w by as 1/‖w‖²."),
        (lr * rows.pow(2).sum(dim=1), "inverted: a larger weight norm makes the effective step smaller, lr / ‖w_c‖²."),
        (lr / rows.pow(2).mean(dim=1), "a mean where the squared norm needs a sum: ‖w_c‖² = Σ w²."),
    ]
    return closest_explanation(candidates, got, exact)


def _diagnostic_cases(full: bool) -> list[tuple[tuple, float, torch.dtype]]:
    """(shape of w, lr, dtype): the visible cases, then (``full``) the hidden ones."""
    cases = [((4, 3), 0.1, F64), ((6, 3, 3, 3), 0.01, F32)]
    return cases + (withheld.of(__package__).diagnostic_cases() if full else [])


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _check_rate(rate, w, lr, device) -> None:
    __tracebackhide__ = True
    shape, dtype = tuple(w.shape), w.dtype
    where = f"effective_learning_rate(w of shape {shape_str(shape)}, {_dtype_name(dtype)} on {device.type}, lr={lr:g})"
    got, kind = _call(rate, "effective_learning_rate", (w.clone(), lr), where)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != (shape[0],):
        shown = shape_str(got.shape) if isinstance(got, torch.Tensor) else kind
        fail(f"{where}: return a tensor of shape ({shape[0]},), one effective rate per output unit; got {shown}.")
    if got.dtype != dtype or got.device.type != device.type:
        hint = ""
        if got.dtype != dtype and got.dtype == F64:
            hint = ("\nLikely cause: the rate was computed in float64 (w.double()) and not "
                    "cast back: end with .to(w.dtype), as a diagnostic logged next to the weights is.")
        fail(f"{where}: return the rates in w's dtype and on its device ({_dtype_name(dtype)} on {device.type}); yours "
             f"are {_dtype_name(got.dtype)} on {got.device.type}." + hint)
    exact = effective_rate(w.double(), lr).cpu()
    gap = discrepancy(got, effective_rate(w, lr), exact)
    if gap is not None:
        hint = _rate_hint(got, w, lr, exact)
        fail(f"{where}: your rate for unit {gap.index[0]} is {gap.shown[0]}, expected "
             f"{gap.shown[1]} (lr / ‖w_c‖²)." + (f"\nLikely cause: {hint}" if hint else ""))


RATIO_TOLERANCE = {F64: 1e-9, F32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}  # on log10 of the ratio


def _check_ratio(ratio, before, after, device) -> None:
    __tracebackhide__ = True
    shape, dtype = tuple(before.shape), before.dtype
    where = f"update_to_data_ratio(before, after of shape {shape_str(shape)}, {_dtype_name(dtype)} on {device.type})"
    got, kind = _call(ratio, "update_to_data_ratio", (before.clone(), after.clone()), where, floats=True)
    if type(got) is not float:
        shown = "a torch.Tensor" if isinstance(got, torch.Tensor) else kind
        fail(f"{where}: return a Python float; yours is {shown}. Call .item() on a one-element tensor "
             "(or float(...)), so that the value can be logged and plotted without holding a tensor.")
    before64, after64 = before.double().cpu(), after.double().cpu()
    expected = math.log10(float((after64 - before64).std() / before64.std()))
    if not abs(got - expected) <= RATIO_TOLERANCE[dtype] * max(1.0, abs(expected)):
        hint = None
        if math.isclose(got, 10 ** expected, rel_tol=1e-4):
            hint = "return log10 of the ratio, as makemore plots it (−3 means an update of 1/1000 of the data)."
        elif math.isclose(got, math.log10(float((after64 - before64).std() / after64.std())), rel_tol=1e-6):
            hint = ("you divided by the spread of the weights after the update, as makemore's notebook does; the "
                    "two differ very little, but this exercise defines the ratio with std(before).")
        yours, right = two_values(got, expected, digits=8)
        fail(f"{where}: your ratio is {yours}, expected {right} = log10(std(after − before) / std(before))."
             + (f"\nLikely cause: {hint}" if hint else ""))


def check_diagnostics(effective_learning_rate, update_to_data_ratio, full: bool = False) -> None:
    """``effective_learning_rate(w, lr)`` = lr / ‖w_c‖² per output unit, a tensor in w's dtype and
    on its device, and ``update_to_data_ratio(before, after)`` = log10(std(after − before) /
    std(before)), a Python float."""
    __tracebackhide__ = True
    integrity.check_untampered()
    rate = student(effective_learning_rate, "effective_learning_rate")
    ratio = student(update_to_data_ratio, "update_to_data_ratio")
    for device in devices_for(full):
        for seed, (shape, lr, dtype) in enumerate(_diagnostic_cases(full)):
            w = (random_tensor(shape, 40 + seed, -1.0, 1.0) * (1 + seed)).to(device, dtype)
            _check_rate(rate, w, lr, device)
            after = w - lr * random_tensor(shape, 60 + seed, -1.0, 1.0).to(device, dtype)
            _check_ratio(ratio, w, after, device)


# --- part 3: folding BN into the convolution --------------------------------------------------

def _fold_cases(full: bool) -> list[tuple[dict, dict, torch.dtype, str]]:
    """(conv kwargs, bn kwargs, dtype, note)."""
    cases = [
        ({"in_channels": 3, "out_channels": 4, "kernel_size": 3, "padding": 1}, {"num_features": 4}, F64, ""),
        ({"in_channels": 3, "out_channels": 4, "kernel_size": 3, "bias": False}, {"num_features": 4}, F64, "no conv bias"),
    ]
    return cases + (withheld.of(__package__).fold_cases() if full else [])


def _module_states(conv_kwargs, bn_kwargs, seed):
    conv = nn.Conv2d(**conv_kwargs, dtype=F64)
    with torch.no_grad():
        conv.weight.copy_(random_tensor(tuple(conv.weight.shape), seed, -0.5, 0.5))
        if conv.bias is not None:
            conv.bias.copy_(random_tensor(tuple(conv.bias.shape), seed + 1, -0.5, 0.5))
    bn = nn.BatchNorm2d(**bn_kwargs, dtype=F64)
    c = bn_kwargs["num_features"]
    with torch.no_grad():
        bn.running_mean.copy_(random_tensor((c,), seed + 2, -1.0, 1.0))
        bn.running_var.copy_(random_tensor((c,), seed + 3, 0.2, 3.0))
        bn.num_batches_tracked.fill_(7)
        if bn.affine:
            bn.weight.copy_(random_tensor((c,), seed + 4, 0.5, 1.5))
            bn.bias.copy_(random_tensor((c,), seed + 5, -0.5, 0.5))
    return conv.eval(), bn.eval()


def _fold_hint(weight, conv, bn) -> str | None:
    gamma = bn.weight.detach() if bn.affine else torch.ones_like(bn.running_var)
    exact = fuse_conv_bn_eval(conv, bn).weight.detach()
    view = (-1, 1, 1, 1)
    candidates = [
        (conv.weight * (gamma / torch.sqrt(bn.running_var)).reshape(view), "ε is missing: scale by γ / sqrt(running_var + eps)."),
        (conv.weight * (gamma / (bn.running_var + bn.eps)).reshape(view), "divide by the standard deviation sqrt(running_var + eps), not the variance."),
        (conv.weight * gamma.reshape(view), "the division by sqrt(running_var + eps) is missing."),
    ]
    if conv.weight.shape[1] == gamma.shape[0] and conv.weight.shape[0] != gamma.shape[0]:
        candidates.append((conv.weight * (gamma / torch.sqrt(bn.running_var + bn.eps)).reshape(1, -1, 1, 1),
                           "scaled along the input channels (dim 1); BN scales the convolution's OUTPUT channels (dim 0)."))
    return closest_explanation([(c.detach(), t) for c, t in candidates], weight.double(), exact)


def check_fold_batch_norm(fold_batch_norm, full: bool = False) -> None:
    """``fold_batch_norm(conv, bn)`` returns one new ``nn.Conv2d`` equal to conv → BN in eval mode,
    leaving both modules unchanged, without torch's fusion helpers."""
    __tracebackhide__ = True
    integrity.check_untampered()
    fn = student(fold_batch_norm, "fold_batch_norm")
    for device in devices_for(full):
        for seed, (conv_kwargs, bn_kwargs, dtype, note) in enumerate(_fold_cases(full)):
            conv, bn = _module_states(conv_kwargs, bn_kwargs, 80 + 10 * seed)
            described = ", ".join(f"{k}={v}" for k, v in conv_kwargs.items())
            where = (f"fold_batch_norm(Conv2d({described}), BatchNorm2d({', '.join(f'{k}={v}' for k, v in bn_kwargs.items())}))"
                     f" in {str(dtype).replace('torch.', '')} on {device.type}" + (f", {note}" if note else ""))
            x = channel_input((2, conv_kwargs["in_channels"], 6, 6), seed=seed)
            report = fn.report("observe_fold.fold", conv_kwargs, dict(conv.state_dict()), bn_kwargs, dict(bn.state_dict()),
                             device, dtype, x)
            _judge_fold(report, conv, bn, x, dtype, where)


def _in_dtype(conv: nn.Conv2d, bn: nn.BatchNorm2d, dtype) -> tuple[nn.Conv2d, nn.BatchNorm2d]:
    """Copies of both modules in ``dtype`` (``Module.to`` would change them in place)."""
    return copy.deepcopy(conv).to(dtype), copy.deepcopy(bn).to(dtype)


def _judge_fold(report: dict, conv: nn.Conv2d, bn: nn.BatchNorm2d, x: torch.Tensor, dtype, where: str) -> None:
    __tracebackhide__ = True
    if report.get("torch_fusion"):
        fail(f"{where}: it called torch's {', '.join(report['torch_fusion'])}. Compute the folded weight and bias "
             "yourself. This part earns no points.")
    if "error" in report:
        fail(f"{where} raised {report['error'].name}: {report['error']}")
    forbidden.report_normalization_ops(list(report["normalization_ops"]), "fold_batch_norm")
    if not report["is_conv"]:
        fail(f"{where}: return one nn.Conv2d (the folded convolution); got {report['type']}.")
    if report["modules_changed"]:
        fail(f"{where}: it changed conv or bn; build a new Conv2d and leave both modules as they were (the model "
             "they came from may still be used).")
    fused = fuse_conv_bn_eval(conv, bn)
    for name in ("weight", "bias"):
        mine, exact = report.get(name), getattr(fused, name).detach()
        if mine is None:
            fail(f"{where}: the folded convolution has no {name} tensor; BN's shift becomes the new conv's bias.")
        if tuple(mine.shape) != tuple(exact.shape):
            fail(f"{where}: the folded {name} has shape {shape_str(mine.shape)}; expected {shape_str(exact.shape)}.")
        same = getattr(fuse_conv_bn_eval(*_in_dtype(conv, bn, dtype)), name).detach()
        gap = discrepancy(mine, same, exact)
        if gap is not None:
            hint = _fold_hint(mine, conv, bn) if name == "weight" else (
                "the conv's own bias must be shifted and scaled too: (b − running_mean)·γ/σ + β."
                if conv.bias is not None else None)
            fail(f"{where}: the folded {name} differs from torch's fuse_conv_bn_eval by up to {gap.max_error:.3g} at "
                 f"{list(gap.index)} (yours {gap.shown[0]}, expected {gap.shown[1]})."
                 + (f"\nLikely cause: {hint}" if hint else ""))
    if "output_error" in report:
        error = report["output_error"]
        fail(f"{where}: running the folded convolution raised {error.name}: {error}")
    with torch.no_grad():
        exact_out = bn(conv(x))
        conv_same, bn_same = _in_dtype(conv, bn, dtype)
        same_out = bn_same(conv_same(x.to(dtype)))
    mine = report.get("output")
    if mine is None or mine.shape != exact_out.shape:
        fail(f"{where}: the folded convolution's output has shape "
             f"{shape_str(mine.shape) if mine is not None else 'None'}; conv → bn gives {shape_str(exact_out.shape)}.")
    gap = discrepancy(mine, same_out, exact_out)
    if gap is not None:
        fail(f"{where}: the folded convolution's output differs from conv → bn (eval) by up to {gap.max_error:.3g}: "
             "its stride, padding, dilation, groups and padding_mode must be the original convolution's.")


# --- the sweep of question 3 ------------------------------------------------------------------

SWEEP_SCALES = [0.1, 1.0, 10.0]  # factor on the first layer's He-initialized weights
SWEEP_VIRTUAL_BATCH_SIZES = [4, 16, 64]  # inside batches of 64: 64 is plain BatchNorm


class SweepDiffered(CheckFailed):
    """The student's layer ran in the sweep but did not compute torch's ghost BatchNorm there."""


SWEEP_TOLERANCE = 1e-4  # float32 rounding, relative to the largest value of a tensor


def _differs(mine, reference: torch.Tensor) -> bool:
    if type(mine) is not torch.Tensor or mine.shape != reference.shape or mine.dtype != F32:
        return True
    gap = (mine.double() - reference).abs()
    return not bool((gap <= SWEEP_TOLERANCE * (reference.abs().max() + reference.abs())).all())


def _replay(records, virtual_batch_size: int) -> str | None:
    """Where the layer in one run of the sweep differed from torch's ghost BatchNorm fed the same
    inputs and output gradients (in float64, its weight and bias trained here by the same SGD), or
    None. Judged here, on plain data."""
    from autograder.exercises.ex06_training_dynamics.observe_sweep import HIDDEN, LEARNING_RATE, STEPS

    if type(records) is not list or len(records) != STEPS:
        return "the sweep's record of your layer is incomplete"
    reference = GhostReference(HIDDEN, virtual_batch_size, dtype=F64).train()
    for step, seen in enumerate(records, start=1):
        x = seen.get("input") if type(seen) is dict else None
        if type(x) is not torch.Tensor or x.dim() != 2 or x.shape[1] != HIDDEN or x.dtype != F32:
            return "the sweep's record of your layer is incomplete"
        x = x.double().requires_grad_()
        reference.zero_grad()
        y = reference(x)
        if _differs(seen.get("output"), y.detach()):
            return f"its output at step {step} differs"
        upstream = seen.get("output_grad")
        if type(upstream) is not torch.Tensor or upstream.shape != y.shape:
            return f"at step {step} no gradient flowed back through its output (is it detached?)"
        y.backward(upstream.double())
        if _differs(seen.get("input_grad"), x.grad):
            return f"the gradient it passes back to its input at step {step} differs"
        with torch.no_grad():
            for parameter in reference.parameters():
                parameter -= LEARNING_RATE * parameter.grad
    return None


def ghost_sweep(GhostBatchNorm) -> list[list[float]]:
    """Train the small network of :mod:`autograder.exercises.ex06_training_dynamics.observe_sweep` once per initial scale
    (rows, :data:`SWEEP_SCALES`) and virtual batch size (columns, :data:`SWEEP_VIRTUAL_BATCH_SIZES`)
    with ``GhostBatchNorm`` after its first layer; return the final training losses. Runs where
    the class lives (the notebook's kernel), in a few seconds on a CPU. Every step of every run is
    replayed here with torch's ghost BatchNorm (:func:`_replay`): a layer that computes something
    else in the sweep fails with :class:`SweepDiffered`."""
    __tracebackhide__ = True
    integrity.check_untampered()
    report = student(GhostBatchNorm, GHOST).report("observe_sweep.sweep", SWEEP_SCALES, SWEEP_VIRTUAL_BATCH_SIZES)
    if "error" in report:
        scale, size = report.get("at", ["?", "?"])
        fail(f"the sweep could not train with your GhostBatchNorm (initial scale {scale}, virtual batch size "
             f"{size}): it raised {report['error'].name}: {report['error']}")
    losses = report.get("losses")
    shape = (len(SWEEP_SCALES), len(SWEEP_VIRTUAL_BATCH_SIZES))
    if (type(losses) is not list or len(losses) != shape[0]
            or any(type(row) is not list or len(row) != shape[1] or any(type(v) is not float for v in row) for row in losses)):
        raise StudentCodeFailed("the sweep's report is not a table of losses")
    records = report.get("records")
    runs = [(scale, size) for scale in SWEEP_SCALES for size in SWEEP_VIRTUAL_BATCH_SIZES]
    if type(records) is not list or len(records) != len(runs):
        raise StudentCodeFailed("the sweep's report does not record every run")
    for (scale, size), record in zip(runs, records):
        where = _replay(record, size)
        if where is not None:
            raise SweepDiffered(
                f"your GhostBatchNorm differed from the reference (torch's BatchNorm on each virtual batch) in the "
                f"sweep's run with initial scale {scale:g} and virtual batch size {size}: {where}. "
                "The sweep needs a layer that computes the same thing in every call: make Part 1 pass first.")
    return losses


def sweep_for_grading(GhostBatchNorm) -> tuple[list[list[float]], str]:
    """The sweep with the student's layer, run again where the notebook is graded, and whose layer
    it used: torch's BatchNorm on each virtual batch when the student's does not run, or does not
    compute torch's ghost BatchNorm in the sweep."""
    __tracebackhide__ = True
    try:
        return ghost_sweep(GhostBatchNorm), "your GhostBatchNorm"
    except SweepDiffered:
        return ghost_sweep(GhostReference), ("torch's BatchNorm on each virtual batch (your GhostBatchNorm "
                                             "differed from the reference during the sweep, so the question was graded "
                                             "on the reference's sweep)")
    except CheckFailed:
        return ghost_sweep(GhostReference), "torch's BatchNorm on each virtual batch (yours did not run)"


def sweep_table(losses: list[list[float]]) -> str:
    """The losses as a reader scans them: 'final losses at virtual batch sizes 4, 16, 64: initial
    scale 0.1: 0.699, 0.377, 0.297; ...'."""
    rows = "; ".join(f"initial scale {scale:g}: " + ", ".join(f"{v:.3f}" for v in row)
                     for scale, row in zip(SWEEP_SCALES, losses))
    return f"final losses at virtual batch sizes {', '.join(map(str, SWEEP_VIRTUAL_BATCH_SIZES))}: {rows}"


integrity.remember()
