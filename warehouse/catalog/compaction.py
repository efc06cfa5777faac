"""Compaction and the sweep: small files merged, inlined rows written out, and the files no
reader needs any more deleted once they have waited out the readers' grace (`agentlake compact`,
and each merge's own sweep)."""

import os
from datetime import timedelta
from pathlib import Path

from transforms.contract import ALL_TABLES
from warehouse.lake import ducklake

GRACE_SECONDS = 600  # how long a reader's snapshot keeps its files once a newer one replaced it (`sweep`)


SLACK = 20  # files past 1.2 per partition that a lake may hold before it is compacted


def crowded(con) -> bool:
    """More live data files than 1.2 per partition, plus some slack (asked on the writer's own
    connection: a connection of its own added to a changed source's merge, docs/BENCHMARKS.md,
    "Figures behind the code's choices")."""
    meta = f"__ducklake_metadata_{ducklake.CATALOG}"
    live = f"FROM {meta}.ducklake_data_file WHERE end_snapshot IS NULL"
    if con.execute(f"SELECT COUNT(*) {live}").fetchone()[0] <= SLACK:  # a small lake: crowded it is not
        return False
    files, partitions = con.execute(f"""
        SELECT COUNT(*), COUNT(DISTINCT (f.table_id, v.values))
        FROM {meta}.ducklake_data_file f
        LEFT JOIN (SELECT data_file_id, list(partition_value ORDER BY partition_key_index) AS values
                   FROM {meta}.ducklake_file_partition_value GROUP BY data_file_id) v USING (data_file_id)
        WHERE f.end_snapshot IS NULL""").fetchone()
    return files > 1.2 * partitions + SLACK


class DamagedTables(RuntimeError):
    """A file of the tables is lost or cut short: compaction leaves it to the merge to build."""


def compact(catalog: Path, *, keep_seconds: int = GRACE_SECONDS, orphans: bool = False,
            data_path: str | None = None, lake: str = "") -> dict[str, int]:
    """Write the rows small merges kept inline in the catalog out to Parquet, merge adjacent small files, rewrite files with many deleted rows, and remove the files no
    snapshot younger than `keep_seconds` needs (a reader holding an older snapshot keeps its
    files for that long). Returns the data files before and after. `data_path`: the layout's
    (see ducklake.writing), for a home moved or copied since its last write; `lake`: its URI,
    whose endpoint a catalog in PostgreSQL reaches its tables through, as a merge does."""
    return ducklake.retried_with_more_memory(
        lambda limit: _compact(catalog, keep_seconds, orphans, limit, data_path, lake))


def _compact(catalog: Path, keep_seconds: int, orphans: bool, memory_limit: str | None,
             data_path: str | None, lake: str = "") -> dict[str, int]:
    with ducklake.writing(catalog, data_path, memory_limit, rebuilds=False, lake=lake) as con:
        broken = ducklake.damaged_files(con)
        if broken:  # compaction reads every file it merges: the merge builds them again first
            table, files = sorted(broken.items())[0]
            more = sum(map(len, broken.values())) - 1
            raise DamagedTables(f"the warehouse's `{table}` table file {files[0]}"
                                f"{f' (and {more} more)' if more else ''}: nothing was compacted; `agentlake merge` "
                                "builds the tables again from the landing files")
        before = _file_count(con)
        sweep(con, keep_seconds, catalog)  # first, so what the compaction replaces below is not taken for expired
        flushed = con.execute(f"CALL ducklake_flush_inlined_data('{ducklake.CATALOG}')").fetchall()  # small writes
        con.execute(f"CALL ducklake_rewrite_data_files('{ducklake.CATALOG}')")
        con.execute(f"CALL ducklake_merge_adjacent_files('{ducklake.CATALOG}')")
        sweep(con, keep_seconds, catalog)  # with no grace, what the compaction replaced goes too
        if orphans:
            _delete_orphans(con, keep_seconds, lake)
        after = _file_count(con)
    return {"files_before": before, "files_after": after, "rows_written_out": int(sum(r for _, _, r in flushed))}


def _delete_orphans(con, keep_seconds: int, lake: str = "") -> int:
    """Data files a killed merge wrote but never committed, in the tables' own folder only.
    DuckLake lists every file under the data path that its catalog does not know, and a home's
    own lake is that data path: its landing files and state (`_landing/`, `_state/`) would be
    listed, and deleted, with them. Listed by DuckLake (a dry run), deleted here: through the
    lake's object store when the tables are there (a catalog in PostgreSQL; `lake` names its
    endpoint)."""
    from warehouse.lake.pg_catalog import CLAIM
    from warehouse.lake.storage import is_remote, open_store

    data = ducklake.stored_data_path(con)
    listed = con.execute(f"CALL ducklake_delete_orphaned_files('{ducklake.CATALOG}', dry_run => true, "
                         f"older_than => now() - INTERVAL {int(keep_seconds)} SECOND)").fetchall()
    listed = [(path,) for (path,) in listed if not path.endswith("/" + CLAIM)]  # the lake's claim: no table's
    if is_remote(data):
        root, tables = data.rstrip("/"), ducklake.tables_folder(data)
        store = open_store(lake if is_remote(lake) else root)
        orphans = [path[len(root) + 1:] for (path,) in listed if path.startswith(tables)]
        for rel in orphans:
            store.delete(rel)
        return len(orphans)
    tables = os.path.normpath(ducklake.tables_folder(data)) + os.sep
    deleted = 0
    for (path,) in listed:
        if os.path.normpath(path).startswith(tables):
            os.remove(path)
            deleted += 1
    return deleted


def _file_count(con) -> int:
    return sum(len(con.execute(f"FROM ducklake_list_files('{ducklake.CATALOG}', ?)", [t.name]).fetchall())
               for t in ALL_TABLES)


# --- the files no reader needs any more: deleted by each merge and compaction (`sweep`) ---------

def sweep(con, keep_seconds: int, catalog) -> None:
    """Expire the snapshots readers stopped attaching more than `keep_seconds` ago, and delete the
    files no snapshot needs any more once they have waited out the same grace.

    A snapshot stops being the readers' when a later one is published (ducklake.publications):
    neither when it was replaced by a commit (DuckLake's `older_than` counts from a snapshot's
    creation, and yesterday's last snapshot, current until a minute ago, would go at once) nor
    at the replacing snapshot's `snapshot_time`, which is its transaction's start: a merge that
    took minutes shortened its readers' grace by as much. The snapshot readers attach now is kept,
    and so are a writer's commits that no writer published (it died first).

    A file a compaction scheduled for deletion at `schedule_start` is needed until the
    publication after it, so it waits for that one's grace. A file that only expired snapshots
    needed is safe to delete as soon as it is scheduled, unless files a compaction scheduled
    are waiting out their grace: then the expired ones wait for the next sweep. Every time is
    taken on the catalog's clock (ducklake.catalog_now): PostgreSQL's for a catalog there."""
    meta = f"__ducklake_metadata_{ducklake.CATALOG}"
    snapshots = f"SELECT snapshot_id FROM {meta}.ducklake_snapshot WHERE snapshot_id < ?"
    if keep_seconds <= 0:  # no grace: the readers are not waited for, every replaced snapshot goes
        last = con.execute(f"SELECT max(snapshot_id) FROM {meta}.ducklake_snapshot").fetchone()[0]
        expired = [r[0] for r in con.execute(snapshots, [last]).fetchall()]
        if expired:
            con.execute(f"CALL ducklake_expire_snapshots('{ducklake.CATALOG}', versions => ?)", [expired])
        con.execute(f"CALL ducklake_cleanup_old_files('{ducklake.CATALOG}', cleanup_all => true)")
        return
    cutoff = ducklake.catalog_now(con, catalog) - timedelta(seconds=keep_seconds)
    # the publications past their grace: every snapshot before the newest of them was replaced for
    # readers by it (or by an earlier one) at least the grace ago
    past = [(snapshot, at) for snapshot, at in ducklake.publications(con, catalog) if at <= cutoff]
    if not past:
        return
    newest = max(snapshot for snapshot, _ in past)
    expired = [r[0] for r in con.execute(snapshots, [newest]).fetchall()]
    if expired:
        started = ducklake.catalog_now(con, catalog)  # what expiring schedules is scheduled from here on
        con.execute(f"CALL ducklake_expire_snapshots('{ducklake.CATALOG}', versions => ?)", [expired])
    # the files scheduled before the last publication past its grace
    con.execute(f"CALL ducklake_cleanup_old_files('{ducklake.CATALOG}', older_than => ?)", [max(at for _, at in past)])
    if expired and not con.execute(f"SELECT COUNT(*) FROM {meta}.ducklake_files_scheduled_for_deletion "
                                   "WHERE schedule_start < ?", [started]).fetchone()[0]:
        con.execute(f"CALL ducklake_cleanup_old_files('{ducklake.CATALOG}', cleanup_all => true)")


def file_counts(catalog: Path, data_path: str | None = None, lake: str = "") -> dict[str, int]:
    """The tables' files the catalog's current snapshot reads (`live`, data and delete files),
    and the Parquet files under its data path's tables folder (`on_disk`, and their names,
    `listed`): the difference is what readers of older snapshots still have, and what a sweep has
    yet to delete."""
    from warehouse.lake.storage import is_remote, open_store

    meta = f"__ducklake_metadata_{ducklake.CATALOG}"
    with ducklake.connect(catalog, data_path, ours=True) as con:
        live = sum(con.execute(f"SELECT COUNT(*) FROM {meta}.{kind} f JOIN {meta}.ducklake_table t USING (table_id) "
                               "WHERE f.end_snapshot IS NULL AND t.end_snapshot IS NULL").fetchone()[0]
                   for kind in ("ducklake_data_file", "ducklake_delete_file"))
        stored = data_path or ducklake.stored_data_path(con)
    # a bucket's tables through the lake's URI, whose endpoint the data path (the lake's place only) has not
    store = open_store(lake if is_remote(lake) and is_remote(stored) else stored.rstrip("/"))
    listed = frozenset(store.list("main"))
    return {"live": live, "on_disk": len(listed), "listed": listed}
