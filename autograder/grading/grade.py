"""Grade a whole class with nbgrader, safely and in parallel.

    python -m autograder.grade 02_batch_norm [--workers N] [--course DIR]

runs ``nbgrader autograde`` over every submission in ``submitted/<student>/<assignment>/`` and
survives submissions that hang, kill their kernel, swallow interrupts, call ``sys.exit``,
allocate huge memory, print without end or attack the grader: every other student is graded, and
the end lists the submissions that need attention and why.

How: the class is split into batches; each batch is graded by its own ``nbgrader autograde``
process in a private copy of the course (its own copy of the gradebook).  No student code runs
in those processes: each notebook's kernel runs in a bubblewrap sandbox that sees neither the
course nor the private copy, and every test cell is judged in the nbgrader process
(:mod:`autograder.grading.execute`).  SQLite must not see concurrent writers, so only this
process writes the course's gradebook: it merges each batch's automatic scores and autograded
notebooks as the batch finishes.  A student whose batch failed is graded again alone (once), so
one bad notebook costs only its author the grade.  Which notebook ran too long is read from a
status file the sandboxed kernel cannot write, never from a log.

Without a working sandbox (no ``bwrap``, user namespaces switched off) the command refuses to
grade; ``--unsafe-no-sandbox`` grades anyway, and then every line of the report says so.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from autograder.grading.execute import STATUS_FILE, copy_regular_files
from autograder.grading.report import NBGRADER_FILES, Outcome, inspect_submission, print_report
from autograder.grading.sandbox import Sandbox, SandboxUnavailable, check_available

NBGRADER = [sys.executable, "-m", "nbgrader"]


@dataclass(frozen=True)
class Limits:
    """What one submission may use while it is graded."""

    seconds: float = 600.0  # wall clock for one submission, nbgrader's start-up included
    memory_mb: int = 4096  # address space of each process in the student's sandbox
    cell_timeout: int = 120  # nbgrader's Execute.timeout
    sandboxed: bool = True  # False only with --unsafe-no-sandbox
    gpu: bool = False  # pass NVIDIA devices into the sandbox


@dataclass
class Batch:
    students: list[str]
    log: str = ""
    returncode: int | None = None
    culprit: str | None = None  # the student whose notebook ran past the time limit
    graded: set[str] = field(default_factory=set)


def submitted_students(course: Path, assignment: str) -> list[str]:
    root = course / "submitted"
    return sorted(p.name for p in root.iterdir() if (p / assignment).is_dir()) if root.is_dir() else []


def tool_env() -> dict[str, str]:
    """The environment for nbgrader and jupyter-book subprocesses: this interpreter's bin first
    (nbgrader runs `alembic` from PATH; kernels must use the same environment)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _private_course(course: Path, assignment: str, students: list[str], root: Path) -> Path:
    """A copy of the course with its own gradebook and only these students' submissions (their
    regular files: a link to the course's solutions or to /dev/zero is not followed)."""
    shutil.copy(course / "nbgrader_config.py", root)
    shutil.copy(course / "gradebook.db", root)
    for student in students:
        target = root / "submitted" / student / assignment
        target.mkdir(parents=True)
        copy_regular_files(course / "submitted" / student / assignment, target)
    return root


def run_batch(course: Path, assignment: str, students: list[str], limits: Limits) -> tuple[Batch, Path]:
    """Run ``nbgrader autograde`` for ``students`` in a private course; return the batch and its folder."""
    batch = Batch(students)
    root = Path(tempfile.mkdtemp(prefix="grade-"))
    _private_course(course, assignment, students, root)
    # The root on the command line: a CourseDirectory.root in the grader's own config (nbgrader's
    # JupyterHub set-up puts one in ~/.jupyter/nbgrader_config.py) would grade the real course.
    command = NBGRADER + ["autograde", assignment, "--create", "--force", f"--CourseDirectory.root={root}",
                          f"--SandboxedExecute.timeout={limits.cell_timeout}",
                          f"--SandboxedExecute.memory_mb={limits.memory_mb}",
                          f"--SandboxedExecute.sandboxed={limits.sandboxed}",
                          f"--SandboxedExecute.gpu={limits.gpu}",
                          f"--SandboxedExecute.status_file={root / STATUS_FILE}",
                          f"--SandboxedExecute.release_dir={release_dir(course, assignment)}"]
    with open(root / "nbgrader.log", "wb") as log:
        process = subprocess.Popen(command, cwd=root, stdout=log, stderr=subprocess.STDOUT, env=tool_env(),
                                   start_new_session=True)
        batch.culprit = _watch(process, root / STATUS_FILE, limits.seconds)
        batch.returncode = process.wait()
    batch.log = (root / "nbgrader.log").read_text(errors="replace")
    batch.graded = {s for s in students if s != batch.culprit and (root / "autograded" / s / assignment).is_dir()
                    and _has_submission(root, assignment, s)}
    return batch, root


def _watch(process: subprocess.Popen, status: Path, seconds: float) -> str | None:
    """Wait for ``process``; kill it when one notebook runs longer than ``seconds``.

    The grading process writes the student whose notebook it starts into ``status``, a file in
    the private course that no sandbox can see, so a notebook cannot blame a classmate.
    Returns that student if it was killed.
    """
    current, since = None, time.monotonic()
    while process.poll() is None:
        time.sleep(0.5)
        try:
            found = status.read_text().split("\n", 1)[0].strip()
        except OSError:
            found = ""
        if found and found != current:
            current, since = found, time.monotonic()
        if current is not None and time.monotonic() - since > seconds:
            os.killpg(process.pid, signal.SIGKILL)  # nbgrader and its kernels' sandboxes (they die with it)
            return current
    return None


def release_dir(course: Path, assignment: str) -> Path:
    """The course's release folder of ``assignment`` (nbgrader_config's release_directory)."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config, PyFileConfigLoader

    config = Config()
    if (course / "nbgrader_config.py").is_file():
        config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    directory = CourseDirectory(config=config)
    return course / directory.release_directory / assignment


def _has_submission(root: Path, assignment: str, student: str) -> bool:
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        try:
            gb.find_submission(assignment, student)
        except MissingEntry:
            return False
    return True


def _copy_autograded(source: Path, target: Path) -> None:
    """The autograded notebooks, as regular files (no links, nothing large), and nbgrader's
    exchange files beside them: generate_feedback copies them into feedback/, where
    release_feedback needs timestamp.txt and submission_secret.txt to name the feedback file."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for path in sorted([*source.glob("*.ipynb"), *(source / name for name in sorted(NBGRADER_FILES))]):
        limit = 64 << 20 if path.suffix == ".ipynb" else 4096
        if path.is_file() and not path.is_symlink() and path.stat().st_size < limit:
            shutil.copyfile(path, target / path.name)


def merge(course: Path, private: Path, assignment: str, student: str) -> None:
    """Copy one student's automatic scores and autograded notebooks from a private course.

    Only what nbgrader computed there crosses: automatic scores and comments, the late penalty
    and the timestamp.  Manual scores and extra credit in the course's gradebook (the
    instructor's) are left as they are.
    """
    from nbgrader.api import Gradebook, MissingEntry
    from sqlalchemy.exc import SAWarning

    _copy_autograded(private / "autograded" / student / assignment, course / "autograded" / student / assignment)
    with Gradebook(f"sqlite:///{private / 'gradebook.db'}") as src, Gradebook(f"sqlite:///{course / 'gradebook.db'}") as dst:
        graded = src.find_submission(assignment, student)
        person = src.find_student(student)
        dst.update_or_create_student(student, first_name=person.first_name, last_name=person.last_name,
                                     email=person.email, lms_user_id=person.lms_user_id)
        try:
            submission = dst.find_submission(assignment, student)
        except MissingEntry:
            with warnings.catch_warnings():  # nbgrader's own add_submission trips SQLAlchemy's autoflush warning
                warnings.simplefilter("ignore", category=SAWarning)
                submission = dst.add_submission(assignment, student)
        submission.timestamp, submission.extension = graded.timestamp, graded.extension
        for notebook in graded.notebooks:
            copy = dst.find_submission_notebook(notebook.name, assignment, student)
            copy.flagged = notebook.flagged
            copy.late_submission_penalty = notebook.late_submission_penalty
            for grade in notebook.grades:
                mine = dst.find_grade(grade.name, notebook.name, assignment, student)
                mine.auto_score, mine.needs_manual_grade = grade.auto_score, grade.needs_manual_grade
            for comment in notebook.comments:
                mine = dst.find_comment(comment.name, notebook.name, assignment, student)
                mine.auto_comment = comment.auto_comment
        dst.db.commit()


def has_assignment(course: Path, assignment: str) -> bool:
    """Whether the course's gradebook exists and records ``assignment`` (``generate_assignment`` did)."""
    from nbgrader.api import Gradebook, MissingEntry

    if not (course / "gradebook.db").exists():
        return False
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            return False
    return True


def register(course: Path, student: str) -> None:
    """Put a student whose notebook could not be graded on the roster (export then lists them)."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_student(student)


def failure_reason(batch: Batch, limits: Limits) -> str:
    """Why a student graded alone got no grade, in words an instructor can act on."""
    log = batch.log
    if re.search(r"MemoryError|Cannot allocate memory|std::bad_alloc|out of memory", log):
        return f"ran out of memory (limit {limits.memory_mb} MB per process)"
    if "became unresponsive" in log or "UnresponsiveKernelError" in log or "Timeout waiting for IOPub" in log:
        return "the kernel ignored the interrupt after a cell timed out (an endless loop inside try/except?)"
    if re.search(r"DeadKernelError|Kernel died|kernel died", log):
        return "the kernel died while running the notebook (os._exit, a crash, or memory)"
    if "SchemaTooOld" in log or "old version of nbgrader" in log or "DeduplicateIds" in log:
        return ("nbgrader refused the notebook's cell metadata (cells copied or their nbgrader ids "
                "changed, so that two cells share one id?)")
    if batch.returncode is not None and batch.returncode < 0:
        return f"nbgrader was killed by signal {-batch.returncode} (memory or output too large?)"
    errors = [line for line in log.splitlines() if "ERROR" in line]
    return "nbgrader could not grade it: " + (errors[-1].split("]", 1)[-1].strip() if errors else f"exit code {batch.returncode}")


def grade_class(course: Path, assignment: str, workers: int, limits: Limits, batch_size: int = 8,
                out=sys.stdout) -> list[Outcome]:
    """Grade every submission of ``assignment``; return one outcome per student."""
    students = submitted_students(course, assignment)
    if not has_assignment(course, assignment):
        raise SystemExit(f"the gradebook in {course} does not know {assignment} (a fresh course copy?): "
                         f"run `nbgrader generate_assignment {assignment} --force` first")
    if limits.sandboxed:
        try:
            check_available(Sandbox(memory_mb=limits.memory_mb, gpu=limits.gpu))
        except SandboxUnavailable as error:
            raise SystemExit(
                f"Refusing to grade: {error}\nStudent code must not run with the grader's access to the "
                "course and its gradebook. Only if you trust every submission, pass --unsafe-no-sandbox."
            ) from None
    too_large = [s for s in students if _submission_bytes(course, assignment, s) > MAX_SUBMISSION_BYTES]
    students_to_grade = [s for s in students if s not in too_large]
    # Batches of at most batch_size, as even as possible, in a multiple of the worker count.
    rounds = max(1, -(-len(students_to_grade) // (max(1, workers) * batch_size)))
    size = max(1, -(-len(students_to_grade) // (max(1, workers) * rounds)))
    batches = [students_to_grade[i:i + size] for i in range(0, len(students_to_grade), size)]
    outcomes: dict[str, Outcome] = {}
    lock = threading.Lock()
    done = 0
    start = time.monotonic()

    def finish(student: str, private: Path | None, reason: str | None) -> None:
        nonlocal done
        with lock:  # one writer for the course's gradebook
            if private is not None:
                merge(course, private, assignment, student)
            else:
                register(course, student)
            outcome = inspect_submission(course, assignment, student, reason, sandboxed=limits.sandboxed)
            outcomes[student] = outcome
            done += 1
            print(f"[{done:>{len(str(len(students)))}}/{len(students)}] {outcome.line()} "
                  f"({time.monotonic() - start:.0f} s)", file=out, flush=True)

    def work(batch_students: list[str]) -> None:
        batch, private = run_batch(course, assignment, batch_students, limits)
        try:
            for student in batch_students:
                if student in batch.graded:
                    finish(student, private, None)
        finally:
            shutil.rmtree(private, ignore_errors=True)
        rest = [s for s in batch_students if s not in batch.graded and s != batch.culprit]
        if batch.culprit is not None:
            finish(batch.culprit, None, f"still running after {limits.seconds:g} s (an endless loop that "
                                        "ignores interrupts?); killed")
            if rest:
                work(rest)  # they never ran, or ran beside the culprit: grade them again together
        elif len(batch_students) == 1 and rest:
            finish(rest[0], None, failure_reason(batch, limits))
        else:
            for student in rest:  # graded alone, so that one bad notebook stays its author's problem
                work([student])

    print(f"Grading {len(students)} submissions of {assignment} with {workers} worker(s), "
          f"batches of up to {size}" + ("" if limits.sandboxed else f" {UNSANDBOXED}"), file=out, flush=True)
    for student in too_large:
        finish(student, None, f"the submission is larger than {MAX_SUBMISSION_BYTES >> 20} MB; not opened")
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for future in as_completed([pool.submit(work, b) for b in batches]):
            future.result()
    return [outcomes[s] for s in students]


MAX_SUBMISSION_BYTES = 64 << 20
UNSANDBOXED = "[UNSANDBOXED: student code ran with the grader's access]"


def _submission_bytes(course: Path, assignment: str, student: str) -> int:
    folder = course / "submitted" / student / assignment
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.grade", description=__doc__.split("\n\n")[0])
    parser.add_argument("assignment")
    parser.add_argument("--course", type=Path, default=Path.cwd(), help="the course directory (default: here)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="parallel nbgrader processes")
    parser.add_argument("--batch-size", type=int, default=8, help="submissions per nbgrader process")
    parser.add_argument("--timeout", type=float, default=Limits.seconds, help="seconds per submission")
    parser.add_argument("--cell-timeout", type=int, default=Limits.cell_timeout, help="seconds per cell")
    parser.add_argument("--memory-mb", type=int, default=Limits.memory_mb,
                        help="address space per sandboxed process in MB; 0 for none (needed on GPU machines)")
    parser.add_argument("--gpu", action="store_true", help="pass the NVIDIA devices into each student's sandbox")
    parser.add_argument("--unsafe-no-sandbox", action="store_true",
                        help="run student code WITHOUT the sandbox, with the grader's access to the course "
                             "and every gradebook row (only for submissions you trust)")
    args = parser.parse_args(argv)
    limits = Limits(args.timeout, args.memory_mb, args.cell_timeout, not args.unsafe_no_sandbox, args.gpu)
    outcomes = grade_class(args.course.resolve(), args.assignment, args.workers, limits, args.batch_size)
    print_report(outcomes)
    return 1 if any(o.score is None for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
