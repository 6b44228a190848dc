"""The real formgrader, in Chromium, with a hostile submission (no hub, no grading run).

A Jupyter server with nbgrader's formgrader runs in a course whose gradebook knows one student;
the student's autograded notebook is the scrubbed one grading would keep, and beside it (as a
plain ``nbgrader autograde`` leaves them) lies an HTML file of the student's.  The instructor
opens the submission page and clicks everything on it: no script of the student's may run, the
page's own must, and the files the formgrader serves of a submission stay inside that
submission, in a sandbox of their own.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.grading.gradebook import _interpreter_on_path
from autograder.grading.scrub import scrub_notebook
from course import REPO, free_port, tool_env
from test_browser import browser, chromium  # noqa: F401 - the fixtures

pytestmark = [pytest.mark.browser, pytest.mark.slow]
TOKEN = "formgrader-test-token"
EVIL = "<script>fetch('/pwned/served-file'); alert('served-file')</script>"
# Links whose labels hold an escaped bracket or a line break, pointing at the file above, at the
# gradebook through the files handler, and at javascript:.
MARKDOWN = ("See the [appendix][see\\]appendix], the [plot][my\nplot], a [js][j\\]s] and ![img][i\\]m].\n\n"
            "[see\\]appendix]: ..%2f..%2f..%2fgradebook.db\n\n[my\nplot]: evil.html\n\n"
            "[j\\]s]: javascript:fetch('/pwned/js');alert('js')\n\n[i\\]m]: /pwned/img\n\n"
            "<img src=x onerror=\"fetch('/pwned/onerror')\"> [inline](javascript:alert('inline'))")


def build_course(root: Path) -> str:
    """A course with one autograded submission; returns the submission's id."""
    from nbgrader.api import Gradebook

    (root / "nbgrader_config.py").write_text((REPO / "nbgrader_config.py").read_text()
                                             + f"\nc.CourseDirectory.root = {str(root)!r}\n")
    nb = new_notebook(cells=[
        new_markdown_cell(MARKDOWN),  # a cell of the student's own
        new_markdown_cell(MARKDOWN, metadata={"nbgrader": {"grade": True, "solution": True, "grade_id": "q1",
                                                           "points": 1, "locked": False, "schema_version": 3}}),
        new_code_cell("answer = 42", metadata={"nbgrader": {"grade": False, "solution": True, "grade_id": "s1",
                                                            "locked": False, "schema_version": 3}}),
        new_code_cell("check(answer)", metadata={"nbgrader": {"grade": True, "solution": False, "grade_id": "t1",
                                                              "points": 1, "locked": True, "schema_version": 3}},
                      outputs=[new_output("stream", name="stdout", text="Part 1: passed\n")])])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    folder = root / "autograded" / "mallory" / "a"
    folder.mkdir(parents=True)
    nbformat.write(scrub_notebook(nb), folder / "n.ipynb")
    (folder / "evil.html").write_text(EVIL)
    with _interpreter_on_path(), Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:  # nbgrader runs alembic
        gb.add_assignment("a")
        gb.add_notebook("n", "a")
        gb.add_grade_cell("q1", "n", "a", max_score=1, cell_type="markdown")
        gb.add_solution_cell("q1", "n", "a")
        gb.add_solution_cell("s1", "n", "a")
        gb.add_grade_cell("t1", "n", "a", max_score=1, cell_type="code")
        for name, kind, locked, source in (("q1", "markdown", False, ""), ("s1", "code", False, ""),
                                           ("t1", "code", True, "check(answer)")):
            gb.add_source_cell(name, "n", "a", cell_type=kind, locked=locked, source=source)
        gb.add_student("mallory")
        gb.add_submission("a", "mallory")
        return gb.find_submission_notebook("n", "a", "mallory").id


@pytest.fixture
def formgrader(tmp_path):
    course, home = tmp_path / "course", tmp_path / "home"
    course.mkdir()
    (home / "config").mkdir(parents=True)
    (home / "config" / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": {"nbgrader.server_extensions.formgrader": True}}}))
    submission = build_course(course)
    port = free_port()
    env = tool_env() | {"HOME": str(home), "JUPYTER_CONFIG_DIR": str(home / "config"),
                        "JUPYTER_DATA_DIR": str(home / "data"), "JUPYTER_RUNTIME_DIR": str(home / "runtime")}
    with open(tmp_path / "server.log", "wb") as log:
        server = subprocess.Popen([sys.executable, "-m", "jupyter", "server", "--no-browser", f"--port={port}",
                                   "--ServerApp.ip=127.0.0.1", "--allow-root", f"--IdentityProvider.token={TOKEN}",
                                   f"--ServerApp.root_dir={course}"], cwd=course, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        else:
            pytest.fail("the Jupyter server did not start:\n" + (tmp_path / "server.log").read_text()[-3000:])
        yield base, submission
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_the_instructor_clicks_everything_and_nothing_of_the_students_runs(formgrader, browser):  # noqa: F811
    base, submission = formgrader
    page = browser.new_context().new_page()
    ran, pwned = [], []
    page.on("dialog", lambda dialog: (ran.append(dialog.message), dialog.dismiss()))
    page.on("request", lambda request: pwned.append(request.url) if "/pwned" in request.url else None)
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base) else route.abort())
    page.goto(f"{base}/?token={TOKEN}", wait_until="load")
    url = f"{base}/formgrader/submissions/{submission}/"
    response = page.goto(url, wait_until="load")
    policy = response.headers.get("content-security-policy", "")
    assert "script-src 'nonce-" in policy and "img-src data:" in policy, policy
    page.locator("input.score").first.wait_for()
    assert page.evaluate("() => typeof submission_id + typeof jQuery") == "stringfunction"
    links = page.evaluate("() => [...document.querySelectorAll('#notebook a[href], #notebook img')]"
                          ".map(e => e.getAttribute('href') || e.getAttribute('src'))")
    assert [link for link in links if link and not link.startswith(("#", "data:"))] == [], links
    for text in ("appendix", "plot", "js", "inline"):
        locator = page.locator("#notebook").get_by_text(text).first
        if locator.count():
            locator.click(timeout=2000, no_wait_after=True)
            page.wait_for_timeout(300)
            if page.url != url:
                page.goto(url, wait_until="load")
    page.locator("button.full-credit").first.click()  # the formgrader's own buttons still work
    page.wait_for_timeout(1000)
    assert page.locator("input.score").first.input_value() == "1"
    assert ran == [] and pwned == [], (ran, pwned)

    # The files beside the notebook: only inside the submission, never as live HTML.
    outside = page.goto(f"{base}/formgrader/submissions/{submission}/..%2f..%2f..%2fgradebook.db")
    assert outside.status == 404
    beside = page.goto(f"{base}/formgrader/submissions/{submission}/evil.html", wait_until="load")
    assert beside.status == 200 and "sandbox" in beside.headers.get("content-security-policy", "")
    page.wait_for_timeout(500)
    assert ran == [] and pwned == [], (ran, pwned)
