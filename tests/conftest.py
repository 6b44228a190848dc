import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
torch.set_num_threads(1)  # small tensors: thread start-up would dominate

# Importing the grader takes the trusted baseline here, before any submission runs.
from autograder.core import integrity  # noqa: E402
from course import REPO, tool_env  # noqa: E402

sys.path.insert(0, str(REPO / "book" / "_ext"))
from build_stamp import current_build  # noqa: E402  (the quick start's build, when current)


@pytest.fixture(autouse=True)
def undo_tampering():
    """Submissions that monkeypatch torch or autograder must not leak into other tests."""
    yield
    integrity.restore()


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def built_book(tmp_path_factory) -> Path:
    """The book built once per test session with warnings as errors; the HTML folder.

    Shared by tests/test_book.py and tests/test_browser.py. Set BUILT_BOOK_HTML to the
    `_build/html` folder of a build made with `jupyter-book build --warningiserror --keep-going .`
    to test that build instead of making another (the Pages workflow does this). Without it, the
    quick start's own build (`_build/html`) is tested when its stamp (book/_ext/build_stamp.py)
    says it is current: made from today's sources, with no warning.
    """
    given = os.environ.get("BUILT_BOOK_HTML")
    if given:
        html = Path(given).resolve()
        assert (html / "index.html").is_file(), f"BUILT_BOOK_HTML={given} holds no built book"
        return html
    quick_start = REPO / "_build" / "html"
    if current_build(quick_start, REPO):
        print(f"\nbook build: reusing {quick_start} (current: same sources, no warning)")
        return quick_start
    out = tmp_path_factory.mktemp("book")
    start = time.monotonic()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-book"), "build", "--warningiserror", "--keep-going",
         "--path-output", str(out), str(REPO)],
        capture_output=True, text=True, timeout=1500, env=tool_env(),
    )
    print(f"\nbook build: {time.monotonic() - start:.1f} s")
    assert done.returncode == 0, (done.stdout[-5000:], done.stderr[-5000:])
    return out / "_build" / "html"
