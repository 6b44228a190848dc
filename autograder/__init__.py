"""Checks students' normalization layers against their ``torch.nn`` namesakes.

The package is laid out along the trust boundary of grading:

* ``autograder.sandbox`` runs where the student's code runs (their kernel; at grading time a
  bubblewrap sandbox): it drives the student's objects and reports plain data.  It decides nothing.
* ``autograder.wire`` is the plain-data format between the two sides (no pickle, no objects).
* The checks (``autograder.batch_norm`` and the other chapter modules, on the shared engine
  ``autograder.engine``, ``structure``, ``numerics``, ``forbidden`` and the hints) compare that
  data with torch and raise :class:`CheckFailed` with a message that names the case and the likely
  misconception.  They reach the student's objects only through ``autograder.side``.  While a
  student works they run in the student's kernel (visible tests); at grading time they run in
  the grader.
* ``autograder.grading`` never runs student code: the sandbox, the sandboxed kernel, nbgrader's
  execution with test cells judged in the grader, the source scan and the class-grading command.
"""
from autograder.messages import CheckFailed
from autograder.devices import available_devices, default_device

__all__ = ["CheckFailed", "available_devices", "default_device"]

from autograder import integrity as _integrity

_integrity.remember()
