"""Every input the grader gives a student's layer is drawn from the course's secret
(autograder/core/seeding.py): a table of answers built from the installed package matches none of
them, and every catalogued verdict is the same with the course's inputs as with the package's."""
from __future__ import annotations

import importlib
import os
import stat

import pytest
import torch

from autograder.core import inputs, seeding
from autograder.grading import course_secret
from course import load_namespace, run_parts, solution_code

CHAPTERS = ["test_covariate_shift_checks", "test_batch_norm_checks", "test_backward_checks", "test_layer_norm_checks",
            "test_instance_group_norm_checks", "test_data_norm_checks", "test_training_dynamics_checks",
            "test_practice_lab_checks", "test_large_models_checks"]
SECRET = bytes(range(100, 132))


def test_the_secret_draws_new_values_the_same_every_time():
    shape = (4, 3, 5)
    package = inputs.channel_input(shape, seed=7)
    with seeding.course_secret(SECRET):
        course, again = inputs.channel_input(shape, seed=7), inputs.channel_input(shape, seed=7)
        state = inputs.channel_state(3, seed=7, tracked=True)
    with seeding.course_secret(bytes(32)):
        other = inputs.channel_input(shape, seed=7)
    with seeding.course_secret(SECRET, "02_batch_norm/ada"):
        ada, ada_again = inputs.channel_input(shape, seed=7), inputs.channel_input(shape, seed=7)
    with seeding.course_secret(SECRET, "02_batch_norm/bob"):
        bob = inputs.channel_input(shape, seed=7)
    assert torch.equal(course, again) and not torch.equal(course, package) and not torch.equal(course, other)
    # each student has inputs of their own, the same at every grading of their submission
    assert torch.equal(ada, ada_again) and not torch.equal(ada, bob) and not torch.equal(ada, course)
    assert torch.equal(package, inputs.channel_input(shape, seed=7)), "outside grading the seeds are as they are"
    # The same family: channel c still has mean about c.
    means = course.mean(dim=(0, 2))
    assert torch.allclose(means, torch.arange(3, dtype=torch.float64), atol=1.5), means
    assert 0.5 <= float(state["weight"].min()) and float(state["weight"].max()) < 1.5


# What a student's layer can see of its inputs: each one, hashed, as a table would key it.
RECORDING = """
import hashlib as _hashlib
SEEN = []
_forward = _BatchNorm.forward
def _recording(self, x):
    SEEN.append(_hashlib.sha256(x.detach().cpu().double().contiguous().numpy().tobytes()).hexdigest())
    return _forward(self, x)
_BatchNorm.forward = _recording
"""


def inputs_seen(secret) -> set[str]:
    """Every input the batch-norm checks hand the solution's layer, hidden cases included."""
    catalogue = importlib.import_module("test_batch_norm_checks").CATALOGUE
    namespace = load_namespace("02_batch_norm", solution_code("02_batch_norm") + "\n" + RECORDING)
    with seeding.course_secret(secret):
        verdicts = run_parts(namespace, catalogue.parts)
    assert verdicts == dict.fromkeys(catalogue.parts), verdicts
    return set(namespace["SEEN"])


def test_a_table_built_from_the_package_knows_no_input_of_the_course():
    """A student who runs the package's checks at home with a layer that records its inputs
    (and torch's answers for them) learns none of the inputs the grader gives."""
    at_home, graded = inputs_seen(None), inputs_seen(SECRET)
    assert len(at_home) > 20 and len(graded) > 20
    assert at_home.isdisjoint(graded), len(at_home & graded)
    assert inputs_seen(SECRET) == graded, "grading twice gives the same inputs"


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_verdict_holds_with_the_courses_inputs(chapter):
    catalogue = importlib.import_module(chapter).CATALOGUE
    with seeding.course_secret(SECRET):
        for name in catalogue.correct():
            catalogue.assert_correct(name)
        for name in catalogue.bugs:
            catalogue.assert_bug(name)


def test_the_course_secret_is_made_once_and_private(tmp_path):
    first = course_secret.read_or_create(tmp_path)
    assert course_secret.read_or_create(tmp_path) == first and len(first) == 32
    assert stat.S_IMODE(os.stat(tmp_path / course_secret.FILE).st_mode) == 0o600
    (tmp_path / course_secret.FILE).write_text("not hex\n")
    with pytest.raises(ValueError, match="delete it"):
        course_secret.read_or_create(tmp_path)
