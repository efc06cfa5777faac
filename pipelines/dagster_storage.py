"""Dagster's SQLite storage, with its connections kept open and its commits not waiting for the disk.

Dagster's SQLite storages create an engine and a connection for every event they write, commit
it with an fsync and close it (which checkpoints the file). A cold ingest writes about 300
events, so on the medium corpus this bookkeeping took longer than landing the sources
(docs/BENCHMARKS.md). These subclasses keep Dagster's files, schema and migrations, and change
only how a file is opened:
- one pooled engine per file, kept for the next event (the last few run files, at most);
- WAL with `synchronous=NORMAL`, which SQLite documents as safe from corruption: a power loss
  can lose the last events of a run record, never the lake (whose state is not in Dagster);
- a run's file is checkpointed after each write, as closing it did, so the UI's live view of a
  run (a watchdog on that file) still sees every event as it comes.
`pipelines/dagster.yaml` names them; a home whose dagster.yaml says otherwise keeps its own.
"""

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from dagster import StringSource
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine

OPEN_FILES = 8  # engines kept: the index, the runs' and schedules' files, and the latest run files
CONFIG = {"dagster_home": StringSource}  # the files' places follow Dagster's default layout under it


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


@contextmanager
def _transaction(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn, conn.begin():
        yield conn


class _KeptOpen:
    """What the three storages share: the engines, the configuration, and closing them."""

    place: tuple[str, ...]  # under the Dagster home, as Dagster's default instance puts it

    @property
    def engines(self) -> Engines:
        if "_kept_engines" not in self.__dict__:
            self._kept_engines = Engines()
        return self._kept_engines

    @classmethod
    def config_type(cls):
        return CONFIG

    @classmethod
    def directory(cls, config_value) -> str:
        return os.path.join(config_value["dagster_home"], *cls.place)

    def dispose(self) -> None:
        self.engines.dispose()
        super().dispose()


class EventLogStorage(_KeptOpen, SqliteEventLogStorage):
    """A file per run and a shared index, as Dagster's."""

    place = ("history", "runs")

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
                    conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")

    def wipe(self) -> None:
        self.engines.dispose()  # the run files are deleted: no connection may keep them open
        super().wipe()


class _OneFile(_KeptOpen):
    """A storage in one file, made (or migrated) by Dagster's `from_local`."""

    @classmethod
    def from_config_value(cls, inst_data, config_value):
        return cls.from_local(cls.directory(config_value), inst_data)

    def connect(self) -> Iterator[Connection]:
        return _transaction(self.engines.get(self._conn_string))


class RunStorage(_OneFile, SqliteRunStorage):
    """Runs in `history/runs.db`, as Dagster's."""

    place = ("history",)


class ScheduleStorage(_OneFile, SqliteScheduleStorage):
    """Schedules, sensors and their ticks in `schedules/schedules.db`, as Dagster's."""

    place = ("schedules",)
