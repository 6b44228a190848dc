"""The feedback page of a student whose notebook was not graded: why, and what to do.

``nbgrader generate_feedback`` writes pages only for autograded notebooks, so a student whose
notebook the grade command gave up on (it hung, died, ran out of memory, flooded its output...)
got nothing at all.  The grade command now writes them a page where nbgrader would have put
their feedback (``feedback/<student>/<assignment>/<notebook>.html``, with the submission's
``timestamp.txt`` and ``submission_secret.txt``, so that ``nbgrader release_feedback`` hands it
out like any other), through the same template, exporter and Content-Security-Policy as the
graded pages (:class:`autograder.grading.pages.FeedbackExporter`).

The page says why in the student's terms, from a fixed text per kind of reason: the
instructor's reason (the report's line) can quote nbgrader's log, which is not the student's to
read.  A page of ours is marked (``not_graded.txt`` beside it) and removed when the student is
graded, so that ``generate_feedback`` writes the real one.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat

MARKER = "not_graded.txt"
NBGRADER_FILES = ("timestamp.txt", "submission_secret.txt")
AGAIN = ("Then run the whole notebook from the top (Kernel, Restart Kernel and Run All Cells), check that every "
         "cell finishes, save it and submit again; if the deadline has passed, ask your instructor to grade it again.")

# (pattern of the instructor's reason, why, what to do): the first that matches ("still running ...;
# killed" is a time limit, "died ... or memory" a death).
REASONS = [
    (r"interrupt|still running|timed out|time limit", "a cell of your notebook kept running past the grader's "
     "time limit and could not be stopped (an endless loop, perhaps inside a try/except that also catches "
     "the interrupt).",
     "Find the loop that never ends and fix it; catch specific exceptions (except ValueError:), never all of "
     "them (except:, except BaseException:)."),
    (r"died|killed|signal", "the Python process that ran your notebook stopped before the end (os._exit, "
     "sys.exit in a loop, or a crash).",
     "Remove the code that ends or crashes the process."),
    (r"output", "your notebook printed more output than the grader accepts (a print inside a loop that runs "
                "very long or never ends?).",
     "Find the cell that prints without end and remove or shorten the printing."),
    (r"memory", "your notebook ran out of memory while it was graded.",
     "Find the cell that builds very large tensors or lists (or keeps adding to one in a loop) and make it "
     "smaller or remove it."),
    (r"larger than", "your submission is larger than the grader accepts, so it was not opened.",
     "Remove large files from the assignment folder and clear the notebook's outputs (Edit, Clear Outputs "
     "of All Cells), then save."),
    (r"metadata|cells copied", "the notebook's cells were changed in a way the grader cannot match to the "
     "assignment (cells copied, or their hidden nbgrader ids edited).",
     "Fetch a fresh copy of the assignment, copy your code into its answer cells, and use that notebook."),
]
UNKNOWN = ("the grader could not finish grading your notebook; your instructor's grading report says why.",
           "Ask your instructor what happened.")


def for_the_student(reason: str | None) -> tuple[str, str]:
    """(why, what to do), in the student's terms, for the instructor's reason."""
    for pattern, why, todo in REASONS:
        if re.search(pattern, reason or "", re.I):
            return why[0].upper() + why[1:], f"{todo} {AGAIN}"
    return UNKNOWN[0][0].upper() + UNKNOWN[0][1:], UNKNOWN[1]


def page(notebook: str, reason: str | None) -> str:
    """The HTML page of ``notebook``, not graded for ``reason`` (the instructor's words)."""
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from traitlets.config import Config

    from autograder.grading.pages import BOOTSTRAP_CSS, FeedbackExporter, feedback_config

    why, todo = for_the_student(reason)
    config = Config()
    feedback_config(config)
    config.Exporter.default_preprocessors = []
    config.HTMLExporter.extra_template_paths = [str(BOOTSTRAP_CSS)]
    config.FeedbackExporter.preprocessors = [CSSHTMLHeaderPreprocessor]
    resources = {"nbgrader": {"notebook": notebook}, "not_graded": {"why": why, "todo": todo}}
    html, _ = FeedbackExporter(config=config).from_notebook_node(nbformat.v4.new_notebook(), resources=resources)
    return html


def update(course: Path, assignment: str, reasons: dict[str, str | None]) -> list[Path]:
    """``reasons``: student -> why they were not graded, or None for a student graded.  Write
    the page of every student not graded, one per notebook of the assignment; remove an earlier
    page of ours for every student graded now.  Returns the pages written."""
    from autograder.grading.gradebook import course_settings, open_gradebook

    settings = course_settings(course)
    with open_gradebook(course) as gb:
        notebooks = sorted(nb.name for nb in gb.find_assignment(assignment).notebooks)
    written = []
    for student, reason in reasons.items():
        folder = Path(settings.format_path(settings.feedback_directory, student, assignment))
        if reason is None:
            if (folder / MARKER).is_file() and not folder.is_symlink():
                shutil.rmtree(folder)
            continue
        folder.mkdir(parents=True, exist_ok=True)  # an earlier run's pages of these notebooks are replaced
        submitted = Path(settings.format_path(settings.submitted_directory, student, assignment))
        for name in NBGRADER_FILES:  # what release_feedback needs beside the page
            source = submitted / name
            if source.is_file() and not source.is_symlink() and source.stat().st_size < 4096:
                (folder / name).write_text(source.read_text(errors="replace"))
        (folder / MARKER).write_text(f"{reason}\n")
        for notebook in notebooks:
            target = folder / f"{notebook}.html"
            target.write_text(page(notebook, reason), encoding="utf-8")
            written.append(target)
    return written
