"""The book builds with warnings as errors, every chapter executed, and shows no secret."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from course import REPO, tool_env
from build_stamp import STAMP, current_build, fingerprint
from leaks import html_text, leaked, question_secrets, secrets_in

pytestmark = pytest.mark.slow


def toc_files() -> list[str]:
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    files = [toc["root"]]
    for entry in toc.get("chapters", []):
        files.append(entry["file"])
    return files


def test_every_toc_file_exists():
    for name in toc_files():
        assert any((REPO / f"{name}{ext}").exists() for ext in (".md", ".ipynb")), name


def test_every_chapter_is_built_with_its_figures(built_book):
    for name in toc_files():
        assert (built_book / f"{name}.html").exists(), name
    chapters = [name for name in toc_files() if name.split("/")[-1][:2].isdigit()]
    assert len(chapters) == 8
    for name in chapters:  # every numbered chapter shows figures from real runs
        page = (built_book / f"{name}.html").read_text()
        assert page.count("<img") >= 3, f"{name} should show its figures"
    assert len(list((built_book / "_images").glob("*.png"))) >= 3 * len(chapters)


def test_no_page_for_solutions_exercises_or_tests(built_book):
    pages = [p.relative_to(built_book).as_posix() for p in built_book.rglob("*.html")]
    assert not [p for p in pages if p.split("/")[0] in {"solutions", "exercises", "tests", "autograder", "README"}]
    assert all(p.split("/")[0] in {"book", "_static", "genindex.html", "search.html", "index.html"} for p in pages), pages


def test_built_html_holds_no_solution_or_hidden_test(built_book):
    for page in built_book.rglob("*.html"):
        assert leaked(html_text(page.read_text())) == [], page
    for source in built_book.rglob("_sources/**/*"):
        if source.is_file():
            assert leaked(source.read_text(errors="ignore")) == [], source


def test_built_book_holds_no_key_explanation_or_answer_of_a_graded_question(built_book):
    """The hidden tests' explanations and the answer cells' solutions appear on no page, in no
    page source and in no other file of the student site."""
    secrets = question_secrets()
    assert secrets
    assert secrets_in(built_book, secrets) == []


# Hosts of script, font and style CDNs: none may appear anywhere in a page or a stylesheet.
CDN_HOSTS = ("cdn.jsdelivr", "unpkg.com", "googleapis", "gstatic", "cdnjs", "mathjax.org", "bootstrapcdn")
# Elements and attributes that the browser fetches on its own when it shows the page.
RESOURCE_ATTRIBUTES = {"script": ("src",), "link": ("href",), "img": ("src", "srcset"), "source": ("src", "srcset"),
                       "iframe": ("src",), "video": ("src", "poster"), "audio": ("src",), "embed": ("src",),
                       "object": ("data",), "image": ("href", "xlink:href"), "use": ("href", "xlink:href")}


class _Resources(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in RESOURCE_ATTRIBUTES.get(tag, ()) and value:
                self.found.extend((tag, v.strip().split(" ")[0]) for v in value.split(","))
            if name == "style" and value:
                self.found.extend(("style", url) for url in re.findall(r"url\(\s*['\"]?([^'\")]+)", value))


def _external(url: str) -> bool:
    return bool(re.match(r"^([a-z][a-z0-9+.-]*:)?//", url, re.IGNORECASE)) and not url.lower().startswith(("data:", "blob:"))


def test_pages_load_nothing_from_other_hosts(built_book):
    """Every script, stylesheet, font, image and frame comes from the book itself: the book works
    offline, and MathJax in particular is the vendored copy, never a CDN."""
    outside = []
    for page in built_book.rglob("*.html"):
        text = page.read_text()
        outside += [f"{page.name}: mentions {host}" for host in CDN_HOSTS if host in text]
        parser = _Resources()
        parser.feed(text)
        outside += [f"{page.name}: <{tag}> {url}" for tag, url in parser.found if _external(url)]
        outside += [f"{page.name}: <style> {url}" for url in re.findall(r"url\(\s*['\"]?([^'\")]+)", text) if _external(url)]
    for sheet in built_book.glob("_static/**/*.css"):
        css = sheet.read_text(errors="ignore")
        outside += [f"{sheet.name}: {url}" for url in re.findall(r"(?:url\(|@import)\s*['\"]?([^'\")\s;]+)", css)
                    if _external(url)]
    assert outside == [], outside


def test_math_uses_the_vendored_mathjax_on_every_page(built_book):
    """Pages with equations load MathJax from _static/mathjax/ by a path relative to the page
    (nested pages included), and the file is there."""
    with_math = 0
    for page in built_book.rglob("*.html"):
        text = page.read_text()
        sources = re.findall(r'<script[^>]*src="([^"]*(?:mathjax|MathJax)[^"]*)"', text)
        if 'class="math' in text:
            with_math += 1
            assert sources, f"{page}: equations but no MathJax script"
        for src in sources:
            target = (page.parent / src.split("?")[0]).resolve()
            assert target == (built_book / "_static" / "mathjax" / "tex-svg.js").resolve(), (page, src)
            assert target.is_file(), (page, src)
    assert with_math >= 1, "no page with equations: is dollarmath still parsed?"


# What only instructors read: where the solutions live, how grading works and guards itself.
INSTRUCTOR_ONLY = ("solutions/", "Instructor guide", "autograder.grade", "generate_assignment", "nbgitpuller pulls")


def test_the_student_book_leaves_out_the_instructor_guide(built_book):
    """Students read the hosted book: it does not say where the solutions live or how the grader
    guards itself (that is the instructor guide's, a site of its own)."""
    found = []
    for page in built_book.rglob("*.html"):
        text = html_text(page.read_text())
        found += [f"{page.relative_to(built_book)}: {phrase!r}" for phrase in INSTRUCTOR_ONLY if phrase in text]
    assert found == [], found
    assert not list(built_book.rglob("*instructor*")), "an instructor page is in the student build"


# Paths of the machine that built the book: a traceback or a printed path would show them.
LOCAL_PATH = re.compile(r"(/work/|/home/|/root/|/tmp/|/usr/lib/python|site-packages|\.venv/|dist-packages)")


def test_no_page_shows_a_path_of_the_build_machine(built_book):
    shown = []
    for page in built_book.rglob("*.html"):
        text = html_text(page.read_text())
        shown += [f"{page.relative_to(built_book)}: …{text[max(0, m.start() - 60):m.end() + 40]}…"
                  for m in LOCAL_PATH.finditer(text)]
    assert shown == [], shown[:10]


def test_the_instructor_guide_builds_as_its_own_site(tmp_path):
    """`jupyter-book build book/instructor` (as the README says) builds the guide's pages with
    warnings as errors, loading nothing from other hosts; the semester checklist links every step."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-book"), "build", "--warningiserror", "--keep-going",
         "--path-output", str(tmp_path), str(REPO / "book" / "instructor")],
        capture_output=True, text=True, timeout=600, env=tool_env(),
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    html = tmp_path / "_build" / "html"
    toc = yaml.safe_load((REPO / "book" / "instructor" / "_toc.yml").read_text())
    pages = [toc["root"], *(entry["file"] for entry in toc["chapters"])]
    text = {name: html_text((html / f"{name}.html").read_text()) for name in pages}
    assert "Grading a class" in text["grading"] and "solutions/" in text["releasing"]
    linked = set(re.findall(r'<a [^>]*href="([\w.-]+\.html)', (html / "checklist.html").read_text()))
    assert {f"{name}.html" for name in pages[1:]} <= linked, "a page is not reachable from the checklist"
    for name in pages:
        parser = _Resources()
        parser.feed((html / f"{name}.html").read_text())
        assert [url for _, url in parser.found if _external(url)] == [], name


def test_a_finished_build_is_stamped_with_its_sources(built_book):
    """The stamp lets the tests reuse the quick start's build (tests/conftest.py): it must name
    today's sources and no warning, as the build the tests just checked had."""
    stamp = json.loads((built_book / STAMP).read_text())
    assert stamp == {"fingerprint": fingerprint(REPO), "warnings": 0}


def test_a_stamp_is_current_only_for_the_same_sources_and_no_warning(tmp_path):
    repo, html = tmp_path / "repo", tmp_path / "html"
    (repo / "book" / "instructor").mkdir(parents=True)
    html.mkdir()
    (repo / "_config.yml").write_text("title: x\n")
    (repo / "book" / "01.md").write_text("# One\n")
    (html / STAMP).write_text(json.dumps({"fingerprint": fingerprint(repo), "warnings": 0}))
    assert current_build(html, repo)
    (repo / "book" / "instructor" / "checklist.md").write_text("not part of the student book")
    assert current_build(html, repo)
    (repo / "book" / "01.md").write_text("# One, edited\n")
    assert not current_build(html, repo)
    (html / STAMP).write_text(json.dumps({"fingerprint": fingerprint(repo), "warnings": 2}))
    assert not current_build(html, repo)
    (html / STAMP).unlink()
    assert not current_build(html, repo)
