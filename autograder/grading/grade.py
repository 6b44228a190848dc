"""Grade a whole class with nbgrader, safely and in parallel, on one machine or on a Dask cluster.

    python -m autograder.grade 02_batch_norm [--workers N] [--course DIR] [--scheduler tls://host:8786 ...]

runs ``nbgrader autograde`` over every submission in ``submitted/<student>/<assignment>/`` and
survives submissions that hang, kill their kernel, swallow interrupts, call ``sys.exit``,
allocate huge memory, print without end or attack the grader: every other student is graded, and
the end lists the submissions that need attention and why.

How: the class is split into batches; each batch is a task (:mod:`autograder.grading.task`)
that receives the submissions, the release and the course's settings as data and grades them with
its own ``nbgrader autograde`` process in a private course with a gradebook of its own.  No
student code runs in those processes: each notebook's kernel runs in a bubblewrap sandbox that
sees neither the course nor the private course, and every test cell is judged in the nbgrader
process (:mod:`autograder.grading.execute`).  The tasks run on an embedded Dask cluster, on an
existing one (``--scheduler``) or in a plain thread pool (``--scheduler pool``)
(:mod:`autograder.grading.schedulers`).  Only this process writes the course's gradebook
(SQLite or PostgreSQL, :mod:`autograder.grading.gradebook`): it merges each student's scores and
autograded notebooks once, as their batch finishes.  A student whose batch failed is graded again
alone (once), so one bad notebook costs only its author the grade.  Which notebook ran too long is
read from a status file the sandboxed kernel cannot write, never from a log.

Without a working sandbox (no ``bwrap``, user namespaces switched off) the command refuses to
grade; ``--unsafe-no-sandbox`` grades anyway, and then every line of the report says so.
"""
from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import sys
import threading
import time
from pathlib import Path

from autograder.grading import course_secret, gradebook, not_graded, record
from autograder.grading.picture import class_picture
from autograder.grading.report import Outcome, inspect_submission, part_maxima, part_names, print_report, printable
from autograder.grading.rescore import checked_result
from autograder.core import withheld
from autograder.grading.sandbox import Sandbox, SandboxUnavailable, WrongPackage, check_available, check_course_outside
from autograder.grading.schedulers import InsecureCluster, cluster_security, make_scheduler
from autograder.grading.task import (
    BatchJob,
    BatchResult,
    Limits,
    MARK_STUDENT_CONFIG,
    BrokenConfig,
    WorkerRefused,
    batch_deadline,
    check_config,
    grader_version,
    is_authentic,
    read_files,
    tool_env,
    write_files,
)

__all__ = ["Limits", "grade_class", "main", "release_dir", "submitted_students", "tool_env"]


def submitted_students(course: Path, assignment: str) -> list[str]:
    root = course / "submitted"
    return sorted(p.name for p in root.iterdir() if (p / assignment).is_dir()) if root.is_dir() else []


def release_dir(course: Path, assignment: str) -> Path:
    """The course's release folder of ``assignment`` (nbgrader_config's release_directory)."""
    return course / gradebook.course_settings(course).release_directory / assignment


def _save_autograded(course: Path, assignment: str, student: str, files: dict[str, bytes]) -> None:
    target = course / "autograded" / student / assignment
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    write_files(files, target)


def failure_reason(batch: BatchResult, limits: Limits) -> str:
    """Why a student graded alone got no grade, in words an instructor can act on."""
    log = batch.log
    if re.search(r"MemoryError|Cannot allocate memory|std::bad_alloc|out of memory", log):
        return f"ran out of memory (limit {limits.memory_mb} MB)"
    if "Timeout waiting for IOPub" in log:
        return "the notebook's output did not stop arriving (an output flood?)"
    if "became unresponsive" in log or "UnresponsiveKernelError" in log:
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


def out_of_time_reason(limits: Limits, students: int) -> str:
    return (f"its batch ran past its overall deadline ({batch_deadline(limits, students):g} s) before this notebook "
            "was executed: nbgrader's own reading of it took too long (a huge notebook?)")


def grade_class(course: Path, assignment: str, workers: int, limits: Limits, batch_size: int = 8,
                out=sys.stdout, scheduler: str = "local", security=None,
                only: list[str] | None = None) -> list[Outcome]:
    """Grade every submission of ``assignment`` (or only the students in ``only``); return one
    outcome per student.

    ``scheduler``: ``local`` (an embedded Dask cluster of ``workers`` threads), ``pool`` (a thread
    pool) or the ``tls://`` address of a Dask scheduler, whose workers then set the parallelism
    (``security``: :func:`autograder.grading.schedulers.cluster_security`).
    """
    students = submitted_students(course, assignment)
    if only:
        missing = sorted(set(only) - set(students))
        if missing:
            raise SystemExit(f"No submission of {assignment} from {', '.join(map(printable, missing))} in "
                             f"{course / 'submitted'} (run `nbgrader collect {assignment}` first?)")
        students = [s for s in students if s in only]
    if not gradebook.has_assignment(course, assignment):
        raise SystemExit(f"the gradebook {gradebook.describe(gradebook.db_url(course))} does not know {assignment} "
                         f"(a fresh course copy?): run `nbgrader generate_assignment {assignment} --force` first")
    try:
        withheld.check_present()
    except withheld.HiddenCasesUnavailable as error:
        raise SystemExit(f"Refusing to grade before any student: {error}") from None
    if limits.sandboxed:
        try:
            check_course_outside(course)
            check_available(Sandbox(memory_mb=limits.memory_mb, gpu=limits.gpu))
        except WrongPackage as error:
            raise SystemExit(f"Refusing to grade before any student: {error}") from None
        except SandboxUnavailable as error:
            raise SystemExit(
                f"Refusing to grade: {error}\nStudent code must not run with the grader's access to the "
                "course and its gradebook. Only if you trust every submission, pass --unsafe-no-sandbox."
            ) from None
    try:
        check_config((course / "nbgrader_config.py").read_text() + MARK_STUDENT_CONFIG)
    except (OSError, BrokenConfig) as error:
        raise SystemExit(f"Refusing to grade before any student: {error}. nbgrader would go on without it, "
                         "with no sandbox: fix the course's nbgrader_config.py (compare it with the repository's).") from None
    too_large = [s for s in students if _submission_bytes(course, assignment, s) > MAX_SUBMISSION_BYTES]
    students_to_grade = [s for s in students if s not in too_large]
    shared = dict(release=read_files(release_dir(course, assignment)), config=(course / "nbgrader_config.py").read_text(),
                  template=gradebook.assignment_template(course, assignment), limits=limits,
                  grader_version=grader_version(), result_key=secrets.token_bytes(32),
                  input_secret=course_secret.read_or_create(course),
                  progress_topic=f"normlayers-progress-{secrets.token_hex(8)}")
    merged: dict[str, str | None] = {}  # student -> None (graded) or why not
    expected = set(students)
    maximum = gradebook.max_score(course, assignment)
    start = time.monotonic()

    shown: dict[str, float] = {}  # student -> the score a progress line showed
    lock = threading.Lock()

    def say(student: str, line: str) -> None:
        """One progress line: how many are done, the student's line, the time and what is left."""
        done, elapsed = len(set(merged) | set(shown)), time.monotonic() - start
        left = len(students) - done
        estimate = f", about {_duration(elapsed / done * left)} left" if done and left else ""
        print(f"[{done:>{len(str(len(students)))}}/{len(students)}] {line} ({elapsed:.0f} s{estimate})",
              file=out, flush=True)

    def executed(student: str, score) -> None:
        """A worker's word that a student's notebook is done (shown now, merged with its batch)."""
        with lock:
            if student in expected and student not in merged and student not in shown and score is not None:
                shown[student] = score
                say(student, Outcome(student, score, maximum, None, [], limits.sandboxed).line())

    def finish(student: str, graded, reason: str | None) -> None:
        """Merge one student's result at once (the report reads the gradebook at the end)."""
        if student in merged or student not in expected:
            return  # merged already (Dask ran a batch twice), or no student of this class
        score = None
        try:
            if graded is not None:  # a worker's result: scrubbed and scored again here
                grades, files = checked_result(course, assignment, *graded)
                gradebook.merge(course, assignment, student, grades)  # first: files follow a grade
                _save_autograded(course, assignment, student, files)
                score = grades.total()
            else:
                gradebook.register(course, student)
        except Exception as error:  # noqa: BLE001 - the database refused; the others are still graded
            reason = f"the grade could not be written to the gradebook ({type(error).__name__}: {error})"
        with lock:
            merged[student] = None if score is not None else (reason or "no grade")
            if shown.get(student, object()) != score:  # not shown yet, or merged otherwise than shown
                say(student, Outcome(student, score, maximum, merged[student], [], limits.sandboxed).line())

    try:
        runner = make_scheduler(scheduler, workers, security)
    except InsecureCluster as error:
        raise SystemExit(f"Refusing to grade: {error}") from None
    runner.on_progress(shared["progress_topic"], executed)
    for student in too_large:
        finish(student, None, f"the submission is larger than {MAX_SUBMISSION_BYTES >> 20} MB; not opened")
    try:
        # Batches of at most batch_size, as even as possible, in a multiple of the worker count.
        rounds = max(1, -(-len(students_to_grade) // (runner.workers * batch_size)))
        size = max(1, -(-len(students_to_grade) // (runner.workers * rounds)))
        print(f"Grading {len(students)} submissions of {assignment} on {runner.describe()}, batches of up to {size}"
              + ("" if limits.sandboxed else f" {UNSANDBOXED}"), file=out, flush=True)
        pending = {}

        def submit(batch: list[str]) -> None:
            job = BatchJob(assignment, {s: read_files(course / "submitted" / s / assignment) for s in batch}, **shared,
                           extensions=gradebook.extensions(course, assignment, batch))
            pending[runner.submit(job)] = batch

        for i in range(0, len(students_to_grade), size):
            submit(students_to_grade[i:i + size])
        while pending:
            done, _ = runner.wait_any(pending)
            for future in done:
                batch = pending.pop(future)
                try:
                    result = future.result()
                    if not is_authentic(shared["result_key"], result):  # not signed with this run's key
                        result = BatchResult(batch, log="ERROR the grading task's result is not signed with this run's key")
                except WorkerRefused as error:
                    raise SystemExit(f"Refusing to grade: {printable(str(error))}") from None
                except Exception as error:  # noqa: BLE001 - a task Dask gave up on (workers lost, ...)
                    result = BatchResult(batch, log=f"ERROR the grading task failed: {type(error).__name__}: {error}")
                if sorted(result.students) != sorted(batch):  # not this batch's result: trust none of it
                    result = BatchResult(batch, log="ERROR the grading task returned another batch's result")
                if result.culprit is not None and result.culprit not in batch:
                    result.culprit, result.graded = None, {}  # a name not in the batch: grade each alone
                for student in batch:
                    if student in result.graded:
                        finish(student, result.graded[student], None)
                rest = [s for s in batch if s not in result.graded and s != result.culprit]
                for student in rest:
                    shown.pop(student, None)  # shown as done, but not in the result: graded again
                if result.culprit is not None:
                    finish(result.culprit, None, out_of_time_reason(limits, len(batch)) if result.out_of_time else
                           f"still running after {limits.seconds:g} s (an endless loop that ignores interrupts?); killed")
                    if rest:
                        submit(rest)  # they never ran, or ran beside the culprit: grade them again together
                elif len(batch) == 1 and rest:
                    finish(rest[0], None, out_of_time_reason(limits, 1) if result.out_of_time
                           else failure_reason(result, limits))
                else:
                    for student in rest:  # graded alone, so that one bad notebook stays its author's problem
                        submit([student])
    finally:
        runner.close()
    outcomes = [Outcome(s, None, maximum, merged[s], [], limits.sandboxed) if s in too_large
                else _inspect(course, assignment, s, merged[s], maximum, limits) for s in students]
    try:  # a student who was not graded gets a feedback page that says why and what to do
        not_graded.update(course, assignment, {s: merged[s] for s in students})
    except Exception as error:  # noqa: BLE001 - the grades stand; the pages can be written again
        print(f"The feedback pages of the students not graded could not be written ({type(error).__name__}: "
              f"{printable(str(error))})", file=out, flush=True)
    return outcomes


def _inspect(course: Path, assignment: str, student: str, reason: str | None, maximum: float,
             limits: Limits) -> Outcome:
    """The report's view of one merged student; a notebook it cannot read stops nobody else's."""
    try:
        return inspect_submission(course, assignment, student, reason, sandboxed=limits.sandboxed)
    except Exception as error:  # noqa: BLE001
        problem = f"the report could not inspect this submission ({type(error).__name__}); look at it"
        return Outcome(student, None, maximum, reason or f"graded and merged, but {problem}", [], limits.sandboxed)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


MAX_SUBMISSION_BYTES = 64 << 20
UNSANDBOXED = "[UNSANDBOXED: student code ran with the grader's access]"


def _submission_bytes(course: Path, assignment: str, student: str) -> int:
    folder = course / "submitted" / student / assignment
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.grade", description=__doc__.split("\n\n")[0])
    parser.add_argument("assignment")
    parser.add_argument("--course", type=Path, default=Path.cwd(), help="the course directory (default: here)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="parallel nbgrader processes on this machine (a cluster's workers set their own)")
    parser.add_argument("--scheduler", default="local",
                        help="where batches run: 'local' (an embedded Dask cluster, the default), the address of "
                             "a Dask scheduler (tls://host:8786, with the three --tls options) whose workers grade, "
                             "or 'pool' (a thread pool)")
    parser.add_argument("--tls-ca-file", help="the course's CA certificate (python -m autograder.grading.certs)")
    parser.add_argument("--tls-cert", help="the grade command's certificate, signed by that CA")
    parser.add_argument("--tls-key", help="its private key")
    parser.add_argument("--batch-size", type=int, default=8, help="submissions per nbgrader process")
    parser.add_argument("--timeout", type=float, default=Limits.seconds, help="seconds per submission")
    parser.add_argument("--cell-timeout", type=int, default=Limits.cell_timeout, help="seconds per cell")
    parser.add_argument("--memory-mb", type=int, default=Limits.memory_mb,
                        help="memory of each student's sandbox in MB (its memory cgroup, files included) and, "
                             "without --gpu, each of its processes' address space; 0 for neither")
    parser.add_argument("--student", action="append", metavar="NAME",
                        help="grade only this student's submission (repeat for several), with the same limits and report")
    parser.add_argument("--gpu", action="store_true", help="pass the NVIDIA devices into each student's sandbox")
    parser.add_argument("--unsafe-no-sandbox", action="store_true",
                        help="run student code WITHOUT the sandbox, with the grader's access to the course "
                             "and every gradebook row (only for submissions you trust)")
    args = parser.parse_args(argv)
    limits = Limits(args.timeout, args.memory_mb, args.cell_timeout, not args.unsafe_no_sandbox, args.gpu)
    security = None
    if args.scheduler not in ("local", "pool"):
        try:
            security = cluster_security(args.tls_ca_file, args.tls_cert, args.tls_key)
        except InsecureCluster as error:
            raise SystemExit(f"Refusing to grade: {error}") from None
    course, started = args.course.resolve(), record.utc_now()
    outcomes = grade_class(course, args.assignment, args.workers, limits, args.batch_size,
                           scheduler=args.scheduler, security=security, only=args.student)
    same = same_failure(outcomes)
    run = {"started": started, "finished": record.utc_now(), "stopped": None,
           "limits": f"{limits.seconds:g} s per submission, {limits.cell_timeout} s per cell, "
                     f"{limits.memory_mb} MB" + ("" if limits.sandboxed else ", UNSANDBOXED")}
    if same is not None:
        run["stopped"] = stop_message(args.assignment, len(outcomes), same)
        for o in outcomes:  # nobody's result of this run can be trusted: none is exported as a grade
            o.score, o.reason = None, f"the whole class failed the same way: {same}"
    print_report(outcomes)
    paths = write_report(course, args.assignment, outcomes, run)
    if paths:
        print("\nReport: " + ", ".join(printable(p.relative_to(course)) for p in paths))
    if same is not None:
        print(f"\nSTOPPED: {run['stopped']}", file=sys.stderr)
        return 2
    return 1 if any(o.score is None for o in outcomes) else 0


def same_failure(outcomes: list[Outcome]) -> str | None:
    """The one failure every submission shares, when there are several submissions and all failed
    alike: the same reason not to grade, or no points with the same "could not be checked" note."""
    def failure(o: Outcome) -> str | None:
        if o.score is None:
            return o.reason
        unchecked = [n.split(": ", 1)[-1] for n in o.notes if "could not be checked" in n]
        return unchecked[0] if o.score == 0 and unchecked else None

    found = {failure(o) for o in outcomes}
    return found.pop() if len(outcomes) >= 2 and len(found) == 1 and None not in found else None


def stop_message(assignment: str, count: int, failure: str) -> str:
    return (f"all {count} submissions of {assignment} failed the same way ({printable(failure)}). One cause for "
            "a whole class is the course's set-up, not the students' work, so no grade of this run counts: "
            "export writes them as NOT GRADED. Check the course's environment (its own .venv, "
            "`pip install -r requirements.txt` there) and `nbgrader generate_assignment "
            f"{assignment} --force`, grade one student with `python -m autograder.grade {assignment} --student NAME` "
            "until it grades, then grade the class again.")


def write_report(course: Path, assignment: str, outcomes: list[Outcome], run: dict) -> list[Path]:
    """Write the run's report (text, JSON) and class picture into the course; [] where it cannot."""
    try:
        maxima = part_maxima(course, assignment)
        data = record.record_of(assignment, outcomes, maxima, run)
        data["part_names"] = part_names(release_dir(course, assignment))
        try:
            page = class_picture(data)
        except Exception as error:  # noqa: BLE001 - the report still counts without its picture
            print(f"The class picture could not be drawn ({type(error).__name__}: {error})", file=sys.stderr)
            page = None
        return record.write_records(course, data, outcomes, page)
    except OSError as error:
        print(f"The report could not be written into {course / record.REPORTS} ({error}); "
              "the lines above are all there is.", file=sys.stderr)
        return []


if __name__ == "__main__":
    sys.exit(main())
