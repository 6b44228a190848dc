"""What an instructor needs to know about one graded submission.

Scores come from the course's gradebook.  The submitted notebook is compared with the gradebook's
copy of the assignment (test cells edited, deleted or with changed nbgrader metadata; nbgrader
restores them before grading) and the autograded notebook is searched for the grader's own
verdicts: tampering caught by the clean re-check or in the kernel, and torch's own normalization
used where the student was to write it.

Everything a student controls (source lines, file and notebook names, student ids, what their
notebooks hold) reaches the instructor's terminal through :func:`printable`, so that no escape
sequence, bidi override or undecodable byte of theirs is printed as such.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.grading.scan import read_notebook, scan_notebook

TAMPERING_MARKERS = ("The notebook has replaced",)
FORBIDDEN_MARKER = "This part earns no points"
UNCHECKABLE_MARKER = "StudentCodeFailed"
UNSANDBOXED = "[UNSANDBOXED]"
MAX_NOTES = 30  # per student, before the verdicts of the autograded notebook
SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text) -> str:
    """``text`` as it is safe to print on a terminal: control and format characters (escape
    sequences, newlines, tabs, DEL, C1 controls, bidi overrides) and the bytes of a file name
    that were not UTF-8 (os.fsdecode's surrogates) are shown as escapes such as ``\\x1b``."""
    text = str(text)
    return text if text.isprintable() else "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(char: str) -> str:
    if char in SHORT_ESCAPES:
        return SHORT_ESCAPES[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for an undecodable byte: show the byte
        code -= 0xDC00
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _is_text(name: str) -> bool:
    """Whether a file name is text (not bytes os.fsdecode could not decode), as the gradebook needs."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass
class Outcome:
    student: str
    score: float | None  # None: not graded
    max_score: float
    reason: str | None = None  # why it was not graded
    notes: list[str] = field(default_factory=list)  # why it needs attention although graded
    sandboxed: bool = True
    parts: dict[str, float] = field(default_factory=dict)  # test cell (grade id) -> points
    hints: list[tuple[str, str]] = field(default_factory=list)  # (test cell, "Likely cause" the check named)

    @property
    def needs_attention(self) -> bool:
        return self.score is None or bool(self.notes)

    def line(self) -> str:
        label = "" if self.sandboxed else f"{UNSANDBOXED} "
        if self.score is None:
            return f"{label}{printable(self.student)}: NOT GRADED: {printable(self.reason)}"
        flag = "  (needs attention)" if self.notes else ""
        return f"{label}{printable(self.student)}: {self.score:g}/{self.max_score:g}{flag}"


def _gradebook(course: Path):
    from autograder.grading.gradebook import open_gradebook

    return open_gradebook(course)


def _nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _compare_with_release(notebook: Path, gb, assignment: str) -> list[str]:
    """Locked cells the student changed: nbgrader restores them, the instructor should know."""
    from nbgrader.api import MissingEntry

    notes = []
    try:
        nb = read_notebook(notebook)
    except Exception as error:  # noqa: BLE001
        return [f"{printable(notebook.name)} is not a readable notebook ({type(error).__name__})"]
    if not _is_text(notebook.name):
        return [f"{printable(notebook.name)} is not part of the assignment (its name is not UTF-8)"]
    try:
        master = gb.find_notebook(notebook.stem, assignment)
    except MissingEntry:
        return [f"{printable(notebook.name)} is not part of the assignment"]
    cells = {_nbgrader_meta(c).get("grade_id"): c for c in nb.cells if _nbgrader_meta(c).get("grade_id")}
    for grade_cell in master.grade_cells:
        if grade_cell.cell_type != "code" or not grade_cell.max_score:
            continue
        name = grade_cell.name
        submitted = cells.get(name)
        if submitted is None:
            notes.append(f"test cell {name} was deleted (it scores 0)")
            continue
        meta = _nbgrader_meta(submitted)
        if not meta.get("grade") or meta.get("solution") or float(meta.get("points", 0)) != grade_cell.max_score:
            notes.append(f"test cell {name}: its nbgrader metadata was changed")
        try:
            source = gb.find_source_cell(name, notebook.stem, assignment).source
        except MissingEntry:
            continue
        if submitted.source.strip() != _without_hidden_tests(source).strip():
            notes.append(f"test cell {name} was edited (nbgrader restored the original)")
    return notes


def _without_hidden_tests(source: str) -> str:
    """The test cell as released: nbgrader's gradebook keeps it with its hidden tests."""
    return re.sub(r"\n?[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*", "", source, flags=re.S)


def _given_sources(gb, assignment: str, notebook: str) -> set[str] | None:
    """The stripped sources of the release's locked cells (set-up, given code, test cells as
    released), from the gradebook: what the student did not write, whatever the metadata says."""
    from nbgrader.api import MissingEntry

    if not _is_text(notebook):
        return None
    try:
        cells = gb.find_notebook(notebook, assignment).source_cells
    except MissingEntry:
        return None
    return {_without_hidden_tests(c.source).strip() for c in cells if c.locked and c.cell_type == "code"}


# What nbgrader's exchange puts beside the notebooks: the submission's time, and the secret that
# names its feedback file (`nbgrader submit` writes it; release_feedback and fetch_feedback read it).
NBGRADER_FILES = {"timestamp.txt", "submission_secret.txt"}


def _extra_files(folder: Path, notebooks: set[str]) -> list[str]:
    """Files beside the notebooks: they never reach the sandbox, but a helper module there is worth a look."""
    extra = []
    for path in sorted(folder.rglob("*")) if folder.is_dir() and not folder.is_symlink() else []:
        name = path.relative_to(folder)
        if path.is_dir() and not path.is_symlink() or str(name) in NBGRADER_FILES:
            continue
        if path.suffix == ".ipynb" and path.stem in notebooks and len(name.parts) == 1:
            continue
        kind = "a link" if path.is_symlink() else "a file"
        extra.append(f"needs review: {kind} in the submission besides the notebook: {printable(name)} "
                     "(not given to the kernel)")
    return extra


def _verdicts(autograded: Path, known: set[str] | None = None) -> tuple[list[str], list[tuple[str, str]]]:
    """The grader's verdicts in the autograded notebooks: notes for the report, and the likely
    causes the checks named, as (test cell, cause).  Causes come only from the test cells the
    gradebook knows (``known``): their outputs were written by the grader, never by the kernel.
    Errors of the student's own cells become notes: interrupted, out of memory, syntax errors."""
    notes, hints = [], []
    for path in sorted(autograded.glob("*.ipynb")):
        try:
            nb = read_notebook(path)
        except Exception as error:  # noqa: BLE001 - the other notebooks' verdicts still count
            notes.append(f"the autograded {printable(path.name)} is not readable ({type(error).__name__}); look at it")
            continue
        for number, cell in enumerate(nb.cells):  # numbered as the scan numbers them (from 0)
            meta = _nbgrader_meta(cell)
            if cell.get("cell_type") != "code":
                continue
            if not meta.get("grade") or meta.get("solution"):
                notes += _execution_notes(number, cell)
                continue  # only test cells carry the grader's verdicts; other outputs are the student's
            grade_id = printable(meta.get("grade_id", "?"))
            text = "\n".join(
                str(o.get("evalue", "")) + str(o.get("ename", "")) for o in cell.get("outputs", []) if o.get("output_type") == "error"
            )
            if any(marker in text for marker in TAMPERING_MARKERS):
                notes.append(f"{grade_id}: tampering with torch, numpy or autograder detected; no points")
            elif FORBIDDEN_MARKER in text:
                notes.append(f"{grade_id}: uses torch's own normalization; no points")
            elif UNCHECKABLE_MARKER in text:
                notes.append(f"{grade_id}: the notebook's process could not be checked (it stopped answering "
                             "or broke the grader's side); no points")
            if known is not None and meta.get("grade_id") in known:
                hints += [(meta["grade_id"], cause) for cause in likely_causes(cell)]
    return notes, hints


LIKELY_CAUSE = "Likely cause: "
INTERRUPTED = ("KeyboardInterrupt", "CellTimeoutError")
SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")
OUTPUT_LIMIT = "[output limit:"


def likely_causes(cell) -> list[str]:
    """The "Likely cause" lines of a test cell's failure (the check's message names at most one)."""
    causes = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error" and output.get("ename") == "CheckFailed":
            for line in str(output.get("evalue", "")).splitlines():
                if line.startswith(LIKELY_CAUSE) and len(line) > len(LIKELY_CAUSE):
                    causes.append(line[len(LIKELY_CAUSE):].strip()[:500])
    return causes


def _execution_notes(number: int, cell) -> list[str]:
    """What happened to one of the student's cells that an instructor should know, although
    the notebook was graded: a stop at the time or output limit, memory, a syntax error.  (The
    kernel wrote these outputs: a student can fake one about their own notebook, no more.)"""
    outputs = cell.get("outputs", [])
    flooded = any(o.get("output_type") == "stream" and OUTPUT_LIMIT in str(o.get("text", "")) for o in outputs)
    names = [str(o.get("ename", "")) for o in outputs if o.get("output_type") == "error"]
    notes = []
    if flooded:
        notes.append(f"cell {number} printed more than the output limit; the rest was dropped and the cell stopped")
    elif any(name in INTERRUPTED for name in names):
        notes.append(f"cell {number} was interrupted at the cell time limit (or raised KeyboardInterrupt itself)")
    if "MemoryError" in names:
        notes.append(f"cell {number} ran out of memory (MemoryError at the sandbox's limit)")
    for output in outputs:
        if output.get("output_type") == "error" and output.get("ename") in SYNTAX_ERRORS:
            notes.append(f"cell {number} has a {printable(output['ename'])}: "
                         f"{printable(str(output.get('evalue', ''))[:200])}")
            break
    return notes


def _parts(gb, assignment: str, student: str) -> dict[str, float]:
    """Points per test cell (auto or manual, as nbgrader's Grade.score), every notebook of the assignment."""
    parts = {}
    for notebook in gb.find_submission(assignment, student).notebooks:
        for grade in notebook.grades:
            if grade.max_score:
                parts[grade.name] = float(grade.score or 0.0)
    return parts


def part_names(release: Path) -> dict[str, str]:
    """Test cell (grade id) -> its part's name ("Part 3: running statistics and eval mode",
    "Question 2"), read from the release's own notebooks in ``release``; {} where they cannot be
    read."""
    from autograder.grading.feedback import part_titles

    names: dict[str, str] = {}
    for path in sorted(release.glob("*.ipynb")):
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception:  # noqa: BLE001 - the report keeps the grade ids
            continue
        names.update(part_titles(nb, {c.source for c in nb.cells if c.cell_type == "markdown"}))
    return names


def part_maxima(course: Path, assignment: str) -> dict[str, float]:
    """Test cell (grade id) -> its points, in the assignment's order."""
    with _gradebook(course) as gb:
        return {cell.name: float(cell.max_score) for notebook in gb.find_assignment(assignment).notebooks
                for cell in notebook.grade_cells if cell.max_score}


def inspect_submission(course: Path, assignment: str, student: str, reason: str | None = None,
                       sandboxed: bool = True) -> Outcome:
    from nbgrader.api import MissingEntry

    with _gradebook(course) as gb:
        maximum = gb.find_assignment(assignment).max_score
        notes = []
        folder = course / "submitted" / student / assignment
        notebooks = {nb.name for nb in gb.find_assignment(assignment).notebooks}
        for notebook in sorted(folder.glob("*.ipynb")):  # the assignment's own (extra ones are noted below)
            if notebook.stem in notebooks and notebook.is_file() and not notebook.is_symlink() \
                    and notebook.stat().st_size < 64 << 20:
                notes += _compare_with_release(notebook, gb, assignment)
                given = _given_sources(gb, assignment, notebook.stem)
                notes += [f"needs review: {printable(f.describe())}" for f in scan_notebook(notebook, given)]
        notes += _extra_files(folder, notebooks)
        if len(notes) > MAX_NOTES:
            notes = notes[:MAX_NOTES] + [f"... and {len(notes) - MAX_NOTES} more notes: look at the submission"]
        if reason is not None:
            return Outcome(student, None, maximum, reason, notes, sandboxed)
        try:
            score = gb.find_submission(assignment, student).score
            parts = _parts(gb, assignment, student)
        except MissingEntry:
            return Outcome(student, None, maximum, "no grade in the gradebook", notes, sandboxed)
        known = {cell.name for nb in gb.find_assignment(assignment).notebooks for cell in nb.grade_cells}
    verdicts, hints = _verdicts(course / "autograded" / student / assignment, known)
    return Outcome(student, score, maximum, None, notes + verdicts, sandboxed, parts, hints)


def print_report(outcomes: list[Outcome], out=sys.stdout) -> None:
    """The class's report: every line on its own, so that one the stream refuses loses no other."""
    if any(not o.sandboxed for o in outcomes):
        _say(f"\n{UNSANDBOXED} These submissions ran WITHOUT the sandbox (--unsafe-no-sandbox): their code "
             "could read and change the course, its gradebook and other submissions.", out)
    graded = [o for o in outcomes if o.score is not None]
    _say(f"\nGraded {len(graded)} of {len(outcomes)} submissions.", out)
    if graded:
        mean = sum(o.score for o in graded) / len(graded)
        _say(f"Mean score {mean:.2f} of {graded[0].max_score:g}.", out)
    attention = [o for o in outcomes if o.needs_attention]
    if not attention:
        _say("No submission needs attention.", out)
        return
    _say(f"\n{len(attention)} submission(s) need attention:", out)
    for o in attention:
        _say(f"  {o.line()}", out)
        for note in o.notes:
            _say(f"      - {printable(note)}", out)


def _say(line: str, out) -> None:
    """Print one line of the report; one the stream cannot encode is printed in ASCII, with escapes."""
    for text in (line, line.encode("ascii", "backslashreplace").decode("ascii")):
        try:
            print(text, file=out)
            return
        except Exception:  # noqa: BLE001 - this line is lost, the ones after it are not
            continue
