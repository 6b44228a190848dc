"""One folder per exercise, with files whose names say where they run:

* ``checks.py``: the graded parts, one public function each, with the visible cases.  It runs in
  the student's kernel (visible tests) and in the grader (every test cell).
* ``hints.py`` (where an exercise has its own): the misconceptions its checks recognise.
* ``hidden.py``: the hidden cases, drawn only by the grader.  Neither the student's package nor
  the grading sandbox contains it (:mod:`autograder.grading.parts`: any name with "hidden" in it is the grader's).
* ``observe*.py``: the student's side; what the sandbox does with the student's objects, reported
  as plain data (listed in :data:`autograder.sandbox.agent.OBSERVATION_MODULES`).
* anything else (``formulas.py``, ``reference.py``, ``probes.py``, data files): the exercise's own
  reference, used by both sides.
"""
