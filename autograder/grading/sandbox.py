"""The sandbox every process that runs student code lives in: bubblewrap (``bwrap``).

A sandboxed process has its own PID, IPC, network, UTS and user namespaces (it sees only its own
processes and has no network), no capabilities, a read-only view of the system, the Python
environment and the ``autograder`` package, a private ``/tmp``, and one writable folder: the
student's scratch folder, which holds only that student's files.  The course (solutions,
gradebook, ``nbgrader_config.py``, other submissions, logs) is not in its file system at all.
It dies with its parent (``--die-with-parent``); everything it started dies with it, because its
PID namespace ends when the sandbox's first process does.

Limits (``setrlimit``, inherited by everything inside): address space per process, CPU seconds,
file size and open files.  Where the machine lets the grader create cgroups, a ``pids`` cgroup
caps processes and threads and a ``memory`` cgroup caps the sandbox's memory together with the
files it writes (its ``/tmp`` and its scratch folder are tmpfs); elsewhere ``RLIMIT_NPROC`` caps
processes (Linux enforces it only for a grader that is not root) and files are capped one by one.

``Sandbox.command(argv)`` wraps a command line; ``check_available()`` says why a machine cannot
sandbox (no ``bwrap``, or user namespaces switched off as in some containers).
"""
from __future__ import annotations

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

PACKAGE_DIR = Path(autograder.__file__).resolve().parent
SYSTEM_DIRS = ("/usr", "/etc")
LINKED_DIRS = ("/bin", "/lib", "/lib64", "/sbin")  # symlinks into /usr on merged-/usr systems
GPU_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")

HOW_TO_ENABLE = (
    "Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and allow unprivileged user "
    "namespaces (sysctl kernel.unprivileged_userns_clone=1 on Debian; in Docker run the grader with "
    "--security-opt seccomp=unconfined, in Kubernetes allow them in the pod's security context)."
)


class SandboxUnavailable(RuntimeError):
    """This machine cannot run student code in a sandbox; the message says why and how to fix it."""


@dataclass(frozen=True)
class Sandbox:
    """How one student's processes are confined."""

    memory_mb: int = 4096  # address space per process; 0: none (CUDA needs 0)
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
        for path in dict.fromkeys([venv, base, PACKAGE_DIR]):
            cmd += ["--ro-bind", str(path), str(path)]
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
        }
        for key, value in env.items():
            cmd += ["--setenv", key, value]
        return cmd + ["--", *argv]

    def limit(self) -> "ProcessLimit":
        return ProcessLimit(self)


class ProcessLimit:
    """Resource limits for one sandbox: ``preexec`` runs in the child before ``bwrap`` starts;
    ``close`` kills what is left and removes the cgroups once the sandbox has ended.

    Where the grader may create cgroups (root, or a delegated hierarchy), the sandbox gets a
    ``pids`` cgroup (processes and threads) and a ``memory`` cgroup of ``memory_mb``: that one
    also counts what the sandbox writes to a tmpfs, its ``/tmp`` and its scratch folder (see
    :func:`scratch_root`), so neither memory nor files can exhaust the machine.
    """

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        limits = {"pids": {"pids.max": str(sandbox.processes)}}
        if sandbox.memory_mb > 0:
            size = str(sandbox.memory_mb << 20)
            limits["memory"] = {"memory.limit_in_bytes": size, "memory.max": size}
        self.cgroups = [c for c in (_make_cgroup(controller, files) for controller, files in limits.items()) if c]

    def preexec(self) -> None:
        s = self.sandbox
        if s.memory_mb > 0:
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


def _make_cgroup(controller: str, files: dict[str, str]) -> Path | None:
    root = _controller_root(controller)
    if root is None:
        return None
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


_CHECKED: str | None = None


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
    _CHECKED = "ok"
