"""The course's gradebook on a real PostgreSQL server (tests/postgres.py starts a throw-away one).

Two grade commands for two assignments run at the same time against one database and one roster
of students: every score must be the one the demo class expects, each student on the roster once,
each submission once; export reads it back.  The merge itself keeps manual scores, merges a
student once however often it runs, and leaves nothing half-written when it fails.
"""
from __future__ import annotations

import csv
import datetime
import os
import shutil
import subprocess
import sys

import pytest
from nbgrader.api import Gradebook, Student, SubmittedAssignment

from course import tool_env
from demo_class import CLASSES, build_class_course
from postgres import server_bin, throwaway_postgres

from autograder.grading import gradebook

IN_CI = os.environ.get("CI", "").lower() not in ("", "0", "false", "no")
pytestmark = pytest.mark.slow

# Three students take both assignments, so the two commands race to put them on the roster.
STUDENTS = {
    "01_covariate_shift": ["solution", "stub", "standardize_unbiased", "hooks_not_removed"],
    "02_batch_norm": ["solution", "stub", "running_var_biased", "eps_outside_sqrt"],
}
GRADE_OPTIONS = ["--workers", "2", "--cell-timeout", "60", "--timeout", "300"]


@pytest.fixture(scope="module")
def postgres():
    if server_bin() is None or shutil.which("runuser") is None and os.geteuid() == 0:
        if IN_CI:
            pytest.fail("PostgreSQL's server is not installed; .ci/run installs Debian's postgresql package")
        pytest.skip("PostgreSQL's server is not installed (apt-get install postgresql)")
    with throwaway_postgres() as server:
        yield server


@pytest.fixture
def postgres_url(postgres, request):
    """A new database for each test."""
    return postgres.database("gb_" + "".join(ch if ch.isalnum() else "_" for ch in request.node.name).lower()[:50])


def demo_subset() -> dict:
    return {a: {s: student for s, student in CLASSES[a]().items() if s in names} for a, names in STUDENTS.items()}


def expected_scores(classes: dict) -> dict[tuple[str, str], float]:
    return {(a, s): float(sum(points)) for a, students in classes.items() for s, (_, points) in students.items()}


def test_two_grade_commands_share_one_postgresql_gradebook(tmp_path, postgres_url):
    classes = demo_subset()
    course = tmp_path / "course"
    build_class_course(course, classes, db_url=postgres_url)
    assert gradebook.db_url(course) == postgres_url
    assert not (course / "gradebook.db").exists(), "the gradebook went to SQLite, not to PostgreSQL"

    commands = [subprocess.Popen([sys.executable, "-m", "autograder.grade", a, *GRADE_OPTIONS], cwd=course,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=tool_env())
                for a in classes]
    outputs = [c.communicate(timeout=1200)[0] for c in commands]
    for command, output in zip(commands, outputs):
        assert command.returncode == 0, output[-3000:]

    with Gradebook(postgres_url) as gb:
        found = {(s.assignment.name, s.student.id): s.score for s in gb.db.query(SubmittedAssignment)}
        roster = [s.id for s in gb.db.query(Student)]
    assert found == expected_scores(classes)
    assert sorted(roster) == sorted({s for names in STUDENTS.values() for s in names})
    for assignment, students in classes.items():
        for student in students:
            assert (course / "autograded" / student / assignment / f"{assignment}.ipynb").is_file()

    export = subprocess.run([sys.executable, "-m", "nbgrader", "export", "--to", str(tmp_path / "grades.csv")],
                            cwd=course, capture_output=True, text=True, env=tool_env())
    assert export.returncode == 0, export.stderr[-2000:]
    with open(tmp_path / "grades.csv") as f:
        rows = {(r["assignment"], r["student_id"]): float(r["score"]) for r in csv.DictReader(f)}
    # export has a row for every student on the roster and every assignment: 0 where none was submitted
    students = {s for names in STUDENTS.values() for s in names}
    assert rows == {(a, s): expected_scores(classes).get((a, s), 0.0) for a in classes for s in students}


def _grades(score: float) -> gradebook.StudentGrades:
    return gradebook.StudentGrades(notebooks={"01_covariate_shift": gradebook.NotebookGrades(
        grades={"test_activation_stats": (score, False)}, comments={})})


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_the_merge_keeps_what_the_instructor_set_and_merges_each_student_once(tmp_path, database, request):
    url = request.getfixturevalue("postgres_url") if database == "postgresql" else None
    course = tmp_path / "course"
    build_class_course(course, {"01_covariate_shift": {}}, db_url=url)
    with gradebook.open_gradebook(course) as gb:
        gb.add_student("ada", first_name="Ada", last_name="Lovelace")
        gb.add_submission("01_covariate_shift", "ada", extension=datetime.timedelta(days=3))
        gb.find_submission_notebook("01_covariate_shift", "01_covariate_shift", "ada").flagged = True
        gb.db.commit()
    with gradebook.open_gradebook(course) as gb:
        grade_ids = [c.name for c in gb.find_notebook("01_covariate_shift", "01_covariate_shift").grade_cells]
    assert "test_activation_stats" in grade_ids, grade_ids

    gradebook.merge(course, "01_covariate_shift", "ada", _grades(1.0))
    with gradebook.open_gradebook(course) as gb:
        gb.find_grade("test_activation_stats", "01_covariate_shift", "01_covariate_shift", "ada").manual_score = 1.5
        gb.db.commit()
    gradebook.merge(course, "01_covariate_shift", "ada", _grades(2.0))  # graded again: the same rows
    gradebook.merge(course, "01_covariate_shift", "bo", _grades(0.0))  # not on the roster yet

    with gradebook.open_gradebook(course) as gb:
        assert gb.db.query(SubmittedAssignment).count() == 2
        grade = gb.find_grade("test_activation_stats", "01_covariate_shift", "01_covariate_shift", "ada")
        assert (grade.auto_score, grade.manual_score) == (2.0, 1.5)
        assert grade.needs_manual_grade, "a manual score over a new automatic one needs a look, as nbgrader marks it"
        assert gb.find_submission("01_covariate_shift", "ada").extension == datetime.timedelta(days=3)
        assert gb.find_submission_notebook("01_covariate_shift", "01_covariate_shift", "ada").flagged
        assert gb.find_student("ada").last_name == "Lovelace"
        assert gb.find_student("bo").first_name is None


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_failed_merge_leaves_nothing_behind(tmp_path, database, request):
    url = request.getfixturevalue("postgres_url") if database == "postgresql" else None
    course = tmp_path / "course"
    build_class_course(course, {"01_covariate_shift": {}}, db_url=url)
    broken = gradebook.StudentGrades(notebooks={"01_covariate_shift": gradebook.NotebookGrades(
        grades={"no_such_cell": (1.0, False)}, comments={})})
    with pytest.raises(Exception, match="no_such_cell"):
        gradebook.merge(course, "01_covariate_shift", "cy", broken)
    with gradebook.open_gradebook(course) as gb:
        assert gb.db.query(SubmittedAssignment).count() == 0
        assert gb.db.query(Student).count() == 0, "the student was added although the merge failed"

