"""The comparison engine every chapter uses.

A *case* is one configuration: a layer class's constructor arguments, a dtype, a device, an
initial state and a sequence of *steps* (a training or eval forward on a given input, with or
without autograd).  The engine builds the student's layer and its ``torch.nn`` namesake from the
same arguments and state, runs both through the steps and compares, step by step:

1. whether the forward raised, and the exception type;
2. the output;
3. the gradient of a fixed random loss with respect to the input and to every parameter;
4. every buffer after the step, and that no buffer carries autograd history.

Float32 results are judged against torch's float64 answer (see :mod:`autograder.core.numerics`).
The first difference stops the check; a chapter-specific *hint* function turns it into a
sentence about the likely misconception.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

import torch
from torch import nn

from autograder.core import forbidden
from autograder.core.messages import fail, shape_str
from autograder.core.numerics import Discrepancy, discrepancy
from autograder.sandbox import observe
from autograder.core.side import Student, StudentCodeFailed, student
from autograder.core.wire import RemoteError

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
    extra: tuple = ()  # further forward arguments after x (a padding mask), passed as they are
    extra_note: str = ""  # how messages describe them

    def describe(self) -> str:
        kind = "training" if self.mode == "train" else "eval"
        extra = " under torch.no_grad()" if self.no_grad else ""
        note = f" {self.extra_note}" if self.extra_note else ""
        return f"{kind} forward on input {shape_str(self.x.shape)}{note}{extra}"


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

    @property
    def reference_value(self) -> str:
        """How a sentence names the reference's value: "torch.nn.BatchNorm2d's", or "the reference
        (torch's BatchNorm applied to each virtual batch in turn)" when a phrase names it."""
        name = self.reference_name
        return f"the reference ({name})" if " " in name else f"{name}'s"

    def describe(self) -> str:
        arguments = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        text = f"{self.layer}({', '.join(arguments)}) in {str(self.dtype).replace('torch.', '')} on {self.device.type}"
        return text + (f", {self.note}" if self.note else "")

    def build(self, cls: type) -> nn.Module:
        return cls(*self.args, **self.kwargs, device=self.device, dtype=self.dtype)

    def in_float64(self) -> "Case":
        """The same case computing in float64 (its inputs and state still rounded to this dtype)."""
        return Case(**{**self.__dict__, "dtype": torch.float64})


@dataclass
class StepResult:
    """What one step produced, as plain data (:func:`autograder.sandbox.observe.run_steps`)."""

    error: RemoteError | None = None
    output: torch.Tensor | None = None
    grad_input: torch.Tensor | None = None
    grad_params: dict[str, torch.Tensor | None] = field(default_factory=dict)
    buffers: dict[str, object] = field(default_factory=dict)  # a tensor, None, or {"missing"/"object": ...}
    buffers_with_history: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, report: dict) -> "StepResult":
        return cls(**report)


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


STEP_FIELDS = {"error", "output", "grad_input", "grad_params", "buffers", "buffers_with_history"}


def _tensor_names(reference: nn.Module) -> tuple[list[str], list[str]]:
    """The reference's parameters and buffers by ``state_dict`` name (``q_norm.weight`` for a submodule's)."""
    params = [n for n, _ in reference.named_parameters()]
    buffers = [n for n, _ in reference.named_buffers()]
    return params, buffers


def _plain_steps(case: Case) -> list[dict]:
    return [{"mode": step.mode, "x": step.x, "no_grad": step.no_grad, "extra": tuple(step.extra)} for step in case.steps]


def run_reference(layer: nn.Module, case: Case, params: list[str], buffers: list[str], dtype: torch.dtype,
                  steps: list[dict] | None = None) -> list[StepResult]:
    """Run one of torch's layers (trusted) through the case's steps (or ``steps``, inputs used
    as they are), computing in ``dtype``."""
    observe.load_state(layer, case.state, case.dtype)
    given = steps is not None
    report = observe.run_steps(layer, steps if given else _plain_steps(case), case.dtype, case.device, dtype,
                               params, buffers, round_input=not given)
    return [StepResult.of(r) for r in report["steps"]]


NEARBY_INPUTS = 4  # how many moved copies of the input measure the exact answer's spread


def nearby_steps(case: Case, k: int) -> list[dict]:
    """The case's steps with every input element, rounded to the case's dtype, moved up or down
    by float32's machine epsilon: x·(1 ± 2⁻²³), the signs drawn from seed ``k`` (fixed: the
    spread they measure must be the same at every grading)."""
    signs = torch.Generator().manual_seed(k)
    steps = _plain_steps(case)
    for step in steps:
        floating = step["x"].is_floating_point()
        step["x"] = step["x"].to(case.dtype)
        if floating:
            sign = torch.randint(0, 2, step["x"].shape, generator=signs, dtype=torch.float64) * 2 - 1
            step["x"] = step["x"].to(torch.float64) * (1 + torch.finfo(torch.float32).eps * sign)
    return steps


def run_nearby(reference_cls: type, case: Case, params: list[str], buffers: list[str]) -> list[list[StepResult]]:
    """Torch's float64 answers for :data:`NEARBY_INPUTS` nearby inputs (float32 cases only:
    :mod:`autograder.core.numerics` uses them for float32 results)."""
    if case.dtype != torch.float32:
        return []
    return [run_reference(case.in_float64().build(reference_cls), case, params, buffers, torch.float64,
                          nearby_steps(case, k))
            for k in range(NEARBY_INPUTS)]


def run_student(layer: Student, case: Case, params: list[str], buffers: list[str]) -> tuple[list[StepResult], list[str]]:
    """Load the case's state into the student's layer and run it through the case's steps on its
    side (one request); plain results and the normalization kernels it ran."""
    report = layer.call("observe.run_steps", _plain_steps(case), case.dtype, case.device, case.dtype, params, buffers,
                        record=True, state=case.state)
    steps = report.get("steps") if isinstance(report, dict) else None
    if not isinstance(steps, list) or len(steps) != len(case.steps) or not all(
        isinstance(r, dict) and set(r) == STEP_FIELDS for r in steps
    ):
        raise StudentCodeFailed("it sent a report that does not describe every step (was the grader's side changed?)")
    return [StepResult.of(r) for r in steps], [str(op) for op in report.get("normalization_ops", [])]


def _check_factory_kwargs(layer_tensors: dict, case: Case, what: str) -> None:
    """Floating-point tensors must follow the ``dtype`` and ``device`` the layer was built with."""
    __tracebackhide__ = True
    for name, info in list(layer_tensors["parameters"].items()) + list(layer_tensors["buffers"].items()):
        if info["dtype"].is_floating_point and (info["dtype"] != case.dtype or info["device"] != case.device.type):
            fail(
                f"{case.describe()}: your `{name}` is {info['dtype']} on {info['device']}, although the "
                f"layer was built with dtype={case.dtype} and device='{case.device.type}'. Pass "
                "device= and dtype= on to every tensor you create (torch.ones(..., device=device, dtype=dtype))."
            )


def _state_before(results: list[StepResult], index: int, initial: dict) -> dict:
    return dict(initial) if index == 0 else dict(results[index - 1].buffers)


def build_student(cls: Student, case: Case, what: str, names: list[str] = ()) -> tuple[Student, dict]:
    """The student's layer for ``case``, built on its side, with what ``observe.built`` reports
    about it (submodules, registered tensors, the attributes ``names``); fail if building raised."""
    __tracebackhide__ = True
    report = cls.call("observe.built", tuple(case.args), {**case.kwargs, "device": case.device, "dtype": case.dtype},
                      list(names))
    layer = cls.adopt(report["layer"], what)
    if isinstance(layer, RemoteError):
        fail(f"{case.describe()}: building your {what} raised {layer.name}: {layer}")
    if not isinstance(layer, Student):
        fail(f"{case.describe()}: building your {what} did not give a module.")
    return layer, report


def compare_case(
    student_cls,
    reference_cls: type,
    case: Case,
    aspects: Iterable[str] = ALL_ASPECTS,
    hint: Hint | None = None,
    what: str | None = None,
) -> None:
    """Run one case on the student's class and on torch's; fail at the first difference."""
    __tracebackhide__ = True
    what = what or case.layer
    aspects = tuple(aspects)
    reference = case.build(reference_cls)
    exact_reference = case.in_float64().build(reference_cls)
    params, buffers = _tensor_names(reference)
    layer, report = build_student(student(student_cls, what), case, what, params + buffers)
    forbidden.check_submodules(report["submodules"], what)
    layer_tensors = report["tensors"]
    if not layer_tensors["is_module"]:
        fail(f"{case.describe()}: your {what} is not an nn.Module.")
    _check_factory_kwargs(layer_tensors, case, what)
    found = report["attributes"]
    for name in params:
        if found[name] is None or "shape" not in found[name]:
            if observe.attribute(reference, name) is not None:
                fail(
                    f"{case.describe()}: your {what} has no tensor attribute `{name}`; "
                    f"{case.reference_name} calls its learnable parameters `weight` (γ) and `bias` (β)."
                )
    for name in params + buffers:
        mine, theirs = found[name], observe.attribute(reference, name)
        if mine is not None and "shape" in mine and isinstance(theirs, torch.Tensor) and tuple(mine["shape"]) != tuple(theirs.shape):
            fail(
                f"{case.describe()}: your `{name}` has shape {shape_str(mine['shape'])}; "
                f"in the reference ({case.reference_name}) it has {shape_str(theirs.shape)}."
            )
    observe.load_state(exact_reference, case.state, case.dtype)
    initial = {n: (None if observe.attribute(exact_reference, n) is None
                   else observe.attribute(exact_reference, n).detach().clone()) for n in buffers}
    got, ops = run_student(layer, case, params, buffers)
    forbidden.report_normalization_ops(ops, what)
    expected = run_reference(reference, case, params, buffers, case.dtype)
    exact = run_reference(exact_reference, case, params, buffers, torch.float64)
    nearby = run_nearby(reference_cls, case, params, buffers)

    for i, (s, r, e) in enumerate(zip(got, expected, exact)):
        near = [run[i] for run in nearby]
        finding = _first_difference(case, i, s, r, e, aspects, _state_before(exact, i, initial), near)
        if finding is not None:
            fail(_phrase(finding, what, hint))


def _first_difference(case, i, s: StepResult, r: StepResult, e: StepResult, aspects, state_before,
                      near: list[StepResult] = ()):
    def found(aspect, name, student=None, exact=None, gap=None, detail=""):
        return Finding(case, i, aspect, name, student, exact, gap, state_before, detail)

    if r.error is None and s.error is not None:
        return found(RAISES, "raises", detail=f"yours raised {s.error.name}: {s.error}")
    if r.error is not None:  # torch refuses this input: only whether and how yours refuses counts
        if RAISES not in aspects:
            return None
        if s.error is None:
            detail = f"torch raises {r.error.name} ({r.error}) but yours returned a result"
            return found(RAISES, "raises", detail=detail)
        if r.error.name not in s.error.names:
            detail = (
                f"torch raises {r.error.name} ({r.error}) but yours raised "
                f"{s.error.name}: {s.error}"
            )
            return found(RAISES, "raises", detail=detail)
        return None
    pairs = []
    if OUTPUT in aspects:
        pairs.append((OUTPUT, "output", s.output, r.output, e.output, [n.output for n in near]))
    if GRAD_INPUT in aspects:
        pairs.append((GRAD_INPUT, "input gradient", s.grad_input, r.grad_input, e.grad_input,
                      [n.grad_input for n in near]))
    if GRAD_PARAMS in aspects:
        for name in r.grad_params:
            pairs.append((GRAD_PARAMS, f"{name}.grad", s.grad_params.get(name), r.grad_params[name],
                          e.grad_params[name], [n.grad_params.get(name) for n in near]))
    if BUFFERS in aspects:
        for name in r.buffers:
            pairs.append((BUFFERS, name, s.buffers.get(name), r.buffers[name], e.buffers[name],
                          [n.buffers.get(name) for n in near]))
    for aspect, name, sv, rv, ev, nv in pairs:
        if rv is None and ev is None:
            if isinstance(sv, torch.Tensor) and aspect == BUFFERS:
                return found(aspect, name, sv, None, detail=f"torch's `{name}` is None here but yours is a tensor")
            continue
        if sv is None or (isinstance(sv, dict) and sv.get("missing")):
            what = "None" if sv is None else "missing"
            return found(aspect, name, None, ev, detail=f"yours is {what}")
        if not isinstance(sv, torch.Tensor):
            kind = sv.get("object", "?") if isinstance(sv, dict) else type(sv).__name__
            return found(aspect, name, None, ev, detail=f"yours is a {kind}, not a tensor (register it with register_buffer)")
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
        gap = discrepancy(sv, rv, ev, [v for v in nv if isinstance(v, torch.Tensor)])
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
            f"your {finding.name} differs from the reference ({finding.case.reference_name}): max error "
            f"{gap.max_error:.3g} at {index} (yours {gap.shown[0]}, torch "
            f"{gap.shown[1]}; allowed {gap.allowed:.1g})."
        )
    advice = hint(finding) if hint is not None else None
    return f"{where}, {body}" + (f"\nLikely cause: {advice}" if advice else "")
