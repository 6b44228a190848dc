"""Exercise 04_instance_group_norm: its checks, hints, hidden cases and observers (see :mod:`autograder.exercises`)."""
