"""Exercise 03_layer_norm: its checks, hints, hidden cases and observers (see :mod:`autograder.exercises`)."""
