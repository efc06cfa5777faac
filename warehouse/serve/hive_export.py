"""A plain hive-Parquet copy of the tables, for engines without a DuckLake reader (Spark, Trino).

    <lake>/export/CURRENT                                          the version to read (v20261204T050012345678Z)
    <lake>/export/<version>/<table>/date=YYYY-MM-DD/project=<slug>/data_0.parquet

Each export is a version: a folder holding every table as of one catalog snapshot, one file per
(table, date, project), the partition keys only in the directory names (the layout Spark and
Trino's Hive connector discover by themselves); a table without a row has one file of none,
`<table>/empty.parquet`, its columns the hive keys too, so that it reads as empty. `CURRENT`
names the published version and is replaced last, atomically, so a reader that reads it once
and then that folder sees one snapshot whole, while the next export writes its own folder beside it.

An export writes only the partitions whose rows changed since the version before it: the
catalog's change feed (`table_changes`) names the (date, project) pairs a merge touched, and a
fingerprint of each pair's rows (count and hashes) tells which of those really differ (a merge
replaces a changed source's rows whole, most of them as they were). Every other partition is
carried over from the version before without its bytes moving: a hard link on a file system, a
server-side copy on S3. Where the change feed cannot answer (no version yet, a snapshot since
expired, a table made again, another contract) every pair is fingerprinted instead, and still
only the differing ones are written.

A version replaced by a newer one is deleted by the first export after `keep_seconds` (the
readers' grace) has passed since that newer one was published.
"""

import io
import json
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from transforms.contract import ALL_TABLES, SCHEMA_VERSION
from warehouse.lake.ducklake import CATALOG, connect, one_snapshot, sql_string
from warehouse.lake.scratch_dirs import scratch
from warehouse.lake.storage import open_store

EXPORT = "export"
POINTER = f"{EXPORT}/CURRENT"
STATE = "_partitions.parquet"  # in each version: every file with its (table, date, project) and fingerprint
EMPTY = "empty.parquet"  # a table without a row: its one file, of none (`_write_empty`)
GRACE_SECONDS = 3600  # a Spark job or Trino query reading a replaced version has this long to finish
HISTORY = 10  # versions a state remembers (deploy/trino/ddl.py drops their Trino tables)
WORKERS = 8  # puts and copies at once: each is one request to object storage

STATE_SCHEMA = pa.schema([("table", pa.string()), ("date", pa.date32()), ("project", pa.string()),
                          ("fingerprint", pa.string()), ("file", pa.string())])


@dataclass
class Export:
    """What an export published: its version, the files it wrote and those it carried over."""

    version: str
    written: dict[str, int] = field(default_factory=dict)  # files written, by table
    carried: int = 0  # files carried over from the version before
    files: int = 0  # files in the version
    removed: list[str] = field(default_factory=list)  # versions deleted after their grace


@dataclass
class _Published:
    version: str
    snapshot: tuple[int, str]  # (id, time): a catalog made again reuses ids
    schema: str
    history: list[str]
    files: dict[tuple, list[str]]  # (table, date, project) -> files, relative to the version
    fingerprints: dict[tuple, str]


def export_tables(warehouse: Path, lake, *, keep_seconds: int = GRACE_SECONDS, full: bool = False) -> Export:
    """Publish the tables' current rows as a new version under `<lake>/export/`, writing only the
    partitions that changed since the published one (`full`: every partition); then delete the
    versions whose grace has passed."""
    store = open_store(lake)
    before = _published(store)
    with scratch("export") as work, connect(warehouse, ours=True) as con, one_snapshot(con):
        snapshot = _snapshot(con)
        if before and before.snapshot == snapshot and before.schema == SCHEMA_VERSION and not full:
            result = Export(before.version, files=sum(map(len, before.files.values())))
        else:
            result = _publish(con, store, work, before, snapshot, full)
    result.removed = _sweep(store, result.version, keep_seconds)
    return result


def current_version(lake) -> str | None:
    """The version `CURRENT` names, or None before the first export."""
    return _pointer(open_store(lake))


def _pointer(store) -> str | None:
    try:
        return store.read(POINTER).decode().strip()
    except FileNotFoundError:
        return None


def published(lake) -> tuple[str, list[str]] | None:
    """The published version and the last versions before it (oldest first), or None."""
    found = _published(open_store(lake))
    return (found.version, found.history) if found else None


def _publish(con, store, work: Path, before: "_Published | None", snapshot: tuple[int, str], full: bool) -> Export:
    version = f"v{datetime.now(timezone.utc):%Y%m%dT%H%M%S%fZ}"
    compared = before if before and not full else None
    feed = compared is not None and compared.schema == SCHEMA_VERSION and _snapshot_kept(con, compared.snapshot)
    touched = _touched(con, compared.snapshot[0], snapshot[0]) if feed else set()
    result, files, fingerprints, fresh, carried = Export(version), {}, {}, [], []
    for table in ALL_TABLES:
        old = {key[1:]: fp for key, fp in compared.fingerprints.items() if key[0] == table.name} if compared else {}
        candidates = None  # every pair, unless the change feed names the pairs that may differ
        if feed and table.name in touched:
            candidates = _changed_pairs(con, table.name, compared.snapshot[0], snapshot[0])
        elif feed:
            candidates = set()
        now = _current(con, table, candidates, old)
        written = _write(con, table, [pair for pair, fp in now.items() if old.get(pair) != fp], work)
        # no partition: a file of no rows, so that the table still reads (no folder failed every reader)
        empty = [] if now else [_write_empty(con, table, work)]
        kept = {(table.name, *pair): compared.files[(table.name, *pair)] for pair, fp in now.items()
                if old.get(pair) == fp}
        files.update(kept)
        files.update({(table.name, *pair): rels for pair, rels in written.items()})
        fingerprints.update({(table.name, *pair): fp for pair, fp in now.items()})
        carried += [rel for rels in kept.values() for rel in rels]
        fresh += [rel for rels in written.values() for rel in rels] + empty
        result.written[table.name] = sum(map(len, written.values())) + len(empty)
    prefix = f"{EXPORT}/{version}/"
    _parallel(lambda rel: store.put_all({prefix + rel: (work / rel).read_bytes()}), fresh)
    _parallel(lambda rel: store.copy(f"{EXPORT}/{compared.version}/{rel}", prefix + rel), carried)
    result.carried, result.files = len(carried), len(carried) + len(fresh)
    history = ((before.history + [before.version]) if before else [])[-HISTORY:]
    store.put_all({prefix + STATE: _state_bytes(files, fingerprints, snapshot, history)})
    newer = _overtaken(store, before, snapshot)
    if newer is not None:  # another export (a second center) published a snapshot as new meanwhile
        store.delete_tree(prefix)
        return Export(newer.version, files=sum(map(len, newer.files.values())))
    store.put_all({POINTER: f"{version}\n".encode()})  # last: readers switch here, all at once
    return result


def _overtaken(store, before: "_Published | None", snapshot: tuple[int, str]) -> "_Published | None":
    """The version published since this export read `before`, if it holds this snapshot or a
    newer one of the same catalog: this export's older one must not replace it. (Read just before
    the pointer is written: two exports at once are narrowed to that instant, not excluded.)"""
    now = _published(store)
    if now is None or (before is not None and now.version == before.version):
        return None
    same_catalog = before is None or now.snapshot[0] >= before.snapshot[0]
    return now if same_catalog and now.snapshot[0] >= snapshot[0] else None


def _current(con, table, candidates: set | None, old: dict) -> dict[tuple, str]:
    """Every (date, project) pair the table has now, with its fingerprint: computed for the
    `candidates` (None: for every pair), the version before's for the pairs no commit touched."""
    now = _fingerprints(con, table, candidates)
    if candidates is not None:
        now.update({pair: fp for pair, fp in old.items() if pair not in candidates})
    return now


def _snapshot(con) -> tuple[int, str]:
    sid = con.execute(f"SELECT id FROM {CATALOG}.current_snapshot()").fetchone()[0]
    return sid, _snapshot_time(con, sid)


def _snapshot_time(con, sid: int) -> str | None:
    row = con.execute(f"SELECT snapshot_time FROM {CATALOG}.snapshots() WHERE snapshot_id = ?", [sid]).fetchone()
    return row[0].isoformat() if row else None


def _snapshot_kept(con, snapshot: tuple[int, str]) -> bool:
    """The published version's snapshot is still in this catalog: the change feed since it is whole."""
    return _snapshot_time(con, snapshot[0]) == snapshot[1]


def _touched(con, since: int, until: int) -> set[str]:
    """The tables a commit after snapshot `since` named in any of its changes (inserted into,
    deleted from, created, compacted...): the others need no look at their change feed."""
    meta = f"__ducklake_metadata_{CATALOG}"
    named = {r[0] for r in con.execute(f"SELECT DISTINCT unnest(flatten(map_values(changes))) "
                                       f"FROM {CATALOG}.snapshots() WHERE snapshot_id > ? AND snapshot_id <= ?",
                                       [since, until]).fetchall()}
    tables = con.execute(f"SELECT table_name, table_id FROM {meta}.ducklake_table "
                         "WHERE end_snapshot IS NULL").fetchall()
    return {name for name, tid in tables if str(tid) in named or f"main.{name}" in named}


def _changed_pairs(con, table: str, since: int, until: int) -> set | None:
    """The (date, project) pairs whose rows a commit after snapshot `since` inserted or deleted;
    None when the table was made again since (the feed starts over there)."""
    meta = f"__ducklake_metadata_{CATALOG}"
    made = con.execute(f"SELECT MAX(begin_snapshot) FROM {meta}.ducklake_table WHERE table_name = ? "
                       "AND end_snapshot IS NULL", [table]).fetchone()[0]
    if made is None or made > since:
        return None
    if until <= since:
        return set()
    return set(con.execute(f'SELECT DISTINCT "date", "project" FROM {CATALOG}.table_changes(?, ?, ?)',
                           [table, since + 1, until]).fetchall())


def _fingerprints(con, table, pairs: set | None) -> dict[tuple, str]:
    """Each (date, project) pair's row count and two hashes of its rows, whatever their order:
    `pairs` only (None: every pair)."""
    digest = f"hash({', '.join(_quoted(table.column_names))})"
    sql = (f'SELECT "date", "project", COUNT(*) || \':\' || SUM({digest}) || \':\' || BIT_XOR({digest}) '
           f'FROM {CATALOG}.main."{table.name}" t')
    if pairs is None:
        return {(d, p): fp for d, p, fp in con.execute(sql + " GROUP BY ALL").fetchall()}
    if not pairs:
        return {}
    with _as_relation(con, pairs):
        return {(d, p): fp for d, p, fp in con.execute(f"{sql} {_only(pairs)} GROUP BY ALL").fetchall()}


def _only(pairs) -> str:
    """The rows of `pairs` (the relation `_pairs`), with their projects and days also as plain
    filters, which DuckLake prunes files and row groups by before the join is planned."""
    projects = ", ".join(sql_string(p) for p in sorted({p for _, p in pairs}))
    days = sorted(d for d, _ in pairs)
    return (f'SEMI JOIN _pairs c ON t."date" = c."date" AND t."project" = c."project" '
            f"WHERE t.\"project\" IN ({projects}) AND t.\"date\" BETWEEN DATE '{days[0]}' AND DATE '{days[-1]}'")


def _write(con, table, pairs: list, work: Path) -> dict[tuple, list[str]]:
    """The rows of `pairs`, a file per pair under `work/<table>/`; their files by pair."""
    if not pairs:
        return {}
    target = work / table.name
    with _as_relation(con, pairs):
        con.execute(f'COPY (SELECT {_columns(table)} FROM {CATALOG}.main."{table.name}" t {_only(pairs)}) '
                    f"TO {sql_string(target)} "
                    '(FORMAT parquet, COMPRESSION zstd, PARTITION_BY ("date", "project"), '
                    "WRITE_PARTITION_COLUMNS false)")
    out = defaultdict(list)
    for path in sorted(target.rglob("*.parquet")):
        day, project = (unquote(part.name.split("=", 1)[1]) for part in (path.parent.parent, path.parent))
        out[(date.fromisoformat(day), project)].append(str(path.relative_to(work)))
    return out


def _write_empty(con, table, work: Path) -> str:
    """A table without a row, as one file of none under `work/<table>/` (its columns, the hive keys
    among them): DuckDB's `read_parquet` and Spark found no file and failed, and Trino's location
    was missing. Not a partition: the next version writes it again while the table is empty."""
    target = work / table.name / EMPTY
    target.parent.mkdir(parents=True, exist_ok=True)
    con.execute(f'COPY (SELECT {_columns(table)} FROM {CATALOG}.main."{table.name}" t LIMIT 0) '
                f"TO {sql_string(target)} (FORMAT parquet)")
    return str(target.relative_to(work))


@contextmanager
def _as_relation(con, pairs):
    """`pairs` as the relation `_pairs` (date, project) for the block's queries."""
    days, projects = zip(*pairs)
    con.register("_pairs", pa.table({"date": pa.array(days, pa.date32()), "project": pa.array(projects, pa.string())}))
    try:
        yield
    finally:
        con.unregister("_pairs")


def _columns(table) -> str:
    """The table's columns as the export writes them: the hive keys first."""
    return ", ".join(['t."date"', 't."project"'] + [f"t.{c}" for c in _quoted(table.column_names)])


def _quoted(names) -> list[str]:
    return [f'"{n}"' for n in names]


def _parallel(work, items: list) -> None:
    """`work(item)` for every item, a few at once (each a request to object storage)."""
    if not items:
        return
    with ThreadPoolExecutor(min(WORKERS, len(items))) as pool:
        list(pool.map(work, items))


# --- what a version holds: its state file, read back by the next export ------------------------

def _state_bytes(files: dict, fingerprints: dict, snapshot: tuple[int, str], history: list[str]) -> bytes:
    rows = [(t, d, p, fingerprints[(t, d, p)], rel) for (t, d, p), rels in sorted(files.items()) for rel in rels]
    table = pa.Table.from_pylist([dict(zip(STATE_SCHEMA.names, r)) for r in rows], STATE_SCHEMA)
    about = {"snapshot_id": str(snapshot[0]), "snapshot_time": snapshot[1], "schema_version": SCHEMA_VERSION,
             "published_at": datetime.now(timezone.utc).isoformat(), "history": json.dumps(history)}
    sink = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(about), sink, compression="zstd")
    return sink.getvalue()


def _state(store, version: str) -> pa.Table | None:
    try:
        # without threads: a small file, and a short process (deploy/trino/ddl.py) that read it
        # through pyarrow's thread pool aborted at exit now and then (pyarrow 26)
        return pq.read_table(pa.BufferReader(store.read(f"{EXPORT}/{version}/{STATE}")), use_threads=False)
    except FileNotFoundError:  # a version an export stopped writing before its state
        return None


def _published(store) -> _Published | None:
    """The version `CURRENT` names, with what each of its partitions holds."""
    version = _pointer(store)
    state = _state(store, version) if version else None
    if state is None:
        return None
    about = {k.decode(): v.decode() for k, v in state.schema.metadata.items()}
    files, fingerprints = defaultdict(list), {}
    for row in state.to_pylist():
        key = (row["table"], row["date"], row["project"])
        files[key].append(row["file"])
        fingerprints[key] = row["fingerprint"]
    return _Published(version, (int(about["snapshot_id"]), about["snapshot_time"]), about["schema_version"],
                      json.loads(about["history"]), dict(files), fingerprints)


def published_at(store, version: str) -> datetime | None:
    state = _state(store, version)
    return datetime.fromisoformat(state.schema.metadata[b"published_at"].decode()) if state is not None else None


# --- versions past their grace ------------------------------------------------------------------

def _sweep(store, current: str, keep_seconds: int) -> list[str]:
    """Delete each version older than `current` once the first version published after it has
    been published for `keep_seconds`; the export's flat layout of before versions counts as the
    oldest. A version left half-written (an export stopped before its state) goes the same way."""
    folders = defaultdict(set)  # version -> its folders under export/
    for rel in store.list(EXPORT):
        folder = rel.split("/")[1]
        folders[folder if _is_version(folder) else ""].add(folder)
    older = sorted(v for v in folders if v < current)
    if not older:
        return []
    published = {v: at for v in sorted(set(folders) | {current}) if v > older[0]
                 and (at := published_at(store, v)) is not None}
    limit = datetime.now(timezone.utc) - timedelta(seconds=keep_seconds)
    removed = []
    for version in older:
        after = min((v for v in published if v > version), default=None)
        if after is not None and published[after] <= limit:
            _parallel(store.delete_tree, [f"{EXPORT}/{folder}" for folder in sorted(folders[version])])
            removed.append(version)
    return removed


def _is_version(folder: str) -> bool:
    """A version's folder; the others are the tables of the flat layout before versions."""
    return folder.startswith("v") and folder[1:9].isdigit()
