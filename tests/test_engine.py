"""Unit tests of the shared engine: tolerances, op recording, tampering detection."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from autograder.core import forbidden, integrity
from autograder.core.messages import CheckFailed
from autograder.core.numerics import discrepancy
from autograder.core.side import student


def test_float64_must_match_to_1e9_of_scale():
    exact = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
    assert discrepancy(exact + 1e-12, exact, exact) is None
    gap = discrepancy(exact + 1e-6, exact, exact)
    assert gap is not None and gap.max_error == pytest.approx(1e-6)


def test_float32_is_judged_by_torchs_own_error_not_a_fixed_atol():
    exact = torch.full((4,), 1000.0, dtype=torch.float64)
    torch_result = (exact + 5e-5).float()  # torch itself is 5e-5 off here
    assert discrepancy((exact + 3e-4).float(), torch_result, exact) is None  # 6x torch: fine
    assert discrepancy((exact + 0.2).float(), torch_result, exact) is not None  # one-pass variance


def test_nan_where_torch_has_a_number_is_a_difference():
    exact = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert discrepancy(torch.tensor([1.0, float("nan")], dtype=torch.float64), exact, exact) is not None


@pytest.mark.parametrize("call", [
    lambda x: torch.nn.functional.batch_norm(x, None, None, training=True),
    lambda x: torch.batch_norm(x, None, None, None, None, True, 0.1, 1e-5, False),
    lambda x: torch.ops.aten.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)[0],
    lambda x: torch.nn.functional.layer_norm(x, x.shape[1:]),
    lambda x: torch.nn.functional.group_norm(x, 1),
    lambda x: torch.nn.BatchNorm1d(3)(x),
])
def test_every_route_to_torch_normalization_is_recorded(call):
    recorder = forbidden.OpRecorder()
    with recorder:
        call(torch.randn(4, 3))
    assert recorder.normalization_ops(), recorder.ops
    with pytest.raises(CheckFailed, match="earns no points"):
        forbidden.report_normalization_ops(recorder.normalization_ops(), "x")


def test_plain_tensor_math_is_not_flagged():
    recorder = forbidden.OpRecorder()
    with recorder:
        x = torch.randn(4, 3)
        var, mean = torch.var_mean(x, dim=0, correction=0)
        ((x - mean) / (var + 1e-5).sqrt()).norm()
    assert recorder.normalization_ops() == []


def test_subclassing_or_holding_a_torch_norm_is_refused():
    class Sub(nn.BatchNorm2d):
        pass

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.GroupNorm(1, 3)

    with pytest.raises(CheckFailed, match="inherits from torch"):
        forbidden.check_class(student(Sub, "BatchNorm2d"), "BatchNorm2d")
    with pytest.raises(CheckFailed, match="contains torch's own `GroupNorm`"):
        forbidden.check_no_torch_norm_submodule(student(Holder(), "BatchNorm2d"), "BatchNorm2d")
    forbidden.check_class(student(nn.Linear, "Linear"), "Linear")  # an ordinary module is fine


def test_rebinding_a_watched_function_is_noticed_and_restored():
    original = torch.allclose
    torch.allclose = lambda *a, **k: True
    try:
        assert "torch.allclose" in integrity.changed_names()
        with pytest.raises(CheckFailed, match="torch.allclose"):
            integrity.check_untampered()
    finally:
        integrity.restore()
    assert torch.allclose is original and integrity.changed_names() == []


def test_torch_compile_rewrapping_manual_seed_is_not_tampering():
    import torch._dynamo  # noqa: F401 - rebinds torch.manual_seed to torch's own wrapper

    assert integrity.changed_names() == []


def test_torch_rebinding_its_own_names_is_not_tampering():
    """torch.set_default_dtype rebinds torch.Storage, and a compiled model's first call wraps
    nn.Module.__init__/__setstate__ (torch/_dynamo/mutation_guard.py): torch's own doing."""
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        compiled = torch.compile(torch.nn.Linear(2, 2), backend="eager")
        compiled(torch.randn(1, 2))
        assert integrity.changed_names() == []
        torch.Storage = torch.nn.Linear  # a notebook doing the same by hand still counts
        assert "torch.Storage" in integrity.changed_names()
    finally:
        torch.set_default_dtype(previous)
        integrity.restore()


class TwoPassBatchNorm2d(nn.BatchNorm2d):
    """A correct float32 training forward: the mean first, then the mean squared deviation."""

    def forward(self, x):
        mean = x.mean(dim=(0, 2, 3), keepdim=True)
        var = ((x - mean) ** 2).mean(dim=(0, 2, 3), keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight[:, None, None] + self.bias[:, None, None]


class OnePassBatchNorm2d(nn.BatchNorm2d):
    """The classic float32 bug: var = E[x²] − E[x]², which cancels catastrophically at a large mean."""

    def forward(self, x):
        mean = x.mean(dim=(0, 2, 3), keepdim=True)
        var = (x * x).mean(dim=(0, 2, 3), keepdim=True) - mean * mean
        return (x - mean) / torch.sqrt(var.clamp_min(0) + self.eps) * self.weight[:, None, None] + self.bias[:, None, None]


def test_a_correct_float32_layer_passes_even_where_torch_is_exact():
    """Where torch's float32 answer happens to be exact (it lands close by luck: 0.3 % of the
    course inputs failed exercise 02's solution under the old rule), a correct two-pass layer at
    mean 1e3 must still pass, and the one-pass formula must still fail."""
    from autograder.core import inputs
    from autograder.core.engine import Case, Step, run_nearby, run_reference

    params, buffers = ["weight", "bias"], ["running_mean", "running_var", "num_batches_tracked"]
    failed_by_luck = 0
    for seed in range(12):
        x = inputs.channel_input((4, 3, 6, 5), seed=seed, mean=1e3)
        case = Case("BatchNorm2d", (3,), {}, [Step("train", x)], dtype=torch.float32)
        exact = run_reference(case.in_float64().build(nn.BatchNorm2d), case, params, buffers, torch.float64)[0]
        nearby = [run[0] for run in run_nearby(nn.BatchNorm2d, case, params, buffers)]
        two_pass = run_reference(case.build(TwoPassBatchNorm2d), case, params, buffers, torch.float32)[0]
        one_pass = run_reference(case.build(OnePassBatchNorm2d), case, params, buffers, torch.float32)[0]
        aspects = [lambda r: r.output, lambda r: r.grad_input, lambda r: r.grad_params["weight"]]
        for value in aspects:
            lucky_torch = value(exact).float()  # torch's float32 answer, as exact as it can be
            assert discrepancy(value(two_pass), lucky_torch, value(exact), [value(n) for n in nearby]) is None
            failed_by_luck += discrepancy(value(two_pass), lucky_torch, value(exact)) is not None
        assert discrepancy(one_pass.output, exact.output.float(), exact.output, [n.output for n in nearby]) is not None
    assert failed_by_luck > 0, "without the nearby answers a lucky torch would fail the correct layer"
