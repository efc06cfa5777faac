"""Snapshotting a live crush.db: WAL-only rows, concurrent writers, read-only, schema stages, bad files.

Real SQLite files in WAL mode, built with transforms.synth.crush; sources come from discovery.
"""

import hashlib
import os
import shutil
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest

from transforms.crush.discover import discover
from transforms.crush.snapshot import read_snapshot
from transforms.synth.crush import (
    STAGES,
    add_message,
    add_session,
    close_keeping_wal,
    create_crush_db,
    finish_part,
    text_part,
)
from transforms.snapshot import SnapshotError, take_snapshot
from warehouse.land.ingest import Run, ingest_all, ingest_source
from warehouse.lake.layout import Layout

T0 = 1_767_600_000  # seconds, as Crush stores them


# --------------------------------------------------------------------------- helpers


def write_sessions(conn, n_sessions: int, per_session: int, prefix: str = "s") -> int:
    """Sessions with alternating user/assistant messages; returns the number of messages written."""
    for i in range(n_sessions):
        sid = f"{prefix}{i}"
        add_session(conn, sid, title=f"session {sid}", created_at=T0 + i)
        for j in range(per_session):
            role = "user" if j % 2 == 0 else "assistant"
            parts = [text_part(f"{sid} says {j}")] + ([finish_part("end_turn", T0 + j)] if role == "assistant" else [])
            add_message(conn, f"{sid}-m{j}", sid, role, parts, created_at=T0 + i + j)
    return n_sessions * per_session


def new_db(tmp_path: Path, name: str = "proj", stage: int = 7) -> tuple[Path, sqlite3.Connection]:
    db = tmp_path / name / ".crush" / "crush.db"
    return db, create_crush_db(db, stage)


def source_of(path: Path):
    found = discover(env={}, extra_dbs=[path], use_default=False)
    assert found.problems == [], found.problems
    (src,) = found.sources
    return src


def snapshot(db: Path, tmp_path: Path):
    """Row counts per table and the goose version seen by a fresh snapshot of `db`."""
    dest = tmp_path / f"snap-{time.monotonic_ns()}.db"
    take_snapshot(str(db), dest)
    tables, version = read_snapshot(dest)
    dest.unlink()
    return {name: len(t.rows) for name, t in tables.items()}, version


def snapshot_of(db: Path, tmp_path: Path, sql: str):
    dest = tmp_path / f"snap-{time.monotonic_ns()}.db"
    take_snapshot(str(db), dest)
    with closing(sqlite3.connect(dest)) as conn:
        result = conn.execute(sql).fetchone()
    dest.unlink()
    return result


def count_in_main_file_alone(db: Path, tmp_path: Path, table: str) -> int:
    """Rows of `table` in crush.db without its -wal (a copy of just the main file)."""
    alone = tmp_path / "main-file-alone.db"
    shutil.copyfile(db, alone)
    with closing(sqlite3.connect(alone)) as conn:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def schema_of(db: Path):
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return (
            conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall(),
            conn.execute("SELECT version_id, is_applied FROM goose_db_version ORDER BY id").fetchall(),
        )


@pytest.fixture
def layout(tmp_path):
    return Layout.resolve(home=tmp_path / "agentlake-home")


# --------------------------------------------------------------------------- WAL-only rows


def test_rows_only_in_the_wal_are_seen_while_the_writer_is_open(tmp_path, layout):
    db, conn = new_db(tmp_path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # schema in the main file ...
        conn.execute("PRAGMA wal_autocheckpoint=0")  # ... rows only in the -wal
        written = write_sessions(conn, 3, 4)

        assert Path(f"{db}-wal").stat().st_size > 0
        assert count_in_main_file_alone(db, tmp_path, "messages") == 0
        assert count_in_main_file_alone(db, tmp_path, "sessions") == 0

        counts, _ = snapshot(db, tmp_path)
        assert counts["sessions"] == 3 and counts["messages"] == written

        result = ingest_source(source_of(db), Run(layout, "run-wal"))
        assert result.status == "ok", result.error
        assert result.rows["sessions"] == 3 and result.rows["messages"] == written
        assert result.reconciled
    finally:
        conn.close()


def test_wal_left_behind_by_a_closed_writer_is_read_without_touching_the_db(tmp_path, layout):
    db, conn = new_db(tmp_path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    written = write_sessions(conn, 2, 3)
    close_keeping_wal(conn, db)  # as after Crush was killed: committed frames only in -wal, no -shm
    wal = Path(f"{db}-wal")
    assert wal.stat().st_size > 0 and count_in_main_file_alone(db, tmp_path, "messages") == 0
    db_sha, wal_sha, mtime = sha256(db), sha256(wal), db.stat().st_mtime_ns

    result = ingest_source(source_of(db), Run(layout, "run-left-wal"))

    assert result.status == "ok", result.error
    assert result.rows["messages"] == written
    # our read-only reader must not checkpoint the WAL into the user's db
    assert (sha256(db), db.stat().st_mtime_ns) == (db_sha, mtime)
    assert sha256(wal) == wal_sha


# --------------------------------------------------------------------------- concurrent writers


def test_open_write_transaction_does_not_block_and_is_not_seen(tmp_path, layout):
    db, conn = new_db(tmp_path)
    committed = write_sessions(conn, 2, 2)
    conn.close()

    writer = sqlite3.connect(db, isolation_level=None, timeout=30)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("BEGIN IMMEDIATE")
        pending = write_sessions(writer, 1, 3, prefix="pending")

        started = time.monotonic()
        counts, _ = snapshot(db, tmp_path)
        result = ingest_source(source_of(db), Run(layout, "run-busy"))
        elapsed = time.monotonic() - started

        assert elapsed < 3, f"snapshot waited {elapsed:.1f}s on a writer"
        assert counts["messages"] == committed and counts["sessions"] == 2
        assert result.status == "ok" and result.rows["messages"] == committed

        writer.execute("COMMIT")
        after, _ = snapshot(db, tmp_path)
        assert after["messages"] == committed + pending and after["sessions"] == 3
    finally:
        writer.close()


def test_snapshots_stay_consistent_while_a_writer_commits_in_a_loop(tmp_path):
    db, conn = new_db(tmp_path)
    write_sessions(conn, 2, 2)
    conn.close()
    stop, errors, commits = threading.Event(), [], [0]

    def writer():
        try:
            with closing(sqlite3.connect(db, isolation_level=None, timeout=30)) as w:
                w.execute("PRAGMA journal_mode=WAL")
                while not stop.is_set():
                    n = commits[0]
                    w.execute("BEGIN IMMEDIATE")  # several messages (each bumps message_count) per commit
                    add_session(w, f"live{n}", title="live", created_at=T0)
                    for j in range(5):
                        add_message(w, f"live{n}-{j}", f"live{n}", "user", [text_part("x")], created_at=T0 + j)
                    add_message(w, f"bump{n}", "s0", "user", [text_part("y")], created_at=T0)
                    w.execute("COMMIT")
                    commits[0] += 1
        except Exception as exc:  # surfaced by the main thread
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    seen = []
    try:
        while len(seen) < 25 or (len(set(seen)) < 3 and len(seen) < 500):
            messages, counted = snapshot_of(
                db, tmp_path, "SELECT (SELECT COUNT(*) FROM messages), (SELECT SUM(message_count) FROM sessions)")
            assert messages == counted, f"torn snapshot: {messages} messages, message_count sums to {counted}"
            seen.append(messages)
    finally:
        stop.set()
        thread.join(timeout=30)

    assert errors == [], errors  # the read-only reader never blocked the writer
    assert len(set(seen)) >= 3  # the snapshots really ran while rows were being committed
    assert seen == sorted(seen)  # later snapshots never go back in time
    final, _ = snapshot(db, tmp_path)
    assert final["messages"] == 4 + commits[0] * 6


# --------------------------------------------------------------------------- never writes


def test_ingest_never_writes_to_the_source(tmp_path, layout):
    db, conn = new_db(tmp_path, stage=6)  # an older schema: a migrating open would upgrade it to 7
    write_sessions(conn, 2, 3)
    conn.close()
    before_sha, before_mtime, before_schema = sha256(db), db.stat().st_mtime_ns, schema_of(db)

    src = source_of(db)
    first = ingest_source(src, Run(layout, "run-1"))
    forced = ingest_source(src, Run(layout, "run-2", full_refresh=True))
    again = ingest_source(src, Run(layout, "run-3"))

    assert first.status == forced.status == "ok"
    assert again.status == "unchanged"  # our own reads did not change the fingerprint
    assert sha256(db) == before_sha and db.stat().st_mtime_ns == before_mtime
    assert schema_of(db) == before_schema
    assert "read_files" not in {name for _, name, _ in schema_of(db)[0]}  # migration 7 did not run
    # at most SQLite's own reader files appear beside the db (an empty -wal, the -shm index)
    extra = {p.name: p.stat().st_size for p in db.parent.iterdir() if p != db}
    assert set(extra) <= {"crush.db-wal", "crush.db-shm"} and extra.get("crush.db-wal", 0) == 0


# --------------------------------------------------------------------------- schema versions


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_schema_version_and_migration_count_for_every_stage(tmp_path, layout, stage):
    db, conn = new_db(tmp_path, stage=stage)
    written = write_sessions(conn, 1, 2)
    conn.close()

    _, version = snapshot(db, tmp_path)
    result = ingest_source(source_of(db), Run(layout, f"run-stage-{stage}"))

    assert version == STAGES[stage]
    assert result.status == "ok", result.error
    assert (result.schema_version, result.migrations) == (STAGES[stage], stage)
    assert result.rows["messages"] == written


# --------------------------------------------------------------------------- bad inputs


def zero_bytes(db: Path) -> None:
    db.write_bytes(b"")


def garbage(db: Path) -> None:
    db.write_bytes(os.urandom(4096) + b"definitely not SQLite" * 100)


def no_messages_table(db: Path) -> None:
    conn = create_crush_db(db)
    write_sessions(conn, 1, 0)
    conn.execute("DROP TABLE messages")
    conn.close()


@pytest.mark.parametrize(
    ("make_bad", "words"),
    [
        (zero_bytes, ["not a Crush database", "empty"]),
        (garbage, ["not a readable SQLite database"]),
        (no_messages_table, ["not a Crush database", "no messages table", "sessions"]),
    ],
    ids=["zero-byte", "garbage", "no-messages-table"],
)
def test_bad_store_fails_clearly_and_the_run_goes_on(tmp_path, layout, make_bad, words):
    bad_db = tmp_path / "bad" / ".crush" / "crush.db"
    bad_db.parent.mkdir(parents=True)
    make_bad(bad_db)
    bad_bytes = bad_db.read_bytes()
    good_db, conn = new_db(tmp_path, "good")
    written = write_sessions(conn, 2, 3)
    conn.close()

    summary = ingest_all([source_of(bad_db), source_of(good_db)], layout, run_id="run-bad")

    bad, good = summary.results
    assert bad.status == "failed" and bad.rows == {} and bad.files == []
    for word in words:
        assert word in bad.error, bad.error
    assert "Traceback" not in bad.error and "unexpected" not in bad.error
    assert good.status == "ok", good.error
    assert good.rows["sessions"] == 2 and good.rows["messages"] == written
    assert good.files and all((layout.lake / f).is_file() for f in good.files)
    assert summary.by_status["failed"] == 1 and summary.by_status["ok"] == 1
    assert summary.exit_code == 1
    assert bad_db.read_bytes() == bad_bytes


@pytest.mark.parametrize("make_bad", [zero_bytes, garbage, no_messages_table])
def test_snapshot_layer_raises_snapshot_error(tmp_path, make_bad):
    db = tmp_path / "crush.db"
    make_bad(db)
    with pytest.raises(SnapshotError):
        snapshot(db, tmp_path)


def test_db_path_with_uri_special_characters(tmp_path, layout):
    # the snapshot opens a file: URI; ?, #, % and spaces in the path must not change its meaning
    db, conn = new_db(tmp_path / "odd ?mode=rw#x %20 dir", "prøject")
    written = write_sessions(conn, 1, 3)
    conn.close()

    counts, _ = snapshot(db, tmp_path)
    result = ingest_source(source_of(db), Run(layout, "run-odd"))

    assert counts["messages"] == written
    assert result.status == "ok", result.error
    assert result.rows["messages"] == written


def test_a_database_a_writer_keeps_locked_fails_after_the_timeout(tmp_path):
    """A rollback-journal database under an exclusive lock: Python's backup() retried for as
    long as the lock was held (5 minutes in a trial, with no output); the read lock is now
    taken first, under the busy timeout."""
    db = tmp_path / "crush.db"
    with closing(sqlite3.connect(db)) as con:
        con.execute("CREATE TABLE t (x)")
        con.commit()
    with closing(sqlite3.connect(db, isolation_level=None)) as writer:
        writer.execute("BEGIN EXCLUSIVE")
        started = time.monotonic()
        with pytest.raises(SnapshotError, match="stayed locked past the timeout"):
            take_snapshot(str(db), tmp_path / "copy.db", busy_timeout_s=0.5)
        assert time.monotonic() - started < 10
        writer.execute("ROLLBACK")
    take_snapshot(str(db), tmp_path / "copy.db", busy_timeout_s=0.5)  # free again: read as usual
    with closing(sqlite3.connect(tmp_path / "copy.db")) as copy:
        assert copy.execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]
