"""Write the student release: a folder that can be published as the students' repository.

    python tools/student_release.py --out ../student-release [--force] [--html _build/html]

It holds the book (its sources and the built site), the released exercises, the grader's student
part with a pyproject.toml of its own, the students' requirements and a README for students. It
holds nothing only instructors need: no solutions, hidden tests, question keys, tests, benchmarks,
hub, instructor guide or grading code (see tools/README-release.md).

The built site must be a current build (book/_ext/build_stamp.py: made from today's sources with
no warning). The command does not build the book itself: a build executes every chapter (about ten
minutes) and may fail for reasons of its own; the quick start's first command makes that build, and
the command says so when it is missing or stale.

Same repository and build in, same files out: files are copied byte for byte in sorted order, the
generated files depend only on the repository, and modes are normalized (0644, 0755 for
executables).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import stat
import sys
import tomllib
from importlib import metadata
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "book" / "_ext"))

from autograder.grading.parts import student_files  # noqa: E402  (the one rule for the student's part)
from build_stamp import STAMP, current_build  # noqa: E402

BUILD_COMMAND = "jupyter-book build --warningiserror --keep-going ."
# Never copied from book/ (the instructor guide is its own site) nor from exercises/.
SKIPPED_PARTS = frozenset({"instructor", "__pycache__", ".ipynb_checkpoints"})
LICENSE_NAMES = ("LICENSE", "LICENSE.md", "LICENSE.txt", "COPYING")

# What a student installs: the exercises import torch and numpy, chapter 6's exercise matplotlib,
# exercises 1 and 5 scikit-learn's digits; JupyterLab opens the notebooks. No nbgrader: its
# assignment list and validate button only work with a course's exchange, which is the course
# hub's, and the hub installs its own environment (hub/); on their own machine students run the
# notebook and its visible checks.
STUDENT_PACKAGES = ("torch", "numpy", "matplotlib", "scikit-learn", "jupyterlab")
# What building the book needs on top: Jupyter Book, and what the chapters import beyond the
# student's packages (transformers: chapter 3's SigLIP and Llama comparisons); jupytext opens a
# chapter's MyST source as a notebook in JupyterLab (the book's launch buttons).
BOOK_PACKAGES = ("jupyter-book", "transformers", "jupytext")


class ReleaseError(Exception):
    """Why no release was written, in words for the person who ran the command."""


# ------------------------------------------------------------------ versions


def pinned_versions(requirements: Path) -> dict[str, str]:
    """name (normalized) -> version of every ``name==version`` line of a requirements file."""
    pins = {}
    for line in requirements.read_text().splitlines():
        match = re.match(r"^\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*==\s*([^\s;#]+)", line)
        if match:
            pins[normalize(match.group(1))] = match.group(3)
    return pins


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pin(name: str, pins: dict[str, str]) -> str:
    """``name==version``: the repository's pin, else (a package requirements.txt pulls in without
    pinning it, such as JupyterLab) the version installed in this, the instructor's, environment."""
    version = pins.get(normalize(name))
    if version is None:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            raise ReleaseError(f"{name} is neither pinned in requirements.txt nor installed here: "
                               "run this command with the course's environment (pip install -r requirements.txt)")
        version = version.split("+")[0]  # a local label (+cpu) names a build, not a version on the index
    return f"{name}=={version}"


# ------------------------------------------------------------------ generated files


def student_requirements(pins: dict[str, str]) -> str:
    lines = [
        "# The student's environment: the exercises, their visible checks and JupyterLab.",
        "# Install from this folder:  pip install -r requirements-student.txt",
        "# torch: on Linux, PyPI's wheel is the CUDA build (several GB); the CPU build is enough here:",
        "#   pip install -r requirements-student.txt --extra-index-url https://download.pytorch.org/whl/cpu",
        *[pin(name, pins) for name in STUDENT_PACKAGES],
        "# The course's checks (the autograder package of this folder), in development mode: a `git pull`",
        "# of this repository updates them.",
        "-e .",
    ]
    return "\n".join(lines) + "\n"


def book_requirements(pins: dict[str, str]) -> str:
    lines = [
        "# Building the book (every chapter is executed):  pip install -r requirements-book.txt",
        f"#   then, from this folder:  {BUILD_COMMAND}",
        "-r requirements-student.txt",
        *[pin(name, pins) for name in BOOK_PACKAGES],
    ]
    return "\n".join(lines) + "\n"


def package_layout(files: list[PurePosixPath]) -> tuple[list[str], dict[str, list[str]]]:
    """The packages (every folder of the student part that holds Python) and, for each, the
    data files it ships (files that are not Python, named relative to that package)."""
    folders = sorted({f.parent for f in files if f.suffix == ".py"}, key=lambda p: p.parts)
    packages = [".".join(("autograder", *folder.parts)) for folder in folders]
    data: dict[str, list[str]] = {}
    for f in files:
        if f.suffix == ".py":
            continue
        owner = max((folder for folder in folders if folder == f.parent or folder in f.parents),
                    key=lambda p: len(p.parts))
        data.setdefault(".".join(("autograder", *owner.parts)), []).append(f.relative_to(owner).as_posix())
    return packages, {name: sorted(names) for name, names in sorted(data.items())}


def toml_list(items) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"


def student_pyproject(files: list[PurePosixPath]) -> str:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    packages, data = package_layout(files)
    lines = [
        "# The student's part of the course's grader: the visible checks, their hints and the sandbox's",
        "# runner. The grading code and the hidden checks are not part of it (they stay with the instructor).",
        "[build-system]",
        'requires = ["setuptools>=64"]',
        'build-backend = "setuptools.build_meta"',
        "",
        "[project]",
        'name = "normlayers-autograder-student"',
        f'version = "{project["version"]}"',
        "description = \"The checks students run in the notebooks of the course 'Normalization Layers, hands-on'.\"",
        f'requires-python = "{project["requires-python"]}"',
        f"dependencies = {toml_list(project['dependencies'])}",
        "",
        "[tool.setuptools]",
        f"packages = {toml_list(packages)}",
        "include-package-data = false",
        "",
        "[tool.setuptools.package-data]",
        *[f'"{name}" = {toml_list(names)}' for name, names in data.items()],
    ]
    return "\n".join(lines) + "\n"


def readme(book_url: str | None) -> str:
    book = (f"The book: <{book_url}>. A copy of it is in this folder: open `_build/html/index.html` in a browser."
            if book_url else
            "The book: open `_build/html/index.html` in a browser (your teacher may also give you its web address).")
    return f"""# Normalization Layers, hands-on: the student's repository

A course about the normalization layers of deep learning (batch, layer, instance and group norm,
and more), with PyTorch exercises. You read a chapter of the book, then you write the layer
yourself in the chapter's exercise notebook. Checks in the notebook compare your code with
PyTorch's own layers (`torch.nn`) and say what differs.

{book}

## What is here

- `book/`: the chapters (MyST Markdown) and `_build/html/`: the book, built.
- `exercises/<id>/<id>.ipynb`: one notebook for each exercise.
- `autograder/`: the checks that the notebooks call.

## Install (once)

You need Python 3.11. In this folder:

```bash
python3.11 -m venv .venv
.venv/bin/pip install -r requirements-student.txt
```

On Linux, PyPI's torch is the large CUDA build. Without an NVIDIA GPU, add
`--extra-index-url https://download.pytorch.org/whl/cpu` to the second command for the smaller
CPU build.

## Do an exercise

```bash
.venv/bin/jupyter lab exercises/03_layer_norm/03_layer_norm.ipynb
```

1. Run the cells from the top. Write your code where a cell says `# YOUR CODE HERE`, and delete
   the line `raise NotImplementedError()` below it.
2. Run the test cell under your code. It prints "visible checks passed", or it tells you what
   differs from `torch.nn` and why.
3. Passing the visible checks is a good sign, not the grade. When your notebook is graded, more
   cases are checked.
4. Submit the notebook as your teacher tells you (for example on the course hub: Nbgrader,
   Assignment List, Submit).

If your course uses a JupyterHub, you do not need to install anything: the notebooks open there.

## Build the book yourself (optional)

```bash
.venv/bin/pip install -r requirements-book.txt
.venv/bin/{BUILD_COMMAND}
```

It runs every chapter: about ten minutes.
"""


# ------------------------------------------------------------------ writing


def copy_file(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    executable = source.stat().st_mode & stat.S_IXUSR
    target.chmod(0o755 if executable else 0o644)


def write_text(target: Path, text: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    target.chmod(0o644)


def tree_files(root: Path) -> list[Path]:
    """Every file under ``root``, sorted, less the skipped folders; a link is refused (it could
    point anywhere, and the release must not depend on this machine)."""
    found = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if set(relative.parts) & SKIPPED_PARTS:
            continue
        if path.is_symlink():
            raise ReleaseError(f"{path} is a symbolic link: the release copies only files")
        if path.is_file():
            found.append(path)
    return found


def check_target(out: Path, force: bool) -> None:
    if out == REPO or out in REPO.parents or REPO in out.parents:
        raise ReleaseError(f"--out {out}: write the release outside the course repository {REPO} "
                           "(a folder inside it could be committed with it, one above it holds it)")
    if out.exists() and not out.is_dir():
        raise ReleaseError(f"--out {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ReleaseError(f"{out} is not empty. Choose an empty or new folder, or add --force to replace "
                           "its contents (a .git folder in it is kept, so a clone of the students' "
                           "repository can be updated in place).")


def check_build(html: Path, out: Path) -> None:
    if html == out or out in html.parents:
        raise ReleaseError(f"--html {html} is inside --out {out}, which the release replaces")
    if not (html / "index.html").is_file():
        raise ReleaseError(f"No built book in {html}. Build it first, from {REPO}:\n    {BUILD_COMMAND}\n"
                           "(it executes every chapter: about ten minutes), then run this command again.")
    if not current_build(html, REPO):
        raise ReleaseError(f"The book in {html} is not a current build: its stamp ({STAMP}) is missing, names "
                           "other sources, or counts warnings. Build it again, from "
                           f"{REPO}:\n    {BUILD_COMMAND}\nthen run this command again.")


def clear(out: Path) -> None:
    """Remove what ``out`` holds, except a .git folder."""
    for path in sorted(out.iterdir()):
        if path.name == ".git":
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def release_plan(html: Path) -> list[tuple[PurePosixPath, Path]]:
    """(path in the release, source file) of every copied file, sorted by release path."""
    plan: list[tuple[PurePosixPath, Path]] = []
    for name in ("_config.yml", "_toc.yml"):
        plan.append((PurePosixPath(name), REPO / name))
    for name in LICENSE_NAMES:
        if (REPO / name).is_file():
            plan.append((PurePosixPath(name), REPO / name))
    for folder in ("book", "exercises"):
        plan += [(PurePosixPath(folder, path.relative_to(REPO / folder).as_posix()), path)
                 for path in tree_files(REPO / folder)]
    package = REPO / "autograder"
    plan += [(PurePosixPath("autograder", relative), package / relative) for relative in student_files(package)]
    plan += [(PurePosixPath("_build", "html", path.relative_to(html).as_posix()), path) for path in tree_files(html)]
    return sorted(plan)


def make_release(out: Path, html: Path, force: bool = False, book_url: str | None = None) -> list[PurePosixPath]:
    """Write the release into ``out``; the release's files, sorted."""
    out, html = out.resolve(), html.resolve()
    check_target(out, force)
    check_build(html, out)
    plan = release_plan(html)
    files = student_files(REPO / "autograder")
    pins = pinned_versions(REPO / "requirements.txt")
    generated = {
        PurePosixPath("README.md"): readme(book_url),
        PurePosixPath("pyproject.toml"): student_pyproject(files),
        PurePosixPath("requirements-student.txt"): student_requirements(pins),
        PurePosixPath("requirements-book.txt"): book_requirements(pins),
    }
    out.mkdir(parents=True, exist_ok=True)
    clear(out)
    for relative, source in plan:
        copy_file(source, out / relative)
    for relative, text in generated.items():
        write_text(out / relative, text)
    return sorted([relative for relative, _ in plan] + list(generated))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="the folder to write (new or empty)")
    parser.add_argument("--force", action="store_true",
                        help="replace what --out holds (a .git folder in it is kept)")
    parser.add_argument("--html", type=Path, default=REPO / "_build" / "html",
                        help="a current build of the book (default: the quick start's, _build/html)")
    parser.add_argument("--book-url", help="where the book is published, for the students' README")
    args = parser.parse_args(argv)
    try:
        files = make_release(args.out, args.html, force=args.force, book_url=args.book_url)
    except ReleaseError as error:
        print(f"student_release: {error}", file=sys.stderr)
        return 2
    size = sum((args.out / f).stat().st_size for f in files)
    print(f"Wrote the student release to {args.out.resolve()}: {len(files)} files, {size / 2**20:.1f} MiB.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
