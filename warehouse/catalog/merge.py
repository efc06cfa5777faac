"""The single writer: landing files merged into the curated DuckLake tables, then the marts.

One writer session per merge. In its first transaction, each source whose landing files
changed since the last merge (by size and mtime, recorded in the catalog's `_agentlake_merged`)
has its rows deleted from every table and its landing rows inserted; a source whose landing
folder is gone loses its rows; new run-log files are appended to `sources`. The marts are then
rebuilt as tables, in the same transaction for a small merge (MARTS_WITH_TABLES_ROWS), else in a
second one. The writer works on its own copy of the catalog and publishes it
when both are done (`warehouse.lake.ducklake.writing`), so a reader sees the tables and the marts
before the merge or after it, never a mix and never a half-replaced source. A run killed at any
point leaves the landing files, and its copy the projects whose marts are pending, which the
next merge takes: the lake converges.

The changed sources are inserted 250 landing files per statement, each statement writing a
file per (table, year, project) it touches; `compact` then merges adjacent files and removes
what no snapshot needs (`warehouse.catalog.build.refresh` runs it when files outnumber partitions).
Each merge and compaction also deletes the files that have waited out the readers' grace (`sweep`;
both in warehouse.catalog.compaction).
"""

import shlex
import sys
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from transforms.contract import ALL_TABLES, DATA_TABLES, SCHEMA_VERSION, SOURCES, Table
from warehouse.lake import ducklake
from warehouse.lake.ducklake import sql_string
from warehouse.lake.layout import LANDING, RUNS, damage_note, home_flag, own_lake, same_lake
from warehouse.catalog.compaction import GRACE_SECONDS, crowded, sweep
from warehouse.catalog.marts import current as marts_current
from warehouse.catalog.marts import forget as forget_marts
from warehouse.catalog.marts import mark_pending, refresh_marts
from warehouse.catalog.prices import (FINGERPRINT_TABLE, apply_prices, record_fingerprint, recorded_fingerprint,
                                       unmatched_prices)
from warehouse.lake.prices import Prices
from warehouse.lake.scratch_dirs import scratch
from warehouse.lake.storage import EmptyLake, LakeUnreachable, ReadFromAnotherLake, is_remote, masked, open_store
from warehouse.land.landing_files import BOUNDS_CHECKED, CHECKED, LANDING_ID, ROW_KEYS, parquet_bytes

# Partitions: the row's year (from `date`) and project. Finer partitions give a file per few rows on
# a realistic history (sessions spread over months, a long tail of projects), and DuckLake pays per
# file: by month, many more files than by year, a slower merge, slower queries and more space
# (docs/BENCHMARKS.md, "Figures behind the code's choices"). A project stays a partition: a changed
# source's mart rows are recomputed from its project's files only (warehouse.catalog.marts).
PARTITION_BY = 'year("date"), "project"'
# The run log gets a few rows a run, one per source: by project that was a file per source and run.
PARTITION_BY_TABLE = {SOURCES.name: 'year("date"), month("date")'}
# What `_agentlake_lake` records: the contract, and the version of the layout above (a change to
# either rebuilds the tables from the landing files, once: see `merge`)
LAYOUT_VERSION = f"{SCHEMA_VERSION}/3"
MERGED = "_agentlake_merged"  # (path, version) of every landing file merged
LAKE_TABLE = "_agentlake_lake"  # one row: the lake whose landing files this catalog merges
# A merge that inserted and deleted at most this many rows builds its marts in its tables'
# transaction (`_small`): one commit, and DuckLake's catalog not loaded again for the marts (a
# first merge creates every table, and loading the new catalog cost as much as several marts). A
# larger one commits its changes first: they no longer hold memory while the marts are built
# (`_refresh_marts`). The figures:
# docs/BENCHMARKS.md, "Figures behind the code's choices".
MARTS_WITH_TABLES_ROWS = 100_000

_DUCK_TYPES = {"string": "VARCHAR", "int64": "BIGINT", "double": "DOUBLE", "bool": "BOOLEAN",
               "timestamp[us]": "TIMESTAMP"}


def duck_type(type_) -> str:
    return _DUCK_TYPES[str(type_)]


@dataclass
class MergeResult:
    merged: int = 0  # sources whose rows were replaced
    removed: int = 0  # sources whose landing folder is gone
    runs: int = 0  # run-log files appended
    waiting: list[str] = field(default_factory=list)  # sources caught half-way through a write
    source_ids: set[str] = field(default_factory=set)  # the sources whose rows were replaced
    sources: set[str] = field(default_factory=set)  # the same, as machine/user/provider/source_id
    landings: set[str] = field(default_factory=set)  # those landed since the last merge: machine/user/provider/source_id
    rows: Counter = field(default_factory=Counter)  # rows inserted, by table
    deleted: int = 0  # rows deleted from the tables (of the sources replaced or gone)
    crowded: bool = False  # more data files than partitions warrant: a compaction is due
    unreadable: list[str] = field(default_factory=list)  # landing files that are not Parquet: skipped
    problems: list[str] = field(default_factory=list)  # what the merge skipped, each a line to print
    search: object = None  # the search index's update after it (warehouse.catalog.search_index.IndexResult)
    search_staged: object = None  # what that update read in the transaction (search_index.Staged)
    repriced: bool = False  # config.toml's prices changed: every table was built again with them
    machines: int = 0  # machines with landing files in the lake
    landers: int = 0  # (machine, user) pairs with landing files in the lake
    projects: set = field(default_factory=set)  # those whose mart rows the merge changed (None: no project)
    first: bool = False  # the warehouse had merged nothing before (a new one, or one made anew)
    replaced_from: str | None = None  # the lake a warehouse made anew from this one was merged from

    @property
    def inserted(self) -> int:
        """Rows inserted into the tables, all tables together."""
        return sum(self.rows.values())

    @property
    def changed(self) -> bool:
        return bool(self.merged or self.removed or self.runs)


def _recorded(con) -> tuple[str, str] | None:
    """(lake, layout version) the catalog's tables were made for, or None for a new catalog."""
    try:
        return con.execute(f"SELECT lake, schema_version FROM {LAKE_TABLE}").fetchone()
    except duckdb.Error:
        return None


def _older_layout(recorded: tuple[str, str] | None) -> bool:
    """Tables written by another contract or partitioning: rebuilt whole from the landing files
    (which hold every row, pruned sessions' included: warehouse.land.retention), so every row moves
    to the new layout; compaction deletes the old files once no snapshot needs them."""
    return recorded is not None and recorded[1] != LAYOUT_VERSION


def ensure_tables(con, lake, recorded: tuple[str, str] | None) -> None:
    """Create the tables (partitioned by year and project) and add columns a newer contract has;
    nothing when the catalog's `recorded` lake and layout (`_recorded`) are this lake's and this one."""
    if recorded == (masked(str(lake)), LAYOUT_VERSION):
        return
    # zstd, as the landing files: half snappy's size on this data (docs/BENCHMARKS.md)
    con.execute(f"CALL {ducklake.CATALOG}.set_option('parquet_compression', 'zstd')")
    have = {r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ?", [ducklake.CATALOG]).fetchall()}
    for table in ALL_TABLES:
        if table.name not in have:
            cols = ", ".join(['"date" DATE', '"project" VARCHAR']
                             + [f'"{c.name}" {duck_type(c.type)}' for c in table.columns])
            con.execute(f'CREATE TABLE "{table.name}" ({cols})')
        # new files follow it; the files already written keep theirs until compaction rewrites them
        con.execute(f'ALTER TABLE "{table.name}" SET PARTITIONED BY ({PARTITION_BY_TABLE.get(table.name, PARTITION_BY)})')
        if table.name not in have:
            ducklake.give_statistics(con, f'"{table.name}"')  # after the ALTER: it refuses inlined rows
            continue
        existing = {r[0] for r in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = ? AND table_name = ?",
            [ducklake.CATALOG, table.name]).fetchall()}
        for c in table.columns:
            if c.name not in existing:
                con.execute(f'ALTER TABLE "{table.name}" ADD COLUMN "{c.name}" {duck_type(c.type)}')
    if MERGED not in have:
        con.execute(f"CREATE TABLE {MERGED} (path VARCHAR, version VARCHAR)")
    if LAKE_TABLE in have:
        con.execute(f"DROP TABLE {LAKE_TABLE}")
    con.execute(f"CREATE TABLE {LAKE_TABLE} AS SELECT {sql_string(masked(str(lake)))} AS lake, "
                f"{sql_string(LAYOUT_VERSION)} AS schema_version")


def _group(rel: str) -> str:
    """`_landing/m/u/provider/source_id/table.parquet` -> `m/u/provider/source_id`;
    a run log `_landing/m/u/_runs/name.parquet` is a group of its own."""
    return rel[len(LANDING) + 1:].rsplit("/", 1)[0] if f"/{RUNS}/" not in rel else rel


def _is_run_log(group: str) -> bool:
    return f"/{RUNS}/" in group


def plan(landed: dict[str, str], merged: dict[str, str]) -> tuple[dict[str, list[str]], set[str]]:
    """(changed groups -> their files, removed groups) from the landing listing and the merged state."""
    groups: dict[str, list[str]] = {}
    for rel in landed:
        groups.setdefault(_group(rel), []).append(rel)
    merged_groups: dict[str, set[str]] = {}
    for rel in merged:
        merged_groups.setdefault(_group(rel), set()).add(rel)
    changed = {g: sorted(files) for g, files in groups.items()
               if any(merged.get(f) != landed[f] for f in files) or merged_groups.get(g, set()) - set(files)}
    removed = set(merged_groups) - set(groups)
    return changed, removed


@dataclass(frozen=True)
class _Footer:
    """What a merge needs of one landing file, from its footer alone (read once per merge)."""

    names: frozenset[str]
    landing_id: bytes | None
    projects: frozenset | None  # from the `project` column's statistics; None when they cannot say
    # values out of range may be in it: landed without this release's checks, or its statistics say so
    suspect: bool = False
    rows: int | None = None  # None: not known


def _footer(path: Path) -> _Footer | None:
    try:
        meta = pq.read_metadata(path)
    except (OSError, ValueError):
        return None
    schema = meta.schema.to_arrow_schema()
    checked = (schema.metadata or {}).get(CHECKED) == BOUNDS_CHECKED
    return _Footer(frozenset(schema.names), (schema.metadata or {}).get(LANDING_ID), _projects_in(meta, schema),
                   suspect=not checked or _beyond_bounds(meta), rows=meta.num_rows)


_BOUNDS = {c.name: c.bounds for t in DATA_TABLES for c in t.bounded}


def _beyond_bounds(meta) -> bool:
    """The file's statistics show a value outside its column's bounds, or cannot say (a column
    of values without a minimum and a maximum: NaN only)."""
    for i in range(meta.num_columns):
        name = meta.schema.column(i).path
        if name not in _BOUNDS:
            continue
        low, high = _BOUNDS[name]
        for g in range(meta.num_row_groups):
            chunk = meta.row_group(g).column(i)
            stats = chunk.statistics
            if stats is None or not stats.has_min_max:
                if stats is None or stats.null_count < chunk.num_values:
                    return True
            elif stats.min < low or stats.max > high:
                return True
    return False


def _projects_in(meta, schema) -> frozenset | None:
    if "project" not in schema.names:
        return frozenset({None})
    if meta.num_rows == 0:  # an empty file has no statistics, and no project
        return frozenset()
    paths = [meta.schema.column(i).path for i in range(meta.num_columns)]
    if "project" not in paths:
        return None
    column = paths.index("project")
    found = set()
    for i in range(meta.num_row_groups):
        chunk = meta.row_group(i).column(column)
        stats = chunk.statistics
        if stats is None or not stats.has_null_count:
            return None
        if stats.null_count:
            found.add(None)
        if stats.null_count < chunk.num_values:
            if not stats.has_min_max or stats.min != stats.max:
                return None  # several projects (an OpenCode store): the file is read
            found.add(stats.min)
    return frozenset(found)


class _Footers(dict):
    """Landing files' footers by path, each read on first use."""

    def __missing__(self, path: Path) -> _Footer | None:
        self[path] = _footer(path)
        return self[path]


def _consistent(footers: list[_Footer | None]) -> bool:
    """All files of one source come from the same write (a reader racing the writer waits)."""
    return None not in footers and len({f.landing_id for f in footers}) == 1


def _local_copies(store, rels: list[str], workdir: Path) -> dict[str, Path]:
    """Local paths of landing files: the files themselves, or downloads from object storage. A
    file gone since the listing (its machine replaced its files) is left out: its source waits.
    One that cannot be read (permissions) is one error naming the lake, not a traceback."""
    if hasattr(store, "root"):
        return {rel: store.root / rel for rel in rels}
    out = {}
    for rel in rels:
        try:
            data = store.read(rel)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise LakeUnreachable(store.lake, exc) from None
        path = workdir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        out[rel] = path
    return out


def _source_key_sql(alias: str = "") -> str:
    p = f"{alias}." if alias else ""
    return f"concat_ws('/', {p}machine, {p}\"user\", {p}provider, {p}source_id)"


# A landed row belongs to the folder it landed in (`.../<machine>/<user>/<provider>/<source_id>/`),
# whatever its columns say (a folder copied by hand): so replacing or removing that folder's
# rows later always finds them.
FROM_PATH = {"machine": -5, "user": -4, "provider": -3, "source_id": -2}


# Landing files read per statement: DuckDB keeps each file's reader state until the statement ends
# (docs/BENCHMARKS.md, "Figures behind the code's choices"); 1,000 Codex sources' parts in one
# statement ran out of 512 MB. Each statement writes its own DuckLake files: more than one per
# partition is left to compaction (warehouse.catalog.build.refresh compacts when the files outnumber
# the partitions).
FILES_PER_READ = 250


def _batches(paths: list[Path]):
    for i in range(0, len(paths), FILES_PER_READ):
        yield paths[i:i + FILES_PER_READ]


def _insert(con, table: Table, paths: list[Path], footers: _Footers, *, identity_from_path: bool = True) -> int:
    # a file its footer says is empty adds no row: most sources land several empty tables (an agent
    # without file history), and each INSERT paid DuckLake's lookups of its table
    paths = [p for p in paths if footers[p] is None or footers[p].rows != 0]
    return sum(_insert_files(con, table, batch, footers, identity_from_path) for batch in _batches(paths))


def _insert_files(con, table: Table, paths: list[Path], footers: _Footers, identity_from_path: bool) -> int:
    files = ", ".join(sql_string(p) for p in paths)
    present = set()  # a file landed by an older contract may lack newer columns: they stay null
    for path in paths:
        present.update(footers[path].names if footers[path] else pq.read_schema(path).names)
    cols = []
    for c in ["date", "project", *table.column_names]:
        if identity_from_path and c in FROM_PATH:
            cols.append(f"string_split(filename, '/')[{FROM_PATH[c]}] AS \"{c}\"")
        elif c in present:
            cols.append(_guarded(table, c, present))
    sql = (f'INSERT INTO "{table.name}" BY NAME SELECT {", ".join(cols)} '
           f"FROM read_parquet([{files}], union_by_name = true, filename = true)")
    with _reading(paths):
        return con.execute(sql).fetchone()[0]


def _in_bounds_sql(name: str) -> str:
    low, high = _BOUNDS[name]
    return f'("{name}" BETWEEN {low} AND {high})'  # false for NaN and infinities, null for null


def _guarded(table: Table, name: str, present: set) -> str:
    """A column as the merge inserts it: a value outside its bounds (a landing file from another
    machine or an older release that did not check them, one edited by hand) is nulled, so it
    cannot fail the marts' exact sums for everyone; its cost is then unknown. Named by
    `_out_of_range`."""
    if name in _BOUNDS and any(c.name == name for c in table.bounded):
        return f'CASE WHEN {_in_bounds_sql(name)} THEN "{name}" END AS "{name}"'
    if name == "cost_source" and "cost_usd" in present and "cost_usd" in _BOUNDS:
        bad_cost = f'"cost_usd" IS NOT NULL AND NOT {_in_bounds_sql("cost_usd")}'
        return f"""CASE WHEN {bad_cost} THEN 'unknown' ELSE "cost_source" END AS "cost_source\""""
    return f'"{name}"'


MAX_NAMED = 5  # values out of range a merge names per landing file


def _out_of_range(con, store, files: list[tuple[str, Path]], footers: "_Footers") -> list[str]:
    """A line for each landing file that held values out of range (nulled as merged), naming the
    file, its source's machine and the rows: read only in the files landed without this release's
    checks or whose statistics show such a value, FILES_PER_READ to a statement."""
    said = []
    for table in DATA_TABLES:
        suspects = {path: rel for rel, path in files
                    if rel.endswith(f"/{table.name}.parquet") and footers[path] and footers[path].suspect}
        for batch in _batches(list(suspects)):
            names = set().union(*(footers[path].names for path in batch))
            bounded = [c.name for c in table.bounded if c.name in names]
            if not bounded:
                continue
            keys = ", ".join(f'"{k}"' for k in ROW_KEYS if k in names) or "NULL"
            where = " OR ".join(f'("{c}" IS NOT NULL AND NOT {_in_bounds_sql(c)})' for c in bounded)
            with _reading(batch):
                rows = con.execute(
                    f'SELECT filename, coalesce({keys}, NULL), {", ".join(chr(34) + c + chr(34) for c in bounded)} '
                    f"FROM read_parquet([{', '.join(sql_string(p) for p in batch)}], union_by_name = true, "
                    f"filename = true) WHERE {where}").fetchall()
            named: dict[str, list[str]] = {}
            for filename, key, *values in rows:
                named.setdefault(filename, []).extend(
                    f"{table.name}.{c} = {value!r} (key {key})" for c, value in zip(bounded, values)
                    if value is not None and not (_BOUNDS[c][0] <= value <= _BOUNDS[c][1]))
            for filename, bad in sorted(named.items()):
                rel = suspects[Path(filename)]
                machine = rel[len(LANDING) + 1:].split("/", 1)[0]
                more = f"; and {len(bad) - MAX_NAMED} more" if len(bad) > MAX_NAMED else ""
                said.append(f"the landing file {store.uri(rel)} holds {len(bad)} values out of range, nulled in the "
                            f"warehouse: {'; '.join(bad[:MAX_NAMED])}{more} (landed by an older release, or edited: "
                            f"`agentlake ingest --full-refresh` on {machine} lands them again, checked)")
    return said


def merge(lake, catalog: Path, *, data_path: str | None = None, marts: bool = True,
          full: bool = False, prices: Prices = Prices(), keep_seconds: int = GRACE_SECONDS,
          then=None, before_commit=None) -> MergeResult:
    """Merge the lake's landing files into the catalog's tables. `full` rebuilds every table.
    `prices`: config.toml's (warehouse.catalog.prices); other prices than the last merge's
    rebuild every table. `keep_seconds`: the readers' grace (see `sweep`), then the files no
    reader needs any more are deleted. `then(con, result)`: run on the writer's connection once
    the tables and marts are committed, before the catalog is published (the search index reads
    them there: warehouse.catalog.build.refresh). `before_commit(con, result)`: run last in the
    tables' transaction when the marts share it (the search index reads what it needs there).

    The writer's small memory limits keep a merge under 1 GB; an operator that cannot spill
    within them (a window or a join over a team's history) fails its transaction, which is run
    again once with most of the machine's memory: the whole merge for the inserts (and for a small
    merge's marts, in the same transaction), a large merge's marts alone for theirs."""
    result = ducklake.retried_with_more_memory(
        lambda limit: _merge(lake, catalog, data_path=data_path, marts=marts, full=full, prices=prices,
                             memory_limit=limit, keep_seconds=keep_seconds, then=then,
                             before_commit=before_commit))
    for problem in result.problems:  # every caller's output (ingest, merge, the center's run log)
        print(f"warning: {problem}", file=sys.stderr, flush=True)
    return result


def _merge(lake, catalog: Path, *, data_path: str | None, marts: bool, full: bool, prices: Prices,
           memory_limit: str | None = None, keep_seconds: int = 0, then=None,
           before_commit=None) -> MergeResult:
    from warehouse.lake.layout import tables_path

    if is_remote(lake):  # before the catalog is opened: a new one records its tables' folder in the lake
        open_store(lake).check_bucket()
    replaced = []  # the lake the catalog made anew had merged from, if another one with sources

    def on_rebuild(old) -> None:
        if not full:
            _refuse_replacing(old, lake, catalog)
        recorded = _recorded(old)
        if recorded and not same_lake(recorded[0], masked(str(lake))) and _merged_sources(old):
            replaced.append(recorded[0])

    with scratch("merge") as workdir, \
            ducklake.writing(catalog, data_path or tables_path(lake, catalog), memory_limit, lake=str(lake),
                             on_rebuild=on_rebuild) as con:
        # the tables' files as the catalog recorded them: one lost or cut short is built again
        broken = ducklake.damaged_files(con, footers=full)
        footers, damaged, kept = _Footers(), {}, None
        while True:  # ends: each round leaves out more files, or keeps rows once
            result = MergeResult()
            try:
                with _transaction(con):
                    build = _merge_tables(con, lake, catalog, workdir, result, full, footers, damaged, kept,
                                          set(broken), prices)
                    if result.merged and result.landers > 1:  # one lander's files hold no copy of another's
                        result.problems += _copies_said(con, result.source_ids)
                    if marts and build and _small(result, broken, kept):  # marts that run out fail
                        # this transaction: the merge is run again with more memory (`merge`)
                        refresh_marts(con, whole=build == "whole", memory_limit=memory_limit,
                                      added=result.inserted, touched=result.projects)
                        build = None
                        if before_commit:
                            before_commit(con, result)
                    else:  # for the marts' own transaction, or the next merge's (a merge cut off)
                        mark_pending(con, result.projects)
                break
            except _Again as again:
                damaged.update(again.damaged)
                if again.keep:
                    kept = _keep(con, again.keep)
        result.replaced_from = result.replaced_from or (replaced[0] if replaced else None)
        result.problems[:0] = [_rebuilt(table, file) for table, files in sorted(broken.items()) for file in files]
        if kept:
            result.problems += kept.lost
        # a large merge's marts in a transaction of their own: the inserts, committed, no longer
        # hold memory there (ten machines' marts ran out of 600 MB after them in one transaction,
        # and fit alone). Readers still see both at once: the catalog is published when the writer ends.
        if marts and build:
            _refresh_marts(con, whole=build == "whole", memory_limit=memory_limit)
        if then:
            then(con, result)
        result.crowded = bool(result.merged or result.removed) and crowded(con)
        sweep(con, keep_seconds, catalog)
    return result


def _small(result: MergeResult, broken: dict, kept: "_Kept | None") -> bool:
    """The merge's marts can share its tables' transaction: it inserted and deleted at most
    MARTS_WITH_TABLES_ROWS rows, kept no unreadable source's rows, and dropped no damaged table (a
    mart or bookkeeping table it dropped is still in the committed catalog the marts ask)."""
    return (result.inserted + result.deleted <= MARTS_WITH_TABLES_ROWS
            and not broken and not kept)


def _copies_said(con, source_ids) -> list[str]:
    """A line for each two machines, or users, that landed the same root sessions
    (checks.copied_sessions): both copies count, and nothing said it (a team lead's trial; a user
    renamed on one machine, a new user's)."""
    from warehouse.catalog.checks import copied_sessions

    return [f"{n} root sessions landed by {a} were landed by {b} too (the same agent, id and start: a store "
            f"copied to another machine, or a machine or user ingested again under a new name?): each copy is "
            f"counted; docs/TEAM.md, \"Renaming or retiring a machine\"" for a, b, n in copied_sessions(con, source_ids)]


# the tables a merge builds from the landing files (dropped and made again by a full merge)
BUILT = frozenset([t.name for t in ALL_TABLES] + [MERGED, LAKE_TABLE])


def _merge_tables(con, lake, catalog: Path, workdir: Path, result: MergeResult, full: bool, footers: "_Footers",
                  damaged: dict[Path, str], kept: "_Kept | None", broken: set[str],
                  prices: Prices = Prices()) -> str | None:
    """The tables' part of a merge, in its transaction. Returns "whole" or "some" when the marts
    are to be built after it, else None. `damaged`: the landing files an earlier round found
    unreadable (by their path here), left out as those without a footer are; `kept`: the rows a
    full merge keeps of the sources it cannot read (`_keep`); `broken`: the tables with a file
    lost or cut short (ducklake.damaged_files), never read: one the merge builds is built in full
    (every table), a mart or the marts' bookkeeping is made again whole. `prices`: config.toml's,
    applied to the inserted sources; other prices than the recorded ones build every table."""
    store = open_store(lake)
    landed = store.versions(LANDING)
    result.machines = len({rel.split("/", 2)[1] for rel in landed if rel.count("/") > 1})
    result.landers = len({tuple(rel.split("/", 3)[1:3]) for rel in landed if rel.count("/") > 2})
    recorded = None if LAKE_TABLE in broken else _recorded(con)
    before = {} if MERGED in broken else _merged_files(con)
    result.first = not before
    if not full and recorded is not None and MERGED not in broken:
        _refuse_emptying(con, lake, catalog, landed, recorded[0])
    fingerprint = prices.fingerprint()
    repriced = fingerprint != ("" if FINGERPRINT_TABLE in broken else recorded_fingerprint(con))  # all priced again
    full = full or _older_layout(recorded) or bool(broken & BUILT) or repriced
    merged = {} if full else before
    changed, removed = plan(landed, merged)
    if removed and recorded is not None and not same_lake(recorded[0], masked(str(lake))) and not _moved(
            recorded[0], lake, catalog):
        result.replaced_from = recorded[0]  # its sources this lake does not hold leave: said
    local = _local_copies(store, [f for files in changed.values() for f in files], workdir)
    sources, waiting = _complete(changed, local, footers, damaged)
    if full:
        # a source that cannot be read now (a damaged file, a machine caught writing) keeps the
        # rows it had: read before the tables go, outside this transaction (a table whose own file
        # is lost fails the read, which would end the transaction)
        held = {g for g in waiting if any(f.startswith(f"{LANDING}/{g}/") for f in before)}
        if held and (kept is None or held - kept.groups):
            raise _Again(keep=held | (kept.groups if kept else set()))
        # dropped, not deleted from: a table whose data file was lost cannot be read
        for name in [t.name for t in ALL_TABLES] + [MERGED, LAKE_TABLE]:
            con.execute(f'DROP TABLE IF EXISTS "{name}"')
    for name in sorted(broken - BUILT):  # marts and their bookkeeping: made again, whole
        con.execute(f'DROP TABLE IF EXISTS "{name}"')
    ensure_tables(con, lake, None if full else recorded)
    if recorded is not None:  # a catalog made before its new tables were given statistics (after
        ducklake.give_missing_statistics(con)  # ensure_tables: an ALTER refuses a table given them)
    if full and kept:
        _restore(con, kept, {g for g in waiting if g in kept.groups})
    runs = [g for g in changed if _is_run_log(g)]
    # the run log is appended to; only a log file edited or deleted by hand rebuilds it whole
    if any(g in merged for g in runs) or any(_is_run_log(g) for g in removed):
        runs = sorted(g for g in {_group(f) for f in landed} if _is_run_log(g))
        local.update(_local_copies(store, [g for g in runs if g not in local], workdir))
        con.execute(f'DELETE FROM "{SOURCES.name}"')
    # a file that is not Parquet (an upload stored raw, a file truncated by hand) is named and
    # skipped: its own source waits, a run log is left out, and every other file is merged
    runs = [g for g in runs if g in local]  # one gone since the listing is removed by the next merge

    def unreadable(rel: str) -> bool:
        return footers[local[rel]] is None or local[rel] in damaged

    result.unreadable = sorted(f for g in changed for f in changed[g] if f in local and unreadable(f))
    result.unreadable += sorted(g for g in runs if g not in changed and unreadable(g))
    bad_runs = {g for g in runs if unreadable(g)}
    runs = [g for g in runs if g not in bad_runs]
    result.problems += [_unreadable(store.uri(rel), local[rel], rel, damaged.get(local[rel]))
                        for rel in result.unreadable]
    _note_damaged(store, {rel: (landed[rel], damaged.get(local[rel]) or "not a Parquet file")
                          for rel in result.unreadable if not _is_run_log(rel)})
    # those caught half-way through a write; the unreadable ones are said above
    result.waiting = [g for g in waiting if not any(_group(rel) == g for rel in result.unreadable)]
    gone = {g for g in removed if not _is_run_log(g)}
    # only a source merged before has rows to take out: its rows and its files' record are
    # committed together (after a full merge's drop, none has)
    had_rows = {_group(f) for f in merged}
    replaced = {g for g in set(sources) | gone if g in had_rows}
    touched = _projects_of(con, replaced)  # their old rows' projects
    result.deleted = _delete_sources(con, replaced)
    for table in DATA_TABLES:
        files = [local[f] for files in sources.values() for f in files if f.endswith(f"/{table.name}.parquet")]
        result.rows[table.name] = _insert(con, table, files, footers)
        touched |= _landed_projects(con, files, footers)
    if sources and prices:
        with _replaced(con, set(sources)):
            apply_prices(con, prices, _OF_REPLACED)
    if repriced:
        record_fingerprint(con, fingerprint)
        result.repriced = bool(before)  # a first merge has no history priced otherwise (it said "changed")
        result.problems += unmatched_prices(con, prices)
    result.projects = touched
    result.problems += _out_of_range(con, store, [(f, local[f]) for files in sources.values() for f in files], footers)
    result.rows[SOURCES.name] = _insert(con, SOURCES, [local[g] for g in runs], footers,
                                      identity_from_path=False)
    # a bad run log is not recorded as merged (nor its earlier version): named again each merge until fixed
    _record_merged(con, {f: landed[f] for g in sources for f in changed[g]} | {g: landed[g] for g in runs},
                   removed | bad_runs)
    result.merged, result.removed, result.runs = len(sources), len(gone), len(runs)
    result.source_ids = {g.rsplit("/", 1)[1] for g in sources}
    result.sources = set(sources)
    # landed since the last merge (a full merge reads every source again: those are not new)
    result.landings = {g for g in sources if any(before.get(f) != landed[f] for f in changed[g])}
    if full or broken:
        forget_marts(con)  # a build cut off after this commit is whole when it runs again
        return "whole"
    return "some" if result.merged or result.removed or not marts_current(con) else None


def _rebuilt(table: str, file: str) -> str:
    built = "the tables are built again from the landing files" if table in BUILT else "the marts are built again"
    return f"the warehouse's `{table}` table file {file}: {built}"


class _Again(Exception):
    """The tables' transaction, rolled back, is run again: without the landing files an insert
    found it cannot read (`damaged`), or once the rows of the sources a full merge cannot read
    are kept (`keep`)."""

    def __init__(self, damaged: dict[Path, str] | None = None, keep: set[str] | None = None):
        super().__init__("again")
        self.damaged, self.keep = damaged or {}, keep or set()


@contextmanager
def _reading(paths: list[Path]):
    """A statement reading these landing files. One that fails because DuckDB cannot read one of
    them (a page damaged past its footer: "Out of buffer", a ZSTD failure) is `_Again` without
    them, found by reading each alone; any other failure is itself."""
    try:
        yield
    except duckdb.Error as exc:
        if isinstance(exc, (duckdb.OutOfMemoryException, duckdb.InterruptException)):
            raise
        found = _unreadable_files(paths)
        if not found:
            raise
        raise _Again(damaged=found) from None


def _unreadable_files(paths: list[Path]) -> dict[Path, str]:
    """Of these files, those DuckDB cannot read whole, with its reason."""
    from warehouse.lake.duckdb_settings import connection_config

    found = {}
    with duckdb.connect(config=connection_config()) as probe:
        for path in paths:
            try:
                for _ in probe.execute("SELECT * FROM read_parquet(?)", [str(path)]).to_arrow_reader():
                    pass
            except duckdb.Error as exc:
                found[Path(path)] = " ".join(str(exc).split())
    return found


@dataclass
class _Kept:
    """The rows a full merge keeps of the sources it cannot read now, in temporary tables."""

    groups: set[str]
    tables: list[str] = field(default_factory=list)  # the tables whose rows were kept
    lost: list[str] = field(default_factory=list)  # what could not be kept, each a line to print


def _keep(con, groups: set[str]) -> _Kept:
    """Copy these sources' rows and merged files out of the tables before a full merge drops them
    (outside its transaction: a table that cannot be read loses those rows, said, not the merge)."""
    kept = _Kept(set(groups))
    with _replaced(con, groups):
        for table in DATA_TABLES:
            try:
                con.execute(f'CREATE OR REPLACE TEMP TABLE "_kept_{table.name}" AS '
                            f'SELECT * FROM {ducklake.CATALOG}."{table.name}" WHERE {_OF_REPLACED}')
                kept.tables.append(table.name)
            except duckdb.Error as exc:
                kept.lost.append(f"the rows of {len(groups)} sources whose landing files cannot be read were lost "
                                 f"from `{table.name}` ({' '.join(str(exc).split())}): they come back when their "
                                 "machines land them again")
    likes = [f"{LANDING}/{g}/%" for g in sorted(groups)]
    con.register("_kept_likes", pa.table({"pattern": pa.array(likes, pa.string())}))
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE _kept_merged AS SELECT m.path, m.version FROM {MERGED} m "
                    "WHERE EXISTS (SELECT 1 FROM _kept_likes k WHERE m.path LIKE k.pattern)")
    finally:
        con.unregister("_kept_likes")
    return kept


def _restore(con, kept: _Kept, groups: set[str]) -> None:
    """The kept rows of `groups` (still unreadable) back in the tables made anew, with the
    landing files they were merged from: their rows stay until their machines land them again,
    and a source removed since is removed from the tables."""
    if not groups:
        return
    with _replaced(con, groups):
        for name in kept.tables:
            columns = {r[0] for r in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE database_name = ? AND table_name = ?",
                [ducklake.CATALOG, name]).fetchall()}
            have = [r[0] for r in con.execute(f'DESCRIBE temp."_kept_{name}"').fetchall() if r[0] in columns]
            cols = ", ".join(f'"{c}"' for c in have)
            con.execute(f'INSERT INTO "{name}" ({cols}) SELECT {cols} FROM temp."_kept_{name}" WHERE {_OF_REPLACED}')
        group = "concat_ws('/', " + ", ".join(f"split_part(path, '/', {i})" for i in range(2, 6)) + ")"
        con.execute(f"INSERT INTO {MERGED} SELECT path, version FROM temp._kept_merged "
                    f"WHERE {group} IN (SELECT k FROM _replaced)")


def _merged_files(con) -> dict[str, str]:
    """The landing files the catalog merged (path -> version); none for a new catalog."""
    try:
        return dict(con.execute(f"SELECT path, version FROM {MERGED}").fetchall())
    except duckdb.CatalogException:
        return {}


def _note_damaged(store, files: dict[str, tuple[str, str]]) -> None:
    """A note for each landing file that cannot be read, where its machine's next ingest finds it
    and lands its source again (warehouse.land.ingest.take_damage_notes). A lake this merge may
    not write (a reader's) gets none: the warning names the file all the same."""
    if not files:
        return
    notes = {damage_note(rel): parquet_bytes(pa.table({"file": [rel], "version": [version], "reason": [reason]}))
             for rel, (version, reason) in files.items()}
    try:
        store.put_all(notes)
    except OSError:
        pass


def _moved(recorded: str, lake, catalog: Path) -> bool:
    """The catalog's own lake, at its home's old place (a home moved or copied whole): not another lake."""
    return own_lake(lake, catalog) and not is_remote(recorded) and Path(recorded).name == "lake"


def _refuse_replacing(con, lake, catalog: Path) -> None:
    """A reader's home (its catalog merged from a team's lake) merging its own lake, as `ingest`
    or a bare `merge` there does: the catalog, whose tables are elsewhere, would be built anew
    from this machine's rows, or from none (it emptied the warehouse, "0 ok", exit 0). Stopped,
    naming the lake to merge instead; `merge --full` makes the home its own lake's on purpose.
    Called on the old catalog before a writer discards it (ducklake.writing's `on_rebuild`)."""
    recorded, own = _recorded(con), masked(str(lake))
    if recorded is None or not own_lake(lake, catalog) or same_lake(recorded[0], own):
        return
    merged_from = recorded[0]
    merged = _merged_sources(con)
    if not merged:
        return
    quoted = shlex.quote(merged_from)  # a URI's `?...&...` would end the pasted command
    home = home_flag(Path(catalog).parent)
    raise ReadFromAnotherLake(
        f"the warehouse {catalog} is read from the lake {merged_from} ({len(merged)} sources merged from it), "
        f"not from this home's own lake {own}: merging that would replace them, and nothing "
        f"was merged. To refresh it, run `agentlake merge{home} --lake {quoted}`; to land this machine's "
        f"agents there too, run `agentlake ingest{home} --lake {quoted}` (or set lake in config.toml); "
        f"to make the warehouse this home's own lake's, run `agentlake merge{home} --full`")


def _refuse_emptying(con, lake, catalog: Path, landed: dict[str, str], merged_from: str) -> None:
    """A shared lake (object storage, a folder other machines land into) that lists no source's
    landing file, while the catalog holds sources merged from it, is a wrong bucket, prefix or
    endpoint, a share not mounted, or a bucket emptied, far more often than every machine's
    sources deleted on purpose: the merge stops rather than remove every row (`merge --full`
    does it). A home's own lake is its owner's: a source deleted there is removed."""
    if own_lake(lake, catalog) or any(not _is_run_log(_group(f)) for f in landed):
        return
    gone = _merged_sources(con)
    if not gone:
        return
    lake = masked(str(lake))
    raise EmptyLake(
        f"the lake {lake} lists no landing file under {LANDING}/, but the warehouse {catalog} holds "
        f"{len(gone)} sources merged from {'it' if merged_from == lake else merged_from}: nothing was removed "
        "(a wrong bucket, prefix or endpoint, a share not mounted, or a bucket being emptied or refilled?). "
        "To empty the warehouse as the lake is now, run `agentlake merge --full` with the same --lake and "
        "--warehouse")


def _merged_sources(con) -> list[str]:
    """The sources (not run logs) the catalog holds rows of; none in a catalog from before the table."""
    try:
        groups = {_group(r[0]) for r in con.execute(f"SELECT path FROM {MERGED}").fetchall()}
    except duckdb.Error:
        return []
    return [g for g in groups if not _is_run_log(g)]


def _unreadable(uri: str, path: Path, rel: str, reason: str | None = None) -> str:
    """What to say of a landing file that cannot be read: without a Parquet footer, or whose
    pages DuckDB cannot read (`reason`); never its bytes, they could be anything."""
    if reason:
        said = f"cannot be read ({reason})"
    else:
        try:
            with path.open("rb") as fh:
                magic = fh.read(4)
            size = path.stat().st_size
            shape = "cut short" if magic == b"PAR1" else "not starting with PAR1"
            what = f"{size:,} bytes, {shape}" if size else "empty"
        except OSError:
            what = "unreadable"
        said = f"is not a Parquet file ({what})"
    if _is_run_log(rel):
        return f"the landing file {uri} {said}: skipped: its runs are left out of `sources`; delete or replace it"
    machine, user = rel[len(LANDING) + 1:].split("/")[:2]
    return (f"the landing file {uri} {said}: the warehouse keeps the rows its source had, and the next "
            f"`agentlake ingest` of {machine} (user {user}) lands it again from the agent's store")


def _refresh_marts(con, *, whole: bool, memory_limit: str | None) -> None:
    """A large merge's marts under their own cap, in a transaction; one that runs out is built
    again with most of the machine's memory (the tables stay merged). A merge already retried
    with more memory (`memory_limit`) builds them with that."""
    def build(limit: str | None) -> None:
        with _transaction(con):
            refresh_marts(con, whole=whole, memory_limit=limit)

    if memory_limit:
        build(memory_limit)
    else:
        ducklake.retried_with_more_memory(build)


@contextmanager
def _transaction(con):
    con.execute("BEGIN")
    try:
        yield
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass
        raise
    con.execute("COMMIT")


def _complete(changed: dict[str, list[str]], local: dict[str, Path], footers: _Footers,
              damaged: dict[Path, str]) -> tuple[dict[str, list[str]], list[str]]:
    """The changed sources whose landing files are all there, readable and from one write; the
    others wait for the next merge (a machine caught landing them, or to land one again)."""
    ready, waiting = {}, []
    for group, files in changed.items():
        if _is_run_log(group):
            continue
        if (len(files) < len(DATA_TABLES) or any(f not in local or local[f] in damaged for f in files)
                or not _consistent([footers[local[f]] for f in files])):
            waiting.append(group)
        else:
            ready[group] = files
    return ready, waiting


@contextmanager
def _replaced(con, groups: set[str]):
    """`_replaced(k, source_id)`: these sources, for the statements below to filter on."""
    con.register("_replaced", pa.table({"k": sorted(groups), "source_id": [g.rsplit("/", 1)[1] for g in sorted(groups)]}))
    try:
        yield
    finally:
        con.unregister("_replaced")


# The source id narrows the scan first (one column, with per-file statistics), the full key decides.
_OF_REPLACED = f"source_id IN (SELECT source_id FROM _replaced) AND {_source_key_sql()} IN (SELECT k FROM _replaced)"


def _delete_sources(con, groups: set[str]) -> int:
    """Every row of these sources, from every table; returns how many."""
    if not groups:
        return 0
    with _replaced(con, groups):
        return sum(con.execute(f'DELETE FROM "{table.name}" WHERE {_OF_REPLACED}').fetchone()[0]
                   for table in DATA_TABLES)


def _projects_of(con, groups: set[str]) -> set[str | None]:
    """The projects of these sources' sessions: their marts' rows are recomputed (a session's
    rows share its project: warehouse.catalog.marts)."""
    if not groups:
        return set()
    with _replaced(con, groups):
        return {r[0] for r in con.execute(f"SELECT DISTINCT project FROM sessions WHERE {_OF_REPLACED}").fetchall()}


def _landed_projects(con, paths: list[Path], footers: _Footers) -> set[str | None]:
    """The projects these files hold: from their footers' statistics (a source's files hold one
    project), else read."""
    projects, unknown = set(), []
    for path in paths:
        said = footers[path].projects if footers[path] else None
        if said is None:
            unknown.append(path)
        else:
            projects |= said
    for batch in _batches(unknown):
        files = ", ".join(sql_string(p) for p in batch)
        with _reading(batch):
            projects |= {r[0] for r in con.execute(f"SELECT DISTINCT project FROM read_parquet([{files}])").fetchall()}
    return projects


def _record_merged(con, done: dict[str, str], removed: set[str]) -> None:
    """The landing files merged (path -> version), and forget the groups that are gone."""
    if not done and not removed:
        return
    con.register("_done", pa.table({"path": pa.array(list(done), pa.string()),
                                    "version": pa.array(list(done.values()), pa.string())}))
    con.execute(f"DELETE FROM {MERGED} WHERE path IN (SELECT path FROM _done)")
    for group in removed:
        if _is_run_log(group):
            con.execute(f"DELETE FROM {MERGED} WHERE path = ?", [group])
        else:
            con.execute(f"DELETE FROM {MERGED} WHERE path LIKE ?", [f"{LANDING}/{group}/%"])
    con.execute(f"INSERT INTO {MERGED} SELECT path, version FROM _done")
    con.unregister("_done")
