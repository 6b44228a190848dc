"""What must never reach students: solution code, hidden tests and the grader's hidden cases."""
from __future__ import annotations

import ast
import html
import re
import textwrap
from pathlib import Path

import nbformat

from course import ASSIGNMENTS, REPO, source_notebook

MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")


def _regions(source: str, begin: str, end: str) -> list[str]:
    lines, inside, found = source.splitlines(), False, []
    for line in lines:
        if begin in line:
            inside = True
        elif end in line:
            inside = False
        elif inside:
            found.append(line.strip())
    return found


def secret_lines(kinds=("SOLUTION", "HIDDEN TESTS")) -> set[str]:
    """Distinctive lines of every solution region and/or hidden test in solutions/.

    A line that also stands outside those regions somewhere (scaffolding students are given,
    such as ``self.num_features = num_features``) is no secret.
    """
    secrets, public = set(), set()
    for assignment in ASSIGNMENTS:
        for cell in source_notebook(assignment).cells:
            hidden = set()
            for kind in ("SOLUTION", "HIDDEN TESTS"):
                lines = _regions(cell.source, f"BEGIN {kind}", f"END {kind}")
                hidden.update(lines)
                if kind in kinds:
                    secrets.update(line for line in lines if len(line) >= 24 and not line.startswith("#"))
            public.update(line.strip() for line in cell.source.splitlines() if line.strip() not in hidden)
    return secrets - public


def hidden_cases_by_exercise() -> dict[str, list[str]]:
    """Per ``autograder/exercises/*/hidden.py``: its distinctive code lines (the hidden cases).

    A line that also stands in another module of the package or in the book (an import, a common
    call such as ``if isinstance(module, nn.LayerNorm):``) is no secret; nor are definitions,
    imports, comments and docstrings."""
    package = REPO / "autograder"
    public = [path for path in package.rglob("*.py") if path.name != "hidden.py"] + list((REPO / "book").rglob("*.md"))
    elsewhere = {line.strip() for path in public for line in path.read_text().splitlines()}
    found = {}
    for hidden in sorted(package.glob("exercises/*/hidden.py")):
        lines = (line.strip() for line in hidden.read_text().splitlines())
        found[hidden.parent.name] = sorted({line for line in lines if len(line) > 30 and line not in elsewhere
                                            and not line.startswith(("#", '"""', "def ", "from ", "import "))})
    return found


def hidden_case_lines() -> set[str]:
    return {line for lines in hidden_cases_by_exercise().values() for line in lines}


def html_text(page: str) -> str:
    """The text a reader sees: tags removed (code is split into highlighting spans), entities decoded."""
    page = re.sub(r"<(style|script)\b.*?</\1>", "", page, flags=re.S | re.I)
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def leaked(text: str, kinds=("SOLUTION", "HIDDEN TESTS", "HIDDEN CASES")) -> list[str]:
    """The markers, secret lines and (with "HIDDEN CASES") hidden-case lines found in ``text``."""
    markers = [m for m in MARKERS if any(kind in m for kind in kinds)]
    cases = hidden_case_lines() if "HIDDEN CASES" in kinds else set()
    return ([m for m in markers if m in text] + sorted(line for line in secret_lines(kinds) if line in text)
            + sorted(line for line in cases if line in text))


# ------------------------------------------------------------------ graded questions

GRADE_CALLS = ("grade_choice", "grade_number", "grade_observation")
ANSWER_LINE = re.compile(r"^(answer|why)_q\d+\s*=")


def hidden_part(source: str) -> str:
    """The hidden tests of a test cell, as Python source (empty when it has none)."""
    regions = re.findall(r"### BEGIN HIDDEN TESTS[^\n]*\n(.*?)\n?[ \t]*### END HIDDEN TESTS", source, flags=re.S)
    return "\n".join(textwrap.dedent(region) for region in regions)


def visible_part(source: str) -> str:
    """A test cell as the release shows it: the hidden tests left out."""
    return re.sub(r"\n?[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*", "", source, flags=re.S)


def grade_calls(source: str) -> list[ast.Call]:
    """The ``questions.grade_choice``/``grade_number``/``grade_observation`` calls in some Python source."""
    return [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr in GRADE_CALLS]


def keyword(call: ast.Call, name: str, default=None):
    """A keyword argument's value, or ``default``: a literal, or an arithmetic expression of
    literals such as ``key=0.9 ** 16`` (the instructor's own source, evaluated without builtins)."""
    node = next((k.value for k in call.keywords if k.arg == name), None)
    if node is None:
        return default
    try:
        return ast.literal_eval(node)
    except ValueError:
        return eval(compile(ast.Expression(node), "<key>", "eval"), {"__builtins__": {}})


def source_notebooks() -> list[Path]:
    """Every nbgrader source notebook in solutions/, the five exercises and any later one."""
    return sorted((REPO / "solutions").glob("*/*.ipynb"))


def question_secrets() -> dict[str, str]:
    """What only the grader may know about the graded questions, and where it comes from: each
    ``why`` explanation of a hidden grading call, and each line of an answer cell's solution
    (``answer_q1 = "b"``, ``why_q1 = "..."``)."""
    secrets = {}
    for path in source_notebooks():
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            for call in grade_calls(hidden_part(cell.source)):
                secrets[keyword(call, "why")] = f"{path.parent.name}: why of {ast.unparse(call.args[1])}"
            for line in _regions(cell.source, "BEGIN SOLUTION", "END SOLUTION"):
                if ANSWER_LINE.match(line):
                    secrets[line] = f"{path.parent.name}: answer line"
    return secrets


def readable_text(path: Path) -> str:
    """What a reader of a file can see: a notebook's sources and outputs, a page's text (and its
    markup), any other file's bytes as text."""
    raw = path.read_bytes().decode("utf-8", errors="ignore")
    if path.suffix == ".ipynb":
        try:
            nb = nbformat.reads(raw, as_version=4)
        except Exception:  # noqa: BLE001 - not a notebook after all: its bytes are what there is
            return raw
        parts = [cell.source for cell in nb.cells]
        parts += [str(output) for cell in nb.cells for output in cell.get("outputs", [])]
        return raw + "\n".join(parts)
    if path.suffix in (".html", ".htm"):
        return raw + html_text(raw)
    return raw


def secrets_in(root: Path, secrets: dict[str, str]) -> list[str]:
    """Which secrets some file under ``root`` (or ``root`` itself) shows, as 'file: what'."""
    found = []
    for path in [root] if root.is_file() else sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            text = readable_text(path)
            found += [f"{path}: {where}" for secret, where in secrets.items() if secret in text]
    return found


def question_explanations(assignment: str) -> dict[str, str]:
    """The explanation of each graded question of a source notebook, by its label ("Question 1")."""
    found = {}
    for cell in source_notebook(assignment).cells:
        if cell.cell_type == "code":
            for call in grade_calls(hidden_part(cell.source)):
                found[ast.literal_eval(call.args[1])] = keyword(call, "why")
    return found
