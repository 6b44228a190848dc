"""Exercise 06_training_dynamics: its checks, hints, hidden cases and observers (see :mod:`autograder.exercises`)."""
