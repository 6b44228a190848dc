"""The course hub: JupyterHub for a local trial of the course (`hub/start`, tests/test_hub.py).

JupyterHub behind configurable-http-proxy (hub/node_modules, pinned in hub/package.json), one
single-user JupyterLab per person started as that person's Unix user (LocalProcessSpawner: the
hub runs as root), from the course's virtual environment (.venv: torch, nbgrader), with the
grader of the person's role (<state>/student or <state>/instructor first on PYTHONPATH). Of the
repository, other users reach only .venv and hub/: hub/start closes the rest to them.
Each user on the list logs in with their own password (hub/course_auth.py; hub/prepare.py makes
them): good for a trial on one machine, not for a class (the instructor guide says what to use).

Who is who, and where things are, comes from the environment that `hub/start` sets:

    NL_HUB_INSTRUCTOR   the instructor's Unix user (sees the formgrader; owns the course directory)
    NL_HUB_STUDENTS     the students' Unix users, separated by spaces or commas
    NL_HUB_STATE        the hub's state folder (database, cookie secret, per-role Jupyter config)
    NL_HUB_IP, NL_HUB_PORT                 where the hub listens (default 127.0.0.1:8000)
    NL_HUB_API_PORT, NL_HUB_PROXY_API_PORT the hub's and the proxy's internal ports (8081, 8001)

Students' servers get the nbgrader config of role "student" (the exchange, the course id, the
Assignments tab; no formgrader, no Create Assignment toolbar) and the student's part of the
grader (the visible checks and hints), the instructor's the config of role "instructor" (also
the formgrader, pointed at ~/course) and the whole grader. `hub/prepare.py` makes both.
"""
import os
import re
import sys
from pathlib import Path

c = get_config()  # noqa: F821 - provided by JupyterHub

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv"
STATE = Path(os.environ.get("NL_HUB_STATE", REPO / "hub" / "state")).resolve()
INSTRUCTOR = os.environ["NL_HUB_INSTRUCTOR"]
STUDENTS = set(filter(None, re.split(r"[\s,]+", os.environ.get("NL_HUB_STUDENTS", ""))))

# ---------------------------------------------------------------- hub and proxy
c.JupyterHub.bind_url = f"http://{os.environ.get('NL_HUB_IP', '127.0.0.1')}:{os.environ.get('NL_HUB_PORT', '8000')}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(os.environ.get("NL_HUB_API_PORT", "8081"))
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{os.environ.get('NL_HUB_PROXY_API_PORT', '8001')}"
c.ConfigurableHTTPProxy.command = [str(REPO / "hub" / "node_modules" / ".bin" / "configurable-http-proxy")]
c.ConfigurableHTTPProxy.pid_file = str(STATE / "jupyterhub-proxy.pid")
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every single-user server
c.JupyterHub.cleanup_proxy = True

# ---------------------------------------------------------------- who may log in
sys.path.insert(0, str(REPO / "hub"))
from course_auth import CourseAuthenticator  # noqa: E402

c.JupyterHub.authenticator_class = CourseAuthenticator
c.CourseAuthenticator.password_file = str(STATE / "passwords.json")  # hub/prepare.py writes it
c.Authenticator.allowed_users = {INSTRUCTOR} | STUDENTS

# ---------------------------------------------------------------- single-user servers
from jupyterhub.spawner import LocalProcessSpawner  # noqa: E402


class CourseSpawner(LocalProcessSpawner):
    """hub/start runs the hub with umask 077 (its database, its log files: the inbound folders'
    names are in the log). The users' servers get the usual 022 back: nbgrader copies feedback
    with the modes it was written with, and students must be able to read their released feedback."""

    def make_preexec_fn(self, name):
        switch_user = super().make_preexec_fn(name)

        def preexec():
            os.umask(0o022)
            switch_user()

        return preexec


c.JupyterHub.spawner_class = CourseSpawner
c.Spawner.cmd = [str(VENV / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.environment = {
    # nbgrader runs `alembic` from PATH; terminals and kernels use the course's Python.
    # (role_config adds the role's config and grader.)
    "PATH": f"{VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin",
    "VIRTUAL_ENV": str(VENV),
}
# For the browser test only (tests/test_hub.py sets it): JupyterLab's application object in the
# page, so that the test fills the notebook's cells through the notebook model.
if os.environ.get("NL_HUB_EXPOSE_APP") == "1":
    c.Spawner.args = ["--LabApp.expose_app_in_browser=True"]
c.Spawner.start_timeout = 180  # a cold start of JupyterLab with nbgrader on a busy 2-core machine
c.Spawner.http_timeout = 180


def role_config(spawner):
    """Each server reads the Jupyter and nbgrader config of its role, before the user's own, and
    imports its role's grader: <state>/<role>/autograder, which hub/prepare.py copies from the
    repository at every start (the students' copy without grading/, grade.py or any hidden.py).
    PYTHONPATH comes before .venv's editable install, whose finder points into the repository,
    which hub/start closes to other users. Kernels and terminals inherit both."""
    role = "instructor" if spawner.user.name == INSTRUCTOR else "student"
    spawner.environment = dict(spawner.environment, JUPYTER_CONFIG_PATH=str(STATE / "config" / role),
                               PYTHONPATH=str(STATE / role))


c.Spawner.pre_spawn_hook = role_config
