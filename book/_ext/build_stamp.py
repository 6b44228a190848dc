"""A stamp that says which sources a finished book build was made from, and with how many warnings.

The quick start builds the book (`jupyter-book build --warningiserror --keep-going .`), then runs
the tests, which test a built book. With this stamp they test that build instead of making a
second one, but only when it is current: same sources (``fingerprint``) and no warning.

``_build/html/_build_stamp.json``::

    {"fingerprint": "<sha256 of the book's sources>", "warnings": 0}

The fingerprint covers what a build reads: ``_config.yml``, ``_toc.yml``, ``requirements.txt``
(the versions of what executes the chapters) and every file under ``book/`` except the
instructor guide (its own site).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

STAMP = "_build_stamp.json"
TOP_FILES = ("_config.yml", "_toc.yml", "requirements.txt")
SKIP = ("instructor", "__pycache__", ".ipynb_checkpoints")


def fingerprint(repo: Path) -> str:
    """sha256 over the relative path and bytes of every source the book build reads."""
    files = [repo / name for name in TOP_FILES if (repo / name).is_file()]
    files += [path for path in sorted((repo / "book").rglob("*"))
              if path.is_file() and not set(path.relative_to(repo / "book").parts) & set(SKIP)]
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def current_build(html: Path, repo: Path) -> bool:
    """True when ``html`` holds a finished build of today's sources that had no warning."""
    try:
        stamp = json.loads((html / STAMP).read_text())
    except (OSError, ValueError):
        return False
    return stamp.get("warnings") == 0 and stamp.get("fingerprint") == fingerprint(repo)


def _write_stamp(app, exception) -> None:
    if exception is not None or app.builder.name != "html":
        return
    stamp = {"fingerprint": fingerprint(Path(app.srcdir)), "warnings": app._warncount}
    (Path(app.outdir) / STAMP).write_text(json.dumps(stamp))


def setup(app):
    app.connect("build-finished", _write_stamp)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
