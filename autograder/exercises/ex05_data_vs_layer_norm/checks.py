"""Checks for the exercise ``05_data_vs_layer_norm``: ``Standardizer`` and ``as_batch_norm``.

Each public function is one graded part; ``full=False`` runs the visible cases a visible test
cell uses (on the notebook's device), ``full=True`` adds the hidden cases of
:mod:`autograder.exercises.ex05_data_vs_layer_norm.hidden`, which only the grader holds (and runs
them on every available device).

The reference is scikit-learn's ``StandardScaler``: computed with torch in float64 in the grader
(:mod:`autograder.exercises.ex05_data_vs_layer_norm.hidden_reference`, the solution, which only the
grader holds), scikit-learn itself in the student's install
(:mod:`autograder.exercises.ex05_data_vs_layer_norm.reference`). The likely misconception a failure
names comes from :mod:`autograder.exercises.ex05_data_vs_layer_norm.hints`, and for ``transform``
and ``inverse_transform`` from ``hidden_reference``; where that is missing, such a message points
to the chapter instead.

Parts 2 and 3 judge ``transform`` and ``inverse_transform`` against the student's own fitted
statistics, and Part 4 gives ``as_batch_norm`` a standardizer fitted by the reference, so a
mistake in ``fit`` costs Part 1 (and the image statistics of Part 3), not every part.

The student's code runs on the student's side only: :mod:`autograder.exercises.ex05_data_vs_layer_norm.observe`
constructs the standardizer, calls its methods and ``as_batch_norm`` there, and reports as plain
data what they returned, whether they took the data out of torch, changed an input in place or
left the layer's tensors sharing memory with the standardizer's.  The checks here compare those
reports with the reference.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from autograder.core import withheld, integrity
from autograder.exercises.ex05_data_vs_layer_norm import reference
from autograder.exercises.ex05_data_vs_layer_norm.hints import attribute_hint, batch_norm_hint, broadcast_hint, constant_hint, shape_hint, statistic_hint
from autograder.core.devices import devices_for
from autograder.core.inputs import channel_input
from autograder.core.messages import fail, shape_str
from autograder.core.numerics import FLOAT64_RTOL, LOW_PRECISION_FLOOR, Discrepancy, discrepancy
from autograder.core.side import Student, student
from autograder.exercises.ex05_data_vs_layer_norm.reference import F64, f64
from autograder.core.wire import RemoteError

F32 = torch.float32
STATISTICS = ("mean_", "var_", "scale_")
STATISTIC_RTOL = 1e-4  # float32 statistics: see _statistic_gap
LAYER_TENSORS = ("running_mean", "running_var", "weight", "bias")


# --- the reference ----------------------------------------------------------------------------

BOOK = ("\nCompare your code with the standardization formulas in chapter 5, book/05_data_vs_layer_norm.md, "
        "section 'Data normalization: outside the model' (the hints that name the likely mistake in transform "
        "and inverse_transform run when your instructor grades).")


def _reference():
    """The grader's reference (:mod:`autograder.exercises.ex05_data_vs_layer_norm.hidden_reference`),
    or, in the student's install, scikit-learn's (:mod:`autograder.exercises.ex05_data_vs_layer_norm.reference`)."""
    return reference.grader_only() or reference


def _advice(hint: str, *args) -> str:
    """The line a wrong ``transform`` / ``inverse_transform`` message ends with: the grader's hint
    ``hint`` (it holds both formulas), or the pointer to the chapter where it is missing."""
    grader = reference.grader_only()
    return BOOK if grader is None else f"\nLikely cause: {getattr(grader, hint)(*args)}"


@dataclass(frozen=True)
class Fitted:
    """The grader's copy of the standardizer Part 4 gives ``as_batch_norm``: the reference's
    statistics of the training data in its dtype and on its device."""

    mean_: torch.Tensor
    var_: torch.Tensor
    scale_: torch.Tensor
    ndim_: int

    @classmethod
    def of(cls, x: torch.Tensor) -> "Fitted":
        exact = _reference().exact_statistics(x)
        return cls(*(t.to(x.dtype).to(x.device) for t in (exact.mean, exact.var, exact.scale)), x.dim())


# --- data --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Data:
    """One configuration: training data, new data from a shifted distribution, codes to invert."""

    shape: tuple[int, ...]
    dtype: torch.dtype = F64
    mean: float = 0.0
    std: float = 1.0
    seed: int = 0
    constant: tuple[tuple[int, float], ...] = ()  # (feature, value): equal in every training sample
    new_n: int = 0  # batch size of the new data (default: 3 more than the training data)
    note: str = ""

    def train(self, device) -> torch.Tensor:
        x = channel_input(self.shape, seed=self.seed, mean=self.mean, std=self.std)
        for j, value in self.constant:
            x[:, j] = value
        return x.to(self.dtype).to(device)

    def new(self, device) -> torch.Tensor:
        """Data the statistics were not fitted on: another seed, mean and spread."""
        shape = (self.new_n or self.shape[0] + 3,) + tuple(self.shape[1:])
        x = channel_input(shape, seed=self.seed + 500, mean=self.mean + 2 * self.std, std=1.5 * self.std)
        for j, value in self.constant:
            x[:, j] = value
            x[0, j] = value + self.std  # where training never varied, new data may
        return x.to(self.dtype).to(device)

    def codes(self, device) -> torch.Tensor:
        """Standardized values to map back with ``inverse_transform``."""
        shape = (self.shape[0] + 1,) + tuple(self.shape[1:])
        return channel_input(shape, seed=self.seed + 700, mean=-0.5, std=0.8).to(self.dtype).to(device)

    def describe(self, device) -> str:
        text = f"{str(self.dtype).replace('torch.', '')} data of shape {shape_str(self.shape)} on {torch.device(device).type}"
        details = []
        if self.mean:
            details.append(f"mean {self.mean:g}")
        if self.std != 1.0:
            details.append(f"std {self.std:g}")
        if self.note:
            details.append(self.note)
        return text + (f" ({', '.join(details)})" if details else "")


def _scale(t: torch.Tensor) -> float:
    finite = t[torch.isfinite(t)]
    return max(1.0, float(finite.abs().max())) if finite.numel() else 1.0


def _close(got: torch.Tensor, expected: torch.Tensor, exact: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether two results of the student's agree as closely as a correct ``dtype`` result must
    agree with the reference: 1e-9 (float64) or 1e-5 (float32) of the scale of ``exact``."""
    g, e = f64(got), f64(expected)
    if g.shape != e.shape or not torch.equal(torch.isfinite(g), torch.isfinite(e)):
        return False
    scale = _scale(f64(exact))
    if dtype == F64:
        allowed = FLOAT64_RTOL * scale
    else:
        allowed = LOW_PRECISION_FLOOR.get(dtype, 1e-5) * scale
    finite = torch.isfinite(g)
    return bool(((g - e).abs()[finite] <= allowed).all())


# --- the student's side ------------------------------------------------------------------------

def _outcome(what: str, report: dict, hint=None) -> dict:
    """A call's report (:mod:`autograder.exercises.ex05_data_vs_layer_norm.observe`), failing with a sentence when the
    call raised or took the data out of torch."""
    __tracebackhide__ = True
    if report["conversions"]:
        used = ", ".join(f".{name}()" if name in ("numpy", "tolist") else name for name in sorted(report["conversions"]))
        fail(
            f"{what} took the data out of torch ({used}: numpy, scikit-learn or Python lists). "
            "The exercise is to compute with torch tensor operations, on the data's device and in "
            "its dtype (numpy cannot see a GPU). This part earns no points."
        )
    error = report["error"]
    if error is not None:
        advice = hint(error) if hint is not None else None
        fail(f"{what} raised {error.name}: {error}" + (f"\nLikely cause: {advice}" if advice else ""))
    return report


def _method(s: Student, what: str, name: str, x: torch.Tensor, hint=None, hold: bool = False) -> dict:
    """``s.<name>(x)`` on the student's side (``x`` crosses as a copy): its report, after
    :func:`_outcome`."""
    __tracebackhide__ = True
    return _outcome(what, s.call("observe_data.method", name, x, hold=hold), hint)


def _construct(Standardizer: Student, where: str) -> Student:
    __tracebackhide__ = True
    made = Standardizer.construct()
    if isinstance(made, RemoteError):
        fail(f"{where}: Standardizer() raised {made.name}: {made}")
    if not isinstance(made, Student):
        fail(f"{where}: Standardizer() returned {type(made).__name__}, not a standardizer.")
    return made


def _fit(Standardizer: Student, x: torch.Tensor, where: str, check_input: bool = True) -> tuple[Student, Student]:
    """A new standardizer fitted on ``x``, and the tensor its fit received (kept on the student's
    side); fit must return the standardizer (and leave ``x`` unchanged: checked in Part 1 only)."""
    __tracebackhide__ = True
    s = _construct(Standardizer, where)
    report = _method(s, f"{where}: fit(x)", "fit", x, hold=True)
    if not report["returned_self"]:
        fail(
            f"{where}: fit(x) returned {report['value']['type']}, not the standardizer itself. "
            "End fit with `return self`, so that Standardizer().fit(x).transform(y) works."
        )
    if check_input:
        _check_unchanged(report, f"{where}: fit(x)")
    return s, s.adopt(report["held"][0], "the training tensor")


def _check_unchanged(report: dict, what: str) -> None:
    """Fail when the call of ``report`` changed its (first) input in place."""
    __tracebackhide__ = True
    if report["inputs_changed"][0]:
        fail(
            f"{what} changed its input in place. The caller's data must stay as it was: compute "
            "`x - mean` into a new tensor instead of `x -= mean`, `x.sub_(...)` or `x[...] = ...` "
            "(careful: x.to(torch.float64) returns x itself when x is already float64)."
        )


def _same(now, before: torch.Tensor) -> bool:
    """Whether a statistic read again is still ``before``."""
    return isinstance(now, torch.Tensor) and now.shape == before.shape and torch.equal(now.cpu(), before.cpu())


def _attribute(reported: dict, name: str, where: str) -> dict:
    """One fitted attribute as :func:`autograder.exercises.ex05_data_vs_layer_norm.observe.fitted` described it; fail
    unless it is a tensor."""
    __tracebackhide__ = True
    value = reported[name]
    if "error" in value:
        fail(f"{where}: reading `{name}` raised {value['error'].name}: {value['error']}")
    if value.get("missing"):
        fail(
            f"{where}: after fit the standardizer has no attribute `{name}`. fit stores `mean_`, "
            "`var_` and `scale_`, one value per feature (as scikit-learn's StandardScaler), and `ndim_`."
        )
    if "shape" not in value:
        extra = " Compute the statistics with torch on the data's device, not with numpy." if value["module"] == "numpy" else ""
        fail(f"{where}: `{name}` is a {value['type']}; store a torch tensor.{extra}")
    return value


def _fitted(s: Student, x: torch.Tensor, where: str) -> dict[str, torch.Tensor]:
    """The fitted statistics, checked for type, shape, dtype and device (and ``ndim_``)."""
    __tracebackhide__ = True
    reported = s.call("observe_data.fitted")
    found = {}
    for name in STATISTICS:
        value = _attribute(reported, name, where)
        shape, expected = tuple(value["shape"]), (x.shape[1],)
        if shape != expected:
            fail(
                f"{where}: `{name}` has shape {shape_str(shape)}, expected {shape_str(expected)}: "
                f"one value per {'feature' if x.dim() == 2 else 'channel'}.\nLikely cause: {shape_hint(shape, x)}"
            )
        if value["dtype"] != str(x.dtype) or value["device"] != str(x.device):
            fail(
                f"{where}: `{name}` is {value['dtype']} on {value['device']}, the data {x.dtype} on {x.device}. "
                "Keep the statistics in the data's dtype and on its device (compute in float64 if you like, "
                "then convert back), so that transform returns the data's dtype."
            )
        found[name] = value["tensor"]
    ndim = reported["ndim_"]
    if "error" in ndim:
        fail(f"{where}: reading `ndim_` raised {ndim['error'].name}: {ndim['error']}")
    if ndim.get("int") != x.dim():
        shown = "missing" if ndim.get("missing") else ndim.get("repr", f"a {ndim.get('type')}")
        fail(
            f"{where}: `ndim_` is {shown}, expected {x.dim()}: fit also stores the number of dimensions of "
            "the training data as a Python int (as_batch_norm chooses BatchNorm1d or BatchNorm2d with it)."
        )
    return found


def _report(what: str, gap: Discrepancy, expected: str, advice: str | None) -> str:
    index = "[" + ", ".join(str(i) for i in gap.index) + "]"
    if math.isinf(gap.max_error):
        body = f"{what} is {gap.shown[0]} at {index}, where {expected} is {gap.shown[1]}."
    else:
        body = (
            f"{what} is off by up to {gap.max_error:.3g} at {index} (yours {gap.shown[0]}, "
            f"{expected} {gap.shown[1]}; allowed {gap.allowed:.1g})."
        )
    return body + (f"\nLikely cause: {advice}" if advice else "")


# --- Part 1: statistics ------------------------------------------------------------------------


def _fit_data(full: bool) -> list[Data]:
    visible = [
        Data((12, 5), F64, mean=2.0, std=1e-2, seed=1),
        Data((12, 5), F32, mean=-3.0, std=2.0, seed=2),
        Data((3, 4), F64, seed=3, note="N = 3"),
        Data((64, 4), F32, mean=1e3, seed=6),
    ]
    return visible + (withheld.of(__package__).fit_data() if full else [])


def _statistic_gap(value: torch.Tensor, same: torch.Tensor, exact: torch.Tensor) -> Discrepancy | None:
    """:func:`numerics.discrepancy`, plus, below float64, a relative allowance per statistic.

    torch's own float32 statistics are accumulated in float64, so "a multiple of torch's error"
    would demand more than float32 arithmetic gives: a sample-by-sample float32 Welford update is
    1.4e-5 (relative) off at mean 1e3. ``STATISTIC_RTOL`` accepts that and still fails the
    one-pass E[x²] − E[x]² formula (4e-2 off there) by a factor of 400.
    """
    gap = discrepancy(value, same, exact)
    if gap is None or value.dtype == F64 or math.isinf(gap.max_error):
        return gap
    v, e = f64(value), f64(exact)
    if bool(((v - e).abs() <= STATISTIC_RTOL * e.abs()).all()):
        return None
    return gap


def _check_statistics(s: Student, x: torch.Tensor, where: str) -> dict[str, torch.Tensor]:
    """mean_, var_, scale_ and ndim_ against the reference; returns (copies of) the statistics."""
    __tracebackhide__ = True
    found = _fitted(s, x, where)
    exact, same = _reference().exact_statistics(x), _reference().statistics(x)
    for name, value in found.items():
        gap = _statistic_gap(value, same.get(name), exact.get(name))
        if gap is not None:
            fail(_report(f"{where}: `{name}`", gap, "StandardScaler's", statistic_hint(name, value, x, exact, _reference().exact_statistics)))
    return found


def _check_not_kept(s: Student, received: Student, kept: dict[str, torch.Tensor], where: str) -> None:
    """Changing the training tensor after fit (where fit received it) must not change the statistics."""
    __tracebackhide__ = True
    received.call("observe_data.change_in_place")
    reported = s.call("observe_data.fitted")
    for name, before in kept.items():
        now = _attribute(reported, name, where).get("tensor")
        if not _same(now, before):
            fail(
                f"{where}: after fit, changing the training tensor in place (x.mul_(-2).add_(7)) changed "
                f"`{name}`. fit must compute the statistics and store them as new tensors, not keep "
                "(a view of) the data and compute from it later."
            )


def check_fit(Standardizer, full: bool = False) -> None:
    """``Standardizer().fit(x)`` on (N, D) data: ``mean_``, ``var_``, ``scale_`` as StandardScaler's."""
    __tracebackhide__ = True
    integrity.check_untampered()
    Standardizer = student(Standardizer, "Standardizer")
    for device in devices_for(full):
        for i, data in enumerate(_fit_data(full)):
            x = data.train(device)
            where = f"Standardizer().fit(x) on {data.describe(device)}"
            s, received = _fit(Standardizer, x, where)
            kept = _check_statistics(s, x, where)
            _check_not_kept(s, received, kept, where)
            if i == 0:  # a second fit replaces the statistics (StandardScaler.fit; partial_fit would combine)
                other = Data((7, 5), data.dtype, mean=-4.0, std=3.0, seed=data.seed + 900).train(device)
                again = f"{where}, then fit(x2) on another tensor x2 of shape {shape_str(other.shape)}"
                report = _method(s, f"{again}: fit(x2)", "fit", other)
                if not report["returned_self"]:
                    fail(f"{again}: fit returned {report['value']['type']}, not the standardizer itself (`return self`).")
                found = _fitted(s, other, again)
                exact, same = _reference().exact_statistics(other), _reference().statistics(other)
                if any(_statistic_gap(found[n], same.get(n), exact.get(n)) is not None for n in STATISTICS):
                    fail(
                        f"{again}: the statistics are not those of x2. A new fit replaces the old statistics "
                        "(as StandardScaler.fit does); it must not combine them with those of the first fit."
                    )


# --- Part 2: transform, inverse_transform, fit_transform, constant features ---------------------

def _transform_data(full: bool) -> list[Data]:
    visible = [
        Data((10, 4), F64, mean=1.0, std=0.5, seed=11),
        Data((7, 5), F64, seed=12, constant=((1, 0.0), (3, 0.1)), note="features 1 and 3 constant, 0 and 0.1"),
        Data((10, 4), F32, mean=3.0, std=2.0, seed=13),
    ]
    return visible + (withheld.of(__package__).transform_data() if full else [])


def _check_output(value: dict, like: torch.Tensor, what: str) -> torch.Tensor:
    """The returned tensor (as described on the student's side), checked for type, shape, dtype
    and device against ``like``."""
    __tracebackhide__ = True
    if "shape" not in value:
        kind = "a numpy array" if value["module"] == "numpy" else f"a {value['type']}"
        fail(f"{what} returned {kind}; return a torch tensor of the input's shape, dtype and device.")
    if tuple(value["shape"]) != tuple(like.shape):
        fail(f"{what} returned shape {shape_str(value['shape'])}, expected {shape_str(like.shape)} (the input's).")
    if value["dtype"] != str(like.dtype) or value["device"] != str(like.device):
        fail(
            f"{what} returned {value['dtype']} on {value['device']} for {like.dtype} input on {like.device}: keep the "
            "input's dtype and device (statistics in another dtype promote the result)."
        )
    return value["tensor"]


def _check_same_statistics(s: Student, kept: dict[str, torch.Tensor], what: str) -> None:
    __tracebackhide__ = True
    reported = s.call("observe_data.fitted")
    for name, before in kept.items():
        if not _same(reported[name].get("tensor"), before):
            fail(
                f"{what} changed `{name}`: it fitted again, on the data it transforms. Only fit computes "
                "statistics; transform reuses those of the training data (statistics of validation or "
                "test data leak them into the model)."
            )


def _check_transform(s: Student, x: torch.Tensor, kept: dict[str, torch.Tensor], where: str, call: str) -> None:
    """``s.transform(x)`` against (x − mean_) / scale_ with the fitted statistics ``kept``."""
    __tracebackhide__ = True
    what = f"{where}: {call}"
    report = _method(s, what, "transform", x, hint=broadcast_hint(x))
    out = _check_output(report["value"], x, what)
    _check_unchanged(report, what)
    _check_same_statistics(s, kept, what)
    m, v, sc = (f64(kept[n]) for n in STATISTICS)
    exact = _reference().standardized(f64(x), m, sc)
    gap = discrepancy(out, _reference().standardized(x, kept["mean_"], kept["scale_"]), exact)
    if gap is not None:
        fail(_report(what, gap, "(x − mean_) / scale_ with your fitted statistics", None) + _advice("transform_hint", out, x, m, v, sc, exact))


def _check_inverse(s: Student, z: torch.Tensor, kept: dict[str, torch.Tensor], where: str) -> None:
    __tracebackhide__ = True
    what = f"{where}: inverse_transform(z) for z of shape {shape_str(z.shape)}"
    report = _method(s, what, "inverse_transform", z, hint=broadcast_hint(z))
    out = _check_output(report["value"], z, what)
    _check_unchanged(report, what)
    _check_same_statistics(s, kept, what)
    m, v, sc = (f64(kept[n]) for n in STATISTICS)
    exact = _reference().inverse(f64(z), m, sc)
    gap = discrepancy(out, _reference().inverse(z, kept["mean_"], kept["scale_"]), exact)
    if gap is not None:
        fail(_report(what, gap, "z · scale_ + mean_", None) + _advice("inverse_hint", out, z, m, v, sc, exact))


def _check_constant_features(s: Student, x: torch.Tensor, data: Data, where: str) -> None:
    __tracebackhide__ = True
    found = _fitted(s, x, where)
    exact = _reference().exact_statistics(x)
    scale, var = f64(found["scale_"]), f64(found["var_"])
    tol = 1e-9 if x.dtype == F64 else 1e-5
    for j, value in data.constant:
        if not abs(float(scale[j]) - 1.0) <= tol:
            hint = constant_hint(float(scale[j]), float(var[j]), j, value)
            fail(f"{where}: `scale_[{j}]` is {float(scale[j]):.6g}, expected 1.\nLikely cause: {hint}")
        if not abs(float(var[j]) - float(exact.var[j])) <= tol * max(1.0, abs(value)):
            fail(
                f"{where}: `var_[{j}]` is {float(var[j]):.6g} for a feature whose training values are all "
                f"{value:g}, expected 0. var_ stays the variance; only scale_ becomes 1 there."
            )


def check_transform(Standardizer, full: bool = False) -> None:
    """``transform``, ``inverse_transform`` and ``fit_transform`` with the fitted statistics, and
    constant features (scale 1, no NaN)."""
    __tracebackhide__ = True
    integrity.check_untampered()
    Standardizer = student(Standardizer, "Standardizer")
    for device in devices_for(full):
        for data in _transform_data(full):
            x, new, z = data.train(device), data.new(device), data.codes(device)
            where = f"Standardizer().fit(x) on {data.describe(device)}"
            s, _ = _fit(Standardizer, x, where, check_input=False)
            if data.constant:
                _check_constant_features(s, x, data, where)
            kept = _fitted(s, x, where)
            _check_transform(s, new, kept, where, f"transform(x_new) for new data x_new of shape {shape_str(new.shape)}")
            _check_transform(s, x, kept, where, "transform(x)")
            _check_inverse(s, z, kept, where)
            _check_fit_transform(Standardizer, x, kept, data, device)


def _fit_changes_input(Standardizer: Student, x: torch.Tensor) -> bool:
    probe = Standardizer.construct()
    if not isinstance(probe, Student):
        return False
    report = probe.call("observe_data.method", "fit", x)
    return report["error"] is None and bool(report["inputs_changed"][0])


def _check_fit_transform(Standardizer: Student, x: torch.Tensor, kept: dict[str, torch.Tensor], data: Data, device) -> None:
    __tracebackhide__ = True
    where = f"Standardizer().fit_transform(x) on {data.describe(device)}"
    if _fit_changes_input(Standardizer, x):
        return  # then fit_transform cannot be right either; Part 1 says why
    t = _construct(Standardizer, where)
    report = _method(t, where, "fit_transform", x)
    _check_unchanged(report, where)
    if report["returned_self"]:
        fail(f"{where} returned the standardizer; fit_transform returns the transformed data, fit(x).transform(x).")
    out = _check_output(report["value"], x, where)
    found = _fitted(t, x, where)
    exact = _reference().exact_statistics(x)
    for name in STATISTICS:
        if not _close(found[name], kept[name], exact.get(name), x.dtype):
            fail(
                f"{where}: `{name}` differs from what fit(x) stores. fit_transform(x) is fit(x) followed "
                "by transform(x): it leaves the same statistics."
            )
    m, sc = f64(found["mean_"]), f64(found["scale_"])
    expected = _reference().standardized(f64(x), m, sc)
    gap = discrepancy(out, _reference().standardized(x, found["mean_"], found["scale_"]), expected)
    if gap is not None:
        fail(_report(where, gap, "(x − mean_) / scale_", None) + _advice("transform_hint", out, x, m, f64(found["var_"]), sc, expected))


# --- Part 3: images, one statistic per channel ---------------------------------------------------

def _image_data(full: bool) -> list[Data]:
    visible = [
        Data((4, 3, 5, 6), F64, mean=1.0, std=2.0, seed=21, note="H ≠ W ≠ C"),
        Data((4, 3, 5, 6), F32, seed=22),
    ]
    return visible + (withheld.of(__package__).image_data() if full else [])


def _as_features(x: torch.Tensor) -> torch.Tensor:
    """(N, C, H, W) -> (N·H·W, C): every pixel a sample, every channel a feature."""
    return x.movedim(1, -1).reshape(-1, x.shape[1])


def _check_image_statistics(Standardizer: Student, s: Student, x: torch.Tensor, where: str) -> dict[str, torch.Tensor]:
    """Per-channel statistics: StandardScaler's on (N·H·W, C), or whatever the student's own fit
    gives on that (N·H·W, C) view (a formula mistake is Part 1's, not the axes')."""
    __tracebackhide__ = True
    found = _fitted(s, x, where)
    exact, same = _reference().exact_statistics(x), _reference().statistics(x)
    own = own64 = None
    for name, value in found.items():
        gap = _statistic_gap(value, same.get(name), exact.get(name))
        if gap is None:
            continue
        if own is None:
            own = _own_feature_statistics(Standardizer, x)
        if name in own and _close(value, own[name], exact.get(name), x.dtype):
            if own64 is None:
                own64 = _own_feature_statistics(Standardizer, x.to(F64))
            if _a_formula_mistake(own[name], own64.get(name), exact.get(name)):
                continue
        fail(_report(f"{where}: `{name}`", gap, "StandardScaler's on the (N·H·W, C) view", statistic_hint(name, value, x, exact, _reference().exact_statistics)))
    return found


def _a_formula_mistake(own: torch.Tensor, own64: torch.Tensor | None, exact: torch.Tensor) -> bool:
    """Whether the student's own (N·H·W, C) statistic ``own`` is off the same way in float64
    (``own64``, their fit of the view in float64), that is, closer to it than it is to the
    exact value: a formula mistake (n − 1, ε inside the root), which Part 1 grades.  An
    unstable formula is right in float64 and off in float32 by rounding, which differs between
    the two layouts of the images: whether the two happened to agree must not decide Part 3.
    (True also where the class cannot fit float64 data: then the float32 agreement decides.)"""
    if own64 is None or own64.shape != own.shape:
        return True
    formula_error = float((f64(own64) - f64(exact)).abs().max())
    rounding = float((f64(own) - f64(own64)).abs().max())
    return rounding <= 0.5 * formula_error


def _fitted_on_features(Standardizer: Student, x: torch.Tensor) -> Student | None:
    """A new standardizer of the student's fitted on the (N·H·W, C) view of ``x`` (None if that fails)."""
    s = Standardizer.construct()
    if not isinstance(s, Student):
        return None
    report = s.call("observe_data.method", "fit", _as_features(x).contiguous())
    return s if report["error"] is None else None


def _own_feature_statistics(Standardizer: Student, x: torch.Tensor) -> dict[str, torch.Tensor]:
    s = _fitted_on_features(Standardizer, x)
    if s is None:
        return {}  # then only the reference counts
    reported = s.call("observe_data.fitted")
    return {n: reported[n]["tensor"] for n in STATISTICS if "tensor" in reported[n]}


def _own_feature_output(Standardizer: Student, x: torch.Tensor, data: torch.Tensor, method: str) -> torch.Tensor | None:
    """What the student's class gives on the (N·H·W, C) views, as images again (None if it fails)."""
    s = _fitted_on_features(Standardizer, x)
    if s is None:
        return None  # then only the formula counts
    report = s.call("observe_data.method", method, _as_features(data).contiguous())
    out = report["value"].get("tensor") if report["error"] is None else None
    n, c, *spatial = data.shape
    if out is None or out.numel() != data.numel():
        return None
    return out.reshape([n] + spatial + [c]).movedim(-1, 1)


def _check_image_output(Standardizer: Student, s: Student, x: torch.Tensor, data: torch.Tensor,
                        kept: dict[str, torch.Tensor], where: str, method: str) -> None:
    """``transform`` / ``inverse_transform`` on images: the formula with the fitted per-channel
    statistics, or what the student's class gives on the (N·H·W, C) view (a formula mistake is
    Part 2's; in-place changes and refitting are Part 2's too)."""
    __tracebackhide__ = True
    call = "transform(x_new) for new images" if method == "transform" else "inverse_transform(z) for z"
    what = f"{where}: {call} of shape {shape_str(data.shape)}"
    out = _check_output(_method(s, what, method, data, hint=broadcast_hint(data))["value"], data, what)
    m, v, sc = (f64(kept[n]) for n in STATISTICS)
    formula = _reference().standardized if method == "transform" else _reference().inverse
    exact = formula(f64(data), m, sc)
    gap = discrepancy(out, formula(data, kept["mean_"], kept["scale_"]), exact)
    if gap is None:
        return
    own = _own_feature_output(Standardizer, x, data, method)
    if own is not None and _close(out, own, exact, data.dtype):
        return
    if method == "transform":
        fail(_report(what, gap, "(x − mean_) / scale_ with your fitted statistics", None) + _advice("transform_hint", out, data, m, v, sc, exact))
    fail(_report(what, gap, "z · scale_ + mean_", None) + _advice("inverse_hint", out, data, m, v, sc, exact))


def check_images(Standardizer, full: bool = False) -> None:
    """(N, C, H, W) data: one statistic per channel, over the batch and both spatial axes."""
    __tracebackhide__ = True
    integrity.check_untampered()
    Standardizer = student(Standardizer, "Standardizer")
    for device in devices_for(full):
        for data in _image_data(full):
            x, new, z = data.train(device), data.new(device), data.codes(device)
            where = f"Standardizer().fit(x) on images: {data.describe(device)}"
            s, _ = _fit(Standardizer, x, where, check_input=False)
            kept = _check_image_statistics(Standardizer, s, x, where)
            _check_image_output(Standardizer, s, x, new, kept, where, "transform")
            s, _ = _fit(Standardizer, x, where, check_input=False)  # as fitted, whatever transform did
            _check_image_output(Standardizer, s, x, z, kept, where, "inverse_transform")


# --- Part 4: the standardizer as a frozen BatchNorm ------------------------------------------------

def _batch_norm_data(full: bool) -> list[Data]:
    visible = [
        Data((10, 4), F64, mean=1.0, std=1e-2, seed=31, constant=((2, 0.0),), note="feature 2 constant"),
        Data((3, 3, 4, 5), F32, mean=2.0, std=0.05, seed=32),
    ]
    return visible + (withheld.of(__package__).batch_norm_data() if full else [])


def check_as_batch_norm(as_batch_norm, full: bool = False) -> None:
    """``as_batch_norm(standardizer)``: a ``torch.nn.BatchNorm1d``/``2d`` in eval mode whose output
    is the standardizer's transform."""
    __tracebackhide__ = True
    integrity.check_untampered()
    as_batch_norm = student(as_batch_norm, "as_batch_norm")
    for device in devices_for(full):
        for data in _batch_norm_data(full):
            x, new = data.train(device), data.new(device)
            fitted = Fitted.of(x)  # the grader's; the student's side gets a copy built from its tensors
            where = f"as_batch_norm(standardizer) for a standardizer fitted on {data.describe(device)}"
            report = _outcome(where, as_batch_norm.call("observe_data.as_batch_norm", fitted.mean_, fitted.var_,
                                                        fitted.scale_, fitted.ndim_), hint=attribute_hint)
            given = as_batch_norm.adopt(report["fitted"], "the standardizer")
            bn, layer = _check_batch_norm_module(as_batch_norm.adopt(report["module"], "the layer"), report["value"],
                                                 given, x, where)
            now = given.call("observe_data.fitted")
            for name in STATISTICS:
                if not _same(now[name].get("tensor"), getattr(fitted, name)):
                    fail(f"{where}: as_batch_norm changed the standardizer's `{name}` (in place); leave it as it was.")
            value = _outcome(f"{where}: the layer's forward on new data", bn.call("observe_data.call", new, no_grad=True))["value"]
            if "tensor" not in value or tuple(value["shape"]) != tuple(new.shape) or value["dtype"] != str(new.dtype):
                fail(f"{where}: the layer returned {value['type']} {value.get('dtype', '')} for {new.dtype} input of shape {shape_str(new.shape)}.")
            out = value["tensor"]
            m, sc = f64(fitted.mean_), f64(fitted.scale_)
            exact = _reference().standardized(f64(new), m, sc)
            # What a correct layer gives in this dtype: torch's own eval-mode BatchNorm, whose
            # x·a + b form rounds at the size of mean/scale (far above the output's, at std 1e-3).
            same = F.batch_norm(new, fitted.mean_.reshape(-1).to(new.dtype), fitted.scale_.reshape(-1).to(new.dtype) ** 2,
                                training=False, eps=0.0)
            gap = discrepancy(out, same, exact)
            if gap is not None:
                fail(_report(f"{where}: its output on new data of shape {shape_str(new.shape)}", gap,
                             "the standardizer's transform", batch_norm_hint(layer, fitted)))


def _check_batch_norm_module(bn, returned: dict, given: Student, x: torch.Tensor, where: str) -> tuple[Student, dict]:
    """The layer as_batch_norm returned (a :class:`Student` when it is an nn.Module, ``returned``
    describing it either way): the right torch class, plain, in eval mode, with running statistics
    of the data's dtype and device that share no memory with the standardizer's (``given``).
    Returns the layer and its values for :func:`batch_norm_hint`."""
    __tracebackhide__ = True
    expected = "BatchNorm1d" if x.dim() == 2 else "BatchNorm2d"
    kind = "(N, D) data" if x.dim() == 2 else "(N, C, H, W) images"
    layer = bn.call("observe_data.batch_norm_layer", given.handle) if isinstance(bn, Student) else None
    if layer is None or layer["exactly"] != expected:
        if layer is not None and expected in layer["instance_of"]:
            fail(
                f"{where}: returned a subclass of torch.nn.{expected} ({layer['qualname']}). Return "
                f"torch.nn.{expected} itself: the point is that torch's own layer does the "
                "standardization. This part earns no points."
            )
        got = returned["type"] if layer is not None else f"a {returned['type']}"
        fail(f"{where}: returned {got}; for {kind} return a torch.nn.{expected} (ndim_ = {x.dim()}).")
    if layer["replaced"]:
        fail(
            f"{where}: the returned layer has its forward replaced or hooks attached. Return a plain "
            f"torch.nn.{expected} whose buffers do the work. This part earns no points."
        )
    attributes = bn.call("observe.plain_attributes", ["num_features", "training", "eps"])
    num_features = attributes["num_features"].get("value")
    if num_features != x.shape[1]:
        fail(f"{where}: the layer has num_features={num_features}, the data {x.shape[1]} features (channels).")
    if attributes["training"].get("value", True):
        fail(
            f"{where}: the layer is in training mode. There it standardizes every batch with that batch's "
            "own statistics and overwrites running_mean and running_var; call .eval() before returning it."
        )
    tensors = {name: t if t is not None and "shape" in t else None for name, t in layer["tensors"].items()}
    if tensors["running_mean"] is None or tensors["running_var"] is None:
        fail(
            f"{where}: the layer has no running statistics (track_running_stats=False), so even in eval mode "
            "it standardizes each batch with its own statistics. Keep track_running_stats=True and set "
            "running_mean and running_var."
        )
    for name in LAYER_TENSORS:
        t = tensors[name]
        if t is not None and (t["dtype"] != str(x.dtype) or t["device"] != str(x.device)):
            fail(
                f"{where}: the layer's `{name}` is {t['dtype']} on {t['device']}, the standardizer's statistics "
                f"{x.dtype} on {x.device}. Build it with device=mean_.device and dtype=mean_.dtype "
                "(a new BatchNorm is float32 on the CPU)."
            )
        for stat in layer["shares_memory"][name][:1]:
            fail(
                f"{where}: the layer's `{name}` shares memory with the standardizer's `{stat}`; training "
                "the layer later would change the standardizer too. Give the layer copies "
                "(buffer.copy_(...) or .clone())."
            )
    eps = attributes["eps"].get("value")
    values = {name: None if t is None else t["tensor"] for name, t in tensors.items()}
    values["eps"] = float(eps) if type(eps) in (int, float) else math.nan
    return bn, values


integrity.remember()
