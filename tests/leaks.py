"""What must never reach students: solution code and hidden tests."""
from __future__ import annotations

import html
import re

from course import ASSIGNMENTS, source_notebook

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


def html_text(page: str) -> str:
    """The text a reader sees: tags removed (code is split into highlighting spans), entities decoded."""
    page = re.sub(r"<(style|script)\b.*?</\1>", "", page, flags=re.S | re.I)
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def leaked(text: str, kinds=("SOLUTION", "HIDDEN TESTS")) -> list[str]:
    markers = [m for m in MARKERS if any(kind in m for kind in kinds)]
    return [m for m in markers if m in text] + sorted(line for line in secret_lines(kinds) if line in text)
