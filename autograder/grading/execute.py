"""nbgrader's ``Execute`` with the kernel in a sandbox and the test cells in the grader.

For every notebook it grades, :class:`SandboxedExecute`

1. makes a private scratch folder (on a tmpfs where there is one, so the sandbox's memory limit
   counts what it writes there) holding the notebook and the release's data files, and starts
   the kernel in the sandbox there (:mod:`autograder.grading.kernel`);
2. runs the student's cells (and the locked set-up cells) in that kernel, as nbgrader would;
3. runs each test cell whose source is the gradebook's, hidden tests included, in this process
   (:mod:`autograder.grading.testcell`), with every input drawn from the course's secret
   (:mod:`autograder.grading.course_secret`) and the submission's assignment and student: it
   asks the kernel to serve the student's objects on a
   Unix socket in the scratch folder (:func:`autograder.sandbox.agent.serve`), drives them from
   here, and writes the cell's outputs (a printed line, or the check's message) itself;
4. shuts the kernel down (the sandbox and everything in it end) and deletes the scratch folder.

What a cell prints is counted as it arrives: past ``max_cell_output_bytes`` (or, for the whole
notebook, ``max_notebook_output_bytes``) nothing more of it is kept, the cell is interrupted and
ends with an "output limit" line, so a flood costs this process no memory and ends the same
way on a loaded machine as on a quiet one.  For the same reason a cell's late output (the backlog
of a flood, still arriving after the cell's reply) is waited for ``iopub_timeout`` seconds and
then dropped: nbgrader's own setting would fail the whole notebook there.

A test cell's points therefore depend only on what this process computed.  A cell that merely
looks like a test cell (its id or source not in the gradebook) is the student's code and runs in
the kernel like any other.  A status file outside every sandbox names the submission being
graded (``SandboxedExecute.status_file``, set by :mod:`autograder.grading.grade` for its time
limit); the student cannot write it.  :class:`MarkStudent`, the first of nbgrader's sanitizing
steps, writes it already when nbgrader starts on a submission, so that the submission's own
pre-processing counts on its clock, not on the previous student's; when a notebook is executed the
file says so (``done``).
"""
from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import nbformat
from nbgrader import utils
from nbgrader.api import Gradebook, MissingEntry
from nbconvert.preprocessors import Preprocessor
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer, Unicode

from autograder.core import seeding
from autograder.grading import course_secret, testcell
from autograder.grading.kernel import SandboxedKernelManager
from autograder.core import withheld
from autograder.grading.sandbox import Sandbox, check_available, check_course_outside, scratch_root
from autograder.grading.scrub import execution_count
from autograder.core.side import RemoteSide

STATUS_FILE = Path(".grading") / "current"


def _agent_code(path: str) -> str:
    return f"__import__('autograder.sandbox.agent', fromlist=['serve']).serve({path!r}, globals())"


def mark_status(status_file: str, student: str, state: str) -> None:
    """Write the status file: the student (JSON, the watcher compares the exact id), the time, the state."""
    if not status_file:
        return
    status = Path(status_file)
    status.parent.mkdir(parents=True, exist_ok=True)
    status.write_text(f"{json.dumps(student)}\n{time.time()}\n{state}\n")


class MarkStudent(Preprocessor):
    """The first sanitizing step: names the submission nbgrader starts on in the status file."""

    status_file = Unicode("", help="The grade command's status file (see SandboxedExecute.status_file).").tag(config=True)

    def preprocess(self, nb, resources):
        mark_status(self.status_file, resources.get("nbgrader", {}).get("student", ""), "running")
        return nb, resources


def trusted_test_cells(nb, resources) -> dict[int, str]:
    """Index -> source of every test cell whose grade id and source are the gradebook's."""
    info = resources.get("nbgrader", {})
    found = {}
    with Gradebook(info["db_url"]) as gradebook:
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or not utils.is_grade(cell) or utils.is_solution(cell):
                continue
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            try:
                source = gradebook.find_source_cell(grade_id, info["notebook"], info["assignment"]).source
            except MissingEntry:
                continue
            if source == cell.source:
                found[index] = source
    return found


def copy_regular_files(source: Path, target: Path) -> None:
    """Copy the submission's regular files (links and special files are left out)."""
    if source.is_symlink() or not source.is_dir():
        return
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if path.is_symlink() or any(p.is_symlink() for p in list(path.parents)[: len(relative.parts) - 1]):
            continue
        if path.is_dir():
            (target / relative).mkdir(parents=True, exist_ok=True)
        elif path.is_file():
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target / relative)


class SandboxedExecute(Execute):
    """``Execute`` in the sandbox; test cells judged here.  Configure as ``SandboxedExecute.*``."""

    sandboxed = Bool(True, help="Run the kernel in the bubblewrap sandbox (never switch off for real grading).").tag(config=True)
    memory_mb = Integer(4096, help="The sandbox's memory in MB (and, without gpu, each process's address space); 0: neither.").tag(config=True)
    gpu = Bool(False, help="Pass the NVIDIA device nodes into the sandbox.").tag(config=True)
    processes = Integer(256, help="Processes and threads a student's sandbox may hold.").tag(config=True)
    status_file = Unicode("", help="A file to write the student being graded into (for a watcher's time limit).").tag(config=True)
    scratch_dir = Unicode("", help="Where the students' scratch folders go (default: /dev/shm or the temp folder); "
                                   "the grade command gives each batch its own and deletes it, even when it had "
                                   "to kill nbgrader.").tag(config=True)
    release_dir = Unicode("", help="The assignment's release folder: its data files (not notebooks) are "
                                   "copied into each student's scratch folder.").tag(config=True)
    max_cell_output_bytes = Integer(2 << 20, help="Output one cell may send before it is stopped.").tag(config=True)
    max_notebook_output_bytes = Integer(16 << 20, help="Output a notebook may send in all.").tag(config=True)
    # Output still arriving after a cell's reply (a flood's backlog) is dropped after iopub_timeout
    # instead of failing the notebook: what a cell may print is capped above anyway.
    raise_on_iopub_timeout = Bool(False).tag(config=True)
    iopub_timeout = Integer(10).tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
        kwargs.setdefault("shutdown_kernel", "immediate")  # the sandbox is thrown away: no need to wait
        super().__init__(*args, **kwargs)

    def _sandbox(self) -> Sandbox:
        cpu = int(max(60, (self.timeout or 120) * 10))
        return Sandbox(memory_mb=self.memory_mb, cpu_seconds=cpu, processes=self.processes, gpu=self.gpu)

    def trusted_cells(self, nb, resources) -> dict[int, str]:
        """The test cells to run here, by index: those the gradebook knows, unchanged."""
        return trusted_test_cells(nb, resources)

    def preprocess(self, nb, resources=None, km=None):
        resources = resources or {}
        self._output_bytes: dict[int, int] = {}
        self._kept_bytes = 0
        self._stopped: set[int] = set()
        self._trusted = self.trusted_cells(nb, resources)
        self._mark_current(resources)
        path = Path(resources.get("metadata", {}).get("path") or os.getcwd())
        parent = self.scratch_dir or (scratch_root() if self.sandboxed else None)
        self._scratch = Path(tempfile.mkdtemp(prefix="normlayers-student-", dir=parent))
        workdir = self._scratch / "work"
        workdir.mkdir()
        self._fill_workdir(path, workdir, resources)
        try:
            withheld.check_present()  # never a silent 0 for a grader without the hidden cases
            if self.sandboxed:
                check_course_outside(self.course_root())
                check_available(self._sandbox())
            self._workdir = workdir
            resources.setdefault("metadata", {})["path"] = str(workdir)
            submission = resources.get("nbgrader", {})
            context = f"{submission.get('assignment', '')}/{submission.get('student', '')}"
            with seeding.course_secret(self.course_secret(), context):  # every input drawn from it, per student
                graded = super().preprocess(nb, resources)  # nbclient owns the kernel: it shuts it down
            mark_status(self.status_file, resources.get("nbgrader", {}).get("student", ""), "done")
            return graded
        finally:
            resources.setdefault("metadata", {})["path"] = str(path)
            shutil.rmtree(self._scratch, ignore_errors=True)

    def course_root(self) -> Path:
        from nbgrader.coursedir import CourseDirectory

        return Path(CourseDirectory(config=self.config).root)

    def course_secret(self) -> bytes:
        """The course's secret, from the course directory (made there the first time)."""
        return course_secret.read_or_create(self.course_root())

    def _fill_workdir(self, path: Path, workdir: Path, resources) -> None:
        """The graded notebook as submitted and the release's data files, nothing else: a helper
        module the student put beside the notebook does not reach the kernel (the report lists it)."""
        notebook = path / f"{resources.get('nbgrader', {}).get('notebook', '')}.ipynb"
        if notebook.is_file() and not notebook.is_symlink():
            shutil.copyfile(notebook, workdir / notebook.name)
        if self.release_dir:
            release = Path(self.release_dir)
            copy_regular_files(release, workdir)
            for copied in workdir.rglob("*.ipynb"):
                if copied.name != notebook.name:
                    copied.unlink()

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if self.sandboxed:
            km.prepare(self._sandbox(), self._scratch, self._workdir)
        return km

    def _mark_current(self, resources) -> None:
        mark_status(self.status_file, resources.get("nbgrader", {}).get("student", ""), "running")

    def process_message(self, msg, cell, cell_index):
        """The student's kernel writes these messages: an execution count that is not a number
        (which nbformat would refuse when the notebook is saved) is dropped."""
        content = msg.get("content")
        if isinstance(content, dict) and "execution_count" in content:
            content["execution_count"] = execution_count(content["execution_count"])
        return super().process_message(msg, cell, cell_index)

    def output(self, outs, msg, display_id, cell_index):
        """Keep an output only while the cell and the notebook are within their output limits;
        one that nbformat refuses becomes a line saying so (the scrub deals with the rest)."""
        size = _text_size(msg.get("content"))
        self._output_bytes[cell_index] = self._output_bytes.get(cell_index, 0) + size
        over_cell = self._output_bytes[cell_index] > self.max_cell_output_bytes
        # The notebook's total counts what was kept: a flood's dropped output must not stop later cells.
        over_notebook = self._kept_bytes + size > self.max_notebook_output_bytes
        if not (over_cell or over_notebook):
            self._kept_bytes += size
            try:
                return super().output(outs, msg, display_id, cell_index)
            except Exception:  # noqa: BLE001 - a malformed message (nbformat's ValidationError, ...)
                outs.append(nbformat.v4.new_output("stream", name="stdout", text="[a malformed output was dropped]\n"))
                return None
        if cell_index not in self._stopped:
            self._stopped.add(cell_index)
            limit = self.max_cell_output_bytes if over_cell else self.max_notebook_output_bytes
            outs.append(nbformat.v4.new_output("stream", name="stdout", text=(
                f"\n[output limit: {'this cell' if over_cell else 'the notebook'} printed more than "
                f"{limit >> 20} MB; the rest was dropped and the cell was stopped]\n")))
            asyncio.get_running_loop().create_task(self.km.interrupt_kernel())
        return None

    def preprocess_cell(self, cell, resources, index):
        if index not in self._trusted:
            return super().preprocess_cell(cell, resources, index)
        cell.outputs = self._judge(self._trusted[index], resources, index)
        cell.execution_count = None
        self.nb.cells[index] = cell  # nbclient put the serving cell in its place
        return cell, self.resources

    def _judge(self, source: str, resources, index: int) -> list:
        """Serve the student's objects from the kernel while the test cell runs here."""
        path = self._scratch / f"agent-{secrets.token_hex(8)}.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # The sandbox's user maps to this process's user, so it may connect without a chmod (a
        # chmod by path here could be raced onto a link the sandbox puts in its place).
        listener.bind(str(path))
        listener.listen(1)
        listener.settimeout(self.timeout or 120)
        outcome: dict = {}

        def drive() -> None:
            try:
                connection, _ = listener.accept()
            except OSError:
                outcome["outputs"] = testcell.error_outputs(
                    "the notebook's kernel did not start the grader's connection (is it still running?)")
                return
            outcome["connection"] = connection
            try:
                outcome["outputs"] = testcell.run(source, RemoteSide(connection, self.timeout or 120))
            finally:
                connection.close()

        worker = threading.Thread(target=drive, daemon=True)
        worker.start()
        serving = nbformat.v4.new_code_cell(_agent_code(str(path)))
        try:
            self.execute_cell(serving, index, store_history=False)
        finally:
            # The kernel has stopped serving: a driver that never connected stops waiting now,
            # one that did gets end-of-file at its next request.
            if "connection" not in outcome:
                _close(listener)
            worker.join(self.timeout or 120)
            _close(outcome.get("connection"))
            _close(listener)
            worker.join(5)
        return outcome.get("outputs") or testcell.error_outputs("the check did not finish")


def _text_size(value, depth: int = 0) -> int:
    """The characters of every string in a message's content (what keeping it would cost)."""
    if isinstance(value, str):
        return len(value)
    if depth > 8:
        return 0
    if isinstance(value, dict):
        return sum(len(str(k)) + _text_size(v, depth + 1) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return sum(_text_size(v, depth + 1) for v in value)
    return 8


def _close(sock: socket.socket | None) -> None:
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
