"""Concurrency as DuckLake promises it, with a DuckDB-file catalog and with the team's catalog in
PostgreSQL (a real server, tests/support_postgres.py): readers during a merge see the catalog
before it or after it, never a mix; a second writer waits for the first (a second center gives up
after `$AGENTLAKE_WRITER_WAIT` seconds, saying who holds the catalog); a writer that dies lets the
next one in; and the catalog afterwards is what one merge makes.

Each merge is a real `agentlake merge` in a process of its own (tests/support_forked.py). The first
is stopped where a mix could show: its tables committed, its marts not yet built."""

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import duckdb
import pytest

from tests.support_forked import cli, code, finished
from tests.support_postgres import postgres  # noqa: F401  (the server's fixture)
from tests.support_postgres import READER, READER_PASSWORD, WRITER, WRITER_PASSWORD, new_database, stopped
from warehouse.lake.ducklake import connect, load_packaged, sql_string
from warehouse.lake.pg_catalog import PostgresCatalog

# one query, so one snapshot: the tables and a mart built from them
TOTALS = ("SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM messages), "
          "(SELECT COUNT(*) FROM tool_calls), "
          "(SELECT SUM(cost_usd)::DECIMAL(18, 9) FROM sessions WHERE is_root), "
          "(SELECT SUM(cost_usd)::DECIMAL(18, 9) FROM daily_costs), (SELECT COUNT(*) FROM session_summary)")

# `agentlake merge` that stops once its tables are committed, before the marts (as a large merge
# builds them in a transaction of their own): it says so in the file named first, and goes on with
# its marts once the file named second exists (or waits to be killed)
PAUSED_MERGE = """
import sys, time
from pathlib import Path
from warehouse.catalog import merge

marker, go = Path(sys.argv[1]), Path(sys.argv[2])
refresh_marts = merge._refresh_marts

def paused(*args, **kwargs):
    marker.write_text("the tables are committed")
    while not go.exists():
        time.sleep(0.02)
    return refresh_marts(*args, **kwargs)

merge._refresh_marts = paused
merge.MARTS_WITH_TABLES_ROWS = -1
from pipelines import cli
sys.argv = ["agentlake", *sys.argv[3:]]
cli.entry()
"""

# a reader of the catalog named third inside one snapshot, as the report reads: it says so in the
# file named first, and reads on once the file named second exists
READING = """
import sys, time
from pathlib import Path
from warehouse.lake.ducklake import connect, one_snapshot
from warehouse.lake.pg_catalog import PostgresCatalog

marker, go = Path(sys.argv[1]), Path(sys.argv[2])
con = connect(PostgresCatalog.parse(sys.argv[3]), ours=True)
try:
    with one_snapshot(con):
        con.execute("SELECT COUNT(*) FROM sessions").fetchone()
        marker.write_text("reading")
        while not go.exists():
            time.sleep(0.02)
        con.execute("SELECT COUNT(*) FROM messages").fetchone()
except Exception as exc:
    print("the read failed:", exc)
con.close()
"""


def _until(condition, proc, what: str, timeout: float = 120):
    """Wait for `condition()` while `proc` runs (a process that ended first fails the test)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the process ended (status {proc.returncode}) before {what}:\n{out}\n{err}")
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.02)


def _said(proc, words: str) -> bool:
    """`words` on the running process's stderr (the file support_forked writes it to, read
    while the process runs)."""
    return words in proc.stderr_so_far()


def _second_machine(landing: Path) -> None:
    """The lake's one machine landed again under another name: every table and mart doubles."""
    shutil.copytree(landing / "laptop", landing / "laptop2")


def _doubled(totals: tuple) -> tuple:
    return tuple(None if v is None else v * 2 for v in totals)


class Readers(threading.Thread):
    """A reader opening the warehouse again and again, as `agentlake sql` does, each query one
    snapshot, until stopped."""

    def __init__(self, catalog):
        super().__init__(daemon=True)
        self.catalog, self.seen, self.done, self.error = catalog, [], threading.Event(), None

    def run(self):
        try:
            while not self.seen or not self.done.is_set():
                with connect(self.catalog, ours=True) as con:
                    self.seen.append(con.execute(TOTALS).fetchone())
        except Exception as exc:  # said in the test's thread
            self.error = exc

    def stop(self) -> list[tuple]:
        self.done.set()
        self.join(60)
        if self.error:
            raise self.error
        return self.seen


def _read(catalog) -> tuple:
    with connect(catalog, ours=True) as con:
        return con.execute(TOTALS).fetchone()


def _stopped_merge(reader_catalog, merge_args: list[str], env: dict, tmp_path: Path, landing: Path):
    """A second machine landed, and a merge of it stopped between its tables and its marts.
    Returns the readers' totals before it, and its process."""
    before = _read(reader_catalog)
    _second_machine(landing)
    marker = tmp_path / "stopped"
    first = code(PAUSED_MERGE, marker, tmp_path / "never", *merge_args, env=env, cwd=tmp_path)
    _until(marker.exists, first, "the first merge committed its tables")
    assert _read(reader_catalog) == before  # its tables are committed, and no reader sees them yet
    return before, first


def _killed_while_another_waits(first, second, reader_catalog, before: tuple):
    """`second` waits for `first`, which is killed; readers meanwhile see the catalog before or
    after, and after is what one merge of both machines makes. Returns what `second` printed."""
    _until(lambda: _said(second, "waiting for another merge"), second, "the second merge waited")
    readers = Readers(reader_catalog)
    readers.start()
    first.send_signal(signal.SIGKILL)  # its lock goes with it (the kernel's flock, PostgreSQL's session)
    assert finished(first).returncode == -signal.SIGKILL
    ran = finished(second)
    assert ran.returncode == 0, ran.stderr
    seen = readers.stop()
    after = _read(reader_catalog)
    assert after == _doubled(before)
    assert seen and set(seen) <= {before, after}
    return ran


def test_a_second_merge_into_a_file_catalog_waits_and_readers_never_see_a_mix(lake, tmp_path):
    env = {**os.environ, "AGENTLAKE_HOME": str(lake.home)}
    before, first = _stopped_merge(lake.warehouse, ["merge"], env, tmp_path, lake.lake / "_landing")
    ran = _killed_while_another_waits(first, cli("merge", env=env, cwd=tmp_path), lake.warehouse, before)
    assert f"(pid {first.pid} on " in ran.stderr  # who held it, as the lock file says


def _merged_into(db, lake, tmp_path: Path, monkeypatch):
    """The lake's landing files copied to a team's lake and merged by the center into `db`; this
    process then reads as the readers' role. Returns the team's lake, the center's environment and
    merge arguments, and the readers' catalog."""
    team = tmp_path / "team"
    shutil.copytree(lake.lake / "_landing", team / "_landing")
    env = {**os.environ, "AGENTLAKE_HOME": str(tmp_path / "center"), **db.env(WRITER, WRITER_PASSWORD)}
    args = ["merge", "--lake", str(team), "--warehouse", db.warehouse(WRITER)]
    ran = finished(cli(*args, env=env, cwd=tmp_path))
    assert ran.returncode == 0, ran.stderr
    for key, value in db.env(READER, READER_PASSWORD).items():
        monkeypatch.setenv(key, value)
    return team, env, args, PostgresCatalog.parse(db.warehouse(READER))


def test_a_second_center_fails_clearly_or_waits_and_readers_never_see_a_mix(lake, postgres, tmp_path,  # noqa: F811
                                                                             monkeypatch):
    db = new_database(postgres, "two_centers")
    team, env, args, reader = _merged_into(db, lake, tmp_path, monkeypatch)
    before, first = _stopped_merge(reader, args, env, tmp_path, team / "_landing")
    # the mix is there to be seen: the last commit holds the new tables beside the old marts
    latest = _latest_commit(reader)
    assert latest[0] == 2 * before[0] and latest[4] == before[4]

    busy = finished(cli(*args, env={**env, "AGENTLAKE_WRITER_WAIT": "0"}, cwd=tmp_path))
    assert busy.returncode == 1 and "Traceback" not in busy.stderr
    assert busy.stderr.startswith(f"error: another merge or compaction of {db.warehouse(WRITER)} is running (held by "
                                  f"agentlake writer, pid {first.pid} on "), busy.stderr
    second = cli(*args, env=env, cwd=tmp_path)
    _killed_while_another_waits(first, second, reader, before)


def test_a_merge_or_a_reader_whose_postgresql_stops_fails_clearly_and_the_next_merge_completes(  # noqa: F811
        lake, postgres, tmp_path, monkeypatch):
    """PostgreSQL stopped under a merge (its tables committed, its marts not) and under a reader
    inside one snapshot: each ends with an error of its own, not DuckDB's abort of the whole
    process as it closes; readers keep the last published snapshot, and the next merge completes."""
    db = new_database(postgres, "server_stops")
    team, env, args, reader = _merged_into(db, lake, tmp_path, monkeypatch)
    before = _read(reader)
    _second_machine(team / "_landing")
    paused, reading, go = tmp_path / "paused", tmp_path / "reading", tmp_path / "go"
    merging = code(PAUSED_MERGE, paused, go, *args, env=env, cwd=tmp_path)
    readers = code(READING, reading, go, db.warehouse(READER), cwd=tmp_path)
    _until(paused.exists, merging, "the merge committed its tables")
    _until(reading.exists, readers, "the reader read in its snapshot")
    with stopped(postgres):
        go.write_text("go on")
        merged, read = finished(merging), finished(readers)
    assert merged.returncode == 1 and merged.stderr.startswith(
        f"error: lost the PostgreSQL catalog at {reader.host} while writing it: "), merged.stderr
    assert "run it once the server answers" in merged.stderr and "Traceback" not in merged.stderr
    assert read.returncode == 0 and read.stdout.startswith("the read failed: "), (read.stdout, read.stderr)
    assert _read(reader) == before  # the cut merge published nothing
    ran = finished(cli(*args, env=env, cwd=tmp_path))
    assert ran.returncode == 0, ran.stderr
    assert _read(reader) == _doubled(before)


def _latest_commit(catalog: PostgresCatalog) -> tuple:
    """TOTALS at the catalog's last commit, as a plain DuckDB attach reads it."""
    with duckdb.connect() as con:
        for name in ("ducklake", "postgres_scanner"):
            load_packaged(con, name)
        con.execute(f"ATTACH {sql_string(catalog.attach_target)} AS lake (READ_ONLY)")
        con.execute("USE lake")
        return con.execute(TOTALS).fetchone()


def test_a_long_merge_into_postgres_leaves_its_readers_the_grace_from_its_publication(lake, postgres, tmp_path,  # noqa: F811
                                                                                     monkeypatch):
    """tests/test_hive_export.py's long merge, with the catalog in PostgreSQL: DuckLake's times
    there are PostgreSQL's (its NOW() is sent to the server), and so are the publications', kept
    in the catalog's database. A reader on the snapshot a 20-minute merge replaced still reads its
    file after the next merge; without the grace, the file goes."""
    from warehouse.catalog.merge import merge
    from warehouse.lake.ducklake import writing
    from warehouse.lake.layout import data_path
    from warehouse.lake.pg_catalog import PUBLISHED

    db = new_database(postgres, "long_merge")
    team = tmp_path / "team"
    shutil.copytree(lake.lake / "_landing", team / "_landing")
    for key, value in db.env(WRITER, WRITER_PASSWORD).items():
        monkeypatch.setenv(key, value)
    center = PostgresCatalog.parse(db.warehouse(WRITER))
    merge(team, center, data_path=data_path(team), marts=False)
    count = "SELECT COUNT(*), COUNT(DISTINCT message_id) FROM parts"
    with connect(center, ours=True) as con:
        before = con.execute(count).fetchone()
    reader = connect(center, ours=True)  # the published snapshot, its file not read yet
    files = [f for (f,) in reader.execute("SELECT data_file FROM ducklake_list_files('lake', 'parts')").fetchall()]
    assert files
    with writing(center, data_path(team)) as con:
        con.execute("CREATE OR REPLACE TABLE parts AS SELECT * FROM parts LIMIT 0")
        meta = "__ducklake_metadata_lake"
        last = f"(SELECT max(snapshot_id) FROM {meta}.ducklake_snapshot)"
        con.execute(f"UPDATE {meta}.ducklake_snapshot SET snapshot_time = snapshot_time - CASE WHEN "
                    f"snapshot_id = {last} THEN INTERVAL 20 MINUTE ELSE INTERVAL 2 HOUR END")
    merge(team, center, data_path=data_path(team), marts=False, keep_seconds=600)
    assert all(Path(f).exists() for f in files)
    assert reader.execute(count).fetchone() == before
    reader.close()
    with connect(center, ours=True) as con:  # each publication, once, in order
        published = con.execute(f"SELECT snapshot_id, published_at FROM __ducklake_metadata_lake.{PUBLISHED} "
                                "ORDER BY snapshot_id").fetchall()
        assert len(published) >= 3 and [at for _, at in published] == sorted(at for _, at in published)
    merge(team, center, data_path=data_path(team), marts=False, keep_seconds=0)
    assert not any(Path(f).exists() for f in files)
