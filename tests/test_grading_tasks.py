"""The unit of distributed grading (autograder/grading/task.py): what a task carries, what it
refuses, and that the gradebook it carries tells a worker nothing about any student."""
from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from course import REPO, tool_env

from autograder.grading import gradebook
from autograder.grading.task import BatchJob, WorkerRefused, Limits, grade_batch, read_files, write_files


def test_a_worker_with_other_grading_code_refuses_the_task():
    job = BatchJob("02_batch_norm", {"ada": {}}, {}, "", b"", Limits(), grader_version="0" * 16)
    with pytest.raises(WorkerRefused, match="install the same course version"):
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
        kernelspec = notebook.kernelspec
    with sqlite3.connect(template) as db:
        assert db.execute("SELECT kernelspec FROM notebook").fetchall() == [(kernelspec,)]
    assert kernelspec and "python3" in kernelspec, "nbgrader's OverwriteKernelspec needs the release's kernel"


def test_the_embedded_cluster_takes_work_from_this_process_only():
    """Dask's scheduler runs whatever its clients send: the embedded one talks in-process, and the
    HTTP servers Dask starts anyway answer nothing (no health, metrics, task or worker pages)."""
    import os
    import re
    import urllib.error
    import urllib.request

    from autograder.grading.schedulers import make_scheduler

    scheduler = make_scheduler("local", 1)
    try:
        assert scheduler._cluster.scheduler_address.startswith("inproc://")
        listening = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
        ports = re.findall(rf":(\d+)\s+\S+\s+users:\(\(\"[^\"]+\",pid={os.getpid()},", listening)
        assert ports, "Dask 2026.8 starts an HTTP server per scheduler and worker; none found to check"
        assert all(f"127.0.0.1:{port} " in listening for port in ports), listening
        for port in ports:
            for path in ("/health", "/metrics", "/info/main/workers.html", "/json/counts.json", "/api/v1/retire_workers"):
                with pytest.raises(urllib.error.HTTPError) as answer:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5)
                assert answer.value.code == 404, (port, path)
    finally:
        scheduler.close()
