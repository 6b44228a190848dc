"""The book builds with warnings as errors, every chapter executed, and shows no secret."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from course import REPO, tool_env
from leaks import html_text, leaked

pytestmark = pytest.mark.slow


def toc_files() -> list[str]:
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    files = [toc["root"]]
    for entry in toc.get("chapters", []):
        files.append(entry["file"])
    return files


@pytest.fixture(scope="module")
def built_book(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("book")
    start = time.monotonic()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-book"), "build", "--warningiserror", "--keep-going",
         "--path-output", str(out), str(REPO)],
        capture_output=True, text=True, timeout=1500, env=tool_env(),
    )
    print(f"\nbook build: {time.monotonic() - start:.1f} s")
    assert done.returncode == 0, (done.stdout[-5000:], done.stderr[-5000:])
    return out / "_build" / "html"


def test_every_toc_file_exists():
    for name in toc_files():
        assert any((REPO / f"{name}{ext}").exists() for ext in (".md", ".ipynb")), name


def test_every_chapter_is_built_with_its_figures(built_book):
    for name in toc_files():
        assert (built_book / f"{name}.html").exists(), name
    for name in toc_files()[1:]:  # every chapter after the introduction shows figures from real runs
        page = (built_book / f"{name}.html").read_text()
        assert page.count("<img") >= 3, f"{name} should show its figures"
    assert len(list((built_book / "_images").glob("*.png"))) >= 3 * (len(toc_files()) - 1)


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
