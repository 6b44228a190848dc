"""The student's path in the book (issue 27, item 7): one page, book/exercises_on_the_hub.md, says
how to fetch, validate, submit and get feedback on the course hub; every chapter's exercise
section says it briefly, the same way, and links there; and every name the student is told to
click is a label of the installed nbgrader 0.9 JupyterLab extension or of JupyterLab itself."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from course import REPO

PAGE = REPO / "book" / "exercises_on_the_hub.md"
# Emphasis on the page that is not the name of something on the screen.
NOT_UI = {"Get", "Work", "visible", "hidden", "your last submission counts", "On the course hub:"}


def chapters_with_an_exercise() -> list[Path]:
    return sorted(path for path in (REPO / "book").glob("0*.md")
                  if (REPO / "exercises" / path.stem / f"{path.stem}.ipynb").is_file())


def exercise_section(path: Path) -> str:
    text = path.read_text()
    start = text.index("\n## Exercise\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def hub_paragraph(section: str) -> str:
    (paragraph,) = [p for p in section.split("\n\n") if p.startswith("**On the course hub:**")]
    return " ".join(paragraph.split())


def ui_terms(text: str) -> set[str]:
    """Bold, italic and quoted terms; a menu path "A → B" gives A and B."""
    found = re.findall(r"\*\*([^*]+)\*\*", text)
    found += re.findall(r"(?<![*\w])\*([^*\s][^*]*)\*(?![*\w])", text)
    found += re.findall(r'"([^"]+)"', text)
    return {" ".join(part.split()) for term in found for part in term.split("→")} - NOT_UI


def is_label(term: str, ui: str) -> bool:
    """``term`` is a whole string of the interface: quoted ("Fetch", " (view feedback)") or a
    line of its HTML templates (Released assignments), not a piece of a longer word."""
    return re.search(r'(?:^|["\s>])' + re.escape(term) + r'(?=["<]|\\n|$)', ui, flags=re.M) is not None


def installed_ui_text() -> str:
    """The JavaScript of nbgrader's JupyterLab extension and of JupyterLab's core bundle."""
    nbgrader = pytest.importorskip("nbgrader")
    bundles = list((Path(nbgrader.__file__).parent / "labextension" / "static").glob("*.js"))
    bundles += list((Path(sys.prefix) / "share" / "jupyter" / "lab" / "static").glob("jlab_core*.js"))
    if not any(b.name.startswith("jlab_core") for b in bundles):
        pytest.skip("JupyterLab's bundle is not installed here")
    return "\n".join(b.read_text(errors="ignore") for b in bundles)


def test_every_exercise_section_says_the_same_hub_steps_and_links_the_page():
    chapters = chapters_with_an_exercise()
    assert len(chapters) == len(list((REPO / "exercises").glob("*/*.ipynb")))
    paragraphs = {path.name: hub_paragraph(exercise_section(path)) for path in chapters}
    assert len(set(paragraphs.values())) == 1, paragraphs
    (paragraph,) = set(paragraphs.values())
    assert "{doc}`exercises_on_the_hub`" in paragraph
    for step in ("Nbgrader → Assignment List → Fetch", "Validate", "Submit", "Fetch Feedback",
                 "hidden", "last submission counts"):
        assert step in paragraph, step
    assert 2 <= paragraph.count(". ") + 1 <= 4, paragraph  # two to four sentences


def test_the_page_is_in_the_toc_before_the_first_chapter():
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    files = [entry["file"] for entry in toc["chapters"]]
    assert files.index("book/exercises_on_the_hub") < files.index("book/01_covariate_shift")


def test_the_page_walks_every_step_and_shows_real_screenshots():
    text = PAGE.read_text()
    for heading in ("## 1. Get the exercise", "## 2. Work in the notebook", "## 3. Validate and submit",
                    "## 4. Get your feedback"):
        assert heading in text, heading
    images = re.findall(r":::\{figure\} (\S+)", text)
    assert images and all((PAGE.parent / image).is_file() for image in images), images
    for block in re.findall(r":::\{figure\}.*?\n:::", text, flags=re.S):
        assert ":alt: " in block and ":name: " in block, block


def test_a_misspelt_or_partial_label_is_not_found():
    ui = installed_ui_text()
    assert is_label("Fetch Feedback", ui) and is_label("Released assignments", ui)
    assert not is_label("Fetch feedback", ui) and not is_label("Validat", ui)
    assert not is_label("Assignment list", ui)


def test_every_name_the_student_clicks_is_a_label_of_the_installed_interface():
    ui = installed_ui_text()
    terms = ui_terms(PAGE.read_text())
    for path in chapters_with_an_exercise():
        terms |= ui_terms(hub_paragraph(exercise_section(path)))
    assert {"Nbgrader", "Assignment List", "Fetch", "Validate", "Submit", "Fetch Feedback",
            "Run All Cells", "Open in New Browser Tab", "(view feedback)"} <= terms
    missing = sorted(term for term in terms if not is_label(term, ui))
    assert missing == [], f"not a label of nbgrader's extension or of JupyterLab: {missing}"
