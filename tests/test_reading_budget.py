"""tools/reading_budget.py counts what the book's conventions say, and every chapter keeps to
its reading budget (issue 24): <= 4,000 core prose words, <= 150 shown code lines, sentences of
<= 20 words on average, <= 3 numbers per core paragraph, no code line over 88 characters."""
from __future__ import annotations

import importlib.util
import json
import sys
import textwrap

import pytest

from course import REPO

spec = importlib.util.spec_from_file_location("reading_budget",
                                              REPO / "tools" / "reading_budget.py")
rb = importlib.util.module_from_spec(spec)
sys.modules["reading_budget"] = rb     # dataclasses look their module up there
spec.loader.exec_module(rb)

HEADER = """\
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  name: python3
---
"""


def page(tmp_path, body: str):
    path = tmp_path / "page.md"
    path.write_text(HEADER + textwrap.dedent(body))
    return rb.measure(path)


def test_prose_words_sentences_and_numbers(tmp_path):
    stats = page(tmp_path, """\
        # Two words

        One short sentence here. Another one, e.g. with an abbreviation, follows it.
        It has 3 apples, 4.5 pears and {glue:text}`n_pears:.1%` plums, in chapter 2 (2015).

        - a list item is its own paragraph
        """)
    # heading 2 + 4 + 8 + 13 (the glued value is one word) + 7
    assert stats.core_words == 2 + 4 + 8 + 13 + 7
    assert stats.folded_words == 0
    # sentences: 4, 8, 13 and the list item 7 (the heading is no sentence)
    assert stats.sentences == 4
    assert stats.avg_sentence == round((4 + 8 + 13 + 7) / 4, 1)
    # 3, 4.5 and the glued value; "chapter 2" is a reference and 2015 a year
    assert stats.max_numbers_per_paragraph == 3
    assert stats.long_sentences == 0


def test_inline_code_math_roles_and_links(tmp_path):
    stats = page(tmp_path, """\
        Call `nn.BatchNorm1d(64, momentum=0.1)` on $x \\in \\mathbb{R}^{N \\times D}$, see
        {numref}`Fig. %s <fig-x>` and [the docs](https://pytorch.org/docs/stable/nn.html), with
        $\\varepsilon = 10^{-5}$ and ${10^{-5}}$.
        """)
    # Call CODE on MATH, see Fig. N and the docs, with MATH and NUMERIC.
    assert stats.core_words == 14
    # the code span's and the equation's digits are no numbers; the bare ${10^{-5}}$ is one
    assert stats.max_numbers_per_paragraph == 1


def test_going_deeper_dropdown_is_folded_other_admonitions_are_shown(tmp_path):
    stats = page(tmp_path, """\
        ::::{dropdown} Going deeper: why this holds
        Five words inside the fold.

        ```python
        folded = 1
        ```
        ::::

        :::{dropdown} A dropdown with another title
        Four words shown here.
        :::

        :::{admonition} Learning goals
        :class: tip

        Three shown words.
        :::
        """)
    assert stats.folded_words == 5 + 5        # the title "Going deeper: why this holds" too
    assert stats.core_words == 4 + 5 + 3 + 2  # two shown titles, two bodies
    assert stats.folded_code_lines == 1
    assert stats.shown_code_lines == 0


def test_code_cells_shown_folded_and_wide(tmp_path):
    wide = "x = " + "1 + " * 30 + "1"
    stats = page(tmp_path, f"""\
        ```{{code-cell}} ipython3
        a = 1

        b = 2
        ```

        ```{{code-cell}} ipython3
        :tags: [hide-input]

        c = 3
        ```

        ```{{code-cell}} ipython3
        ---
        tags: [remove-cell]
        ---
        {wide}
        ```

        ```{{code-cell}} ipython3
        :tags: [hide-output]

        d = 4
        ```

        ```python
        shown = "a fenced block outside a dropdown"
        ```
        """)
    assert stats.shown_code_lines == 2 + 1 + 1
    assert stats.folded_code_lines == 1 + 1
    assert len(wide) > 88 and stats.wide_code_lines == 1
    assert stats.minutes == round(0 / 150 + 4 / 10, 1)


def test_figures_with_and_without_caption_or_alt(tmp_path):
    stats = page(tmp_path, """\
        ```{code-cell} ipython3
        :tags: [remove-cell]

        fig, ax = plt.subplots()
        glue("ch1-fig", fig, display=False)
        ```

        :::{glue:figure} ch1-fig
        :name: fig-ch1
        :alt: Two curves: the loss falls for both networks.
        The caption gives the point.
        :::

        :::{glue:figure} ch1-fig-2
        :alt: MyST ends an option at the end of its line,
          so this indented line is already the caption.
        :::

        ```{code-cell} ipython3
        fig, ax = plt.subplots()
        ax.plot([1, 2])
        ```

        ```{code-cell} ipython3
        ---
        mystnb:
          figure:
            caption: "A caption of six words."
        ---
        plt.figure()
        ```
        """)
    assert stats.figures == 4
    assert stats.figures_lacking_caption_or_alt == 2   # the bare one, and the one without alt
    # captions are shown prose: "The caption gives the point.", "so this indented line is
    # already the caption." and "A caption of six words."
    assert stats.core_words == 5 + 8 + 5
    assert stats.sentences == 3


def test_long_sentences_and_chinese(tmp_path):
    long_sentence = " ".join(["word"] * 36) + "."
    stats = page(tmp_path, f"""\
        {long_sentence} Short one here.

        ## 要点

        - 批归一化在训练时用当前批次的统计量。

        The 要点 above is Chinese.
        """)
    assert stats.chinese_chars == 2 + 18        # CJK punctuation included
    assert stats.core_words == 36 + 3 + 5       # a CJK run inside English is one word
    assert stats.long_sentences == 1
    assert stats.long_sentence_share == round(1 / 3, 3)


def test_display_math_comments_and_targets_are_not_prose(tmp_path):
    stats = page(tmp_path, """\
        (sec-one)=
        <!-- a comment
        over two lines -->
        $$
        y = \\gamma \\hat{x} + \\beta
        $$

        % a MyST comment
        +++
        Only these four words.

        $$
        \\begin{aligned}
        a &= b \\\\
        c &= d
        \\end{aligned}
        $$

        \\begin{equation}
        e = f
        \\end{equation}

        And three more.
        """)
    assert stats.core_words == 4 + 3


def test_over_budget_names_every_excess():
    stats = rb.PageStats(page="x", core_words=4001, shown_code_lines=151, sentences=10,
                         sentence_words=201, max_numbers_per_paragraph=4, wide_code_lines=1)
    stats.finish()
    problems = rb.over_budget(stats)
    assert len(problems) == 5, problems
    assert rb.over_budget(rb.PageStats(page="y").finish()) == []


def test_command_line_table_and_json(capsys):
    assert rb.main(["--json", str(REPO / "book" / "intro.md")]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["page"] == "book/intro.md" and rows[0]["core_words"] > 0
    assert rb.main([]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 2 + len(rb.toc_pages())


CHAPTERS = [p for p in rb.toc_pages() if p.name[:2].isdigit()]


def test_every_numbered_chapter_is_measured():
    """Chapters 1 to 7 at least, and their section pages (02b); a later chapter in the toc is
    held to the budget too."""
    numbers = sorted({p.name[:2] for p in CHAPTERS})
    assert numbers[:7] == [f"{n:02d}" for n in range(1, 8)]
    assert "02b_batch_norm_backward.md" in [p.name for p in CHAPTERS]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_keeps_to_its_reading_budget(chapter):
    problems = rb.over_budget(rb.measure(chapter))
    assert problems == [], (f"{chapter.name} is over its reading budget: " + "; ".join(problems)
                            + f" (details: python tools/reading_budget.py --explain {chapter})")
