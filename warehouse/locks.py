"""Advisory file locks: one writer per source or catalog at a time, and a way to tell whether the
process that made a scratch folder is still alive (warehouse.scratch).

POSIX `flock`: the kernel releases a lock when its process dies, however it dies, so a lock that
can be taken has no live owner. Windows has no such lock here: runs must not overlap there."""

from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

LOCKS = fcntl is not None


@contextmanager
def held(path: Path):
    """Hold an exclusive lock on `path` (created if missing), waiting for it if need be."""
    if fcntl is None:
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def taken_if_free(path: Path):
    """Yield True while holding the lock on `path` if nobody holds it now, else False at once
    (and always False on a system without locks: nothing is known there). A missing file is
    made, and so is free."""
    if fcntl is None:
        yield False
        return
    try:
        fh = open(path, "a")
    except OSError:  # its folder went meanwhile, or is another user's
        yield False
        return
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
