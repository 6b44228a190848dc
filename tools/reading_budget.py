"""How long each page of the book takes to read, measured on its MyST source.

    python tools/reading_budget.py            # one table row per page, in _toc.yml order
    python tools/reading_budget.py --json     # the same numbers as JSON
    python tools/reading_budget.py --explain book/01_covariate_shift.md
                                              # the paragraphs, sentences and code lines
                                              # that break the budget, with line numbers

The rules follow the conventions of the book helpers' brief (issue 24):

* The **core path** is what shows with every fold closed. Folded are: the body of a
  sphinx-design dropdown whose title starts with "Going deeper:"; the source of a code cell
  tagged hide-input, hide-cell, remove-input or remove-cell; the output of a code cell tagged
  hide-cell, remove-cell, hide-output or remove-output. Everything else is shown, other
  admonitions and dropdowns included.
* **Prose words**: whitespace-separated tokens holding a letter or a digit, in paragraphs, list
  items, block quotes, headings, table cells, admonition bodies and figure captions. An inline
  code span, an inline math span, a glued value (`{glue:text}` and the other glue roles) and a
  cross-reference without explicit text each count as one word; a role or link with explicit
  text counts that text. Display math, HTML comments, MyST targets `(label)=`, directive
  options (`:alt:` among them) and code are not prose. A paragraph written mostly in Chinese
  (more CJK characters than Latin words) is counted apart, in CJK characters (CJK
  punctuation included); elsewhere a run of CJK characters counts as one word. Printed cell
  outputs are not counted: they are not in the source.
* **Code lines**: non-blank source lines of code cells (cell options excluded), of fenced
  blocks that are not directives (```python, ```text, ...), of `{code-block}` directives and of
  `{literalinclude}`d files. Shown unless folded as above. A line is **too wide** when it holds
  more than 88 characters, wherever it is (folded and removed code included).
* **Figures**: `{glue:figure}`, `{figure}` and `{image}` directives, markdown images, code
  cells with a `mystnb: figure` caption, and code cells that draw (`plt.subplots(`,
  `plt.figure(`, `plt.show(`) without gluing the figure. A figure *lacks* a caption or alt text
  when it has no caption, or no alt text (`:alt:`, `mystnb: image: alt`, `![alt](...)`).
* **Minutes** = core words / 150 + shown code lines / 10.
* **Sentences** (core path, English paragraphs, list items and captions; not headings, not
  tables): split after ".", "?" or "!" followed by a space and a capital, digit or opening
  bracket; the end of a paragraph or list item ends a sentence. "e.g.", "i.e.", "et al.",
  "Fig.", "vs.", "cf.", "Eq.", "Sec." and initials ("J. Lei") do not end one. Average length
  = words / sentences.
* **Numbers per paragraph** (core paragraphs, list items and captions; tables are exempt):
  glued values, inline math that is a numeric literal, and written numerals. A numeral glued
  to letters (`BatchNorm1d`, `float16`, `ResNet-50`), a year (1900-2099), and the number after
  "chapter", "section", "§", "Fig."/"Figure", "Table", "Eq." or "exercise" are references,
  not numbers.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]

WORDS_PER_MINUTE = 150
CODE_LINES_PER_MINUTE = 10
MAX_CODE_WIDTH = 88
LONG_SENTENCE = 35
BUDGET = {"core_words": 4000, "shown_code_lines": 150, "avg_sentence": 20.0,
          "max_numbers_per_paragraph": 3, "wide_code_lines": 0}

FOLD_TAGS = {"hide-input", "hide-cell", "remove-input", "remove-cell"}
HIDDEN_OUTPUT_TAGS = {"hide-cell", "remove-cell", "hide-output", "remove-output"}
FOLDED_DROPDOWN = "Going deeper:"
RAW_DIRECTIVES = {"math", "raw", "eval-rst", "toctree", "tableofcontents", "code-cell"}
CODE_DIRECTIVES = {"code-block", "code", "sourcecode"}
FIGURE_DIRECTIVES = {"glue:figure", "figure", "image"}

FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,}|:{3,})\s*(.*)$")
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]+")
NUMERAL = re.compile(r"(?<![\w.\-−])[-−]?\d+(?:[.,]\d+)*")
REFERENCE_WORD = re.compile(r"(chapters?|sections?|§|fig\.|figs\.|figures?|tables?|eq\.|"
                            r"exercises?)\s*$", re.IGNORECASE)
ABBREVIATIONS = ["e.g.", "i.e.", "et al.", "Fig.", "Figs.", "vs.", "cf.", "Eq.", "Sec."]
SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[A-Z0-9\"'“‘(\[])")
DRAWS = re.compile(r"plt\.(subplots|figure|show)\(")


@dataclass
class Paragraph:
    line: int           # 1-based line of the page where it starts
    text: str           # after inline markup is reduced to words (see `plain`)
    numbers: int
    kind: str           # "paragraph", "heading", "table", "caption"


@dataclass
class PageStats:
    page: str
    core_words: int = 0
    folded_words: int = 0
    chinese_chars: int = 0
    shown_code_lines: int = 0
    folded_code_lines: int = 0
    figures: int = 0
    figures_lacking_caption_or_alt: int = 0
    wide_code_lines: int = 0
    sentences: int = 0
    sentence_words: int = 0
    long_sentences: int = 0
    max_numbers_per_paragraph: int = 0
    minutes: float = 0.0
    avg_sentence: float = 0.0
    long_sentence_share: float = 0.0
    # --explain details: (line, what)
    offending: list = field(default_factory=list)

    def finish(self) -> "PageStats":
        self.minutes = round(self.core_words / WORDS_PER_MINUTE
                             + self.shown_code_lines / CODE_LINES_PER_MINUTE, 1)
        self.avg_sentence = (round(self.sentence_words / self.sentences, 1)
                             if self.sentences else 0.0)
        self.long_sentence_share = (round(self.long_sentences / self.sentences, 3)
                                    if self.sentences else 0.0)
        return self


# ---------------------------------------------------------------- inline text

def plain(text: str) -> tuple[str, int]:
    """Reduce inline MyST to plain words; return the text and the count of glued or numeric
    placeholders it held (numbers that the numeral scan of the plain text cannot see)."""
    placeholders = 0

    def role(match: re.Match) -> str:
        nonlocal placeholders
        name, content = match.group(1), match.group(2)
        if name.startswith("glue"):
            placeholders += 1
            return "GLUED"
        if name == "math":
            return math(content)
        explicit = re.match(r"^(.*?)\s*<[^<>]+>$", content, re.DOTALL)
        if explicit and explicit.group(1):
            return explicit.group(1).replace("%s", "N")
        return content if name in {"term", "abbr", "sub", "sup", "kbd"} else "REF"

    def math(content: str) -> str:
        nonlocal placeholders
        stripped = re.sub(r"\\[,;! ]|\\(times|cdot|%)|[{}^\s%]", "", content)
        if re.fullmatch(r"[-−]?\d[\d.,\-−]*", stripped):
            placeholders += 1
            return "NUMERIC"
        return "MATH"

    text = re.sub(r"<!--.*?-->", " ", text, flags=re.DOTALL)
    text = re.sub(r"\{([\w:-]+)\}`([^`]*)`", role, text)
    text = re.sub(r"``.+?``|`[^`]+`", " CODE ", text)
    text = re.sub(r"(?<![\\$])\$(?!\$)([^$]+?)\$", lambda m: math(m.group(1)), text)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<https?://[^>]+>|https?://\S+", " URL ", text)
    text = re.sub(r"<[^>]+>", " ", text)                       # inline HTML tags
    text = re.sub(r"(\*\*|__|\*|(?<!\w)_|_(?!\w))", "", text)  # emphasis markers
    return text, placeholders


def count_words(text: str) -> int:
    return sum(1 for token in CJK.sub(" CJK ", text).split() if re.search(r"\w", token))


def count_numbers(text: str, placeholders: int) -> int:
    count = placeholders
    for match in NUMERAL.finditer(text):
        value = match.group().lstrip("-−")
        if re.fullmatch(r"(19|20)\d\d", value):
            continue
        if REFERENCE_WORD.search(text[:match.start()]):
            continue
        count += 1
    return count


def sentences(text: str) -> list[str]:
    for abbreviation in ABBREVIATIONS:
        text = text.replace(abbreviation, abbreviation.replace(".", ""))
    text = re.sub(r"(?<![\w.])([A-Z])\.(?=\s)", r"\1", text)      # initials: "D. Golan"
    return [s for s in SENTENCE_END.split(text.strip()) if count_words(s)]


def is_chinese(text: str) -> bool:
    latin_words = sum(1 for token in CJK.sub(" ", text).split() if re.search(r"[A-Za-z]", token))
    return sum(len(run) for run in CJK.findall(text)) > latin_words


# ---------------------------------------------------------------- block structure

def split_options(body: list[str]) -> tuple[dict, list[str], int]:
    """A directive's or code cell's options: a `---` YAML block or `:key: value` lines, one
    line each (as MyST reads them: an indented line after an option is already the body).
    Returns the options, the remaining body, and its offset."""
    if body and body[0].strip() == "---":
        end = next((i for i in range(1, len(body)) if body[i].strip() == "---"), None)
        if end is not None:
            return yaml.safe_load("\n".join(body[1:end])) or {}, body[end + 1:], end + 1
    options, i = {}, 0
    while i < len(body) and re.match(r"^:[\w-]+:", body[i]):
        key, _, value = body[i][1:].partition(":")
        options[key] = value.strip()
        i += 1
    if options.get("tags", "").startswith("["):
        options["tags"] = yaml.safe_load(options["tags"])
    return options, body[i:], i


def fenced_blocks(lines: list[str], first: int):
    """Yield ("text", [(line_no, line)]) runs and ("fence", info, body, line_no) blocks. A
    fence closes at the first later line of the same character, at least as long, and nothing
    else (as markdown-it and MyST's colon fences do); its body is returned raw."""
    i, run = 0, []
    while i < len(lines):
        match = FENCE_OPEN.match(lines[i])
        if not match:
            run.append((first + i, lines[i]))
            i += 1
            continue
        marker, info = match.group(2), match.group(3)
        close = re.compile(rf"^\s*{re.escape(marker[0])}{{{len(marker)},}}\s*$")
        end = next((j for j in range(i + 1, len(lines)) if close.match(lines[j])), len(lines))
        if run:
            yield ("text", run)
            run = []
        yield ("fence", info, lines[i + 1:end], first + i)
        i = end + 1
    if run:
        yield ("text", run)


class Page:
    def __init__(self, path: Path):
        self.path = path
        self.stats = PageStats(page=path.relative_to(REPO).as_posix()
                               if path.is_relative_to(REPO) else str(path))
        self.paragraphs: list[Paragraph] = []
        text = path.read_text(encoding="utf-8")
        lines = text.split("\n")
        start = 0
        if lines and lines[0].strip() == "---":                 # jupytext front matter
            start = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), -1) + 1
        self.walk(lines[start:], start + 1, folded=False)
        self.stats.finish()

    # -- blocks
    def walk(self, lines: list[str], first: int, folded: bool) -> None:
        for block in fenced_blocks(lines, first):
            if block[0] == "text":
                self.prose(block[1], folded)
            else:
                self.fence(*block[1:], folded=folded)

    def fence(self, info: str, body: list[str], line: int, folded: bool) -> None:
        directive = re.match(r"^\{([\w:-]+)\}\s*(.*)$", info)
        if not directive:                                       # plain fenced code
            self.code(body, line, folded)
            return
        name, argument = directive.groups()
        options, rest, offset = split_options(body)
        if name == "code-cell":
            self.code_cell(options, rest, line + 1 + offset, folded)
        elif name in CODE_DIRECTIVES:
            self.code(rest, line + 1 + offset, folded)
        elif name == "literalinclude":
            included = (self.path.parent / argument.strip()).resolve()
            source = included.read_text(encoding="utf-8").split("\n") if included.exists() else []
            self.code(source, line, folded, where=f"{argument.strip()}:")
        elif name in RAW_DIRECTIVES:
            pass
        elif name in FIGURE_DIRECTIVES:
            caption = [l for l in rest if l.strip()]
            self.figure(bool(caption), bool(options.get("alt")), line)
            self.walk(rest, line + 1 + offset, folded)
        else:
            if name == "dropdown" and argument.startswith(FOLDED_DROPDOWN):
                folded = True
            if argument and name in {"admonition", "dropdown", "topic", "sidebar"}:
                self.prose([(line, argument)], folded, kind="heading")
            self.walk(rest, line + 1 + offset, folded)

    def code_cell(self, options: dict, source: list[str], line: int, folded: bool) -> None:
        tags = set(options.get("tags") or [])
        self.code(source, line, folded or bool(tags & FOLD_TAGS))
        output_folded = folded or bool(tags & HIDDEN_OUTPUT_TAGS)
        figure = ((options.get("mystnb") or {}).get("figure") or {})
        if figure:
            alt = ((options.get("mystnb") or {}).get("image") or {}).get("alt")
            self.figure(bool(figure.get("caption")), bool(alt), line)
            if figure.get("caption"):
                self.prose([(line, str(figure["caption"]))], output_folded, kind="caption")
        elif ("remove-cell" not in tags and "remove-output" not in tags
              and any(DRAWS.search(l) for l in source)
              and not any(re.search(r"\bglue\(", l) for l in source)):
            self.figure(False, False, line)

    def code(self, source: list[str], line: int, folded: bool, where: str = "") -> None:
        shown = [l for l in source if l.strip()]
        if folded:
            self.stats.folded_code_lines += len(shown)
        else:
            self.stats.shown_code_lines += len(shown)
        for k, text in enumerate(source):
            if len(text) > MAX_CODE_WIDTH:
                self.stats.wide_code_lines += 1
                place = f"{where}{k + 1}" if where else str(line + k)
                self.stats.offending.append((place, f"code line of {len(text)} characters"))

    def figure(self, caption: bool, alt: bool, line: int) -> None:
        self.stats.figures += 1
        if not (caption and alt):
            self.stats.figures_lacking_caption_or_alt += 1
            self.stats.offending.append((str(line), "figure without "
                                         + ("alt text" if caption else "caption")))

    # -- prose
    def prose(self, numbered_lines: list[tuple[int, str]], folded: bool,
              kind: str = "paragraph") -> None:
        """Group text lines into paragraphs (blank lines, list items, headings and table rows
        separate them) and count them."""
        current: list[tuple[int, str]] = []
        in_math, in_comment = False, False   # in_math: the closing delimiter awaited

        def flush(kind_of: str = kind) -> None:
            if current:
                self.count(current[0][0], " ".join(t for _, t in current), folded, kind_of)
                current.clear()

        for number, raw in numbered_lines:
            stripped = raw.strip()
            if in_comment:
                in_comment = "-->" not in stripped
                continue
            if stripped.startswith("<!--") and "-->" not in stripped:
                flush()
                in_comment = True
                continue
            if in_math:                      # until the closing "$$" or "\end{env}"
                if stripped.endswith("$$") if in_math == "$$" else stripped.startswith(in_math):
                    in_math = False
                continue
            if stripped.startswith("$$") or stripped.startswith(r"\begin{"):
                flush()
                close = "$$" if stripped.startswith("$$") else stripped.replace("begin", "end", 1)
                close = close.split("}")[0] + "}" if close != "$$" else close
                one_line = stripped.endswith("$$") and len(stripped) > 2 or (
                    close != "$$" and close in stripped)
                in_math = False if one_line else close
                continue
            if (not stripped or stripped == "+++" or stripped.startswith("%")
                    or re.fullmatch(r"\(.+\)=", stripped)):
                flush()
                continue
            if stripped.startswith("#"):
                flush()
                self.count(number, stripped.lstrip("#"), folded, "heading")
                continue
            if stripped.startswith("|"):
                flush()
                if not re.fullmatch(r"[|:\-\s]+", stripped):
                    self.count(number, stripped.replace("|", " "), folded, "table")
                continue
            if re.match(r"^([-*+]|\d+[.)])\s+", stripped):
                flush()
                stripped = re.sub(r"^([-*+]|\d+[.)])\s+", "", stripped)
            current.append((number, re.sub(r"^>\s?", "", stripped)))
        flush()

    def count(self, line: int, text: str, folded: bool, kind: str) -> None:
        words_text, placeholders = plain(text)
        stats = self.stats
        if is_chinese(words_text):
            if not folded:
                stats.chinese_chars += sum(len(run) for run in CJK.findall(words_text))
            return
        words = count_words(words_text)
        if folded:
            stats.folded_words += words
            return
        stats.core_words += words
        if kind in {"heading", "table"}:
            return
        numbers = count_numbers(words_text, placeholders)
        self.paragraphs.append(Paragraph(line, words_text, numbers, kind))
        stats.max_numbers_per_paragraph = max(stats.max_numbers_per_paragraph, numbers)
        if numbers > BUDGET["max_numbers_per_paragraph"]:
            stats.offending.append((str(line), f"paragraph with {numbers} numbers"))
        for sentence in sentences(words_text):
            n = count_words(sentence)
            stats.sentences += 1
            stats.sentence_words += n
            if n > LONG_SENTENCE:
                stats.long_sentences += 1
                stats.offending.append((str(line), f"sentence of {n} words: "
                                        f"{' '.join(sentence.split()[:8])} ..."))


# ---------------------------------------------------------------- book level

def toc_pages(toc: Path = REPO / "_toc.yml") -> list[Path]:
    """The pages of the book in _toc.yml order (root, then every `file`, depth first)."""
    data = yaml.safe_load(toc.read_text())
    names = [data["root"]]

    def visit(node):
        if isinstance(node, dict):
            if "file" in node:
                names.append(node["file"])
            for value in node.values():
                if isinstance(value, (list, dict)):
                    visit(value)
        elif isinstance(node, list):
            for item in node:
                visit(item)

    visit({k: v for k, v in data.items() if k != "root"})
    pages = []
    for name in names:
        for suffix in (".md", ".ipynb"):
            if (REPO / f"{name}{suffix}").exists():
                pages.append(REPO / f"{name}{suffix}")
                break
    return pages


def measure(path: Path) -> PageStats:
    return Page(Path(path).resolve()).stats


def over_budget(stats: PageStats) -> list[str]:
    """What breaks a chapter's budget, in words; empty when it is within budget."""
    problems = []
    if stats.core_words > BUDGET["core_words"]:
        problems.append(f"{stats.core_words} core prose words (budget {BUDGET['core_words']})")
    if stats.shown_code_lines > BUDGET["shown_code_lines"]:
        problems.append(f"{stats.shown_code_lines} shown code lines "
                        f"(budget {BUDGET['shown_code_lines']})")
    if stats.avg_sentence > BUDGET["avg_sentence"]:
        problems.append(f"sentences of {stats.avg_sentence} words on average "
                        f"(budget {BUDGET['avg_sentence']})")
    if stats.max_numbers_per_paragraph > BUDGET["max_numbers_per_paragraph"]:
        problems.append(f"a core paragraph with {stats.max_numbers_per_paragraph} numbers "
                        f"(budget {BUDGET['max_numbers_per_paragraph']})")
    if stats.wide_code_lines > BUDGET["wide_code_lines"]:
        problems.append(f"{stats.wide_code_lines} code lines over {MAX_CODE_WIDTH} characters")
    return problems


COLUMNS = [("page", "page", "{}"), ("core words", "core_words", "{:,}"),
           ("folded words", "folded_words", "{:,}"), ("code shown", "shown_code_lines", "{}"),
           ("code folded", "folded_code_lines", "{}"), ("figures", "figures", "{}"),
           ("minutes", "minutes", "{:.0f}"), ("avg sentence", "avg_sentence", "{:.1f}"),
           ("> 35 words", "long_sentence_share", "{:.0%}"),
           ("max numbers/par.", "max_numbers_per_paragraph", "{}"),
           ("code > 88", "wide_code_lines", "{}")]


def table(rows: list[PageStats]) -> str:
    """A markdown table, one row per page."""
    head = "| " + " | ".join(title for title, _, _ in COLUMNS) + " |"
    rule = "|---" + "|---:" * (len(COLUMNS) - 1) + "|"
    body = ["| " + " | ".join(fmt.format(getattr(row, key)) for _, key, fmt in COLUMNS) + " |"
            for row in rows]
    return "\n".join([head, rule, *body])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pages", nargs="*", help="pages to measure (default: the _toc.yml)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--explain", action="store_true",
                        help="also list what breaks the budget, with line numbers")
    args = parser.parse_args(argv)
    paths = [Path(p) for p in args.pages] or toc_pages()
    rows = [measure(p) for p in paths]
    if args.json:
        out = []
        for row in rows:
            item = asdict(row)
            item.pop("offending")
            if args.explain:
                item["offending"] = row.offending
            out.append(item)
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    print(table(rows))
    if args.explain:
        for row in rows:
            print(f"\n{row.page}: " + ("; ".join(over_budget(row)) or "within budget"))
            for place, what in row.offending:
                print(f"  line {place}: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
