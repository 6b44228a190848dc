"""The comparison engine every chapter uses.

A *case* is one configuration: a layer class's constructor arguments, a dtype, a device, an
initial state and a sequence of *steps* (a training or eval forward on a given input, with or
without autograd).  The engine builds the student's layer and its ``torch.nn`` namesake from the
same arguments and state, runs both through the steps and compares, step by step:

1. whether the forward raised, and the exception type;
2. the output;
3. the gradient of a fixed random loss with respect to the input and to every parameter;
4. every buffer after the step, and that no buffer carries autograd history.

Float32 results are judged against torch's float64 answer (see :mod:`autograder.numerics`).
The first difference stops the check; a chapter-specific *hint* function turns it into a
sentence about the likely misconception.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable, Iterable

import torch
from torch import nn

from autograder import forbidden
from autograder.messages import fail, shape_str
from autograder.numerics import Discrepancy, discrepancy

# What a comparison may look at, in the order they are compared.
RAISES, OUTPUT, GRAD_INPUT, GRAD_PARAMS, BUFFERS = "raises", "output", "grad_input", "grad_params", "buffers"
FORWARD_ASPECTS = (RAISES, OUTPUT, GRAD_INPUT, GRAD_PARAMS)
ALL_ASPECTS = FORWARD_ASPECTS + (BUFFERS,)


@dataclass
class Step:
    """One forward (and backward, unless ``no_grad``) in ``mode`` 'train' or 'eval'."""

    mode: str
    x: torch.Tensor
    no_grad: bool = False

    def describe(self) -> str:
        kind = "training" if self.mode == "train" else "eval"
        extra = " under torch.no_grad()" if self.no_grad else ""
        return f"{kind} forward on input {shape_str(self.x.shape)}{extra}"


@dataclass
class Case:
    """A layer configuration and the steps to run it through."""

    layer: str  # the torch.nn class name, e.g. "BatchNorm2d"
    args: tuple
    kwargs: dict
    steps: list[Step]
    dtype: torch.dtype = torch.float64
    device: torch.device = torch.device("cpu")
    state: dict[str, torch.Tensor] = field(default_factory=dict)  # initial values by torch's names
    note: str = ""  # what the inputs are designed to expose
    reference: str = ""  # how messages name the reference, when it is not torch.nn.<layer>

    @property
    def reference_name(self) -> str:
        return self.reference or f"torch.nn.{self.layer}"

    def describe(self) -> str:
        arguments = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        text = f"{self.layer}({', '.join(arguments)}) in {str(self.dtype).replace('torch.', '')} on {self.device.type}"
        return text + (f", {self.note}" if self.note else "")

    def build(self, cls: type) -> nn.Module:
        return cls(*self.args, **self.kwargs, device=self.device, dtype=self.dtype)


@dataclass
class StepResult:
    error: BaseException | None = None
    output: torch.Tensor | None = None
    grad_input: torch.Tensor | None = None
    grad_params: dict[str, torch.Tensor | None] = field(default_factory=dict)
    buffers: dict[str, torch.Tensor | None] = field(default_factory=dict)
    buffers_with_history: list[str] = field(default_factory=list)


@dataclass
class Finding:
    """The first difference between the student's layer and torch's, with its context."""

    case: Case
    step_index: int
    aspect: str
    name: str  # e.g. "output", "weight.grad", "running_var"
    student: torch.Tensor | None
    exact: torch.Tensor | None
    discrepancy: Discrepancy | None
    state_before: dict[str, torch.Tensor | None]  # torch's float64 state before the step
    detail: str = ""

    @property
    def step(self) -> Step:
        return self.case.steps[self.step_index]


Hint = Callable[[Finding], "str | None"]

_MISSING = object()


def upstream_gradient(output: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The fixed, non-uniform gradient fed back through every output (rounded to ``dtype``)."""
    g = torch.Generator().manual_seed(1234)
    values = torch.randn(output.shape, generator=g, dtype=torch.float64).to(dtype)
    return values.to(output.device, output.dtype)


def _load_state(layer: nn.Module, state: dict[str, torch.Tensor], dtype: torch.dtype) -> None:
    """Copy the case's initial values (rounded to the case's dtype) into same-named tensors."""
    with torch.no_grad():
        for name, value in state.items():
            target = getattr(layer, name, None)
            if isinstance(target, torch.Tensor) and target.shape == value.shape:
                rounded = value.to(dtype) if value.is_floating_point() else value
                target.copy_(rounded.to(target.device, target.dtype))


def _tensor_names(reference: nn.Module) -> tuple[list[str], list[str]]:
    params = [n for n, _ in reference.named_parameters(recurse=False)]
    buffers = [n for n, _ in reference.named_buffers(recurse=False)]
    return params, buffers


def run_steps(
    layer: nn.Module,
    case: Case,
    param_names: list[str],
    buffer_names: list[str],
    dtype: torch.dtype,
    recorder: forbidden.OpRecorder | None = None,
) -> list[StepResult]:
    """Run ``layer`` through the case's steps and record what it produced."""
    results = []
    for step in case.steps:
        result = StepResult()
        layer.train(step.mode == "train")
        for p in layer.parameters():
            p.grad = None
        # The case's dtype rounds the input; the exact reference computes on the rounded values.
        x = step.x.to(case.dtype).to(case.device, dtype).detach().requires_grad_(not step.no_grad)
        recording = recorder if recorder is not None else contextlib.nullcontext()
        try:
            with recording:
                original = x.detach().clone()
                with torch.no_grad() if step.no_grad else torch.enable_grad():
                    out = layer(x)
                if not isinstance(out, torch.Tensor):
                    raise TypeError(f"forward returned {type(out).__name__}, not a Tensor")
                if not torch.equal(x.detach(), original):
                    raise RuntimeError("forward modified its input in place; torch's layer leaves it unchanged")
                if not step.no_grad and out.requires_grad:
                    (out * upstream_gradient(out, case.dtype)).sum().backward()
        except Exception as error:  # noqa: BLE001 - the student's exception is the observation
            result.error = error
        else:
            result.output = out.detach()
            result.grad_input = None if x.grad is None else x.grad.detach()
            for name in param_names:
                p = getattr(layer, name, None)
                result.grad_params[name] = (
                    p.grad.detach() if isinstance(p, torch.Tensor) and p.grad is not None else None
                )
        for name in buffer_names:
            b = getattr(layer, name, _MISSING)
            if isinstance(b, torch.Tensor):
                if b.requires_grad or b.grad_fn is not None:
                    result.buffers_with_history.append(name)
                b = b.detach().clone()
            result.buffers[name] = b
        results.append(result)
    return results


def _check_factory_kwargs(student: nn.Module, case: Case, what: str) -> None:
    """Floating-point tensors must follow the ``dtype`` and ``device`` the layer was built with."""
    __tracebackhide__ = True
    for name, tensor in list(student.named_parameters(recurse=False)) + list(student.named_buffers(recurse=False)):
        if tensor.is_floating_point() and (tensor.dtype != case.dtype or tensor.device.type != case.device.type):
            fail(
                f"{case.describe()}: your `{name}` is {tensor.dtype} on {tensor.device.type}, although the "
                f"layer was built with dtype={case.dtype} and device='{case.device.type}'. Pass "
                "device= and dtype= on to every tensor you create (torch.ones(..., device=device, dtype=dtype))."
            )


def _state_before(results: list[StepResult], index: int, initial: dict) -> dict:
    return dict(initial) if index == 0 else dict(results[index - 1].buffers)


def compare_case(
    student_cls: type,
    reference_cls: type,
    case: Case,
    aspects: Iterable[str] = ALL_ASPECTS,
    hint: Hint | None = None,
    what: str | None = None,
) -> None:
    """Run one case on the student's class and on torch's; fail at the first difference."""
    __tracebackhide__ = True
    what = what or student_cls.__name__
    aspects = tuple(aspects)
    try:
        student = case.build(student_cls)
    except Exception as error:  # noqa: BLE001
        fail(f"{case.describe()}: building your {what} raised {type(error).__name__}: {error}")
    forbidden.check_no_torch_norm_submodule(student, what)
    _check_factory_kwargs(student, case, what)
    reference = case.build(reference_cls)
    exact_reference = Case(**{**case.__dict__, "dtype": torch.float64}).build(reference_cls)
    for layer in (student, reference, exact_reference):
        _load_state(layer, case.state, case.dtype)
    params, buffers = _tensor_names(reference)
    for name in params:
        if not isinstance(getattr(student, name, None), torch.Tensor) and getattr(reference, name) is not None:
            fail(
                f"{case.describe()}: your {what} has no tensor attribute `{name}`; "
                f"{case.reference_name} calls its learnable parameters `weight` (γ) and `bias` (β)."
            )
    for name in params + buffers:
        mine, theirs = getattr(student, name, None), getattr(reference, name)
        if isinstance(mine, torch.Tensor) and isinstance(theirs, torch.Tensor) and mine.shape != theirs.shape:
            fail(
                f"{case.describe()}: your `{name}` has shape {shape_str(mine.shape)}, "
                f"{case.reference_name}'s has {shape_str(theirs.shape)}."
            )
    initial = {n: (None if getattr(exact_reference, n) is None else getattr(exact_reference, n).detach().clone()) for n in buffers}
    recorder = forbidden.OpRecorder()
    got = run_steps(student, case, params, buffers, case.dtype, recorder)
    forbidden.report_normalization_ops(recorder.normalization_ops(), what)
    expected = run_steps(reference, case, params, buffers, case.dtype)
    exact = run_steps(exact_reference, case, params, buffers, torch.float64)

    for i, (s, r, e) in enumerate(zip(got, expected, exact)):
        finding = _first_difference(case, i, s, r, e, aspects, _state_before(exact, i, initial))
        if finding is not None:
            fail(_phrase(finding, what, hint))


def _first_difference(case, i, s: StepResult, r: StepResult, e: StepResult, aspects, state_before):
    def found(aspect, name, student=None, exact=None, gap=None, detail=""):
        return Finding(case, i, aspect, name, student, exact, gap, state_before, detail)

    if r.error is None and s.error is not None:
        return found(RAISES, "raises", detail=f"yours raised {type(s.error).__name__}: {s.error}")
    if r.error is not None:  # torch refuses this input: only whether and how yours refuses counts
        if RAISES not in aspects:
            return None
        if s.error is None:
            detail = f"torch raises {type(r.error).__name__} ({r.error}) but yours returned a result"
            return found(RAISES, "raises", detail=detail)
        if not isinstance(s.error, type(r.error)):
            detail = (
                f"torch raises {type(r.error).__name__} ({r.error}) but yours raised "
                f"{type(s.error).__name__}: {s.error}"
            )
            return found(RAISES, "raises", detail=detail)
        return None
    pairs = []
    if OUTPUT in aspects:
        pairs.append((OUTPUT, "output", s.output, r.output, e.output))
    if GRAD_INPUT in aspects:
        pairs.append((GRAD_INPUT, "input gradient", s.grad_input, r.grad_input, e.grad_input))
    if GRAD_PARAMS in aspects:
        for name in r.grad_params:
            pairs.append((GRAD_PARAMS, f"{name}.grad", s.grad_params.get(name), r.grad_params[name], e.grad_params[name]))
    if BUFFERS in aspects:
        for name in r.buffers:
            pairs.append((BUFFERS, name, s.buffers.get(name), r.buffers[name], e.buffers[name]))
    for aspect, name, sv, rv, ev in pairs:
        if rv is None and ev is None:
            if isinstance(sv, torch.Tensor) and aspect == BUFFERS:
                return found(aspect, name, sv, None, detail=f"torch's `{name}` is None here but yours is a tensor")
            continue
        if sv is _MISSING or sv is None:
            what = "missing" if sv is _MISSING else "None"
            return found(aspect, name, None, ev, detail=f"yours is {what}")
        if not isinstance(sv, torch.Tensor):
            return found(aspect, name, None, ev, detail=f"yours is a {type(sv).__name__}, not a tensor (register it with register_buffer)")
        if sv.shape != rv.shape:
            return found(aspect, name, sv, ev, detail=f"shape {shape_str(sv.shape)} instead of {shape_str(rv.shape)}")
        if sv.dtype != rv.dtype:
            return found(aspect, name, sv, ev, detail=f"dtype {sv.dtype} instead of {rv.dtype}")
        if sv.device.type != rv.device.type:
            return found(aspect, name, sv, ev, detail=f"on {sv.device} instead of {rv.device}")
        if not sv.is_floating_point():
            if not torch.equal(sv.cpu(), rv.cpu()):
                return found(aspect, name, sv, ev, detail=f"{sv.tolist()} instead of {rv.tolist()}")
            continue
        gap = discrepancy(sv, rv, ev)
        if gap is not None:
            return found(aspect, name, sv, ev, gap)
    if BUFFERS in aspects and s.buffers_with_history:
        name = s.buffers_with_history[0]
        return found(BUFFERS, name, s.buffers.get(name), None, detail="carries autograd history")
    return None


def _phrase(finding: Finding, what: str, hint: Hint | None) -> str:
    step = finding.step
    where = (
        f"{finding.case.describe()}: step {finding.step_index + 1} of {len(finding.case.steps)} "
        f"({step.describe()})"
    )
    if finding.detail:
        body = f"`{finding.name}`: {finding.detail}."
    else:
        gap = finding.discrepancy
        index = "[" + ", ".join(str(i) for i in gap.index) + "]"
        body = (
            f"your {finding.name} differs from {finding.case.reference_name}'s: max error "
            f"{gap.max_error:.3g} at {index} (yours {gap.student_value:.6g}, torch "
            f"{gap.expected_value:.6g}; allowed {gap.allowed:.1g})."
        )
    advice = hint(finding) if hint is not None else None
    return f"{where}, {body}" + (f"\nLikely cause: {advice}" if advice else "")
