"""The course's gradebook, wherever it lives: SQLite (the default) or any database SQLAlchemy
reaches, such as PostgreSQL (``c.CourseDirectory.db_url = "postgresql://..."``).

Only the grading driver writes it.  Grading itself happens in private courses with a gradebook of
their own, built from :func:`assignment_template`: the assignment's cells and nothing about any
student, so a worker on another machine learns no one's grades.  What a private course computed
comes back as plain data (:class:`StudentGrades`) and :func:`merge` writes it in one transaction.
"""
from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class NotebookGrades:
    """What autograde computed for one notebook of one student."""

    late_submission_penalty: float | None = None
    grades: dict[str, tuple[float | None, bool]] = field(default_factory=dict)  # name -> (auto_score, needs_manual)
    comments: dict[str, str | None] = field(default_factory=dict)  # name -> auto_comment


@dataclass
class StudentGrades:
    """What autograde computed for one student's submission of one assignment."""

    timestamp: object = None  # datetime or None
    notebooks: dict[str, NotebookGrades] = field(default_factory=dict)

    def total(self) -> float:
        """The automatic points, late penalties deducted (manual scores are the gradebook's)."""
        return sum(sum(score or 0.0 for score, _ in nb.grades.values()) - (nb.late_submission_penalty or 0.0)
                   for nb in self.notebooks.values())


def course_settings(course: Path):
    """nbgrader's CourseDirectory as the course's ``nbgrader_config.py`` sets it up."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config, PyFileConfigLoader

    config = Config()
    if (course / "nbgrader_config.py").is_file():
        config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    directory = CourseDirectory(config=config)
    if "root" not in config.get("CourseDirectory", {}):
        directory.root = str(course)  # as when nbgrader runs in the course
    return directory


def db_url(course: Path) -> str:
    """The gradebook's URL; a relative SQLite path is relative to the course, as when nbgrader runs there."""
    url = course_settings(course).db_url
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url[len(prefix):].startswith("/") and url[len(prefix):] != ":memory:":
        url = prefix + str(course / url[len(prefix):])
    return url


def describe(url: str) -> str:
    """The URL without a password, for messages."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def open_gradebook(course: Path):
    from nbgrader.api import Gradebook

    return Gradebook(db_url(course), course_id=course_settings(course).course_id or "default_course")


def has_assignment(course: Path, assignment: str) -> bool:
    """Whether the gradebook records ``assignment`` (``generate_assignment`` did)."""
    from nbgrader.api import MissingEntry

    url = db_url(course)
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).exists():
        return False
    with open_gradebook(course) as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            return False
    return True


def max_score(course: Path, assignment: str) -> float:
    with open_gradebook(course) as gb:
        return gb.find_assignment(assignment).max_score


def assignment_template(course: Path, assignment: str) -> bytes:
    """A SQLite gradebook holding only ``assignment``'s structure (notebooks, grade, solution, task
    and source cells), as bytes: what ``nbgrader autograde`` needs in a private course."""
    from nbgrader.api import Gradebook

    with tempfile.TemporaryDirectory(prefix="template-") as folder, _interpreter_on_path():
        path = Path(folder) / "gradebook.db"
        with open_gradebook(course) as src, Gradebook(f"sqlite:///{path}", course_id=src.course_id) as dst:
            master = src.find_assignment(assignment)
            dst.add_assignment(assignment, duedate=master.duedate)
            for notebook in master.notebooks:
                dst.add_notebook(notebook.name, assignment, kernelspec=notebook.kernelspec)
                for cell in notebook.grade_cells:
                    dst.add_grade_cell(cell.name, notebook.name, assignment, max_score=cell.max_score, cell_type=cell.cell_type)
                for cell in notebook.solution_cells:
                    dst.add_solution_cell(cell.name, notebook.name, assignment)
                for cell in notebook.task_cells:
                    dst.add_task_cell(cell.name, notebook.name, assignment, max_score=cell.max_score, cell_type=cell.cell_type)
                for cell in notebook.source_cells:
                    dst.add_source_cell(cell.name, notebook.name, assignment, cell_type=cell.cell_type,
                                        locked=cell.locked, source=cell.source, checksum=cell.checksum)
        # One self-contained file (no write-ahead log beside it).
        with sqlite3.connect(path) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return path.read_bytes()


@contextmanager
def _interpreter_on_path():
    """nbgrader runs ``alembic`` from PATH when it creates a gradebook: this interpreter's copy."""
    before = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), before])
    try:
        yield
    finally:
        os.environ["PATH"] = before


def extensions(course: Path, assignment: str, students: list[str]) -> dict:
    """The extensions the instructor granted (student -> timedelta), for the late penalty."""
    from nbgrader.api import MissingEntry

    found = {}
    with open_gradebook(course) as gb:
        for student in students:
            try:
                extension = gb.find_submission(assignment, student).extension
            except MissingEntry:
                continue
            if extension is not None:
                found[student] = extension
    return found


def grant_extensions(url: str, assignment: str, granted: dict) -> None:
    """Record extensions in a private course's gradebook before autograde computes late penalties."""
    from nbgrader.api import Gradebook

    with Gradebook(url) as gb:
        for student, extension in granted.items():
            gb.update_or_create_student(student)
            gb.update_or_create_submission(assignment, student, extension=extension)


def read_grades(url: str, assignment: str, student: str) -> StudentGrades | None:
    """What a private course's gradebook holds for one student, or None if it was not graded."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(url) as gb:
        try:
            graded = gb.find_submission(assignment, student)
        except MissingEntry:
            return None
        result = StudentGrades(graded.timestamp)
        for notebook in graded.notebooks:
            result.notebooks[notebook.name] = NotebookGrades(
                notebook.late_submission_penalty,
                {g.name: (g.auto_score, bool(g.needs_manual_grade)) for g in notebook.grades},
                {c.name: c.auto_comment for c in notebook.comments})
        return result


def merge(course: Path, assignment: str, student: str, grades: StudentGrades) -> None:
    """Write one student's automatic scores and comments into the course's gradebook, in one transaction.

    Only what autograde computed crosses: automatic scores and comments, the late penalty and the
    timestamp.  What the instructor set is left as it is: manual scores, extra credit, the
    extension, flags on notebooks, the names on the roster; a cell with a manual score keeps
    needing review, as nbgrader's own SaveAutoGrades marks it.  On PostgreSQL two grade commands may add
    the same student at the same moment: the loser's transaction is rolled back and tried again.
    """
    _in_transaction(course, lambda gb: _write(gb, assignment, student, grades))


def register(course: Path, student: str) -> None:
    """Put a student whose notebook could not be graded on the roster (export then lists them)."""
    _in_transaction(course, lambda gb: _add_student(gb, student))


def _in_transaction(course: Path, change, attempts: int = 5) -> None:
    from nbgrader.api import InvalidEntry
    from sqlalchemy.exc import DBAPIError

    for attempt in range(attempts):
        try:
            with open_gradebook(course) as gb:
                try:
                    change(gb)
                    gb.db.commit()
                    return
                except BaseException:
                    gb.db.rollback()
                    raise
        except (DBAPIError, InvalidEntry):  # a key taken by a concurrent writer, a serialization failure
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))


def _add_student(gb, student: str) -> None:
    from nbgrader.api import Student

    if gb.db.query(Student).filter(Student.id == student).one_or_none() is None:
        gb.db.add(Student(id=student))
        gb.db.flush()


def _write(gb, assignment: str, student: str, grades: StudentGrades) -> None:
    from nbgrader.api import MissingEntry

    _add_student(gb, student)
    try:
        submission = gb.find_submission(assignment, student)
    except MissingEntry:
        submission = _add_submission(gb, assignment, student)
    submission.timestamp = grades.timestamp
    for name, notebook in grades.notebooks.items():
        copy = gb.find_submission_notebook(name, assignment, student)
        copy.late_submission_penalty = notebook.late_submission_penalty
        for grade_name, (score, manual) in notebook.grades.items():
            mine = gb.find_grade(grade_name, name, assignment, student)
            mine.auto_score = score
            mine.needs_manual_grade = manual or mine.manual_score is not None
        for comment_name, text in notebook.comments.items():
            gb.find_comment(comment_name, name, assignment, student).auto_comment = text


def _add_submission(gb, assignment: str, student: str):
    """A submission with a grade or comment row for every cell, as nbgrader's ``add_submission``
    builds it, but without its commit: the merge stays one transaction."""
    from nbgrader.api import Comment, Grade, SubmittedAssignment, SubmittedNotebook

    with gb.db.no_autoflush:
        submission = SubmittedAssignment(assignment=gb.find_assignment(assignment), student=gb.find_student(student))
        for notebook in submission.assignment.notebooks:
            copy = SubmittedNotebook(notebook=notebook, assignment=submission)
            for cell in notebook.grade_cells:
                Grade(cell_id=cell.id, notebook=copy)
            for cell in notebook.solution_cells:
                Comment(cell_id=cell.id, notebook=copy)
            for cell in notebook.task_cells:
                Comment(cell_id=cell.id, notebook=copy)
                Grade(cell_id=cell.id, notebook=copy)
    gb.db.add(submission)
    gb.db.flush()
    return submission
