"""Lake writes: hive layout, idempotent reruns, rewrites of changed sources, atomic files."""

import os
import sqlite3

import pyarrow.parquet as pq

from tests.conftest import T0, ingest, query, scalar
from transforms.crush.synth import add_message, add_session
from transforms.crush.synth_parts import text_part
from warehouse.ingest import clean_stale_staging

DAY = 86400


def _snapshot_of(lake):
    """Every lake data file with its bytes and mtime (the run log `sources` aside)."""
    return {
        str(p.relative_to(lake)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in lake.rglob("*.parquet")
        if not str(p.relative_to(lake)).startswith("sources/")
    }


def _two_day_project(project):
    p = project("two-days")
    add_session(p.conn, "s1", title="day one", created_at=T0, cost=0.5)
    add_message(p.conn, "m1", "s1", "user", [text_part("a")], created_at=T0)
    add_session(p.conn, "s2", title="day two", created_at=T0 + DAY, cost=0.25)
    add_message(p.conn, "m2", "s2", "user", [text_part("b")], created_at=T0 + DAY)
    p.close()
    return p


def test_hive_layout_and_file_names(layout, project):
    p = _two_day_project(project)
    summary = ingest(layout, p.db)
    sid = summary.results[0].source.source_id
    files = sorted(str(f.relative_to(layout.lake)) for f in layout.lake.glob("sessions/*/*/*.parquet"))
    assert files == [f"sessions/date=2026-01-01/project=two-days/crush-laptop-dev-{sid}.parquet",
                     f"sessions/date=2026-01-02/project=two-days/crush-laptop-dev-{sid}.parquet"]
    # the hive keys come from the path; the files carry lineage back to the source row
    assert query(layout, "SELECT date::VARCHAR, project, provider, source_id, source_table, source_rowid "
                         "FROM sessions ORDER BY 1") == [
        ("2026-01-01", "two-days", "crush", sid, "sessions", 1), ("2026-01-02", "two-days", "crush", sid, "sessions", 2)]
    assert "date" not in pq.read_schema(layout.lake / files[0]).names


def test_rerun_on_unchanged_input_changes_nothing(layout, project):
    p = _two_day_project(project)
    first = ingest(layout, p.db)
    before = _snapshot_of(layout.lake)
    second = ingest(layout, p.db)
    assert [r.status for r in first.results] == ["ok"] and [r.status for r in second.results] == ["unchanged"]
    assert _snapshot_of(layout.lake) == before
    # a forced full refresh rereads the source, but identical files are not replaced
    third = ingest(layout, p.db, force=True)
    assert third.results[0].status == "ok"
    assert _snapshot_of(layout.lake) == before
    assert scalar(layout, "SELECT COUNT(*) FROM sources") == 3


def test_changed_source_is_rewritten_and_pruned_sessions_are_kept(layout, project):
    """History outlives the agent: a session deleted from the source stays in the lake,
    a session still there is rewritten from the source."""
    p = _two_day_project(project)
    ingest(layout, p.db)
    before = query(layout, "SELECT session_id, cost_usd FROM sessions ORDER BY 1")
    conn = sqlite3.connect(p.db)
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("DELETE FROM sessions WHERE id = 's2'")  # cascades to its message
    conn.execute("UPDATE sessions SET cost = 0.75 WHERE id = 's1'")
    conn.commit()
    conn.close()
    summary = ingest(layout, p.db)
    assert summary.results[0].status == "ok" and summary.results[0].retained_sessions == 1
    assert query(layout, "SELECT session_id, cost_usd FROM sessions ORDER BY 1") == [("s1", 0.75), before[1]]
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 2
    assert list(layout.lake.glob("sessions/date=2026-01-02/**/*.parquet"))
    assert scalar(layout, "SELECT retained_sessions FROM sources WHERE status = 'ok' ORDER BY run_at DESC LIMIT 1") == 1
    assert summary.results[0].reconciled  # carried rows are not counted against the source


def test_failed_source_keeps_its_previous_data(layout, project):
    p = _two_day_project(project)
    ingest(layout, p.db)
    p.db.write_bytes(b"this is not sqlite" * 100)
    for suffix in ("-wal", "-shm"):
        p.db.with_name(p.db.name + suffix).unlink(missing_ok=True)
    summary = ingest(layout, p.db)
    assert summary.results[0].status == "failed" and summary.exit_code == 1
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 2
    assert scalar(layout, "SELECT error FROM sources WHERE status = 'failed'").startswith(str(p.db))


def test_stale_staging_of_dead_runs_is_cleaned(layout):
    dead = layout.staging_dir / "999999999-run"  # no such pid
    mine = layout.staging_dir / f"{os.getpid()}-run"
    for d in (dead, mine):
        d.mkdir(parents=True)
        (d / "half-written.tmp").write_bytes(b"x")
    assert clean_stale_staging(layout) == 1
    assert not dead.exists() and mine.exists()


def test_views_work_on_an_empty_lake(layout):
    from warehouse.views import build_warehouse

    build_warehouse(layout.lake, layout.warehouse)
    for table in ("sessions", "messages", "parts", "tool_calls", "file_versions", "read_files", "sources", "quarantine"):
        assert scalar(layout, f"SELECT COUNT(*) FROM {table}") == 0


def test_views_use_absolute_paths_from_any_directory(layout, project, tmp_path, monkeypatch):
    p = _two_day_project(project)
    ingest(layout, p.db)
    monkeypatch.chdir(tmp_path)
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 2
    sql = scalar(layout, "SELECT sql FROM duckdb_views() WHERE view_name = 'sessions'")
    assert str(layout.lake) in sql


def test_parallel_ingest_writes_the_same_lake_as_serial(tmp_path):
    from transforms.crush.synth import generate_store
    from warehouse.layout import Layout

    store = generate_store(tmp_path / "crush", projects=4, sessions_per_project=3, seed=9)
    serial, parallel = Layout.resolve(home=tmp_path / "serial"), Layout.resolve(home=tmp_path / "parallel")
    one = ingest(serial, roots=[store.global_dir], workers=1)
    two = ingest(parallel, roots=[store.global_dir], workers=2)
    assert [r.source.source_id for r in two.results] == [r.source.source_id for r in one.results]
    assert [r.status for r in two.results] == ["ok"] * len(store.dbs)

    def files(layout):
        return {str(p.relative_to(layout.lake)): p.read_bytes() for p in layout.lake.rglob("*.parquet")
                if not str(p.relative_to(layout.lake)).startswith("sources/")}

    assert files(serial) == files(parallel)


def test_a_contract_change_rewrites_sources_written_before_it(layout, project):
    import json

    p = _two_day_project(project)
    first = ingest(layout, p.db)
    state_file = next(layout.state_dir.glob("*.json"))
    state = json.loads(state_file.read_text())
    state["schema"] = "an-older-contract"
    state_file.write_text(json.dumps(state))
    assert ingest(layout, p.db).results[0].status == "ok"  # rewritten, though the db is unchanged
    assert ingest(layout, p.db).results[0].status == "unchanged"
    assert first.results[0].status == "ok"


def test_views_still_answer_while_old_and_new_files_are_mixed(layout, project):
    import pyarrow.parquet as pq

    p = _two_day_project(project)
    ingest(layout, p.db)
    old = sorted(layout.lake.glob("sessions/*/*/*.parquet"))[0]  # the file DuckDB reads first
    table = pq.read_table(old)
    pq.write_table(table.drop_columns(["total_tokens"]), old)  # as an older version wrote it
    from warehouse.views import build_warehouse

    build_warehouse(layout.lake, layout.warehouse)
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 2


def test_a_lost_state_loses_no_history(layout, project):
    """A new or wiped agentlake home over an existing lake: the source's files are found by name,
    so a session the agent pruned meanwhile is still carried forward, and nothing is doubled."""
    import shutil

    p = _two_day_project(project)
    ingest(layout, p.db)
    before = query(layout, "SELECT session_id, cost_usd FROM sessions ORDER BY 1")
    shutil.rmtree(layout.state_dir)
    conn = sqlite3.connect(p.db)
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("DELETE FROM sessions WHERE id = 's2'")
    conn.commit()
    conn.close()
    summary = ingest(layout, p.db)
    assert summary.results[0].retained_sessions == 1
    assert query(layout, "SELECT session_id, cost_usd FROM sessions ORDER BY 1") == before
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 2
