"""Advisory file locks: one writer per source or catalog at a time, and a way to tell whether the
process that made a scratch folder is still alive (warehouse.lake.scratch_dirs).

POSIX `flock`: the kernel releases a lock when its process dies, however it dies, so a lock that
can be taken has no live owner. Windows has no such lock here: runs must not overlap there."""

import os
import time
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

LOCKS = fcntl is not None


class LockBusy(RuntimeError):
    """The lock was still held when the wait allowed (`held(..., timeout=)`) ran out."""


@contextmanager
def held(path: Path, *, required: bool = True, waiting=None, timeout: float | None = None):
    """Hold an exclusive lock on `path` (created if missing), waiting for it if need be. Not
    `required`: a file system that refuses locks (some NFS mounts) leaves it unlocked.
    `waiting(holder)`: called once before waiting, when another process holds the lock; `holder`
    is what that process wrote into the file (`holder_note()`: every caller with `waiting`
    writes its own once it holds the lock), or None. `timeout`: seconds to wait at most, then
    LockBusy."""
    if fcntl is None:
        yield
        return
    with _open(path) as fh:
        try:
            _lock(fh, waiting, timeout)
            locked = True
        except OSError:
            if required:
                raise
            locked = False
        if locked and waiting is not None:
            fh.truncate(0)
            fh.write(holder_note())
            fh.flush()
        try:
            yield
        finally:
            if locked:
                fcntl.flock(fh, fcntl.LOCK_UN)


def _lock(fh, waiting, timeout: float | None = None) -> None:
    """`fh` locked, `waiting` told first when that means waiting; LockBusy after `timeout`."""
    if _took(fh):
        return
    if waiting is not None:
        waiting(os.pread(fh.fileno(), 512, 0).decode(errors="replace").strip() or None)
    if timeout is None:
        fcntl.flock(fh, fcntl.LOCK_EX)
        return
    deadline = time.monotonic() + timeout
    while not _took(fh):
        if time.monotonic() >= deadline:
            raise LockBusy(f"{fh.name} is held by another process")
        time.sleep(0.05)


def _took(fh) -> bool:
    """`fh` locked if nobody holds it now."""
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def holder_note(since: bool = True) -> str:
    """Who holds a lock, for whoever waits for it: this process and machine, and since when."""
    import socket
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"pid {os.getpid()} on {socket.gethostname()}" + (f" since {now}" if since else "")


@contextmanager
def taken_if_free(path: Path):
    """Yield True while holding the lock on `path` if nobody holds it now, else False at once
    (and False whenever it cannot be known: no locks on this system, a file that is not ours
    to open, a file system that refuses locks). A missing file is made, and so is free."""
    if fcntl is None:
        yield False
        return
    try:
        fh = _open(path)
    except OSError:  # its folder went meanwhile, another user's, or a symlink
        yield False
        return
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held (BlockingIOError), or no locks here
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _open(path: Path):
    """The lock file, opened without following a symlink (a folder in a shared temp folder may
    have been planted by another user)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o600)
    return os.fdopen(fd, "a+")
