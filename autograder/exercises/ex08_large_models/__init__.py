"""Exercise 08_large_models: its checks, hints, hidden cases and observers (see :mod:`autograder.exercises`)."""
