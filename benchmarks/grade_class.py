"""Throughput of ``python -m autograder.grade``: a class of N submissions per exercise, graded
by the embedded Dask cluster (the default) and by the plain thread pool (``--scheduler pool``,
the grade command before Dask), side by side in one run, with the same workers and batches.

    .venv/bin/python benchmarks/grade_class.py                 # 100 submissions per exercise
    .venv/bin/python benchmarks/grade_class.py --students 20 --assignments 02_batch_norm
    .venv/bin/python benchmarks/grade_class.py --sequential    # also one worker, one submission per process

The class cycles through the catalogue under tests/submissions/ (correct answers, bugs and
cheats), so the notebooks do the same work real ones do.  Prints submissions per minute, the
throughput of Dask relative to the pool (budget: at least 0.95) and the time per submission that
Dask adds.  With ``--rounds 2`` the second round runs the two in the opposite order.
"""
from __future__ import annotations

import argparse
import io
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from course import ASSIGNMENTS, notebook_with_code, submission_files, tool_env  # noqa: E402

from autograder.grading.grade import Limits, grade_class  # noqa: E402


def build(root: Path, assignment: str, students: int) -> None:
    shutil.copy(REPO / "nbgrader_config.py", root)
    shutil.copytree(REPO / "solutions", root / "solutions")
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force"],
                          cwd=root, capture_output=True, text=True, env=tool_env())
    assert done.returncode == 0, done.stderr[-2000:]
    answers = [p.read_text() for kind in ("correct", "bug", "cheat") for p in submission_files(assignment, kind)]
    for i, code in zip(range(students), itertools.cycle(answers)):
        folder = root / "submitted" / f"student{i:03d}" / assignment
        folder.mkdir(parents=True)
        nbformat.write(notebook_with_code(assignment, code), folder / f"{assignment}.ipynb")


def measure(assignment: str, students: int, workers: int, batch_size: int, scheduler: str) -> tuple[float, list]:
    root = Path(tempfile.mkdtemp(prefix=f"bench-{assignment}-"))
    try:
        build(root, assignment, students)
        start = time.monotonic()
        outcomes = grade_class(root, assignment, workers, Limits(), batch_size, out=io.StringIO(), scheduler=scheduler)
        return time.monotonic() - start, outcomes
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--assignments", nargs="*", default=ASSIGNMENTS)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds", type=int, default=1, help="repeat, alternating which scheduler goes first")
    parser.add_argument("--sequential", action="store_true", help="also grade with one worker, one submission per process")
    args = parser.parse_args()
    n = args.students
    rate = lambda seconds: f"{n / seconds * 60:6.1f}/min ({seconds:5.0f} s)"  # noqa: E731
    print(f"{n} submissions per exercise, {os.cpu_count()} cores, {args.workers} workers, batches of up to 8")
    print(f"{'exercise':<24}{'thread pool':>22}{'embedded Dask':>22}{'Dask/pool':>11}{'Dask adds':>16}")
    for assignment in args.assignments:
        for round_ in range(args.rounds):
            order = ["pool", "local"] if round_ % 2 == 0 else ["local", "pool"]
            seconds, scores = {}, {}
            for scheduler in order:
                seconds[scheduler], outcomes = measure(assignment, n, args.workers, 8, scheduler)
                scores[scheduler] = [o.score for o in outcomes]
            assert scores["pool"] == scores["local"], "Dask changed a score"
            ratio = seconds["pool"] / seconds["local"]  # throughput of Dask relative to the pool
            added = (seconds["local"] - seconds["pool"]) / n
            print(f"{assignment:<24}{rate(seconds['pool']):>22}{rate(seconds['local']):>22}{ratio:>10.3f}x"
                  f"{added:>+12.2f} s/sub", flush=True)
        if args.sequential:
            seconds, _ = measure(assignment, n, 1, 1, "pool")
            print(f"{'  sequential':<24}{rate(seconds):>22}", flush=True)


if __name__ == "__main__":
    main()
