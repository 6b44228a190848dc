"""A throw-away PostgreSQL server for the tests: Debian's ``postgresql`` package, a cluster made
with ``initdb`` in a temporary folder, listening on a free port of 127.0.0.1, stopped and deleted
afterwards.  ``.ci/run`` installs the package; elsewhere the tests that need it are skipped
(and fail under CI=true).

PostgreSQL refuses to run as root, so a root test run starts it as the package's ``postgres``
user (or ``nobody``).
"""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from course import free_port


def server_bin() -> Path | None:
    """The newest installed PostgreSQL's bin folder (Debian keeps it out of PATH)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


def _as_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return ["runuser", "-u", name, "--"]
        except KeyError:
            continue
    raise RuntimeError("running as root and neither a postgres nor a nobody user exists")


class Server:
    def __init__(self, port: int):
        self.port = port

    def database(self, name: str) -> str:
        """A new, empty database; its SQLAlchemy URL (the psycopg 3 driver)."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="grader", dbname="postgres", autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://grader@127.0.0.1:{self.port}/{name}"


@contextmanager
def throwaway_postgres():
    """Yield a :class:`Server` of our own, running until the block ends."""
    bin_dir = server_bin()
    if bin_dir is None:
        raise FileNotFoundError("PostgreSQL's server is not installed (apt-get install postgresql)")
    folder = Path(tempfile.mkdtemp(prefix="pg-"))
    data, sockets, port = folder / "data", folder / "sockets", free_port()
    sockets.mkdir()
    user = _as_user()
    if user:
        account = pwd.getpwnam(user[2])
        folder.chmod(0o755)
        for path in (folder, sockets):
            os.chown(path, account.pw_uid, account.pw_gid)
    run = lambda *args: subprocess.run(user + list(args), check=True, capture_output=True, text=True, timeout=120)  # noqa: E731
    try:
        run(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "grader", "-E", "UTF8", "--no-sync")
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-w", "-t", "60",
            "-o", f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        _wait_until_ready(port)
        yield Server(port)
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(user + [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                           capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def _wait_until_ready(port: int) -> None:
    import psycopg

    for attempt in range(50):
        try:
            with psycopg.connect(host="127.0.0.1", port=port, user="grader", dbname="postgres"):
                return
        except psycopg.OperationalError:
            if attempt == 49:
                raise
            time.sleep(0.2)
