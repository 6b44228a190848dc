"""The instructor's pages of a student's notebook run only their own scripts.

The formgrader's submission page and the feedback page show an autograded notebook, which
:mod:`autograder.grading.scrub` has already rebuilt from an allow-list.  As a second wall, each
page carries a Content-Security-Policy that lets only the template's own scripts run: every
``<script>`` the template writes into the page's ``<head>`` gets a fresh nonce, and nothing in
the ``<body>`` (where the notebook is) can run, be it a ``<script>``, an event handler
(``onerror=``), a ``javascript:`` URL or an ``<object>``.  MathJax (from its CDN, where the page
can reach it) may load its own files.

* the formgrader: :func:`protect_formgrader` (called by the course's nbgrader_config.py and by
  the hub's instructor config) renders the autograded notebook through the scrub and sends the
  policy as a header with each submission page;
* the feedback: :class:`FeedbackExporter` (``GenerateFeedback.exporter_class``) writes the policy
  into each feedback file as a ``<meta>`` tag, the first element of its head.
"""
from __future__ import annotations

import re
import secrets

from nbconvert.exporters import HTMLExporter

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


def policy(nonce: str, header: bool = True) -> str:
    """Scripts: the nonce's and MathJax's; everything else only from the page's own server."""
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
    """A page to write to a file: the policy as the head's first element."""
    page, nonce = protect(html)
    meta = f'<meta http-equiv="Content-Security-Policy" content="{policy(nonce, header=False)}">'
    return re.sub(r"<head>", "<head>\n" + meta, page, count=1)


class FeedbackExporter(HTMLExporter):
    """nbgrader's feedback HTML with the policy written into it."""

    def from_notebook_node(self, nb, resources=None, **kw):
        html, resources = super().from_notebook_node(nb, resources, **kw)
        return protect_file(html), resources


def protect_formgrader(c) -> None:
    """Configure ``c`` (an nbgrader config) and the formgrader so that submission pages show the
    scrubbed notebook under the policy; safe to call more than once."""
    from nbgrader.server_extensions.formgrader import handlers

    from autograder.grading.scrub import ScrubActiveContent

    c.HTMLExporter.sanitize_html = True
    c.HTMLExporter.preprocessors = [ScrubActiveContent]
    c.GenerateFeedback.exporter_class = FeedbackExporter
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
