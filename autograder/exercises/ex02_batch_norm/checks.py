"""Checks for the exercise ``02_batch_norm``: ``batch_mean_var``, ``BatchNorm1d``, ``BatchNorm2d``.

Each public function is one graded part; ``full=False`` runs the quick subset a visible test
cell uses, ``full=True`` adds the hidden cases of ``hidden.py``, which only the grader holds.
The reference is always ``torch.nn.BatchNorm1d`` / ``BatchNorm2d`` (and ``torch.var_mean`` for
the statistics).
"""
from __future__ import annotations

import torch
from torch import nn

from autograder.core import engine, forbidden, withheld, integrity, structure
from autograder.core.batch_norm_hints import hint
from autograder.core.devices import devices_for
from autograder.core.engine import ALL_ASPECTS, FORWARD_ASPECTS, RAISES, Case, Step
from autograder.core.inputs import channel_input, channel_state
from autograder.core.messages import fail, shape_str
from autograder.core.numerics import discrepancy, matches
from autograder.core.side import Student, student
from autograder.core.wire import RemoteError

REFERENCES = {"BatchNorm1d": nn.BatchNorm1d, "BatchNorm2d": nn.BatchNorm2d}
F64, F32 = torch.float64, torch.float32





def _case(layer, shape, kwargs=None, dtype=F64, device=None, steps=("train", "train"), mean=0.0,
          std=1.0, note="", seed=0, state=None):
    kwargs = dict(kwargs or {})
    channels = shape[1]
    built_steps = []
    for i, mode in enumerate(steps):
        no_grad = mode.endswith("-no-grad")
        step_shape = shape
        if mode.startswith("eval-one"):
            step_shape = (1,) + tuple(shape[1:])
        x = channel_input(step_shape, seed=seed * 100 + i, mean=mean, std=std)
        built_steps.append(Step("eval" if mode.startswith("eval") else "train", x, no_grad))
    if state is None:
        state = channel_state(channels, seed, affine=kwargs.get("affine", True))
    return Case(layer, (channels,), kwargs, built_steps, dtype, device or torch.device("cpu"), state, note)


# --- part 1: statistics --------------------------------------------------------------------

def check_batch_mean_var(batch_mean_var, full: bool = False) -> None:
    """``batch_mean_var(x)`` returns the per-channel mean and biased variance over all dims but 1."""
    __tracebackhide__ = True
    integrity.check_untampered()
    function = student(batch_mean_var, "batch_mean_var")
    shapes = [((6, 3), 0.0, 1.0, F64), ((4, 3, 5), 0.0, 1.0, F64), ((2, 3, 5, 4), 0.0, 1.0, F64)]
    shapes += withheld.of(__package__).statistics_inputs() if full else []
    for device in devices_for(full):
        for seed, (shape, mean, std, dtype) in enumerate(shapes):
            x = channel_input(shape, seed=seed, mean=mean, std=std).to(dtype).to(device)
            where = f"batch_mean_var on a {str(dtype).replace('torch.', '')} input of shape {shape_str(shape)} on {device.type}"
            if mean:
                where += f" with mean {mean:g}"
            report = function.call("observe.call", (x.clone(),), record=True)
            got = report["result"]
            if isinstance(got, RemoteError):
                fail(f"{where} raised {got.name}: {got}")
            forbidden.report_normalization_ops(report["normalization_ops"], "batch_mean_var")
            if not (isinstance(got, (tuple, list)) and len(got) == 2 and all(isinstance(t, torch.Tensor) for t in got)):
                fail(f"{where}: return a tuple (mean, var) of two tensors, got {type(got).__name__}.")
            dims = [0] + list(range(2, len(shape)))
            var_ref, mean_ref = torch.var_mean(x, dim=dims, correction=0)
            var_exact, mean_exact = torch.var_mean(x.double(), dim=dims, correction=0)
            n = x.numel() // shape[1]
            for name, value, ref, exact in (("mean", got[0], mean_ref, mean_exact), ("var", got[1], var_ref, var_exact)):
                if value.shape != ref.shape:
                    fail(
                        f"{where}: {name} has shape {shape_str(value.shape)}, expected ({shape[1]},): "
                        f"one value per channel, reducing over dims {tuple(dims)}."
                    )
                if value.dtype != x.dtype or value.device.type != x.device.type:
                    fail(f"{where}: {name} is {value.dtype} on {value.device}; keep the input's dtype and device ({x.dtype} on {x.device}).")
                gap = discrepancy(value, ref, exact)
                if gap is not None:
                    message = (
                        f"{where}: {name} is off by up to {gap.max_error:.3g} "
                        f"(channel {gap.index[0]}: yours {gap.shown[0]}, expected {gap.shown[1]})."
                    )
                    advice = _statistics_hint(name, value, exact, x, n, dims)
                    fail(message + (f"\nLikely cause: {advice}" if advice else ""))


def _statistics_hint(name, value, exact, x, n, dims) -> str | None:
    if name == "var" and n > 1 and matches(exact * n / (n - 1), value):
        return (
            f"you return the unbiased variance (divide by n − 1 = {n - 1}); BatchNorm normalizes "
            f"with the biased one (divide by n = {n}). Use unbiased=False / correction=0."
        )
    if name == "var" and x.dtype != torch.float64:
        return (
            "the variance is inaccurate for inputs with a large mean: E[x²] − E[x]² cancels "
            "catastrophically in float32. Subtract the mean first (two passes), or accumulate in float64."
        )
    if name == "var" and matches(exact.sqrt(), value):
        return "you return the standard deviation; return the variance σ²."
    return f"reduce over every dimension except the channel dimension 1, i.e. dims {tuple(dims)}."


# --- parts 2-4: the modules ------------------------------------------------------------------

def _training_cases(full: bool) -> list[Case]:
    cases = []
    for device in devices_for(full):
        d = dict(device=device)
        cases += [
            _case("BatchNorm1d", (8, 3), seed=1, **d),
            _case("BatchNorm1d", (6, 3, 5), seed=2, **d),
            _case("BatchNorm2d", (2, 3, 5, 4), seed=3, note="N = 2, H ≠ W ≠ C", **d),
        ]
        cases += withheld.of(__package__).training_cases(device) if full else []
    return cases


# What the running-statistics cases do: two training steps, one without gradients, eval on the
# whole batch and on one sample, training again.
RUNNING_STEPS = ("train", "train", "train-no-grad", "eval", "eval-one", "train")


def _running_cases(full: bool) -> list[Case]:
    cases = []
    for device in devices_for(full):
        d = dict(device=device, steps=RUNNING_STEPS)
        cases += [
            _case("BatchNorm1d", (6, 3), seed=21, state=channel_state(3, 21, tracked=True), **d),
            _case("BatchNorm2d", (2, 3, 5, 4), seed=22, note="N = 2, H ≠ W ≠ C", state=channel_state(3, 22, tracked=True), **d),
            _case("BatchNorm1d", (4, 3, 5), {"momentum": None}, seed=23, state=channel_state(3, 23, tracked=True), **d),
        ]
        cases += withheld.of(__package__).running_cases(device) if full else []
    return cases


def _input_steps(*pairs) -> list[Step]:
    """One step per (mode, input shape), for the input checks: torch must accept or refuse each."""
    return [Step(mode, channel_input(shape, seed=40 + i)) for i, (mode, shape) in enumerate(pairs)]


def _input_check_cases(full: bool) -> list[Case]:
    cases = []
    for device in devices_for(full):
        cases += [
            Case("BatchNorm1d", (4,), {}, _input_steps(("train", (5, 4, 3, 2)), ("train", (1, 4)), ("eval", (1, 4))), device=device),
            Case("BatchNorm2d", (3,), {}, _input_steps(("train", (2, 3, 4)), ("train", (1, 3, 1, 1)), ("eval", (1, 3, 1, 1))), device=device),
        ]
        cases += withheld.of(__package__).input_check_cases(device) if full else []
    return cases


def _classes(BatchNorm1d, BatchNorm2d) -> dict[str, Student]:
    __tracebackhide__ = True
    return {cls.what: cls for cls in forbidden.own_classes((BatchNorm1d, "BatchNorm1d"), (BatchNorm2d, "BatchNorm2d"))}


def _compare(classes, cases, aspects) -> None:
    __tracebackhide__ = True
    for case in cases:
        engine.compare_case(classes[case.layer], REFERENCES[case.layer], case, aspects, hint, case.layer)


def check_training_forward(BatchNorm1d, BatchNorm2d, full: bool = False) -> None:
    """Training mode: outputs, input gradients and γ/β gradients match torch's."""
    __tracebackhide__ = True
    _compare(_classes(BatchNorm1d, BatchNorm2d), _training_cases(full), FORWARD_ASPECTS)


def check_running_statistics(BatchNorm1d, BatchNorm2d, full: bool = False) -> None:
    """Running statistics, ``num_batches_tracked``, momentum (``None`` included) and eval mode."""
    __tracebackhide__ = True
    _compare(_classes(BatchNorm1d, BatchNorm2d), _running_cases(full), ALL_ASPECTS)


def check_module_contract(BatchNorm1d, BatchNorm2d, full: bool = False) -> None:
    """Constructor, parameters, buffers, state_dict both ways, factory kwargs and input checks."""
    __tracebackhide__ = True
    classes = _classes(BatchNorm1d, BatchNorm2d)
    variants = [{}, {"affine": False}, {"track_running_stats": False}]
    variants += withheld.of(__package__).contract_variants() if full else []
    dtypes = [F32] + (withheld.of(__package__).contract_dtypes() if full else [])
    for layer, cls in classes.items():
        for device in devices_for(full):
            for dtype in dtypes:
                for kwargs in variants:
                    structure.compare_structure(cls, REFERENCES[layer], (5,), kwargs, device, dtype, layer)
        structure.compare_structure(cls, REFERENCES[layer], (4,), {}, None, None, layer)
    _compare(classes, _input_check_cases(full), (RAISES,))


integrity.remember()
