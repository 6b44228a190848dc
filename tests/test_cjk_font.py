"""The book ships a font for every Chinese character it uses (tools/subset_cjk_font.py), with its
licence, and loads it on every page."""
from __future__ import annotations

import importlib.util
import re
import sys

import yaml

from course import REPO

spec = importlib.util.spec_from_file_location("subset_cjk_font",
                                              REPO / "tools" / "subset_cjk_font.py")
cjk = importlib.util.module_from_spec(spec)
sys.modules["subset_cjk_font"] = cjk
spec.loader.exec_module(cjk)


def test_every_chinese_character_of_the_book_is_in_the_font():
    used = cjk.book_characters()
    assert "要" in used and "点" in used and "术" in used     # the scan sees the book's Chinese
    missing = used - cjk.font_characters()
    assert not missing, (f"the book's CJK font lacks {''.join(sorted(missing))}: rerun "
                         "tools/subset_cjk_font.py (its docstring says how)")


def test_the_scan_finds_a_character_the_font_lacks(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("A new term: 龘 (and 要点, which the font has).\n", encoding="utf-8")
    used = cjk.book_characters([page])
    assert used == {"龘", "要", "点"}
    assert used - cjk.font_characters() == {"龘"}


def test_the_font_is_small_licensed_and_loaded_on_every_page():
    assert cjk.FONT.stat().st_size < 400 * 1024
    licence = (cjk.FONT_DIR / "OFL.txt").read_text()
    assert "SIL OPEN FONT LICENSE Version 1.1" in licence and "Adobe" in licence
    css = (cjk.FONT_DIR / "cjk.css").read_text()
    assert f'url("{cjk.FONT.name}")' in css
    ranges = re.search(r"unicode-range:([^;]+);", css).group(1)
    assert [f"U+{lo:04X}-{hi:04X}" for lo, hi in cjk.CJK_RANGES] == \
        [r.strip() for r in ranges.split(",")]
    config = yaml.safe_load((REPO / "_config.yml").read_text())["sphinx"]["config"]
    assert "fonts/cjk.css" in config["html_css_files"]
    assert "book/_static" in config["html_static_path"]
