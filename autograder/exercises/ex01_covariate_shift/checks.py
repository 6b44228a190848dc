"""Checks for the exercise ``01_covariate_shift``.

``activation_stats`` and ``layer_input`` are measurement tools: they are checked against values
the grader records with its own hooks and computes with torch, and against the rules every probe
must follow (:mod:`autograder.exercises.ex01_covariate_shift.probes`). ``distribution_shift`` is checked against the formula
computed in float64. ``BatchStandardize`` goes through the shared engine against
``torch.nn.BatchNorm1d(num_features, eps, affine=False, track_running_stats=False)``.

The student's functions run on the student's side only (:mod:`autograder.exercises.ex01_covariate_shift.observe`
reports what they returned and did); the probe models are described as plain data and built on
both sides, so the grader records the expected values on its own identical copy.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from autograder.core import engine, forbidden, withheld, integrity
from autograder.core.batch_norm_hints import hint as batch_norm_hint
from autograder.core.devices import default_device, devices_for
from autograder.core.engine import FORWARD_ASPECTS, Case, Step
from autograder.core.inputs import channel_input
from autograder.core.messages import fail, two_values
from autograder.exercises.ex01_covariate_shift.probes import build_model, judge_tool_report, model_spec
from autograder.core.side import Student, student
from autograder.core.wire import RemoteError

STAT_NAMES = ("mean", "std", "p15", "p50", "p85", "saturated")
QUANTILES = (0.15, 0.50, 0.85)
# ``saturated`` is a fraction k/n of the n values: a float32 mean of a bool mask gives k/n within
# a few float32 roundings (~1e-7 relative), while two different counts differ by 1/n, far more
# for any output these checks measure (n < 1e5).
SATURATED_REL_TOL = 1e-6


def _dtypes(full: bool) -> list[torch.dtype]:
    return [torch.float32] + (withheld.of(__package__).dtypes() if full else [])


def _recorded_outputs(model: nn.Module, x: torch.Tensor, names: list[str], pre: bool = False,
                      clone: bool = True) -> dict:
    """What each named module receives (``pre``) or returns, recorded with the grader's hooks.

    ``clone=False`` keeps the tensors themselves, as they are once the forward has finished: what
    a tool that forgets to copy them returns after an in-place layer has overwritten them.
    """
    seen, handles = {}, []
    modules = dict(model.named_modules())
    keep = (lambda t: t.detach().clone()) if clone else (lambda t: t.detach())
    for name in names:
        if pre:
            hook = (lambda n: lambda m, inputs: seen.__setitem__(n, keep(inputs[0])))(name)
            handles.append(modules[name].register_forward_pre_hook(hook))
        else:
            hook = (lambda n: lambda m, inputs, out: seen.__setitem__(n, keep(out)))(name)
            handles.append(modules[name].register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return seen


def expected_stats(values: torch.Tensor, saturation: float) -> dict[str, float]:
    v = values.flatten().double().cpu()
    q = torch.quantile(v, torch.tensor(QUANTILES, dtype=torch.float64))
    return {
        "mean": float(v.mean()),
        "std": float(v.std(correction=0)),
        "p15": float(q[0]),
        "p50": float(q[1]),
        "p85": float(q[2]),
        "saturated": float(((v < saturation) | (v > 1 - saturation)).double().mean()),
    }


def _stats_hint(stat: str, got: float, values: torch.Tensor, saturation: float) -> str:
    v = values.flatten().double().cpu()
    n = v.numel()
    if stat == "std":
        if math.isclose(got, float(v.std(correction=1)), rel_tol=1e-6):
            return "you return the unbiased standard deviation (÷ (n − 1)); use the population one (correction=0)."
        if math.isclose(got, float(v.var(correction=0)), rel_tol=1e-6):
            return "you return the variance; return the standard deviation."
    if stat.startswith("p"):
        k = max(1, math.ceil(float(stat[1:]) / 100 * n))
        if math.isclose(got, float(v.kthvalue(k).values), rel_tol=1e-6):
            return "that is a nearest-rank percentile; use torch.quantile, which interpolates linearly between ranks."
        if math.isclose(got, float(torch.quantile(v, float(stat[1:]))), rel_tol=1e-6):
            return "pass the percentile as a fraction in [0, 1] (0.15), not as a number in [0, 100]."
        return "percentiles are those of torch.quantile(values, 0.15 / 0.50 / 0.85) over all values of the output."
    if stat == "saturated":
        high = float((v > 1 - saturation).double().mean())
        if math.isclose(got, high, rel_tol=SATURATED_REL_TOL, abs_tol=1e-12):
            return "count both ends: a sigmoid is saturated near 0 as well as near 1 (x < s or x > 1 − s)."
        inclusive = float(((v <= saturation) | (v >= 1 - saturation)).double().mean())
        if math.isclose(got, inclusive, rel_tol=SATURATED_REL_TOL, abs_tol=1e-12):
            return "the inequalities are strict: a value equal to s or to 1 − s is not saturated (x < s or x > 1 − s)."
        return f"the fraction of values below {saturation} or above {1 - saturation}, over all values of the output."
    return "compute each statistic over all values of the layer's output (every sample and unit together)."


def check_activation_stats(activation_stats, full: bool = False) -> None:
    """``activation_stats(model, x, layer_names, saturation)`` against the grader's own recording."""
    __tracebackhide__ = True
    integrity.check_untampered()
    tool = student(activation_stats, "activation_stats")
    # (widths, layer names, saturation, batch, training mode, Linear followed by nn.ReLU(inplace=True))
    configs = [([6, 16, 16, 4], ["act1", "act2"], 0.05, 32, True, None)]
    configs += withheld.of(__package__).activation_configs() if full else []
    for device in devices_for(full):
        for dtype in _dtypes(full):
            for seed, (widths, names, saturation, batch, train, inplace_relu_after) in enumerate(configs):
                spec = model_spec(widths, seed, device, dtype, train, inplace_relu_after=inplace_relu_after)
                x = channel_input((batch, widths[0]), seed=seed + 10)
                if "spy" in names:
                    x[:2] = torch.tensor([saturation, 1 - saturation], dtype=x.dtype)[:, None]
                x = x.to(device, dtype)
                what = (
                    f"activation_stats on a {len(widths) - 1}-layer sigmoid MLP in "
                    f"{'training' if train else 'eval'} mode ({str(dtype).replace('torch.', '')}, {device.type}), "
                    f"layers {names}, saturation {saturation}"
                    + (f", where nn.ReLU(inplace=True) follows '{inplace_relu_after}'" if inplace_relu_after else "")
                )
                report = tool.call("observe_tools.run_tool", spec, x, (names, saturation))
                got = judge_tool_report(report, what)
                recorded = _recorded_outputs(build_model(spec), x, names)
                overwritten = _recorded_outputs(build_model(spec), x, names, clone=False)
                if not isinstance(got, dict) or sorted(got) != sorted(names):
                    fail(f"{what}: return a dict with one entry per requested layer name {names}, got {report['shown']}.")
                for name in names:
                    entry = got[name]
                    if not isinstance(entry, dict) or sorted(entry) != sorted(STAT_NAMES):
                        fail(f"{what}: result['{name}'] must be a dict with the keys {list(STAT_NAMES)}, got {entry!r:.200}.")
                    expected = expected_stats(recorded[name], saturation)
                    # float32 sums and interpolations err relative to the size of the values
                    # themselves, which can be much larger than a mean or a percentile near 0.
                    scale = max(1.0, float(recorded[name].double().abs().mean()))
                    for stat in STAT_NAMES:
                        value = entry[stat]
                        if not isinstance(value, float):
                            kind = report["types"][name][stat]
                            fail(f"{what}: result['{name}']['{stat}'] is a {kind}; return Python floats (tensor.item()).")
                        if stat == "saturated":
                            tolerance = SATURATED_REL_TOL * abs(expected[stat]) + 1e-12
                        else:
                            tolerance = 2e-6 * max(scale, abs(expected[stat]))
                        if not abs(value - expected[stat]) <= tolerance:
                            late = expected_stats(overwritten[name], saturation)[stat]
                            if not torch.equal(overwritten[name], recorded[name]) and abs(value - late) <= tolerance:
                                cause = (
                                    f"the output of '{name}' you kept was changed later by an in-place operation "
                                    "(here the next layer, an in-place ReLU, overwrites it), and you computed the "
                                    "statistics after the forward. Store a copy in the hook, output.detach().clone(), "
                                    "or compute the statistics inside the hook."
                                )
                            else:
                                cause = _stats_hint(stat, value, recorded[name], saturation)
                            yours, right = two_values(value, expected[stat], digits=9)
                            fail(
                                f"{what}: result['{name}']['{stat}'] is {yours}, expected {right}.\n"
                                f"Likely cause: {cause}"
                            )
    _check_cleanup_on_error(tool, "activation_stats on a model whose forward raises", 7, (["act1"], 0.05))


def check_layer_input(layer_input, full: bool = False) -> None:
    """``layer_input(model, layer_name, x)``: what that layer receives, recorded with a pre-hook."""
    __tracebackhide__ = True
    integrity.check_untampered()
    tool = student(layer_input, "layer_input")
    # (widths, layer name, training mode, Linear followed by nn.ReLU(inplace=True) named "relu")
    configs = [([6, 16, 16, 4], "fc2", True, None)]
    configs += withheld.of(__package__).layer_input_configs() if full else []
    for device in devices_for(full):
        for dtype in _dtypes(full):
            for seed, (widths, name, train, inplace_relu_after) in enumerate(configs):
                spec = model_spec(widths, seed + 20, device, dtype, train, inplace_relu_after=inplace_relu_after)
                model = build_model(spec)
                x = channel_input((9, widths[0]), seed=seed + 30).to(device, dtype)
                what = (
                    f"layer_input(model, '{name}', x) ({str(dtype).replace('torch.', '')}, {device.type})"
                    + (f" where '{name}' is nn.ReLU(inplace=True) after '{inplace_relu_after}'" if inplace_relu_after else "")
                )
                report = tool.call("observe_tools.run_tool", spec, x, (name,), x_at=2)
                got = judge_tool_report(report, what)
                expected = _recorded_outputs(model, x, [name], pre=True)[name]
                if not isinstance(got, torch.Tensor):
                    fail(f"{what}: return the tensor the layer receives, got {report['type']}.")
                if got.requires_grad:
                    fail(f"{what}: the returned tensor requires grad; return it detached (or record it under torch.no_grad()).")
                if got.shape != expected.shape or got.device.type != expected.device.type or got.dtype != expected.dtype:
                    fail(f"{what}: returned {got.dtype} {tuple(got.shape)} on {got.device.type}, expected {expected.dtype} {tuple(expected.shape)} on {expected.device.type}.")
                if not torch.equal(got, expected):
                    output = _recorded_outputs(model, x, [name])[name]
                    overwritten = _recorded_outputs(model, x, [name], pre=True, clone=False)[name]
                    if torch.equal(got, overwritten):
                        cause = (
                            "the tensor you captured was changed later by an in-place operation (here the layer "
                            "itself, an in-place ReLU, overwrites its input). Store a copy in the pre-hook: "
                            "inputs[0].detach().clone()."
                        )
                    elif output.shape == got.shape and torch.equal(got, output):
                        cause = "that is the layer's output; a forward *pre*-hook (register_forward_pre_hook) sees its input."
                    else:
                        cause = "record inputs[0] in a forward pre-hook on dict(model.named_modules())[layer_name]."
                    fail(f"{what}: the returned tensor is not the layer's input.\nLikely cause: {cause}")
    _check_cleanup_on_error(tool, "layer_input on a model whose forward raises", 8, ("fc1",), x_at=2)


def _check_cleanup_on_error(tool: Student, what: str, seed: int, args: tuple, x_at: int = 1) -> None:
    """The tool on a model whose forward raises: it may let the error through, but must clean up."""
    __tracebackhide__ = True
    spec = model_spec([4, 8, 3], seed, default_device(), torch.float32, failing=True)
    x = torch.randn(5, 4, device=default_device())
    judge_tool_report(tool.call("observe_tools.run_tool", spec, x, args, x_at=x_at), what, may_raise=True)


def expected_shift(before: torch.Tensor, after: torch.Tensor, eps: float = 1e-8) -> dict[str, float]:
    b, a = before.double().cpu(), after.double().cpu()
    sd_b, sd_a = b.std(0, correction=0), a.std(0, correction=0)
    return {
        "mean_shift": float(((a.mean(0) - b.mean(0)).abs() / (sd_b + eps)).mean()),
        "scale_shift": float(torch.log((sd_a + eps) / (sd_b + eps)).abs().mean()),
    }


def check_distribution_shift(distribution_shift, full: bool = False) -> None:
    """``distribution_shift(before, after)`` against the formula, computed in float64."""
    __tracebackhide__ = True
    integrity.check_untampered()
    function = student(distribution_shift, "distribution_shift")
    pairs = [((64, 5), 0.3, 1.5, False)]
    pairs += withheld.of(__package__).shift_pairs() if full else []
    for device in devices_for(full):
        for dtype in _dtypes(full):
            for seed, (shape, shift, scale, constant) in enumerate(pairs):
                before = channel_input(shape, seed=seed + 40)
                after = shift + scale * channel_input(shape, seed=seed + 50)
                if constant:
                    before[:, 0] = 1.5  # a feature that did not vary: σ_before = 0, eps keeps it finite
                before, after = before.to(device, dtype), after.to(device, dtype)
                what = (
                    f"distribution_shift on ({shape[0]}, {shape[1]}) inputs ({str(dtype).replace('torch.', '')}, {device.type})"
                    + (" with a constant feature in `before`" if constant else "")
                )
                report = function.call("observe_tools.call", (before, after))
                got = report["result"]
                if isinstance(got, RemoteError):
                    fail(f"{what} raised {got.name}: {got}")
                expected = expected_shift(before, after)
                if not isinstance(got, dict) or sorted(got) != ["mean_shift", "scale_shift"]:
                    fail(f"{what}: return {{'mean_shift': float, 'scale_shift': float}}, got {report['shown']}.")
                for key, value in got.items():
                    if not isinstance(value, float) or not math.isfinite(value):
                        fail(f"{what}: '{key}' is {value!r}; return a finite Python float.")
                    if not math.isclose(value, expected[key], rel_tol=1e-5, abs_tol=1e-7):
                        yours, right = two_values(value, expected[key], digits=7)
                        fail(
                            f"{what}: '{key}' is {yours}, expected {right}.\n"
                            f"Likely cause: {_shift_hint(key, value, before, after)}"
                        )


def _shift_hint(key: str, value: float, before: torch.Tensor, after: torch.Tensor) -> str:
    b, a = before.double().cpu(), after.double().cpu()
    if key == "mean_shift":
        unbiased = float(((a.mean(0) - b.mean(0)).abs() / (b.std(0, correction=1) + 1e-8)).mean())
        signed = float(((a.mean(0) - b.mean(0)) / (b.std(0, correction=0) + 1e-8)).mean())
        by_after = float(((a.mean(0) - b.mean(0)).abs() / (a.std(0, correction=0) + 1e-8)).mean())
        for candidate, cause in (
            (unbiased, "use the population standard deviation (correction=0) of `before`."),
            (signed, "take the absolute value of each feature's shift before averaging: opposite shifts must not cancel."),
            (by_after, "measure the shift in units of the OLD spread, σ_before."),
        ):
            if math.isclose(value, candidate, rel_tol=1e-6):
                return cause
        return "mean over features of |μ_after − μ_before| / (σ_before + eps), statistics over the batch (dim 0)."
    signed = float(torch.log((a.std(0, correction=0) + 1e-8) / (b.std(0, correction=0) + 1e-8)).mean())
    if math.isclose(value, signed, rel_tol=1e-6):
        return "take |log(σ_after/σ_before)| per feature: a feature that shrinks moved as much as one that grows."
    return "mean over features of |log((σ_after + eps) / (σ_before + eps))|, population std over the batch."


def _reference_standardize(num_features, eps=1e-5, device=None, dtype=None) -> nn.Module:
    return nn.BatchNorm1d(num_features, eps=eps, affine=False, track_running_stats=False, device=device, dtype=dtype)


def _standardize_case(device, shape, kwargs=None, dtype=torch.float64, mean=0.0, std=1.0, note="", seed=0) -> Case:
    """One ``BatchStandardize`` case: a training step, eval, and a training step without gradients."""
    built = []
    for i, mode in enumerate(("train", "eval", "train-no-grad")):
        x = channel_input(shape, seed=seed * 100 + i, mean=mean, std=std)
        built.append(Step("eval" if mode == "eval" else "train", x, mode.endswith("no-grad")))
    reference = "torch.nn.BatchNorm1d(affine=False, track_running_stats=False)"
    return Case("BatchStandardize", (shape[1],), dict(kwargs or {}), built, dtype, device, {}, note, reference)


def _standardize_cases(full: bool) -> list[Case]:
    cases = []
    for device in devices_for(full):
        cases += [_standardize_case(device, (8, 3), seed=1), _standardize_case(device, (6, 3, 5), seed=2)]
        cases += withheld.of(__package__).standardize_cases(device) if full else []
    return cases


def check_batch_standardize(BatchStandardize, full: bool = False) -> None:
    """Outputs and input gradients, training and eval mode, against torch's parameter-free BatchNorm1d."""
    __tracebackhide__ = True
    BatchStandardize = forbidden.own_classes((BatchStandardize, "BatchStandardize"))[0]
    for case in _standardize_cases(full):
        engine.compare_case(BatchStandardize, _reference_standardize, case, FORWARD_ASPECTS, batch_norm_hint, "BatchStandardize")


integrity.remember()
