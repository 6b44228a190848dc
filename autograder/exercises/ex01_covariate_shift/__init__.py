"""Exercise 01_covariate_shift: its checks, hints, hidden cases and observers (see :mod:`autograder.exercises`)."""
