"""nbgrader configuration of the course (run nbgrader commands from the repository root).

solutions/<id>/<id>.ipynb  is the nbgrader *source* (solutions and hidden tests),
exercises/<id>/<id>.ipynb  the *release* that `nbgrader generate_assignment <id>` writes.
"""
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    Execute,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor

from autograder.isolation import RecheckInCleanProcess
from autograder.feedback import HideTracebacks

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "normalization-layers"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.db_url = "sqlite:///gradebook.db"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# What a student sees in place of a solution region.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Per-cell limit while grading; a test cell runs its full hidden matrix in well under a second.
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True

# After the kernel has run the notebook, repeat every passed test cell in a clean process that
# loads the grader before the student's code: a solution cell that monkeypatches torch, numpy
# or autograder cannot turn a failing check into points (see autograder/isolation.py).
c.Autograde.autograde_preprocessors = [
    Execute,
    RecheckInCleanProcess,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
c.RecheckInCleanProcess.timeout = 300

# Feedback shows each check's message, never hidden test source or traceback lines.
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, HideTracebacks, CSSHTMLHeaderPreprocessor]
