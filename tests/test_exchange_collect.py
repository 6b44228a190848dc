"""`nbgrader collect` with the course's config takes only honest submissions (no hub needed).

The exchange's inbound holds an honest submission, one whose notebook is a symlink to a file the
instructor can read (the course's solutions, a classmate's submission) and, when the test runs as
root, one submitted in another student's name (its folder owned by someone else). Only the honest
one may land in submitted/ (autograder.grading.exchange.SafeExchangeCollect).
"""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

from course import REPO, tool_env

from autograder.grading.exchange import unsafe_entries

ASSIGNMENT = "02_batch_norm"
COURSE_ID = "normalization-layers"
STAMP = "2026-12-01 10:00:00.000000 UTC"


def submit(inbound: Path, student: str, notebook_text: str | None = None, link_to: Path | None = None) -> Path:
    folder = inbound / f"{student}+{ASSIGNMENT}+{STAMP}+abc123"
    folder.mkdir()
    (folder / "timestamp.txt").write_text(STAMP)
    notebook = folder / f"{ASSIGNMENT}.ipynb"
    if link_to is not None:
        notebook.symlink_to(link_to)
    else:
        notebook.write_text(notebook_text)
    return folder


def test_collect_takes_only_honest_submissions(tmp_path):
    me = pwd.getpwuid(os.getuid()).pw_name
    as_root = os.getuid() == 0
    course, exchange = tmp_path / "course", tmp_path / "exchange"
    course.mkdir()
    shutil.copy2(REPO / "nbgrader_config.py", course / "nbgrader_config.py")
    inbound = exchange / COURSE_ID / "inbound"
    inbound.mkdir(parents=True)
    exchange.chmod(0o1777)
    secret = tmp_path / "solutions.ipynb"
    secret.write_text('{"the": "solutions"}')

    submit(inbound, me, notebook_text='{"honest": true}')
    # As root the linked submission gets a real owner of its own ("nobody"), so that only the
    # link can be what turns it away; otherwise the owner check is off for this run.
    linker = "nobody" if as_root else "linker"
    linked = submit(inbound, linker, link_to=secret)
    if as_root:
        for path in (linked, *linked.iterdir()):
            os.lchown(path, pwd.getpwnam("nobody").pw_uid, -1)
        impostor = submit(inbound, "daemon", notebook_text='{"in": "daemon\'s name"}')
        assert impostor.stat().st_uid != pwd.getpwnam("daemon").pw_uid

    command = [sys.executable, "-m", "nbgrader", "collect", ASSIGNMENT, f"--Exchange.root={exchange}"]
    if not as_root:
        command.append("--ExchangeCollect.check_owner=False")
    done = subprocess.run(command, cwd=course, capture_output=True, text=True, env=tool_env(), timeout=300)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log

    submitted = course / "submitted"
    assert sorted(p.name for p in submitted.iterdir()) == [me], log
    assert (submitted / me / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text() == '{"honest": true}'
    assert f"Not collecting {linker}'s submission: it holds links or special files" in log, log
    if as_root:
        assert "Not collecting daemon's submission" in log and "is owned by root, not by daemon" in log, log
    assert "solutions" not in "".join(p.read_text() for p in submitted.rglob("*") if p.is_file())


def test_unsafe_entries_does_not_follow_links(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "ok.txt").write_text("x")
    (tmp_path / "sub" / "link").symlink_to("/etc/passwd")
    (tmp_path / "dirlink").symlink_to(tmp_path / "sub", target_is_directory=True)
    os.mkfifo(tmp_path / "fifo")
    assert sorted(Path(p).name for p in unsafe_entries(str(tmp_path))) == ["dirlink", "fifo", "link"]
