"""The reader's and the student's path through the course, in a real browser.

Headless Chromium (Debian's `chromium` package, /usr/bin/chromium) driven by Playwright's sync
API. Playwright's own browser download (`playwright install`) is never used: it fetches from a
CDN. The set-up installs Debian's chromium with apt-get when it is missing and the tests run as
root; where it cannot, the tests fail under CI (CI=true) and are skipped elsewhere.

* Reader: the built book (the session's `built_book`) served on localhost; every page of
  _toc.yml is reached through the sidebar and checked for console errors, broken images and
  internal links, typeset math and requests that leave localhost.
* Student: JupyterLab on localhost with a copy of exercises/02_batch_norm/; the solution is put
  into the answer cells, the notebook is run and the visible checks' success lines are read from
  the page; then a catalogued bug goes in and the grader's diagnostic is read.

Screenshots go to $COURSE_TEST_ARTIFACTS/screenshots/ (default: test-artifacts/ at the
repository root, git-ignored); the Pages workflow uploads them. Deselect with -m "not browser".
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from functools import partial
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urldefrag, urlsplit

import nbformat
import pytest
import yaml

from course import REPO, SUBMISSIONS, free_port, is_solution_cell, nbgrader_meta, source_notebook, tool_env

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ARTIFACTS = Path(os.environ.get("COURSE_TEST_ARTIFACTS", REPO / "test-artifacts"))
SCREENSHOTS = ARTIFACTS / "screenshots"
IN_CI = os.environ.get("CI", "").lower() not in ("", "0", "false", "no")

# Chromium on a machine without internet: no background traffic (updates, sync, safe browsing),
# which a closed network would refuse at every start. Playwright adds --no-sandbox itself.
CHROMIUM_ARGS = [
    "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-domain-reliability",
]

ASSIGNMENT = "02_batch_norm"
BUG = "bug_batch_mean_var_unbiased"      # the catalogued bug the student enters
BUG_PHRASE = "unbiased variance"         # its expected phrase in tests/test_batch_norm_checks.py


# ------------------------------------------------------------------ set-up: browser, toc, server

def unavailable(reason: str):
    """Fail under CI (the browser tests must run there), skip with the reason elsewhere."""
    if IN_CI:
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def find_chromium() -> str | None:
    candidates = [os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                  shutil.which("google-chrome")]
    return next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


def install_chromium() -> str:
    """Debian's chromium with apt-get; returns what went wrong, '' on success."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "not root, so apt-get cannot install it (sudo apt-get install -y --no-install-recommends chromium)"
    if not shutil.which("apt-get"):
        return "there is no apt-get to install it with"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    try:
        done = subprocess.run(install, capture_output=True, text=True, timeout=900, env=env)
        if done.returncode != 0:  # stale package lists: refresh once and retry
            subprocess.run(["apt-get", "update"], capture_output=True, text=True, timeout=600, env=env)
            done = subprocess.run(install, capture_output=True, text=True, timeout=900, env=env)
    except subprocess.TimeoutExpired:
        return "apt-get timed out"
    return "" if done.returncode == 0 else f"apt-get failed: {done.stderr[-1500:]}"


@pytest.fixture(scope="module")
def chromium() -> str:
    path = find_chromium()
    if path is None:
        problem = install_chromium()
        path = find_chromium()
        if path is None:
            unavailable(f"Chromium is needed for the browser tests and is missing: {problem or 'not found after apt-get'}")
    return path


@pytest.fixture(scope="module")
def browser(chromium):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as error:
        unavailable(f"Playwright is needed for the browser tests (pip install -r requirements.txt): {error}")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, headless=True,
                                              args=CHROMIUM_ARGS, timeout=60_000)
        try:
            yield launched
        finally:
            launched.close()


def toc_pages() -> list[str]:
    """Every file of _toc.yml in reading order (root, parts, chapters, sections), read afresh."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    pages = []

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                pages.append(node["file"])
            for key in ("parts", "chapters", "sections"):
                walk(node.get(key, []))
        elif isinstance(node, list):
            for item in node:
                walk(item)

    pages.append(toc["root"])
    walk({k: v for k, v in toc.items() if k != "root"})
    return [re.sub(r"\.(md|ipynb)$", "", p) for p in pages]


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def serve(directory: Path, handler=QuietHandler):
    """A file server for ``directory`` on a free localhost port, in a thread (``handler``: a
    ``SimpleHTTPRequestHandler`` of the test's own)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id" or (tag == "a" and name == "name"):
                self.ids.add(value or "")


def fetch(url: str) -> tuple[int, set[str] | None]:
    """HTTP status of ``url`` and, for an HTML page, the ids its elements define."""
    try:
        with urllib.request.urlopen(url, timeout=20) as response:
            status, body, kind = response.status, response.read(), response.headers.get_content_type()
    except urllib.error.HTTPError as error:
        return error.code, None
    if kind != "text/html":
        return status, None
    parser = Ids()
    parser.feed(body.decode("utf-8", errors="replace"))
    return status, parser.ids


def shot_name(prefix: str, index: int, page: str) -> Path:
    return SCREENSHOTS / f"{prefix}-{index:02d}-{page.replace('/', '_')}.png"


# ------------------------------------------------------------------ the reader's path

# Runs in the page after load: MathJax's first typeset finished (or there is no MathJax).
WAIT_FOR_MATHJAX = """async () => {
  const mj = window.MathJax;
  if (!(mj && mj.startup && mj.startup.promise)) return false;
  const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error('MathJax typeset timed out')), 30000));
  await Promise.race([mj.startup.promise, timeout]);
  return true;
}"""

# Lazy images load only when scrolled to; load them all and list those that did not load.
BROKEN_IMAGES = """async () => {
  const images = [...document.images];
  images.forEach(i => { i.loading = 'eager'; });
  const settled = images.map(i => i.complete ? null : new Promise(r => {
    i.addEventListener('load', r, {once: true}); i.addEventListener('error', r, {once: true}); }));
  await Promise.race([Promise.all(settled), new Promise(r => setTimeout(r, 20000))]);
  return images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.currentSrc || i.src);
}"""

MATH_STATE = """() => {
  const math = [...document.querySelectorAll('span.math, div.math')];
  const article = document.querySelector('article') || document.body;
  const prose = article.cloneNode(true);
  prose.querySelectorAll('pre, code, script, style, .highlight, mjx-container').forEach(e => e.remove());
  const text = prose.textContent;
  return {
    math: math.length,
    typeset: document.querySelectorAll('mjx-container').length,
    untypeset: math.filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 80)),
    errors: [...document.querySelectorAll('[data-mjx-error], mjx-merror')]
      .map(e => e.getAttribute('data-mjx-error') || e.textContent),
    raw: ['$$', '\\\\(', '\\\\[', '\\\\begin{'].filter(d => text.includes(d)),
  };
}"""

# TeX packages that MathJax loads on demand must come from the vendored copy too.
AUTOLOAD = """async () => {
  try {
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error('timed out')), 20000));
    const node = await Promise.race([MathJax.tex2svgPromise('\\\\boldsymbol{x} + \\\\cancel{y}'), timeout]);
    return node.querySelector('[data-mjx-error]') ? 'error: ' + node.textContent : 'ok';
  } catch (e) { return 'failed: ' + e; }
}"""

# Chinese is set in the book's own font (book/_static/fonts/cjk.css), which must have loaded:
# without it a reader with no CJK font sees boxes. null on a page without Chinese.
CJK_FONT = """async () => {
  const walker = document.createTreeWalker(document.querySelector('article') || document.body,
                                           NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walker.nextNode()) && !/[\\u4e00-\\u9fff]/.test(node.textContent)) {}
  if (!node) return null;
  await document.fonts.ready;
  const family = getComputedStyle(node.parentElement).fontFamily;
  const faces = [...document.fonts].filter(f => f.family.replace(/"/g, '') === 'Book CJK');
  return {family, status: faces.map(f => f.status)};
}"""

# Display equations that are wider than their box (cut off or scrolled) at this width.
WIDE_EQUATIONS = """() => [...document.querySelectorAll('mjx-container[display]')]
  .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.slice(0, 60))"""

# Shown code blocks whose lines do not fit their box at this width (the reader must scroll).
WIDE_CODE = """() => [...document.querySelectorAll('div.highlight pre')]
  .filter(e => e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1)
  .map(e => e.textContent.split('\\n').reduce((a, b) => b.length > a.length ? b : a).slice(0, 60))"""

LINKS = "() => [...document.querySelectorAll('a[href]')].map(a => a.href)"
UNFOLD = "a => { for (let d = a.closest('details'); d; d = d.parentElement.closest('details')) d.open = true; }"
SIDEBAR_LINKS = "() => [...document.querySelectorAll('.bd-sidebar-primary a[href]')].map(a => a.href)"


def test_reader_path(built_book, browser):
    """Walk the book through its sidebar: every toc page loads cleanly, with math, images and links."""
    pages = toc_pages()
    assert pages, "_toc.yml lists no page"
    problems: dict[str, list[str]] = {}
    with serve(built_book) as base:
        origin = urlsplit(base).netloc
        page_url = {name: f"{base}/{name}.html" for name in pages}
        events: list[str] = []  # what the browser reports while one page is shown

        def only_localhost(route):  # the book must work offline: nothing from another host
            url = route.request.url
            if urlsplit(url).scheme in ("http", "https", "ws", "wss") and urlsplit(url).netloc != origin:
                events.append(f"request to another host (blocked): {url}")
                route.abort()
            else:
                route.continue_()

        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(30_000)
        context.set_default_navigation_timeout(60_000)
        context.route("**/*", only_localhost)
        page = context.new_page()
        page.on("console", lambda m: events.append(f"console error: {m.text} at {m.location.get('url')}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: events.append(f"uncaught error: {e}"))
        page.on("requestfailed", lambda r: events.append(f"request failed: {r.url} ({r.failure})")
                if urlsplit(r.url).netloc == origin else None)
        page.on("response", lambda r: events.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)

        link_status: dict[str, tuple[int, set[str] | None]] = {}
        autoload_checked = False
        for index, name in enumerate(pages):
            found = problems.setdefault(name, [])
            events.clear()
            if index == 0:  # the site's front door redirects to the root page
                page.goto(f"{base}/index.html", wait_until="load")
                page.wait_for_url(page_url[name], wait_until="load")
            else:  # reach the page through the previous page's sidebar, as a reader does
                hrefs = page.evaluate(SIDEBAR_LINKS)
                position = next((i for i, h in enumerate(hrefs) if urldefrag(h)[0] == page_url[name]), None)
                link = page.locator(".bd-sidebar-primary a[href]").nth(position) if position is not None else None
                if link is not None and not link.is_visible():  # a section: unfold its chapter, as a reader would
                    link.evaluate(UNFOLD)
                if link is not None and link.is_visible():
                    link.click()
                    page.wait_for_url(lambda u, target=page_url[name]: urldefrag(u)[0] == target, wait_until="load")
                else:
                    found.append("not reachable by a visible link in the previous page's sidebar")
                    page.goto(page_url[name], wait_until="load")

            has_mathjax = page.evaluate(WAIT_FOR_MATHJAX)
            math = page.evaluate(MATH_STATE)
            if math["math"] and not has_mathjax:
                found.append(f"{math['math']} equations but MathJax did not load")
            if math["untypeset"]:
                found.append(f"equations not typeset: {math['untypeset'][:3]}")
            if math["math"] and not math["typeset"]:
                found.append("no MathJax output (mjx-container) on a page with math")
            if math["errors"]:
                found.append(f"MathJax errors: {math['errors'][:3]}")
            if math["raw"]:
                found.append(f"raw TeX delimiters left in the text: {math['raw']}")
            if has_mathjax and not autoload_checked:
                autoload_checked = True
                if (result := page.evaluate(AUTOLOAD)) != "ok":
                    found.append(f"MathJax could not load a TeX package from the vendored copy: {result}")

            if wide := page.evaluate(WIDE_EQUATIONS):
                found.append(f"display equations wider than the page at 1280 px: {wide[:3]}")
            if wide := page.evaluate(WIDE_CODE):
                found.append(f"code lines wider than the page at 1280 px: {wide[:3]}")
            cjk = page.evaluate(CJK_FONT)
            if cjk is not None and not (cjk["family"].startswith('"Book CJK"')
                                        and "loaded" in cjk["status"]):
                found.append(f"Chinese is not set in the book's CJK font: {cjk}")

            broken = page.evaluate(BROKEN_IMAGES)
            if broken:
                found.append(f"images that did not load: {broken}")

            sidebar = {urldefrag(h)[0] for h in page.evaluate(SIDEBAR_LINKS)}
            if missing := [p for p in pages if page_url[p] not in sidebar]:
                found.append(f"the sidebar does not link to {missing}")

            for href in page.evaluate(LINKS):
                if urlsplit(href).netloc != origin:
                    continue
                target, fragment = urldefrag(href)
                if target not in link_status:
                    link_status[target] = fetch(target)
                status, ids = link_status[target]
                if status != 200:
                    found.append(f"link to {target} answers HTTP {status}")
                elif fragment and ids is not None and fragment not in ids:
                    found.append(f"link {href}: no element with id {fragment!r} on the target page")

            page.screenshot(path=str(shot_name("reader", index, name)), full_page=True)
            found.extend(events)

        context.close()
    problems = {name: found for name, found in problems.items() if found}
    print(f"\nreader: {len(pages)} pages, {len(link_status)} distinct internal link targets, "
          f"screenshots in {SCREENSHOTS}")
    assert not problems, json.dumps(problems, indent=2)


# ------------------------------------------------------------------ the student's path

def solution_sources() -> dict[str, str]:
    """The answer cells of the source notebook by grade_id, with the solution markers removed."""
    marker = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)
    return {nbgrader_meta(c)["grade_id"]: marker.sub("", c.source)
            for c in source_notebook(ASSIGNMENT).cells
            if is_solution_cell(c) and "### BEGIN SOLUTION" in c.source}


def bug_sources() -> dict[str, str]:
    """A catalogued bug as tests/course.notebook_with_code hands it in: the whole submission in
    the first answer cell, the later answer cells pointing back to it."""
    ids = [nbgrader_meta(c)["grade_id"] for c in source_notebook(ASSIGNMENT).cells if is_solution_cell(c)]
    code = (SUBMISSIONS / "batch_norm" / f"{BUG}.py").read_text()
    return {grade_id: code if i == 0 else "# (written in the first answer cell)" for i, grade_id in enumerate(ids)}


def success_lines() -> list[str]:
    """What the released notebook's test cells print when their visible checks pass."""
    nb = nbformat.read(REPO / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    lines = [m for c in nb.cells if c.cell_type == "code" and nbgrader_meta(c).get("grade")
             for m in re.findall(r'print\("(Part \d+: visible checks passed\.)"\)', c.source)]
    assert lines, "the exercise's test cells print no success line"
    return lines


def write_json(path: Path, content) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))


@contextmanager
def jupyter_lab(root: Path, home: Path):
    """JupyterLab on a free localhost port with token auth and throw-away settings; yields
    (base URL, token). The kernel is this interpreter (the venv: torch, the autograder)."""
    config, data, runtime = home / "jupyter_config", home / "jupyter_data", home / "jupyter_runtime"
    write_json(data / "kernels" / "python3" / "kernel.json", {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (ipykernel)", "language": "python"})
    settings = config / "lab" / "user-settings" / "@jupyterlab"
    # Render every cell (no virtual scrolling) so all outputs are in the page to be read.
    write_json(settings / "notebook-extension" / "tracker.jupyterlab-settings", {"windowingMode": "none"})
    # No news or update check (they would go to the internet) and no toast asking about them.
    write_json(settings / "apputils-extension" / "notification.jupyterlab-settings",
               {"checkForUpdates": False, "fetchNews": "false"})
    env = tool_env()
    env.update(HOME=str(home), JUPYTER_CONFIG_DIR=str(config), JUPYTER_DATA_DIR=str(data),
               JUPYTER_RUNTIME_DIR=str(runtime), JUPYTERLAB_SETTINGS_DIR=str(config / "lab" / "user-settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(config / "lab" / "workspaces"), IPYTHONDIR=str(home / "ipython"),
               JUPYTER_PLATFORM_DIRS="1", PYTHONUNBUFFERED="1")
    env.pop("JUPYTER_PATH", None)
    port, token = free_port(), secrets.token_hex(16)
    log = (home / "jupyter-lab.log").open("w")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter-lab"), "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={root}", "--ServerApp.terminals_enabled=False",
         "--LabApp.expose_app_in_browser=True",  # window.jupyterapp, to set cells through the model
         *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"

    def log_tail() -> str:
        return (home / "jupyter-lab.log").read_text()[-3000:]

    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise AssertionError(f"jupyter lab exited ({server.returncode}):\n{log_tail()}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"jupyter lab did not answer within 120 s:\n{log_tail()}")
            time.sleep(0.5)
        yield base, token
    finally:
        # The kernels run in sessions of their own: note them before the server goes. The server
        # shuts them down on SIGTERM; whichever is left after it is ended by its process id.
        try:
            import psutil
            kernels = psutil.Process(server.pid).children(recursive=True)
        except Exception:  # psutil (an IPython dependency) missing, or the server already gone
            kernels = []
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(server.pid, sig)
            except ProcessLookupError:
                break
            try:
                server.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        for kernel in kernels:
            try:
                kernel.kill()
            except Exception:  # already ended with the server
                pass
        log.close()


# All in the page, through JupyterLab's own objects (window.jupyterapp): typing thousands of
# characters into CodeMirror is slow and fights auto-indentation and bracket closing, while the
# cell model's shared source is what the editor shows and what the kernel is sent.
# Playwright's evaluate has no time limit of its own: every wait in the page gets one.
WITHIN = """const within = (promise, seconds, what) => Promise.race([promise, new Promise((_, reject) =>
  setTimeout(() => reject(new Error(what + ' took more than ' + seconds + ' s')), seconds * 1000))]);"""

OPEN_NOTEBOOK = """async (path) => {
  """ + WITHIN + """
  const app = window.jupyterapp;
  await within(app.restored, 120, 'restoring JupyterLab');
  const panel = Array.from(app.shell.widgets('main')).find(w => w.context && w.context.path === path);
  if (!panel) return 'no open notebook ' + path;
  await within(panel.context.ready, 120, 'opening the notebook');
  await within(panel.sessionContext.ready, 120, 'starting the kernel');
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  if (!kernel) return 'no kernel';
  app.shell.activateById(panel.id);
  return 'ok';
}"""

SET_CELLS_AND_RUN = """async ([path, sources]) => {
  """ + WITHIN + """
  const app = window.jupyterapp;
  const panel = Array.from(app.shell.widgets('main')).find(w => w.context && w.context.path === path);
  app.shell.activateById(panel.id);
  await within(app.commands.execute('notebook:clear-all-cell-outputs'), 30, 'clearing the outputs');
  const cells = panel.content.model.cells, set = [];
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    const meta = cell.getMetadata('nbgrader');
    if (meta && meta.grade_id in sources) {
      cell.sharedModel.setSource(sources[meta.grade_id]);
      set.push(meta.grade_id);
    }
  }
  app.commands.execute('notebook:run-all-cells');  // not awaited: the page is polled instead
  return set;
}"""

# What the page shows: each code cell's output text, the kernel's status, cells still queued.
NOTEBOOK_STATE = """() => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')];
  return {
    status: kernel ? kernel.status : 'none',
    queued: cells.filter(c => /\\[\\*\\]/.test((c.querySelector('.jp-InputPrompt') || {}).textContent || '')).length,
    outputs: cells.map(c => (c.querySelector('.jp-OutputArea') || {}).innerText || ''),
  };
}"""


def run_until(page, done, what: str, timeout: float = 300) -> dict:
    """Poll the notebook page until ``done(state)``; fail with what the page shows otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        state = page.evaluate(NOTEBOOK_STATE)
        if done(state):
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not seen within {timeout:.0f} s; outputs: {state}")
        page.wait_for_timeout(500)


def show_output(page, text: str, path: Path) -> None:
    page.locator(".jp-OutputArea-output", has_text=text).first.scroll_into_view_if_needed()
    page.screenshot(path=str(path))


def test_student_path(browser, tmp_path):
    """A student opens the exercise in JupyterLab, enters a solution, runs it, sees it pass;
    enters a known bug, runs it again, and reads the grader's diagnosis."""
    work, home = tmp_path / "work", tmp_path / "home"
    released = REPO / "exercises" / ASSIGNMENT
    before = {p: p.read_bytes() for p in released.rglob("*") if p.is_file()}
    shutil.copytree(released, work / ASSIGNMENT)  # the student works on a copy, never on exercises/
    home.mkdir()
    notebook = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    expected = success_lines()
    solution = solution_sources()
    assert solution, "no answer cell with ### BEGIN SOLUTION in the source notebook"
    page_errors: list[str] = []
    with jupyter_lab(work, home) as (base, token):
        context = browser.new_context(viewport={"width": 1280, "height": 1000})
        context.set_default_timeout(60_000)
        context.set_default_navigation_timeout(120_000)
        try:
            page = context.new_page()
            page.on("pageerror", lambda e: page_errors.append(str(e)))
            page.goto(f"{base}/lab/tree/{notebook}?token={token}", wait_until="load")
            page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=120_000)
            page.locator(".jp-Notebook .jp-CodeCell").first.wait_for(timeout=120_000)
            assert page.evaluate(OPEN_NOTEBOOK, notebook) == "ok"
            page.screenshot(path=str(SCREENSHOTS / "student-01-opened.png"))

            # 1. The correct implementation: every visible check reports success.
            start = time.monotonic()
            assert sorted(page.evaluate(SET_CELLS_AND_RUN, [notebook, solution])) == sorted(solution)
            state = run_until(page, lambda s: all(any(line in o for o in s["outputs"]) for line in expected)
                              or any("Traceback" in o or "CheckFailed" in o for o in s["outputs"]),
                              "the visible checks' success lines")
            shown = "\n".join(state["outputs"])
            assert all(line in shown for line in expected), f"expected {expected}; the page shows:\n{shown}"
            assert "CheckFailed" not in shown and "Traceback" not in shown, shown
            print(f"\nstudent: solution run in {time.monotonic() - start:.1f} s: {expected}")
            show_output(page, expected[-1], SCREENSHOTS / "student-02-solution-passes.png")

            # 2. A known bug: the grader's diagnostic appears in the failing test cell's output,
            # alone: no traceback through the grader's modules (CheckFailed._render_traceback_).
            start = time.monotonic()
            bug = bug_sources()
            assert sorted(page.evaluate(SET_CELLS_AND_RUN, [notebook, bug])) == sorted(bug)
            state = run_until(page, lambda s: any("CheckFailed" in o or "Traceback" in o for o in s["outputs"])
                              and s["status"] == "idle" and not s["queued"],
                              "the grader's diagnostic for " + BUG)
            failing = next(o for o in state["outputs"] if "CheckFailed" in o or "Traceback" in o)
            assert failing.lstrip().startswith("CheckFailed: "), f"the notebook failed, but not in a check:\n{failing}"
            assert "Traceback" not in failing and "messages.py" not in failing, failing
            print(f"student: {BUG} run in {time.monotonic() - start:.1f} s; the page shows:\n{failing}")
            assert BUG_PHRASE in failing, failing
            printed = {line.strip() for o in state["outputs"] for line in o.splitlines()}
            assert expected[0] not in printed, "the buggy part still reports success"
            show_output(page, "CheckFailed", SCREENSHOTS / "student-03-bug-diagnosed.png")

            # 3. Validate (nbgrader's button) runs the saved notebook: its dialog shows the same
            # message, first in the failed cell's error box, no traceback before it.
            page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
            page.wait_for_timeout(1000)
            page.get_by_role("button", name="Validate").first.click()
            dialog = page.locator(".jp-Dialog-content")
            dialog.get_by_text("CheckFailed", exact=False).first.wait_for(timeout=180_000)
            shown = dialog.inner_text()
            page.screenshot(path=str(SCREENSHOTS / "student-04-validate.png"))
            (part1,) = [c for c in shown.split("The following cell failed:") if "check_batch_mean_var" in c]
            assert re.search(r'visible checks passed\."\)\s*CheckFailed: ', part1), part1  # right under the source
            assert "Traceback" not in part1 and "messages.py" not in shown, shown
        finally:
            context.close()
    assert not page_errors, f"JupyterLab raised in the page: {page_errors}"
    assert {p: p.read_bytes() for p in released.rglob("*") if p.is_file()} == before, "exercises/ was modified"
