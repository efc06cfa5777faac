"""Dagster's storage as agentlake's own Dagster home configures it (pipelines/dagster_storage.yaml):
Dagster's SQLite files with their connections kept open. A run's events still reach a watcher as
they come (the UI's live view), the files are where Dagster's default puts them, they are closed
with the instance, older homes are upgraded, and a DAGSTER_HOME set elsewhere is left alone."""

import hashlib
import threading
import time
from pathlib import Path

import dagster as dg
from dagster._core.events.log import EventLogEntry

from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage

from pipelines.dagster_storage import OPEN_FILES, EventLogStorage, RunStorage
from pipelines.runner import SHIPPED_BEFORE, dagster_config, dagster_env
from warehouse.lake.layout import Layout

SHIPPED = dagster_config(own=True)


def _instance(home: Path, monkeypatch) -> dg.DagsterInstance:
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(SHIPPED)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return dg.DagsterInstance.from_config(str(home))


def _entry(run_id: str, message: str) -> EventLogEntry:
    return EventLogEntry(error_info=None, level="INFO", user_message=message, run_id=run_id,
                         timestamp=time.time(), dagster_event=None)


def test_the_shipped_config_keeps_dagsters_files_where_its_default_puts_them(tmp_path, monkeypatch):
    with _instance(tmp_path / "ours", monkeypatch) as instance:
        assert (type(instance.run_storage), type(instance.event_log_storage),
                type(instance.schedule_storage)) == (RunStorage, EventLogStorage, SqliteScheduleStorage)
        instance.event_log_storage.store_event(_entry("a-run", "hello"))
        # a new run's file too: its first connection was opened before Dagster made it WAL
        for shard in ("a-run", "index"):
            with instance.event_log_storage._connect(shard) as conn:
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
        ours = {p.relative_to(tmp_path / "ours").as_posix() for p in (tmp_path / "ours").rglob("*.db")}
    default = tmp_path / "default"
    default.mkdir()
    with dg.DagsterInstance.from_config(str(default)) as instance:
        instance.event_log_storage.store_event(_entry("a-run", "hello"))
        theirs = {p.relative_to(default).as_posix() for p in default.rglob("*.db")}
    assert ours == theirs == {"history/runs.db", "history/runs/index.db", "history/runs/a-run.db",
                              "schedules/schedules.db"}
    # and each file reads back through Dagster's own classes: a home can go back to the default
    (tmp_path / "ours" / "dagster.yaml").unlink()
    with dg.DagsterInstance.from_config(str(tmp_path / "ours")) as instance:
        assert [r.user_message for r in instance.all_logs("a-run")] == ["hello"]


def _schema(path: Path) -> tuple:
    import sqlite3

    with sqlite3.connect(path) as con:
        return (sorted(con.execute("SELECT type, name, sql FROM sqlite_master").fetchall()),
                con.execute("SELECT version_num FROM alembic_version").fetchall())


def test_a_runs_file_is_made_as_dagsters_own_set_up_makes_it(tmp_path, monkeypatch):
    """A new run's file is set up with Dagster's migrations read once per process (Dagster read
    them twice for each): the same tables, indexes and migration stamp as Dagster's own set-up
    gives it, so `dagster instance migrate` and the UI find what they expect."""
    with _instance(tmp_path / "ours", monkeypatch) as instance:
        for run in ("one", "two"):
            instance.event_log_storage.store_event(_entry(run, "hello"))
    default = tmp_path / "default"
    default.mkdir()
    with dg.DagsterInstance.from_config(str(default)) as instance:
        instance.event_log_storage.store_event(_entry("one", "hello"))
    ours = [_schema(tmp_path / "ours" / "history" / "runs" / f"{run}.db") for run in ("one", "two")]
    theirs = _schema(default / "history" / "runs" / "one.db")
    assert ours[0] == ours[1] == theirs
    assert theirs[1] and len(theirs[0]) > 5  # a stamp, and the tables with their indexes


def test_dagsters_migrations_are_read_once_and_another_projects_as_alembic_reads_them(tmp_path, monkeypatch):
    """Every file of a new home is checked and stamped against Dagster's one folder of migrations:
    read once per process (a new home read it seven times). A folder of another project's is not
    kept: a change to it is seen."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from dagster._core.storage.runs.sqlite import sqlite_run_storage
    from dagster._core.storage.sql import get_alembic_config

    loads = []
    monkeypatch.setattr(ScriptDirectory, "_load_revisions",
                        lambda self, _load=ScriptDirectory._load_revisions: loads.append(self) or _load(self))
    with _instance(tmp_path / "one", monkeypatch):
        pass
    with _instance(tmp_path / "two", monkeypatch) as instance:
        instance.event_log_storage.store_event(_entry("a-run", "hello"))
        assert _schema(tmp_path / "two" / "history" / "runs.db")[1]  # stamped, with the kept scripts
    dagsters = ScriptDirectory.from_config(get_alembic_config(sqlite_run_storage.__file__))
    assert {id(s) for s in loads} <= {id(dagsters)} and len(loads) <= 1  # none, or the first read of all
    other = tmp_path / "migrations"
    (other / "versions").mkdir(parents=True)
    (other / "env.py").write_text("")
    theirs = Config()
    theirs.set_main_option("script_location", str(other))
    assert ScriptDirectory.from_config(theirs) is not ScriptDirectory.from_config(theirs)


def test_a_watcher_sees_each_event_of_a_run_as_it_is_written(tmp_path, monkeypatch):
    """The UI follows a running run with a watchdog on the run's file; the writer keeps its
    connection open, so it checkpoints the file after each event, as Dagster's closing did."""
    home = tmp_path / "dagster"
    seen, arrived = [], threading.Event()

    def watcher(entry, _cursor):
        seen.append(entry.user_message)
        arrived.set()

    with _instance(home, monkeypatch) as writer, dg.DagsterInstance.from_config(str(home)) as reader:
        writer.event_log_storage.store_event(_entry("live", "first"))  # the run's file exists
        reader.event_log_storage.watch("live", None, watcher)
        try:
            for message in ("second", "third", "fourth"):
                arrived.clear()
                writer.event_log_storage.store_event(_entry("live", message))
                assert arrived.wait(10), f"the watcher was not told of {message!r}"
                assert seen[-1] == message
        finally:
            reader.event_log_storage.end_watch("live", watcher)
    assert seen[0] in ("first", "second") and seen[-3:] == ["second", "third", "fourth"]


def test_many_runs_keep_a_bounded_number_of_files_open(tmp_path, monkeypatch):
    with _instance(tmp_path / "dagster", monkeypatch) as instance:
        storage = instance.event_log_storage
        for i in range(OPEN_FILES * 3):
            storage.store_event(_entry(f"run-{i}", "hello"))
        assert len(storage.engines.urls()) <= OPEN_FILES
        for i in range(OPEN_FILES * 3):
            assert [r.user_message for r in instance.all_logs(f"run-{i}")] == ["hello"]
        storage.wipe()  # deletes the run files: nothing may hold them open
        assert [Path(url).name for url in storage.engines.urls()] == ["index.db"]  # wipe empties it
        assert instance.all_logs("run-0") == []


def test_the_files_are_closed_with_the_instance(tmp_path, monkeypatch):
    instance = _instance(tmp_path / "dagster", monkeypatch)
    instance.event_log_storage.store_event(_entry("a-run", "hello"))
    assert instance.get_runs() == []
    assert instance.event_log_storage.engines.urls() and instance.run_storage.engines.urls()
    instance.dispose()
    assert instance.event_log_storage.engines.urls() == instance.run_storage.engines.urls() == []


def test_a_home_with_the_earlier_releases_config_gets_this_one(tmp_path, monkeypatch):
    assert hashlib.sha256(EARLIER.encode()).hexdigest() in SHIPPED_BEFORE
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text(EARLIER)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    dagster_env(Layout.resolve(home=tmp_path))
    assert (home / "dagster.yaml").read_text() == SHIPPED


def test_a_dagster_home_set_elsewhere_gets_no_storage_of_ours(tmp_path, monkeypatch):
    """Another project's Dagster may share it, and could not import pipelines.dagster_storage."""
    shared = tmp_path / "shared-dagster"
    monkeypatch.setenv("DAGSTER_HOME", str(shared))
    assert dagster_env(Layout.resolve(home=tmp_path / "al"))["DAGSTER_HOME"] == str(shared)
    assert (shared / "dagster.yaml").read_text() == dagster_config(own=False)
    assert "pipelines.dagster_storage" not in dagster_config(own=False) and "pipelines.dagster_storage" in SHIPPED
    with dg.DagsterInstance.from_config(str(shared)) as instance:
        assert not isinstance(instance.event_log_storage, EventLogStorage)
    own = tmp_path / "al" / "dagster"  # the same file in agentlake's own home is upgraded
    monkeypatch.setenv("DAGSTER_HOME", str(own))
    own.mkdir(parents=True)
    (own / "dagster.yaml").write_bytes(EARLIER.replace("\n", "\r\n").encode())  # as Windows wrote it
    dagster_env(Layout.resolve(home=tmp_path / "al"))
    assert (own / "dagster.yaml").read_text() == SHIPPED


def test_a_config_its_user_edited_is_kept(tmp_path, monkeypatch):
    home = tmp_path / "dagster"
    home.mkdir()
    mine = EARLIER + "\nretention:\n  schedule:\n    purge_after_days: 7\n"
    (home / "dagster.yaml").write_text(mine)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    dagster_env(Layout.resolve(home=tmp_path))
    assert (home / "dagster.yaml").read_text() == mine


# the text earlier releases wrote, byte for byte
EARLIER = ("# Written to $DAGSTER_HOME/dagster.yaml by `agentlake ingest` / `agentlake dev` when missing.\n"
           "# Storage (runs, event logs, dynamic partitions, sensor cursors) lives beside it, so it persists.\n"
           "telemetry:\n  enabled: false\n"
           "concurrency:\n  runs:\n    max_concurrent_runs: 4\n  pools:\n"
           "    # snapshots of live agent stores: a backfill must not hammer a developer's active session\n"
           "    default_limit: 2\n")
