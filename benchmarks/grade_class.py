"""Throughput of ``python -m autograder.grade``: a class of N submissions per exercise, graded
sequentially (one worker, one submission per nbgrader process, as a plain loop over students
would) and in parallel (one worker per core, batches), side by side in one run.

    .venv/bin/python benchmarks/grade_class.py                 # 100 submissions per exercise
    .venv/bin/python benchmarks/grade_class.py --students 20 --assignments 02_batch_norm

The class cycles through the catalogue under tests/submissions/ (correct answers, bugs and
cheats), so the notebooks do the same work real ones do. Prints submissions per minute.
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

from autograder.grade import Limits, grade_class  # noqa: E402


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


def measure(assignment: str, students: int, workers: int, batch_size: int) -> tuple[float, list]:
    root = Path(tempfile.mkdtemp(prefix=f"bench-{assignment}-"))
    try:
        build(root, assignment, students)
        start = time.monotonic()
        outcomes = grade_class(root, assignment, workers, Limits(), batch_size, out=io.StringIO())
        return time.monotonic() - start, outcomes
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--assignments", nargs="*", default=ASSIGNMENTS)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    print(f"{args.students} submissions per exercise, {os.cpu_count()} cores")
    print(f"{'exercise':<24}{'sequential':>22}{'parallel':>22}{'speed-up':>10}")
    for assignment in args.assignments:
        sequential, a = measure(assignment, args.students, workers=1, batch_size=1)
        parallel, b = measure(assignment, args.students, workers=args.workers, batch_size=8)
        assert [o.score for o in a] == [o.score for o in b], "parallel grading changed a score"
        rate = lambda seconds: f"{args.students / seconds * 60:6.1f}/min ({seconds:5.0f} s)"  # noqa: E731
        print(f"{assignment:<24}{rate(sequential):>22}{rate(parallel):>22}{sequential / parallel:>9.2f}x", flush=True)


if __name__ == "__main__":
    main()
