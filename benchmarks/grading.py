"""Grading cost, measured side by side in one run (DESIGN §7); prints times and ratios.

    .venv/bin/python benchmarks/grading.py [--assignment 02_batch_norm] [--repeat 3] [--students 4]

* floor: nbclient executes a notebook whose only cell imports torch;
* in-process: nbclient executes the assignment's solution notebook in an ordinary kernel, hidden
  tests included and run in that kernel (how grading worked before the sandbox; it also paid a
  clean-process re-check on top, which no longer exists);
* sandboxed: the same notebook graded as `autograder.grade` grades it: the kernel in the
  bubblewrap sandbox, every test cell judged in this process over the socket
  (autograder.grading.execute), hidden tests included;
* visible: one visible test cell's checks, in-process, as a student runs them on CPU;
* autograde: `nbgrader autograde` of N copies of the solution with the course's configuration
  (sandboxed), per submission, and nbgrader's own start-up (`nbgrader --version`) for comparison.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def execute(nb: nbformat.NotebookNode, cwd: Path) -> None:
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=False, shutdown_kernel="immediate",
                   resources={"metadata": {"path": str(cwd)}}).execute()


def assert_full_marks(verdicts: list) -> None:
    assert all(v is None for v in verdicts), verdicts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--assignment", default="02_batch_norm")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--students", type=int, default=4)
    args = parser.parse_args()
    assignment = args.assignment

    import torch

    from course import grade_notebook, is_test_cell, load_namespace, solution_code, source_notebook, tool_env

    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="grading-bench-"))
    floor_nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import torch")])
    solution_nb = source_notebook(assignment)
    tests = [c.source for c in solution_nb.cells if is_test_cell(c)]
    namespace = load_namespace(assignment, solution_code(assignment))
    visible = [src.split("### BEGIN HIDDEN TESTS")[0] for src in tests]

    rows: dict[str, list[float]] = {"floor": [], "notebook": [], "sandboxed": [], "visible": []}
    code = solution_code(assignment)
    for _ in range(args.repeat):  # interleaved, so machine noise hits every row alike
        rows["floor"].append(timed(lambda: execute(nbformat.from_dict(floor_nb), work)))
        rows["notebook"].append(timed(lambda: execute(nbformat.from_dict(solution_nb), work)))
        rows["sandboxed"].append(timed(lambda: assert_full_marks(grade_notebook(assignment, code, str(work)))))
        with contextlib.redirect_stdout(io.StringIO()):
            rows["visible"].append(max(timed(lambda: exec(src, dict(namespace))) for src in visible))
    median = {k: statistics.median(v) for k, v in rows.items()}

    course = work / "course"
    course.mkdir()
    shutil.copy(REPO / "nbgrader_config.py", course)
    shutil.copytree(REPO / "solutions", course / "solutions")
    nbgrader = [sys.executable, "-m", "nbgrader"]
    subprocess.run(nbgrader + ["generate_assignment", assignment, "--force"], cwd=course, check=True, capture_output=True, env=tool_env())
    for i in range(args.students):
        folder = course / "submitted" / f"student{i}" / assignment
        folder.mkdir(parents=True)
        nbformat.write(solution_nb, folder / f"{assignment}.ipynb")
    startup = timed(lambda: subprocess.run(nbgrader + ["--version"], cwd=course, check=True, capture_output=True, env=tool_env()))
    total = timed(lambda: subprocess.run(nbgrader + ["autograde", assignment, "--create", "--force"], cwd=course, check=True, capture_output=True, env=tool_env()))
    shutil.rmtree(work, ignore_errors=True)

    print(f"median of {args.repeat} interleaved runs, {torch.get_num_threads()} torch thread(s):")
    print(f"  floor (notebook that imports torch)        {median['floor']:6.2f} s")
    print(f"  {assignment} solution, hidden tests   {median['notebook']:6.2f} s   "
          f"= floor + {median['notebook'] - median['floor']:.2f} s  (ratio {median['notebook'] / median['floor']:.2f})  in-process")
    print(f"  the same, sandboxed, verdicts remote        {median['sandboxed']:6.2f} s   "
          f"= in-process + {median['sandboxed'] - median['notebook']:.2f} s  (ratio {median['sandboxed'] / median['notebook']:.2f})")
    print(f"  slowest visible test cell (in-process)      {median['visible']:6.3f} s")
    print(f"nbgrader autograde, {args.students} submissions: {total:.1f} s in all, nbgrader start-up {startup:.1f} s, "
          f"{(total - startup) / args.students:.2f} s per submission "
          f"(= floor + {(total - startup) / args.students - median['floor']:.2f} s)")


if __name__ == "__main__":
    main()
