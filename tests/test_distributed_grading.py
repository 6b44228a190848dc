"""Grading on a real Dask cluster: a ``dask scheduler`` and two ``dask worker`` processes on
localhost, started here as separate processes, as an instructor would start them on several
machines, every connection mutual TLS with the course's certificates
(``python -m autograder.grading.certs``).  The class is graded through ``--scheduler``; one
worker is killed while it grades.  Every student must be graded exactly once, with the scores of
the one-machine run, and nothing of the killed worker's grading may survive it.  A client
without the course's certificate is refused.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from nbgrader.api import Gradebook, SubmittedAssignment

from autograder.grading.certs import make_certificates
from course import free_port, processes_with, tool_env
from demo_class import CLASSES, build_class_course

pytestmark = pytest.mark.slow
ASSIGNMENT = "01_covariate_shift"
GRADE_OPTIONS = ["--cell-timeout", "60", "--timeout", "300", "--batch-size", "1"]


def _dask(*args: str) -> list[str]:
    """The ``dask`` command of this environment."""
    return [str(Path(sys.executable).parent / "dask"), *args]


def tls_flags(certs: Path, role: str) -> list[str]:
    return ["--tls-ca-file", str(certs / "ca.pem"), "--tls-cert", str(certs / f"{role}.pem"),
            "--tls-key", str(certs / f"{role}-key.pem")]


def security(certs: Path, role: str = "client"):
    from distributed.security import Security

    return Security(tls_ca_file=str(certs / "ca.pem"), tls_client_cert=str(certs / f"{role}.pem"),
                    tls_client_key=str(certs / f"{role}-key.pem"), require_encryption=True)


@contextmanager
def dask_cluster(tmp_path: Path, workers: int = 2):
    """A TLS scheduler and ``workers`` single-threaded workers, each its own process group;
    yields the address, the processes and the folder of the course's certificates."""
    from distributed import Client

    certs = tmp_path / "certs"
    make_certificates(certs)
    port = free_port()
    address = f"tls://127.0.0.1:{port}"
    env = tool_env() | {"DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION": "1.0"}
    logs = tmp_path / "dask-logs"
    logs.mkdir()
    processes = {}

    def start(name: str, command: list[str]) -> None:
        with open(logs / f"{name}.log", "wb") as log:
            processes[name] = subprocess.Popen(command, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, env=env,
                                               start_new_session=True)

    try:
        start("scheduler", _dask("scheduler", "--protocol", "tls", "--host", "127.0.0.1", "--port", str(port),
                                 "--no-dashboard", *tls_flags(certs, "scheduler")))
        for i in range(1, workers + 1):
            start(f"w{i}", _dask("worker", address, "--name", f"w{i}", "--nthreads", "1", "--no-nanny",
                                 "--no-dashboard", "--local-directory", str(tmp_path / f"w{i}"),
                                 *tls_flags(certs, "worker")))
        with Client(address, timeout="60s", security=security(certs)) as client:
            client.wait_for_workers(workers, timeout=120)
        yield address, processes, certs
    finally:
        for process in processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def test_the_cluster_obeys_only_the_courses_certificates(tmp_path):
    """A rogue client (no TLS, no certificate, or one of another authority) cannot connect, so it
    can neither send the workers code nor hand back results; the course's client can."""
    from distributed import Client
    from distributed.security import Security

    make_certificates(tmp_path / "rogue")
    with dask_cluster(tmp_path, workers=1) as (address, _, certs):
        rogues = {"plain tcp": dict(address=address.replace("tls://", "tcp://")),
                  "another authority": dict(security=security(tmp_path / "rogue")),
                  "another authority's client, trusting ours": dict(security=Security(
                      tls_ca_file=str(certs / "ca.pem"), tls_client_cert=str(tmp_path / "rogue" / "client.pem"),
                      tls_client_key=str(tmp_path / "rogue" / "client-key.pem"), require_encryption=True))}
        for name, how in rogues.items():
            with pytest.raises((OSError, TimeoutError)):
                with Client(how.get("address", address), timeout="5s", security=how.get("security")) as rogue:
                    rogue.submit(os.getpid).result(timeout=5)
                    pytest.fail(f"the cluster ran work for a client with {name}")
        assert refused_without_certificate(address, certs / "ca.pem"), "TLS without a client certificate"
        with Client(address, timeout="30s", security=security(certs)) as client:
            assert client.submit(os.getpid, pure=False).result(timeout=30) != os.getpid()


def refused_without_certificate(address: str, ca: Path) -> bool:
    """Whether the scheduler ends a TLS connection whose client shows no certificate (Dask's own
    client refuses to try: it is checked with a plain TLS socket)."""
    import socket
    import ssl

    host, port = address.removeprefix("tls://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False
    try:
        with socket.create_connection((host, int(port)), timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname=host) as tls:
            tls.sendall(b"\0" * 64)
            return tls.recv(1) == b""
    except (ssl.SSLError, ConnectionError):
        return True


def scores(course: Path) -> dict[str, float]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.student.id: s.score for s in gb.db.query(SubmittedAssignment)}


def busy_worker(address: str, certs: Path, processes: dict) -> tuple[str, list[int]]:
    """A worker that is grading now: its name and the processes it started.

    A task can be on a worker a moment before its nbgrader starts, so a worker counts as
    grading only once it has a child process."""
    from distributed import Client

    with Client(address, timeout="30s", security=security(certs)) as client:
        for _ in range(480):
            processing = client.processing()
            names = {addr: info["name"] for addr, info in client.scheduler_info()["workers"].items()}
            for addr, keys in processing.items():
                started = children(processes[names[addr]].pid) if keys else []
                if started:
                    return names[addr], started
            time.sleep(0.25)
    raise AssertionError("no worker was grading")


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (its threads' children included)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def autograde_processes() -> list[str]:
    """nbgrader autograde processes or student sandboxes still alive."""
    return processes_with(f"autograde {ASSIGNMENT}", "normlayers-student")


def test_a_killed_worker_costs_no_student_a_grade(tmp_path):
    classes = {ASSIGNMENT: CLASSES[ASSIGNMENT]()}
    expected = {student: float(sum(points)) for student, (_, points) in classes[ASSIGNMENT].items()}

    local = tmp_path / "local"
    build_class_course(local, classes)
    one_machine = subprocess.run([sys.executable, "-m", "autograder.grade", ASSIGNMENT, "--workers", "2", *GRADE_OPTIONS],
                                 cwd=local, capture_output=True, text=True, env=tool_env(), timeout=900)
    assert one_machine.returncode == 0, one_machine.stdout[-3000:] + one_machine.stderr[-3000:]
    assert scores(local) == expected

    course = tmp_path / "course"
    build_class_course(course, classes)
    with dask_cluster(tmp_path) as (address, processes, certs):
        command = subprocess.Popen([sys.executable, "-m", "autograder.grade", ASSIGNMENT, "--scheduler", address,
                                    *tls_flags(certs, "client"), *GRADE_OPTIONS], cwd=course, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, env=tool_env())
        lines = []
        for line in command.stdout:
            lines.append(line)
            if line.startswith("[1/"):  # one student merged; both workers are grading the next ones
                victim, grading = busy_worker(address, certs, processes)  # grading: its nbgrader autograde
                os.killpg(processes[victim].pid, signal.SIGKILL)
                processes[victim].wait()
                deadline = time.monotonic() + 10
                while any(Path(f"/proc/{pid}").exists() for pid in grading) and time.monotonic() < deadline:
                    time.sleep(0.2)
                orphans = [pid for pid in grading if Path(f"/proc/{pid}").exists()]
                break
        output = "".join(lines) + command.communicate(timeout=900)[0]
        assert command.returncode == 0, output[-4000:]
        survivors = [name for name, p in processes.items() if name != "scheduler" and p.poll() is None]

    assert "on the Dask cluster at tls://127.0.0.1" in output
    assert survivors and victim not in survivors, (victim, survivors)
    graded_lines = re.findall(r"^\[\s*\d+/\d+\] (\S+): ", output, flags=re.M)
    assert sorted(graded_lines) == sorted(expected), f"each student must be reported once:\n{output}"
    assert scores(course) == scores(local) == expected
    for student in expected:
        assert (course / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file(), student
    assert orphans == [], "the killed worker's nbgrader outlived it (by 10 s)"
    deadline = time.monotonic() + 15
    while autograde_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert autograde_processes() == [], "the killed worker's grading outlived it"
