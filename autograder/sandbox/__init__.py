"""Code that runs where the student's code runs: in the student's own kernel while they work,
and inside the grading sandbox (bubblewrap) at grading time.

Nothing here decides a verdict.  :mod:`autograder.sandbox.observe` drives the student's objects
(builds a layer, runs its forward and backward, reads its parameters) and reports what happened
as plain data (:mod:`autograder.core.wire`); :mod:`autograder.sandbox.agent` serves those requests
to the grader over a socket.  Student code in the same process can change any of it, so
everything it reports is treated as untrusted numbers and compared by the grader elsewhere.
"""
