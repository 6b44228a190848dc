"""Checks that need a GPU: skipped without CUDA (conftest), run wherever one is present."""
from __future__ import annotations

import pytest
import torch

from autograder import CheckFailed, available_devices, default_device
from autograder import batch_norm as checks
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
