"""The unit of distributed grading (autograder/grading/task.py): what a task carries, what it
refuses, and that the gradebook it carries tells a worker nothing about any student."""
from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from course import REPO, tool_env

from autograder.grading import gradebook
from autograder.grading.task import BatchJob, GraderVersionMismatch, Limits, grade_batch, read_files, write_files


def test_a_worker_with_other_grading_code_refuses_the_task():
    job = BatchJob("02_batch_norm", {"ada": {}}, {}, "", b"", Limits(), grader_version="0" * 16)
    with pytest.raises(GraderVersionMismatch, match="install the same course version"):
        grade_batch(job)


def test_files_travel_without_links_and_land_inside_their_folder(tmp_path):
    source = tmp_path / "submission"
    (source / "data").mkdir(parents=True)
    (source / "notebook.ipynb").write_text("{}")
    (source / "data" / "x.txt").write_text("x")
    (source / "solutions").symlink_to(REPO / "solutions")
    (source / "secret.ipynb").symlink_to(REPO / "solutions" / "02_batch_norm" / "02_batch_norm.ipynb")
    assert read_files(source) == {"notebook.ipynb": b"{}", "data/x.txt": b"x"}
    with pytest.raises(ValueError, match="outside"):
        write_files({"../escaped.txt": b"!"}, tmp_path / "target")
    assert not (tmp_path / "escaped.txt").exists()


def test_the_gradebook_a_task_carries_holds_the_assignment_and_no_student(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text((REPO / "nbgrader_config.py").read_text())
    (course / "solutions").symlink_to(REPO / "solutions")
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "01_covariate_shift",
                           "--CourseDirectory.release_directory=release"], cwd=course, capture_output=True,
                          text=True, env=tool_env())
    assert done.returncode == 0, done.stderr[-2000:]
    with gradebook.open_gradebook(course) as gb:
        gb.add_student("ada", first_name="Ada", email="ada@example.org")
    gradebook.merge(course, "01_covariate_shift", "ada", gradebook.StudentGrades())

    template = tmp_path / "template.db"
    template.write_bytes(gradebook.assignment_template(course, "01_covariate_shift"))
    with sqlite3.connect(template) as db:
        counts = {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                  for t in ("student", "submitted_assignment", "grade", "comment", "grade_cells", "source_cell")}
    assert counts["student"] == counts["submitted_assignment"] == counts["grade"] == counts["comment"] == 0
    with gradebook.open_gradebook(course) as gb:
        notebook = gb.find_notebook("01_covariate_shift", "01_covariate_shift")
        assert counts["grade_cells"] == len(notebook.grade_cells) > 0
        assert counts["source_cell"] == len(notebook.source_cells) > 0
