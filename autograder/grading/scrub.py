"""Nothing a student wrote runs in the instructor's browser.

The formgrader and the feedback show the autograded notebook as HTML, in the instructor's
JupyterLab origin, and nbgrader renders it with ``HTMLExporter(sanitize_html=False)`` by default:
a student's ``display(HTML('<script>…'))``, Javascript output or ``<script>`` in a markdown answer
would run with the instructor's session. ``c.HTMLExporter.sanitize_html = True`` (nbgrader_config.py)
escapes the outputs in nbgrader's formgrade template, but a markdown cell's raw HTML still goes
into the page as it is (tests/test_scrub.py shows both). ScrubActiveContent, run by ``nbgrader autograde`` right after the sandboxed
execution, keeps only passive representations of each output and turns the start of every HTML
tag in the student's markdown into text (``&lt;``): the instructor sees it, nothing runs.
"""
from __future__ import annotations

import re

from nbconvert.preprocessors import Preprocessor

# Rendered as HTML (markdown too, through markdown2html) or run as code by the page.
ACTIVE = ("application/javascript", "text/html", "image/svg+xml", "text/markdown")
TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


class ScrubActiveContent(Preprocessor):

    def given_markdown(self, resources) -> set[str]:
        """The release's locked markdown, from the gradebook: the only markdown left as it is.
        (A cell's own "locked" metadata is the student's to set, so it proves nothing.)"""
        info = resources.get("nbgrader", {})
        if not {"db_url", "notebook", "assignment"} <= set(info):
            return set()
        from nbgrader.api import Gradebook, MissingEntry

        with Gradebook(info["db_url"]) as gradebook:
            try:
                cells = gradebook.find_notebook(info["notebook"], info["assignment"]).source_cells
            except MissingEntry:
                return set()
            return {c.source for c in cells if c.locked and c.cell_type == "markdown"}

    def preprocess(self, nb, resources):
        self._given = self.given_markdown(resources)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "markdown" and cell.source not in self._given:
            cell.source = TAG_START.sub("&lt;", cell.source)
            cell.pop("attachments", None)  # an attached SVG is active content too
        for output in cell.get("outputs", []):
            data = output.get("data")
            if not data:
                continue
            removed = [kind for kind in ACTIVE if data.pop(kind, None) is not None]
            if removed and not data:
                data["text/plain"] = f"[output removed for grading: {', '.join(removed)}]"
        return cell, resources
