"""The launch button (book/_ext/launch_exercise.py): a chapter's button opens its exercise on the
course hub, cloned from the student release and never from this repository, and no page shows a
launch button while the hub or the student repository is a placeholder (issue 27, item 7).

The link and hiding logic is tested as a unit; the built pages are checked too when a current
build of the book is already there (nothing is built here)."""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from build_stamp import current_build
from course import REPO
from launch_exercise import (LAUNCH_GROUP, exercise_notebook, hub_link, is_placeholder,
                             launch_entry, relaunch)

HUB = "https://hub.university.edu"
STUDENT = "https://github.com/norm-course/normalization-student"
INSTRUCTOR = yaml.safe_load((REPO / "_config.yml").read_text())["repository"]["url"]
CONFIG = yaml.safe_load((REPO / "_config.yml").read_text())
TOC = yaml.safe_load((REPO / "_toc.yml").read_text())


def toc_pages() -> list[str]:
    pages = []

    def walk(entries):
        for entry in entries or []:
            pages.append(entry["file"])
            walk(entry.get("sections"))
    walk(TOC.get("chapters"))
    return pages


@pytest.mark.parametrize("url", ["", "   ", "https://jupyterhub.example.org", "https://example.com/x",
                                 "https://github.example.net/org/repo", "https://hub.course.test",
                                 "not a url", "https://git.example/org/repo"])
def test_placeholders_are_recognised(url):
    assert is_placeholder(url)


@pytest.mark.parametrize("url", [HUB, STUDENT, "https://examples.org", "https://hub.example-university.org"])
def test_real_addresses_are_not_placeholders(url):
    assert not is_placeholder(url)


def test_every_exercise_is_found_from_its_chapter():
    found = {exercise_notebook(REPO, page) for page in toc_pages()} - {None}
    released = {p.relative_to(REPO).as_posix() for p in (REPO / "exercises").glob("*/*.ipynb")}
    assert found == released
    assert exercise_notebook(REPO, "book/02b_batch_norm_backward") == \
        "exercises/02b_batch_norm_backward/02b_batch_norm_backward.ipynb"
    assert exercise_notebook(REPO, "book/glossary") is None


def test_the_hub_link_pulls_the_student_repository_and_opens_the_exercise():
    url = hub_link(HUB + "/", STUDENT + ".git", "main", "exercises/03_layer_norm/03_layer_norm.ipynb")
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == f"{HUB}/hub/user-redirect/git-pull"
    query = parse_qs(parts.query)
    assert query == {"repo": [STUDENT + ".git"], "branch": ["main"],
                     "urlpath": ["lab/tree/normalization-student/exercises/03_layer_norm/03_layer_norm.ipynb"]}


def test_an_entry_opens_the_exercise_or_the_page_or_nothing():
    entry = launch_entry(HUB, STUDENT, "release", REPO, "book/02_batch_norm", ".md")
    query = parse_qs(urlsplit(entry["url"]).query)
    assert query["urlpath"] == ["lab/tree/normalization-student/exercises/02_batch_norm/02_batch_norm.ipynb"]
    assert query["repo"] == [STUDENT] and query["branch"] == ["release"]
    assert entry["text"] == "JupyterHub" and "exercise" in entry["tooltip"]
    # A page without an exercise opens its own source, from the student release too.
    other = launch_entry(HUB, STUDENT, "main", REPO, "book/glossary", ".md")
    assert parse_qs(urlsplit(other["url"]).query)["urlpath"] == ["lab/tree/normalization-student/book/glossary.md"]
    # A placeholder hub or student repository: no entry.
    for hub, repository in [("https://jupyterhub.example.org", STUDENT), (HUB, ""),
                            (HUB, "https://github.example.com/org/student"), ("", STUDENT)]:
        assert launch_entry(hub, repository, "main", REPO, "book/02_batch_norm", ".md") is None


def fake_app(hub: str, student: str, **other_providers) -> SimpleNamespace:
    options = {"launch_buttons": {"notebook_interface": "jupyterlab", "jupyterhub_url": hub, **other_providers}}
    return SimpleNamespace(
        srcdir=str(REPO),
        config=SimpleNamespace(html_theme_options=options, student_repository_url=student,
                               student_repository_branch="main"),
        env=SimpleNamespace(doc2path=lambda name: str(REPO / f"{name}.md")))


def theme_context(pagename: str) -> dict:
    """A page's header buttons as sphinx-book-theme leaves them: its launch menu points at the
    instructor's repository (Binder and JupyterHub), plus the download and fullscreen buttons."""
    theirs = [{"type": "link", "text": "Binder", "url": f"https://mybinder.org/v2/gh/x/y/main?urlpath=lab/tree/{pagename}.md"},
              {"type": "link", "text": "JupyterHub",
               "url": f"{HUB}/hub/user-redirect/git-pull?repo={INSTRUCTOR}&urlpath=lab/tree/y/{pagename}.md"}]
    return {"pagename": pagename, "header_buttons": [
        {"type": "group", "label": "download-buttons", "buttons": []},
        {"type": "group", "label": LAUNCH_GROUP, "icon": "fas fa-rocket", "buttons": theirs},
        {"type": "javascript", "label": "fullscreen-button"}]}


def test_the_theme_menu_is_replaced_by_one_entry_for_the_exercise():
    context = theme_context("book/04_instance_group_norm")
    relaunch(fake_app(HUB, STUDENT), "book/04_instance_group_norm", "page.html", context, None)
    labels = [b["label"] for b in context["header_buttons"]]
    assert labels == ["download-buttons", LAUNCH_GROUP, "fullscreen-button"]
    (entry,) = context["header_buttons"][1]["buttons"]
    assert entry["url"] == hub_link(HUB, STUDENT, "main",
                                    "exercises/04_instance_group_norm/04_instance_group_norm.ipynb")
    assert INSTRUCTOR not in entry["url"] and "mybinder" not in entry["url"]


@pytest.mark.parametrize("hub, student", [("https://jupyterhub.example.org", STUDENT), (HUB, ""),
                                          ("https://jupyterhub.example.org", "")])
def test_a_placeholder_removes_the_whole_menu(hub, student):
    context = theme_context("book/05_data_vs_layer_norm")
    relaunch(fake_app(hub, student), "book/05_data_vs_layer_norm", "page.html", context, None)
    assert [b["label"] for b in context["header_buttons"]] == ["download-buttons", "fullscreen-button"]


def test_the_thebe_button_is_kept_and_a_page_without_a_menu_is_left_alone():
    context = theme_context("book/06_training_dynamics")
    thebe = {"type": "javascript", "text": "Live Code", "javascript": "initThebeSBT()"}
    context["header_buttons"][1]["buttons"].append(thebe)
    relaunch(fake_app("", ""), "book/06_training_dynamics", "page.html", context, None)
    assert context["header_buttons"][1]["buttons"] == [thebe]
    plain = {"pagename": "book/intro", "header_buttons": [{"type": "group", "label": "download-buttons"}]}
    relaunch(fake_app(HUB, STUDENT), "book/intro", "page.html", plain, None)
    assert plain["header_buttons"] == [{"type": "group", "label": "download-buttons"}]


def test_the_book_config_loads_the_extension_and_names_the_student_repository():
    sphinx = CONFIG["sphinx"]
    assert sphinx["local_extensions"]["launch_exercise"] == "book/_ext"
    assert "launch_exercise" in sphinx["config"]["extensions"]
    assert "student_repository_url" in sphinx["config"] and "student_repository_branch" in sphinx["config"]
    # No provider whose button would open the instructor's repository.
    launch = CONFIG["launch_buttons"]
    assert not any(launch.get(key) for key in ("binderhub_url", "colab_url", "deepnote_url", "jupyterlite_url"))


def built_html() -> Path | None:
    given = os.environ.get("BUILT_BOOK_HTML")
    if given:
        return Path(given)
    html = REPO / "_build" / "html"
    return html if current_build(html, REPO) else None


def test_built_pages_show_the_launch_menu_only_when_it_leads_somewhere():
    html = built_html()
    if html is None:
        pytest.skip("no current build of the book here (this test builds nothing)")
    launch = CONFIG["launch_buttons"]
    student = CONFIG["sphinx"]["config"].get("student_repository_url", "")
    placeholder = is_placeholder(launch.get("jupyterhub_url", "")) or is_placeholder(student)
    built = [page for page in toc_pages() if (html / f"{page}.html").is_file()]
    assert any(exercise_notebook(REPO, page) for page in built), f"{html} holds no chapter"
    for page in built:  # (tests/test_book.py checks that every page is built)
        text = (html / f"{page}.html").read_text()
        menus = text.count(f"dropdown-{LAUNCH_GROUP}")
        links = re.findall(r'href="([^"]*git-pull\?[^"]*)"', text)
        assert not any(INSTRUCTOR in link or "mybinder" in link for link in links), page
        if placeholder:
            assert menus == 0 and links == [] and "mybinder" not in text, page
        elif exercise_notebook(REPO, page):
            assert menus == 1 and len(links) == 1 and exercise_notebook(REPO, page) in links[0], page


def test_the_book_as_configured_today_shows_no_launch_button():
    """_config.yml still holds the placeholder hub and no student repository."""
    hub = CONFIG["launch_buttons"].get("jupyterhub_url", "")
    student = CONFIG["sphinx"]["config"].get("student_repository_url", "")
    assert is_placeholder(hub) or is_placeholder(student)
    context = theme_context("book/03_layer_norm")
    relaunch(fake_app(hub, student), "book/03_layer_norm", "page.html", context, None)
    assert LAUNCH_GROUP not in [b["label"] for b in context["header_buttons"]]


def test_a_provider_that_would_open_the_instructor_repository_warns(caplog):
    from launch_exercise import _warn_other_providers
    with caplog.at_level(logging.WARNING):
        _warn_other_providers(fake_app(HUB, STUDENT, binderhub_url="https://mybinder.org"))
        _warn_other_providers(fake_app(HUB, STUDENT, binderhub_url="", colab_url=""))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "launch_buttons.binderhub_url" in warnings[0], warnings


@pytest.mark.parametrize("student, shown", [("", False), ("https://github.com/example/x", True)])
def test_the_repository_buttons_lead_to_the_student_release_or_are_hidden(student, shown):
    from types import SimpleNamespace

    import launch_exercise

    instructor = "https://github.com/normalization-course/normalization-layers-hands-on"
    options = {"repository_url": instructor, **{key: True for key in launch_exercise.REPOSITORY_BUTTONS}}
    config = SimpleNamespace(html_theme_options=options, student_repository_url=student, student_repository_branch="main")
    launch_exercise.point_repository_buttons(None, config)
    assert all(options[key] is shown for key in launch_exercise.REPOSITORY_BUTTONS)
    if shown:
        assert options["repository_url"] == student and options["repository_branch"] == "main"
