"""The sandbox every process that runs student code lives in: bubblewrap (``bwrap``).

A sandboxed process has its own PID, IPC, network, UTS and user namespaces (it sees only its own
processes and has no network), no capabilities, a read-only view of the system, the Python
environment and the student's part of the ``autograder`` package (:func:`student_view`: not the
grader itself, not an exercise's hidden cases), a private ``/tmp``, and one writable folder: the
student's scratch folder, which holds only that student's files.  The course (solutions,
gradebook, ``nbgrader_config.py``, other submissions, logs) is not in its file system at all.
It dies with its parent (``--die-with-parent``); everything it started dies with it, because its
PID namespace ends when the sandbox's first process does.

The kernel behind the sandbox is narrowed too: a seccomp filter (:mod:`autograder.grading.seccomp`)
denies new namespaces, mounts, ``ptrace``, ``bpf``, the key store and the like, and where
bubblewrap can (0.8 or later) ``--disable-userns`` forbids nested user namespaces as well.

Limits (``setrlimit``, inherited by everything inside): address space per process, CPU seconds,
file size and open files.  Where the machine lets the grader create cgroups, a ``pids`` cgroup
caps processes and threads, a ``memory`` cgroup caps the sandbox's memory together with the
files it writes (its ``/tmp`` and its scratch folder are tmpfs), and a ``cpu`` cgroup of its own
makes the scheduler share the CPU between sandboxes (and the grader), not between their threads;
elsewhere ``RLIMIT_NPROC`` caps processes (Linux enforces it only for a grader that is not root)
and files are capped one by one.

With ``gpu`` the sandbox also gets the NVIDIA device nodes and a read-only ``/sys`` (CUDA reads
the devices' topology there), and no address-space limit (CUDA reserves far more address space
than it uses); the memory cgroup still caps its host memory and files.  What it shares: the GPU
itself, with every other sandbox and the machine; its memory (one sandbox can fill it and
make the others' allocations fail) and its compute time (no share per sandbox); the driver's
large ``ioctl`` interface, which the seccomp filter cannot narrow; and whatever the driver lets
one process see of another's GPU memory: no isolation beyond the driver's own (no MIG or MPS
partition is set up here).

``Sandbox.command(argv)`` wraps a command line; ``check_available()`` says why a machine cannot
sandbox (no ``bwrap``, or user namespaces switched off as in some containers); ``hardening()``
says which of the hardening above this machine gives.
"""
from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import autograder
from autograder.grading import parts, seccomp

PACKAGE_DIR = Path(autograder.__file__).resolve().parent
SYSTEM_DIRS = ("/usr", "/etc")
LINKED_DIRS = ("/bin", "/lib", "/lib64", "/sbin")  # symlinks into /usr on merged-/usr systems
GPU_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")

HOW_TO_ENABLE = (
    "Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and allow unprivileged user "
    "namespaces (sysctl kernel.unprivileged_userns_clone=1 on Debian; in Docker run the grader with "
    "--security-opt seccomp=unconfined, in Kubernetes allow them in the pod's security context)."
)

# bwrap reads its seccomp filter from a file descriptor.  This launcher, the command's first
# process, writes the compiled filter to a memfd and execs bwrap with it: whoever starts the
# command (jupyter_client's Popen, subprocess.run) needs to pass no descriptor, and no file with
# the filter lies anywhere.  It runs outside the sandbox, isolated from the environment (-I -S).
LAUNCHER = ("import os, sys\n"
            "fd = os.memfd_create('normlayers-seccomp', 0)\n"
            "os.write(fd, bytes.fromhex(sys.argv[1]))\n"
            "os.lseek(fd, 0, os.SEEK_SET)\n"
            "os.set_inheritable(fd, True)\n"
            "os.execv(sys.argv[2], [sys.argv[2], '--seccomp', str(fd)] + sys.argv[3:])\n")


def student_view() -> list[str]:
    """bwrap arguments that show the sandbox the student's part of the package and nothing else
    (:mod:`autograder.grading.parts`): an empty read-only folder in the package's place, with
    each student file bound into it.  The grader itself, every exercise's ``hidden.py`` and
    compiled copies are not there at all."""
    view = ["--tmpfs", str(PACKAGE_DIR)]
    for relative in parts.student_files(PACKAGE_DIR):
        path = PACKAGE_DIR / relative
        view += ["--ro-bind-try", str(path), str(path)]  # a file gone since the listing is skipped
    return view + ["--remount-ro", str(PACKAGE_DIR)]


class SandboxUnavailable(RuntimeError):
    """This machine cannot run student code in a sandbox; the message says why and how to fix it."""


@dataclass(frozen=True)
class Sandbox:
    """How one student's processes are confined."""

    memory_mb: int = 4096  # the sandbox's memory cgroup and (not with gpu) each process's address space; 0: neither
    cpu_seconds: int = 1200  # CPU time of the whole kernel
    file_mb: int = 256  # largest file a student process may write
    processes: int = 256  # processes and threads the sandbox may hold at once
    gpu: bool = False  # pass the NVIDIA device nodes through

    def command(self, argv: list[str], scratch: Path, workdir: Path) -> list[str]:
        """``argv`` run inside the sandbox, with ``scratch`` its only writable folder and
        ``workdir`` (inside ``scratch``) its working directory."""
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxUnavailable("bubblewrap (bwrap) is not installed. " + HOW_TO_ENABLE)
        venv, base = Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()
        cmd = [bwrap, "--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534",
               "--cap-drop", "ALL", "--die-with-parent", "--new-session"]
        if _disables_userns(bwrap):
            cmd.append("--disable-userns")
        for path in SYSTEM_DIRS:
            cmd += ["--ro-bind", path, path]
        for path in LINKED_DIRS:
            if os.path.islink(path):
                cmd += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                cmd += ["--ro-bind", path, path]
        # --tmpfs /tmp before any bind that may live under /tmp (a venv, the scratch folder):
        # binds made before it would vanish.
        cmd += ["--tmpfs", "/tmp"]
        for path in dict.fromkeys([venv, base]):
            cmd += ["--ro-bind", str(path), str(path)]
        cmd += student_view()
        cmd += ["--proc", "/proc", "--dev", "/dev"]
        if self.gpu:
            for device in sorted(str(p) for p in Path("/dev").glob("nvidia[0-9]*")) + list(GPU_DEVICES):
                cmd += ["--dev-bind-try", device, device]
            cmd += ["--ro-bind", "/sys", "/sys"]
        cmd += ["--bind", str(scratch), str(scratch), "--chdir", str(workdir)]
        home = scratch / "home"
        home.mkdir(exist_ok=True)
        cmd += ["--clearenv"]
        env = {
            "HOME": str(home), "PATH": f"{venv / 'bin'}:/usr/bin:/bin", "LANG": "C.UTF-8",
            "MPLBACKEND": "Agg", "PYTHONNOUSERSITE": "1", "TMPDIR": "/tmp",
            "MPLCONFIGDIR": str(home / ".matplotlib"), "OMP_NUM_THREADS": "1",
            # The grader's own package, bound above, before whatever the venv's finders point at
            # (an editable install of another copy of the course, which the sandbox does not show).
            "PYTHONPATH": str(PACKAGE_DIR.parent),
        }
        for key, value in env.items():
            cmd += ["--setenv", key, value]
        cmd += ["--", *argv]
        program = seccomp.program()
        if program is None:  # no syscall table for this machine: see hardening()
            return cmd
        return [sys.executable, "-I", "-S", "-c", LAUNCHER, program.hex(), *cmd]

    def limit(self) -> "ProcessLimit":
        return ProcessLimit(self)


class ProcessLimit:
    """Resource limits for one sandbox: ``preexec`` runs in the child before ``bwrap`` starts;
    ``close`` kills what is left and removes the cgroups once the sandbox has ended.

    Where the grader may create cgroups (root, or a delegated hierarchy), the sandbox gets a
    ``pids`` cgroup (processes and threads), a ``memory`` cgroup of ``memory_mb``: that one
    also counts what the sandbox writes to a tmpfs, its ``/tmp`` and its scratch folder (see
    :func:`scratch_root`), so neither memory nor files can exhaust the machine; and a ``cpu``
    cgroup of the default weight, so that a sandbox with many threads gets no more CPU than one
    with a single thread.  On cgroup v2 these are one cgroup (a process is in one cgroup there).
    """

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        limits = {"pids": {"pids.max": str(sandbox.processes)},
                  "cpu": {"cpu.weight": "100", "cpu.shares": "1024"}}  # v2's and v1's default weight
        if sandbox.memory_mb > 0:
            size = str(sandbox.memory_mb << 20)
            limits["memory"] = {"memory.limit_in_bytes": size, "memory.max": size}
        by_root: dict[Path, dict[str, str]] = {}
        for controller, files in limits.items():
            root = _controller_root(controller)
            if root is not None:
                by_root.setdefault(root.resolve(), {}).update(files)
        self.cgroups = [c for c in (_make_cgroup(root, files) for root, files in by_root.items()) if c]

    def preexec(self) -> None:
        s = self.sandbox
        if s.memory_mb > 0 and not s.gpu:  # CUDA reserves address space far beyond what it uses
            resource.setrlimit(resource.RLIMIT_AS, (s.memory_mb << 20, s.memory_mb << 20))
        resource.setrlimit(resource.RLIMIT_CPU, (s.cpu_seconds, s.cpu_seconds + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (s.file_mb << 20, s.file_mb << 20))
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if os.getuid() != 0:
            resource.setrlimit(resource.RLIMIT_NPROC, (s.processes, s.processes))
        for cgroup in self.cgroups:
            try:
                (cgroup / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                pass

    def close(self) -> None:
        """Kill whatever is left in the sandbox's cgroups and remove them."""
        for cgroup in self.cgroups:
            _remove_cgroup(cgroup)


def _remove_cgroup(cgroup: Path) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            pids = (cgroup / "cgroup.procs").read_text().split()
        except OSError:
            return
        for pid in pids:
            try:
                os.kill(int(pid), 9)
            except OSError:
                pass
        try:
            cgroup.rmdir()
            return
        except OSError:
            time.sleep(0.05)


def _controller_root(controller: str) -> Path | None:
    """Where new cgroups with ``controller`` can be made: cgroup v1's own hierarchy, or v2's
    unified one when the controller is enabled for children."""
    v1 = Path("/sys/fs/cgroup") / controller
    if (v1 / "cgroup.procs").exists() and os.access(v1, os.W_OK):
        return v1
    v2 = Path("/sys/fs/cgroup")
    try:
        if controller in (v2 / "cgroup.subtree_control").read_text().split() and os.access(v2, os.W_OK):
            return v2
    except OSError:
        pass
    return None


def _make_cgroup(root: Path, files: dict[str, str]) -> Path | None:
    """A new cgroup under ``root`` with those of ``files`` that exist there written; ``None``
    where it cannot be made or none could be written."""
    path = root / f"normlayers-grade-{uuid.uuid4().hex[:12]}"
    try:
        path.mkdir()
    except OSError:
        return None
    written = False
    for name, value in files.items():
        if (path / name).exists():
            try:
                (path / name).write_text(value)
                written = True
            except OSError:
                pass
    if not written:
        _remove_cgroup(path)
        return None
    return path


def scratch_root() -> str | None:
    """Where students' scratch folders go: a tmpfs with room (``/dev/shm``), so that what a
    sandbox writes there is memory its memory cgroup counts; else the system's temporary folder."""
    shm = Path("/dev/shm")
    try:
        stats = os.statvfs(shm)
    except OSError:
        return None
    if os.access(shm, os.W_OK) and stats.f_bavail * stats.f_frsize > 2 << 30:
        return str(shm)
    return None


@functools.lru_cache(maxsize=None)
def _disables_userns(bwrap: str) -> bool:
    """Whether this bwrap (0.8 or later) can forbid nested user namespaces on this machine: it
    needs one nested namespace of its own for that.  Where not, the seccomp filter still denies
    ``unshare`` and ``clone`` with new namespaces."""
    try:
        done = subprocess.run([bwrap, "--unshare-user", "--disable-userns", "--assert-userns-disabled",
                               "--ro-bind", "/", "/", "--", "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def hardening() -> list[str]:
    """What this machine's sandboxes have beyond namespaces and rlimits, one line each (for a log)."""
    program, bwrap = seccomp.program(), shutil.which("bwrap")
    if program is None:
        lines = [f"no seccomp filter: no syscall table for {os.uname().machine} (only x86_64 and aarch64)"]
    else:
        lines = [f"seccomp filter: {len(program) // 8} instructions"]
    if bwrap and _disables_userns(bwrap):
        lines.append("nested user namespaces: disabled (bwrap --disable-userns)")
    else:
        lines.append("nested user namespaces: not disabled by bwrap (older than 0.8?)"
                     + (", denied by the seccomp filter" if program else ""))
    for controller in ("pids", "memory", "cpu"):
        lines.append(f"{controller} cgroup: " + ("per sandbox" if _controller_root(controller) else "unavailable"))
    return lines


_CHECKED: str | None = None


def shown_folders() -> list[Path]:
    """The host folders a sandbox shows (read-only): the system's, the environment's, the package's."""
    folders = [Path(p) for p in SYSTEM_DIRS + LINKED_DIRS if os.path.isdir(p)]
    return [p.resolve() for p in folders] + [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), PACKAGE_DIR]


def check_course_outside(course: Path) -> None:
    """Refuse a course that lies inside a folder the sandbox shows: its secret, gradebook, other
    students' files and solutions would be readable there (the sandbox's user is the grader's
    own, so owner-only modes would not keep them out)."""
    course = Path(course).resolve()
    for folder in shown_folders():
        if course == folder or folder in course.parents:
            raise SandboxUnavailable(
                f"the course {course} lies inside {folder}, which every sandbox shows to student code: "
                "move the course elsewhere (for example under /srv or the instructor's home)")


def check_available(sandbox: Sandbox | None = None) -> None:
    """Raise :class:`SandboxUnavailable` unless a sandboxed Python starts here (checked once)."""
    global _CHECKED
    if _CHECKED == "ok":
        return
    sandbox = sandbox or Sandbox()
    scratch = Path(tempfile.mkdtemp(prefix="normlayers-probe-"))
    try:
        (scratch / "work").mkdir()
        command = sandbox.command([sys.executable, "-c", "import os; print(len(os.listdir('/proc')) > 0)"],
                                  scratch, scratch / "work")
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except SandboxUnavailable:
        raise
    except (OSError, subprocess.SubprocessError) as error:
        raise SandboxUnavailable(f"bubblewrap could not start ({error}). " + HOW_TO_ENABLE) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise SandboxUnavailable(f"bubblewrap cannot create a sandbox on this machine ({reason}). " + HOW_TO_ENABLE)
    found = sandboxed_package(sandbox)
    if found != str(PACKAGE_DIR / "__init__.py"):
        raise WrongPackage(f"a sandboxed kernel imports {found or 'no autograder package'}, not the grader's "
                           f"{PACKAGE_DIR}: grade with this course's own environment "
                           f"({PACKAGE_DIR.parent}/.venv, `pip install -r requirements.txt` in the course)")
    _CHECKED = "ok"


class WrongPackage(SandboxUnavailable):
    """The sandboxed kernel would not import the grader's own ``autograder``: every student
    would lose every check the same way."""


def sandboxed_package(sandbox: Sandbox) -> str:
    """Where ``import autograder`` leads in a sandboxed Python (its ``__init__.py``), '' if nowhere."""
    scratch = Path(tempfile.mkdtemp(prefix="normlayers-probe-"))
    try:
        (scratch / "work").mkdir()
        find = "import importlib.util; print(importlib.util.find_spec('autograder').origin)"  # not run
        command = sandbox.command([sys.executable, "-c", find], scratch, scratch / "work")
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return ""
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    lines = done.stdout.strip().splitlines()
    return str(Path(lines[-1]).resolve()) if done.returncode == 0 and lines else ""
