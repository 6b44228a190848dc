"""nbgrader feedback preprocessors: test cells show the grader's verdict and the check's message.

A traceback repeats the failing line of the test cell, and with it hidden test source; the
message of :class:`autograder.CheckFailed` already says what differs and why. The page itself
(autograder/grading/templates/course_feedback) names each part and shows its verdict
(:class:`GradedVerdicts`).
"""
from __future__ import annotations

import ast
import re

from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor
from traitlets import HasTraits, List


class Configurable(HasTraits):
    """nbconvert's exporters configure ``display_data_priority`` for every preprocessor, and
    nbgrader's base class declares it without ``config=True``: generate_feedback then warns
    "Config option `display_data_priority` not recognized" once per preprocessor. nbgrader's own
    GetGrades declares it configurable; so do ours."""

    display_data_priority = List(['text/html', 'application/pdf', 'text/latex', 'image/svg+xml', 'image/png',
                                  'image/jpeg', 'text/plain'], config=True)  # GetGrades's


class HideTracebacks(Configurable, NbGraderPreprocessor):
    """Replace the traceback of every error in a grade cell by ``ename: evalue``."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and utils.is_grade(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources


class ClearHiddenTestsInTestCells(Configurable, ClearHiddenTests):
    """nbgrader's ``ClearHiddenTests``, applied to test cells only.

    nbgrader looks for the hidden-test markers in every cell and gives up on the whole notebook
    when a student's own cell mentions one without the other (a student who searches for them,
    say): that student would get no feedback at all. Only test cells hold hidden tests.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
            return super().preprocess_cell(cell, resources, index)
        return cell, resources


# ------------------------------------------------------------------ graded feedback says the verdict

PART_HEADING = re.compile(r"^#{1,6}\s*(Part\s+(\d+)\s*:.*?)\s*(?:\([\d.]+\s+points?\))?\s*$", re.M)
QUESTION_LABEL = re.compile(r"""questions\.check_\w+\(\s*\w+\s*,\s*["'](Question \d+)["']""")


def part_titles(nb, given_markdown: set[str]) -> dict[str, str]:
    """grade id -> the name of its part, for every test cell: "Question 2" for a question's (its
    visible check names it), else the first heading "Part N: its name" of the part whose heading
    came last before the cell ("### Part 1: the test" belongs to "## Part 1: `GhostBatchNorm`").
    Headings are read only from the release's locked markdown (``given_markdown``), never from a
    cell the student wrote."""
    first: dict[str, str] = {}
    current = None
    titles = {}
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source in given_markdown:
            for match in PART_HEADING.finditer(cell.source):
                current = match.group(2)
                first.setdefault(current, match.group(1).replace("`", "").replace("*", ""))
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            question = QUESTION_LABEL.search(cell.source)
            titles[meta["grade_id"]] = (question.group(1) if question else
                                        first[current] if current is not None else f"Test cell {meta['grade_id']}")
    return titles


def printed_constants(source: str) -> set[str]:
    """The lines a cell prints with ``print("a constant")``: in a test cell, what it says in the
    live notebook ("Part 1: visible checks passed.")."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {call.args[0].value for call in ast.walk(tree)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print"
            and len(call.args) == 1 and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)}


def verdict_word(score: float, points: float, question: bool) -> str:
    if points and score >= points:
        return "correct" if question else "passed"
    if score > 0:
        return "partly right"
    return "wrong" if question else "failed"


class GradedVerdicts(Configurable, NbGraderPreprocessor):
    """What the grader concluded, per test cell, for the feedback page (after ``GetGrades``).

    Each test cell gets a verdict in ``resources["verdicts"][grade_id]``: its part's name, a word
    ("passed", "failed", "correct", "wrong", "partly right"), its score and points, and the
    message of the check that failed. The cell's own outputs lose what the live notebook said
    before grading (its constant ``print`` lines: "Part 1: visible checks passed.", "Question 1:
    answer recorded ...") and the error, whose message the verdict now carries; what the checks
    printed besides (notes, a justification) stays.
    """

    def given_markdown(self, resources) -> set[str]:
        from autograder.grading.scrub import ScrubActiveContent

        return ScrubActiveContent().given_markdown(resources)

    def preprocess(self, nb, resources):
        titles = part_titles(nb, self.given_markdown(resources))
        verdicts = resources.setdefault("verdicts", {})
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution") or "score" not in meta:
                continue
            grade_id = meta["grade_id"]
            title = titles.get(grade_id, f"Test cell {grade_id}")
            score, points = float(meta.get("score") or 0), float(meta.get("points") or 0)
            errors = [o for o in cell.outputs if o.get("output_type") == "error"]
            live = printed_constants(cell.source)
            kept = []
            for output in cell.outputs:
                if output.get("output_type") == "error":
                    continue
                if output.get("output_type") == "stream":
                    lines = [line for line in output.get("text", "").splitlines(keepends=True) if line.rstrip("\n") not in live]
                    if not lines:
                        continue
                    output["text"] = "".join(lines)
                kept.append(output)
            cell.outputs = kept
            message = str(errors[-1].get("evalue", "")) if errors and score < points else ""
            if message.startswith(f"{title}: "):  # "Question 1: your answer ...": named once
                message = message[len(title) + 2:]
            verdicts[grade_id] = {
                "title": title,
                "word": verdict_word(score, points, title.startswith("Question")),
                "score": score,
                "points": points,
                "message": message,
            }
        return nb, resources
