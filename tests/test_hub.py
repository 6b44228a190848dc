"""The whole semester on the course hub, in a real browser.

`hub/start` runs JupyterHub (hub/jupyterhub_config.py) behind configurable-http-proxy with one
JupyterLab per Unix user (LocalProcessSpawner) and nbgrader's exchange in a folder of mode 1777.
The test creates three throw-away Unix users, an instructor and two students, and in headless
Chromium (Debian's, as tests/test_browser.py):

1. the instructor logs in, sees the formgrader, and in a JupyterLab terminal generates and
   releases 02_batch_norm to the exchange;
2. each student logs in (no formgrader for them), fetches the assignment from the Assignments
   tab, enters the solution or a catalogued bug, runs it (the visible checks pass; the grader's
   hint appears), saves and submits;
3. the instructor collects and grades with `python -m autograder.grade` (the sandboxed path),
   presses the formgrader's autograde button for one student (it must run the same sandbox),
   generates and releases the feedback;
4. each student fetches the feedback in the Assignments tab and reads their own score and the
   grader's messages; no hidden test and nothing of the classmate reaches a student.

Afterwards the hub is stopped (SIGTERM: it stops the servers and the proxy), no process of the
three users and no proxy may remain, and the users are removed. Screenshots of every step go to
$COURSE_TEST_ARTIFACTS/screenshots/hub-NN-*.png, the hub's log to $COURSE_TEST_ARTIFACTS/hub.log.
Needs root (users, setuid spawning), Debian's chromium and bubblewrap, node and hub/node_modules
(`npm ci` in hub/; .ci/run does it).
"""
from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from course import REPO, SUBMISSIONS
from leaks import leaked, readable_text
from test_browser import (  # noqa: F401 - chromium and browser are fixtures used here
    ARTIFACTS, ASSIGNMENT, BUG, BUG_PHRASE, OPEN_NOTEBOOK, SCREENSHOTS, SET_CELLS_AND_RUN,
    browser, bug_sources, chromium, free_port, run_until, solution_sources, success_lines, unavailable,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

HUB = REPO / "hub"
PROXY = HUB / "node_modules" / ".bin" / "configurable-http-proxy"
COURSE_ID = "normalization-layers"
NOTEBOOK = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"


SHOTS = iter(range(1, 100))


def shot(page, step: str, **kwargs) -> Path:
    """The next numbered screenshot of the semester, hub-NN-<step>.png."""
    path = SCREENSHOTS / f"hub-{next(SHOTS):02d}-{step}.png"
    page.screenshot(path=str(path), **kwargs)
    return path


# ------------------------------------------------------------------ users and the hub

def run(*command: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), capture_output=True, text=True, **kwargs)


def user_pids(uids: set[int]) -> list[tuple[int, str, str]]:
    """(pid, status, command line) of every process that runs as one of ``uids``."""
    import psutil

    found = []
    for process in psutil.process_iter(["pid", "uids", "status", "cmdline"]):
        try:
            if process.info["uids"] and process.info["uids"].real in uids:
                found.append((process.pid, process.info["status"], " ".join(process.info["cmdline"] or [])[:200]))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def left_running(uids: set[int], seconds: float = 60) -> list[tuple[int, str, str]]:
    """The users' processes still running after waiting up to ``seconds`` for them to end: the
    kernels and terminals end just after their servers, and PID 1 reaps them a moment later."""
    deadline = time.monotonic() + seconds
    while (left := [p for p in user_pids(uids) if p[1] != "zombie"]) and time.monotonic() < deadline:
        time.sleep(1)
    return left


def proxy_pids(port: int) -> list[int]:
    """configurable-http-proxy processes serving this hub's port."""
    import psutil

    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if any("configurable-http-proxy" in part for part in cmdline) and "--port" in cmdline \
                and cmdline[cmdline.index("--port") + 1:][:1] == [str(port)]:
            found.append(process.pid)
    return found


@pytest.fixture(scope="module")
def hub_users():
    """An instructor and two students, throw-away Unix users with private homes; removed after."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        unavailable("the hub test needs root: it creates Unix users and the hub starts servers as them")
    for tool in ("useradd", "userdel", "runuser", "bwrap"):
        if not shutil.which(tool):
            unavailable(f"the hub test needs {tool}")
    if not os.access(PROXY, os.X_OK):
        done = run("npm", "ci", "--no-audit", "--no-fund", cwd=HUB, timeout=600) if shutil.which("npm") else None
        if not os.access(PROXY, os.X_OK):
            unavailable("configurable-http-proxy is not installed (`npm ci` in hub/): "
                        + (done.stderr[-1500:] if done else "there is no npm"))
    tag = secrets.token_hex(3)
    names = {"instructor": f"nl-inst-{tag}", "student1": f"nl-stu1-{tag}", "student2": f"nl-stu2-{tag}"}
    created = []
    try:
        for name in names.values():
            done = run("useradd", "--create-home", "--shell", "/bin/bash", "-K", "HOME_MODE=0700", name)
            assert done.returncode == 0, done.stderr
            created.append(name)
        yield {role: pwd.getpwnam(name) for role, name in names.items()}
    finally:
        uids = set()
        for name in created:
            try:
                uids.add(pwd.getpwnam(name).pw_uid)
            except KeyError:
                pass
        left = user_pids(uids)
        for pid, _, _ in left:  # only after a failure: the hub test asserts there are none
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # userdel refuses a user who still has processes, zombies included: wait until PID 1 reaps them.
        deadline = time.monotonic() + 60
        while user_pids(uids) and time.monotonic() < deadline:
            time.sleep(1)
        for name in created:
            run("userdel", "--remove", name)
        assert not [n for n in created if run("id", n).returncode == 0], "a throw-away user was not removed"


@contextmanager
def repo_modes_kept():
    """The modes of REPO's top-level entries, which hub/start closes to other users, put back after."""
    modes = {path: stat_mode(path) for path in REPO.iterdir() if not path.is_symlink()}
    try:
        yield
    finally:
        for path, mode in modes.items():
            if path.exists():
                path.chmod(mode)


def instructor_material() -> list[Path]:
    """What of REPO no student may read on the hub: the solutions and their history, the tests,
    the instructor guide, the benchmarks, the README, the grader's source (its grading part, the
    grade command and every exercise's hidden cases)."""
    package = REPO / "autograder"
    return [REPO / "solutions" / NOTEBOOK, REPO / ".git", REPO / "tests" / "catalogue.py",
            REPO / "book" / "instructor" / "checklist.md", REPO / "benchmarks", REPO / "README.md",
            package, package / "grading", package / "grading" / "parts.py", package / "grade.py",
            *sorted(package.rglob("hidden.py"))]


def hub_passwords(state: Path) -> dict[str, str]:
    """The users' passwords as hub/start wrote them for root (one "user password" a line)."""
    return dict(line.split(" ", 1) for line in (state / "passwords.txt").read_text().splitlines() if line)


@contextmanager
def course_hub(users: dict, state: Path):
    """`hub/start` for these users on free ports; yields (base URL, passwords by user, hub process)."""
    port = free_port()
    env = dict(os.environ, NL_HUB_API_PORT=str(free_port()),
               NL_HUB_PROXY_API_PORT=str(free_port()), NL_HUB_EXPOSE_APP="1")
    env.pop("NL_HUB_PASSWORD", None)
    log_path = state.parent / "hub.log"
    # 0600: the log names each student's inbound folder, whose random suffix is its only secret.
    log = os.fdopen(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w")
    hub = subprocess.Popen(
        [str(HUB / "start"), "--instructor", users["instructor"].pw_name,
         "--students", f"{users['student1'].pw_name} {users['student2'].pw_name}",
         "--port", str(port), "--state", str(state)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if hub.poll() is not None:
                raise AssertionError(f"hub/start exited ({hub.returncode}):\n{log_path.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{base}/hub/api", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the hub did not answer within 180 s:\n{log_path.read_text()[-4000:]}")
            time.sleep(0.5)
        yield base, hub_passwords(state), hub
    finally:
        # SIGTERM to the hub alone: stopping the servers and the proxy is its own job (cleanup_servers).
        if hub.poll() is None:
            hub.send_signal(signal.SIGTERM)
            try:
                hub.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(hub.pid, signal.SIGKILL)
                hub.wait(timeout=30)
                # The proxy runs in a session of its own: a hub killed does not take it along.
                for pid in proxy_pids(port):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        log.close()


# ------------------------------------------------------------------ in the browser

def log_in(browser, base: str, user: str, password: str, step: str):
    """A fresh browser context (its own cookies), logged in; returns the page, on JupyterLab."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(60_000)
    context.set_default_navigation_timeout(180_000)
    page = context.new_page()
    page.goto(f"{base}/hub/login", wait_until="load")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    shot(page, step)
    page.click("#login_submit")
    page.wait_for_url(f"**/user/{user}/lab**", timeout=240_000)
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=180_000)
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    return page


def login_refused(chrome, base: str, user: str, password: str) -> bool:
    """Whether the hub turns ``user`` away with ``password`` (it shows its login form again)."""
    context = chrome.new_context()
    try:
        page = context.new_page()
        page.goto(f"{base}/hub/login", wait_until="load")
        page.fill("#username_input", user)
        page.fill("#password_input", password)
        with page.expect_navigation(timeout=60_000):
            page.click("#login_submit")
        refused = "Invalid username or password" in page.locator("body").inner_text()
        return refused and not [c for c in context.cookies() if c["name"] == "jupyterhub-hub-login"]
    finally:
        context.close()

def nbgrader_menu(page) -> list[str]:
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    page.locator(".lm-Menu-itemLabel").first.wait_for()
    items = [t.strip() for t in page.locator(".lm-Menu-itemLabel").all_inner_texts() if t.strip()]
    return items


def open_assignments(page) -> None:
    if "Assignment List" not in (items := nbgrader_menu(page)):
        raise AssertionError(f"no Assignment List in the Nbgrader menu: {items}")
    page.locator(".lm-Menu-itemLabel", has_text="Assignment List").click()
    page.locator("#released_assignments_list").wait_for()


def refresh_assignments(page) -> None:
    """Show the Assignments tab (opened before) and reload its lists."""
    page.evaluate("() => window.jupyterapp.commands.execute('nbgrader:open-assignment-list')")
    page.locator("#refresh_assignments_list").click()
    page.locator("#released_assignments_list").wait_for()


def wait_for_row(page, container: str, text: str, timeout: float = 120) -> None:
    """Wait until a row of an Assignments list shows ``text`` (the list is refreshed meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = page.locator(f"{container} .list_item")
        if any(text in t for t in rows.all_inner_texts()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{container}: no row with {text!r}; shows {rows.all_inner_texts()}")
        page.locator("#refresh_assignments_list").click()
        page.wait_for_timeout(2000)


class Terminal:
    """A JupyterLab terminal of the instructor; each command's output is also kept in a file."""

    def __init__(self, page, home: Path):
        self.page, self.logs = page, home / "hub-test-logs"

    def open(self) -> None:
        self.id = self.page.evaluate(
            "async () => (await window.jupyterapp.commands.execute('terminal:create-new')).id")
        self.page.locator(".jp-Terminal .xterm").last.wait_for()
        self.page.wait_for_timeout(1500)  # the shell's prompt

    def run(self, name: str, command: str, timeout: float = 300) -> tuple[int, str]:
        self.page.evaluate("id => window.jupyterapp.shell.activateById(id)", self.id)
        self.page.locator(f"#{self.id} .xterm").click()
        log, rc = self.logs / f"{name}.log", self.logs / f"{name}.rc"
        line = (f"mkdir -p ~/{self.logs.name} && {{ {command} ; }} 2>&1 | tee ~/{self.logs.name}/{name}.log; "
                f"echo ${{PIPESTATUS[0]}} > ~/{self.logs.name}/{name}.rc")
        self.page.keyboard.type("clear\n")
        self.page.keyboard.type(line + "\n")
        deadline = time.monotonic() + timeout
        while not rc.exists() or not rc.read_text().strip():
            if time.monotonic() > deadline:
                raise AssertionError(f"{name}: not finished within {timeout:.0f} s; output so far:\n"
                                     f"{log.read_text()[-3000:] if log.exists() else ''}")
            self.page.wait_for_timeout(1000)
        self.page.wait_for_timeout(700)  # the last lines reach the screen
        return int(rc.read_text()), log.read_text()


def notebook_run(page, sources: dict) -> None:
    opened = page.evaluate(OPEN_NOTEBOOK, NOTEBOOK)
    assert opened == "ok", opened
    assert sorted(page.evaluate(SET_CELLS_AND_RUN, [NOTEBOOK, sources])) == sorted(sources)


def save_notebook(page) -> None:
    page.evaluate("""async () => {
      const app = window.jupyterapp;
      const panel = app.shell.currentWidget;
      await panel.context.save();
    }""")


# ------------------------------------------------------------------ reading what happened

def submission_id(course: Path, student: str) -> str:
    """The gradebook's id of the student's notebook (the formgrader's submission page)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "gradebook.db"
        shutil.copyfile(course / "gradebook.db", copy)
        from nbgrader.api import Gradebook

        with Gradebook(f"sqlite:///{copy}") as gb:
            return gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student).id


def gradebook_scores(course: Path) -> tuple[float, dict[str, float]]:
    """The assignment's maximum and each student's score, read from a copy of the gradebook."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "gradebook.db"
        shutil.copyfile(course / "gradebook.db", copy)
        from nbgrader.api import Gradebook

        with Gradebook(f"sqlite:///{copy}") as gb:
            assignment = gb.find_assignment(ASSIGNMENT)
            return assignment.max_score, {s.student.id: s.score for s in assignment.submissions}


def environ_of(pid: int) -> dict[str, str]:
    """The environment a process started with."""
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(entry.split("=", 1) for entry in raw.split("\0") if "=" in entry)


def readable_by(user: str, path: Path) -> bool:
    """Whether ``user`` can list (a folder) or read (a file) ``path``."""
    command = ["ls", str(path)] if path.is_dir() else ["head", "-c", "1", str(path)]
    return run("runuser", "-u", user, "--", *command).returncode == 0


class Watch:
    """Notes the bubblewrap sandboxes a user runs while a block of code runs."""

    def __init__(self, uid: int):
        self.uid, self.seen, self._stop = uid, set(), threading.Event()

    def __enter__(self):
        import psutil

        def poll():
            while not self._stop.is_set():
                for process in psutil.process_iter(["pid", "name", "uids"]):
                    try:
                        if process.info["name"] == "bwrap" and process.info["uids"].real == self.uid:
                            self.seen.add(process.pid)
                    except (psutil.NoSuchProcess, psutil.AccessDenied, AttributeError):
                        pass
                time.sleep(0.2)

        self._thread = threading.Thread(target=poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)


# ------------------------------------------------------------------ the semester

def test_semester_on_the_hub(browser, hub_users, tmp_path):
    start = time.monotonic()
    for old in SCREENSHOTS.glob("hub-*.png"):
        old.unlink()
    instructor, student1, student2 = hub_users["instructor"], hub_users["student1"], hub_users["student2"]
    inst, s1, s2 = instructor.pw_name, student1.pw_name, student2.pw_name
    inst_home, home1, home2 = Path(instructor.pw_dir), Path(student1.pw_dir), Path(student2.pw_dir)
    course = inst_home / "course"
    root = Path(tempfile.mkdtemp(prefix="nl-hub-", dir="/tmp"))
    root.chmod(0o755)  # the exchange inside must be reachable by every user
    state = root / "state"
    uids = {instructor.pw_uid, student1.pw_uid, student2.pw_uid}
    expected = success_lines()
    solution, bug = solution_sources(), bug_sources()
    page_errors: list[str] = []
    timings: dict[str, float] = {}

    def mark(step: str) -> None:
        timings[step] = round(time.monotonic() - start, 1)

    try:
        with repo_modes_kept(), course_hub(hub_users, state) as (base, passwords, hub):
            mark("hub up")
            port = int(base.rsplit(":", 1)[1])
            assert proxy_pids(port), "no configurable-http-proxy serves the hub"
            exchange = state / "exchange"
            assert exchange.is_dir() and (exchange.stat().st_mode & 0o7777) == 0o1777
            # The course's folders exist before any student could make them, and are the instructor's.
            for name, mode in (("", 0o755), ("outbound", 0o755), ("inbound", 0o2733), ("feedback", 0o711)):
                folder = exchange / COURSE_ID / name
                assert folder.stat().st_uid == instructor.pw_uid and stat_mode(folder) == mode, (folder, oct(stat_mode(folder)))
            assert stat_mode(course) == 0o700 and course.stat().st_uid == instructor.pw_uid
            # The servers run REPO's .venv, so every user traverses REPO: everything else of it
            # is closed to them (tests/test_hub_start.py checks the imports in detail).
            for user in (s1, s2):
                for private in instructor_material():
                    assert not readable_by(user, private), f"{user} can read {private}"
            # Each their own password: nobody logs in with another's.
            assert sorted(passwords) == sorted([inst, s1, s2]) and len(set(passwords.values())) == 3
            assert stat_mode(state / "passwords.json") == 0o600 and stat_mode(state / "passwords.txt") == 0o600
            assert stat_mode(state / "jupyterhub.sqlite") == 0o600, "the hub's database is open to others"
            assert login_refused(browser, base, s1, passwords[s2]), "a student logged in with a classmate's password"
            assert login_refused(browser, base, s1, passwords[inst]), "a student logged in with the instructor's password"
            assert login_refused(browser, base, inst, passwords[s1]), "the instructor's account took a student's password"

            # 1. The instructor: formgrader in the menu; generate and release in a terminal.
            teacher = log_in(browser, base, inst, passwords[inst], "instructor-login")
            teacher.on("pageerror", lambda e: page_errors.append(f"instructor: {e}"))
            items = nbgrader_menu(teacher)
            shot(teacher, "instructor-nbgrader-menu")
            assert "Formgrader" in items and "Assignment List" in items, items
            teacher.keyboard.press("Escape")
            terminal = Terminal(teacher, inst_home)
            terminal.open()
            rc, out = terminal.run("release", f"cd ~/course && nbgrader generate_assignment {ASSIGNMENT} --force"
                                              f" && nbgrader release_assignment {ASSIGNMENT} && nbgrader list")
            shot(teacher, "instructor-released")
            assert rc == 0, out
            assert f"Released as: {COURSE_ID} {ASSIGNMENT}" in out, out
            assert (exchange / COURSE_ID / "outbound" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()
            assert not leaked((exchange / COURSE_ID / "outbound" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
            # The formgrader panel inside JupyterLab (an iframe of the same server) shows the release.
            teacher.evaluate("() => window.jupyterapp.commands.execute('nbgrader:open-formgrader')")
            panel = teacher.frame_locator(".jp-MainAreaWidget iframe").last
            panel.locator("tr", has_text=ASSIGNMENT).first.wait_for(timeout=60_000)
            teacher.wait_for_timeout(1000)
            shot(teacher, "instructor-formgrader-panel")
            row = panel.locator("tr", has_text=ASSIGNMENT).first
            assert "released" in row.inner_text(), row.inner_text()
            mark("released")

            # 2. The students: no formgrader; fetch, work, run the visible checks, save, submit.
            pages = {}
            for index, (user, sources) in enumerate([(s1, solution), (s2, bug)]):
                page = log_in(browser, base, user, passwords[user], f"student{index + 1}-login")
                page.on("pageerror", lambda e, u=user: page_errors.append(f"{u}: {e}"))
                items = nbgrader_menu(page)
                shot(page, f"student{index + 1}-no-formgrader")
                assert "Assignment List" in items and "Formgrader" not in items, items
                assert page.request.get(f"{base}/user/{user}/formgrader").status == 404, "a student's server serves the formgrader"
                page.keyboard.press("Escape")
                page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
                page.locator(".lm-Menu-itemLabel", has_text="Assignment List").click()
                page.locator("#released_assignments_list").wait_for()
                wait_for_row(page, "#released_assignments_list", ASSIGNMENT)
                page.locator("#released_assignments_list .list_item", has_text=ASSIGNMENT).locator("button",
                                                                                                   has_text="Fetch").click()
                wait_for_row(page, "#fetched_assignments_list", ASSIGNMENT)
                shot(page, f"student{index + 1}-fetched")
                assert (Path(pwd.getpwnam(user).pw_dir) / NOTEBOOK).is_file()
                page.goto(f"{base}/user/{user}/lab/tree/{NOTEBOOK}", wait_until="load")
                page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=180_000)
                page.locator(".jp-Notebook .jp-CodeCell").first.wait_for(timeout=180_000)
                notebook_run(page, sources)
                pages[user] = page
            mark("students working")

            state1 = run_until(pages[s1], lambda s: all(any(line in o for o in s["outputs"]) for line in expected)
                               or any("Traceback" in o or "CheckFailed" in o for o in s["outputs"]),
                               "the solution's success lines")
            shown = "\n".join(state1["outputs"])
            assert all(line in shown for line in expected) and "Traceback" not in shown and "CheckFailed" not in shown, shown
            pages[s1].locator(".jp-OutputArea-output", has_text=expected[-1]).first.scroll_into_view_if_needed()
            shot(pages[s1], "student1-visible-checks-pass")
            state2 = run_until(pages[s2], lambda s: any("CheckFailed" in o or "Traceback" in o for o in s["outputs"])
                               and s["status"] == "idle" and not s["queued"], "the grader's hint for " + BUG)
            failing = next(o for o in state2["outputs"] if "CheckFailed" in o or "Traceback" in o)
            # The message alone (CheckFailed._render_traceback_): no frames of the grader's modules.
            assert failing.lstrip().startswith("CheckFailed: ") and BUG_PHRASE in failing, failing
            assert "Traceback" not in failing, failing
            pages[s2].locator(".jp-OutputArea-output", has_text="CheckFailed").first.scroll_into_view_if_needed()
            shot(pages[s2], "student2-grader-hint")
            # The students' kernels import the student's copy of the grader that hub/start made.
            for account in (student1, student2):
                kernels = [pid for pid, _, command in user_pids({account.pw_uid}) if "ipykernel" in command]
                assert kernels, f"no kernel of {account.pw_name}"
                for pid in kernels:
                    assert environ_of(pid).get("PYTHONPATH") == str(state.resolve() / "student"), environ_of(pid)
            mark("visible checks run")

            for index, user in enumerate([s1, s2]):
                page = pages[user]
                save_notebook(page)
                refresh_assignments(page)
                wait_for_row(page, "#fetched_assignments_list", ASSIGNMENT)
                page.locator("#fetched_assignments_list .list_item", has_text=ASSIGNMENT).locator(
                    "button", has_text="Submit").first.click()
                wait_for_row(page, "#submitted_assignments_list", ASSIGNMENT)
                shot(page, f"student{index + 1}-submitted")
            inbound = exchange / COURSE_ID / "inbound"
            assert not readable_by(s1, inbound), "a student can list the exchange's inbound folder"
            mark("submitted")

            # 3. The instructor collects and grades with the course's command.
            rc, out = terminal.run("collect", f"cd ~/course && nbgrader collect {ASSIGNMENT}")
            assert rc == 0, out
            for user in (s1, s2):
                assert (course / "submitted" / user / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file(), out
            rc, grading = terminal.run("grade", f"cd ~/course && python -m autograder.grade {ASSIGNMENT}", timeout=420)
            shot(teacher, "instructor-graded")
            assert rc == 0, grading
            assert "UNSANDBOXED" not in grading and "Refusing" not in grading, grading
            maximum, scores = gradebook_scores(course)
            print(f"\nhub: {ASSIGNMENT} max {maximum}; scores {scores}")
            assert maximum > 0 and scores.get(s1) == maximum, (maximum, scores, grading)
            assert scores.get(s2) is not None and 0 < scores[s2] < maximum, (maximum, scores, grading)
            mark("graded")

            # 4. The formgrader's autograde button runs nbgrader's autograde in the instructor's
            #    server with the course's config: the kernel must be in the sandbox there too.
            formgrader = teacher.context.new_page()
            formgrader.goto(f"{base}/user/{inst}/formgrader/manage_submissions/{ASSIGNMENT}", wait_until="load")
            row = formgrader.locator("tr", has_text=s2)
            row.locator("td.autograde a").wait_for()
            with Watch(instructor.pw_uid) as watch:
                row.locator("td.autograde a").click()
                formgrader.locator(".modal-dialog", has_text="autograded").wait_for(timeout=300_000)
            formgrader.wait_for_timeout(1000)  # the dialog fades in
            shot(formgrader, "formgrader-autograde-button")
            dialog = formgrader.locator(".modal-dialog").inner_text()
            assert "Successfully autograded" in dialog, dialog
            assert watch.seen, "the formgrader's autograde ran no bubblewrap sandbox"
            assert gradebook_scores(course)[1] == scores, "the button graded differently from the command"
            graded = json.loads((course / "autograded" / s2 / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
            judged = [c for c in graded["cells"] if c["cell_type"] == "code"
                      and c["metadata"].get("nbgrader", {}).get("grade") and not c["metadata"]["nbgrader"].get("solution")]
            assert judged and all(c["execution_count"] is None for c in judged), \
                "a test cell ran in the student's kernel, not in the grader"
            formgrader.keyboard.press("Escape")
            formgrader.goto(f"{base}/user/{inst}/formgrader/manage_submissions/{ASSIGNMENT}", wait_until="load")
            formgrader.locator("tr", has_text=s1).wait_for()
            shot(formgrader, "formgrader-submissions")
            # The formgrader reads the course's gradebook (an absolute db_url), not one of its own.
            listed = formgrader.locator("tbody tr").all_inner_texts()
            assert any(s1 in r for r in listed) and any(s2 in r for r in listed), listed
            assert not [r for r in listed if "needs autograding" in r], listed
            assert not (inst_home / "gradebook.db").exists(), "the formgrader opened a gradebook in the home"
            # The submission page: a script policy that lets only the page's own scripts run.
            response = formgrader.goto(f"{base}/user/{inst}/formgrader/submissions/{submission_id(course, s2)}/",
                                       wait_until="load")
            policy = response.headers.get("content-security-policy", "")
            scripts = policy.split("script-src", 1)[-1].split(";", 1)[0]
            assert "'nonce-" in scripts and "unsafe" not in scripts and "frame-ancestors 'self'" in policy, policy
            formgrader.locator("input.score").first.wait_for()
            assert formgrader.evaluate("() => typeof submission_id + typeof jQuery") == "stringfunction", \
                "the formgrader's own scripts did not run under the policy"
            shot(formgrader, "formgrader-submission")
            formgrader.close()
            mark("formgrader autograde")

            rc, out = terminal.run("feedback", f"cd ~/course && nbgrader generate_feedback {ASSIGNMENT}"
                                               f" && nbgrader release_feedback {ASSIGNMENT}")
            shot(teacher, "instructor-feedback-released")
            assert rc == 0, out
            mark("feedback released")

            # 5. Each student fetches the feedback and reads their own score and messages.
            for index, (user, home, other, other_home) in enumerate([(s1, home1, s2, home2), (s2, home2, s1, home1)]):
                page = pages[user]
                refresh_assignments(page)
                wait_for_row(page, "#submitted_assignments_list", "feedback available")
                page.locator("button", has_text="Fetch Feedback").first.click()
                wait_for_row(page, "#submitted_assignments_list", "view feedback")
                shot(page, f"student{index + 1}-feedback-fetched")
                files = sorted((home / ASSIGNMENT / "feedback").rglob(f"{ASSIGNMENT}.html"))
                assert len(files) == 1, files
                relative = files[0].relative_to(home)
                page.goto(f"{base}/user/{user}/files/{relative}", wait_until="load")
                text = page.locator("body").inner_text()
                shot(page, f"student{index + 1}-feedback", full_page=True)
                score = scores[user]
                assert f"{ASSIGNMENT}: {score:g} / {maximum:g} points" in text, text[:2000]
                if user == s1:
                    assert all(line in text for line in expected), text
                else:
                    assert BUG_PHRASE in text and "Traceback" not in text, text
                # Nothing hidden and nothing of the classmate in the feedback or in the home.
                assert not leaked(text, kinds=("HIDDEN TESTS",)), leaked(text, kinds=("HIDDEN TESTS",))
                assert not leaked(files[0].read_text(), kinds=("HIDDEN TESTS",))
                for path in sorted((home / ASSIGNMENT).rglob("*")):
                    if path.is_file():
                        assert not leaked(readable_text(path), kinds=("HIDDEN TESTS",)), path
                assert not [p for p in home.rglob("*") if p.is_file() and other in p.read_text(errors="ignore")], \
                    f"{user}'s files mention {other}"
                assert other not in text
                assert not readable_by(user, other_home), f"{user} can read {other}'s home"
                assert not readable_by(user, course), f"{user} can read the course directory"
            # The bug's own line is in student 2's notebook and in nobody else's.
            bug_line = "var = x.var(dim=dims)"
            assert bug_line in (SUBMISSIONS / "batch_norm" / f"{BUG}.py").read_text()
            assert bug_line in (home2 / NOTEBOOK).read_text()
            assert bug_line not in (home1 / NOTEBOOK).read_text()
            mark("feedback read")

            for page in pages.values():
                page.context.close()
            teacher.context.close()
        # The hub has stopped: its servers, kernels, terminals and its proxy with it.
        mark("hub stopped")
        assert hub.returncode is not None
        left = left_running(uids)
        assert not left, f"processes of the throw-away users outlived the hub: {left}"
        assert not proxy_pids(port), "configurable-http-proxy outlived the hub"
        assert not page_errors, page_errors
    finally:
        print(f"hub: timings (s since start): {timings}; screenshots in {SCREENSHOTS}")
        if (root / "hub.log").is_file():  # the hub's and the proxy's log, kept with the screenshots
            shutil.copyfile(root / "hub.log", ARTIFACTS / "hub.log")
            (ARTIFACTS / "hub.log").chmod(0o600)
        shutil.rmtree(root, ignore_errors=True)


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777
