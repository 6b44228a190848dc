"""The instructor's pages of a student's notebook run only their own scripts.

The formgrader's submission page and the feedback page show an autograded notebook, which
:mod:`autograder.grading.scrub` has already rebuilt from an allow-list.  As a second wall, each
page carries a Content-Security-Policy that lets only the template's own scripts run: every
``<script>`` the template writes into the page's ``<head>`` gets a fresh nonce, and nothing in
the ``<body>`` (where the notebook is) can run, be it a ``<script>``, an event handler
(``onerror=``), a ``javascript:`` URL or an ``<object>``.

* the formgrader: :func:`protect_formgrader` (called by the course's nbgrader_config.py and by
  the hub's instructor config) renders the autograded notebook through the scrub and sends the
  policy as a header with each submission page; MathJax (from its CDN, where the page can reach
  it) may load its own files;
* the feedback: :class:`FeedbackExporter` (``GenerateFeedback.exporter_class``) renders the
  course's feedback template (templates/course_feedback) and writes the policy into each feedback
  file as a ``<meta>`` tag, the first element of its head.  A feedback file is all a student
  gets (``nbgrader release_feedback`` copies the HTML file alone), and it is read offline: the
  course's vendored MathJax (book/_static/mathjax, tools/vendor_mathjax.sh) is inlined into it
  as one more script of the head, and its policy allows no other origin at all.
"""
from __future__ import annotations

import re
import secrets
from pathlib import Path

from nbconvert.exporters import HTMLExporter

import autograder

MATHJAX = "https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/"
# The formgrader's "show / hide the student's name" icons are inline onclick handlers, which the
# policy blocks: the same two handlers, bound by a script of the page's own.
NAME_TOGGLES = """
<script>
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll(".glyphicon.name-hidden, .glyphicon.name-shown").forEach(function (icon) {
    icon.removeAttribute("onclick");
    icon.addEventListener("click", function () { toggle_name(icon.classList.contains("name-hidden")); });
  });
});
</script>
"""


def feedback_policy(nonce: str) -> str:
    """A feedback file's: scripts only with the nonce (the template's, MathJax inlined among
    them), styles of the page itself, images only as data; no request to anywhere."""
    return "; ".join([
        "default-src 'none'",
        f"script-src 'nonce-{nonce}'",
        "style-src 'unsafe-inline'",  # the template's and MathJax's own <style>; no script
        "img-src data:",
        "font-src data:",
        "base-uri 'none'",
        "form-action 'none'",
        "object-src 'none'",
    ])


def policy(nonce: str, header: bool = True) -> str:
    """The formgrader's: scripts, the nonce's and MathJax's; everything else only from the
    page's own server."""
    rules = [
        "default-src 'none'",
        f"script-src 'nonce-{nonce}' {MATHJAX}",
        f"style-src 'self' 'unsafe-inline' {MATHJAX}",
        f"font-src 'self' data: {MATHJAX}",
        "img-src data:",  # the notebook's own images only: no request a student's markup could aim
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "object-src 'none'",
    ]
    if header:  # a <meta> policy cannot say who may frame the page
        rules.append("frame-ancestors 'self'")
    return "; ".join(rules)


MATHJAX_CONFIG = re.compile(r'<script type="text/x-mathjax-config">(.*?)</script>', re.S)


def _mathjax_without_eval(head: str) -> str:
    """nbconvert's MathJax configuration block, which MathJax would ``eval``, as a script that
    hands MathJax the same configuration when it has loaded (``AuthorInit``), placed before the
    loader; MathJax evaluates no configuration block of the body."""
    found = MATHJAX_CONFIG.search(head)
    if found is None:
        return head
    head = head[:found.start()] + head[found.end():]
    config = f"<script>window.MathJax = {{AuthorInit: function () {{{found.group(1)}}}}};</script>\n"
    loader = head.find(f'<script src="{MATHJAX}')
    return head[:loader] + config + head[loader:] if loader >= 0 else head + config


def protect(html: str, extra_head: str = "") -> tuple[str, str]:
    """The page with a nonce on each script of its head (the template's), and its policy."""
    nonce = secrets.token_urlsafe(18)
    end = html.find("</head>")
    head, body = (html[:end], html[end:]) if end >= 0 else ("", html)
    head = _mathjax_without_eval(head) + extra_head
    head = re.sub(r"<script\b", f'<script nonce="{nonce}"', head)
    return head + body, nonce


def protect_page(html: str, extra_head: str = "") -> tuple[str, str]:
    """A page to serve with the returned header value."""
    page, nonce = protect(html, extra_head)
    return page, policy(nonce)


def protect_file(html: str) -> str:
    """A feedback page to write to a file: the policy as the head's first element."""
    page, nonce = protect(html)
    meta = f'<meta http-equiv="Content-Security-Policy" content="{feedback_policy(nonce)}">'
    return re.sub(r"<head>", "<head>\n" + meta, page, count=1)


TEMPLATES = Path(__file__).resolve().parent / "templates"
# nbgrader's bootstrap stylesheet, which its GenerateFeedback puts on the template path.
BOOTSTRAP_CSS = (Path(__import__("nbgrader").__file__).resolve().parent / "server_extensions" / "formgrader" / "static"
                 / "node_modules" / "bootstrap" / "dist" / "css")
FEEDBACK_TEMPLATE = "course_feedback"
MATHJAX_FILE = Path(autograder.__file__).resolve().parents[1] / "book" / "_static" / "mathjax" / "tex-svg.js"
MATH = re.compile(r"\$|\\\(|\\\[|\\begin\{")


def inline_mathjax() -> str | None:
    """The vendored MathJax as the text of an inline script, or None where this installation
    has no copy (the page then shows the TeX as written). A script element ends at the first
    ``</script``, and ``<!--`` changes how the browser reads it up to ``-->``: the text must
    hold neither (``<\\!--`` reads the same in a JavaScript string or regular expression)."""
    try:
        text = MATHJAX_FILE.read_text(encoding="utf-8")
    except OSError:
        return None
    if re.search(r"</?script", text, re.I):
        return None
    try:  # the notice MathJax's Apache-2.0 licence asks a copy to keep
        version = MATHJAX_FILE.with_name("VERSION").read_text(encoding="utf-8").strip().replace("*/", "")
    except OSError:
        version = "MathJax"
    notice = f"/* {version}. Apache License 2.0: https://www.apache.org/licenses/LICENSE-2.0 */\n"
    return notice + text.replace("<!--", "<\\!--")


class FeedbackExporter(HTMLExporter):
    """The course's feedback page (templates/course_feedback), with the policy written into it
    and, where the notebook's markdown has math, MathJax inlined."""

    def from_notebook_node(self, nb, resources=None, **kw):
        resources = dict(resources or {})
        if any(c.get("cell_type") == "markdown" and MATH.search(str(c.get("source", ""))) for c in nb.get("cells", [])):
            resources["mathjax_inline"] = inline_mathjax()
        html, resources = super().from_notebook_node(nb, resources, **kw)
        return protect_file(html), resources


def feedback_config(c) -> None:
    """Configure ``c`` so that nbgrader's GenerateFeedback renders with :class:`FeedbackExporter`
    and the course's template (the bootstrap stylesheet stays nbgrader's)."""
    c.GenerateFeedback.exporter_class = FeedbackExporter
    c.FeedbackExporter.template_name = FEEDBACK_TEMPLATE
    c.FeedbackExporter.extra_template_basedirs = [str(TEMPLATES)]
    # nbconvert's sanitizer (bleach's short allow-list) would print the release's headings,
    # paragraphs and table heads as tags; the scrub (this exporter's preprocessor) has already
    # made every cell the student wrote plain text, and nbgrader's own feedback template never
    # sanitized markdown either.
    c.FeedbackExporter.sanitize_html = False


def protect_formgrader(c) -> None:
    """Configure ``c`` (an nbgrader config) and the formgrader so that submission pages show the
    scrubbed notebook under the policy; safe to call more than once."""
    from nbgrader.server_extensions.formgrader import handlers

    from autograder.grading.scrub import ScrubActiveContent

    c.HTMLExporter.sanitize_html = True
    c.HTMLExporter.preprocessors = [ScrubActiveContent]
    feedback_config(c)
    page = handlers.SubmissionHandler
    if getattr(page, "protected_by_policy", False):
        return
    write = page.write

    def write_protected(self, chunk):
        if isinstance(chunk, bytes):
            chunk = chunk.decode("utf-8", errors="replace")
        html, header = protect_page(chunk, NAME_TOGGLES)
        self.set_header("Content-Security-Policy", header)
        return write(self, html)

    page.write = write_protected
    page.protected_by_policy = True
    _protect_submission_files(handlers.SubmissionFilesHandler)


# What the formgrader serves of a submission's folder beside the notebook: nothing of it may run.
FILE_POLICY = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _protect_submission_files(files) -> None:
    """nbgrader's handler for the files beside an autograded notebook joins the URL's path to
    the student's folder and serves anything under the course root (``..%2f`` reaches the
    gradebook, the solutions, other students' submissions), as live HTML.  Here it serves only
    files inside that folder, in a sandbox of their own (no script, no origin) and as the type
    the server says."""
    parse = files.parse_url_path

    def inside_the_submission(self, url_path):
        relative = url_path.lstrip("/").partition("/")[2]  # after the submission's id (decoded)
        if relative.startswith("/") or ".." in relative.replace("\\", "/").split("/"):
            from tornado import web

            raise web.HTTPError(404)
        return parse(self, url_path)

    def set_extra_headers(self, path):
        self.set_header("Content-Security-Policy", FILE_POLICY)
        self.set_header("X-Content-Type-Options", "nosniff")

    files.parse_url_path = inside_the_submission
    files.set_extra_headers = set_extra_headers
