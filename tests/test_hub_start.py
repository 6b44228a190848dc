"""`hub/start` refuses before it creates anything, and `hub/start --remove` undoes what it made.

Both need root (hub/start creates Unix users); the hub itself is not started here
(tests/test_hub.py walks a semester through it).
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from course import REPO
from test_hub import private_repo
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


@pytest.mark.slow
def test_prepare_only_then_remove_leaves_the_machine_as_it_was(tmp_path):
    """--prepare-only makes the users, the exchange and the course copy; --remove takes away
    exactly what was recorded (the users with their homes, the exchange, the state folder)."""
    needs_root()
    if not (HUB / "node_modules" / ".bin" / "configurable-http-proxy").exists():
        unavailable("configurable-http-proxy is not installed (`npm ci` in hub/; .ci/run does it)")
    tag = secrets.token_hex(3)
    instructor, student = f"nl-hr-i-{tag}", f"nl-hr-s-{tag}"
    tmp_path.chmod(0o755)
    state = tmp_path / "state"
    exchange = tmp_path / "exchange"
    try:
        with private_repo():
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
