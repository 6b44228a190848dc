"""Helpers the tests share: the repository's notebooks and submissions built from them."""
from __future__ import annotations

import copy
import os
import socket
from pathlib import Path

import nbformat

from autograder.grading.grade import tool_env  # noqa: F401 - the tests' subprocess environment

REPO = Path(__file__).resolve().parents[1]
SUBMISSIONS = REPO / "tests" / "submissions"
ASSIGNMENTS = ["01_covariate_shift", "02_batch_norm", "02b_batch_norm_backward", "03_layer_norm", "04_instance_group_norm",
               "05_data_vs_layer_norm", "06_training_dynamics", "07_practice_lab", "08_large_models"]

# A student-added cell that turns every function of the grading package into a no-op.
GRADER_DISABLING_CELL = (
    "import sys, types\n"
    "for name, module in list(sys.modules.items()):\n"
    "    if name.startswith('autograder'):\n"
    "        for attr, value in list(vars(module).items()):\n"
    "            if isinstance(value, types.FunctionType):\n"
    "                setattr(module, attr, lambda *a, **k: None)\n"
)


def source_notebook(assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(REPO / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)


def release_notebook(assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(REPO / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_solution_cell(cell) -> bool:
    return bool(nbgrader_meta(cell).get("solution"))


def is_test_cell(cell) -> bool:
    meta = nbgrader_meta(cell)
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


def setup_source(assignment: str) -> str:
    """The locked set-up cell (imports) of an assignment."""
    return next(c.source for c in source_notebook(assignment).cells if nbgrader_meta(c).get("grade_id") == "setup")


def solution_code(assignment: str) -> str:
    """Every solution cell of the source notebook, joined: the reference submission."""
    return "\n\n".join(c.source for c in source_notebook(assignment).cells if is_solution_cell(c))


def submission_files(assignment: str, kind: str) -> list[Path]:
    """Catalogue files of one kind ('correct', 'bug', 'cheat') for an assignment."""
    folder = SUBMISSIONS / assignment.split("_", 1)[1]
    return sorted(folder.glob(f"{kind}_*.py"))


def notebook_with_code(assignment: str, code: str, extra_cells: list[str] = ()) -> nbformat.NotebookNode:
    """The released notebook as a student would hand it in with ``code`` as their answer.

    ``code`` goes into the first solution cell; later solution cells only point back to it.
    ``extra_cells`` become student-added code cells right after the first solution cell.
    """
    nb = copy.deepcopy(release_notebook(assignment))
    first = True
    cells = []
    for cell in nb.cells:
        if is_solution_cell(cell):
            cell.source = code if first else "# (written in the first answer cell)"
            cells.append(cell)
            if first:
                cells.extend(nbformat.v4.new_code_cell(src) for src in extra_cells)
            first = False
        else:
            cells.append(cell)
    nb.cells = cells
    return nb


def given_sources(assignment: str) -> list[str]:
    """Locked code cells the notebook gives students (grade ids ``given_*``), in order."""
    return [c.source for c in source_notebook(assignment).cells
            if c.cell_type == "code" and nbgrader_meta(c).get("grade_id", "").startswith("given")]


def load_namespace(assignment: str, code: str) -> dict:
    """Run the set-up cell, ``code`` and the given building blocks as a notebook would, and
    return the namespace."""
    namespace: dict = {"__name__": "__main__"}
    exec(compile(setup_source(assignment), "<setup>", "exec"), namespace)
    exec(compile(code, "<submission>", "exec"), namespace)
    for source in given_sources(assignment):
        exec(compile(source, "<given>", "exec"), namespace)
    return namespace




def run_parts(namespace: dict, parts: dict, full: bool = True) -> dict[str, str | None]:
    """Run each graded part's check on a submission: None where it passes, else the message."""
    from autograder import CheckFailed

    results = {}
    for part, check in parts.items():
        try:
            check(namespace, full)
        except CheckFailed as failure:
            results[part] = str(failure)
        else:
            results[part] = None
    return results


TEST_SECRET = bytes(range(32))  # the course secret of notebooks graded by the tests


def grade_notebook(assignment: str, code: str, path: str, extra_cells=(), timeout: int = 120) -> list[str | None]:
    """Grade ``code`` the way ``autograder.grade`` does: the notebook's cells in the sandboxed
    kernel, each test cell (hidden tests included) judged in this process. One verdict per test
    cell: None = passed, else the message the cell shows."""
    from autograder.grading.execute import SandboxedExecute

    nb = notebook_with_code(assignment, code, list(extra_cells))
    sources = {nbgrader_meta(c)["grade_id"]: c.source for c in source_notebook(assignment).cells if is_test_cell(c)}
    for cell in nb.cells:  # as nbgrader's OverwriteCells restores them
        if is_test_cell(cell) and nbgrader_meta(cell).get("grade_id") in sources:
            cell.source = sources[nbgrader_meta(cell)["grade_id"]]

    class FromSource(SandboxedExecute):
        def course_secret(self):  # a course of the tests': the inputs are drawn as when grading
            return TEST_SECRET

        def trusted_cells(self, nb, resources):
            return {i: c.source for i, c in enumerate(nb.cells)
                    if is_test_cell(c) and sources.get(nbgrader_meta(c).get("grade_id")) == c.source}

    executor = FromSource(timeout=timeout, interrupt_on_timeout=True, kernel_name="python3")
    graded, _ = executor.preprocess(nb, {"metadata": {"path": path}, "nbgrader": {"student": "test"}})
    verdicts = []
    for cell in graded.cells:
        if is_test_cell(cell):
            errors = [o for o in cell.outputs if o.get("output_type") == "error"]
            verdicts.append(errors[-1]["evalue"] if errors else None)
    return verdicts


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def processes_with(*markers: str, ours: bool = False) -> list[str]:
    """Live processes whose command line contains one of ``markers``, as "pid: command".

    ``ours``: only this test process's own, so that another course grading on the same machine
    at the same time is not taken for a leftover: those that descend from this process (see
    :func:`adopt_orphans`) or carry :data:`RUN_MARK` in their environment."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = (Path("/proc") / pid / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(marker in command for marker in markers) and (not ours or _is_ours(int(pid))):
            found.append(f"{pid}: {command[:150]}")
    return found


# Set in the environment of every grading command a test starts (marked_env()).
RUN_MARK = f"NORMLAYERS_TEST_RUN={os.getpid()}-{os.urandom(4).hex()}"


def marked_env() -> dict[str, str]:
    """tool_env() with this test process's mark (see processes_with(ours=True))."""
    name, value = RUN_MARK.split("=", 1)
    return {**tool_env(), name: value}


def _is_ours(pid: int) -> bool:
    """Whether ``pid`` or one of its ancestors is this process or carries RUN_MARK."""
    me, mark = os.getpid(), RUN_MARK.encode()
    for _ in range(64):
        if pid == me:
            return True
        try:
            if mark in (Path("/proc") / str(pid) / "environ").read_bytes().split(b"\0"):
                return True
            stat = (Path("/proc") / str(pid) / "stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])  # the parent (the name may hold spaces or parentheses)
        except (OSError, ValueError, IndexError):
            return False
        if pid <= 1:
            return False
    return False


def adopt_orphans(on: bool = True) -> None:
    """Make this process the child subreaper: a process its descendants leave behind (a daemon
    that double-forked away from its parent) becomes its child, not init's, so processes_with(ours=True)
    still finds it."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(36, 1 if on else 0, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    if not on:
        reap_adopted()


def reap_adopted() -> int:
    """Wait for the adopted processes that have exited (zombies whose parent is this process),
    so a subreaper leaves none behind; returns how many."""
    reaped = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = (Path("/proc") / pid / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat[0] == "Z" and int(stat[1]) == os.getpid():
            try:
                reaped += os.waitpid(int(pid), os.WNOHANG)[0] == int(pid)
            except ChildProcessError:
                pass
    return reaped
