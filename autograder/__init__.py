"""Checks students' normalization layers against their ``torch.nn`` namesakes.

The package is used in two places:

* test cells of the exercise notebooks call the chapter modules (``autograder.batch_norm``),
  which run the shared comparison engine (``autograder.engine``) in the student's kernel and
  raise :class:`CheckFailed` with a message that names the case and the likely misconception;
* at grading time nbgrader runs :class:`autograder.isolation.RecheckInCleanProcess`, which
  repeats every passed test cell in a process the student's code could not prepare.
"""
from autograder.messages import CheckFailed
from autograder.devices import available_devices, default_device

__all__ = ["CheckFailed", "available_devices", "default_device"]

from autograder import integrity as _integrity

_integrity.remember()
