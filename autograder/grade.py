"""``python -m autograder.grade <assignment>``: grade a whole class (see :mod:`autograder.grading.grade`)."""
import sys

from autograder.grading.grade import main

if __name__ == "__main__":
    sys.exit(main())
