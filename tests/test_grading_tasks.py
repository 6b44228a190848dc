"""The unit of distributed grading (autograder/grading/task.py): what a task carries, what it
refuses, and that the gradebook it carries tells a worker nothing about any student."""
from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from course import REPO, tool_env

from autograder.grading import gradebook
from autograder.grading.task import (BatchJob, BatchResult, Limits, WorkerRefused, grade_batch, is_authentic, read_files,
                                     result_mac, write_files)


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


def test_the_embedded_cluster_leaves_no_scratch_folder(tmp_path, monkeypatch):
    """Dask's workers keep a scratch space in the temporary folder (dask-scratch-space...): the
    embedded cluster's lives in a folder of the run's own, gone when the scheduler closes."""
    import tempfile

    from autograder.grading.schedulers import make_scheduler

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    scheduler = make_scheduler("local", 1)
    try:
        assert scheduler._client.submit(sum, [1, 2], pure=False).result(timeout=60) == 3
        made = list(tmp_path.iterdir())
        assert [path.name[:len("normlayers-dask-")] for path in made] == ["normlayers-dask-"], made
        assert any("dask-scratch-space" in path.name for path in made[0].rglob("*")), list(made[0].rglob("*"))
    finally:
        scheduler.close()
    assert list(tmp_path.iterdir()) == []


def release_course(tmp_path, assignment: str = "01_covariate_shift"):
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text((REPO / "nbgrader_config.py").read_text())
    (course / "solutions").symlink_to(REPO / "solutions")
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment,
                           "--CourseDirectory.release_directory=release"], cwd=course, capture_output=True,
                          text=True, env=tool_env())
    assert done.returncode == 0, done.stderr[-2000:]
    return course


def test_a_result_not_signed_with_this_runs_key_is_not_authentic():
    key = b"k" * 32
    result = BatchResult(["ada"], graded={"ada": (gradebook.StudentGrades(), {"a.ipynb": b"{}"})}, log="fine")
    result.mac = result_mac(key, result)
    assert is_authentic(key, result) and not is_authentic(b"x" * 32, result)
    result.graded["ada"][0].notebooks["a"] = gradebook.NotebookGrades(grades={"cell": (10.0, False)})
    assert not is_authentic(key, result), "a score added after signing"
    assert not is_authentic(key, "not a result")


def test_a_returned_result_is_scrubbed_and_scored_again_from_its_notebook(tmp_path):
    """A worker's scores count for nothing: every score is computed again from the returned
    notebook against the gradebook's cells and points, and clamped to them."""
    import nbformat

    from autograder.grading.rescore import checked_result

    assignment = "01_covariate_shift"
    course = release_course(tmp_path, assignment)
    nb = nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"
             and not c.metadata["nbgrader"].get("solution")]
    failed, too_much, partial = tests[0], tests[1], tests[2]
    failed.outputs = [nbformat.v4.new_output("error", ename="CheckFailed", evalue="no", traceback=[])]
    too_much.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "1e9"}, execution_count=1)]
    partial.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "0.5"}, execution_count=2)]
    partial.outputs.append(nbformat.v4.new_output("display_data", data={"text/html": "<script>x</script>"}))
    claimed = gradebook.NotebookGrades(late_submission_penalty=-5.0, comments={"fake": "<script>"},
                                       grades={c.metadata.nbgrader.grade_id: (1000.0, False) for c in tests})
    claimed.grades["not-a-cell"] = (50.0, False)
    grades, files = checked_result(course, assignment, gradebook.StudentGrades(notebooks={assignment: claimed}),
                                   {f"{assignment}.ipynb": nbformat.writes(nb).encode(), "timestamp.txt": b"t",
                                    "evil.html": b"<script>x</script>", "other.ipynb": nbformat.writes(nb).encode()})
    with gradebook.open_gradebook(course) as gb:
        points = {c.name: c.max_score for c in gb.find_notebook(assignment, assignment).grade_cells}
    checked = grades.notebooks[assignment]
    assert set(checked.grades) == set(points) and "fake" not in checked.comments
    assert checked.grades[failed.metadata.nbgrader.grade_id] == (0.0, False)
    assert checked.grades[too_much.metadata.nbgrader.grade_id] == (0.0, False), "nbgrader refuses more than the points"
    assert checked.grades[partial.metadata.nbgrader.grade_id] == (0.5, False)
    assert all(0 <= (score or 0) <= points[name] for name, (score, _) in checked.grades.items())
    assert checked.late_submission_penalty == 0.0
    kept = nbformat.reads(files[f"{assignment}.ipynb"].decode(), as_version=4)
    assert "<script>" not in nbformat.writes(kept) and files["timestamp.txt"] == b"t"
    assert set(files) == {f"{assignment}.ipynb", "timestamp.txt"}, "only the assignment's notebooks and nbgrader's files"


def test_the_grade_command_reaches_a_cluster_only_over_mutual_tls(tmp_path):
    from autograder.grading.schedulers import InsecureCluster, cluster_security, make_scheduler

    with pytest.raises(InsecureCluster, match="only tls://"):
        make_scheduler("tcp://127.0.0.1:8786", 1, security=object())
    with pytest.raises(InsecureCluster, match="certificates"):
        make_scheduler("tls://127.0.0.1:8786", 1)
    with pytest.raises(InsecureCluster, match="--tls-cert, --tls-key"):
        cluster_security(str(tmp_path / "ca.pem"), None, None)
    done = subprocess.run([sys.executable, "-m", "autograder.grade", "01_covariate_shift", "--course", str(tmp_path),
                           "--scheduler", "tcp://127.0.0.1:8786"], capture_output=True, text=True, env=tool_env())
    assert done.returncode != 0 and "Refusing to grade: a Dask cluster needs --tls-ca-file" in done.stderr, done.stderr
