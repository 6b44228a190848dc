"""What a grading worker returns is checked before it reaches the course.

A batch comes back as data: each student's autograded notebooks and the scores the private
course computed from them.  The grade command keeps the notebooks only after the scrub
(:mod:`autograder.grading.scrub`), then computes every score again from them, with nbgrader's
own rule (``nbgrader.utils.determine_grade``: an error or stderr output scores 0, a number
returned by the test cell is its partial credit, anything else full marks), against the
gradebook's cells, points and checksums, never the notebook's: a cell the gradebook does not
know scores nothing, and no cell scores below 0 or above its points.
"""
from __future__ import annotations

import copy
import datetime
import math
from pathlib import Path

import nbformat

from autograder.grading.gradebook import NotebookGrades, StudentGrades, open_gradebook
from autograder.grading.report import NBGRADER_FILES
from autograder.grading.scrub import scrub_notebook


def scrubbed_files(files: dict[str, bytes], given: dict[str, set[str]]) -> dict[str, bytes]:
    """The assignment's notebooks among the returned files, each scrubbed (an unreadable one is
    dropped), and nbgrader's small files beside them; nothing else is kept (the formgrader
    serves what lies beside a notebook).  ``given``: each notebook's locked markdown."""
    kept = {}
    for name, content in files.items():
        if name in NBGRADER_FILES and len(content) < 4096:
            kept[name] = content
        if name not in given:
            continue
        try:
            nb = nbformat.reads(content.decode("utf-8"), as_version=4)
        except Exception:  # noqa: BLE001 - not a notebook: nothing of it is kept
            continue
        kept[name] = nbformat.writes(scrub_notebook(nb, given.get(name, set()))).encode("utf-8")
    return kept


def _score(cell, name: str, points: float, solution: bool, checksum: str | None) -> float | None:
    """nbgrader's score of one returned cell, with the gradebook's name, points, kind and checksum."""
    from nbgrader.utils import determine_grade

    cell = copy.deepcopy(cell)
    cell.metadata["nbgrader"] = {"grade": True, "solution": solution, "points": points,
                                 "grade_id": name, **({"checksum": checksum} if checksum else {})}
    try:
        score, _ = determine_grade(cell)
    except (ValueError, TypeError, KeyError):
        return 0.0
    if score is None:
        return None
    score = float(score)
    return min(max(score, 0.0), points) if math.isfinite(score) else 0.0


def checked_result(course: Path, assignment: str, grades: StudentGrades,
                   files: dict[str, bytes]) -> tuple[StudentGrades, dict[str, bytes]]:
    """The student's grades computed again from their scrubbed notebooks; the files to keep."""
    checked = StudentGrades(grades.timestamp if _is_time(grades.timestamp) else None)
    with open_gradebook(course) as gb:
        master = gb.find_assignment(assignment)
        files = scrubbed_files(files, {f"{n.name}.ipynb": {c.source for c in n.source_cells
                                                           if c.locked and c.cell_type == "markdown"}
                                       for n in master.notebooks})
        for notebook in master.notebooks:
            name = f"{notebook.name}.ipynb"
            cells = _cells_by_id(files.get(name))
            solutions = {c.name for c in notebook.solution_cells}
            checksums = {c.name: c.checksum for c in notebook.source_cells}
            returned = grades.notebooks.get(notebook.name, NotebookGrades())
            result = NotebookGrades()
            for cell in notebook.grade_cells:
                found = cells.get(cell.name)
                if found is None or found.cell_type != cell.cell_type:
                    score = 0.0 if cell.cell_type == "code" and cell.name not in solutions else None
                else:
                    score = _score(found, cell.name, float(cell.max_score), cell.name in solutions,
                                   checksums.get(cell.name))
                manual = bool(returned.grades.get(cell.name, (None, False))[1]) or score is None
                result.grades[cell.name] = (score, manual)
            for cell in [*notebook.solution_cells, *notebook.task_cells]:
                comment = returned.comments.get(cell.name)
                result.comments[cell.name] = comment if comment == "No response." else None
            penalty = returned.late_submission_penalty
            total = sum(score or 0.0 for score, _ in result.grades.values())
            if isinstance(penalty, (int, float)) and math.isfinite(penalty):
                result.late_submission_penalty = min(max(float(penalty), 0.0), total)
            checked.notebooks[notebook.name] = result
    return checked, files


def _cells_by_id(content: bytes | None) -> dict:
    if content is None:
        return {}
    nb = nbformat.reads(content.decode("utf-8"), as_version=4)
    cells = {}
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if isinstance(grade_id, str):
            cells.setdefault(grade_id, cell)  # a copied cell never scores twice
    return cells


def _is_time(value) -> bool:
    return isinstance(value, datetime.datetime)
