"""A student's HTML, SVG and JavaScript never reach the formgrader's page (no hub needed).

The autograded notebook is what the formgrader and the feedback render in the instructor's
browser; ScrubActiveContent (after the sandboxed execution in nbgrader_config.py) removes what
would run there. Rendered with nbgrader's own formgrade template, no script remains.
"""
from __future__ import annotations

import nbformat
from nbconvert import HTMLExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from traitlets.config import Config

from autograder.grading.scrub import ScrubActiveContent

# As live markup; the student's text may still show, escaped ("&lt;script>alert('md')...").
SCRIPTS = ("<script>alert('md')", "<script>alert('locked')", "<img src=x", "<script>alert('html')", "alert('js')", "<svg onload")


def hostile_notebook() -> nbformat.NotebookNode:
    nb = new_notebook(cells=[
        new_markdown_cell("my answer <script>alert('md')</script> <img src=x onerror=alert(3)>"),
        new_markdown_cell("<b>the instructor's</b>", metadata={"nbgrader": {"locked": True}}),
        new_markdown_cell("<script>alert('locked')</script>", metadata={"nbgrader": {"locked": True}}),
        new_code_cell("x", outputs=[
            new_output("display_data", data={"text/html": "<script>alert('html')</script>", "text/plain": "hi"}),
            new_output("display_data", data={"application/javascript": "alert('js')"}),
            new_output("display_data", data={"image/svg+xml": "<svg onload=\"alert('svg')\"/>", "text/plain": "svg"}),
            new_output("stream", name="stdout", text="a printed line\n"),
        ])])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def formgrade_html(nb) -> str:
    from nbgrader.server_extensions.formgrader import handlers

    config = Config()
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    config.HTMLExporter.sanitize_html = True
    resources = {"assignment_id": "a", "notebook_id": "n", "submission_id": "x", "index": 0, "total": 1,
                 "base_url": "/", "student": "s", "last_name": "l", "first_name": "f", "notebook_path": "/n"}
    return HTMLExporter(config=config).from_notebook_node(nb, resources=resources)[0]


class ReleaseSays(ScrubActiveContent):
    """The gradebook's locked markdown of this notebook: the instructor's cell only."""

    def given_markdown(self, resources):
        return {"<b>the instructor's</b>"}


def test_formgrade_template_alone_lets_scripts_through():
    """Why the preprocessor exists: with sanitize_html nbgrader's template escapes the HTML
    outputs, but a markdown cell's raw HTML still goes into the page as it is."""
    html = formgrade_html(hostile_notebook())
    assert "<script>alert('html')" not in html and "<script>alert('md')" in html


def test_scrubbed_notebook_renders_no_script():
    nb, _ = ReleaseSays().preprocess(hostile_notebook(), {})
    html = formgrade_html(nb)
    assert not [s for s in SCRIPTS if s in html], html
    outputs = nb.cells[3].outputs
    assert outputs[0].data == {"text/plain": "hi"} and "application/javascript" in outputs[1].data["text/plain"]
    assert outputs[2].data == {"text/plain": "svg"} and outputs[3].text == "a printed line\n"
    assert "&lt;script>" in nb.cells[0].source and nb.cells[1].source == "<b>the instructor's</b>"
    assert nb.cells[2].source.startswith("&lt;script>"), "a cell the student marked locked is still the student's"
