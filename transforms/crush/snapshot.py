"""A consistent, read-only snapshot of a live crush.db. The only code that opens an agent's db.

The source is opened `mode=ro` (no writes, no migrations) and copied with SQLite's backup API,
which reads through the WAL: committed rows that are not yet checkpointed are included. Crush
runs in WAL mode, so our read transaction never blocks its writer.
"""

import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

from transforms.crush.normalise import RawTable
from transforms.provider import SourceError

# goose version_id -> number of Crush migrations applied (crush-format.md §1.2)
MIGRATIONS = {
    20250424200609: 1, 20250515105448: 2, 20250624000000: 3, 20250627000000: 4,
    20250810000000: 5, 20250812000000: 6, 20260127000000: 7,
}
TABLES = ("sessions", "messages", "files", "read_files")
REQUIRED = ("sessions", "messages")


class SnapshotError(SourceError):
    """The store cannot be read; the message says why, in words a user can act on."""


def take_snapshot(db_path: str, dest: Path, busy_timeout_s: float = 10.0) -> None:
    uri = f"file:{quote(str(db_path))}?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=busy_timeout_s)) as src:
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


def _decode(b: bytes) -> str:
    # invalid UTF-8 must not abort the read; U+FFFD is what Crush itself would have stored
    return b.decode("utf-8", "replace")


def read_snapshot(snapshot: Path) -> tuple[dict[str, RawTable], int | None]:
    """The Crush tables of a snapshot, and its goose schema version."""
    try:
        with closing(sqlite3.connect(snapshot)) as conn:
            conn.text_factory = _decode
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            missing = [t for t in REQUIRED if t not in names]
            if missing:
                what = "an empty file" if not names else f"tables: {', '.join(sorted(names))}"
                raise SnapshotError(f"not a Crush database: no {' or '.join(missing)} table ({what})")
            version = None
            if "goose_db_version" in names:
                version = conn.execute(
                    "SELECT MAX(version_id) FROM goose_db_version WHERE is_applied=1"
                ).fetchone()[0]
            tables = {}
            for name in TABLES:
                if name not in names:
                    continue
                cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{name}")')]
                rows = conn.execute(f'SELECT rowid, * FROM "{name}" ORDER BY rowid').fetchall()
                tables[name] = RawTable(cols, rows)
            return tables, version
    except sqlite3.DatabaseError as exc:
        raise SnapshotError(f"snapshot unreadable: {exc}") from None
