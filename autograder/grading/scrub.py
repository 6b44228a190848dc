"""Nothing a student wrote runs in the instructor's browser.

The formgrader and the feedback show the autograded notebook as HTML, in the instructor's
Jupyter origin.  Everything in that notebook came from the student or from their sandboxed
kernel: sources, outputs, cell and output metadata, execution counts, attachments.  A deny-list
of "active" mime types cannot be complete (an image whose *metadata* says
``"width": "1 onerror=..."`` is written unquoted into the page by nbconvert's classic template),
so the notebook is rebuilt from an allow-list instead:

* outputs: printed text (stdout or stderr), errors (name, value, traceback as text), and
  results or displays reduced to ``text/plain`` and PNG or JPEG images whose bytes the grader
  decodes and encodes again itself; no output metadata; anything else becomes a line of text;
* cells: their type, source and a validated id; execution counts only as integers; cell
  metadata only nbgrader's own keys, each validated (a ``grade_id`` is a plain name);
  attachments dropped;
* markdown and raw cells: unless the gradebook holds the cell as the release's locked markdown,
  the start of every HTML tag becomes text (``&lt;``) and links become text, so the student's
  text shows and nothing renders as HTML or leads anywhere;
* notebook metadata: only the kernel's name and language.

The pass is idempotent.  It runs where ``nbgrader autograde`` runs (nbgrader_config.py), again
on every notebook a grading worker returns (autograder.grading.grade) and once more whenever a
page is rendered (the formgrader, the feedback); autograder.grading.pages adds a
Content-Security-Policy to those pages, so that a script that slipped through still would not run.
"""
from __future__ import annotations

import base64
import binascii
import math
import re

from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode, from_dict

TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
# Every link and image of markdown has a "]" right before "(" (inline), "[" (by reference) or
# ":" (a definition, whatever its label holds): escaped, the same text shows and leads nowhere.
LINK_JOINTS = {"](": "]\\(", "][": "]\\[", "]:": "]\\:"}
# Bare addresses that a renderer turns into links by itself (nbconvert's mistune and JupyterLab
# link "https://…" and "www.…"): a backslash escape breaks the pattern and renders as nothing.
BARE_LINK = re.compile(r"(?<=[A-Za-z0-9])://|(?i:\bwww)\.")
PLAIN_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,100}")
CELL_ID = re.compile(r"[A-Za-z0-9_\-]{1,64}")  # nbformat 4.5's rule for cell ids
IMAGES = {"image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff"}
MAX_IMAGE_BYTES = 16 << 20
NBGRADER_FLAGS = ("grade", "solution", "locked", "task")


def removed(what: str) -> dict:
    """The text shown in place of an output the page may not render."""
    return {"output_type": "stream", "name": "stdout", "text": f"[output removed for grading: {what}]\n"}


def _text(value) -> str:
    """Notebook text: a string, or a list of strings joined (as nbformat stores long text)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(part, str) for part in value):
        return "".join(value)
    return ""


def execution_count(value) -> int | None:
    """An execution count as nbformat allows it (a non-negative integer), else None."""
    return value if type(value) is int and 0 <= value < 1 << 31 else None


def _image(kind: str, value) -> str | None:
    """The image's bytes, base64-encoded by us, if they are what ``kind`` says they are."""
    try:
        raw = base64.b64decode(re.sub(r"\s", "", _text(value)), validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) > MAX_IMAGE_BYTES or not raw.startswith(IMAGES[kind]):
        return None
    return base64.b64encode(raw).decode("ascii")


def safe_output(output) -> dict:
    """The output rebuilt from what a page may show; metadata dropped."""
    kind = output.get("output_type") if isinstance(output, dict) else None
    if kind == "stream":
        name = output.get("name") if output.get("name") in ("stdout", "stderr") else "stdout"
        return {"output_type": "stream", "name": name, "text": _text(output.get("text"))}
    if kind == "error":
        traceback = output.get("traceback")
        return {"output_type": "error", "ename": _text(output.get("ename")), "evalue": _text(output.get("evalue")),
                "traceback": [line for line in traceback if isinstance(line, str)] if isinstance(traceback, list) else []}
    if kind not in ("execute_result", "display_data"):
        return removed(f"an output of type {str(kind)[:40]!r}")
    data = output.get("data") if isinstance(output.get("data"), dict) else {}
    kept, dropped = {}, []
    for mime, value in data.items():
        if mime == "text/plain":
            kept[mime] = _text(value)
        elif mime in IMAGES and (image := _image(mime, value)) is not None:
            kept[mime] = image
        else:
            dropped.append(str(mime)[:60])
    if not kept:
        kept["text/plain"] = f"[output removed for grading: {', '.join(dropped) or 'no data'}]"
    rebuilt = {"output_type": kind, "data": kept, "metadata": {}}
    if kind == "execute_result":
        rebuilt["execution_count"] = execution_count(output.get("execution_count"))
    return rebuilt


def safe_nbgrader_metadata(meta) -> dict:
    """nbgrader's cell metadata with each key checked; anything else dropped."""
    if not isinstance(meta, dict):
        return {}
    kept = {flag: meta[flag] for flag in NBGRADER_FLAGS if type(meta.get(flag)) is bool}
    if isinstance(meta.get("grade_id"), str) and PLAIN_NAME.fullmatch(meta["grade_id"]):
        kept["grade_id"] = meta["grade_id"]
    points = meta.get("points")
    if type(points) in (int, float) and math.isfinite(points) and 0 <= points <= 1e6:
        kept["points"] = points
    if type(meta.get("schema_version")) is int:
        kept["schema_version"] = meta["schema_version"]
    if isinstance(meta.get("checksum"), str) and re.fullmatch(r"[0-9a-f]{1,128}", meta["checksum"]):
        kept["checksum"] = meta["checksum"]
    if meta.get("cell_type") in ("code", "markdown", "raw"):
        kept["cell_type"] = meta["cell_type"]
    return kept


def as_text(markdown: str) -> str:
    """A student's markdown that renders as text and plain formatting: no HTML tag, no link (a
    ``javascript:`` or ``data:`` URL is one click away), no reference to an attachment (they are
    dropped, and nbconvert refuses a page whose markdown names a missing one)."""
    markdown = TAG_START.sub("&lt;", markdown)
    for joint, escaped in LINK_JOINTS.items():
        markdown = markdown.replace(joint, escaped)
    markdown = BARE_LINK.sub(lambda m: "\\://" if m.group(0) == "://" else m.group(0)[:-1] + "\\.", markdown)
    return markdown.replace("attachment:", "attachment-removed:")


def safe_cell(cell, given_markdown: set[str], fallback_id: str) -> dict:
    """The cell rebuilt: type, id (``fallback_id`` for a missing or odd one), checked nbgrader
    metadata, source, and safe outputs."""
    kind = cell.get("cell_type") if isinstance(cell, dict) else None
    kind = kind if kind in ("code", "markdown", "raw") else "raw"
    source = _text(cell.get("source")) if isinstance(cell, dict) else ""
    metadata = cell.get("metadata") if isinstance(cell, dict) and isinstance(cell.get("metadata"), dict) else {}
    cell_id = cell.get("id") if isinstance(cell, dict) else None
    rebuilt = {"cell_type": kind,
               "id": cell_id if isinstance(cell_id, str) and CELL_ID.fullmatch(cell_id) else fallback_id,
               "metadata": {"nbgrader": nbgrader} if (nbgrader := safe_nbgrader_metadata(metadata.get("nbgrader"))) else {}}
    if kind == "code":
        outputs = cell.get("outputs") if isinstance(cell.get("outputs"), list) else []
        rebuilt.update(source=source, execution_count=execution_count(cell.get("execution_count")),
                       outputs=[safe_output(output) for output in outputs])
    elif kind == "markdown" and source in given_markdown:
        rebuilt["source"] = source
    else:  # the student's markdown, or a raw cell (written into the page as it is); attachments
        # are dropped, and nbconvert refuses to render a page whose markdown refers to a missing one
        rebuilt["source"] = as_text(source)
    return rebuilt


def safe_notebook_metadata(metadata) -> dict:
    """Only the kernel's and the language's names, as plain names."""
    metadata = metadata if isinstance(metadata, dict) else {}
    kept = {}
    spec = metadata.get("kernelspec") if isinstance(metadata.get("kernelspec"), dict) else {}
    spec = {k: spec[k] for k in ("name", "language") if isinstance(spec.get(k), str) and PLAIN_NAME.fullmatch(spec[k])}
    if spec:
        spec["display_name"] = spec.get("name", "")
        kept["kernelspec"] = spec
    info = metadata.get("language_info") if isinstance(metadata.get("language_info"), dict) else {}
    if isinstance(info.get("name"), str) and PLAIN_NAME.fullmatch(info["name"]):
        kept["language_info"] = {"name": info["name"]}
    return kept


def scrub_notebook(nb, given_markdown: set[str] = frozenset()) -> NotebookNode:
    """A copy of ``nb`` that holds nothing a page would run; ``given_markdown``: the release's
    locked markdown sources, left as they are."""
    cells, seen = [], set()
    for index, cell in enumerate(nb.get("cells") if isinstance(nb.get("cells"), list) else []):
        cell = safe_cell(cell, given_markdown, fallback_id=f"cell-{index}")
        while cell["id"] in seen:  # ids must be unique: a copied cell gets one of its own
            cell["id"] = f"cell-{index}-{len(seen)}"
        seen.add(cell["id"])
        cells.append(cell)
    return from_dict({"nbformat": 4, "nbformat_minor": 5, "metadata": safe_notebook_metadata(nb.get("metadata")),
                      "cells": cells})


def locked_markdown(db_url: str, assignment: str, notebook: str) -> set[str]:
    """The release's locked markdown of one notebook, from the gradebook (a cell's own "locked"
    metadata is the student's to set, so it proves nothing)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url) as gradebook:
        try:
            cells = gradebook.find_notebook(notebook, assignment).source_cells
        except MissingEntry:
            return set()
        return {c.source for c in cells if c.locked and c.cell_type == "markdown"}


class ScrubActiveContent(Preprocessor):
    """:func:`scrub_notebook` as an nbconvert preprocessor.  In ``nbgrader autograde`` and
    ``generate_feedback`` the resources name the notebook and the gradebook, whose locked markdown
    stays as it is; elsewhere (the formgrader's page) every markdown cell is escaped (the
    release's markdown holds no HTML: tests/test_scrub.py checks)."""

    enabled = True

    def given_markdown(self, resources) -> set[str]:
        info = resources.get("nbgrader", {})
        if {"db_url", "notebook", "assignment"} <= set(info):
            return locked_markdown(info["db_url"], info["assignment"], info["notebook"])
        return set()

    def preprocess(self, nb, resources):
        return scrub_notebook(nb, self.given_markdown(resources)), resources
