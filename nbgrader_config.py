"""nbgrader configuration of the course (run nbgrader commands from the repository root).

solutions/<id>/<id>.ipynb  is the nbgrader *source* (solutions and hidden tests),
exercises/<id>/<id>.ipynb  the *release* that `nbgrader generate_assignment <id>` writes.
"""
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor

from autograder.grading.feedback import ClearHiddenTestsInTestCells, GradedVerdicts, HideTracebacks
from autograder.grading.execute import SandboxedExecute
from autograder.grading.pages import protect_formgrader
from autograder.grading.scrub import ScrubActiveContent

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "normalization-layers"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
# The gradebook is nbgrader's default, <root>/gradebook.db, an absolute path. A relative
# "sqlite:///gradebook.db" opens the file in the working directory, which for the formgrader in a
# JupyterHub server is the home, not the course: it showed a second, empty gradebook there.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# What a student sees in place of a solution region.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Per-cell limit while grading; a test cell runs its full hidden matrix in well under a second.
c.SandboxedExecute.timeout = 120
c.SandboxedExecute.interrupt_on_timeout = True

# The student's code runs in a bubblewrap sandbox (no view of the course, its gradebook or other
# students); each test cell runs in the grader, which drives the student's objects over a socket
# and judges the plain data they return (see autograder/grading/execute.py).
# ScrubActiveContent: the formgrader and the feedback show the autograded notebook in the
# instructor's browser; no script or HTML a student wrote may run there (autograder/grading/scrub.py).
c.Autograde.autograde_preprocessors = [
    SandboxedExecute,
    ScrubActiveContent,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]

# Feedback shows each check's message, never hidden test source or traceback lines; each test
# cell says what the grader concluded (passed, failed, correct, wrong) under its part's name.
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTestsInTestCells, HideTracebacks, GradedVerdicts,
                                    CSSHTMLHeaderPreprocessor]

# `nbgrader collect` runs as the instructor: it must not follow a link a student put into their
# inbound folder, nor take a folder that another student submitted in their name.
c.ExchangeFactory.collect = "autograder.grading.exchange.SafeExchangeCollect"
# The formgrader's and the feedback's pages render the autograded notebook through the scrub
# again, with a Content-Security-Policy that lets only the templates' own scripts run
# (autograder/grading/pages.py; hub/prepare.py does the same for the hub's instructor).
protect_formgrader(c)

# `nbgrader export` writes a status column and leaves the scores of a student the grade command
# could not grade empty, never 0 (autograder/grading/export.py; the status comes from the grade
# command's reports in reports/). The per-part export:
#   nbgrader export --exporter autograder.grading.export.PartsCsvExport --to grades-parts.csv
c.ExportApp.plugin_class = "autograder.grading.export.StatusCsvExport"
