"""The launch button of a chapter opens its exercise on the course hub, from the student release.

sphinx-book-theme builds the launch menu (the rocket in a page's header) in its
``html-page-context`` handler ``add_launch_buttons`` (priority 501): a JupyterHub entry is a
link ``<hub>/hub/user-redirect/git-pull?repo=<repository.url>&urlpath=lab/tree/<repo>/<page>``
that nbgitpuller answers by cloning the repository into the student's home and opening the page.
Two things are wrong with that for this course: ``repository.url`` is the instructor's private
repository (it holds the solutions), and the page is the chapter, not the exercise.

This extension runs after the theme (priority 502) and rebuilds that menu:

- the repository is the STUDENT release (``student_repository_url``, branch
  ``student_repository_branch``: the public repository made by ``tools/student_release.py``,
  with ``book/`` and ``exercises/`` at the same paths as here);
- a chapter ``book/NN_name`` whose exercise ``exercises/NN_name/NN_name.ipynb`` exists opens
  that notebook; another executed page opens its own source, from the student release too;
- while the hub's address or the student repository is empty or a placeholder (a reserved
  example domain such as ``example.org``), the page has no launch menu at all.

The repository, edit and issue buttons of the header are built from ``repository.url`` too: they
lead to the student release when one is named, and are not shown while it is a placeholder.

The theme's other entries (Binder, Colab, Deepnote, JupyterLite) are built from
``repository.url``, the private repository, so the menu never keeps them; a build where one of
them is configured warns (an error under ``--warningiserror``).
"""
from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode, urlsplit

from sphinx.util import logging

LOGGER = logging.getLogger(__name__)

# Domains reserved for examples (RFC 2606 and RFC 6761): a URL on one of them is a placeholder.
PLACEHOLDER_DOMAINS = ("example.org", "example.com", "example.net")
PLACEHOLDER_TLDS = ("example", "invalid", "test")
# Theme entries that would point at repository.url (the instructor's repository).
OTHER_PROVIDERS = ("binderhub_url", "colab_url", "deepnote_url", "jupyterlite_url")
LAUNCH_GROUP = "launch-buttons"  # the label sphinx-book-theme gives its launch menu


def is_placeholder(url: str) -> bool:
    """True for an empty URL, one without a host, or one on a domain reserved for examples."""
    host = (urlsplit(url.strip()).hostname or "") if url else ""
    if not host:
        return True
    return (any(host == d or host.endswith("." + d) for d in PLACEHOLDER_DOMAINS)
            or host.rsplit(".", 1)[-1] in PLACEHOLDER_TLDS)


def exercise_notebook(srcdir: Path, pagename: str) -> str | None:
    """``exercises/NN_name/NN_name.ipynb`` for the page ``book/NN_name``, if that file exists."""
    name = pagename.rsplit("/", 1)[-1]
    path = Path("exercises") / name / f"{name}.ipynb"
    return path.as_posix() if (srcdir / path).is_file() else None


def hub_link(hub: str, repository: str, branch: str, path: str, interface: str = "lab") -> str:
    """The nbgitpuller link that clones ``repository`` into the student's home (a folder named
    after it, nbgitpuller's default) and opens ``path`` (relative to the repository's root)."""
    folder = repository.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    ui = "lab/tree" if interface == "lab" else "tree"
    query = urlencode({"repo": repository, "urlpath": f"{ui}/{folder}/{path}", "branch": branch},
                      safe="/")
    return f"{hub.rstrip('/')}/hub/user-redirect/git-pull?{query}"


def launch_entry(hub: str, repository: str, branch: str, srcdir: Path, pagename: str,
                 source_suffix: str, interface: str = "jupyterlab") -> dict | None:
    """The menu entry for one page, or None while the hub or the repository is a placeholder."""
    if is_placeholder(hub) or is_placeholder(repository):
        return None
    exercise = exercise_notebook(srcdir, pagename)
    path = exercise or f"{pagename}{source_suffix}"
    what = "this chapter's exercise" if exercise else "this page"
    return {"type": "link", "text": "JupyterHub", "label": "launch-exercise",
            "tooltip": f"Open {what} on the course hub",
            "icon": "_static/images/logo_jupyterhub.svg",
            "url": hub_link(hub, repository, branch or "main", path,
                            "lab" if interface == "jupyterlab" else "classic")}


def _launch_options(app) -> dict:
    return app.config.html_theme_options.get("launch_buttons", {}) or {}


def relaunch(app, pagename, templatename, context, doctree) -> None:
    """Replace the theme's launch menu of this page (see the module's docstring)."""
    buttons = context.get("header_buttons") or []
    group = next((b for b in buttons if b.get("label") == LAUNCH_GROUP), None)
    if group is None:
        return
    options = _launch_options(app)
    suffix = Path(app.env.doc2path(pagename)).suffix
    entry = launch_entry(options.get("jupyterhub_url", ""), app.config.student_repository_url,
                         app.config.student_repository_branch, Path(app.srcdir), pagename,
                         suffix, options.get("notebook_interface", "jupyterlab"))
    # Keep what is not a link to a repository (the theme's Thebe "Live Code" button).
    kept = [b for b in group.get("buttons", []) if b.get("type") != "link"]
    group["buttons"] = ([entry] if entry else []) + kept
    if not group["buttons"]:
        buttons.remove(group)


REPOSITORY_BUTTONS = ("use_repository_button", "use_edit_page_button", "use_issues_button")


def point_repository_buttons(app, config) -> None:
    """The header's repository, edit and issue buttons lead to the student release, never to
    ``repository.url`` (the instructor's repository); while the release is a placeholder they
    are not shown."""
    options = config.html_theme_options
    student = config.student_repository_url
    if is_placeholder(student):
        # repository_url stays: the theme's launch menu needs it to build (relaunch replaces it)
        options.update({key: False for key in REPOSITORY_BUTTONS})
    else:
        options["repository_url"] = student.rstrip("/").removesuffix(".git")
        options["repository_branch"] = config.student_repository_branch or "main"


def _warn_other_providers(app) -> None:
    options = _launch_options(app)
    for key in OTHER_PROVIDERS:
        if options.get(key):
            LOGGER.warning(f"launch_buttons.{key} is set, but its button would open the "
                           "instructor's repository (repository.url): the launch menu shows "
                           f"only the course hub (book/_ext/launch_exercise.py). Set {key}: \"\".")


def setup(app):
    app.add_config_value("student_repository_url", "", "html", [str])
    app.add_config_value("student_repository_branch", "main", "html", [str])
    app.connect("config-inited", point_repository_buttons)
    app.connect("builder-inited", _warn_other_providers)
    app.connect("html-page-context", relaunch, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
