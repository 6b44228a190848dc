"""Checks that need a GPU: skipped without CUDA (conftest), run wherever one is present."""
from __future__ import annotations

import pytest
import torch

from autograder import CheckFailed, available_devices, default_device
from autograder.exercises.ex02_batch_norm import checks
from course import load_namespace, solution_code

pytestmark = pytest.mark.cuda


def test_devices_include_cuda_and_notebooks_default_to_it():
    assert [d.type for d in available_devices()] == ["cpu", "cuda"]
    assert default_device().type == "cuda"


def test_solution_passes_the_full_matrix_on_cpu_and_cuda():
    ns = load_namespace("02_batch_norm", solution_code("02_batch_norm"))
    checks.check_batch_mean_var(ns["batch_mean_var"], full=True)
    checks.check_training_forward(ns["BatchNorm1d"], ns["BatchNorm2d"], full=True)
    checks.check_running_statistics(ns["BatchNorm1d"], ns["BatchNorm2d"], full=True)
    checks.check_module_contract(ns["BatchNorm1d"], ns["BatchNorm2d"], full=True)


def test_cudnn_batch_norm_is_caught_as_torch_normalization():
    class Cheat(torch.nn.Module):
        def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                     track_running_stats=True, device=None, dtype=None):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(num_features, device=device, dtype=dtype))
            self.bias = torch.nn.Parameter(torch.zeros(num_features, device=device, dtype=dtype))

        def forward(self, x):
            return torch.nn.functional.batch_norm(x, None, None, self.weight, self.bias, True)

    with pytest.raises(CheckFailed, match="earns no points"):
        checks.check_training_forward(Cheat, Cheat, full=True)


def test_practice_lab_solution_passes_on_cpu_and_cuda():
    """Exercise 07 on a GPU: float16/bfloat16 LayerNorm, masked and frozen BatchNorm and
    recalibration on CUDA; the SyncBatchNorm2d replicas after CUDA was initialized in this process
    (they fork and stay on the CPU, which must still work)."""
    from autograder.exercises.ex07_practice_lab import checks as practice_lab

    ns = load_namespace("07_practice_lab", solution_code("07_practice_lab"))
    torch.ones(1, device="cuda")  # CUDA initialized before the replicas fork
    practice_lab.check_float32_stats_layer_norm(ns["Float32StatsLayerNorm"], full=True)
    practice_lab.check_masked_batch_norm(ns["MaskedBatchNorm1d"], full=True)
    practice_lab.check_frozen_batch_norm(ns["FrozenBatchNorm2d"], full=True)
    practice_lab.check_recalibrate_bn(ns["recalibrate_bn"], full=True)
    practice_lab.check_sync_batch_norm(ns["SyncBatchNorm2d"], full=True)


def test_large_models_solution_passes_on_cpu_and_cuda():
    """Exercise 08 on a GPU: RMSNorm (float16 and bfloat16 included) against CUDA's nn.RMSNorm, the
    QK-norm block against CUDA's scaled_dot_product_attention, DyT; and F.rms_norm still earns
    nothing there."""
    from autograder.exercises.ex08_large_models import checks as large_models

    ns = load_namespace("08_large_models", solution_code("08_large_models"))
    large_models.check_rms_norm_forward(ns["RMSNorm"], full=True)
    large_models.check_rms_norm_contract(ns["RMSNorm"], full=True)
    large_models.check_qk_norm_attention(ns["QKNormAttention"], ns["RMSNorm"], full=True)
    large_models.check_dyt(ns["DyT"], full=True)

    class Cheat(ns["RMSNorm"]):
        def forward(self, x):
            return torch.nn.functional.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    with pytest.raises(CheckFailed, match="earns no points"):
        large_models.check_rms_norm_forward(Cheat, full=True)
