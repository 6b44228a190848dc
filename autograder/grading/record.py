"""The record of each grading run, kept in the course: ``reports/<assignment>-<UTC time>.txt``,
``.json`` and ``.html`` (the class picture, :mod:`autograder.grading.picture`).

The JSON files are also where "NOT GRADED" lives durably.  nbgrader's gradebook has no place
for it (a student who could not be graded has no submission row, or keeps last week's), and its
schema belongs to nbgrader's migrations; the reports are written by the grade command alone, one
per run, never changed afterwards, the same for a SQLite or a PostgreSQL gradebook.  A student's
status for an assignment is what the latest run that graded them said (:func:`latest_statuses`),
so ``--student`` for one late submission updates that student only.  The exporter
(:mod:`autograder.grading.export`) reads it.
"""
from __future__ import annotations

import io
import json
import re
from datetime import datetime, timezone
from pathlib import Path

from autograder.grading.report import Outcome, print_report, printable

REPORTS = "reports"
GRADED, NOT_GRADED = "graded", "NOT GRADED"


def _stem(assignment: str, when: datetime) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", assignment)
    return f"{safe}-{when.strftime('%Y%m%dT%H%M%SZ')}"


def record_of(assignment: str, outcomes: list[Outcome], maxima: dict[str, float], run: dict) -> dict:
    """The run as JSON data: when, with which limits, and one entry per student."""
    return {
        "assignment": assignment,
        **run,
        "max_score": outcomes[0].max_score if outcomes else sum(maxima.values()),
        "parts": maxima,
        "students": [{
            "student": o.student,
            "status": GRADED if o.score is not None else NOT_GRADED,
            "score": o.score,
            "reason": o.reason,
            "notes": o.notes,
            "parts": o.parts,
            "hints": [{"part": part, "cause": cause} for part, cause in o.hints],
        } for o in outcomes],
    }


def report_text(record: dict, outcomes: list[Outcome]) -> str:
    """The printed report, with a header and every student's line (the file keeps them all)."""
    out = io.StringIO()
    out.write(f"Grading report: {printable(record['assignment'])}, {record['started']} to {record['finished']} (UTC)\n")
    out.write(f"Limits: {record['limits']}\n")
    if record.get("stopped"):
        out.write(f"\nSTOPPED: {record['stopped']}\n")
    print_report(outcomes, out)
    out.write("\nEvery submission:\n")
    for o in outcomes:
        out.write(f"  {o.line()}\n")
    return out.getvalue()


def write_records(course: Path, record: dict, outcomes: list[Outcome], picture: str | None) -> list[Path]:
    """Write the run's text, JSON and (when given) class picture; return their paths."""
    folder = course / REPORTS
    folder.mkdir(exist_ok=True)
    when = datetime.strptime(record["finished"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    stem, n = _stem(record["assignment"], when), 1
    while any((folder / f"{stem}{'' if n == 1 else f'-{n}'}{ext}").exists() for ext in (".txt", ".json", ".html")):
        n += 1
    stem = stem if n == 1 else f"{stem}-{n}"
    paths = [folder / f"{stem}.txt", folder / f"{stem}.json"]
    paths[0].write_text(report_text(record, outcomes), encoding="utf-8", errors="backslashreplace")
    paths[1].write_text(json.dumps(record, indent=1, ensure_ascii=True) + "\n")
    if picture is not None:
        paths.append(folder / f"{stem}.html")
        paths[2].write_text(picture, encoding="utf-8")
    return paths


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def latest_statuses(course: Path) -> dict[tuple[str, str], dict]:
    """(assignment, student) -> that student's entry in the latest run that graded them."""
    runs = []
    for path in sorted((course / REPORTS).glob("*.json")) if (course / REPORTS).is_dir() else []:
        try:
            record = json.loads(path.read_text())
            runs.append((str(record["finished"]), path.stat().st_mtime_ns, record))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a report of ours
    statuses = {}
    for _, _, record in sorted(runs, key=lambda run: run[:2]):
        for entry in record.get("students", []):
            if isinstance(entry, dict) and isinstance(entry.get("student"), str):
                statuses[(record["assignment"], entry["student"])] = entry
    return statuses
