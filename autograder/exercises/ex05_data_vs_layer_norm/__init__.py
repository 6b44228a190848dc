"""Exercise 05_data_vs_layer_norm: its checks, hints, hidden cases and observers (see :mod:`autograder.exercises`)."""
