"""Scratch folders in the system's temp folder (`TMPDIR`): snapshots of agents' stores, a merge's
local copies of landed files, an export's files.

Each is removed when its work ends. A process killed before that (SIGKILL, the OOM killer, a
power cut) leaves its folder behind, and a snapshot is a copy of private transcripts, as big as
the store: so the first scratch folder a process makes also removes the folders whose owner has
died. A folder's owner holds a lock on a file in it for as long as it works there
(warehouse.lake.locks); the kernel drops that lock when the owner dies, however it dies."""

import os
import shutil
import stat
import tempfile
import time
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from warehouse.lake.locks import LOCKS, held, taken_if_free

PREFIX = "agentlake-"
KINDS = ("snapshot", "merge", "export")
OWNER = ".owner.lock"
# a folder this young may be between its creation and its owner's lock
MIN_AGE_S = 60.0
# a folder with no lock file is from before the locks (or its owner died making it): it may still
# be in use by an older release, so it must be this old
UNOWNED_AGE_S = 86_400.0


@contextmanager
def scratch(kind: str):
    """A new empty folder for `kind` of work, removed at the end."""
    assert kind in KINDS, kind
    sweep_once()
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-"))
    try:
        with held(path / OWNER, required=False):  # a temp folder that refuses locks: never swept
            yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@cache
def sweep_once() -> int:
    """`sweep`, once per process: the leftovers are of processes that died before this one."""
    return sweep()


def sweep(root: Path | None = None, min_age_s: float = MIN_AGE_S) -> int:
    """Remove the scratch folders under `root` (the temp folder) whose owner is dead; returns
    how many. Not on a system without file locks, where a live owner cannot be told apart."""
    if not LOCKS:
        return 0
    root = Path(root or tempfile.gettempdir())
    removed = 0
    now = time.time()
    for kind in KINDS:
        for path in root.glob(f"{PREFIX}{kind}-*"):
            try:
                st = path.lstat()  # a symlink is not a folder of ours, nor another user's folder
                age = now - st.st_mtime
                if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or age < min_age_s or \
                        (age < UNOWNED_AGE_S and not (path / OWNER).exists()):
                    continue
            except OSError:
                continue
            with taken_if_free(path / OWNER) as dead:
                if dead:
                    shutil.rmtree(path, ignore_errors=True)
                    removed += not path.exists()
    return removed
