"""``nbgrader export`` plugins that never turn "not graded" into a zero.

* :class:`StatusCsvExport` (the course's default, ``nbgrader_config.py``): nbgrader's own CSV
  (one row per assignment and student) with a ``status`` column, and the score columns left
  empty for a student the grade command could not grade.
* :class:`PartsCsvExport` (``nbgrader export --exporter autograder.grading.export.PartsCsvExport``):
  one row per student, one column per part (test cell) of each assignment, its total (late
  penalty deducted, as nbgrader's ``score``) and its status.

``status`` is ``graded``, ``NOT GRADED: <why>`` or ``not submitted``.  Whether a student was
graded comes from the grade command's reports in the course (:func:`autograder.grading.record.latest_statuses`):
the gradebook cannot say it.
"""
from __future__ import annotations

import csv
from pathlib import Path

from nbgrader.api import MissingEntry
from nbgrader.plugins import ExportPlugin

from autograder.grading.record import GRADED, NOT_GRADED, latest_statuses

NOT_SUBMITTED = "not submitted"


def _course(plugin) -> Path:
    from nbgrader.coursedir import CourseDirectory

    return Path(CourseDirectory(config=plugin.config).root)


def _wanted(plugin, gradebook):
    students = [str(s) for s in plugin.student]
    assignments = [str(a) for a in plugin.assignment]
    return ([a for a in gradebook.assignments if not assignments or a.name in assignments],
            [s for s in gradebook.students if not students or s.id in students])


def status_of(statuses: dict, assignment: str, student: str, submission) -> tuple[str, bool]:
    """(the status column, whether the scores count)."""
    entry = statuses.get((assignment, student))
    if entry is not None and entry.get("status") == NOT_GRADED:
        return f"{NOT_GRADED}: {entry.get('reason') or 'see the report'}", False
    if submission is None:
        return NOT_SUBMITTED, True
    return GRADED, True


def _number(value) -> str:
    return "" if value is None else f"{float(value):g}"


def _safe(text) -> str:
    """A cell a spreadsheet must not read as a formula (a student id or a reason starting with =, +, -, @)."""
    text = "" if text is None else str(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


class StatusCsvExport(ExportPlugin):
    """nbgrader's CSV with a status column; NOT GRADED rows have empty scores, never 0."""

    def export(self, gradebook) -> None:
        destination = self.to or "grades.csv"
        statuses = latest_statuses(_course(self))
        assignments, students = _wanted(self, gradebook)
        self.log.info("Exporting grades (with their status) to %s", destination)
        with open(destination, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                             "raw_score", "late_submission_penalty", "score", "max_score", "status"])
            for assignment in assignments:
                for student in students:
                    try:
                        submission = gradebook.find_submission(assignment.name, student.id)
                    except MissingEntry:
                        submission = None
                    status, counts = status_of(statuses, assignment.name, student.id, submission)
                    if submission is None:
                        raw, penalty, timestamp = (0.0, 0.0, "") if counts else (None, None, "")
                    else:
                        raw, penalty, timestamp = submission.score, submission.late_submission_penalty, submission.timestamp
                        if not counts:
                            raw = penalty = None
                    score = None if raw is None else max(0.0, raw - (penalty or 0.0))
                    writer.writerow([_safe(assignment.name), assignment.duedate or "", timestamp or "", _safe(student.id),
                                     _safe(student.last_name), _safe(student.first_name), _safe(student.email),
                                     _number(raw), _number(penalty), _number(score), _number(assignment.max_score),
                                     _safe(status)])


class PartsCsvExport(ExportPlugin):
    """One row per student; per assignment one column per part, its total and its status."""

    def export(self, gradebook) -> None:
        destination = self.to or "grades-parts.csv"
        statuses = latest_statuses(_course(self))
        assignments, students = _wanted(self, gradebook)
        parts = {a.name: [c.name for nb in a.notebooks for c in nb.grade_cells if c.max_score] for a in assignments}
        header = ["student_id", "last_name", "first_name", "email"]
        for a in assignments:
            header += [f"{a.name}:{part}" for part in parts[a.name]] + [f"{a.name}:total", f"{a.name}:status"]
        self.log.info("Exporting per-part grades to %s", destination)
        with open(destination, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            for student in students:
                row = [_safe(student.id), _safe(student.last_name), _safe(student.first_name), _safe(student.email)]
                for a in assignments:
                    try:
                        submission = gradebook.find_submission(a.name, student.id)
                    except MissingEntry:
                        submission = None
                    status, counts = status_of(statuses, a.name, student.id, submission)
                    if submission is None or not counts:
                        row += [""] * len(parts[a.name]) + ["", _safe(status)]
                        continue
                    points = {g.name: g.score for nb in submission.notebooks for g in nb.grades}
                    total = max(0.0, (submission.score or 0.0) - (submission.late_submission_penalty or 0.0))
                    row += [_number(points.get(part)) for part in parts[a.name]] + [_number(total), _safe(status)]
                writer.writerow(row)
