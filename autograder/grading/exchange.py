"""`nbgrader collect` that takes only what the student really submitted.

nbgrader's collect runs as the instructor and copies each folder of the exchange's inbound with
``shutil.copytree`` (links followed): a student who replaces the notebook in their inbound folder
by a symlink to a classmate's submission or to the course's solutions gets that file collected,
graded and fed back as theirs. And a folder whose owner is not the student named in it (one
student submitting in another's name) only draws a warning there.

SafeExchangeCollect (``c.ExchangeFactory.collect`` in nbgrader_config.py) refuses, with an error
naming the student, a submission whose folder is owned by another user or holds anything but
regular files and folders; it copies links as links (never what they point at) and checks the
copy again, which only the instructor can change, so swapping a file in after the first check
does not help either.
"""
from __future__ import annotations

import os
import pwd
import shutil
import stat

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import ignore_patterns


def unsafe_entries(folder: str) -> list[str]:
    """Everything under ``folder`` that is not a regular file or folder (links not followed)."""
    found = []
    for entry in os.scandir(folder):
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            found += unsafe_entries(entry.path)
        elif not stat.S_ISREG(mode):
            found.append(entry.path)
    return found


class SafeExchangeCollect(ExchangeCollect):

    def init_src(self):
        super().init_src()
        self.src_records = [r for r in self.src_records if self._acceptable(r)]

    def _acceptable(self, record: dict) -> bool:
        student, path = record["username"], os.path.join(self.inbound_path, record["filename"])
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode):
            self.log.error("Not collecting %s's submission: %s is not a folder", student, path)
            return False
        if self.check_owner:
            try:
                owner = pwd.getpwuid(info.st_uid).pw_name
            except KeyError:
                owner = f"uid {info.st_uid}"
            if owner != student:
                self.log.error("Not collecting %s's submission: %s is owned by %s, not by %s",
                               student, path, owner, student)
                return False
        if bad := unsafe_entries(path):
            self.log.error("Not collecting %s's submission: it holds links or special files: %s",
                           student, ", ".join(bad))
            return False
        return True

    def do_copy(self, src, dest, log=None):
        if self.get_size(src) > 1000 * self.coursedir.max_dir_size:
            raise RuntimeError(f"Directory size is too big: {src}")
        shutil.copytree(src, dest, symlinks=True,
                        ignore=ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                               max_file_size=self.coursedir.max_file_size, log=self.log))
        # The student may have changed the folder since init_src looked: judge the copy.
        if bad := unsafe_entries(dest):
            shutil.rmtree(dest)
            self.log.error("Not collecting the submission in %s: it holds links or special files: %s",
                           src, ", ".join(os.path.relpath(p, dest) for p in bad))
