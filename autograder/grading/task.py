"""One unit of grading work: a batch of students of one assignment, graded in a private course.

A :class:`BatchJob` carries everything as data (the submissions' files, the release's files, the
course's ``nbgrader_config.py``, a gradebook holding only the assignment's cells, the limits and
the version of the grading code), so it runs the same in a thread of the grade command, in a
Dask worker on this machine or on another one.  :func:`grade_batch` writes a private course into
a temporary folder, runs ``nbgrader autograde`` there (every student kernel in its bubblewrap
sandbox, every test cell judged in the nbgrader process) and returns a :class:`BatchResult`: the
autograded notebooks and the scores as plain data.  It writes nothing of the course's own.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder.grading import course_secret
from autograder.grading.execute import STATUS_FILE
from autograder.grading.gradebook import StudentGrades, grant_extensions, read_grades
from autograder.grading.report import NBGRADER_FILES
from autograder.grading.sandbox import PACKAGE_DIR, Sandbox, SandboxUnavailable, check_available, scratch_root

MAX_NOTEBOOK_BYTES = 64 << 20
NBGRADER = [sys.executable, "-m", "nbgrader"]


@dataclass(frozen=True)
class Limits:
    """What one submission may use while it is graded."""

    seconds: float = 600.0  # wall clock for one submission, nbgrader's start-up included
    memory_mb: int = 4096  # the student's sandbox's memory (and, without gpu, each process's address space)
    cell_timeout: int = 120  # nbgrader's Execute.timeout
    sandboxed: bool = True  # False only with --unsafe-no-sandbox
    gpu: bool = False  # pass NVIDIA devices into the sandbox


Files = dict[str, bytes]  # relative path -> content


@dataclass
class BatchJob:
    assignment: str
    submissions: dict[str, Files]  # student -> their submission folder's regular files
    release: Files  # the assignment's release folder (data files reach each sandbox)
    config: str  # the course's nbgrader_config.py
    template: bytes  # a SQLite gradebook with the assignment's cells only
    limits: Limits
    grader_version: str
    extensions: dict = field(default_factory=dict)  # student -> timedelta the instructor granted
    result_key: bytes = b""  # this run's secret: the worker signs its result with it
    progress_topic: str = ""  # the Dask event topic for progress lines (grade_batch)
    input_secret: bytes = b""  # the course's secret: every check's inputs are drawn from it

    @property
    def students(self) -> list[str]:
        return list(self.submissions)


@dataclass
class BatchResult:
    students: list[str]
    graded: dict[str, tuple[StudentGrades, Files]] = field(default_factory=dict)  # student -> grades, autograded files
    culprit: str | None = None  # the student whose notebook ran past the time limit
    out_of_time: bool = False  # the batch ran past its overall deadline (batch_deadline)
    returncode: int | None = None
    log: str = ""
    host: str = ""
    seconds: float = 0.0
    mac: str = ""  # HMAC-SHA256 of result_digest() under the job's result_key


def result_digest(result: BatchResult) -> bytes:
    """The result's content as canonical bytes: names, scores, comments, the files' hashes, the log."""
    graded = {}
    for student, (grades, files) in sorted(result.graded.items()):
        timestamp = grades.timestamp.isoformat() if hasattr(grades.timestamp, "isoformat") else repr(grades.timestamp)
        notebooks = {name: [nb.late_submission_penalty, sorted(nb.grades.items()), sorted(nb.comments.items())]
                     for name, nb in sorted(grades.notebooks.items())}
        hashes = {name: hashlib.sha256(content).hexdigest() for name, content in sorted(files.items())}
        graded[student] = [timestamp, notebooks, hashes]
    content = [result.students, result.culprit, result.out_of_time, result.returncode, graded, result.log,
               result.host, result.seconds]
    return json.dumps(content, sort_keys=True, default=repr).encode()


def result_mac(key: bytes, result: BatchResult) -> str:
    return hmac.new(key, result_digest(result), hashlib.sha256).hexdigest()


def is_authentic(key: bytes, result: BatchResult) -> bool:
    """Whether ``result`` was signed with this run's key (a worker got it with the job)."""
    return isinstance(result, BatchResult) and isinstance(result.mac, str) and \
        hmac.compare_digest(result.mac, result_mac(key, result))


class WorkerRefused(RuntimeError):
    """A worker that must not grade: other grading code than the command's, or no sandbox."""


def _version_of_this_installation() -> str:
    """A hash of the grading package (its code and data files) and of the versions of Python,
    torch and nbgrader's stack, as this process found them when it started grading."""
    from importlib.metadata import version

    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(sys.version.encode())
    for package in ("torch", "nbgrader", "nbclient", "jupyter_client", "numpy"):
        digest.update(f"{package}=={version(package)}".encode())
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


_VERSION: str | None = None


def grader_version() -> str:
    """This process's grading version, computed once: the command and every worker must agree.
    (Editing the course while a run goes on does not abort it; do not, its nbgrader processes
    would load the new code.)"""
    global _VERSION
    if _VERSION is None:
        _VERSION = _version_of_this_installation()
    return _VERSION


def read_files(folder: Path, limit: int = MAX_NOTEBOOK_BYTES) -> Files:
    """A folder's regular files (no links followed, nothing under a link, nothing over ``limit``)."""
    files: Files = {}
    if folder.is_symlink() or not folder.is_dir():
        return files
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(p.is_symlink() for p in [path, *list(path.parents)[: len(relative.parts) - 1]]):
            continue
        try:
            if path.is_file() and path.stat().st_size <= limit:
                files[str(relative)] = path.read_bytes()
        except OSError:  # gone or unreadable since the listing: the student is graded without it
            continue
    return files


def write_files(files: Files, folder: Path) -> None:
    for name, content in files.items():
        target = (folder / name).resolve()
        if folder.resolve() not in target.parents:
            raise ValueError(f"refusing to write {name!r} outside {folder}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def tool_env() -> dict[str, str]:
    """The environment for nbgrader subprocesses: this interpreter's bin first (nbgrader runs
    `alembic` from PATH; kernels must use the same environment)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    # nbgrader (and the sandbox it starts) import the grader's own package, this process's.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_DIR.parent), env.get("PYTHONPATH", "")]))
    return env


def batch_deadline(limits: Limits, students: int) -> float:
    """Seconds a whole batch may take: each submission's limit, and nbgrader's start-up.  Each
    submission's clock starts when nbgrader starts on it; this one also bounds what no student's
    clock covers (nbgrader reading a notebook before any of its steps runs)."""
    return STARTUP_SECONDS + limits.seconds * students


STARTUP_SECONDS = 120.0
# Every run of the grade command gives each batch this sanitizing step first (see execute.MarkStudent).
MARK_STUDENT_CONFIG = """
# Added by the grade command: each submission's clock starts when nbgrader starts on it.
from autograder.grading.execute import MarkStudent as _MarkStudent
from nbgrader.converters import Autograde as _Autograde
_given = c.Autograde.get("sanitize_preprocessors")
c.Autograde.sanitize_preprocessors = [_MarkStudent] + [p for p in (
    _given if isinstance(_given, (list, tuple)) else _Autograde.class_traits()["sanitize_preprocessors"].default())
    if p is not _MarkStudent]
"""


class BrokenConfig(RuntimeError):
    """The course's nbgrader_config.py does not load: nbgrader would grade without it (no sandbox)."""


def check_config(text: str) -> None:
    """Load ``text`` (the course's configuration with what the grade command adds) as nbgrader
    would, and raise :class:`BrokenConfig` if it fails or does not execute notebooks in the
    sandbox: nbgrader logs a config file that raises and goes on with its defaults."""
    from traitlets.config.loader import PyFileConfigLoader

    folder = Path(tempfile.mkdtemp(prefix="normlayers-config-"))
    try:
        (folder / "nbgrader_config.py").write_text(text)
        try:
            config = PyFileConfigLoader("nbgrader_config.py", path=str(folder)).load_config()
        except Exception as error:  # noqa: BLE001 - whatever the file raises
            raise BrokenConfig(f"nbgrader_config.py does not load ({type(error).__name__}: {error})") from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    from autograder.grading.execute import SandboxedExecute

    steps = config.Autograde.get("autograde_preprocessors")
    if not isinstance(steps, (list, tuple)) or not any(
            step is SandboxedExecute or step == "autograder.grading.execute.SandboxedExecute"
            or (isinstance(step, type) and issubclass(step, SandboxedExecute)) for step in steps):
        raise BrokenConfig("nbgrader_config.py does not execute notebooks with autograder.grading.execute."
                           "SandboxedExecute (c.Autograde.autograde_preprocessors)")


def grade_batch(job: BatchJob, progress=None) -> BatchResult:
    """Grade ``job``'s students with ``nbgrader autograde`` in a private course; return what it computed.

    ``progress(student, score)`` is called as each student's notebook is done (the score as this
    batch's gradebook has it, None where it cannot be read); in a Dask worker without it, the
    same goes out as a Dask event on the job's ``progress_topic``.  Progress is only shown: the
    grade command merges the signed result."""
    if job.grader_version != grader_version():
        raise WorkerRefused(f"this worker ({socket.gethostname()}) runs grading code {grader_version()}, "
                            f"the grade command {job.grader_version}: install the same course version")
    if job.limits.sandboxed:
        try:
            check_available(Sandbox(memory_mb=job.limits.memory_mb, gpu=job.limits.gpu))
        except SandboxUnavailable as error:
            raise WorkerRefused(f"this worker ({socket.gethostname()}) cannot sandbox student code: {error}") from None
    check_config(job.config + MARK_STUDENT_CONFIG)  # never grade with nbgrader's defaults
    started = time.monotonic()
    result = BatchResult(job.students, host=socket.gethostname())
    root = Path(tempfile.mkdtemp(prefix="grade-", dir=_worker_directory()))
    # The students' scratch folders (on /dev/shm: memory) in a folder of the batch's own, deleted
    # below even when nbgrader was killed before it could delete them.
    scratch = Path(tempfile.mkdtemp(prefix="normlayers-batch-", dir=scratch_root() if job.limits.sandboxed else None))
    try:
        (root / "nbgrader_config.py").write_text(job.config + MARK_STUDENT_CONFIG)
        (root / "gradebook.db").write_bytes(job.template)
        if job.input_secret:
            course_secret.write(root, job.input_secret)
        if job.extensions:
            grant_extensions(f"sqlite:///{root / 'gradebook.db'}", job.assignment, job.extensions)
        release = root / "release" / job.assignment
        release.mkdir(parents=True)
        write_files(job.release, release)
        for student, files in job.submissions.items():
            folder = root / "submitted" / student / job.assignment
            folder.mkdir(parents=True)
            write_files(files, folder)
        _autograde(job, root, release, scratch, result, _progress_reporter(job, root, progress))
        url = f"sqlite:///{root / 'gradebook.db'}"
        for student in job.students:
            autograded = root / "autograded" / student / job.assignment
            if student == result.culprit or not autograded.is_dir():
                continue
            grades = read_grades(url, job.assignment, student)
            if grades is not None:
                result.graded[student] = (grades, _autograded_files(autograded))
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    result.seconds = time.monotonic() - started
    result.mac = result_mac(job.result_key, result)
    return result


def _autograded_files(folder: Path) -> Files:
    """The autograded notebooks (regular files, nothing large) and nbgrader's exchange files beside
    them: generate_feedback copies them into feedback/, where release_feedback needs timestamp.txt
    and submission_secret.txt to name the feedback file."""
    found: Files = {}
    for path in sorted([*folder.glob("*.ipynb"), *(folder / name for name in sorted(NBGRADER_FILES))]):
        limit = MAX_NOTEBOOK_BYTES if path.suffix == ".ipynb" else 4096
        if path.is_file() and not path.is_symlink() and path.stat().st_size < limit:
            found[path.name] = path.read_bytes()
    return found


def _worker_directory() -> str | None:
    """In a Dask worker, its own folder: Dask deletes the folder of a worker that was killed when
    the next one starts on that machine, submissions included.  Elsewhere the system's temp folder."""
    try:
        from distributed import get_worker

        return get_worker().local_directory
    except (ImportError, ValueError):
        return None


def _progress_reporter(job: BatchJob, root: Path, progress):
    """A function of the finished student: reads their score from the batch's gradebook and
    hands it to ``progress`` or, in a Dask worker, to the job's event topic."""
    if progress is None and job.progress_topic:
        try:
            from distributed import get_worker

            worker = get_worker()
            progress = lambda student, score: worker.log_event(job.progress_topic, {"student": student, "score": score})  # noqa: E731
        except (ImportError, ValueError):
            progress = None
    if progress is None:
        return lambda student: None

    def report(student: str) -> None:
        if not (root / "autograded" / student / job.assignment).is_dir():
            return  # nbgrader failed on this notebook (and removed its output): the merge will say why
        try:
            grades = read_grades(f"sqlite:///{root / 'gradebook.db'}", job.assignment, student)
            score = None if grades is None else grades.total()
        except Exception:  # noqa: BLE001 - a progress line without its score
            score = None
        try:
            progress(student, score)
        except Exception:  # noqa: BLE001 - progress is only shown
            pass

    return report


def _autograde(job: BatchJob, root: Path, release: Path, scratch: Path, result: BatchResult,
               finished=lambda student: None) -> None:
    limits = job.limits
    command = NBGRADER + ["autograde", job.assignment, "--create", "--force",
                          f"--CourseDirectory.root={root}",
                          f"--CourseDirectory.db_url=sqlite:///{root / 'gradebook.db'}",
                          f"--SandboxedExecute.timeout={limits.cell_timeout}",
                          f"--SandboxedExecute.memory_mb={limits.memory_mb}",
                          f"--SandboxedExecute.sandboxed={limits.sandboxed}",
                          f"--SandboxedExecute.gpu={limits.gpu}",
                          f"--SandboxedExecute.status_file={root / STATUS_FILE}",
                          f"--MarkStudent.status_file={root / STATUS_FILE}",
                          f"--SandboxedExecute.release_dir={release}",
                          f"--SandboxedExecute.scratch_dir={scratch}"]
    with open(root / "nbgrader.log", "wb") as log:
        process = subprocess.Popen(command, cwd=root, stdout=log, stderr=subprocess.STDOUT, env=tool_env(),
                                   start_new_session=True, preexec_fn=_nbgrader_preexec(limits))
        try:
            result.culprit, result.out_of_time = _watch(process, root / STATUS_FILE, limits.seconds,
                                                        batch_deadline(limits, len(job.students)), finished)
            result.returncode = process.wait()
        finally:
            if process.poll() is None:  # the worker is being shut down: take nbgrader and its sandboxes along
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    result.log = (root / "nbgrader.log").read_text(errors="replace")[-200_000:]



def nbgrader_memory_bytes(limits: Limits) -> int | None:
    """The data limit of a batch's nbgrader process (its heap and private memory; not CUDA's
    address-space reservations, which are not writable): enough for the checks' references, far
    less than a student could make it keep.  None with --gpu (untested there) or --memory-mb 0."""
    if limits.gpu or limits.memory_mb <= 0:
        return None
    return max(8192, 2 * limits.memory_mb) << 20


def _nbgrader_preexec(limits: Limits):
    """Before exec in the child: nbgrader's memory limit, and death with the thread that started it."""
    die_with_parent = _parent_death_signal()
    memory = nbgrader_memory_bytes(limits)

    def preexec() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
        if die_with_parent is not None:
            die_with_parent()

    return preexec


def _parent_death_signal():
    """A function for the child before exec: be killed when the thread that started nbgrader
    dies (a Dask worker killed in the middle of a batch leaves no grading behind).  prctl is
    looked up here, in the parent: the child of a threaded process should only make system calls."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _watch(process: subprocess.Popen, status: Path, seconds: float, deadline: float = float("inf"),
           finished=lambda student: None) -> tuple[str | None, bool]:
    """Wait for ``process``; kill it when one submission runs longer than ``seconds`` or the whole
    batch longer than ``deadline``.

    The grading process writes the student it starts on (and ``done`` when their notebook is
    executed) into ``status``, a file in the private course that no sandbox can see, so a notebook
    cannot blame a classmate.  ``finished(student)`` is called when nbgrader has moved past a
    student.  Returns the student it was killed on (None if none was running) and whether the
    batch's deadline struck.
    """
    current, state, since, started = None, "", time.monotonic(), time.monotonic()
    while process.poll() is None:
        time.sleep(0.5)
        try:
            lines = status.read_text().split("\n")
            found, found_state = json.loads(lines[0]), (lines[2] if len(lines) > 2 else "running")
        except (OSError, ValueError, IndexError):
            found, found_state = "", state
        if found and found != current:
            if current is not None:
                finished(current)
            current, since = found, time.monotonic()
        state = found_state if found else state
        now = time.monotonic()
        if current is not None and state == "running" and now - since > seconds:
            os.killpg(process.pid, signal.SIGKILL)  # nbgrader and its kernels' sandboxes (they die with it)
            return current, False
        if now - started > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            return (current if state == "running" else None), True
    if current is not None and process.returncode == 0:
        finished(current)
    return None, False
