"""Crush's tables read from a snapshot of a live crush.db (taken by transforms.snapshot)."""

import sqlite3
from contextlib import closing
from pathlib import Path

from transforms.crush.normalise import RawTable
from transforms.snapshot import SnapshotError, open_snapshot

# goose version_id -> number of Crush migrations applied (docs/FORMATS.md, "Crush: schema and migrations")
MIGRATIONS = {
    20250424200609: 1, 20250515105448: 2, 20250624000000: 3, 20250627000000: 4,
    20250810000000: 5, 20250812000000: 6, 20260127000000: 7,
}
TABLES = ("sessions", "messages", "files", "read_files")
REQUIRED = ("sessions", "messages")


def _rows(conn: sqlite3.Connection, sql: str) -> list[tuple]:
    """All rows, text decoded by SQLite's own C decoder; a table holding invalid UTF-8 (rare)
    is read again with the snapshot's tolerant decoder, which replaces it."""
    tolerant = conn.text_factory
    conn.text_factory = str
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError as exc:
        if "decode" not in str(exc):
            raise
    finally:
        conn.text_factory = tolerant
    return conn.execute(sql).fetchall()


def read_snapshot(snapshot: Path) -> tuple[dict[str, RawTable], int | None]:
    """The Crush tables of a snapshot, and its goose schema version."""
    try:
        conn, names = open_snapshot(snapshot, REQUIRED, "a Crush")
        with closing(conn):
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
                tables[name] = RawTable(cols, _rows(conn, f'SELECT rowid, * FROM "{name}" ORDER BY rowid'))
            return tables, version
    except sqlite3.DatabaseError as exc:
        raise SnapshotError(f"snapshot unreadable: {exc}") from None
