"""Make the book's Chinese font: Noto Sans CJK SC cut down to the characters the book uses.

Without a CJK font a reader's browser shows the 要点, the 术语表 and the quotations of the
sources as boxes. The book therefore ships its own font, book/_static/fonts/, loaded by
book/_static/fonts/cjk.css for CJK characters only (unicode-range), so that a page without
Chinese never fetches it. Nothing is downloaded when the book is built or read.

The source font comes from Debian's fonts-noto-cjk package (SIL Open Font License 1.1, whose
text is book/_static/fonts/OFL.txt). Rerun this tool whenever a chapter gains a Chinese
character; tests/test_cjk_font.py fails until you do:

    apt-get download fonts-noto-cjk && dpkg-deb -x fonts-noto-cjk_*.deb /tmp/noto
    python tools/subset_cjk_font.py \\
        --source /tmp/noto/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc \\
        --also ../shared/sources/*.txt

(--also adds the characters of other files: the committed subset also covers every character
of the two source articles, so that a new quotation rarely needs a new subset.)

(/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc, the default, is where the package
installs it.) The subset is written as WOFF (zlib); WOFF2 would need the brotli module.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from fontTools import subset
from fontTools.ttLib import TTCollection, TTFont

REPO = Path(__file__).resolve().parents[1]
FONT_DIR = REPO / "book" / "_static" / "fonts"
FONT = FONT_DIR / "NotoSansCJKsc-book-subset.woff"
DEFAULT_SOURCE = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
FAMILY = "Noto Sans CJK SC"

# CJK symbols and punctuation, CJK Extension A, CJK Unified Ideographs, compatibility
# ideographs, full-width forms: the ranges the CSS's unicode-range hands to this font.
CJK_RANGES = [(0x3000, 0x303F), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),
              (0xFF00, 0xFFEF)]
CJK = re.compile("[" + "".join(f"\\u{lo:04x}-\\u{hi:04x}" for lo, hi in CJK_RANGES) + "]")


def book_pages() -> list[Path]:
    """Every page source of the book: book/*.md (the chapters, the intro, the glossary)."""
    return sorted((REPO / "book").glob("*.md"))


def book_characters(pages: list[Path] | None = None) -> set[str]:
    """The CJK characters (punctuation included) that the pages use."""
    chars: set[str] = set()
    for page in pages if pages is not None else book_pages():
        chars.update(CJK.findall(page.read_text(encoding="utf-8")))
    return chars


def font_characters(path: Path = FONT) -> set[str]:
    """The characters that a font maps to a glyph."""
    with TTFont(path) as font:
        return {chr(code) for code in font.getBestCmap()}


def simplified_chinese_font(source: Path) -> TTFont:
    """The SC face of a Noto CJK collection (or the font itself, if it is no collection)."""
    if source.suffix.lower() != ".ttc":
        return TTFont(source)
    for font in TTCollection(source).fonts:
        if font["name"].getDebugName(1) == FAMILY:
            return font
    raise SystemExit(f"{source} holds no face named {FAMILY!r}")


def make_subset(source: Path, chars: set[str], out: Path = FONT) -> Path:
    font = simplified_chinese_font(source)
    missing = {c for c in chars if ord(c) not in font.getBestCmap()}
    if missing:
        raise SystemExit(f"{FAMILY} has no glyph for: {''.join(sorted(missing))}")
    options = subset.Options()
    options.flavor = "woff"
    options.name_IDs = ["*"]                 # keep the copyright and licence notices
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(ord(c) for c in chars))
    subsetter.subset(font)
    out.parent.mkdir(parents=True, exist_ok=True)
    font.flavor = "woff"
    font.save(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE,
                        help="NotoSansCJK-Regular.ttc of fonts-noto-cjk "
                        f"(default {DEFAULT_SOURCE})")
    parser.add_argument("--also", type=Path, nargs="*", default=[],
                        help="text files whose CJK characters the font should cover too "
                             "(e.g. the two source articles, for quotations still to come)")
    args = parser.parse_args(argv)
    chars = book_characters() | book_characters(args.also)
    out = make_subset(args.source, chars)
    print(f"{len(chars)} CJK characters ({len(book_characters())} of them from the "
          f"{len(book_pages())} pages of the book) -> "
          f"{out.relative_to(REPO)} ({out.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
