"""`hub/start` refuses before it creates anything, `hub/start --remove` undoes what it made, and
the servers it prepares reach no instructor material.

Both need root (hub/start creates Unix users); the hub itself is not started here
(tests/test_hub.py walks a semester through it).
"""
from __future__ import annotations

import json
import os
import runpy
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from course import REPO
from test_hub import instructor_material, readable_by, repo_modes_kept
from test_browser import unavailable

HUB = REPO / "hub"


def needs_root():
    if os.geteuid() != 0:
        unavailable("hub/start runs as root (it creates Unix users)")
    for tool in ("useradd", "userdel", "runuser"):
        if not shutil.which(tool):
            unavailable(f"hub/start needs {tool}")


def user_exists(name: str) -> bool:
    return subprocess.run(["id", name], capture_output=True).returncode == 0


def remove_users(names):
    for name in names:
        if user_exists(name):
            subprocess.run(["userdel", "--remove", name], capture_output=True)


def test_a_venv_others_cannot_run_is_refused_before_anything_is_made():
    """The reported case: a .venv built on a Python inside a folder only root can enter (pyenv's
    under /root). hub/start must name that folder and create no user and no state folder."""
    needs_root()
    base = Path(os.path.realpath(sys.executable))  # the venv's base interpreter
    top = Path(tempfile.mkdtemp(prefix="normlayers-hubstart-"))
    tag = secrets.token_hex(3)
    users = [f"nl-hs-i-{tag}", f"nl-hs-s-{tag}"]
    try:
        top.chmod(0o755)
        private = top / "private"
        private.mkdir(mode=0o700)
        (private / "python3.11").symlink_to(base)
        repo = top / "course"
        (repo / "hub").mkdir(parents=True)
        for name in ("start", "prepare.py", "course_auth.py"):
            shutil.copy2(HUB / name, repo / "hub" / name)
        made = subprocess.run([str(private / "python3.11"), "-m", "venv", "--without-pip", str(repo / ".venv")],
                              capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        state = repo / "hub" / "state"
        done = subprocess.run([str(repo / "hub" / "start"), "--instructor", users[0], "--students", users[1],
                               "--create-users", "--state", str(state)], capture_output=True, text=True, timeout=120)
        assert done.returncode != 0, done.stdout
        assert f"{private} (mode 700) is closed to them" in done.stderr, done.stderr
        assert "Nothing was created" in done.stderr and "/usr/bin/python3.11 -m venv --clear .venv" in done.stderr
        assert not [user for user in users if user_exists(user)], "hub/start created users before refusing"
        assert not state.exists(), "hub/start made its state folder before refusing"
    finally:
        remove_users(users)
        shutil.rmtree(top, ignore_errors=True)


def test_a_venv_with_its_own_copy_of_the_grader_is_refused_before_anything_is_made():
    """Every user runs .venv: a grader installed into it (`pip install .`, not the editable
    `-e .`) would give students its grading part and hidden cases. hub/start says so and stops."""
    needs_root()
    top = Path(tempfile.mkdtemp(prefix="normlayers-hubcopy-"))
    tag = secrets.token_hex(3)
    users = [f"nl-hs-i-{tag}", f"nl-hs-s-{tag}"]
    try:
        top.chmod(0o755)
        repo = top / "course"
        (repo / "hub").mkdir(parents=True)
        for name in ("start", "prepare.py", "course_auth.py"):
            shutil.copy2(HUB / name, repo / "hub" / name)
        made = subprocess.run(["/usr/bin/python3.11", "-m", "venv", "--without-pip", str(repo / ".venv")],
                              capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        installed = next((repo / ".venv" / "lib").glob("python3*")) / "site-packages" / "autograder" / "grading"
        installed.mkdir(parents=True)
        (installed / "__init__.py").write_text("")
        done = subprocess.run([str(repo / "hub" / "start"), "--instructor", users[0], "--students", users[1],
                               "--create-users"], capture_output=True, text=True, timeout=120)
        assert done.returncode != 0, done.stdout
        assert "is a copy of the whole grader" in done.stderr and "pip install -e ." in done.stderr, done.stderr
        assert "Nothing was created" in done.stderr
        assert not [user for user in users if user_exists(user)] and not (repo / "hub" / "state").exists()
    finally:
        remove_users(users)
        shutil.rmtree(top, ignore_errors=True)


def test_a_state_folder_others_cannot_reach_is_refused_before_anything_is_made(tmp_path):
    """The servers read their role's config and grader in the state folder as their users: one
    under a folder closed to them (pytest's own tmp_path, for one) is refused, with nothing made
    and the repository left as it was."""
    needs_root()
    tag = secrets.token_hex(3)
    users = [f"nl-hs-i-{tag}", f"nl-hs-s-{tag}"]
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    state = closed / "state"
    modes = {path: path.lstat().st_mode for path in REPO.iterdir()}
    try:
        done = subprocess.run([str(HUB / "start"), "--instructor", users[0], "--students", users[1],
                               "--create-users", "--state", str(state)], capture_output=True, text=True, timeout=120)
        assert done.returncode != 0, done.stdout
        assert "other users cannot reach the state folder" in done.stderr and "Nothing was created" in done.stderr, done.stderr
        assert not [user for user in users if user_exists(user)] and not state.exists()
        assert {path: path.lstat().st_mode for path in REPO.iterdir()} == modes, "the repository was changed"
    finally:
        remove_users(users)


@pytest.mark.slow
def test_prepare_only_then_remove_leaves_the_machine_as_it_was():
    """--prepare-only makes the users, the exchange and the course copy; --remove takes away
    exactly what was recorded (the users with their homes, the exchange, the state folder)."""
    needs_root()
    if not (HUB / "node_modules" / ".bin" / "configurable-http-proxy").exists():
        unavailable("configurable-http-proxy is not installed (`npm ci` in hub/; .ci/run does it)")
    tag = secrets.token_hex(3)
    instructor, student = f"nl-hr-i-{tag}", f"nl-hr-s-{tag}"
    top = Path(tempfile.mkdtemp(prefix="nl-hub-remove-", dir="/tmp"))  # pytest's tmp_path is closed to others
    top.chmod(0o755)
    state = top / "state"
    exchange = top / "exchange"
    try:
        with repo_modes_kept():
            done = subprocess.run([str(HUB / "start"), "--instructor", instructor, "--students", student,
                                   "--create-users", "--state", str(state), "--exchange", str(exchange),
                                   "--prepare-only"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        made = json.loads((state / "made.json").read_text())
        assert made["users"] == [instructor, student] and made["exchange_made"], made
        home = Path(os.path.expanduser(f"~{instructor}"))
        assert (home / "course" / "nbgrader_config.py").exists()
        assert (exchange / "normalization-layers" / "inbound").is_dir()

        removed = subprocess.run([str(HUB / "start"), "--remove", "--state", str(state)],
                                 capture_output=True, text=True, timeout=120)
        assert removed.returncode == 0, removed.stderr
        assert not user_exists(instructor) and not user_exists(student)
        assert not home.exists() and not state.exists() and not exchange.exists()
    finally:
        remove_users([instructor, student])
        shutil.rmtree(top, ignore_errors=True)


def server_environment(state: Path, instructor: str, student: str, user: str) -> dict[str, str]:
    """The environment hub/jupyterhub_config.py gives ``user``'s single-user server (its
    Spawner.environment after its pre_spawn_hook), with HOME as the spawner sets it."""
    from traitlets.config import Config

    config, saved = Config(), (dict(os.environ), list(sys.path))
    os.environ.update(NL_HUB_INSTRUCTOR=instructor, NL_HUB_STUDENTS=student, NL_HUB_STATE=str(state))
    try:
        runpy.run_path(str(HUB / "jupyterhub_config.py"), init_globals={"get_config": lambda: config})
    finally:
        os.environ.clear()
        os.environ.update(saved[0])
        sys.path[:] = saved[1]
    spawner = SimpleNamespace(user=SimpleNamespace(name=user), environment=dict(config.Spawner.environment))
    config.Spawner.pre_spawn_hook(spawner)
    return dict(spawner.environment, HOME=os.path.expanduser(f"~{user}"))


IMPORTS = """
import importlib.util, json, autograder
found = {"file": autograder.__file__, "grading": importlib.util.find_spec("autograder.grading") is not None}
if found["grading"]:
    import autograder.grading.pages as pages
    found["mathjax"] = pages.inline_mathjax() is not None
print(json.dumps(found))
"""


def imports_as(user: str, environment: dict[str, str]) -> dict:
    """What ``import autograder`` gives ``user`` in a server with ``environment`` (in their home)."""
    done = subprocess.run(["runuser", "-u", user, "--", "env", "-i",
                           *[f"{key}={value}" for key, value in environment.items()],
                           str(REPO / ".venv" / "bin" / "python"), "-c", IMPORTS],
                          capture_output=True, text=True, cwd=environment["HOME"], timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_students_servers_get_the_student_grader_and_no_instructor_material():
    """After hub/start, a student's server imports the student's copy of the grader (the files
    autograder.grading.parts gives the student's side: no grading/, grade.py or hidden.py) and
    cannot read the repository's instructor material, nor import the grading part through the
    venv's editable install, with or without the hub's PYTHONPATH; the instructor's server imports
    the whole grader, from a copy no student can enter."""
    needs_root()
    if not (HUB / "node_modules" / ".bin" / "configurable-http-proxy").exists():
        unavailable("configurable-http-proxy is not installed (`npm ci` in hub/; .ci/run does it)")
    from autograder.grading import parts

    tag = secrets.token_hex(3)
    instructor, student = f"nl-hp-i-{tag}", f"nl-hp-s-{tag}"
    top = Path(tempfile.mkdtemp(prefix="nl-hub-parts-", dir="/tmp"))  # pytest's tmp_path is closed to others
    top.chmod(0o755)
    state = top / "state"
    material = instructor_material()
    assert all(path.exists() for path in material), [p for p in material if not p.exists()]
    try:
        with repo_modes_kept():
            done = subprocess.run([str(HUB / "start"), "--instructor", instructor, "--students", student,
                                   "--create-users", "--state", str(state), "--prepare-only"],
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr[-3000:]

            # The student's copy: exactly the student's files of the repository's package.
            copy = state / "student" / "autograder"
            files = sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file())
            assert files == [f.as_posix() for f in parts.student_files(REPO / "autograder")]
            assert not [f for f in files if f.startswith("grading/") or f == "grade.py" or f.endswith("hidden.py")]

            environment = server_environment(state, instructor, student, student)
            found = imports_as(student, environment)
            assert found == {"file": str(copy / "__init__.py"), "grading": False}, found
            for path in [*material, state / "instructor"]:
                assert not readable_by(student, path), f"the student can read {path}"
            # Without the hub's PYTHONPATH (a student may unset it in a terminal), the editable
            # install's finder points into the closed repository: no grader at all.
            bare = {k: v for k, v in environment.items() if k != "PYTHONPATH"}
            bare_run = subprocess.run(["runuser", "-u", student, "--", "env", "-i",
                                       *[f"{k}={v}" for k, v in bare.items()], str(REPO / ".venv" / "bin" / "python"),
                                       "-c", "import autograder.grading"], capture_output=True, text=True, cwd="/")
            assert bare_run.returncode != 0 and "Error" in bare_run.stderr, bare_run.stdout

            # The instructor's server: the whole grader, with the MathJax its feedback pages inline.
            found = imports_as(instructor, server_environment(state, instructor, student, instructor))
            assert found == {"file": str(state / "instructor" / "autograder" / "__init__.py"),
                             "grading": True, "mathjax": True}, found
    finally:
        subprocess.run([str(HUB / "start"), "--remove", "--state", str(state)], capture_output=True, timeout=120)
        remove_users([instructor, student])
        shutil.rmtree(top, ignore_errors=True)
