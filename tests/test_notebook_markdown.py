"""Every markdown cell of every released notebook renders as written: no list or heading that a
wrapped line starts by accident in the middle of a sentence.

A line that begins with "1)" or "1." (or "-", "*", "+", "#") right after a line of text
interrupts the paragraph: CommonMark makes it a list item (a heading), so "`running_var` at⏎1) runs
one forward pass" shows "at" and then a numbered list, and the value 1 is lost. JupyterLab renders
markdown cells with marked, which follows CommonMark here; nbconvert, which writes the feedback
pages, renders with mistune, which does the same. The test parses with markdown-it-py, a strict
CommonMark parser (the one MyST uses, so the book agrees too), with the dollar-math plugin because
JupyterLab and nbconvert set math aside before the markdown parser sees it; its tokens carry the
source lines, so a failure names the line. A list or heading may follow text directly only when
that text ends a sentence or announces it (". : ! ?").
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin
from nbconvert.filters.markdown import markdown2html

REPO = Path(__file__).resolve().parents[1]
RELEASED = sorted(REPO.glob("exercises/*/*.ipynb"))
ANNOUNCES = (".", ":", "!", "?")
PARSER = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin)


def accidental_blocks(source: str) -> list[str]:
    """The lists and headings in ``source`` that interrupt a sentence, as 'line N: ...' notes."""
    lines = source.splitlines()
    tokens = PARSER.parse(source)
    # a block that starts on the line where a paragraph ends interrupts it (no blank line between)
    paragraph_ends = {t.map[1] for t in tokens if t.type == "paragraph_open" and t.map}
    kinds = {"ordered_list_open": "an ordered list", "bullet_list_open": "a bullet list", "heading_open": "a heading"}
    found = []
    for token in tokens:
        if token.type not in kinds or not token.map or token.map[0] not in paragraph_ends:
            continue
        start = token.map[0]
        before = lines[start - 1].rstrip()
        if not before.endswith(ANNOUNCES):
            found.append(f"line {start + 1} starts {kinds[token.type]} in the middle of a sentence: "
                         f"{before[-40:]!r} / {lines[start][:40]!r}")
    return found


def markdown_cells(path: Path) -> list[tuple[int, str]]:
    cells = json.loads(path.read_text())["cells"]
    return [(i, "".join(c["source"])) for i, c in enumerate(cells) if c["cell_type"] == "markdown"]


def test_the_parser_catches_the_numbered_list_of_exercise_2():
    """The case that was seen (02 Question 1), so that this test can fail; and both renderers agree."""
    broken = "`running_mean` starts at 0 and `running_var` at\n1) runs one forward pass in training mode:\n"
    assert accidental_blocks(broken)
    assert "<ol>" in markdown2html(broken)
    fixed = "`running_mean` starts at 0 and `running_var` at 1)\nruns one forward pass in training mode:\n"
    assert not accidental_blocks(fixed) and "<ol>" not in markdown2html(fixed)
    assert not accidental_blocks("Three steps:\n1. one\n2. two\n")
    assert accidental_blocks("the slope is\n- 2 here\n") and accidental_blocks("see issue\n# 5 for why\n")
    assert accidental_blocks("* an item whose line ends at\n1) and goes on\n")


def test_every_released_notebook_is_checked():
    assert len(RELEASED) >= 8, RELEASED


@pytest.mark.parametrize("path", RELEASED, ids=lambda p: p.stem)
def test_no_markdown_cell_starts_a_list_mid_sentence(path):
    problems = [f"cell {i}: {note}" for i, source in markdown_cells(path) for note in accidental_blocks(source)]
    assert not problems, "\n".join(problems)
