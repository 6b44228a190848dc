"""The checks of exercise 05_data_vs_layer_norm on the catalogue in tests/submissions/data_vs_layer_norm/.

Every correct submission (the notebook's solution and unusual but correct ones) must pass every
part; every bug must fail exactly the parts it breaks, with the message that names its
misconception; cheats are graded in the clean re-check process, as nbgrader grades them. The
grader's reference must be scikit-learn's StandardScaler on every configuration it uses.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.preprocessing import StandardScaler

from autograder import CheckFailed
from autograder.exercises.ex05_data_vs_layer_norm import checks, hidden_reference, reference
from autograder.core.numerics import FLOAT64_RTOL
from catalogue import Catalogue, no_points, tampering

ASSIGNMENT = "05_data_vs_layer_norm"
PARTS = {
    "fit": lambda ns, full: checks.check_fit(ns["Standardizer"], full=full),
    "transform": lambda ns, full: checks.check_transform(ns["Standardizer"], full=full),
    "images": lambda ns, full: checks.check_images(ns["Standardizer"], full=full),
    "batch_norm": lambda ns, full: checks.check_as_batch_norm(ns["as_batch_norm"], full=full),
}
BUGS = {
    "bug_unbiased_variance": {"fit": "unbiased variance"},
    "bug_unbiased_scale": {"fit": "√(n/(n − 1))"},
    "bug_eps_inside_sqrt": {"fit": "√(var_ + ε)", "transform": "adding ε"},
    # Part 3 fails it too, for every course input: its image statistics are wrong in float32 (that
    # its own (N·H·W, C) fit sometimes rounds the same way forgives nothing; it is no formula mistake).
    "bug_one_pass_variance": {"fit": "cancels catastrophically", "images": "cancels catastrophically"},
    "bug_inplace_float64": {"fit": "changed its input in place"},
    "bug_stats_float64": {"fit": "data's dtype", "transform": "data's dtype", "images": "data's dtype"},
    "bug_keeps_reference": {"fit": "changing the training tensor"},
    "bug_fit_accumulates": {"fit": "must not combine"},
    "bug_no_constant_guard": {"transform": "divide 0 by 0"},
    "bug_constant_by_var_zero": {"transform": "rounding error"},
    "bug_refit_in_transform": {"transform": "*its own* mean"},
    "bug_transform_calls_fit": {"transform": "fitted again"},
    "bug_transform_inplace": {"transform": "changed its input in place"},
    "bug_transform_by_var": {"transform": "divides by var_"},
    "bug_inverse_wrong_order": {"transform": "adds mean_ before multiplying"},
    "bug_fit_transform_no_fit": {"transform": "no attribute `mean_`"},
    "bug_images_per_pixel": {"images": "*and pixel*"},
    "bug_images_reshape_no_permute": {"images": "mixes the channels"},
    "bug_images_broadcast_last_axis": {"images": "reshape them to (1, C, 1, 1)"},
    "bug_bn_train_mode": {"batch_norm": "training mode"},
    "bug_bn_default_eps": {"batch_norm": "with eps = 1e-05"},
    "bug_bn_var_not_scale": {"batch_norm": "a constant feature, var_ = 0"},
    "bug_bn_std_as_var": {"batch_norm": "expects a variance, scale_²"},
    "bug_bn_default_dtype": {"batch_norm": "dtype=mean_.dtype"},
    "bug_bn_shares_memory": {"batch_norm": "shares memory"},
    "bug_bn_always_2d": {"batch_norm": "return a torch.nn.BatchNorm1d"},
}
# Verdicts of the four test cells in the clean re-check: None = passed, else a phrase of the message.
OUT_OF_TORCH = "took the data out of torch"
CHEATS = {
    "cheat_sklearn_roundtrip": dict.fromkeys(["fit", "transform", "images"], OUT_OF_TORCH),
    "cheat_numpy_arrays": dict.fromkeys(["fit", "transform", "images"], OUT_OF_TORCH),
    # the student's package holds only the scikit-learn reference (reference.py)
    "cheat_grader_reference": dict.fromkeys(["fit", "transform", "images"], OUT_OF_TORCH),
    "cheat_patch_equal": tampering(PARTS),
    "cheat_bn_subclass": no_points("batch_norm"),
    "cheat_bn_forward_hook": no_points("batch_norm"),
}
CATALOGUE = Catalogue(ASSIGNMENT, PARTS, BUGS, CHEATS)


@pytest.mark.parametrize("name", sorted(CATALOGUE.correct()))
def test_correct_submission_passes_every_part(name):
    CATALOGUE.assert_correct(name)


def test_every_catalogue_file_has_an_expectation():
    assert len(CATALOGUE.correct()) >= 4
    CATALOGUE.assert_complete()


@pytest.mark.parametrize("name", sorted(BUGS))
def test_bug_fails_the_parts_it_breaks_with_its_misconception(name):
    CATALOGUE.assert_bug(name)


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheat_earns_nothing_for_the_parts_it_cheats_on(name, tmp_path):
    CATALOGUE.assert_cheat(name, str(tmp_path))


def test_the_released_stub_fails_every_part():
    CATALOGUE.assert_stub_fails()


def _all_data():
    return {
        "fit": checks._fit_data(True),
        "transform": checks._transform_data(True),
        "images": checks._image_data(True),
        "batch_norm": checks._batch_norm_data(True),
    }


def _table(x: torch.Tensor) -> np.ndarray:
    """(N, D) as it is; (N, C, H, W) as (N·H·W, C): every pixel a sample, every channel a feature."""
    return x.movedim(1, -1).reshape(-1, x.shape[1]).numpy()


@pytest.mark.parametrize("part", ["fit", "transform", "images", "batch_norm"])
def test_the_reference_is_scikit_learns_standard_scaler(part):
    for data in _all_data()[part]:
        x, new = data.train("cpu"), data.new("cpu")
        scaler = StandardScaler().fit(_table(x))  # float32 data: scikit-learn accumulates in float64
        exact = hidden_reference.exact_statistics(x)
        # Far closer than the float64 tolerance of the checks, 1e-9 of max(1, |value|): 100 times
        # for the statistics, 10 times for outputs (at mean 1e3 and std 1e-3 one rounding of the
        # mean, 1e-13, moves (x − mean) / scale by 1e-10 in any float64 algorithm).
        for name, ours in (("mean_", exact.mean), ("var_", exact.var), ("scale_", exact.scale)):
            np.testing.assert_allclose(ours.numpy(), getattr(scaler, name), rtol=1e-11, atol=1e-11, err_msg=f"{data} {name}")
        expected = scaler.transform(_table(new).astype(np.float64))
        ours = hidden_reference.standardized(new.double(), exact.mean, exact.scale)
        allowed = 0.1 * FLOAT64_RTOL * max(1.0, float(np.abs(expected).max()))
        np.testing.assert_allclose(_table(ours), expected, rtol=0, atol=allowed, err_msg=str(data))


@pytest.mark.parametrize("part", ["fit", "transform", "images", "batch_norm"])
def test_the_student_installs_reference_is_the_graders(part):
    """Where the grader's reference is missing (the student's install), the visible checks ask
    scikit-learn (reference.py): on every configuration it agrees with the grader's far inside the
    checks' tolerance, so a visible check passes and fails there as it does when graded."""
    for data in _all_data()[part]:
        x, new, z = data.train("cpu"), data.new("cpu"), data.codes("cpu")
        theirs, ours = reference.exact_statistics(x), hidden_reference.exact_statistics(x)
        for name in ("mean_", "var_", "scale_"):
            torch.testing.assert_close(theirs.get(name), ours.get(name), rtol=1e-11, atol=1e-11, msg=f"{data} {name}")
        assert torch.equal(theirs.constant, ours.constant), data
        allowed = 0.1 * FLOAT64_RTOL
        for function in ("standardized", "inverse"):
            for values in (new, z):
                got = getattr(reference, function)(values, ours.mean, ours.scale)
                expected = getattr(hidden_reference, function)(values.double(), ours.mean, ours.scale).to(values.dtype)
                assert got.dtype == values.dtype and got.shape == values.shape, data
                torch.testing.assert_close(got, expected, rtol=allowed, atol=allowed, msg=f"{data} {function}")


def test_constant_features_are_those_scikit_learn_sees_as_constant():
    # The value and size where the two-pass mean of equal numbers is off in the last bit.
    data = next(d for d in checks._transform_data(False) if d.constant)
    x = data.train("cpu")
    mean = x.mean(0)
    assert float(((x - mean) ** 2).mean(0)[3]) > 0  # so `var == 0` misses this constant feature
    scaler = StandardScaler().fit(x.numpy())
    assert [j for j in range(x.shape[1]) if scaler.scale_[j] == 1.0] == [j for j, _ in data.constant]


def test_converting_to_numpy_or_lists_is_caught_in_every_form():
    class ViaList:
        def fit(self, x):
            self.mean_ = torch.tensor(np.mean(x.tolist(), axis=0), dtype=x.dtype)
            return self

    class ViaArray:
        def fit(self, x):
            self.mean_ = torch.as_tensor(np.asarray(x).mean(0))
            return self

    class ViaDlpack:
        def fit(self, x):
            self.mean_ = torch.as_tensor(np.from_dlpack(x).mean(0))
            return self

    for cls in (ViaList, ViaArray, ViaDlpack):
        with pytest.raises(CheckFailed, match=OUT_OF_TORCH):
            checks.check_fit(cls)


@pytest.mark.cuda
def test_cuda_device_mistakes_are_caught():
    solution = CATALOGUE.correct()["notebook_solution"]
    assert CATALOGUE.results(solution) == dict.fromkeys(PARTS)
    cpu_layer = solution.replace(", device=mean.device, dtype=mean.dtype)", ", dtype=mean.dtype)")
    assert CATALOGUE.results(cpu_layer)["batch_norm"] and "on cpu" in CATALOGUE.results(cpu_layer)["batch_norm"]
    cpu_scale = solution.replace("torch.ones_like(var)", "torch.ones(var.shape, dtype=var.dtype)")
    assert CATALOGUE.results(cpu_scale)["fit"] and "raised RuntimeError" in CATALOGUE.results(cpu_scale)["fit"]
