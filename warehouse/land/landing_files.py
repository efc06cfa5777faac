"""Landing files: one Parquet file per table and source, written by the machine that read it.

A source's rows land as `_landing/<machine>/<user>/<provider>/<source_id>/<table>.parquet`,
every table's file written even when empty, each replaced atomically in the store
(warehouse.lake.storage). Each file carries the `date` and `project` it will be partitioned by, and a
`landing_id` in its Parquet metadata shared by all the files of one write, so the merge
(warehouse.catalog.merge) can tell a source caught half-way through being replaced and wait for it.
Files whose bytes did not change are not rewritten.
"""

import hashlib
from datetime import date, datetime, time
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from transforms.contract import DATA_TABLES, LINEAGE, QUARANTINE, Table
from warehouse.lake.layout import landing_path

UNDATED = date(1970, 1, 1)  # rows without a usable timestamp: visible, and deterministic
LANDING_ID = b"agentlake.landing_id"
# The bounds (transforms.contract's Column.bounds) a file's values were checked against when it
# landed: the merge looks into a file without them (an older release's, another machine's) for
# values out of range, which its footer's statistics cannot all show (NaN is not in them).
CHECKED = b"agentlake.bounds"
HIVE = (pa.field("date", pa.date32()), pa.field("project", pa.string()))


def landing_schema(table: Table) -> pa.Schema:
    return pa.schema([*HIVE, *table.schema])


Rows = list[dict] | pa.Table  # a provider's rows: dicts, or a table whose columns are the contract's


def to_arrow(table: Table, rows: Rows) -> pa.Table:
    """The rows with exactly the contract's columns: a table's other columns (`project`) are
    left out, its missing ones are null."""
    if not isinstance(rows, pa.Table):
        return pa.Table.from_pylist(rows, schema=table.schema)
    names = set(rows.column_names)
    arrays = [rows.column(f.name).cast(f.type) if f.name in names else pa.nulls(rows.num_rows, f.type)
              for f in table.schema]
    return pa.Table.from_arrays(arrays, schema=table.schema)


def num_rows(rows: Rows) -> int:
    return rows.num_rows if isinstance(rows, pa.Table) else len(rows)


def _stamped(data: pa.Table, stamp: dict[str, str]) -> pa.Table:
    for name, value in stamp.items():
        i = data.schema.get_field_index(name)
        if i >= 0:
            data = data.set_column(i, name, pa.array([value] * data.num_rows, pa.string()))
    return data


def parquet_bytes(data: pa.Table) -> bytes:
    """zstd alone, no dictionary pages: zstd finds the repeats a dictionary would, and a
    dictionary per column costs a small file much of its write time, and saves no space
    (docs/BENCHMARKS.md, "Figures behind the code's choices")."""
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink, compression="zstd", write_statistics=True, use_dictionary=False)
    return sink.getvalue().to_pybytes()


def with_partition(table: Table, rows: Rows, project: str) -> tuple[pa.Table, int]:
    """The rows with their (date, project): a row may name its own `project` (a store that spans
    several projects, like OpenCode's one database); else it is the source's. Returns the
    number of undated rows too, whose `date` is null here (see `build_files`)."""
    if isinstance(rows, pa.Table):
        return _table_with_partition(table, rows, project)
    dates, projects, undated = [], [], 0
    for row in rows:
        when = row.get(table.date_from)
        undated += when is None
        dates.append(when.date() if when is not None else None)
        projects.append(row.get("project") or project)
    data = to_arrow(table, rows)
    data = data.add_column(0, HIVE[1], pa.array(projects, pa.string()))
    return data.add_column(0, HIVE[0], pa.array(dates, pa.date32())), undated


def _table_with_partition(table: Table, rows: pa.Table, project: str) -> tuple[pa.Table, int]:
    data = to_arrow(table, rows)
    when = data.column(table.date_from)
    dates = pc.cast(when, pa.date32())
    if "project" in rows.column_names:  # `row.get("project") or project`
        own = rows.column("project").cast(pa.string())
        projects = pc.if_else(pc.fill_null(pc.not_equal(own, ""), False), own, pa.scalar(project, pa.string()))
    else:
        projects = pa.repeat(pa.scalar(project, pa.string()), rows.num_rows)
    data = data.add_column(0, HIVE[1], projects)
    return data.add_column(0, HIVE[0], dates), when.null_count


@dataclass
class WriteResult:
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    rows: dict[str, int] = field(default_factory=dict)
    undated: int = 0
    epoch_dated: int = 0
    replaced: int = 0
    unchanged: int = 0
    removed: int = 0


@dataclass
class SourceFiles:
    """Every landing file of one source, built in memory before any is written: a value that
    cannot be converted fails the source before the lake is touched."""

    data: dict[str, bytes] = field(default_factory=dict)  # relative path -> Parquet bytes
    rows: dict[str, int] = field(default_factory=dict)
    undated: int = 0  # rows without a usable timestamp of their own: dated by their session
    epoch_dated: int = 0  # of those, the rows of no dated session: dated UNDATED
    out_of_range: list[str] = field(default_factory=list)  # each value nulled, said with its row


class RowsOutsideContract(ValueError):
    """An extractor gave a table or a column the contract has not: a defect of the extractor,
    whose rows would otherwise be dropped without a word (a misspelt `tool_call`)."""


# what a row may hold beside its table's columns: the project of a store that spans several
# (with_partition), which becomes the partition's
PARTITION_KEYS = frozenset({"project"})


def check_rows(tables: list[Table], rows: dict[str, Rows], provider: str) -> None:
    """RowsOutsideContract for a table or a column of `rows` that `tables` have not."""
    known = {t.name: t for t in tables}
    unknown = sorted(set(rows) - set(known))
    if unknown:
        raise RowsOutsideContract(f"{provider}'s extractor gave rows for {', '.join(map(repr, unknown))}, not a table "
                                  f"of the contract ({', '.join(known)}): nothing of the source was written")
    for name, table_rows in rows.items():
        given = set(table_rows.column_names) if isinstance(table_rows, pa.Table) else set().union(*table_rows)
        extra = sorted(given - set(known[name].column_names) - PARTITION_KEYS)
        if extra:
            raise RowsOutsideContract(f"{provider}'s extractor gave {name} rows the column"
                                      f"{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))}, not in the "
                                      f"contract (transforms/contract.py): nothing of the source was written")


def build_files(tables: list[Table], rows: dict[str, Rows], *, provider: str, source_id: str,
                project: str, machine: str, user: str, landing_id: str) -> SourceFiles:
    """`machine` and `user` are stamped on every row: who ingested it. A table or column the
    contract has not is left out: the ingest refused an extractor's first (check_rows), and what
    it carries from the lake's older files may hold a column the contract has since dropped."""
    built = SourceFiles()
    dated = {}
    for table in tables:
        table_rows = rows.get(table.name, [])
        built.rows[table.name] = num_rows(table_rows)
        dated[table.name], undated = with_partition(table, table_rows, project)
        built.undated += undated
    # only a source with undated rows pays for its sessions' days
    session_days = _session_days(dated) if built.undated else None
    final, quarantined = {}, []
    for table in tables:
        data = _dated_by_session(dated[table.name], session_days)
        built.epoch_dated += data.column("date").null_count
        data = data.set_column(0, HIVE[0], pc.fill_null(data.column("date"), pa.scalar(UNDATED, pa.date32())))
        final[table.name] = _in_bounds(table, data, quarantined, built.out_of_range)
    if quarantined and QUARANTINE.name in final:  # the values nulled, kept whole with their reason
        kept = pa.Table.from_pylist(quarantined, schema=landing_schema(QUARANTINE))
        final[QUARANTINE.name] = pa.concat_tables([final[QUARANTINE.name], kept])
        built.rows[QUARANTINE.name] += kept.num_rows
    for table in tables:
        data = _stamped(final[table.name], {"machine": machine, "user": user})
        data = data.replace_schema_metadata({LANDING_ID: landing_id.encode(), CHECKED: BOUNDS_CHECKED})
        built.data[landing_path(machine, user, provider, source_id, table.name)] = parquet_bytes(data)
    return built


def _bounds_digest() -> bytes:
    text = repr([(t.name, [(c.name, c.bounds) for c in t.bounded]) for t in DATA_TABLES])
    return hashlib.sha256(text.encode()).hexdigest()[:12].encode()


BOUNDS_CHECKED = _bounds_digest()
# which column names a row in a warning and in its quarantine row: the first one it has
ROW_KEYS = ("request_id", "message_id", "tool_call_id", "file_id", "session_id", "key")


def out_of_range_mask(column: pa.ChunkedArray, bounds) -> pa.ChunkedArray:
    """True where a value is outside `bounds`, NaN or infinite; False where it is null."""
    low, high = bounds
    bad = pc.or_(pc.less(column, pa.scalar(low, column.type)), pc.greater(column, pa.scalar(high, column.type)))
    if pa.types.is_floating(column.type):
        bad = pc.or_(bad, pc.is_nan(column))
    return pc.fill_null(bad, False)


def _in_bounds(table: Table, data: pa.Table, quarantined: list, said: list) -> pa.Table:
    """`data` with each value outside its column's bounds nulled: a source's bad record (a cost of
    1e308, negative tokens) is the source's problem, not every merge's. Each one nulled becomes a
    quarantine row (its row's key, where in the source, the value) and a line in `said`."""
    for column in table.bounded:
        values = data.column(column.name)
        bad = out_of_range_mask(values, column.bounds)
        if not pc.any(bad).as_py():
            continue
        rows = data.filter(bad).to_pylist()
        for row in rows:
            value = row[column.name]
            key = next((row[k] for k in ROW_KEYS if row.get(k) is not None), None)
            where = (f"{row['source_table']} row {row['source_rowid']}" if row.get("source_rowid") is not None
                     else row.get("source_table"))
            reason = f"{table.name}.{column.name} = {value!r} is outside {column.bounds[0]:,} to {column.bounds[1]:,}"
            said.append(f"{reason} (key {key}{', ' + where if where else ''})")
            when = row.get(table.date_from)
            quarantined.append({
                "date": row["date"], "project": row["project"], **{c.name: row.get(c.name) for c in LINEAGE},
                "key": key, "error": f"{reason}: nulled", "raw": repr(value),
                "created_at": when if when is not None else datetime.combine(row["date"], time())})
        data = data.set_column(data.schema.get_field_index(column.name), column.name,
                               pc.if_else(bad, pa.scalar(None, values.type), values))
        if column.name == "cost_usd" and "cost_source" in data.column_names:  # a null cost is an unknown one
            data = data.set_column(data.schema.get_field_index("cost_source"), "cost_source",
                                   pc.if_else(bad, pa.scalar("unknown"), data.column("cost_source")))
    return data


def _session_days(dated: dict[str, pa.Table]) -> pa.Table:
    """Each session's day: its own start's, else its first dated message's."""
    parts = [dated[name].select(["session_id", "date"]).drop_null() for name in ("sessions", "messages") if name in dated]
    if not parts:
        return pa.table({"session_id": pa.array([], pa.string()), "date": pa.array([], pa.date32())})
    own = parts[0]
    rest = [t.filter(pc.invert(pc.is_in(t.column("session_id"), value_set=own.column("session_id")))) for t in parts[1:]]
    return pa.concat_tables([own, *rest]).group_by("session_id").aggregate([("date", "min")]).rename_columns(
        ["session_id", "date"])


def _dated_by_session(data: pa.Table, session_days: pa.Table | None) -> pa.Table:
    """A row without a usable timestamp of its own takes its session's day (a Claude Code line
    without `timestamp`, a Crush message at 0): its cost counts on the session's day, not on
    1970-01-01 outside every window. Rows of no dated session keep a null, for UNDATED."""
    dates = data.column("date")
    if session_days is None or not dates.null_count or "session_id" not in data.column_names \
            or not session_days.num_rows:
        return data
    at = pc.index_in(data.column("session_id"), value_set=session_days.column("session_id"))
    return data.set_column(0, HIVE[0], pc.fill_null(dates, pc.take(session_days.column("date"), at)))


def write_files(store, built: SourceFiles, previous: dict[str, str], verify: bool = False) -> WriteResult:
    """Put one source's files in place; `previous` is what the last run wrote (path -> sha).
    `verify`: a file the same as last time is read back, and written again unless its bytes are
    those (a full refresh: one damaged in place keeps its size)."""
    result = WriteResult(rows=built.rows, undated=built.undated, epoch_dated=built.epoch_dated)
    changed = {}
    for rel, data in built.data.items():
        digest = hashlib.sha256(data).hexdigest()
        result.files[rel] = digest
        # a truncated file left by a crash has another size: it is rewritten
        same = previous.get(rel) == digest and store.size(rel) == len(data)
        if same and (not verify or _stored(store, rel) == digest):
            result.unchanged += 1
        else:
            changed[rel] = data
    store.put_all(changed)
    result.replaced = len(changed)
    for rel in previous.keys() - result.files.keys():
        store.delete(rel)
        result.removed += 1
    return result


def _stored(store, rel: str) -> str | None:
    """The SHA-256 of a file's bytes as they are in the lake; None when they cannot be read."""
    try:
        return hashlib.sha256(store.read(rel)).hexdigest()
    except OSError:
        return None


def read_file(store, rel: str) -> pa.Table:
    return pq.read_table(pa.BufferReader(store.read(rel)))


def landing_id_of(data: pa.Table) -> str | None:
    value = (data.schema.metadata or {}).get(LANDING_ID)
    return value.decode() if value else None


def write_run_log(store, table: Table, rel: str, rows: list[dict]) -> None:
    """One run's rows of the `sources` run log, as a file of their own: the log is appended to,
    never rewritten."""
    data, _ = with_partition(table, rows, "")
    data = data.set_column(0, HIVE[0], pc.fill_null(data.column("date"), pa.scalar(UNDATED, pa.date32())))
    store.put_all({rel: parquet_bytes(data)})


def landed_files(layout) -> set[str]:
    """This machine's landing files, in one listing of the lake."""
    return set(layout.store().versions(f"_landing/{layout.machine}/{layout.user}"))
