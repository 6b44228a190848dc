"""Exercise 02_batch_norm: its checks, hints, hidden cases and observers (see :mod:`autograder.exercises`)."""
