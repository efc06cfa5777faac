"""The hive export for Spark and Trino (warehouse/serve/hive_export.py): versions published by a
pointer, only changed partitions written, the rest carried over without their bytes moving, old
versions swept after their grace; and the merge's own sweep of the DuckLake files no reader needs
(warehouse/catalog/compaction.py `sweep`). Real lakes, catalogs and files; S3 on a loopback moto server."""

import os
from pathlib import Path

import duckdb

from tests.conftest import Project, add_message, add_session, assistant, ingest_tables, T0, DAY
from tests.support_s3 import BUCKET, s3, s3_client, s3_server  # noqa: F401  (the moto fixtures)
from transforms.contract import ALL_TABLES
from warehouse.catalog.compaction import compact, file_counts
from warehouse.catalog.merge import merge
from warehouse.lake.ducklake import connect
from warehouse.serve.hive_export import EXPORT, current_version, export_tables


def _columns(table) -> str:
    return ", ".join(f'"{c}"' for c in table.column_names)


def _catalog_rows(layout) -> dict[str, list]:
    """Every table's rows as the catalog has them, sorted."""
    with connect(layout.warehouse, ours=True) as con:
        return {t.name: sorted(con.execute(f'SELECT "date", "project", {_columns(t)} FROM "{t.name}"').fetchall(),
                               key=repr) for t in ALL_TABLES}


def _version_rows(root: Path) -> dict[str, list]:
    """Every table's rows as one version of the export holds them, keys from the directory names."""
    out = {}
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        for t in ALL_TABLES:
            files = sorted((root / t.name).rglob("*.parquet"))
            sql = (f'SELECT "date"::DATE, "project", {_columns(t)} '
                   "FROM read_parquet(?, hive_partitioning = true, hive_types_autocast = false)")
            out[t.name] = sorted(con.execute(sql, [list(map(str, files))]).fetchall(), key=repr) if files else []
    return out


def _files(root: Path) -> dict[str, os.stat_result]:
    return {str(p.relative_to(root)): p.stat() for p in root.rglob("*.parquet")}


def _new_session(layout, tmp_path) -> None:
    """One new Crush store with one session, in a project of its own, ingested and merged."""
    p = Project(tmp_path / "more", "newproj")
    add_session(p.conn, "N1", title="new", created_at=T0 + 3 * DAY, cost=0.5)
    assistant(p.conn, "n1", "N1", T0 + 3 * DAY + 5)
    add_message(p.conn, "n0", "N1", "user", [], created_at=T0 + 3 * DAY)
    p.close()
    ingest_tables(layout, p.db)


def test_an_export_writes_only_what_changed_and_readers_keep_their_version(lake, tmp_path, monkeypatch):
    import warehouse.serve.hive_export as hive_export

    first = export_tables(lake.warehouse, lake.lake)
    first_state = hive_export._published(hive_export.open_store(lake.lake))  # as a later export reads it
    export = Path(lake.lake) / EXPORT
    assert current_version(lake.lake) == first.version and first.carried == 0
    old_rows = _catalog_rows(lake)
    assert _version_rows(export / first.version) == old_rows  # the export's rows are the catalog's
    old_files = _files(export / first.version)
    assert first.files == sum(first.written.values()) == len(old_files) - 1  # and the state file

    _new_session(lake, tmp_path)
    second = export_tables(lake.warehouse, lake.lake)
    new_files = _files(export / second.version)
    # the new session's partitions only: in the new project, and the run log's row of its run; and
    # a table without a row, its one file of none again (read as empty: no folder failed readers)
    written = {rel for rel, st in new_files.items() if rel not in old_files or st.st_ino != old_files[rel].st_ino}
    empty = {f"{t}/empty.parquet" for t, rows in _catalog_rows(lake).items() if not rows}
    assert empty and written - {"_partitions.parquet"} == {rel for rel in new_files if "project=newproj" in rel} | empty
    assert sum(second.written.values()) == len(written) - 1 > 0 and second.carried == first.files - len(empty)
    assert {rel.split("/")[0] for rel in written} >= {"sessions", "messages", "parts", "sources"}
    # every partition not written is the old version's file itself: a hard link, no byte copied
    assert all(new_files[rel].st_ino == st.st_ino for rel, st in old_files.items()
               if rel != "_partitions.parquet" and rel not in empty)

    # the pointer names the new version, written last; the old one is whole, for its readers
    pointer = export / "CURRENT"
    assert current_version(lake.lake) == second.version
    assert pointer.stat().st_mtime_ns >= max(st.st_mtime_ns for st in new_files.values())
    new_rows = _catalog_rows(lake)
    assert _version_rows(export / second.version) == new_rows != old_rows
    assert _version_rows(export / first.version) == old_rows

    # an export that read the first version as the published one while another (a second
    # center's) published the second: it must not move CURRENT back; its own folder goes
    real, reads = hive_export._published, []
    monkeypatch.setattr(hive_export, "_published", lambda store: (reads.append(1), first_state if len(reads) == 1
                                                                  else real(store))[1])
    late = export_tables(lake.warehouse, lake.lake)
    monkeypatch.undo()
    assert late.version == second.version and current_version(lake.lake) == second.version
    assert sorted(p.name for p in export.iterdir()) == sorted(["CURRENT", first.version, second.version])

    # nothing new: no version; past the grace, the replaced version goes, the current stays
    again = export_tables(lake.warehouse, lake.lake)
    assert again.version == second.version and not again.written and again.removed == []
    swept = export_tables(lake.warehouse, lake.lake, keep_seconds=0)
    assert swept.removed == [first.version]
    assert sorted(p.name for p in export.iterdir()) == ["CURRENT", second.version]
    assert _version_rows(export / second.version) == new_rows


def test_merges_past_the_grace_leave_the_live_files_and_an_export_to_s3_copies_what_did_not_change(lake, s3):
    """Files a merge or compaction replaced stay on disk for the readers' grace, and the next merge
    past it deletes them: then the files on disk are the ones the catalog reads. The export made
    before them (to S3) has its snapshot expired: every pair is fingerprinted, none differs, no
    file is written and every one is carried over by a copy in the store; the versions before,
    and the flat layout of before versions, go once their grace has passed."""
    uri = f"s3://{BUCKET}/hive-export"
    client = s3_client(s3)
    client.put_object(Bucket=BUCKET, Key="hive-export/export/sessions/date=2026-01-01/project=x/data_0.parquet",
                      Body=b"the flat layout before versions")

    def sizes(version):
        listed = client.list_objects_v2(Bucket=BUCKET, Prefix=f"hive-export/export/{version}/")["Contents"]
        return {o["Key"].split("/", 3)[3]: o["Size"] for o in listed if not o["Key"].endswith("_partitions.parquet")}

    first = export_tables(lake.warehouse, uri)
    before = sizes(first.version)
    compact(lake.warehouse, keep_seconds=0, data_path=lake.tables_path)  # the rows kept inline, to files
    landing = sorted((Path(lake.lake) / "_landing").rglob("sessions.parquet"))[0]
    for _ in range(2):  # its rows replaced twice (the same rows): the first's files and deletes unneeded
        os.utime(landing, ns=(landing.stat().st_mtime_ns + 10**9,) * 2)
        merge(lake.lake, lake.warehouse, marts=False)
    counts = file_counts(lake.warehouse)
    assert counts["on_disk"] > counts["live"]
    merge(lake.lake, lake.warehouse, marts=False, keep_seconds=0)  # nothing to merge; the grace is over
    counts = file_counts(lake.warehouse)
    assert counts["on_disk"] == counts["live"] > 0

    second = export_tables(lake.warehouse, uri, keep_seconds=0)
    empty = [t for t, rows in _catalog_rows(lake).items() if not rows]  # each one file of none, again
    assert empty and second.written == {t.name: int(t.name in empty) for t in ALL_TABLES}
    assert second.carried == first.files - len(empty) == len(before) - len(empty) > 0
    assert second.removed == ["", first.version]  # the flat layout, then the replaced version
    assert sizes(second.version) == before and current_version(uri) == second.version
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix="hive-export/")["Contents"]}
    # what is left: the version, the pointer, and the export folder's own marker (pyarrow's)
    assert {k for k in keys if not k.startswith(f"hive-export/export/{second.version}/")} <= \
        {"hive-export/export/CURRENT", "hive-export/export/"}


def test_a_sweep_keeps_the_snapshot_readers_hold_after_a_writer_died_before_publishing(lake, monkeypatch):
    """A writer that committed to its own copy, recorded its publication and died before its copy
    replaced the catalog never published: readers stay on the published snapshot, however long
    ago the dead writer's commit was. The next merge's sweep keeps it (and its files) until that
    merge publishes."""
    import duckdb
    import pytest

    from warehouse.lake import ducklake
    from warehouse.lake.layout import tables_path

    data_path = tables_path(lake.lake, lake.warehouse)
    merge(lake.lake, lake.warehouse)  # the copied home's first write: its catalog reads its own files from now on
    count = "SELECT COUNT(*), COUNT(DISTINCT message_id) FROM parts"
    with connect(lake.warehouse, ours=True) as con:
        before = con.execute(count).fetchone()
        assert con.execute("FROM ducklake_list_files('lake', 'parts')").fetchall()  # a file, not rows inlined
    # on the published snapshot, kept open as a dashboard's is (its file not read yet: not cached)
    reader = connect(lake.warehouse, ours=True)

    def dies(own, catalog):
        raise RuntimeError("the writer dies before its copy replaces the catalog")

    monkeypatch.setattr(ducklake, "publish", dies)
    with pytest.raises(RuntimeError), ducklake.writing(lake.warehouse, data_path) as con:
        con.execute("CREATE OR REPLACE TABLE parts AS SELECT * FROM parts LIMIT 0")  # its file: the published snapshot's only
    monkeypatch.undo()
    # hours ago: the catalog was published two hours ago, the dead writer's publication recorded an hour later
    hours_ago = os.stat(lake.warehouse).st_mtime - 2 * 3600
    os.utime(lake.warehouse, (hours_ago, hours_ago))
    with duckdb.connect(str(ducklake.writer_path(lake.warehouse))) as own:
        last = "(SELECT max(snapshot_id) FROM agentlake_published)"
        assert own.execute(f"UPDATE agentlake_published SET published_at = published_at - CASE WHEN snapshot_id = "
                           f"{last} THEN INTERVAL 1 HOUR ELSE INTERVAL 2 HOUR END").fetchone()[0] >= 2
    merge(lake.lake, lake.warehouse, keep_seconds=600)  # nothing landed since: a sweep, then a publish
    assert reader.execute(count).fetchone() == before  # its file is still there
    reader.close()


def test_a_long_merge_leaves_its_readers_the_whole_grace_from_its_publication(lake):
    """DuckLake stamps a snapshot with its transaction's start: a merge that ran for twenty
    minutes publishes a snapshot already twenty minutes old. The snapshot it replaced was the
    readers' until that publication, and keeps its files for the grace counted from there: a
    reader that attached it just before, still reading, finds them after the next merge."""
    from warehouse.lake.ducklake import writing
    from warehouse.lake.layout import tables_path

    data_path = tables_path(lake.lake, lake.warehouse)
    merge(lake.lake, lake.warehouse)  # the copied home's first write: its catalog reads its own files from now on
    count = "SELECT COUNT(*), COUNT(DISTINCT message_id) FROM parts"
    with connect(lake.warehouse, ours=True) as con:
        before = con.execute(count).fetchone()
    # attached just before the long merge publishes (its file not read yet: not cached)
    reader = connect(lake.warehouse, ours=True)
    files = [f for (f,) in reader.execute("SELECT data_file FROM ducklake_list_files('lake', 'parts')").fetchall()]
    assert files  # a file, not rows inlined in the catalog
    with writing(lake.warehouse, data_path) as con:
        con.execute("CREATE OR REPLACE TABLE parts AS SELECT * FROM parts LIMIT 0")  # the reader's file: replaced
        # the lake's history is two hours old, and this merge's transaction began 20 minutes ago
        meta = "__ducklake_metadata_lake"
        last = f"(SELECT max(snapshot_id) FROM {meta}.ducklake_snapshot)"
        con.execute(f"UPDATE {meta}.ducklake_snapshot SET snapshot_time = snapshot_time - CASE WHEN "
                    f"snapshot_id = {last} THEN INTERVAL 20 MINUTE ELSE INTERVAL 2 HOUR END")
    # published now; a merge a minute later (nothing landed since: a sweep, then a publish)
    merge(lake.lake, lake.warehouse, keep_seconds=600)
    assert all(Path(f).exists() for f in files)
    assert reader.execute(count).fetchone() == before
    reader.close()
    # no grace: the replaced snapshot and its file go
    merge(lake.lake, lake.warehouse, keep_seconds=0)
    assert not any(Path(f).exists() for f in files)


def test_publications_do_not_hang_on_the_catalog_files_clock(lake):
    """A publication is confirmed by the published catalog holding its snapshot, not by the
    file's time: on a file system whose clock is an hour behind (or that keeps whole seconds)
    every publication is still kept, and the one readers attach is the last."""
    from warehouse.lake.ducklake import connect as reader

    merge(lake.lake, lake.warehouse)
    landing = sorted((Path(lake.lake) / "_landing").rglob("sessions.parquet"))[0]
    for n in range(3):
        os.utime(landing, ns=(landing.stat().st_mtime_ns + 10**9,) * 2)  # a changed source: a new snapshot
        merge(lake.lake, lake.warehouse, marts=False)
        behind = int(os.stat(lake.warehouse).st_mtime) - 3600
        os.utime(lake.warehouse, (behind, behind))
    merge(lake.lake, lake.warehouse, marts=False)  # its sweep confirms the last
    with reader(lake.warehouse, ours=True) as con:
        published = [r[0] for r in con.execute("SELECT snapshot_id FROM __ducklake_metadata_lake.agentlake_published "
                                               "ORDER BY snapshot_id").fetchall()]
        last = con.execute("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')").fetchone()[0]
    assert len(published) >= 4 and published[-1] == last, (published, last)


def test_a_publication_history_without_its_pending_column_is_brought_up_to_date(lake):
    """A catalog whose publications an earlier build kept (without `pending`: judged by the
    file's time) is merged into, not refused: its quickstart demo failed to merge once."""
    import duckdb

    from warehouse.lake.ducklake import writer_path

    merge(lake.lake, lake.warehouse)
    merge(lake.lake, lake.warehouse, marts=False)  # a second writer: a history of two, the first confirmed
    with duckdb.connect(str(writer_path(lake.warehouse))) as own:
        own.execute("ALTER TABLE agentlake_published DROP COLUMN pending")
        kept = own.execute("SELECT count(*) FROM agentlake_published").fetchone()[0]
    assert kept >= 1
    landing = sorted((Path(lake.lake) / "_landing").rglob("sessions.parquet"))[0]
    os.utime(landing, ns=(landing.stat().st_mtime_ns + 10**9,) * 2)  # something to merge: a new snapshot
    result = merge(lake.lake, lake.warehouse, marts=False)
    assert result.problems == [] and result.merged
    with duckdb.connect(str(writer_path(lake.warehouse)), read_only=True) as own:
        rows = own.execute("SELECT pending FROM agentlake_published ORDER BY snapshot_id").fetchall()
    assert len(rows) == kept + 1 and rows[-1] == (True,) and not any(p for (p,) in rows[:-1])
