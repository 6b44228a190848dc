"""The front door and the instructor guide say what the code does.

The README stays short and its quick start is what CI runs; every image and local link of the
README and the guide exists; the guide's table of contents lists exactly its pages; and every
option that a documented `python -m autograder.grade` or `hub/start` command uses exists.
"""
from __future__ import annotations

import re
import subprocess
import sys

import yaml

from course import REPO, tool_env

README = REPO / "README.md"
GUIDE = REPO / "book" / "instructor"
README_BUDGET = 5632  # bytes: "about 5 KB" (issue 27); the rest belongs in the instructor guide
IMAGE_BUDGET = 150 * 1024


def guide_pages() -> list[str]:
    toc = yaml.safe_load((GUIDE / "_toc.yml").read_text())
    return [toc["root"], *(entry["file"] for entry in toc.get("chapters", []))]


def documents():
    yield README
    for name in guide_pages():
        yield GUIDE / f"{name}.md"


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)


def test_the_readme_is_a_short_front_door():
    size = len(README.read_bytes())
    assert size <= README_BUDGET, f"README.md is {size} bytes; move detail into the instructor guide"
    text = README.read_text()
    for heading in ("## Quick start", "## See it in ten minutes", "## Layout", "## For students"):
        assert heading in text, heading


def test_ci_runs_exactly_the_readme_quick_start():
    """`.ci/run` installs as the quick start does and ends with the README's test command."""
    quick_start = README.read_text().split("## Quick start", 1)[1]
    install, test = code_blocks(quick_start)[0].strip().splitlines()
    ci = (REPO / ".ci" / "run").read_text()
    assert ci.strip().splitlines()[-1] == test.strip()
    assert "pip install --quiet -r requirements.txt" in ci and "-r requirements.txt" in install
    assert install.startswith("python3.11 -m venv .venv")


def test_every_image_and_local_link_exists():
    missing, heavy = [], []
    for doc in documents():
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path = (doc.parent / target).resolve()
            if not path.exists():
                missing.append(f"{doc.relative_to(REPO)}: {target}")
            elif path.suffix == ".png" and path.stat().st_size > IMAGE_BUDGET:
                heavy.append(f"{target}: {path.stat().st_size} bytes")
    assert missing == [] and heavy == [], (missing, heavy)
    assert len(re.findall(r"!\[[^\]]+\]\(docs/readme/\w+\.png\)", README.read_text())) == 2


def test_the_guide_lists_exactly_its_pages_and_opens_with_the_checklist():
    pages = guide_pages()
    assert sorted(pages) == sorted(p.stem for p in GUIDE.glob("*.md")), "a page is missing from _toc.yml"
    assert pages[0] == "checklist"
    checklist = (GUIDE / "checklist.md").read_text()
    steps = ("Create the course", "Import the roster", "Release", "Collect", "Grade", "Read the report",
             "Feedback", "Export to the LMS", "Clean up")
    rows = [line for line in checklist.splitlines() if re.match(r"\| \d\. ", line)]
    assert [re.match(r"\| \d\. ([^|]+?) \|", row).group(1) for row in rows] == list(steps)
    assert all("`" in row for row in rows), "each step names its command"


def options_of(command: list[str]) -> set[str]:
    done = subprocess.run([*command, "--help"], capture_output=True, text=True, cwd=REPO, env=tool_env(), timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", done.stdout))


def documented_options(program: str) -> set[str]:
    """The options written after `program` on one command line (continuations joined)."""
    found = set()
    for doc in documents():
        for block in [*code_blocks(doc.read_text()), *re.findall(r"`([^`\n]+)`", doc.read_text())]:
            for line in block.replace("\\\n", " ").splitlines():
                if program in line:
                    tail = line.split(program, 1)[1].split("#")[0].split("&&")[0]
                    found |= set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", tail))
    return found


def test_every_documented_option_of_the_grade_command_exists():
    documented = documented_options("autograder.grade")
    assert {"--workers", "--student", "--timeout", "--cell-timeout"} <= documented  # the parser reads the docs
    assert documented - options_of([sys.executable, "-m", "autograder.grade"]) == set()


def test_every_documented_option_of_hub_start_exists():
    documented = documented_options("hub/start")
    assert {"--create-users", "--remove"} <= documented
    assert documented - options_of([sys.executable, str(REPO / "hub" / "prepare.py")]) == set()
