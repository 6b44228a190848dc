"""One folder per exercise, with files whose names say where they run:

* ``checks.py``: the graded parts, one public function each, with the visible cases.  It runs in
  the student's kernel (visible tests) and in the grader (every test cell).
* ``hints.py`` (where an exercise has its own): the misconceptions its checks recognise.
* ``hidden.py``: the hidden cases, drawn only by the grader.  Neither the student's package nor
  the grading sandbox contains it (:mod:`autograder.grading.parts`: any name with "hidden" in it is the grader's).
* ``observe*.py``: the student's side; what the sandbox does with the student's objects, reported
  as plain data (listed in :data:`autograder.sandbox.agent.OBSERVATION_MODULES`).
* ``hidden_*.py`` (``hidden_formulas.py``, ``hidden_reference.py``): reference code that would
  solve the exercise if a student had it; grader only, like ``hidden.py``.
* anything else (``reference.py``, ``probes.py``, ``siglip_reference.py``, data files): the
  exercise's own helpers, used by both sides; they must not solve the exercise.
"""
