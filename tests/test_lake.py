"""Lake writes: landing files per source, DuckLake tables by (date, project), idempotent reruns,
rewrites of changed sources, merges that converge."""

import os
import shutil
import sqlite3

import pyarrow.parquet as pq
import pytest

from tests.conftest import T0, discover_only, ingest, ingest_tables, query, scalar
from transforms.synth.crush import add_message, add_session
from transforms.synth.crush_parts import text_part
from warehouse.land.ingest import clean_stale_staging
from warehouse.lake.layout import Layout
from warehouse.catalog.compaction import compact

DAY = 86400


def _snapshot_of(lake):
    """Every lake data file with its bytes and mtime (the run log `sources` aside)."""
    return {
        str(p.relative_to(lake)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in lake.rglob("*.parquet")
        if "/_runs/" not in str(p) and "/sources/" not in str(p)
    }


def _landing(lake):
    return {str(p.relative_to(lake)): p.read_bytes() for p in lake.glob("_landing/*/*/*/*/*.parquet")}


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
    summary = ingest_tables(layout, p.db)
    sid = summary.results[0].source.source_id
    landing = sorted(str(f.relative_to(layout.lake)) for f in layout.lake.glob("_landing/**/*.parquet")
                     if "/_runs/" not in str(f))
    assert landing == [f"_landing/laptop/dev/crush/{sid}/{t}.parquet" for t in sorted(
        ("file_versions", "messages", "parts", "quarantine", "read_files", "sessions", "tool_calls", "usage"))]
    compact(layout.warehouse, keep_seconds=0)  # a merge this small keeps its rows inline in the catalog
    files = sorted(str(f.relative_to(layout.lake).parent) for f in layout.lake.glob("main/sessions/**/*.parquet"))
    assert files == ["main/sessions/year=2026/project=two-days"]  # a year's sessions share a file
    data_file = next(layout.lake.glob("main/sessions/**/*.parquet"))
    assert pq.ParquetFile(data_file).metadata.row_group(0).column(0).compression == "ZSTD"  # as the landing files
    # the partition keys are columns too; the rows carry lineage back to the source row
    assert query(layout, "SELECT date::VARCHAR, project, provider, source_id, source_table, source_rowid "
                         "FROM sessions ORDER BY 1") == [
        ("2026-01-01", "two-days", "crush", sid, "sessions", 1), ("2026-01-02", "two-days", "crush", sid, "sessions", 2)]


def test_rerun_on_unchanged_input_changes_nothing(layout, project):
    p = _two_day_project(project)
    first = ingest_tables(layout, p.db)  # the landing files and the `sources` table are what it reads
    before = _snapshot_of(layout.lake)
    second = ingest_tables(layout, p.db)
    assert [r.status for r in first.results] == ["ok"] and [r.status for r in second.results] == ["unchanged"]
    assert _snapshot_of(layout.lake) == before
    # a forced full refresh rereads the source, but identical files are not replaced
    third = ingest_tables(layout, p.db, full_refresh=True)
    assert third.results[0].status == "ok"
    assert _snapshot_of(layout.lake) == before
    assert scalar(layout, "SELECT COUNT(*) FROM sources") == 3


def test_changed_source_is_rewritten_and_pruned_sessions_are_kept(layout, project):
    """History outlives the agent: a session deleted from the source stays in the lake,
    a session still there is rewritten from the source."""
    p = _two_day_project(project)
    ingest_tables(layout, p.db)
    before = query(layout, "SELECT session_id, cost_usd FROM sessions ORDER BY 1")
    conn = sqlite3.connect(p.db)
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("DELETE FROM sessions WHERE id = 's2'")  # cascades to its message
    conn.execute("UPDATE sessions SET cost = 0.75 WHERE id = 's1'")
    conn.commit()
    conn.close()
    summary = ingest_tables(layout, p.db)
    assert summary.results[0].status == "ok" and summary.results[0].retained_sessions == 1
    assert query(layout, "SELECT session_id, cost_usd FROM sessions ORDER BY 1") == [("s1", 0.75), before[1]]
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 2
    assert query(layout, "SELECT DISTINCT date::VARCHAR FROM sessions WHERE session_id = 's2'") == [("2026-01-02",)]
    assert scalar(layout, "SELECT retained_sessions FROM sources WHERE status = 'ok' ORDER BY run_at DESC LIMIT 1") == 1
    assert summary.results[0].reconciled  # carried rows are not counted against the source


def test_failed_source_keeps_its_previous_data(layout, project):
    p = _two_day_project(project)
    ingest_tables(layout, p.db)
    p.db.write_bytes(b"this is not sqlite" * 100)
    for suffix in ("-wal", "-shm"):
        p.db.with_name(p.db.name + suffix).unlink(missing_ok=True)
    summary = ingest_tables(layout, p.db)
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
    from warehouse.catalog.build import build_warehouse

    build_warehouse(layout.lake, layout.warehouse)
    for table in ("sessions", "messages", "parts", "tool_calls", "file_versions", "read_files", "sources", "quarantine"):
        assert scalar(layout, f"SELECT COUNT(*) FROM {table}") == 0


def test_views_use_absolute_paths_from_any_directory(layout, project, tmp_path, monkeypatch):
    p = _two_day_project(project)
    ingest_tables(layout, p.db)
    monkeypatch.chdir(tmp_path)
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 2
    assert scalar(layout, "SELECT data_path FROM ducklake_settings('lake')").startswith(str(layout.lake))


def test_parallel_ingest_writes_the_same_lake_as_serial(tmp_path):
    from transforms.synth.crush import generate_store
    from warehouse.lake.layout import Layout

    store = generate_store(tmp_path / "crush", projects=4, sessions_per_project=3, seed=9)
    serial, parallel = Layout.resolve(home=tmp_path / "serial"), Layout.resolve(home=tmp_path / "parallel")
    one = ingest(serial, roots=[store.global_dir], workers=1)
    two = ingest(parallel, roots=[store.global_dir], workers=2)
    assert [r.source.source_id for r in two.results] == [r.source.source_id for r in one.results]
    assert [r.status for r in two.results] == ["ok"] * len(store.dbs)

    assert _landing(serial.lake) == _landing(parallel.lake)
    for table in ("sessions", "messages", "parts", "tool_calls", "usage", "daily_costs"):
        assert sorted(query(serial, f"SELECT * FROM {table}"), key=repr) == \
            sorted(query(parallel, f"SELECT * FROM {table}"), key=repr), table


def test_a_contract_change_rewrites_sources_written_before_it(layout, project):
    import json

    p = _two_day_project(project)
    first = ingest_tables(layout, p.db)
    state_file = next(layout.state_dir.glob("*.json"))
    state = json.loads(state_file.read_text())
    state["schema"] = "an-older-contract"
    state_file.write_text(json.dumps(state))
    assert ingest_tables(layout, p.db).results[0].status == "ok"  # rewritten, though the db is unchanged
    assert ingest_tables(layout, p.db).results[0].status == "unchanged"
    assert first.results[0].status == "ok"


def test_views_still_answer_while_old_and_new_files_are_mixed(layout, project):
    """A landing file written by an older version (a column missing) merges beside new ones."""
    import pyarrow.parquet as pq

    from warehouse.catalog.build import build_warehouse

    p = _two_day_project(project)
    ingest_tables(layout, p.db)
    old = next(layout.lake.glob("_landing/**/sessions.parquet"))
    table = pq.read_table(old)
    pq.write_table(table.drop_columns(["total_tokens"]).replace_schema_metadata(table.schema.metadata), old)
    build_warehouse(layout.lake, layout.warehouse)
    assert query(layout, "SELECT COUNT(*), COUNT(total_tokens) FROM sessions") == [(2, 0)]


def test_a_deleted_landing_file_heals_on_the_next_run(layout, project):
    """A landing file deleted by hand (or an emptied bucket) makes the source be read again."""
    p = _two_day_project(project)
    ingest_tables(layout, p.db)
    next(layout.lake.glob("_landing/**/messages.parquet")).unlink()
    summary = ingest_tables(layout, p.db)
    assert summary.results[0].status == "ok"
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 2


def test_a_run_killed_before_the_merge_is_merged_by_the_next(layout, project):
    """Landed but not merged (the process died in between): the next run, with nothing new to
    read, still merges, so no table stays empty."""
    from pipelines.runner import run_ingest
    from tests.conftest import discover_only, options_for
    from warehouse.land.ingest import ingest_all
    from warehouse.catalog.build import build_warehouse

    p = _two_day_project(project)
    ingest_tables(layout, p.db)
    conn = sqlite3.connect(p.db)
    add_message(conn, "m3", "s1", "user", [text_part("c")], created_at=T0 + 5)
    conn.commit()
    conn.close()
    sources, _ = discover_only(p.db)
    ingest_all(sources, layout)  # the change landed; the process died before merging it
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 2
    summary = run_ingest(layout, options_for(p.db), quiet=True)
    assert [r.status for r in summary.results] == ["unchanged"]
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 3
    assert not layout.pending_marker.exists()
    build_warehouse(layout.lake, layout.warehouse)  # merging again changes nothing
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 3


def test_many_sources_share_a_partitions_files(tmp_path):
    """The file count follows the (table, date, project) partitions, not the sources or machines."""
    from transforms.synth.crush import generate_store
    from warehouse.lake.layout import Layout

    store = generate_store(tmp_path / "crush", projects=3, sessions_per_project=6, seed=4)
    layouts = [Layout.resolve(home=tmp_path / "home", lake=tmp_path / "lake", machine=m) for m in ("a", "b", "c")]
    for lay in layouts:
        ingest_tables(lay, roots=[store.global_dir], full_refresh=True)
    compact(layouts[0].warehouse, keep_seconds=0)
    files = list((tmp_path / "lake" / "main" / "messages").rglob("*.parquet"))
    partitions = {f.parent for f in files}
    assert len(files) <= 1.2 * len(partitions)
    days = scalar(layouts[0], "SELECT COUNT(DISTINCT (date, project)) FROM messages")
    assert len(files) <= days  # never more files than (date, project) pairs, whatever the machines
    assert scalar(layouts[0], "SELECT COUNT(DISTINCT machine) FROM messages") == 3
    assert scalar(layouts[0], "SELECT COUNT(*) FROM messages") == 3 * store.messages


def _land_on_machines(store, tmp_path, machines):
    """The store landed into the shared lake `tmp_path/lake` by each machine, unmerged: the tests
    that call this merge what landed into a catalog of their own."""
    from warehouse.land.ingest import ingest_all

    sources, _ = discover_only(roots=[store.global_dir])
    for machine in machines:
        ingest_all(sources, Layout.resolve(home=tmp_path / machine, lake=tmp_path / "lake", machine=machine))


def test_a_merge_reads_many_landing_files_in_batches_and_loses_no_row(tmp_path, monkeypatch):
    """A merge reads a bounded number of landing files per statement (DuckDB keeps each one's
    reader until the statement ends: 1,000 Codex sources ran out of memory). Every row arrives;
    the extra files the batches write are merged by compaction into one per partition."""
    from transforms.synth.crush import generate_store
    from warehouse.catalog import merge

    store = generate_store(tmp_path / "crush", projects=3, sessions_per_project=3, seed=5)
    _land_on_machines(store, tmp_path, "ab")  # each project's partition is landed by two sources
    monkeypatch.setattr(merge, "FILES_PER_READ", 2)  # six sources: three reads, a project in two
    catalog, tables = tmp_path / "fresh.ducklake", tmp_path / "fresh"
    result = merge.merge(tmp_path / "lake", catalog, data_path=f"{tables}/", marts=False)  # it reads tables only
    assert result.rows["messages"] == 2 * store.messages and result.rows["parts"] > result.rows["messages"]
    compact(catalog, keep_seconds=0)
    files = list((tables / "main" / "messages").rglob("*.parquet"))
    assert len(files) == len({f.parent for f in files}) == 3  # three projects, one year each


def test_a_merge_that_leaves_many_files_per_partition_is_compacted(tmp_path, monkeypatch):
    """The merge counts its files against the partitions on its own connection, and `refresh`
    compacts when they outnumber them; a merge that changes nothing asks nothing."""
    from transforms.synth.crush import generate_store
    from warehouse.catalog import merge
    from warehouse.catalog import build
    from warehouse.lake import ducklake

    store = generate_store(tmp_path / "crush", projects=3, sessions_per_project=3, seed=5)
    _land_on_machines(store, tmp_path, "abcde")
    monkeypatch.setattr(merge, "FILES_PER_READ", 1)  # a file per source in every partition
    catalog = tmp_path / "fresh.ducklake"
    compacted = []  # the messages' files when `refresh` compacted

    def one(sql):
        with ducklake.connect(catalog) as con:
            return con.execute(sql).fetchone()[0]

    def message_files():
        return one("SELECT COUNT(*) FROM ducklake_list_files('lake', 'messages')")

    def compacting(c, lake=""):
        compacted.append(message_files())
        compact(c, keep_seconds=0, lake=lake)

    monkeypatch.setattr(build, "compact", compacting)
    result = build.refresh(tmp_path / "lake", catalog)
    assert result.merged == 15 and result.crowded
    assert compacted == [15] and message_files() == 3  # five sources in three projects, one year each
    assert one("SELECT COUNT(*) FROM messages") == 5 * store.messages
    again = build.refresh(tmp_path / "lake", catalog)
    assert not again.changed and not again.crowded and compacted == [15]


def test_a_lost_state_loses_no_history(layout, project):
    """A new or wiped agentlake home over an existing lake: the source's files are found by name,
    so a session the agent pruned meanwhile is still carried forward, and nothing is doubled."""
    import shutil

    p = _two_day_project(project)
    ingest_tables(layout, p.db)
    before = query(layout, "SELECT session_id, cost_usd FROM sessions ORDER BY 1")
    shutil.rmtree(layout.state_dir)
    conn = sqlite3.connect(p.db)
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("DELETE FROM sessions WHERE id = 's2'")
    conn.commit()
    conn.close()
    summary = ingest_tables(layout, p.db)
    assert summary.results[0].retained_sessions == 1
    assert query(layout, "SELECT session_id, cost_usd FROM sessions ORDER BY 1") == before
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 2


def test_merge_full_and_compact_from_the_cli(layout, project, capsys):
    """`agentlake merge --full` rebuilds every table from the landing files (a table's data file
    lost by hand), and `agentlake compact` leaves about one file per partition."""
    from pipelines.cli import main

    p = _two_day_project(project)
    ingest_tables(layout, p.db)
    args = ["--home", str(layout.home)]
    assert main(["compact", *args, "--keep-seconds", "0"]) == 0
    assert "files read by the tables and marts:" in capsys.readouterr().out
    for f in layout.lake.glob("main/messages/**/*.parquet"):
        f.unlink()  # a table's data deleted by hand: the landing files still hold it
    assert main(["merge", *args, "--full"]) == 0
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 2
    assert main(["views", *args]) == 0  # the old name still works
    assert "merged 0 sources" in capsys.readouterr().out


def test_tables_of_an_older_layout_are_rebuilt_in_the_new_one_with_every_row(layout, project):
    """An upgrade that changes the partitioning (or the contract) moves every row, history
    included, into the new layout on the next merge; the old files go at compaction."""
    from warehouse.lake import ducklake
    from warehouse.catalog.merge import LAKE_TABLE
    from warehouse.catalog.build import refresh

    p = _two_day_project(project)
    ingest_tables(layout, p.db)
    rows = "SELECT date, project, source_id, session_id, cost_usd FROM sessions ORDER BY session_id"
    before = query(layout, rows)
    with ducklake.writing(layout.warehouse) as con:  # as a release partitioned by month left it
        con.execute('ALTER TABLE sessions SET PARTITIONED BY (year("date"), month("date"), "project")')
        con.execute("CREATE TEMP TABLE kept AS FROM sessions")
        con.execute("DELETE FROM sessions")
        con.execute("INSERT INTO sessions FROM kept")
        con.execute(f"UPDATE {LAKE_TABLE} SET schema_version = 'older/2'")
    compact(layout.warehouse, keep_seconds=0)  # out of the catalog's inlined rows, into files

    def month_dirs():
        return {str(f.parent) for f in layout.lake.glob("main/sessions/**/month=*/**/*.parquet")}

    assert month_dirs()
    refresh(layout.lake, layout.warehouse)
    compact(layout.warehouse, keep_seconds=0)
    assert query(layout, rows) == before
    assert query(layout, f"SELECT schema_version FROM {LAKE_TABLE}") != [("older/2",)]
    assert not month_dirs()
    assert list(layout.lake.glob("main/sessions/year=2026/project=two-days/*.parquet"))


def test_files_a_killed_merge_left_are_invisible_and_compact_orphans_removes_them(layout, project, capsys):
    """A merge killed mid-write may leave data files its catalog never committed: no reader
    sees them, and `agentlake compact --orphans` deletes them."""
    from pipelines.cli import main

    p = _two_day_project(project)
    ingest_tables(layout, p.db)
    stray = layout.lake / "main" / "messages" / "year=2026" / "project=two-days" / "ducklake-stray.parquet"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(b"")  # what SIGKILL leaves of a file being written
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 2
    assert main(["compact", "--home", str(layout.home), "--keep-seconds", "0"]) == 0
    assert stray.exists()  # not without being asked: another catalog may share a directory lake
    landed = sorted(p for p in layout.lake.rglob("*") if p.is_file() and "main" not in p.relative_to(layout.lake).parts)
    assert any("_landing" in str(p) for p in landed) and any("_state" in str(p) for p in landed)
    assert main(["compact", "--home", str(layout.home), "--keep-seconds", "0", "--orphans"]) == 0
    assert not stray.exists()
    # the home's own lake is the tables' data path: what landed there, and the state, are not orphans
    assert sorted(p for p in layout.lake.rglob("*") if p.is_file() and "main" not in p.relative_to(layout.lake).parts) == landed
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 2
    assert main(["merge", "--home", str(layout.home), "--full"]) == 0  # every source still there to rebuild from
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 2


def test_machines_sharing_a_lake_folder_keep_their_tables_apart(tmp_path, project, capsys):
    """A directory lake that several machines land into (a shared mount) is not any one
    catalog's: each catalog writes its tables beside itself, so one machine's `compact
    --orphans` cannot take another's files, and the lake holds no copy of anyone's tables."""
    from pipelines.cli import main

    p = _two_day_project(project)
    lake = tmp_path / "shared-lake"
    homes = [tmp_path / "ana", tmp_path / "bo"]
    for home, machine in zip(homes, ("ana-laptop", "bo-laptop")):
        common = ["--home", str(home), "--lake", str(lake), "--machine", machine]
        assert main(["ingest", "--db", str(p.db), *common]) == 0
    assert not (lake / "main").exists()
    bo = Layout.resolve(home=homes[1], lake=lake)
    before = scalar(bo, "SELECT COUNT(*) FROM messages")
    assert before == 4 and list((homes[1] / "warehouse-tables" / "main").rglob("*.parquet"))
    assert main(["compact", "--home", str(homes[0]), "--lake", str(lake), "--keep-seconds", "0", "--orphans"]) == 0
    assert scalar(bo, "SELECT COUNT(*) FROM messages") == before
    capsys.readouterr()
    assert main(["sql", "SELECT COUNT(*) FROM messages", "--home", str(homes[1]), "--format", "csv"]) == 0
    assert capsys.readouterr().out.split() == ["count_star()", "4"]  # the lake named once, not since


def _marts_equal_a_full_recompute(layout):
    """Every mart table holds exactly what its SQL computes from the tables now (as multisets)."""
    from tests.support_marts import recompute_marts
    from warehouse.catalog.marts import MARTS
    from warehouse.lake.ducklake import connect

    with connect(layout.warehouse, ours=True) as con:
        recompute_marts(con)
        counts = {}
        for name in MARTS:
            # sums of doubles depend on the order rows arrive in: compared to the nano-dollar
            cols = ", ".join(f'round("{c}", 9)' if t == "DOUBLE" else f'"{c}"'
                             for c, t in con.execute(f'SELECT column_name, column_type FROM (DESCRIBE lake.main."{name}")').fetchall())
            # the mart table is read once (each read of a lake table looks its files up in the catalog)
            *extras, counts[name] = con.execute(
                f'WITH written AS MATERIALIZED (SELECT {cols} FROM lake.main."{name}"), '
                f'fresh AS MATERIALIZED (SELECT {cols} FROM temp.main."{name}") '
                "SELECT (SELECT COUNT(*) FROM (FROM written EXCEPT ALL FROM fresh)), "
                "(SELECT COUNT(*) FROM (FROM fresh EXCEPT ALL FROM written)), (SELECT COUNT(*) FROM written)").fetchone()
            for a, extra in zip(("lake.main", "temp.main"), extras):
                assert extra == 0, (name, a)
        return counts


def test_marts_are_updated_for_the_projects_a_merge_touched(tmp_path, monkeypatch):
    """A changed source recomputes its projects' mart rows only, and the marts still equal a full
    recompute: after a change, after a source is removed, across every agent."""
    import shutil

    from transforms.synth.demo import generate_demo
    from warehouse.catalog import marts
    from warehouse.lake.layout import Layout
    from warehouse.catalog.marts import PENDING
    from warehouse.catalog.merge import merge

    monkeypatch.setattr(marts, "WHOLE_BELOW_ROWS", -1)  # the demo's lake is small: as a larger one

    demo = generate_demo(tmp_path / "demo")
    layout = Layout.resolve(home=tmp_path / "home", machine="laptop", user="dev")
    ingest(layout, homes={p: list(r) for p, r in demo.roots().items() if p != "crush"}, roots=demo.roots()["crush"])
    before = _marts_equal_a_full_recompute(layout)
    assert before["daily_costs"] and before["session_summary"] and before["tool_usage"]

    db = demo.truths["crush"].dbs[0]
    conn = sqlite3.connect(db.path)
    add_session(conn, "late", title="late", created_at=T0 + 40 * DAY, cost=2.5)
    add_message(conn, "late-m", "late", "assistant", [text_part("ok")], created_at=T0 + 40 * DAY)
    conn.commit()
    conn.close()
    from tests.conftest import discover_only
    from warehouse.land.ingest import ingest_all

    sources, problems = discover_only(roots=demo.roots()["crush"])
    ingest_all(sources, layout, problems=problems)
    merge(layout.lake, layout.warehouse, marts=False)  # as a merge killed before its marts left it
    pending = scalar(layout, f"SELECT list(DISTINCT project) FROM {PENDING}")
    changed_project = scalar(layout, "SELECT project FROM sessions WHERE session_id = 'late'")
    assert pending == [changed_project]  # one project of the demo's four, not all of them
    merge(layout.lake, layout.warehouse)
    after = _marts_equal_a_full_recompute(layout)
    assert scalar(layout, f"SELECT COUNT(*) FROM {PENDING}") == 0
    assert scalar(layout, "SELECT SUM(cost_usd) FROM daily_costs WHERE project = ?", changed_project) == \
        scalar(layout, "SELECT SUM(cost_usd)::DECIMAL(38, 9) FROM sessions WHERE is_root AND project = ?", changed_project)
    assert after["session_summary"] == before["session_summary"] + 1

    shutil.rmtree(layout.lake / "_landing" / "laptop")  # every source gone: their rows and mart rows too
    merge(layout.lake, layout.warehouse)
    assert all(n == 0 for n in _marts_equal_a_full_recompute(layout).values())


@pytest.mark.parametrize("small", [True, False], ids=["small lake: computed whole", "past WHOLE_BELOW_ROWS: by project"])
def test_a_small_lakes_merge_computes_every_mart_whole_into_its_table_and_both_ways_equal_a_full_recompute(
        layout, project, monkeypatch, small):
    """Up to WHOLE_BELOW_ROWS rows, a merge that touched a project computes every mart again whole,
    into the same tables (a project it did not touch is written again too); past it, only the
    projects it touched are refreshed (and the marts refreshed whole are computed again into their
    tables). Both equal a full recompute, and no mart's table is made again."""
    from warehouse.catalog import marts

    if not small:
        monkeypatch.setattr(marts, "WHOLE_BELOW_ROWS", -1)
    shop, blog = project("shop"), project("blog")
    for p in (shop, blog):
        add_session(p.conn, "s1", title=p.path.name, created_at=T0, cost=0.5)
        add_message(p.conn, "m1", "s1", "assistant", [text_part("a")], created_at=T0, model="claude-sonnet-4-5",
                    provider="anthropic")
        p.conn.commit()
    blog.close()  # unchanged from here on (closing checkpoints its WAL)
    ingest(layout, shop.db, blog.db)
    ids = "SELECT table_name, table_id FROM ducklake_table_info('lake') WHERE table_name IN ({})".format(
        ", ".join(f"'{m}'" for m in marts.MARTS))
    before = dict(query(layout, ids))
    snapshot = scalar(layout, "SELECT MAX(snapshot_id) FROM ducklake_snapshots('lake')")
    add_session(shop.conn, "s2", title="day two", created_at=T0 + DAY, cost=0.25)
    add_message(shop.conn, "m2", "s2", "assistant", [text_part("b")], created_at=T0 + DAY, model="gpt-5.1",
                provider="openai")
    shop.close()
    ingest(layout, shop.db, blog.db)
    after = dict(query(layout, ids))
    by_project = {m for m, sql in marts.mart_sql() if m in after and marts.refreshes_by_project(sql)}
    kept = {m for m in after if after[m] == before[m]}  # the same tables
    assert set(before) == set(marts.MARTS) and kept == set(after) and len(by_project) > 10
    now = scalar(layout, "SELECT MAX(snapshot_id) FROM ducklake_snapshots('lake')")
    changed = dict(query(layout, "SELECT project, COUNT(*) FROM ducklake_table_changes('lake', 'main', "
                                 "'daily_costs', ?, ?) WHERE change_type IN ('delete', 'update_preimage') GROUP BY 1",
                         snapshot + 1, now))
    assert changed == ({"shop": 1, "blog": 1} if small else {"shop": 1})
    counts = _marts_equal_a_full_recompute(layout)
    assert counts["session_summary"] == 3 and counts["daily_costs"] == 3


def _recorded_counts(layout) -> dict:
    """The count of each mart's rows `_agentlake_marts` keeps after its hash (`<sha>#rows=N`), with
    the rows the mart holds."""
    from warehouse.catalog.marts import MARTS

    recorded = {name: value.split("#rows=") for name, value in query(layout, "SELECT name, sql_sha FROM _agentlake_marts")}
    return {name: (int(recorded[name][1]) if len(recorded.get(name, ())) == 2 else None,
                   scalar(layout, f'SELECT COUNT(*) FROM "{name}"')) for name in MARTS}


def test_a_mart_empty_then_filled_keeps_its_count_and_equals_a_full_recompute(layout, project):
    """A small lake's merge computes a mart it knows to be empty before touching its table (left
    alone while it stays empty); the counts the merge keeps of each mart's rows are its rows through
    a mart's first rows and a later merge, and every mart equals a full recompute. A catalog kept
    without counts (an older release's) gains them."""
    from transforms.synth.crush_parts import bash_output, finish_part, tool_call_part, tool_result_part
    from warehouse.lake.ducklake import writing

    def counts_hold():
        counts = _recorded_counts(layout)
        assert all(recorded == held for recorded, held in counts.values()), counts
        return counts

    shop = project("shop")
    add_session(shop.conn, "s1", title="talk", created_at=T0, cost=0.5)
    add_message(shop.conn, "m1", "s1", "assistant", [text_part("a")], created_at=T0, model="claude-sonnet-4-5",
                provider="anthropic")
    shop.conn.commit()
    ingest(layout, shop.db)
    assert counts_hold()["shell_commands"] == (0, 0)
    with writing(layout.warehouse) as con:  # as an older release kept it: the hashes alone
        con.execute("UPDATE _agentlake_marts SET sql_sha = split_part(sql_sha, '#', 1)")
    assert set(_recorded_counts(layout)["shell_commands"]) == {None, 0}
    add_session(shop.conn, "s2", title="tests", created_at=T0 + DAY, cost=0.25)
    add_message(shop.conn, "c1", "s2", "assistant", [tool_call_part("b1", "bash", {"command": "npm test"}),
                                                     finish_part("tool_use", T0 + DAY)],
                created_at=T0 + DAY, model="claude-sonnet-4-5", provider="anthropic")
    add_message(shop.conn, "r1", "s2", "tool", [tool_result_part("b1", "bash", bash_output("ok"))],
                created_at=T0 + DAY + 1)
    shop.conn.commit()
    ingest(layout, shop.db)
    filled = counts_hold()
    assert filled["shell_commands"][1] > 0 and filled["session_summary"] == (2, 2)
    _marts_equal_a_full_recompute(layout)
    add_session(shop.conn, "s3", title="more talk", created_at=T0 + 2 * DAY, cost=0.125)
    shop.close()
    ingest(layout, shop.db)
    later = counts_hold()
    assert later["session_summary"] == (3, 3) and later["shell_commands"] == filled["shell_commands"]
    assert {name for name, (_, held) in later.items() if held == 0} == {
        name for name, (_, held) in filled.items() if held == 0} != set()
    _marts_equal_a_full_recompute(layout)


def test_a_source_that_failed_is_not_read_again_until_it_changes(layout, project, tmp_path):
    """A no-op rerun stays cheap with broken sources present: the same bytes fail the same way,
    so the failure is reported from the state; new bytes are read again."""
    bad = tmp_path / "broken" / ".crush" / "crush.db"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a database " * 400)
    first = ingest_tables(layout, bad)
    assert first.results[0].status == "failed" and "not a readable SQLite database" in first.results[0].error
    again = ingest_tables(layout, bad)
    assert again.results[0].status == "failed"
    assert "unchanged since; not read again" in again.results[0].error
    assert "not a readable SQLite database" in again.results[0].error  # the reason is kept
    bad.unlink()
    p = _two_day_project(project)
    shutil.copyfile(p.db, bad)  # the same path, now a good store
    fixed = ingest_tables(layout, bad)
    assert fixed.results[0].status == "ok"
    assert scalar(layout, "SELECT COUNT(*) FROM sessions WHERE title = 'day two'") >= 1


def test_a_failure_the_environment_causes_is_retried_not_remembered():
    """A store SQLite cannot open (permissions, a lock) may open next run with the same bytes: it
    is retried; a store that is not a database fails the same way until it changes."""
    import sqlite3

    from transforms.snapshot import SnapshotError
    from transforms.provider import environmental as _environmental

    def raised(inner):
        try:
            try:
                raise inner
            except Exception:
                raise SnapshotError("cannot open it") from None
        except SnapshotError as exc:
            return exc

    assert _environmental(raised(sqlite3.OperationalError("unable to open database file")))
    assert _environmental(raised(PermissionError(13, "Permission denied")))
    assert not _environmental(raised(sqlite3.DatabaseError("file is not a database")))


def test_the_writer_spills_beside_its_catalog_not_into_the_working_directory(tmp_path, monkeypatch):
    """DuckDB's default spill directory is `.tmp` in the working directory: a user's repository."""
    from warehouse.lake import ducklake

    monkeypatch.chdir(tmp_path)
    catalog = tmp_path / "home" / "warehouse.ducklake"
    monkeypatch.setitem(ducklake.WRITER_SETTINGS, "memory_limit", "64MB")
    with ducklake.writing(catalog) as con:
        spill = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
        assert spill == str(catalog.parent / ".warehouse.writer.ducklake.spill")
        # a sort of about twice the memory limit: it completes by spilling there (four times was
        # refused once in the full suite, short of a 256 kB block)
        con.execute("CREATE TABLE memory.main.sorted AS SELECT i, md5(i::VARCHAR) AS h FROM range(2000000) t(i) "
                    "ORDER BY h")
        assert con.execute("SELECT COUNT(*) FROM memory.main.sorted").fetchone()[0] == 2000000
        spilled = con.execute("SELECT path, size FROM duckdb_temporary_files()").fetchall()
        assert sum(size for _, size in spilled) > 32 * 2**20
        assert all(path.startswith(spill + "/") for path, _ in spilled)
    assert not (tmp_path / ".tmp").exists()


def test_only_agentlakes_own_connections_skip_duckdbs_second_check_of_the_pinned_binary(tmp_path, monkeypatch):
    """DuckDB hashes the 36 MB extension at every LOAD to check its signature. The writer and
    the merge's checks load the pinned binary by its path, its SHA-256 checked by agentlake;
    a connection a user's SQL runs on keeps DuckDB's check (else that SQL could LOAD any
    unsigned binary); and a binary that is not the pinned one is checked by DuckDB everywhere."""
    from warehouse.lake import ducklake

    if ducklake.pinned_binary() is None:
        pytest.skip("no pinned ducklake binary on this platform: every connection keeps DuckDB's check")
    unsigned = "SELECT current_setting('allow_unsigned_extensions')"
    catalog = tmp_path / "warehouse.ducklake"
    with ducklake.writing(catalog) as con:
        assert con.execute(unsigned).fetchone()[0] is True
        assert con.execute("SELECT loaded FROM duckdb_extensions() WHERE extension_name = 'ducklake'").fetchone()[0]
        con.execute("CREATE TABLE t AS SELECT 1 AS x")
    with ducklake.connect(catalog, ours=True) as con:
        assert con.execute(unsigned).fetchone()[0] is True
    with ducklake.connect(catalog) as con:
        assert con.execute(unsigned).fetchone()[0] is False
        assert con.execute("SELECT x FROM t").fetchall() == [(1,)]

    # another binary (its pin not matched; on linux x86 it would be refused outright)
    monkeypatch.setitem(ducklake.PINNED, "ducklake", "0" * 64)
    monkeypatch.setattr(ducklake, "_is_linux_x86", lambda: False)
    for cached in (ducklake.packaged_extension, ducklake.pinned_binary):
        cached.cache_clear()
    try:
        with ducklake.writing(catalog) as con:
            assert con.execute(unsigned).fetchone()[0] is False
            assert con.execute("SELECT x FROM t").fetchall() == [(1,)]
    finally:
        for cached in (ducklake.packaged_extension, ducklake.pinned_binary):
            cached.cache_clear()


def test_a_merge_that_runs_out_of_memory_is_run_again_with_more(layout, project, monkeypatch):
    """Under a limit too small for DuckDB itself the first try fails with an out-of-memory
    error, on a new catalog and on an existing one; the retry with most of the machine's memory
    merges everything, once."""
    from warehouse.lake import ducklake
    from warehouse.catalog.build import refresh

    p = _two_day_project(project)
    monkeypatch.setitem(ducklake.WRITER_SETTINGS, "memory_limit", "1MB")
    ingest(layout, p.db)  # a new catalog
    assert query(layout, "SELECT session_id FROM sessions ORDER BY 1") == [("s1",), ("s2",)]
    conn = sqlite3.connect(p.db)
    add_message(conn, "m3", "s2", "user", [text_part("c")], created_at=T0 + DAY + 1)
    conn.commit()
    conn.close()
    ingest(layout, p.db)  # an existing one
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 3
    assert not refresh(layout.lake, layout.warehouse).changed


def test_a_mart_is_built_with_the_threads_its_header_asks_for(layout, project):
    """insight_unused_reads says `-- threads: 1` (its join ran out of memory with two threads on
    a team's history): its statement runs with one, the others and the blocks it reads with the
    writer's own, which is back afterwards."""
    from warehouse.lake import ducklake
    from warehouse.catalog import marts

    ingest_tables(layout, _two_day_project(project).db)
    seen, blocks = {}, {}

    def threads_now(con):
        return con.execute("SELECT current_setting('threads')").fetchone()[0]

    class Recording:
        def __init__(self, con):
            self.con = con

        def execute(self, sql, *args):
            if sql.startswith("CREATE OR REPLACE TABLE lake.main."):
                seen[sql.split('"')[1]] = threads_now(self.con)
            elif "CREATE TEMP TABLE _" in sql:  # a building block
                blocks[sql.split("CREATE TEMP TABLE ")[1].split()[0]] = threads_now(self.con)
            return self.con.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self.con, name)

    with ducklake.writing(layout.warehouse) as con:
        con.execute("SET threads = 3")
        con.execute("BEGIN")
        marts.refresh_marts(Recording(con), whole=True)
        after = threads_now(con)
        con.execute("ROLLBACK")
    assert [name for name, sql in marts.mart_sql() if marts.threads(sql)] == ["insight_unused_reads"]
    assert seen["insight_unused_reads"] == 1
    assert set(seen) == set(marts.MARTS) and {n for n, t in seen.items() if t != 3} == {"insight_unused_reads"}
    assert set(blocks) == {"_session_tree", "_step_models", "_step_costs", "_file_calls", "_message_models"} and set(blocks.values()) == {3}
    assert after == 3


@pytest.mark.parametrize("copied", [True, False], ids=["from one copy of its rows", "from the lake"])
def test_marts_built_whole_from_one_copy_of_a_small_lake_equal_those_built_from_the_lake(lake, monkeypatch, copied):
    """Every mart built whole reads one temporary copy of a small lake's rows (SMALL_LAKE_ROWS), or
    the lake's tables past it: both equal a full recompute from the lake."""
    from warehouse.catalog import marts
    from warehouse.catalog.merge import merge

    if not copied:
        monkeypatch.setattr(marts, "SMALL_LAKE_ROWS", -1)  # as past it
    merge(lake.lake, lake.warehouse, full=True)
    counts = _marts_equal_a_full_recompute(lake)
    assert counts["daily_costs"] and counts["session_summary"] and counts["tool_usage"]


@pytest.mark.parametrize("large", [True, False], ids=["large merge", "small merge"])
def test_a_small_merge_commits_its_tables_and_marts_as_one_snapshot(layout, project, monkeypatch, large):
    """A merge that inserted few rows builds its marts in its tables' transaction: one commit, one
    snapshot holding both. Past MARTS_WITH_TABLES_ROWS the tables are committed first, then the marts."""
    from warehouse.catalog import merge as merging

    if large:
        monkeypatch.setattr(merging, "MARTS_WITH_TABLES_ROWS", -1)  # as past it
    p = _two_day_project(project)
    ingest(layout, p.db)
    before = scalar(layout, "SELECT MAX(snapshot_id) FROM ducklake_snapshots('lake')")
    conn = sqlite3.connect(p.db)
    add_session(conn, "s3", title="day three", created_at=T0 + 2 * DAY, cost=0.125)
    conn.commit()
    conn.close()
    ingest(layout, p.db)
    changes = [c for _, c in query(layout, "SELECT snapshot_id, changes FROM ducklake_snapshots('lake') "
                                           "WHERE snapshot_id > ? ORDER BY 1", before)]
    tables = {r[0]: str(r[1]) for r in query(layout, "SELECT table_name, table_id FROM ducklake_table_info('lake')")}
    inserted = [{name for name, tid in tables.items() if tid in c.get("inlined_insert", []) + c.get(
        "tables_inserted_into", [])} for c in changes]
    assert len(changes) == (2 if large else 1)
    assert "sessions" in inserted[0] and "session_summary" in inserted[-1]
    assert ("session_summary" in inserted[0]) is not large
    assert scalar(layout, "SELECT COUNT(*) FROM session_summary") == 3


def test_rows_a_merge_deletes_count_toward_a_large_merge_as_those_it_inserts(lake, monkeypatch):
    """A merge that only takes sources out (a machine or an agent's folder removed) deletes rows
    and inserts none: past MARTS_WITH_TABLES_ROWS it commits them before building its marts."""
    from warehouse.catalog import merge as merging

    deleted = scalar(lake, "SELECT COUNT(*) FROM sessions WHERE provider = 'codewhale'")
    assert deleted == 3
    monkeypatch.setattr(merging, "MARTS_WITH_TABLES_ROWS", deleted - 1)  # the sessions alone are past it
    before = scalar(lake, "SELECT MAX(snapshot_id) FROM ducklake_snapshots('lake')")
    shutil.rmtree(lake.lake / "_landing" / "laptop" / "dev" / "codewhale")
    result = merging.merge(lake.lake, lake.warehouse)
    assert result.removed == 1 and result.deleted > deleted and not result.rows.total()
    assert scalar(lake, "SELECT COUNT(*) FROM ducklake_snapshots('lake') WHERE snapshot_id > ?", before) == 2
    assert scalar(lake, "SELECT COUNT(*) FROM session_summary WHERE provider = 'codewhale'") == 0


@pytest.mark.parametrize("large", [True, False], ids=["large merge", "small merge"])
def test_marts_that_run_out_of_memory_are_built_again_and_the_tables_merged_once(layout, project, monkeypatch,
                                                                                 large):
    """A large merge's marts have a transaction of their own after the tables': marts that run
    out of their cap are built again with most of the machine's memory, on the tables merged
    once. A small merge's marts are built in the tables' transaction: that fails, and the whole
    merge runs again with more memory. Either way the merge's counts are those of one merge."""
    from warehouse.lake import ducklake
    from warehouse.catalog import marts
    from warehouse.catalog import merge as merging

    if large:
        monkeypatch.setattr(merging, "MARTS_WITH_TABLES_ROWS", -1)  # as past it
    monkeypatch.setattr(marts, "MEMORY_LIMIT", "1MB")  # too little for DuckDB itself
    tables, limits = [], []
    merge_tables, refresh_marts = merging._merge_tables, merging.refresh_marts
    monkeypatch.setattr(merging, "_merge_tables", lambda *a: tables.append(1) or merge_tables(*a))
    monkeypatch.setattr(merging, "refresh_marts",
                        lambda con, **k: limits.append(k["memory_limit"]) or refresh_marts(con, **k))
    p = _two_day_project(project)
    from tests.conftest import discover_only
    from warehouse.land.ingest import ingest_all

    sources, problems = discover_only(p.db)
    ingest_all(sources, layout, problems=problems)
    result = merging.merge(layout.lake, layout.warehouse)
    assert tables == ([1] if large else [1, 1]) and limits == [None, ducklake.roomy_memory_limit()]
    assert result.merged == 1 and result.rows["sessions"] == 2
    assert _marts_equal_a_full_recompute(layout)["session_summary"] == 2


@pytest.mark.parametrize("large", [True, False], ids=["large merge", "small merge"])
def test_a_merge_cut_off_before_its_marts_publishes_nothing_and_the_next_builds_them(layout, project, monkeypatch,
                                                                                     large):
    """A writer stopped between the tables' transaction and the marts' (a large merge's), or in
    their one transaction (a small merge's), publishes nothing: readers keep the tables and marts
    from before. The next merge builds the marts from its own copy, whole after a whole rebuild: a
    project gone from the tables leaves the marts too."""
    from warehouse.catalog import merge as merging

    dbs = []
    for name in ("kept", "gone"):
        p = project(name)
        dbs.append(p.db)
        add_session(p.conn, f"{name}-s", title=name, created_at=T0, cost=0.5)
        add_message(p.conn, f"{name}-m", f"{name}-s", "user", [text_part("a")], created_at=T0)
        p.close()
    ingest(layout, *dbs)
    before = _marts_equal_a_full_recompute(layout)
    shutil.rmtree(next(layout.lake.glob("_landing/*/*/crush")) / query(
        layout, "SELECT source_id FROM sessions WHERE project = 'gone'")[0][0])

    def cut_off(con, **_):
        raise KeyboardInterrupt

    monkeypatch.setattr(merging, "_refresh_marts", cut_off)  # a large merge's, after its tables' commit
    monkeypatch.setattr(merging, "refresh_marts", cut_off)  # a small merge's, in its tables' transaction
    if large:
        monkeypatch.setattr(merging, "MARTS_WITH_TABLES_ROWS", -1)  # as past it
    try:
        merging.merge(layout.lake, layout.warehouse, full=True)
    except KeyboardInterrupt:
        pass
    assert query(layout, "SELECT DISTINCT project FROM sessions ORDER BY 1") == [("gone",), ("kept",)]
    assert _marts_equal_a_full_recompute(layout) == before
    monkeypatch.undo()
    merging.merge(layout.lake, layout.warehouse)
    assert query(layout, "SELECT DISTINCT project FROM sessions") == [("kept",)]
    assert query(layout, "SELECT DISTINCT project FROM session_summary") == [("kept",)]
    assert _marts_equal_a_full_recompute(layout)["session_summary"] == 1
