"""nbgrader feedback preprocessor: test cells show the check's message, not a traceback.

A traceback repeats the failing line of the test cell, and with it hidden test source; the
message of :class:`autograder.CheckFailed` already says what differs and why.
"""
from __future__ import annotations

from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor


class HideTracebacks(NbGraderPreprocessor):
    """Replace the traceback of every error in a grade cell by ``ename: evalue``."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and utils.is_grade(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources


class ClearHiddenTestsInTestCells(ClearHiddenTests):
    """nbgrader's ``ClearHiddenTests``, applied to test cells only.

    nbgrader looks for the hidden-test markers in every cell and gives up on the whole notebook
    when a student's own cell mentions one without the other (a student who searches for them,
    say): that student would get no feedback at all. Only test cells hold hidden tests.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
            return super().preprocess_cell(cell, resources, index)
        return cell, resources
