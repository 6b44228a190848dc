"""Exercise 02b_batch_norm_backward: its checks, hints, hidden cases and observers (see :mod:`autograder.exercises`)."""
