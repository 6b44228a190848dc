"""The trust boundary of grading, part by part: the plain-data wire, the agent's dispatcher, the
bubblewrap sandbox, the test-cell runner and the source scan.

The whole path (real nbgrader, real hostile notebooks, the grade command) is exercised by
tests/test_nbgrader_roundtrip.py; these tests pin down each part's promise on its own.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from autograder.core import wire
from autograder.grading import parts, sandbox
from autograder.grading.scan import scan_source
from autograder.grading.testcell import free_names
from autograder.sandbox.agent import Agent
from autograder.core.side import LocalSide, StudentCodeFailed
import leaks
from course import REPO, submission_files


# --- the wire --------------------------------------------------------------------------------

def test_plain_values_cross_unchanged():
    value = {"a": [1, 2.5, float("nan"), None, True, "text"], "b": (torch.float32, torch.device("cpu")),
             "t": torch.arange(6, dtype=torch.float64).reshape(2, 3)}
    got = wire.decode(wire.encode(value))
    assert got["a"][:2] == [1, 2.5] and got["a"][2] != got["a"][2] and got["a"][3:] == [None, True, "text"]
    assert got["b"] == (torch.float32, torch.device("cpu"))
    assert torch.equal(got["t"], value["t"]) and got["t"].dtype == torch.float64


def test_layout_requires_grad_and_parameters_survive():
    x = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    got = wire.decode(wire.encode([x, torch.nn.Parameter(torch.ones(3)), torch.zeros(2, requires_grad=True)]))
    assert torch.equal(got[0], x) and got[0].is_contiguous(memory_format=torch.channels_last)
    assert isinstance(got[1], torch.nn.Parameter) and got[2].requires_grad and got[2].grad_fn is None


def test_a_lying_tensor_arrives_as_its_numbers():
    class Agreeable(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if getattr(func, "__name__", "") in ("equal", "__eq__", "allclose"):
                return True
            return super().__torch_function__(func, types, args, kwargs or {})

    liar = torch.zeros(3).as_subclass(Agreeable)
    got = wire.decode(wire.encode(liar))
    assert type(got) is torch.Tensor and not torch.equal(got, torch.ones(3))


def test_objects_that_are_not_data_do_not_cross():
    with pytest.raises(wire.WireError):
        wire.encode(object())
    with pytest.raises(wire.WireError):
        wire.encode({1: "a key that is not a string"})


@pytest.mark.parametrize("tamper", ["truncate", "trailing", "size", "dtype", "depth", "huge"])
def test_malformed_messages_are_refused(tamper):
    data = wire.encode({"x": torch.ones(4)})
    if tamper == "truncate":
        data = data[:-3]
    elif tamper == "trailing":
        data = data + b"\0"
    elif tamper == "size":
        data = data.replace(b'"shape": [4]', b'"shape": [5]')
    elif tamper == "dtype":
        data = data.replace(b'"float32"', b'"object"')
    elif tamper == "depth":
        header = b'{"list": [' * 50 + b"1" + b"]}" * 50
        data = len(header).to_bytes(8, "little") + header + (0).to_bytes(8, "little")
    elif tamper == "huge":
        data = b"\0" * (wire.MAX_MESSAGE_BYTES + 1)
    with pytest.raises(wire.WireError):
        wire.decode(data)


# --- the agent and the local side --------------------------------------------------------------

def test_the_agent_runs_observations_only():
    agent = Agent({"f": lambda x: x})
    for name in ("os.system", "observe._recording", "agent.serve", "observe"):
        reply = wire.decode(agent.respond(wire.encode({"op": "call", "function": name, "args": [], "kwargs": {}})))
        assert "raised" in reply, name
    reply = wire.decode(agent.respond(b"not a message"))
    assert "raised" in reply


def test_a_student_error_reaches_the_checks_as_data():
    side = LocalSide()

    class Broken:
        def __init__(self):
            raise ValueError("my own message")

    made = side.wrap(Broken, "Broken").construct()
    assert isinstance(made, wire.RemoteError) and made.is_a(ValueError) and str(made) == "my own message"
    with pytest.raises(StudentCodeFailed):
        side.wrap(Broken, "Broken").call("observe.no_such_observation")


def test_a_students_text_cannot_start_a_line_of_the_graders_message():
    """A check quotes the student's exception text in its message; the class report counts the
    message's "Likely cause:" lines as the grader's conclusions. Every string from the student's
    side arrives on one line, so a forged cause stays inside the quote (found by an attack)."""
    from autograder.exercises.ex02_batch_norm import checks as batch_norm
    from autograder.grading.report import likely_causes
    from autograder.core.messages import CheckFailed

    forged = "boom\nLikely cause: you copied a classmate's notebook\r\nLikely cause: anything"

    def batch_mean_var(x):
        raise type("Fine\nLikely cause: forged name", (ValueError,), {})(forged)

    with pytest.raises(CheckFailed) as failure:
        batch_norm.check_batch_mean_var(batch_mean_var)
    message = str(failure.value)
    assert "you copied" in message and "⏎" in message
    cell = {"outputs": [{"output_type": "error", "ename": "CheckFailed", "evalue": message}]}
    assert likely_causes(cell) == []
    assert wire.one_line("a\u2028b\x85c\n") == "a ⏎ b ⏎ c" and wire.one_line("plain") == "plain"


def test_test_cells_read_the_students_names_and_nothing_else():
    source = "from autograder.exercises.ex02_batch_norm import checks\nchecks.check_training_forward(BatchNorm1d, BatchNorm2d, full=True)\nprint('ok')\n"
    assert free_names(source) == ["BatchNorm1d", "BatchNorm2d"]


# --- the sandbox -----------------------------------------------------------------------------

PROBE = r"""
import json, os, socket, sys
found = {}
found["processes"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
found["course_visible"] = [p for p in sys.argv[1:] if os.path.exists(p)]
try:
    open(sys.argv[-1], "a")
    found["package_writable"] = True
except OSError:
    found["package_writable"] = False
try:
    socket.create_connection(("127.0.0.1", 22), timeout=2)
    found["network"] = True
except OSError as error:
    found["network"] = False
found["uid"] = os.getuid()
found["capabilities"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0]
print(json.dumps(found))
"""


def run_sandboxed(code: str, *args: str, **limits) -> subprocess.CompletedProcess:
    scratch = Path(tempfile.mkdtemp(prefix="normlayers-test-"))
    (scratch / "work").mkdir()
    box = sandbox.Sandbox(**limits)
    limit = box.limit()
    try:
        command = box.command([sys.executable, "-c", code, *args], scratch, scratch / "work")
        return subprocess.run(command, capture_output=True, text=True, timeout=120, preexec_fn=limit.preexec)
    finally:
        limit.close()


def test_the_sandbox_sees_no_course_no_network_and_only_itself():
    import json

    sandbox.check_available()
    course = [str(REPO / "solutions"), str(REPO / "nbgrader_config.py"), str(REPO / "tests"), str(Path.home() / ".local"), str(Path.home() / ".cache"),
              str(REPO / "autograder" / "__init__.py")]
    done = run_sandboxed(PROBE, *course)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["course_visible"] == [str(REPO / "autograder" / "__init__.py")]  # the grader's code, read-only
    assert found["package_writable"] is False
    assert found["network"] is False
    assert len(found["processes"]) <= 3  # bwrap's init and the probe (and nothing of the grader's)
    assert found["uid"] != 0 and int(found["capabilities"], 16) == 0


# A submission that goes looking for the grader's hidden cases: it reads every file of the package
# it can reach, tries to import every exercise's hidden module and the grader, and reports.
HIDDEN_HUNT = r"""
import importlib, json, os, pkgutil, sys
import autograder, autograder.exercises
root = os.path.dirname(autograder.__file__)
texts, names = [], []
for folder, dirs, files in os.walk(root):
    for name in files:
        path = os.path.join(folder, name)
        names.append(os.path.relpath(path, root))
        try:
            texts.append(open(path, "rb").read().decode("utf-8", "replace"))
        except OSError:
            pass
imported = []
for module in [m.name + ".hidden" for m in pkgutil.iter_modules(autograder.exercises.__path__, "autograder.exercises.")] + ["autograder.grading"]:
    try:
        importlib.import_module(module)
        imported.append(module)
    except ImportError:
        pass
print(json.dumps({"names": names, "text": "\n".join(texts), "imported": imported}))
"""


def test_a_submission_in_the_sandbox_cannot_learn_any_hidden_case():
    import json

    sandbox.check_available()
    fingerprints = leaks.hidden_cases_by_exercise()
    assert len(fingerprints) >= 8 and all(fingerprints.values()), fingerprints  # every exercise has hidden cases
    done = run_sandboxed(HIDDEN_HUNT)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["imported"] == []
    assert not [name for name in found["names"] if name.endswith(("hidden.py", ".pyc")) or name.startswith("grading")]
    assert sorted(found["names"]) == sorted(str(name) for name in parts.student_files(REPO / "autograder"))
    assert "checks.py" in " ".join(found["names"])  # it did read the student's part
    for exercise, lines in fingerprints.items():
        assert not [line for line in lines if line in found["text"]], exercise


def test_the_sandbox_caps_processes_and_memory():
    fork = "import os\nn = 0\ntry:\n    for _ in range(200):\n        if os.fork() == 0:\n            import time; time.sleep(2); os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint(n)"
    done = run_sandboxed(fork, processes=32)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 32
    hog = "x = bytearray(3 << 30)\nprint('allocated')"
    done = run_sandboxed(hog, memory_mb=1024)
    assert "allocated" not in done.stdout and "MemoryError" in done.stderr


@pytest.mark.skipif(sandbox._controller_root("memory") is None, reason="this machine lets the grader make no memory cgroup")
def test_files_in_the_sandbox_count_against_its_memory():
    # Its /tmp is a tmpfs: without the memory cgroup, 600 MB of files there would not count.
    code = "chunk = b'x' * (100 << 20)\nfor i in range(6):\n    open(f'/tmp/f{i}', 'wb').write(chunk)\nprint('written')"
    done = run_sandboxed(code, memory_mb=384)
    assert "written" not in done.stdout


def test_everything_started_in_the_sandbox_ends_with_it():
    code = ("import subprocess\nsubprocess.Popen(['sleep', '7777'], start_new_session=True)\n"
            "subprocess.Popen(['sleep', '7778'])\nprint('started')")
    done = run_sandboxed(code)
    assert "started" in done.stdout
    left = subprocess.run(["pgrep", "-f", "sleep 777[78]"], capture_output=True, text=True).stdout
    assert left.strip() == ""


def run_filter(program: bytes, nr: int, arch: int, args: tuple = ()) -> int:
    """What the kernel would return for this syscall: a classic-BPF interpreter for the few
    instructions :mod:`autograder.grading.seccomp` emits."""
    import struct

    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    code = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    pc, a = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x06:
            return k
        if op == 0x20:
            a, pc = struct.unpack_from("<I", data, k)[0], pc + 1
            continue
        holds = {0x15: a == k, 0x35: a >= k, 0x45: a & k != 0}[op]
        pc += 1 + (jt if holds else jf)


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_seccomp_filter_decides_as_documented(machine):
    from autograder.grading import seccomp

    program, (arch, column) = seccomp.program(machine), seccomp.ARCHES[machine]
    nr = {name: numbers[column] for name, numbers in seccomp.DENIED.items()}
    allow, eperm, enosys = seccomp.ALLOW, seccomp.errno_(1), seccomp.errno_(38)
    assert run_filter(program, 63, arch) == allow  # read on aarch64, uname on x86_64
    assert run_filter(program, 63, 0x40000003) == seccomp.KILL_PROCESS  # i386's int 0x80
    for name, number in nr.items():
        if number is not None:
            assert run_filter(program, number, arch) == eperm, name
    assert run_filter(program, seccomp.CLONE3[column], arch) == enosys
    clone = seccomp.CLONE[column]
    assert run_filter(program, clone, arch, (0x01200011,)) == allow  # fork: CLONE_CHILD_SETTID|CLEARTID|SIGCHLD
    assert run_filter(program, clone, arch, (0x003D0F00,)) == allow  # pthread_create's flags
    assert run_filter(program, clone, arch, (0x10000000 | 17,)) == eperm  # CLONE_NEWUSER
    assert run_filter(program, clone, arch, (0x00020000,)) == eperm  # CLONE_NEWNS
    ioctl = seccomp.IOCTL[column]
    assert run_filter(program, ioctl, arch, (0, 0x5401)) == allow  # TCGETS
    assert run_filter(program, ioctl, arch, (0, 0x5412)) == eperm  # TIOCSTI
    assert run_filter(program, ioctl, arch, (0, 0xFFFFFFFF00005412)) == eperm  # the high half is ignored
    assert run_filter(program, ioctl, arch, (0, 0x541C)) == eperm  # TIOCLINUX
    if machine == "x86_64":
        assert run_filter(program, 0x40000000 | nr["unshare"], arch) == enosys  # x32
    assert seccomp.program("riscv64") is None  # no table: the sandbox goes without (hardening() says so)


DENIED_PROBE = r"""
import ctypes, errno, json, os, sys
keyctl, clone3 = int(sys.argv[1]), int(sys.argv[2])  # this machine's numbers (the grader is not in here)
libc = ctypes.CDLL(None, use_errno=True)
def error(result):
    return errno.errorcode.get(ctypes.get_errno(), "?") if result == -1 else "succeeded"
found = {
    "unshare user": error(libc.unshare(0x10000000)),
    "unshare net": error(libc.unshare(0x40000000)),
    "ptrace": error(libc.ptrace(0, 0, None, None)),  # PTRACE_TRACEME
    "mount": error(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)),
    "keyctl": error(libc.syscall(keyctl, 0, -3, 0)),  # the session keyring's id
    "clone3": error(libc.syscall(clone3, None, 0)),
}
primary, secondary = os.openpty()
found["TIOCSTI"] = error(libc.ioctl(secondary, 0x5412, b"x"))
found["TIOCGWINSZ"] = error(libc.ioctl(secondary, 0x5413, ctypes.create_string_buffer(8)))
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
found["Seccomp"], found["NoNewPrivs"] = status["Seccomp"].strip(), status["NoNewPrivs"].strip()
print(json.dumps(found))
"""


@pytest.mark.skipif(sandbox.seccomp.program() is None, reason="no seccomp table for this machine")
def test_the_sandbox_denies_namespaces_ptrace_mounts_and_keys(tmp_path):
    import json
    import shutil

    column = sandbox.seccomp.ARCHES[os.uname().machine][1]
    numbers = (sandbox.seccomp.DENIED["keyctl"][column], sandbox.seccomp.CLONE3[column])
    done = run_sandboxed(DENIED_PROBE, *map(str, numbers))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found == {"unshare user": "EPERM", "unshare net": "EPERM", "ptrace": "EPERM", "mount": "EPERM",
                     "keyctl": "EPERM", "clone3": "ENOSYS", "TIOCSTI": "EPERM", "TIOCGWINSZ": "succeeded",
                     "Seccomp": "2", "NoNewPrivs": "1"}
    if sandbox._disables_userns(shutil.which("bwrap")):  # bwrap 0.8 or later
        assert "--disable-userns" in sandbox.Sandbox().command(["python"], tmp_path, tmp_path)


ORDINARY_WORK = r"""
import multiprocessing, subprocess, sys, threading
import numpy, torch
assert float(torch.nn.functional.relu(torch.arange(-2.0, 3.0)).sum()) == 3.0
assert numpy.arange(4).sum() == 6
results = []
threads = [threading.Thread(target=lambda: results.append(torch.ones(2).sum().item())) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
assert results == [2.0] * 4
subprocess.run(["/bin/true"], check=True)
assert subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True).stdout == "42\n"
with multiprocessing.get_context("fork").Pool(2) as pool:
    assert pool.map(abs, [-1, -2, 3]) == [1, 2, 3]
print("ordinary work done")
"""


def test_ordinary_work_runs_under_the_filter():
    done = run_sandboxed(ORDINARY_WORK)
    assert "ordinary work done" in done.stdout, done.stderr


def test_a_gpu_sandbox_keeps_its_memory_cgroup_and_loses_only_the_address_space_limit():
    code = "import resource\nprint(resource.getrlimit(resource.RLIMIT_AS) == (-1, -1))"
    done = run_sandboxed(code, gpu=True, memory_mb=384)
    assert done.stdout.strip() == "True", done.stderr  # CUDA reserves far more address space than it uses
    if sandbox._controller_root("memory") is not None:
        files = ("chunk = b'x' * (100 << 20)\nfor i in range(6):\n    open(f'/tmp/f{i}', 'wb').write(chunk)\n"
                 "print('written')")
        done = run_sandboxed(files, gpu=True, memory_mb=384)
        assert "written" not in done.stdout  # the memory cgroup still caps its tmpfs files


@pytest.mark.skipif(sandbox._controller_root("cpu") is None, reason="this machine lets the grader make no cpu cgroup")
def test_each_sandbox_gets_a_cpu_cgroup_of_its_own():
    limit = sandbox.Sandbox().limit()
    try:
        cpu = [c for c in limit.cgroups if (c / "cpu.weight").exists() or (c / "cpu.shares").exists()]
        assert len(cpu) == 1
        placed = subprocess.run(["cat", "/proc/self/cgroup"], capture_output=True, text=True, preexec_fn=limit.preexec)
        assert any(line.endswith(":/" + cpu[0].name) for line in placed.stdout.splitlines()), placed.stdout
    finally:
        limit.close()
    assert not cpu[0].exists()


# --- the source scan ---------------------------------------------------------------------------

@pytest.mark.parametrize("line, route", [
    ("from torch._decomp import decompositions", "decompositions"),
    ("with torch.utils._python_dispatch._disable_current_modes():", "dispatch"),
    ("threading.Thread(target=run).start()", "threads"),
    ("kernel = getattr(torch.ops.aten, 'native_' + 'batch_norm')", "torch.ops"),
    ("import ctypes", "native code"),
    ("exec(base64.b64decode(blob))", "run time"),
    ("frame = sys._getframe(1)", "introspection"),
    ("sys.modules['autograder.sandbox.observe'].run_steps = fake", "grader's own modules"),
    ("import autograder.core.integrity as integ", "grader's own modules"),
    ("checks.engine.observe._ops = lambda recorder: []", "grader's own modules"),
    ("from torch.utils._mode_utils import no_dispatch", "private"),
    ("with _C._DisableTorchDispatch():", "private"),
    ("y = fn.batch_norm(x, None, None)", "normalization functions"),
    ("forward = nn.modules.batchnorm._BatchNorm.forward", "normalization functions"),
])
def test_the_scan_finds_routes_around_the_recorder(line, route):
    assert any(route in f.what for f in scan_source([(0, line)])), line


def test_the_scan_leaves_honest_work_alone():
    honest = [p for topic in ("covariate_shift", "batch_norm", "layer_norm", "instance_group_norm", "data_vs_layer_norm")
              for kind in ("correct", "bug") for p in submission_files("x_" + topic, kind)]
    assert len(honest) > 50
    flagged = {p.name: [f.describe() for f in scan_source([(0, p.read_text())])] for p in honest}
    assert {name: found for name, found in flagged.items() if found} == {}


def test_the_scan_leaves_the_released_scaffold_alone():
    from autograder.grading.scan import _student_cells
    from course import ASSIGNMENTS, release_notebook, solution_code

    for assignment in ASSIGNMENTS:
        assert scan_source(_student_cells(release_notebook(assignment))) == [], assignment
        assert scan_source([(0, solution_code(assignment))]) == [], assignment


def test_grading_a_course_that_never_generated_the_assignment_says_what_to_run(tmp_path, monkeypatch):
    """A fresh course copy has no gradebook (or one without this assignment): the command stops
    before grading anyone and names the command that fixes it."""
    import os

    from nbgrader.api import Gradebook

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")  # alembic

    from autograder.grading.grade import Limits, grade_class

    (tmp_path / "submitted" / "ada" / "02_batch_norm").mkdir(parents=True)
    for setup in ("no gradebook", "another assignment only"):
        if setup == "another assignment only":
            with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
                gb.add_assignment("01_covariate_shift")
        with pytest.raises(SystemExit, match=r"nbgrader generate_assignment 02_batch_norm --force"):
            grade_class(tmp_path, "02_batch_norm", workers=1, limits=Limits())


def test_the_sandbox_keeps_an_environment_that_lives_under_tmp(tmp_path):
    """The sandbox's own /tmp is a tmpfs: binds under /tmp made before it would vanish, and a
    course cloned under /tmp (its venv, its autograder package) could not start a kernel."""
    from autograder.grading.sandbox import PACKAGE_DIR, Sandbox

    command = Sandbox().command(["python"], tmp_path, tmp_path)
    tmpfs = command.index("--tmpfs")
    assert command[tmpfs + 1] == "/tmp"
    # the package is shown as a read-only tmpfs of its student files
    package_init = PACKAGE_DIR / "__init__.py"
    for path in (Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), PACKAGE_DIR, package_init, tmp_path):
        binds = [i for i, arg in enumerate(command) if arg in ("--ro-bind", "--ro-bind-try", "--bind", "--tmpfs") and command[i + 1] == str(path)
                 and i != tmpfs]
        # The last mount of a path wins: it must come after the tmpfs (/usr may be bound earlier too).
        assert binds and max(binds) > tmpfs, f"{path} is bound only before the sandbox's /tmp"


def test_a_sandboxed_kernel_imports_exactly_the_graders_package(tmp_path, monkeypatch):
    """The venv's own finder (an editable install) points at this repository; a grader whose
    package is another copy must get that copy in the sandbox, not the one the venv names."""
    assert sandbox.sandboxed_package(sandbox.Sandbox()) == str(sandbox.PACKAGE_DIR / "__init__.py")
    copy = tmp_path / "another-course" / "autograder"
    copy.mkdir(parents=True)
    (copy / "__init__.py").write_text("")
    monkeypatch.setattr(sandbox, "PACKAGE_DIR", copy)
    assert sandbox.sandboxed_package(sandbox.Sandbox()) == str(copy / "__init__.py")


def test_the_grade_command_refuses_a_sandbox_that_imports_another_package(tmp_path, monkeypatch):
    from autograder.grading.grade import grade_class
    from autograder.grading.task import Limits

    monkeypatch.setattr(sandbox, "_CHECKED", None)
    monkeypatch.setattr(sandbox, "sandboxed_package", lambda box: "/elsewhere/autograder/__init__.py")
    monkeypatch.setattr("autograder.grading.gradebook.has_assignment", lambda course, assignment: True)
    with pytest.raises(SystemExit, match="before any student: a sandboxed kernel imports /elsewhere"):
        grade_class(tmp_path, "02_batch_norm", workers=1, limits=Limits())
