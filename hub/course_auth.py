"""Per-user passwords for the course hub (hub/prepare.py makes them; the hub checks them).

A shared password would let every user log in as every other user, the instructor included.
Here each user has their own random password; the hub keeps only salted scrypt hashes, in a
JSON file that only root reads ({"user": {"salt": hex, "hash": hex}}). For a class, use your
institution's login instead (OAuthenticator, LTI or PAM) and TLS: the instructor guide says how.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from jupyterhub.auth import Authenticator
from traitlets import Unicode

# scrypt's usual interactive cost: ~50 ms and 16 MiB per try, which slows guessing.
SCRYPT = {"n": 2**14, "r": 8, "p": 1}


def hash_password(password: str, salt: bytes | None = None) -> dict[str, str]:
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, **SCRYPT)
    return {"salt": salt.hex(), "hash": digest.hex()}


def check_password(entry: dict[str, str] | None, password: str) -> bool:
    # An unknown user costs the same scrypt as a known one: timing does not tell who exists.
    salt = bytes.fromhex(entry["salt"]) if entry else b"\0" * 16
    computed = hash_password(password, salt)["hash"]
    return entry is not None and hmac.compare_digest(computed, entry["hash"])


class CourseAuthenticator(Authenticator):
    """Logs a user in when the password matches their own hash in ``password_file``."""

    password_file = Unicode(help="root-only JSON file of the users' password hashes").tag(config=True)

    async def authenticate(self, handler, data):
        name, password = data.get("username", ""), data.get("password", "")
        path = Path(self.password_file)
        if os.stat(path).st_mode & 0o077:  # hub/prepare.py writes it 0600; anything else is tampering
            self.log.error("%s is open to other users: refusing every login", path)
            return None
        entries = json.loads(path.read_text())
        if check_password(entries.get(name), password):
            return name
        self.log.warning("failed login for %r", name)
        return None
