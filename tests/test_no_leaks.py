"""No solution code or hidden test in the released exercises."""
from __future__ import annotations

import nbformat

from course import ASSIGNMENTS, REPO
from leaks import hidden_cases_by_exercise, leaked, secret_lines


def test_there_are_secrets_to_look_for():
    # Guards the test below: an empty set would make it pass whatever exercises/ holds.
    assert len(secret_lines()) >= 20
    hidden = hidden_cases_by_exercise()
    assert len(hidden) == len(ASSIGNMENTS) and all(hidden.values()), hidden


def test_released_exercises_hold_no_solution_or_hidden_test():
    for assignment in ASSIGNMENTS:
        folder = REPO / "exercises" / assignment
        assert folder.is_dir(), folder
        for path in folder.rglob("*"):
            if path.is_file():
                text = path.read_text()
                assert leaked(text) == [], path
                if path.suffix == ".ipynb":
                    nb = nbformat.reads(text, as_version=4)
                    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), path


def test_only_the_secret_regions_differ_from_the_release():
    # The release keeps everything outside the solution regions: the scaffold students fill in.
    release = nbformat.read(REPO / "exercises" / "02_batch_norm" / "02_batch_norm.ipynb", as_version=4)
    sources = "\n".join(c.source for c in release.cells)
    assert "def batch_mean_var(x: torch.Tensor)" in sources
    assert sources.count("raise NotImplementedError()") >= 4
