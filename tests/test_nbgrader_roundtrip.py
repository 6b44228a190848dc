"""The real nbgrader pipeline, driven by the class-grading command, on the demo class.

generate_assignment must reproduce the committed release; ``python -m autograder.grade`` must
give the solution full marks, the stub zero, bugs partial credit, cheats nothing for the parts
they cheat on, and grade everyone else when some notebooks hang, kill their kernel, flood their
output or attack the grader (tests/submissions/hostile); it must list the submissions that need
attention and why, leave the course byte-identical and no process behind. Feedback must show the
checks' messages and no solution or hidden test; export must list the grades. Scores are read
from the gradebook.
"""
from __future__ import annotations

import re

import csv
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from course import ASSIGNMENTS, REPO, adopt_orphans, processes_with, marked_env
from demo_class import CLASSES, HOSTILE_EXPECTED, NOT_GRADED, TEST_CELLS, WRONG_ANSWERS, build_course
from leaks import html_text, leaked, question_explanations, question_secrets, secret_lines, secrets_in

pytestmark = pytest.mark.slow
NBGRADER = [sys.executable, "-m", "nbgrader"]
# Short limits so that the misbehaving notebooks cost seconds, not minutes.
GRADE_OPTIONS = ["--workers", "2", "--cell-timeout", "15", "--timeout", "120", "--memory-mb", "3072"]


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(NBGRADER + list(args), cwd=course, capture_output=True, text=True, timeout=1800, env=marked_env())


def grade(course: Path, assignment: str, *options: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "autograder.grade", assignment, *GRADE_OPTIONS, *options]
    return subprocess.run(command, cwd=course, capture_output=True, text=True, timeout=3600, env=marked_env())


def fingerprint(root: Path) -> dict[str, str]:
    """Every file of the course a grading run must not change (links by their target), and the
    grader's own package."""
    found = {}
    places = [root / "solutions", root / "exercises", root / "submitted", root / "nbgrader_config.py", REPO / "autograder"]
    for place in places:
        for path in [place] if place.is_file() else sorted(place.rglob("*")):
            if "__pycache__" in path.parts:
                continue
            if path.is_symlink():
                found[str(path)] = "link:" + os.readlink(path)
            elif path.is_file():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def grading_processes() -> list[str]:
    """Processes a grading run of this test may have left: sandboxes, kernels, the hostile daemons
    (not another course's, graded on the same machine at the same time)."""
    return processes_with("normlayers-student", "daemon-was-here", "sleep 86400", ours=True)


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("course")
    adopt_orphans()  # a daemon a grading run leaves behind stays this test's to find
    try:
        yield root, build_course(root)
    finally:
        adopt_orphans(False)


@pytest.fixture(scope="module")
def untouched(course) -> dict[str, str]:
    """The course's fingerprint before anything is graded."""
    return fingerprint(course[0])


@pytest.fixture(scope="module")
def graded(course, untouched) -> dict[str, subprocess.CompletedProcess]:
    root, classes = course
    runs = {}
    for assignment, students in classes.items():
        start = time.monotonic()
        runs[assignment] = grade(root, assignment)
        elapsed = time.monotonic() - start
        print(f"\nautograder.grade {assignment}: {len(students)} submissions in {elapsed:.1f} s "
              f"({elapsed / len(students):.1f} s each, 2 workers)\n{runs[assignment].stdout[-2500:]}")
    return runs


def scores(root: Path, assignment: str) -> dict[str, list[float] | None]:
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        graded = {s.student.id for s in gradebook.find_assignment(assignment).submissions}
        result = {}
        for student in graded:
            notebook = gradebook.find_submission_notebook(assignment, assignment, student)
            points = {g.name: g.score for g in notebook.grades}
            result[student] = [points[t] for t in TEST_CELLS[assignment]]
    return result


def test_every_assignment_has_a_class():
    assert sorted(CLASSES) == sorted(ASSIGNMENTS)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_generate_assignment_reproduces_the_committed_release(course, assignment):
    root, _ = course
    generated = root / "exercises" / assignment / f"{assignment}.ipynb"
    committed = REPO / "exercises" / assignment / f"{assignment}.ipynb"
    assert generated.read_bytes() == committed.read_bytes(), (
        f"exercises/ is out of date: run `nbgrader generate_assignment {assignment} --force` and commit it"
    )
    assert sorted(p.name for p in generated.parent.iterdir()) == sorted(p.name for p in committed.parent.iterdir())


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_student_scores_as_expected(course, graded, assignment):
    root, classes = course
    got = scores(root, assignment)
    expected = {s: points for s, (_, points) in classes[assignment].items() if points is not NOT_GRADED}
    assert got == expected
    ungraded = sorted(s for s, (_, points) in classes[assignment].items() if points is NOT_GRADED)
    # The command exits 1 exactly when some submission could not be graded.
    assert graded[assignment].returncode == (1 if ungraded else 0), graded[assignment].stderr[-3000:]
    for student in ungraded:
        assert f"{student}: NOT GRADED:" in graded[assignment].stdout


def report_of(run: subprocess.CompletedProcess, student: str) -> str:
    """The report's lines about one student (its line and its notes)."""
    lines = run.stdout.split("need attention:", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{student}:"))
    block = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("      - "):
            break
        block.append(line)
    return "\n".join(block)


def test_the_report_says_why_submissions_need_attention(graded):
    run = graded["02_batch_norm"]
    report = run.stdout.split("need attention:", 1)[1]
    assert "ignores_interrupts: NOT GRADED:" in report and "kills_kernel: NOT GRADED:" in report
    assert "kernel died" in report
    assert "test cell test_running_statistics was edited" in report
    assert "test cell test_module_contract was deleted" in report
    assert "tampering with torch, numpy or autograder detected" in report_of(run, "allclose_rebound")
    assert "could not be checked" in report_of(run, "grader_disabled")
    assert "uses torch's own normalization" in report_of(run, "subclass_cheat")
    assert "welford:" not in report and "eps_outside_sqrt:" not in report  # honest work is not listed
    assert "solution: NOT GRADED" not in report  # the fake log lines of signals_and_daemons blame no one


def test_routes_around_the_recorder_are_listed_for_review(graded):
    run = graded["02_batch_norm"]
    assert "needs review" in report_of(run, "hidden_torch_norm") and "threads" in report_of(run, "hidden_torch_norm")
    assert "the grader's own modules" in report_of(run, "forges_reports")
    assert "needs review" in report_of(run, "disables_checks")
    # This one evades the recorder and scores (HOSTILE_EXPECTED): the scan is what catches it.
    assert "torch's private modules or switches" in report_of(run, "no_dispatch_torch_norm")
    assert "code built or loaded at run time" in report_of(run, "hex_torch_norm")  # its names hidden in hex


def test_hostile_notebooks_leave_the_course_and_the_machine_untouched(course, graded, untouched):
    root, _ = course
    assert fingerprint(root) == untouched
    assert grading_processes() == []
    assert not Path("/tmp/owned").exists() and not Path("/tmp/daemon-was-here").exists()
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        for student in HOSTILE_EXPECTED:
            notebook = gradebook.find_submission_notebook("02_batch_norm", "02_batch_norm", student)
            assert all(g.manual_score is None and not g.extra_credit for g in notebook.grades), student
    # The autograded folders hold the notebooks nbgrader wrote, nothing the sandbox made.
    for student in HOSTILE_EXPECTED:
        folder = root / "autograded" / student / "02_batch_norm"
        assert sorted(p.name for p in folder.iterdir()) == ["02_batch_norm.ipynb"], student


def test_grading_again_gives_the_same_scores(course, graded):
    root, _ = course
    assignment = "03_layer_norm"
    before = scores(root, assignment)
    again = grade(root, assignment)
    assert again.returncode == 0, again.stdout[-3000:]
    assert scores(root, assignment) == before


def cell_error(root: Path, student: str, grade_id: str):
    path = root / "autograded" / student / "02_batch_norm" / "02_batch_norm.ipynb"
    cell = next(c for c in nbformat.read(path, as_version=4).cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert errors, (student, grade_id)
    return errors[-1]


def test_tampered_cells_say_why_they_lost_their_points(course, graded):
    root, _ = course
    error = cell_error(root, "allclose_rebound", "test_running_statistics")
    assert error.ename == "CheckFailed" and "The notebook has replaced torch.allclose" in error.evalue
    error = cell_error(root, "grader_disabled", "test_running_statistics")
    assert error.ename == "StudentCodeFailed" and "could not be checked" in error.evalue


FEEDBACK_PHRASES = {
    "01_covariate_shift": ("standardize_unbiased", "unbiased variance"),
    "02_batch_norm": ("running_var_biased", "running_var is off by a factor n/(n − 1)"),
    "03_layer_norm": ("siglip_default_eps", "has eps=1e-05"),
    "04_instance_group_norm": ("strided_groups", "strided"),
    "05_data_vs_layer_norm": ("unbiased", "unbiased variance"),
    "02b_batch_norm_backward": ("no_mean_path", "the path through the mean is missing"),
    "06_training_dynamics": ("fold_no_eps", "ε is missing"),
    "07_practice_lab": ("local_statistics", "each process normalized its own shard"),
    "08_large_models": ("eps_of_input_dtype", "float16's own eps"),
}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_feedback_shows_messages_but_no_hidden_tests(course, graded, assignment):
    root, classes = course
    done = nbgrader(root, "generate_feedback", assignment, "--force")
    assert done.returncode == 0, done.stderr[-3000:]
    files = {p.parts[-3]: p.read_text() for p in (root / "feedback").glob(f"*/{assignment}/*.html")}
    pages = {student: html_text(html) for student, html in files.items()}
    # Every student has a page: the grade command writes one for a student it could not grade.
    assert set(pages) == set(classes[assignment])
    for student, (_, points) in classes[assignment].items():
        assert (f"{assignment}: not graded" in pages[student]) == (points is NOT_GRADED), student
    for student, html in files.items():  # only the template's scripts run (runs_in_browser tries more)
        head = html[:html.index("</head>")]
        assert head.index('http-equiv="Content-Security-Policy"') < head.index("<script") if "<script" in head \
            else 'http-equiv="Content-Security-Policy"' in head, student
        nonces = set(re.findall(r'<script nonce="([^"]+)"', html))
        assert len(nonces) <= 1 and html.count("<script") == sum(html.count(f'<script nonce="{n}"') for n in nonces), student
        assert re.findall(r"<[a-zA-Z]+[^>]*\son[a-z]+\s*=|<(?:iframe|object|embed|svg)\b", html) == [], student
    for student, text in pages.items():
        if student in HOSTILE_EXPECTED:
            continue  # their own cells name the markers and print paths; checked below for what they found
        assert leaked(text, kinds=("HIDDEN TESTS",)) == [], student
        # Test cells show the message only: no frames of the grader (a student's own cells keep
        # their tracebacks, which show only the student's code).
        assert "autograder/" not in text and "check_untampered" not in text, student
    if "grader_disabled" in pages:  # its cells say why nothing was credited
        assert "could not be checked" in pages["grader_disabled"] or "has replaced" in pages["grader_disabled"]
    for student in set(HOSTILE_EXPECTED) & set(pages):  # whatever they printed, they found no secret
        submitted = nbformat.read(root / "submitted" / student / assignment / f"{assignment}.ipynb", as_version=4)
        own = "\n".join(c.source for c in submitted.cells)
        assert [line for line in secret_lines() if line in pages[student] and line not in own] == [], student
    student, phrase = FEEDBACK_PHRASES[assignment]
    assert phrase in pages[student]
    # The graded questions: a wrong answer's feedback teaches the reasoning; nobody else's feedback
    # holds an explanation or a hidden grading call, and a right answer gives nothing away.
    explanations = question_explanations(assignment)
    assert explanations, assignment
    for student, text in pages.items():
        if student != "wrong_answers":
            assert [label for label, why in explanations.items() if why in text] == [], student
            assert "grade_choice" not in text and "grade_number" not in text and "key=" not in text, student
    assert "Question 1: correct" in pages["solution"] and "Question 2: correct" in pages["solution"]
    if assignment == "02_batch_norm":
        wrong = pages["wrong_answers"]
        assert len(WRONG_ANSWERS) == len(explanations) == 2
        for label, why in explanations.items():
            assert f"{label}: wrong: your answer" in wrong and why in wrong, label
        assert "Question 2, your justification: The channel is constant" in wrong  # shown to the instructor
        assert "grade_choice" not in wrong and "grade_number" not in wrong and "key=" not in wrong


def test_the_generated_release_holds_no_answer_to_a_question(course):
    root, _ = course
    assert secrets_in(root / "exercises", question_secrets()) == []


def test_export_lists_every_students_grade_and_never_a_zero_for_not_graded(course, graded):
    root, classes = course
    done = nbgrader(root, "export", "--to", str(root / "grades.csv"))
    assert done.returncode == 0, done.stderr[-3000:]
    with open(root / "grades.csv") as f:
        rows = {(row["assignment"], row["student_id"]): (row["score"], row["status"]) for row in csv.DictReader(f)}
    everyone = {student for students in classes.values() for student in students}
    expected = {}
    for assignment in classes:
        for student in everyone:  # nbgrader lists every student for every assignment
            if student not in classes[assignment]:
                expected[(assignment, student)] = ("0", "not submitted")
            elif classes[assignment][student][1] is NOT_GRADED:
                expected[(assignment, student)] = ("", "NOT GRADED")
            else:
                expected[(assignment, student)] = (f"{float(sum(classes[assignment][student][1])):g}", "graded")
    assert {key: (score, status.split(":")[0]) for key, (score, status) in rows.items()} == expected
    assert rows[("02_batch_norm", "kills_kernel")][1].startswith("NOT GRADED: the kernel died")


def test_the_per_part_export_has_a_column_per_part_and_a_status(course, graded):
    root, classes = course
    done = nbgrader(root, "export", "--exporter", "autograder.grading.export.PartsCsvExport", "--to", str(root / "parts.csv"))
    assert done.returncode == 0, done.stderr[-3000:]
    with open(root / "parts.csv") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    columns = [f"02_batch_norm:{cell}" for cell in TEST_CELLS["02_batch_norm"]]
    assert [float(rows["running_var_biased"][c]) for c in columns] == classes["02_batch_norm"]["running_var_biased"][1]
    assert rows["running_var_biased"]["02_batch_norm:status"] == "graded"
    assert [rows["kills_kernel"][c] for c in columns + ["02_batch_norm:total"]] == [""] * (len(columns) + 1)
    assert rows["kills_kernel"]["02_batch_norm:status"].startswith("NOT GRADED")


def report_json(root: Path, assignment: str, index: int = 0) -> dict:
    """One of the grade command's kept reports of ``assignment`` (0: the first run)."""
    import json

    return json.loads(sorted((root / "reports").glob(f"{assignment}-*.json"))[index].read_text())


def test_the_report_is_kept_with_the_class_picture_and_notes_what_happened(course, graded):
    root, classes = course
    run = graded["02_batch_norm"]
    students = classes["02_batch_norm"]
    # Progress: one line per student as they finish, with the time left.
    progress = re.findall(r"^\[\s*(\d+)/(\d+)\] (\S+): .*\((\d+) s(?:, about .* left)?\)$", run.stdout, re.M)
    assert {p[2] for p in progress} == set(students) and {p[1] for p in progress} == {str(len(students))}
    assert "left)" in run.stdout
    stem = re.search(r"Report: (reports/02_batch_norm-\d{8}T\d{6}Z)\.txt", run.stdout).group(1)
    for ext in (".txt", ".json", ".html"):
        assert (root / f"{stem}{ext}").is_file(), ext
    data = report_json(root, "02_batch_norm")
    entries = {entry["student"]: entry for entry in data["students"]}
    assert sorted(entries) == sorted(students)
    assert entries["kills_kernel"]["status"] == "NOT GRADED" and "kernel died" in entries["kills_kernel"]["reason"]
    assert entries["floods_output"]["status"] == "graded" and entries["floods_output"]["score"] == 10
    assert any("output limit" in note for note in entries["floods_output"]["notes"])
    assert any("interrupted at the cell time limit" in note for note in entries["hangs"]["notes"])
    assert any("MemoryError" in note for note in entries["eats_memory"]["notes"])
    assert any("SyntaxError" in note for note in entries["syntax_error"]["notes"])
    assert entries["running_var_biased"]["parts"]["test_running_statistics"] == 0
    text = (root / f"{stem}.txt").read_text()
    assert "kills_kernel: NOT GRADED" in text and "running_var_biased: 5/10" in text
    # The class picture: the misconception, the students who showed it.
    page = (root / f"{stem}.html").read_text()
    row = next(r for r in re.findall(r"<tr>.*?</tr>", page) if "running_var is off by a factor n/(n − 1)" in r)
    assert "running_var_biased" in row and "edited_test" in row
    assert page.count('src="data:image/png;base64,') == len(TEST_CELLS["02_batch_norm"])
    assert "<script" not in page


def test_a_flood_grades_the_same_on_a_loaded_machine(course, graded):
    """floods_output again, alone (--student), while busy processes take every core."""
    root, _ = course
    before = scores(root, "02_batch_norm")["floods_output"]
    first = {e["student"]: e for e in report_json(root, "02_batch_norm")["students"]}["floods_output"]
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range((os.cpu_count() or 2) + 1)]
    try:
        again = grade(root, "02_batch_norm", "--student", "floods_output")
    finally:
        for process in busy:
            process.kill()
            process.wait()
    assert again.returncode == 0, again.stdout[-3000:]
    assert re.search(r"^\[1/1\] floods_output: 10/10", again.stdout, re.M)
    assert scores(root, "02_batch_norm")["floods_output"] == before
    latest = report_json(root, "02_batch_norm", -1)
    assert [e["student"] for e in latest["students"]] == ["floods_output"]
    assert {k: latest["students"][0][k] for k in ("status", "score", "notes", "parts")} == \
        {k: first[k] for k in ("status", "score", "notes", "parts")}
