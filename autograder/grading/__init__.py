"""Grading: code that never runs a student's code.

* :mod:`~autograder.grading.sandbox`: the bubblewrap sandbox every student process runs in;
* :mod:`~autograder.grading.kernel`: a Jupyter kernel started inside that sandbox;
* :mod:`~autograder.grading.execute`: nbgrader's ``Execute`` with the sandboxed kernel, running
  each test cell here, in the grader, against the student's objects over a socket;
* :mod:`~autograder.grading.scan`: routes around the op recorder, found in the submitted source;
* :mod:`~autograder.grading.grade` and :mod:`~autograder.grading.report`: grading a class.

The student's side of the conversation is :mod:`autograder.sandbox`.
"""
