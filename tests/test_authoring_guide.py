"""The authoring guide (autograder/exercises/README.md) names only paths that exist, and the
names it tells a maintainer to edit are where it says."""
from __future__ import annotations

import re

from course import REPO

GUIDE = REPO / "autograder" / "exercises" / "README.md"


def test_every_path_the_guide_names_exists():
    text = GUIDE.read_text()
    paths = {p.rstrip("/") for p in re.findall(r"`([\w./-]+/[\w./-]*|[\w-]+\.(?:py|md|ipynb))`", text)}
    paths = {p for p in paths if "NN" not in p and "<" not in p and p not in {"observe*.py"}}
    assert len(paths) >= 15, paths
    missing = [p for p in sorted(paths) if not (REPO / p).exists()
               and not (REPO / "autograder" / "exercises" / "ex08_large_models" / p).exists()]
    assert missing == [], missing


def test_the_names_to_edit_are_where_the_guide_says():
    places = {
        "tests/course.py": ["ASSIGNMENTS"],
        "tests/test_questions.py": ["STATES_THE_RULE", "NAIVE_ANSWERS", "ROUNDED_RIGHT", "SCORING_RULE"],
        "tests/test_fresh_inputs.py": ["CHAPTERS"],
        "tests/demo_class.py": ["TEST_CELLS", "CLASSES", "def large_models_class"],
        "tests/test_nbgrader_roundtrip.py": ["FEEDBACK_PHRASES"],
        "autograder/sandbox/agent.py": ["OBSERVATION_MODULES"],
        "autograder/core/withheld.py": ["def of("],
        "autograder/core/numerics.py": ["def closest_explanation"],
    }
    for path, names in places.items():
        text = (REPO / path).read_text()
        assert all(name in text for name in names), path
