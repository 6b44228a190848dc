"""Exercise 07_practice_lab: its checks, hints, hidden cases and observers (see :mod:`autograder.exercises`)."""
