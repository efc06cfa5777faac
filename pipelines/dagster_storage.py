"""Dagster's SQLite storage for runs and events, with its files kept open between events.

Dagster's SQLite storages create an engine and a connection for every event they write, commit
it with an fsync and close it (which checkpoints the file). A cold ingest writes about 300
events, so on the medium corpus this bookkeeping took longer than landing the sources
(docs/BENCHMARKS.md). These subclasses keep Dagster's files, schema and migrations, and change
only how a file is opened:
- one pooled engine per file, kept for the next event (per storage, the last `OPEN_FILES`);
- WAL with `synchronous=NORMAL`, which SQLite documents as safe from corruption: a commit no
  longer waits for the disk, and a power loss can lose the last commits to Dagster's records
  (a run's events or status, dynamic partitions), never the lake, whose state is not in Dagster;
- a run's file has its modification time set after each use, so the UI's live view of a run (a
  watchdog on that file, not on its WAL) sees every event as it comes. Closing the file did
  that before, by checkpointing it; a checkpoint after each event kept that but synced the file each
  time, which slowed every event (docs/BENCHMARKS.md, "Figures behind the code's choices"), and the
  UI reads the WAL's commits anyway.
- whether the index has a table is asked on the kept engine and remembered once it does:
  Dagster asked at every asset and check event, each time through a new engine and connection;
- Dagster's migration scripts are read once per process: its storages read the same folder of 89
  scripts again at every check and stamp of a file (seven times for a new home).
Schedules and sensor ticks, written rarely, keep Dagster's own storage. `pipelines/runner.py`
names these in agentlake's own Dagster home only (`pipelines/dagster_storage.yaml`).
"""

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from dagster import StringSource
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine

OPEN_FILES = 8  # per storage: the index (events) and the latest run files, or runs.db
# the files' places follow Dagster's default layout under the home this dagster.yaml is read from
CONFIG = {"dagster_home": StringSource}


class Engines:
    """One engine per SQLite file, the least recently used disposed beyond `OPEN_FILES`."""

    def __init__(self):
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, url: str) -> Engine:
        with self._lock:
            engine = self._engines.pop(url, None) or _engine(url)
            self._engines[url] = engine
            while len(self._engines) > OPEN_FILES:
                self._engines.popitem(last=False)[1].dispose()
            return engine

    def urls(self) -> list[str]:
        with self._lock:
            return list(self._engines)

    def dispose(self) -> None:
        with self._lock:
            while self._engines:
                self._engines.popitem()[1].dispose()


def _engine(url: str) -> Engine:
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})

    @event.listens_for(engine, "connect")
    def _no_fsync_per_commit(dbapi_connection, _record) -> None:
        # Dagster makes each of its files WAL when it creates it, but after this connection is
        # opened (a new run's file): made WAL here, as NORMAL is only safe in WAL mode
        dbapi_connection.execute("PRAGMA journal_mode=WAL")
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")

    return engine


class _KeptOpen:
    """What the storages share: the engines, the configuration, and closing them."""

    place: tuple[str, ...]  # under the Dagster home, as Dagster's default instance puts it

    def __init__(self, *args, **kwargs):
        read_migrations_once()  # before Dagster's own set-up, which checks and stamps the file
        self.engines = Engines()  # before Dagster's own set-up, which may write already
        super().__init__(*args, **kwargs)

    @classmethod
    def config_type(cls):
        return CONFIG

    @classmethod
    def directory(cls, config_value) -> str:
        return os.path.join(os.path.expanduser(config_value["dagster_home"]), *cls.place)

    def dispose(self) -> None:
        super().dispose()  # first: an event log's watchers stop, and open no file after this
        self.engines.dispose()


def read_migrations_once() -> None:
    """Alembic's `ScriptDirectory.from_config` keeps the folder it reads for Dagster's own migrations
    (runs, event logs and schedules share one), so Dagster's checks and stamps in this process read
    its scripts once. Another folder (another project's) is read as alembic does."""
    from alembic.script import ScriptDirectory
    from dagster._core.storage.sql import ALEMBIC_SCRIPTS_LOCATION

    read = ScriptDirectory.from_config
    if getattr(read, "keeps_dagsters", False):
        return
    kept: list = []

    def from_config(config):
        if config.get_alembic_option("script_location") != ALEMBIC_SCRIPTS_LOCATION:
            return read(config)
        if not kept:  # two threads at once would read it twice, and keep the first
            kept.append(read(config))
        return kept[0]

    from_config.keeps_dagsters = True
    ScriptDirectory.from_config = staticmethod(from_config)


def _event_log_migrations():
    """Dagster's migrations of the event log (each new run's file is stamped with the newest)."""
    from alembic.script import ScriptDirectory
    from dagster._core.storage.event_log.sqlite import sqlite_event_log
    from dagster._core.storage.sql import get_alembic_config

    read_migrations_once()
    return ScriptDirectory.from_config(get_alembic_config(sqlite_event_log.__file__))


class EventLogStorage(_KeptOpen, SqliteEventLogStorage):
    """A file per run and a shared index, in `history/runs`, as Dagster's."""

    place = ("history", "runs")

    def __init__(self, *args, **kwargs):
        self._tables_found: set[str] = set()  # before Dagster's set-up, which asks already
        super().__init__(*args, **kwargs)

    def _initdb(self, engine: Engine, for_index_shard=False) -> None:
        """A new run's file, empty, gets Dagster's tables stamped with the newest migration, as
        Dagster's own set-up does, with the migrations read once (only the run's own process writes
        it). The index, which processes may set up at once, and any file with tables already (a
        stamp or not) are left to Dagster's set-up, its retries and its checks."""
        if for_index_shard:
            super()._initdb(engine, for_index_shard)
            return
        from alembic.runtime.migration import MigrationContext
        from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata
        from sqlalchemy import inspect, text

        with engine.connect() as conn:
            context = MigrationContext.configure(conn)
            if context.get_current_revision() is None and not inspect(conn).get_table_names():
                SqlEventLogStorageMetadata.create_all(conn)
                conn.execute(text("PRAGMA journal_mode=WAL"))
                context.stamp(_event_log_migrations(), "head")
                conn.commit()
                return
        super()._initdb(engine, for_index_shard)

    @classmethod
    def from_config_value(cls, inst_data, config_value):
        return cls(cls.directory(config_value), inst_data)

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            engine = self.engines.get(self.conn_string_for_shard(shard))
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn:
                with conn.begin():
                    yield conn
                if shard != INDEX_SHARD_NAME:  # what the UI's watchdog on the run's file waits for
                    try:
                        os.utime(self.path_for_shard(shard))
                    except OSError:  # the events are committed: the WAL has them
                        pass

    def has_table(self, table_name: str) -> bool:
        """Whether the index has this table: asked on the kept engine, where Dagster made a new
        engine and connection each time, and asked again only while the answer is no (a
        table, once made, stays until `wipe`). Dagster asks at every asset and check event."""
        if table_name in self._tables_found:
            return True
        with self.engines.get(self.conn_string_for_shard(INDEX_SHARD_NAME)).connect() as conn:
            found = bool(conn.dialect.has_table(conn, table_name))
        if found:
            self._tables_found.add(table_name)
        return found

    def wipe(self) -> None:
        with self._db_lock:  # the run files are deleted: no connection may keep them open
            self.engines.dispose()
        self._tables_found.clear()
        super().wipe()


class RunStorage(_KeptOpen, SqliteRunStorage):
    """Runs, their tags and dynamic partitions in `history/runs.db`, as Dagster's."""

    place = ("history",)

    @classmethod
    def from_config_value(cls, inst_data, config_value):
        return cls.from_local(cls.directory(config_value), inst_data)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self.engines.get(self._conn_string).connect() as conn, conn.begin():
            yield conn
