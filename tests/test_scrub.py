"""Nothing a student wrote runs in the instructor's browser (no hub needed).

The autograded notebook is what the formgrader and the feedback render in the instructor's
browser.  Two walls, each tested alone in Chromium: the scrub (autograder/grading/scrub.py)
rebuilds the notebook from an allow-list, and the pages' Content-Security-Policy
(autograder/grading/pages.py) lets only the templates' own scripts run.  Every payload below, if
it ran, would request ``/pwned/<name>`` from the page's server or open a dialog.
"""
from __future__ import annotations

import base64
import json
import re
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

import nbformat
import pytest
from nbconvert import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output, new_raw_cell
from traitlets.config import Config

from autograder.grading.pages import FEEDBACK_TEMPLATE, TEMPLATES, FeedbackExporter, NAME_TOGGLES, feedback_config, protect_page
from autograder.grading.scrub import ScrubActiveContent, scrub_notebook
from test_browser import browser, chromium, serve  # noqa: F401 - the fixtures (Debian's chromium, Playwright)

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(60)).decode()
FORMGRADER = Path(__import__("nbgrader").__file__).parent / "server_extensions" / "formgrader"


def pwn(name: str) -> str:
    return f"fetch('/pwned/{name}');alert('{name}')"


def hostile_notebook(schema_valid: bool = False) -> nbformat.NotebookNode:
    """One cell or output per way in that a student (or their kernel) controls; with
    ``schema_valid``, only those nbformat's schema allows (nbconvert renders no other)."""
    svg = base64.b64encode(f'<svg xmlns="http://www.w3.org/2000/svg" onload="{pwn("attachment")}"/>'.encode()).decode()
    nb = new_notebook(cells=[
        new_markdown_cell(f"my answer <script>{pwn('md-script')}</script> <img src=x onerror=\"{pwn('md-img')}\">"
                          f" [click](javascript:{pwn('md-link')}) ![i](data:image/svg+xml;base64,{svg})"
                          f" [ref][r] [quoted][q]\n\n[r]: javascript:{pwn('md-ref')}\n\n> [q]: javascript:{pwn('md-q')}\n"),
        new_markdown_cell("<b>the instructor's</b>", metadata={"nbgrader": {"locked": True}}),
        new_markdown_cell(f"<script>{pwn('locked-md')}</script>", metadata={"nbgrader": {"locked": True}}),
        new_markdown_cell("![a](attachment:a.svg)", attachments={"a.svg": {"image/svg+xml": svg}}),
        new_raw_cell(f"<img src=x onerror=\"{pwn('raw')}\">"),
        new_code_cell("x", metadata={
            "nbgrader": {"grade": True, "solution": False, "grade_id": f'x" onfocus="{pwn("grade-id")}" autofocus x="',
                         "points": 1, "locked": True}, "tags": ["<script>"], "jupyter": {"source_hidden": "<b>"}},
            outputs=[
                new_output("display_data", data={"text/html": f"<script>{pwn('html')}</script>", "text/plain": "hi"}),
                new_output("display_data", data={"application/javascript": pwn("js")}),
                new_output("display_data", data={"image/svg+xml": f'<svg onload="{pwn("svg")}"/>', "text/plain": "svg"}),
                new_output("display_data", data={"image/png": PNG},
                           metadata={"width": f"1 onerror={pwn('png-width')}", "image/png": {"height": "1 onload=x"}}),
                new_output("display_data", data={"image/png": f'x"><img src=x onerror="{pwn("png-data")}">'}),
                new_output("display_data", data={"text/latex": f"$\\href{{javascript:{pwn('latex')}}}{{x}}$"}),
                new_output("stream", name=f'stdout"><img src=x onerror="{pwn("stream-name")}', text="a printed line\n"),
            ])])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": f"<script>{pwn('kernel')}</script>", "language": "python"}
    nb.metadata["title"] = f"<script>{pwn('title')}</script>"
    if schema_valid:
        return nb
    nb.cells[-1].outputs += [  # what no kernel of nbformat's would send, but a student's may
        nbformat.from_dict({"output_type": "execute_result", "data": {"text/plain": "3"}, "metadata": {},
                            "execution_count": f"<script>{pwn('result')}</script>"}),
        nbformat.from_dict({"output_type": f"<script>{pwn('type')}</script>", "data": {}})]
    nb.cells[5].execution_count = f"<img src=x onerror=\"{pwn('count')}\">"
    return nb


def formgrade_html(nb, preprocessors=()) -> str:
    from nbgrader.server_extensions.formgrader import handlers

    config = Config()
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    config.HTMLExporter.sanitize_html = True
    config.HTMLExporter.preprocessors = list(preprocessors)
    resources = {"assignment_id": "a", "notebook_id": "n", "submission_id": "x", "index": 0, "total": 1,
                 "base_url": "", "student": "s", "last_name": "l", "first_name": "f", "notebook_path": "/n"}
    return HTMLExporter(config=config).from_notebook_node(nb, resources=resources)[0]


class Scored(Preprocessor):
    """What nbgrader's GetGrades adds to each graded cell after the scrub: its score."""

    enabled = True

    def preprocess_cell(self, cell, resources, index):
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.metadata.nbgrader["score"] = 0
        return cell, resources


def feedback_html(nb, exporter=FeedbackExporter) -> str:
    """The course's feedback page of ``nb`` (its template; the policy when ``exporter`` is the
    course's)."""
    config = Config()
    feedback_config(config)
    config.HTMLExporter.template_name = FEEDBACK_TEMPLATE  # for a plain HTMLExporter too
    config.HTMLExporter.extra_template_basedirs = [str(TEMPLATES)]
    config.HTMLExporter.extra_template_paths = [str(FORMGRADER / "static/node_modules/bootstrap/dist/css")]
    config.HTMLExporter.preprocessors = [Scored]
    resources = {"nbgrader": {"notebook": "n", "score": 1, "max_score": 2, "late_penalty": 0}}
    return exporter(config=config).from_notebook_node(nb, resources=resources)[0]


class ReleaseSays(ScrubActiveContent):
    """The gradebook's locked markdown of this notebook: the instructor's cell only."""

    def given_markdown(self, resources):
        return {"<b>the instructor's</b>"}


def scrubbed(nb):
    return ReleaseSays().preprocess(nb, {})[0]


def test_the_scrub_keeps_only_text_and_checked_images():
    nb = scrubbed(hostile_notebook())
    cells = nb.cells
    assert "&lt;script>" in cells[0].source and cells[1].source == "<b>the instructor's</b>"
    assert cells[2].source.startswith("&lt;script>"), "a cell the student marked locked is still the student's"
    assert "attachments" not in cells[3] and cells[4].source.startswith("&lt;img")
    code = cells[5]
    assert code.execution_count is None and code.metadata == {"nbgrader": {"grade": True, "solution": False,
                                                                           "points": 1, "locked": True}}
    outputs = code.outputs
    assert outputs[0].data == {"text/plain": "hi"} and "application/javascript" in outputs[1].data["text/plain"]
    assert outputs[2].data == {"text/plain": "svg"}
    assert outputs[3].data == {"image/png": PNG} and outputs[3].metadata == {}
    assert "image/png" not in outputs[4].data and "text/latex" not in outputs[5].data
    assert outputs[6].name == "stdout" and outputs[6].text == "a printed line\n"
    assert outputs[7].data == {"text/plain": "3"} and outputs[7].execution_count is None
    assert outputs[8].output_type == "stream" and "removed" in outputs[8].text
    assert nb.metadata == {"kernelspec": {"name": "python3", "language": "python", "display_name": "python3"}}
    nbformat.validate(nb)
    assert scrub_notebook(nb, {"<b>the instructor's</b>"}) == nb, "a second pass changes nothing"


def test_the_release_markdown_has_no_html_for_the_formgrader_to_escape():
    """On the formgrader's page every markdown cell is escaped (it has no gradebook at hand):
    the release's own markdown must read the same escaped."""
    for path in sorted(Path(__file__).parents[1].glob("exercises/*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        assert scrub_notebook(nb).cells == [c for c in scrub_notebook(nb, {c.source for c in nb.cells}).cells], path


# ------------------------------------------------------------------ in Chromium

class PageServer(SimpleHTTPRequestHandler):
    """Serves the pages under test (with their policy) and the formgrader's static files; records
    every /pwned request."""

    pages: dict[str, tuple[str, str | None]] = {}
    pwned: list[str] = []

    def do_GET(self):
        if self.path.startswith("/pwned/"):
            self.pwned.append(self.path[len("/pwned/"):])
            self.send_response(204)
            self.end_headers()
        elif self.path in self.pages:
            html, csp = self.pages[self.path]
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            if csp:
                self.send_header("Content-Security-Policy", csp)
            self.end_headers()
            self.wfile.write(html.encode())
        elif self.path.startswith("/formgrader/static/"):
            self.path = self.path[len("/formgrader"):]
            super().do_GET()
        else:
            self.send_response(404)
            self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    PageServer.pages, PageServer.pwned = {}, []
    with serve(FORMGRADER, PageServer) as base:
        yield base


def visit(browser, url: str) -> dict:  # noqa: F811 - browser is the fixture
    """Open the page, hover and click over everything, and say what ran."""
    page = browser.new_page()
    ran, errors = [], []
    page.on("dialog", lambda dialog: (ran.append(dialog.message), dialog.dismiss()))
    page.on("pageerror", lambda error: errors.append(str(error)))
    origin = url.rsplit("/", 1)[0]

    def same_page_only(route):  # clicks must not take the page away; nothing leaves localhost
        request = route.request
        leaves = request.is_navigation_request() and request.url != url
        route.abort() if leaves or not request.url.startswith(origin) else route.continue_()

    page.route("**/*", same_page_only)
    page.goto(url, wait_until="load")
    page.wait_for_timeout(300)
    state = page.evaluate("() => ({submission: typeof submission_id, jquery: typeof jQuery, title: document.title})")
    for link in page.locator("a, img, b, span, div.output_subarea").all()[:200]:
        try:
            link.hover(timeout=200)
            link.click(timeout=200, no_wait_after=True)
        except Exception:  # noqa: BLE001 - hidden or covered elements
            pass
    page.wait_for_timeout(500)
    page.close()
    return {"dialogs": ran, "errors": errors, **state}


def test_without_either_wall_the_payloads_run(browser, server):  # noqa: F811
    """The harness can see an attack: the plain template, with no scrub and no policy."""
    PageServer.pages["/page"] = (formgrade_html(hostile_notebook(schema_valid=True)), None)
    seen = visit(browser, server + "/page")
    assert PageServer.pwned or seen["dialogs"], seen


def test_the_policy_alone_stops_every_payload(browser, server):  # noqa: F811
    html, csp = protect_page(formgrade_html(hostile_notebook(schema_valid=True)), NAME_TOGGLES)
    PageServer.pages["/page"] = (html, csp)
    seen = visit(browser, server + "/page")
    assert PageServer.pwned == [] and seen["dialogs"] == [], (PageServer.pwned, seen)
    assert seen["submission"] == "string" and seen["jquery"] == "function", "the formgrader's own scripts must run"


def test_the_scrub_alone_stops_every_payload(browser, server):  # noqa: F811
    PageServer.pages["/page"] = (formgrade_html(hostile_notebook(schema_valid=True), [ReleaseSays]), None)
    PageServer.pages["/feedback"] = (feedback_html(scrubbed(hostile_notebook()), HTMLExporter), None)
    for page in ("/page", "/feedback"):
        seen = visit(browser, server + page)
        assert PageServer.pwned == [] and seen["dialogs"] == [], (page, PageServer.pwned, seen)


def test_the_feedback_file_carries_the_policy(browser, server):  # noqa: F811
    html = feedback_html(hostile_notebook(schema_valid=True))
    assert html.index('http-equiv="Content-Security-Policy"') < html.index("<script")
    PageServer.pages["/feedback"] = (html, None)
    seen = visit(browser, server + "/feedback")
    assert PageServer.pwned == [] and seen["dialogs"] == [], (PageServer.pwned, seen)


def test_the_course_config_protects_the_formgrader_and_the_feedback():
    """nbgrader_config.py (and the hub's instructor config) put both walls in place."""
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(Path(__file__).parents[1])).load_config()
    assert config.HTMLExporter.preprocessors == [ScrubActiveContent]
    assert config.GenerateFeedback.exporter_class is FeedbackExporter
    assert handlers.SubmissionHandler.protected_by_policy
    assert json.dumps(config.Autograde.autograde_preprocessors, default=lambda c: c.__name__).count("ScrubActiveContent") == 1


def test_no_link_or_image_of_the_students_markdown_reaches_the_page():
    """Every markdown link form (inline, by reference, labels with escaped brackets or line
    breaks, in quotes and lists, bare addresses) renders as text once scrubbed: no request, no
    navigation."""
    from test_formgrader_pages import MARKDOWN

    forms = [MARKDOWN, "> [q]: /x\n\n[a][q]", "- [l]: /y\n\n[b][l]", "[c]\n\n[c]: /z", "![d](/w) [e](</v>)",
             # bare addresses, which the renderers link by themselves (found by an attack)
             "See https://evil.example/phish, WWW.evil.example and <https://a.example>"]
    nb = scrubbed(new_notebook(cells=[new_markdown_cell(form) for form in forms]))
    for html in (formgrade_html(nb), feedback_html(nb)):
        body = html[html.index("<body"):]
        assert re.findall(r"<a [^>]*href|<img [^>]*src", body.split('id="notebook-container"', 1)[-1]) == []
