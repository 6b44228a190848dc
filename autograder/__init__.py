"""Checks students' normalization layers against their ``torch.nn`` namesakes.

Four folders, laid out along the trust boundary of grading:

* ``core/``: the shared comparison core (engine, numerics, structure, messages, inputs, the
  plain-data ``wire``, the shared hints).  Both sides import it.
* ``exercises/exNN_name/``: one folder per exercise.  ``checks.py`` holds the graded parts and
  their visible cases, ``hints.py`` its misconceptions, ``observe*.py`` what the sandbox does with
  the student's objects, and ``hidden.py`` the hidden cases, which only the grader holds.
* ``sandbox/``: the student's side.  It drives the student's objects and reports plain data; it
  decides nothing.
* ``grading/``: the instructor's side.  It never runs student code: the sandbox, nbgrader's
  execution with test cells judged in the grader, the source scan, the class-grading command.

The checks raise :class:`CheckFailed` with a message that names the case and the likely
misconception.  While a student works they run in the student's kernel (visible tests); at
grading time they run in the grader, and reach the student's objects only through
``autograder.core.side``.  :mod:`autograder.grading.parts` says which files reach the student.
"""
from autograder.core.messages import CheckFailed
from autograder.core.devices import available_devices, default_device

__all__ = ["CheckFailed", "available_devices", "default_device"]

from autograder.core import integrity as _integrity

_integrity.remember()
