"""Prepare and start the course hub (run through `hub/start`, as root).

    sudo hub/start --instructor prof --students "alice bob" [--create-users] [--port 8000]
    sudo hub/start --remove        # removes what hub/start made (see below)

0. checks, before it creates anything, that other users can run the course's interpreter
   (.venv and its base Python, every folder on the way), and names the folder that stops them;
   that .venv holds no copy of the grader of its own (it must be the editable install); and
   that other users can reach the state folder (their servers read their role's files there);
1. installs the proxy (`npm ci` in hub/) when hub/node_modules lacks it;
2. refuses to start while the repository, .venv, hub/ or the state folder (or one above) is not
   root's alone; then closes every top-level entry of the repository to other users except .venv
   and hub/ (chmod go-rwx, the entry itself): the servers need nothing else of it, and the rest
   (solutions/, tests/, .git, book/instructor/, benchmarks/, the README, the grader's source with
   its grading/ and hidden cases) is instructor material;
3. checks (or, with --create-users, creates) the Unix users;
4. copies the grader of each role from the repository's autograder/, anew at every start:
   <state>/student/autograder holds only the files that `autograder.grading.parts` gives the
   student's side (no grading/, grade.py or hidden.py; root's, readable by all);
   <state>/instructor/autograder holds the whole package (and the book's MathJax, which the
   feedback pages inline), in a folder only the instructor can enter. The hub puts the role's
   folder first on each server's PYTHONPATH (hub/jupyterhub_config.py), before .venv's editable
   install, which points into the closed repository. Then it checks, as a student, that
   `import autograder` gives the student's copy and no `autograder.grading`, and, as the
   instructor, that the grader imports;
5. makes the nbgrader exchange (mode 1777), the course's folders in it (the instructor's, with
   nbgrader's modes) and the hub's state folder;
6. writes the Jupyter and nbgrader config of each role into <state>/config/{student,instructor}/;
7. copies the course (nbgrader_config.py, solutions/, exercises/) into the instructor's
   ~/course, owned by the instructor and closed to everyone else, unless it exists;
8. runs JupyterHub with hub/jupyterhub_config.py in the state folder (Ctrl-C stops the hub, the
   proxy and every single-user server).

Each user logs in with their own password (hub/course_auth.py): a user without one in
<state>/passwords.json (salted hashes, root only) gets a random one, printed once and added to
<state>/passwords.txt (mode 0600, for root to hand out; delete it afterwards).

What it makes is recorded in <state>/made.json as it makes it (the users it created, an exchange
outside the state folder). `hub/start --remove [--state DIR]` removes exactly that: those users
with their homes (the course copy in a created instructor's home goes with it), the course's
exchange folders, and the state folder. Users it did not create are left alone.
"""
from __future__ import annotations

import argparse
import json
import os
import pwd
import re
import secrets
import shutil
import stat
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv"
HUB = REPO / "hub"
COURSE_ID = "normalization-layers"  # as in the course's nbgrader_config.py
COURSE_FILES = ("nbgrader_config.py", "solutions", "exercises")
PROXY = HUB / "node_modules" / ".bin" / "configurable-http-proxy"
PACKAGE = REPO / "autograder"
# What the users' servers need of REPO: the course's environment, and hub/ (the default state
# folder, with the role's config and grader, is in it). Every user traverses REPO to reach them;
# every other top-level entry is closed to them (close_repository).
OPEN_TO_SERVERS = (".venv", "hub")
# The grader each role's servers import: <state>/<role>/autograder, first on their PYTHONPATH.
ROLES = ("student", "instructor")
# pages.MATHJAX_FILE: the feedback pages inline the book's MathJax, found beside the package.
MATHJAX = Path("book") / "_static" / "mathjax"

# JupyterLab defaults for the hub's users: no news or update checks (they would go to the
# internet) and every cell rendered (no virtual scrolling).
LAB_OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {"checkForUpdates": False, "fetchNews": "false"},
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
}
# What students do not get: the formgrader and the toolbar that creates assignments.
STUDENT_DISABLED_LAB = ["@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment"]
STUDENT_DISABLED_SERVER = ["nbgrader.server_extensions.formgrader"]


def fail(message: str) -> None:
    sys.exit(f"hub/start: {message}")


def users_from(text: str) -> list[str]:
    return [u for u in re.split(r"[\s,]+", text or "") if u]


def ensure_user(name: str, create: bool, state: Path) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        if not create:
            fail(f"there is no Unix user {name!r} (create it, or pass --create-users)")
    # A home only its owner can read: classmates must not see each other's work.
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "-K", "HOME_MODE=0700", name], check=True)
    record_made(state, user=name)
    print(f"hub/start: created the Unix user {name}")
    return pwd.getpwnam(name)


def unreachable_folder(path: Path) -> Path | None:
    """The first folder on the way to ``path`` (each link followed) that other users cannot enter."""
    seen: set[Path] = set()
    while path not in seen:
        seen.add(path)
        for folder in reversed([*path.parents]):
            if stat.S_IMODE(os.stat(folder).st_mode) & 0o001 == 0:
                return folder
        if not path.is_symlink():
            return None
        path = (path.parent / os.readlink(path)).absolute()
    return None


def check_interpreter() -> None:
    """Before anything is created: other users (the students' servers) must be able to run the
    course's Python. A .venv made from pyenv's Python under /root fails here, for example."""
    python = VENV / "bin" / "python"
    blocked = unreachable_folder(python)
    base = Path(os.path.realpath(python))
    if blocked is None:
        probe = subprocess.run(["runuser", "-u", "nobody", "--", str(python), "-c", "print('ok')"],
                               capture_output=True, text=True, cwd="/")
        if probe.returncode == 0 and probe.stdout.strip() == "ok":
            return
        reason = f"it fails for them: {(probe.stderr or probe.stdout).strip()[-1000:]}"
    else:
        mode = stat.S_IMODE(os.stat(blocked).st_mode)
        reason = f"{blocked} (mode {mode:o}) is closed to them"
    fail(f"other users cannot run the course's Python: {python} runs {base}, and {reason}. The "
         f"students' servers run it as their own users. Nothing was created. Rebuild the environment "
         f"on an interpreter every user can run, for example Debian's: `cd {REPO} && "
         f"/usr/bin/python3.11 -m venv --clear .venv && .venv/bin/pip install -r requirements.txt`")


def check_state_reachable(state: Path) -> None:
    """The servers read their role's config and grader in the state folder, as their users."""
    existing = next(folder for folder in [state, *state.parents] if folder.exists())
    blocked = unreachable_folder(existing / "config")
    if blocked is not None:
        fail(f"other users cannot reach the state folder {state}: {blocked} (mode "
             f"{stat.S_IMODE(os.stat(blocked).st_mode):o}) is closed to them, and the servers read their "
             f"role's config and grader there as their users. Nothing was created. Choose another --state")


def check_no_package_copy() -> None:
    """Every user runs .venv: a copy of the grader installed in it (`pip install .` rather than
    the editable `-e .`) would give students its grading/ and hidden cases."""
    copies = sorted(VENV.glob("lib/python3*/site-packages/autograder"))
    if copies:
        fail(f"{copies[0]} is a copy of the whole grader (its grading/ and hidden cases) in the course's "
             f"environment, which every user can read. Nothing was created. Install it editable, as "
             f"requirements.txt does: `cd {REPO} && .venv/bin/pip uninstall -y normlayers-autograder "
             f"&& .venv/bin/pip install -e .`")


def close_repository() -> list[str]:
    """Close every top-level entry of REPO but OPEN_TO_SERVERS to other users (the entry itself:
    what lies below a closed folder cannot be reached). Returns the names it changed."""
    closed = []
    for path in sorted(REPO.iterdir()):
        if path.name in OPEN_TO_SERVERS:
            continue
        if path.is_symlink():
            fail(f"{path} is a link: hub/start closes the repository's entries to other users and does "
                 f"not follow links (what it points to may be open). Replace it by a copy, or remove it")
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        if mode & 0o077:
            os.chmod(path, mode & ~0o077)
            closed.append(path.name)
    return closed


def check_root_owned(paths: list[Path]) -> None:
    """Root runs code and writes config from these paths: nobody else may be able to change them,
    nor any folder above them (a sticky folder such as /tmp is fine: others cannot replace what
    root made there)."""
    for path in paths:
        for folder in [path, *path.parents]:
            if not folder.exists():
                continue
            info = os.lstat(folder)
            mode = stat.S_IMODE(info.st_mode)
            sticky = stat.S_ISDIR(info.st_mode) and mode & stat.S_ISVTX
            if info.st_uid != 0 or (mode & 0o022 and not sticky):
                fail(f"{folder} is owned by uid {info.st_uid} or writable by others (mode {mode:o}); root runs "
                     f"code from it. Install the course where only root can change it (for example "
                     f"`sudo chown -R root: {REPO} && sudo chmod -R go-w {REPO}`, or a copy under /opt)")


def student_parts():
    """The repository's own rule for the student's side (autograder/grading/parts.py), read from
    its file: importing the package would import torch in root's process."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("course_parts", PACKAGE / "grading" / "parts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def instructor_files(package: Path) -> list[Path]:
    """Every file of the package but compiled ones, relative to it."""
    return sorted(p.relative_to(package) for p in package.rglob("*")
                  if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def copy_files(source: Path, names, target: Path) -> None:
    """Copy ``names`` (relative to ``source``) into the new folder ``target``: root's, folders
    0755, files 0644 (whatever root's umask)."""
    for name in names:
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, destination)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def make_packages(state: Path, instructor: pwd.struct_passwd) -> dict[str, Path]:
    """The grader of each role, remade from REPO at every start; returns the folder of each role
    (what the hub puts first on the role's PYTHONPATH)."""
    folders = {role: state / role for role in ROLES}
    for folder in folders.values():
        if folder.is_symlink() or folder.is_file():
            folder.unlink()
        elif folder.exists():
            shutil.rmtree(folder)  # fd-based: a link the instructor put inside is removed, not followed
        folder.mkdir(mode=0o700)
    copy_files(PACKAGE, student_parts().student_files(PACKAGE), folders["student"] / "autograder")
    copy_files(PACKAGE, instructor_files(PACKAGE), folders["instructor"] / "autograder")
    if (REPO / MATHJAX).is_dir():
        book = REPO / MATHJAX.parts[0]
        copy_files(book, [p.relative_to(book) for p in sorted((REPO / MATHJAX).rglob("*")) if p.is_file()],
                   folders["instructor"] / MATHJAX.parts[0])
    folders["student"].chmod(0o755)
    # Made by root while closed; the instructor gets the folder only once it is complete.
    os.chown(folders["instructor"], instructor.pw_uid, instructor.pw_gid)
    folders["instructor"].chmod(0o500)
    return folders


STUDENT_PROBE = """
import importlib.util, json, autograder, nbgrader, jupyterhub, jupyterlab
print(json.dumps({"autograder": autograder.__file__,
                  "grading": importlib.util.find_spec("autograder.grading") is not None}))
"""
INSTRUCTOR_PROBE = """
import json, autograder, autograder.grading.grade, nbgrader
print(json.dumps({"autograder": autograder.__file__, "grading": True}))
"""


def server_python(user: str, pythonpath: Path, probe: str) -> subprocess.CompletedProcess:
    """``probe`` run by .venv's Python as ``user``, with the PYTHONPATH the hub gives their server."""
    return subprocess.run(["runuser", "-u", user, "--", "env", f"PYTHONPATH={pythonpath}", str(VENV / "bin" / "python"),
                           "-c", probe], capture_output=True, text=True, cwd="/")


def check_servers(folders: dict[str, Path], student: str, instructor: str) -> None:
    """As the servers will: a student imports the student's copy and cannot import the grading
    part; the instructor imports the whole grader."""
    for user, role, probe in ((student, "student", STUDENT_PROBE), (instructor, "instructor", INSTRUCTOR_PROBE)):
        done = server_python(user, folders[role], probe)
        try:
            found = json.loads(done.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            fail(f"the user {user} cannot use the course's environment {VENV} with the {role}'s grader "
                 f"{folders[role]} (`pip install -r requirements.txt` done?):\n{done.stderr[-2000:]}")
        if not found["autograder"].startswith(f"{folders[role]}/") or found["grading"] != (role == "instructor"):
            fail(f"as {user}, `import autograder` gives {found['autograder']} (grading part importable: "
                 f"{found['grading']}), not the {role}'s grader in {folders[role]}: something else on "
                 f"{VENV}'s path provides the package")


def write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o755)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)  # never through a link
    with os.fdopen(fd, "w") as file:
        os.fchmod(fd, mode)
        file.write(text)


def write_private(path: Path, text: str, append: bool = False) -> None:
    """Write a root-only (0600) file; never through a symlink someone put in its place."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w") as file:
        os.fchmod(fd, 0o600)
        file.write(text)


def make_passwords(state: Path, users: list[str]) -> Path:
    """A random password for each user who has none yet; returns the file of hashes."""
    from course_auth import hash_password  # hub/, this script's folder (imports jupyterhub)

    hashes = state / "passwords.json"
    entries = json.loads(hashes.read_text()) if hashes.exists() else {}
    new = {user: secrets.token_urlsafe(12) for user in users if user not in entries}
    if new:
        entries.update({user: hash_password(password) for user, password in new.items()})
        write_private(hashes, json.dumps(entries, indent=1))
        write_private(state / "passwords.txt", "".join(f"{u} {p}\n" for u, p in new.items()), append=True)
        for user, password in new.items():
            print(f"hub/start: the password of {user} is {password}")
        print(f"hub/start: (also in {state / 'passwords.txt'}, readable by root only)")
    return hashes


def nbgrader_config(exchange: Path, course_root: Path | None) -> str:
    lines = ["# Written by hub/start: the nbgrader settings of this role on the course hub.",
             "c = get_config()",
             f"c.CourseDirectory.course_id = {COURSE_ID!r}",
             f"c.Exchange.root = {str(exchange)!r}"]
    if course_root is not None:  # the instructor's: the formgrader shows students' notebooks
        lines += [f"c.CourseDirectory.root = {str(course_root)!r}",
                  "from autograder.grading.pages import protect_formgrader",
                  "protect_formgrader(c)  # the scrub and a script policy on its pages"]
    return "\n".join(lines) + "\n"


def write_role_configs(state: Path, exchange: Path, course_root: Path) -> None:
    config = state / "config"
    for role in ("student", "instructor"):
        folder = config / role
        if folder.exists():
            shutil.rmtree(folder)
        # Terminals run bash as a plain (not a login) shell: a login shell reads /etc/profile,
        # whose PATH drops the course's environment (python, nbgrader) that the hub put first.
        server: dict = {"LabApp": {"app_settings_dir": str(folder / "lab-settings")},
                        "ServerApp": {"terminado_settings": {"shell_command": ["/bin/bash"]}}}
        write(folder / "lab-settings" / "overrides.json", json.dumps(LAB_OVERRIDES, indent=2))
        if role == "student":
            write(folder / "nbgrader_config.py", nbgrader_config(exchange, None))
            server["ServerApp"]["jpserver_extensions"] = {name: False for name in STUDENT_DISABLED_SERVER}
            write(folder / "labconfig" / "page_config.json",
                  json.dumps({"disabledExtensions": {name: True for name in STUDENT_DISABLED_LAB}}, indent=2))
        else:
            write(folder / "nbgrader_config.py", nbgrader_config(exchange, course_root))
            # The formgrader panel is a page of the same server in an iframe; the single-user
            # server forbids every frame by default (frame-ancestors 'none'), which leaves it blank.
            server["ServerApp"]["tornado_settings"] = {"headers": {
                "Content-Security-Policy": "frame-ancestors 'self'"}}
        write(folder / "jupyter_server_config.json", json.dumps(server, indent=2))


# nbgrader's own modes (release_assignment.py, release_feedback.py): students read outbound, drop
# submissions into inbound without seeing the others, and reach only their own feedback.
EXCHANGE_MODES = {"": 0o755, "outbound": 0o755, "inbound": 0o2733, "feedback": 0o711}


def make_course_exchange(exchange: Path, instructor: pwd.struct_passwd, state: Path) -> None:
    """The course's folders in the exchange, the instructor's before any student can make them
    (whoever makes them first owns them, and with them the releases and the submissions)."""
    if not (exchange / COURSE_ID).exists():
        record_made(state, exchange=str(exchange), course_exchange_made=True)
    for name, mode in EXCHANGE_MODES.items():
        path = exchange / COURSE_ID / name
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            os.mkdir(path, 0o700)
            os.chown(path, instructor.pw_uid, instructor.pw_gid)
            info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != instructor.pw_uid:
            fail(f"{path} is not a folder of {instructor.pw_name} (owner uid {info.st_uid}): someone made it before the "
                 f"course did; move it away and look at what is inside")
        os.chmod(path, mode)


def copy_course(instructor: pwd.struct_passwd) -> Path:
    course = Path(instructor.pw_dir) / "course"
    if not course.exists():
        course.mkdir(mode=0o700)
        for name in COURSE_FILES:
            source = REPO / name
            if source.is_dir():
                shutil.copytree(source, course / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
            else:
                shutil.copy2(source, course / name)
        for path in [course, *course.rglob("*")]:
            os.lchown(path, instructor.pw_uid, instructor.pw_gid)
        print(f"hub/start: copied the course into {course}")
    course.chmod(0o700)  # solutions/ and the gradebook: the instructor's only
    return course


def record_made(state: Path, user: str | None = None, **facts) -> None:
    """Add to <state>/made.json what hub/start made, at once (a later failure keeps the record)."""
    path = state / "made.json"
    made = json.loads(path.read_text()) if path.exists() else {"users": []}
    if user is not None and user not in made["users"]:
        made["users"].append(user)
    made.update(facts)
    write_private(path, json.dumps(made, indent=1))


def remove_made(state: Path) -> None:
    """Undo hub/start: the users it created (homes included), the course's exchange, the state."""
    path = state / "made.json"
    if not path.is_file():
        fail(f"{path} does not exist: nothing hub/start made is recorded there (--state?)")
    made = json.loads(path.read_text())
    running = subprocess.run(["pgrep", "-u", ",".join(made["users"])], capture_output=True,
                             text=True).stdout.split() if made["users"] else []
    if running:
        fail(f"processes of {', '.join(made['users'])} still run ({len(running)}): stop the hub first (Ctrl-C)")
    for user in made["users"]:
        done = subprocess.run(["userdel", "--remove", user], capture_output=True, text=True)
        gone = subprocess.run(["id", user], capture_output=True).returncode != 0
        print(f"hub/start: removed the Unix user {user} and its home" if gone
              else f"hub/start: could not remove {user}: {done.stderr.strip()}")
    exchange = Path(made.get("exchange") or state / "exchange")
    if made.get("course_exchange_made") and (exchange / COURSE_ID).exists():
        shutil.rmtree(exchange / COURSE_ID)
        print(f"hub/start: removed the course's exchange folders {exchange / COURSE_ID}")
    if made.get("exchange_made") and exchange.exists() and not any(exchange.iterdir()):
        exchange.rmdir()
    shutil.rmtree(state)
    print(f"hub/start: removed the hub's state folder {state}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="hub/start", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instructor", default=os.environ.get("NL_HUB_INSTRUCTOR"), help="the instructor's Unix user")
    parser.add_argument("--students", default=os.environ.get("NL_HUB_STUDENTS", ""),
                        help="the students' Unix users, separated by spaces or commas")
    parser.add_argument("--create-users", action="store_true", help="create missing users (home mode 0700)")
    parser.add_argument("--ip", default=os.environ.get("NL_HUB_IP", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("NL_HUB_PORT", "8000")))
    parser.add_argument("--state", type=Path, default=Path(os.environ.get("NL_HUB_STATE", HUB / "state")),
                        help="the hub's state folder (default hub/state; other users must be able to reach it)")
    parser.add_argument("--exchange", type=Path, default=None,
                        help="the nbgrader exchange (default <state>/exchange)")
    parser.add_argument("--prepare-only", action="store_true",
                        help="make the users, folders and config, then stop without starting the hub")
    parser.add_argument("--remove", action="store_true",
                        help="remove what hub/start made (recorded in <state>/made.json) and stop")
    args = parser.parse_args(argv)

    if os.geteuid() != 0:
        fail("run it as root: LocalProcessSpawner starts each server as its user")
    state = args.state.resolve()
    if args.remove:
        remove_made(state)
        return
    students = users_from(args.students)
    if not args.instructor or not students:
        fail("name the instructor and at least one student (--instructor USER --students 'USER ...')")
    if args.instructor in students:
        fail("the instructor cannot also be a student")
    # Every check that needs nothing made comes first: a refusal leaves the machine as it was.
    check_root_owned([REPO, VENV, VENV / "bin", HUB, state])
    check_interpreter()
    check_no_package_copy()
    check_state_reachable(state)
    if not os.access(PROXY, os.X_OK):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=HUB, check=True)
    if closed := close_repository():
        print(f"hub/start: closed to other users (the students' servers need none of it): "
              f"{', '.join(closed)} in {REPO}")

    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o711)  # the database and the cookie secret are root's; config/ and the exchange are not
    instructor = ensure_user(args.instructor, args.create_users, state)
    for student in students:
        user = ensure_user(student, args.create_users, state)
        if stat.S_IMODE(os.stat(user.pw_dir).st_mode) & 0o077:
            print(f"hub/start: warning: {user.pw_dir} is open to other users; classmates can read "
                  f"{student}'s work there (chmod 700 {user.pw_dir})", file=sys.stderr)
    folders = make_packages(state, instructor)
    check_servers(folders, students[0], args.instructor)

    exchange = (args.exchange or state / "exchange").resolve()
    if not exchange.exists():
        record_made(state, exchange=str(exchange), exchange_made=True)
    exchange.mkdir(parents=True, exist_ok=True)
    exchange.chmod(0o1777)  # everyone writes, nobody removes what others wrote
    make_course_exchange(exchange, instructor, state)
    course = copy_course(instructor)
    write_role_configs(state, exchange, course)

    make_passwords(state, [args.instructor, *students])
    if args.prepare_only:
        print(f"hub/start: prepared (users, exchange, config, course); `hub/start` starts the hub, "
              f"`hub/start --remove --state {state}` removes what it made")
        return
    env = dict(os.environ, NL_HUB_INSTRUCTOR=args.instructor, NL_HUB_STUDENTS=" ".join(students),
               NL_HUB_STATE=str(state), NL_HUB_IP=args.ip, NL_HUB_PORT=str(args.port),
               PATH=f"{VENV / 'bin'}:{HUB / 'node_modules' / '.bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    env.pop("NL_HUB_PASSWORD", None)
    print(f"hub/start: the hub is at http://{args.ip}:{args.port}/ (instructor {args.instructor}, "
          f"students {', '.join(students)}; exchange {exchange}; course {course})", flush=True)
    os.chdir(state)
    # The hub's files (jupyterhub.sqlite, the proxy's pid file, any log it is sent to) are root's
    # alone; the users' servers set 022 again (CourseSpawner in hub/jupyterhub_config.py).
    os.umask(0o077)
    os.execve(str(VENV / "bin" / "jupyterhub"),
              [str(VENV / "bin" / "jupyterhub"), "-f", str(HUB / "jupyterhub_config.py")], env)


if __name__ == "__main__":
    main()
