"""Cheating BatchNorm submissions, graded the way ``autograder.grade`` grades them: the
notebook in the sandboxed kernel, every test cell judged in the grader (tests/course.py).

They run there and not in pytest's process because some of them disable the grader in the
process they run in.
"""
from __future__ import annotations

import pytest

from course import grade_notebook, submission_files

ASSIGNMENT = "02_batch_norm"
TAMPERING = {"cheat_patch_assert_close", "cheat_replace_torch_modules", "cheat_patch_autograder"}
CHEATS = {p.stem: p for p in submission_files(ASSIGNMENT, "cheat")}


def test_the_catalogue_has_cheats_of_every_kind():
    assert len(CHEATS) >= 10 and TAMPERING <= set(CHEATS)


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheat_earns_nothing_for_the_parts_it_cheats_on(name, tmp_path):
    verdicts = grade_notebook(ASSIGNMENT, CHEATS[name].read_text(), str(tmp_path))
    statistics, *modules = verdicts[:4]  # the four code parts; the graded questions follow them
    if name in TAMPERING:
        # Tampering comes with the first answer cell, before Part 1's test: nothing is credited.
        # Either the notebook's own report says what it replaced, or it broke the grader's side so
        # that nothing could be checked: no points either way.
        assert all(v and ("has replaced" in v or "could not be checked" in v) for v in [statistics, *modules]), (
            statistics, modules)
    else:
        assert statistics is None  # batch_mean_var is written honestly in these
        assert all(v and "earns no points" in v for v in modules), modules
