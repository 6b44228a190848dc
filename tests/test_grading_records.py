"""What a grading run leaves for the instructor: the report's notes and reasons, the kept report,
the class picture, the export that never writes a zero for "not graded", the stop when a whole
class fails alike, the batch deadline, and the test helpers' own-process scan.  (The real
pipeline on the demo class: tests/test_nbgrader_roundtrip.py.)"""
from __future__ import annotations

import base64
import csv
import hashlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config

from course import REPO, RUN_MARK, processes_with, tool_env

from autograder.grading import grade, record
from autograder.grading.export import PartsCsvExport, StatusCsvExport
from autograder.grading.picture import class_picture
from autograder.grading.report import part_names
from autograder.grading.report import Outcome, _verdicts
from autograder.grading.task import (MARK_STUDENT_CONFIG, BatchResult, BrokenConfig, Limits, _watch, check_config)

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def test_a_flood_is_its_own_reason_not_an_ignored_interrupt():
    flood = BatchResult(["x"], log="CellTimeoutError: ... The message was: Timeout waiting for IOPub output.")
    assert "output flood" in grade.failure_reason(flood, Limits()) and "interrupt" not in grade.failure_reason(flood, Limits())
    stuck = BatchResult(["x"], log="nbclient.exceptions.UnresponsiveKernelError")
    assert "ignored the interrupt" in grade.failure_reason(stuck, Limits())


def _cell(source, outputs, grade_id=None):
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = outputs
    if grade_id:
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": grade_id, "points": 2}
    return cell


def _error(name, value=""):
    return nbformat.v4.new_output("error", ename=name, evalue=value, traceback=[])


def test_the_report_notes_interrupted_out_of_memory_flooded_and_unparsable_cells(tmp_path):
    failing = "your running_var differs from torch's.\nLikely cause: running_var is off by a factor n/(n − 1)."
    nb = nbformat.v4.new_notebook(cells=[
        _cell("import time; time.sleep(10**6)", [_error("KeyboardInterrupt"), _error("CellTimeoutError")]),
        _cell("hog = []", [_error("MemoryError")]),
        _cell("while True: print('x')", [nbformat.v4.new_output("stream", name="stdout", text="x\n[output limit: this cell ...]\n"),
                                         _error("KeyboardInterrupt")]),
        _cell("def f(:", [_error("SyntaxError", "invalid syntax (1.py, line 1)")]),
        _cell("checks.check(...)", [_error("CheckFailed", failing)], grade_id="test_running_statistics"),
        # A cell the gradebook does not know: its "cause" is the student's text, not the grader's.
        _cell("fake", [_error("CheckFailed", "Likely cause: " + HOSTILE)], grade_id="made_up"),
        _cell("print('fine')", [nbformat.v4.new_output("stream", name="stdout", text="fine\n")]),
    ])
    nbformat.write(nb, tmp_path / "02_batch_norm.ipynb")
    notes, hints = _verdicts(tmp_path, known={"test_running_statistics"})
    assert notes == [
        "cell 0 was interrupted at the cell time limit (or raised KeyboardInterrupt itself)",
        "cell 1 ran out of memory (MemoryError at the sandbox's limit)",
        "cell 2 printed more than the output limit; the rest was dropped and the cell stopped",
        "cell 3 has a SyntaxError: invalid syntax (1.py, line 1)",
    ]
    assert hints == [("test_running_statistics", "running_var is off by a factor n/(n − 1).")]


def _outcome(student, score, reason=None, notes=(), parts=None, hints=()):
    return Outcome(student, score, 10.0, reason, list(notes), True, parts or {}, list(hints))


def test_a_class_that_fails_the_same_way_stops():
    broken = [_outcome(s, None, "the kernel died") for s in ("a", "b", "c")]
    assert grade.same_failure(broken) == "the kernel died"
    unchecked = [_outcome(s, 0.0, notes=["test_x: the notebook's process could not be checked (...); no points"])
                 for s in ("a", "b")]
    assert "could not be checked" in grade.same_failure(unchecked)
    assert grade.same_failure(broken[:1]) is None  # one student is no pattern
    assert grade.same_failure(broken + [_outcome("d", 7.0)]) is None
    assert grade.same_failure([_outcome("a", None, "x"), _outcome("b", None, "y")]) is None


def test_the_stop_exits_2_says_what_to_do_and_exports_nobody(tmp_path, monkeypatch, capsys):
    same = [_outcome(s, 0.0, notes=["test_x: the notebook's process could not be checked (it stopped); no points"],
                     parts={"test_x": 0.0}) for s in ("ada", "bob")]
    monkeypatch.setattr(grade, "grade_class", lambda *a, **k: same)
    monkeypatch.setattr(grade, "part_maxima", lambda course, assignment: {"test_x": 10.0})
    assert grade.main(["02_batch_norm", "--course", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert "STOPPED: all 2 submissions of 02_batch_norm failed the same way" in captured.err
    assert "--student NAME" in captured.err and ".venv" in captured.err
    data = json.loads(next((tmp_path / "reports").glob("*.json")).read_text())
    assert data["stopped"] and {s["status"] for s in data["students"]} == {record.NOT_GRADED}
    assert "STOPPED:" in next((tmp_path / "reports").glob("*.txt")).read_text()


def _record(students, started="2026-12-01T10:00:00Z", finished="2026-12-01T10:05:00Z"):
    return record.record_of("02_batch_norm", students, {"test_a": 2.0, "test_b": 3.0},
                            {"started": started, "finished": finished, "stopped": None, "limits": "test"})


def test_reports_are_kept_one_per_run_and_the_latest_run_of_a_student_counts(tmp_path):
    class_run = [_outcome("ada", 5.0, parts={"test_a": 2.0, "test_b": 3.0}), _outcome("bob", None, "the kernel died")]
    paths = record.write_records(tmp_path, _record(class_run), class_run, "<html></html>")
    assert [p.name for p in paths] == ["02_batch_norm-20261201T100500Z.txt", "02_batch_norm-20261201T100500Z.json",
                                       "02_batch_norm-20261201T100500Z.html"]
    text = paths[0].read_text()
    assert "bob: NOT GRADED: the kernel died" in text and "ada: 5/10" in text
    again = record.write_records(tmp_path, _record(class_run), class_run, None)  # the same second: a file of its own
    assert again[0].name == "02_batch_norm-20261201T100500Z-2.txt"
    late = [_outcome("bob", 4.0, parts={"test_a": 1.0, "test_b": 3.0})]  # --student bob, later
    record.write_records(tmp_path, _record(late, "2026-12-01T11:00:00Z", "2026-12-01T11:01:00Z"), late, None)
    statuses = record.latest_statuses(tmp_path)
    assert statuses[("02_batch_norm", "bob")]["status"] == record.GRADED
    assert statuses[("02_batch_norm", "ada")]["score"] == 5.0


def test_the_class_picture_counts_misconceptions_escapes_everything_and_needs_no_script():
    cause = "running_var is off by a factor n/(n − 1)"
    students = [
        _outcome("ada", 7.0, parts={"test_a": 2.0, "test_b": 0.0}, hints=[("test_b", cause)]),
        _outcome(HOSTILE, 2.0, parts={"test_a": 2.0, "test_b": 0.0}, hints=[("test_b", cause), ("test_a", HOSTILE)]),
        _outcome("cy", 5.0, parts={"test_a": 2.0, "test_b": 3.0}),
        _outcome("dee", None, reason=HOSTILE),
    ]
    page = class_picture(_record(students))
    assert "<script" not in page and "onerror=" not in page.replace("onerror=alert", "")  # only escaped text
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    rows = re.findall(r"<tr><td class=\"part\">(.*?)</td><td>(.*?)</td><td class=\"n\">(\d+)</td><td>(.*?)</td></tr>", page)
    assert rows[0] == ("test_b", "running_var is off by a factor n/(n − 1)", "2", "ada<br>&lt;script&gt;alert(1)&lt;/script&gt;"
                       "&lt;img src=x onerror=alert(2)&gt;")  # one id a line: an id with a comma names nobody else
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 2 and all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    assert re.findall(r'(?:src|href)="(?!data:)', page) == []  # nothing loaded from anywhere
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert policy.startswith("default-src 'none'; img-src data:;") and f"'sha256-{digest}'" in policy
    assert "Not graded" in page and "3 of 3 full marks" in page and "1 of 3 full marks" in page  # test_a, test_b

    # With the release's part names (write_report adds them), the instructor reads parts, not grade ids.
    named = _record(students)
    named["part_names"] = part_names(REPO / "exercises" / "02_batch_norm") | {"test_b": "Part 3: running statistics"}
    page = class_picture(named)
    assert "<strong>Part 3: running statistics</strong>" in page and '<td class="part">Part 3: running statistics</td>' in page
    assert ">test_b<" not in page


def test_the_part_names_come_from_the_release():
    names = part_names(REPO / "exercises" / "02_batch_norm")
    assert names["test_running_statistics"] == "Part 3: running statistics and eval mode"
    assert names["test_question_1"] == "Question 1" and part_names(REPO / "no_such_folder") == {}


def _gradebook(course: Path):
    from nbgrader.api import Gradebook

    gb = Gradebook(f"sqlite:///{course / 'gradebook.db'}")
    gb.add_assignment("02_batch_norm")
    gb.add_notebook("02_batch_norm", "02_batch_norm")
    for name, points in (("test_a", 2.0), ("test_b", 3.0)):
        gb.add_grade_cell(name, "02_batch_norm", "02_batch_norm", max_score=points, cell_type="code")
    for student in ("ada", "bob", "=cmd", "carol"):
        gb.add_student(student)
    for student, scores in (("ada", (2.0, 1.0)), ("bob", (2.0, 3.0)), ("=cmd", (0.0, 0.0))):
        gb.add_submission("02_batch_norm", student)
        for name, score in zip(("test_a", "test_b"), scores):
            cell = gb.find_grade(name, "02_batch_norm", "02_batch_norm", student)
            cell.auto_score = score
        gb.db.commit()
    return gb


def test_export_writes_not_graded_as_empty_with_a_status_and_a_column_per_part(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", tool_env()["PATH"])  # nbgrader runs alembic from PATH
    # bob has last week's 5/5 in the gradebook, but this week's run could not grade him.
    run = [_outcome("ada", 3.0), _outcome("bob", None, "the kernel died"), _outcome("=cmd", 0.0)]
    record.write_records(tmp_path, _record(run), run, None)
    config = Config({"CourseDirectory": {"root": str(tmp_path)}})
    with _gradebook(tmp_path) as gb:
        StatusCsvExport(config=config, to=str(tmp_path / "grades.csv")).export(gb)
        PartsCsvExport(config=config, to=str(tmp_path / "parts.csv")).export(gb)
    with open(tmp_path / "grades.csv") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    assert (rows["ada"]["score"], rows["ada"]["status"]) == ("3", "graded")
    assert (rows["bob"]["score"], rows["bob"]["raw_score"], rows["bob"]["status"]) == ("", "", "NOT GRADED: the kernel died")
    assert (rows["carol"]["score"], rows["carol"]["status"]) == ("0", "not submitted")  # nbgrader's own rule
    assert "'=cmd" in rows  # no formula for a spreadsheet
    with open(tmp_path / "parts.csv") as f:
        parts = list(csv.reader(f))
    assert parts[0] == ["student_id", "last_name", "first_name", "email", "02_batch_norm:test_a", "02_batch_norm:test_b",
                        "02_batch_norm:total", "02_batch_norm:status"]
    by_id = {row[0]: row[4:] for row in parts[1:]}
    assert by_id["ada"] == ["2", "1", "3", "graded"]
    assert by_id["bob"] == ["", "", "", "NOT GRADED: the kernel died"]


def test_a_config_nbgrader_cannot_load_is_refused():
    check_config((REPO / "nbgrader_config.py").read_text() + MARK_STUDENT_CONFIG)  # the course's own loads
    with pytest.raises(BrokenConfig, match="does not load"):
        check_config("import no_such_module\n" + MARK_STUDENT_CONFIG)
    with pytest.raises(BrokenConfig, match="SandboxedExecute"):
        check_config("c = get_config()\n" + MARK_STUDENT_CONFIG)


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "30"], start_new_session=True)


def test_a_batch_that_runs_out_of_time_is_killed_and_blames_only_a_running_student(tmp_path):
    status, seen = tmp_path / "current", []
    # Nobody marked: nbgrader's start-up (or its reading of a notebook) stalls: the deadline strikes.
    started = time.monotonic()
    process = _sleeper()
    assert _watch(process, status, seconds=60, deadline=1.5) == (None, True)
    assert process.wait(5) is not None and time.monotonic() - started < 10
    # A student running past their own limit is the culprit.
    status.write_text(f"{json.dumps('zoe')}\n{time.time()}\nrunning\n")
    assert _watch(_sleeper(), status, seconds=1.5, deadline=60) == ("zoe", False)
    # One whose notebook is done is not blamed for what comes after (the next notebook's reading).
    status.write_text(f"{json.dumps('zoe')}\n{time.time()}\ndone\n")
    assert _watch(_sleeper(), status, seconds=1, deadline=3, finished=seen.append) == (None, True)
    assert seen == []  # nbgrader never moved past zoe: no progress line


def test_the_leftover_scan_sees_only_this_tests_processes():
    marker = f"normlayers-scan-{time.time_ns()}"
    script = "import sys, time; time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", script, marker], env={})  # ours: a descendant
    name, value = RUN_MARK.split("=", 1)
    # Another course's: detached from this process (double fork) and without the mark.
    other = subprocess.run([sys.executable, "-c", "import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
                            f"{script!r}, {marker + '-other'!r}], start_new_session=True)"], env={})
    marked = subprocess.run([sys.executable, "-c", "import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
                             f"{script!r}, {marker + '-marked'!r}], start_new_session=True)"], env={name: value})
    assert other.returncode == marked.returncode == 0
    try:
        time.sleep(0.5)
        assert len(processes_with(marker)) == 3  # every course's
        ours = processes_with(marker, ours=True)
        assert len(ours) == 2 and not any(marker + "-other" in p for p in ours), ours
    finally:
        child.kill()
        for line in processes_with(marker):
            subprocess.run(["kill", line.split(":", 1)[0]])
