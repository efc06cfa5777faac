"""A consistent, read-only snapshot of a live SQLite store (Crush's `crush.db`, OpenCode's
`opencode.db`). The only code that opens an agent's database, but for the one row Antigravity's
discovery reads (transforms/antigravity/discover.py).

The source is opened `mode=ro` (no writes, no migrations) and copied with SQLite's backup API,
which reads through the WAL: committed rows that are not yet checkpointed are included. Both
agents run in WAL mode, so our read transaction never blocks their writer.
"""

import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

from transforms.provider import SourceError


class SnapshotError(SourceError):
    """The store cannot be read; the message says why, in words a user can act on."""


def take_snapshot(db_path: str, dest: Path, busy_timeout_s: float = 10.0) -> None:
    uri = f"file:{quote(str(db_path))}?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, isolation_level=None)) as src:
            # the read lock first, under the busy timeout: Python's backup() retries a locked
            # database for as long as it stays locked (a writer holding it 5 minutes hung the run)
            src.execute("BEGIN")
            src.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            with closing(sqlite3.connect(dest)) as dst:
                src.backup(dst)  # all pages in one step: one consistent read transaction
                dst.execute("PRAGMA journal_mode=DELETE")  # the copy is ours: no -wal beside it
    except sqlite3.DatabaseError as exc:
        raise SnapshotError(_explain(db_path, exc)) from None


def _explain(db_path: str, exc: Exception) -> str:
    msg = str(exc)
    if "not a database" in msg or "malformed" in msg:
        return f"{db_path} is not a readable SQLite database (corrupt?): {msg}"
    if "locked" in msg or "busy" in msg:
        return f"{db_path} stayed locked past the timeout: {msg}"
    if "unable to open" in msg:
        return f"cannot open {db_path} read-only (permissions, or a missing -shm on a read-only mount?): {msg}"
    return f"{db_path}: {msg}"


def decode_text(b: bytes) -> str:
    # invalid UTF-8 must not abort the read; U+FFFD is what the agent itself would have stored
    return b.decode("utf-8", "replace")


def open_snapshot(snapshot: Path, required: tuple[str, ...], agent: str) -> tuple[sqlite3.Connection, set[str]]:
    """A connection to the snapshot (tolerant text decoding) and its table names; SnapshotError
    when a required table is missing. The caller closes the connection."""
    conn = sqlite3.connect(snapshot)
    conn.text_factory = decode_text
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    missing = [t for t in required if t not in names]
    if missing:
        conn.close()
        what = "an empty file" if not names else f"tables: {', '.join(sorted(names))}"
        raise SnapshotError(f"not {agent} database: no {' or '.join(missing)} table ({what})")
    return conn, names
