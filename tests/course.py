"""Helpers the tests share: the repository's notebooks and submissions built from them."""
from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
SUBMISSIONS = REPO / "tests" / "submissions"
ASSIGNMENTS = ["02_batch_norm"]


def source_notebook(assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(REPO / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)


def release_notebook(assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(REPO / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_solution_cell(cell) -> bool:
    return bool(nbgrader_meta(cell).get("solution"))


def is_test_cell(cell) -> bool:
    meta = nbgrader_meta(cell)
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


def setup_source(assignment: str) -> str:
    """The locked set-up cell (imports) of an assignment."""
    return next(c.source for c in source_notebook(assignment).cells if nbgrader_meta(c).get("grade_id") == "setup")


def solution_code(assignment: str) -> str:
    """Every solution cell of the source notebook, joined: the reference submission."""
    return "\n\n".join(c.source for c in source_notebook(assignment).cells if is_solution_cell(c))


def submission_files(assignment: str, kind: str) -> list[Path]:
    """Catalogue files of one kind ('correct', 'bug', 'cheat') for an assignment."""
    folder = SUBMISSIONS / assignment.split("_", 1)[1]
    return sorted(folder.glob(f"{kind}_*.py"))


def notebook_with_code(assignment: str, code: str, extra_cells: list[str] = ()) -> nbformat.NotebookNode:
    """The released notebook as a student would hand it in with ``code`` as their answer.

    ``code`` goes into the first solution cell; later solution cells only point back to it.
    ``extra_cells`` become student-added code cells right after the first solution cell.
    """
    nb = copy.deepcopy(release_notebook(assignment))
    first = True
    cells = []
    for cell in nb.cells:
        if is_solution_cell(cell):
            cell.source = code if first else "# (written in the first answer cell)"
            cells.append(cell)
            if first:
                cells.extend(nbformat.v4.new_code_cell(src) for src in extra_cells)
            first = False
        else:
            cells.append(cell)
    nb.cells = cells
    return nb


def load_namespace(assignment: str, code: str) -> dict:
    """Run the set-up cell and ``code`` as a notebook would, and return the namespace."""
    namespace: dict = {"__name__": "__main__"}
    exec(compile(setup_source(assignment), "<setup>", "exec"), namespace)
    exec(compile(code, "<submission>", "exec"), namespace)
    return namespace


def tool_env() -> dict[str, str]:
    """The environment for nbgrader and jupyter-book subprocesses: this interpreter's bin first
    (nbgrader runs `alembic` from PATH; kernels must use the same environment)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env
