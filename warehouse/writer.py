"""The lake writer: one Parquet file per (table, date, project, source), replaced atomically.

Each file is built in memory, compared with what the source last wrote (by SHA-256), and only
when it differs is it replaced atomically in the store (warehouse.store): readers see the old
file or the new one, never half of one, and a rerun over unchanged input touches nothing.
A source's files that no longer have rows are removed after the new ones are in place (the
ingest layer first carries forward the rows a shrinking source no longer holds: see
warehouse.retention).
"""

import hashlib
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from transforms.contract import Table
from warehouse.layout import relative_path

UNDATED = "1970-01-01"  # rows without a usable timestamp: visible, and deterministic


def to_arrow(table: Table, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=table.schema)


def _stamped(data: pa.Table, stamp: dict[str, str]) -> pa.Table:
    for name, value in stamp.items():
        i = data.schema.get_field_index(name)
        if i >= 0:
            data = data.set_column(i, name, pa.array([value] * data.num_rows, pa.string()))
    return data


def parquet_bytes(data: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink, compression="zstd", write_statistics=True)
    return sink.getvalue().to_pybytes()


def date_key(value) -> str:
    return value.date().isoformat() if value is not None else UNDATED


def group_by_partition(table: Table, rows: list[dict], project: str) -> dict[tuple[str, str], list[dict]]:
    """Rows by hive (date, project). A row may name its own `project` (a store that spans
    several projects, like OpenCode's one database); else it is the source's."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        key = (date_key(row.get(table.date_from)), row.get("project") or project)
        groups.setdefault(key, []).append(row)
    return groups


@dataclass
class WriteResult:
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    rows: dict[str, int] = field(default_factory=dict)
    undated: int = 0
    replaced: int = 0
    unchanged: int = 0
    removed: int = 0


@dataclass
class SourceFiles:
    """Every file of one source, built in memory before any is written: a value that cannot be
    converted fails the source before the lake is touched."""

    data: dict[str, bytes] = field(default_factory=dict)  # relative path -> Parquet bytes
    rows: dict[str, int] = field(default_factory=dict)
    undated: int = 0


def build_files(tables: list[Table], rows: dict[str, list[dict]], *, provider: str, source_id: str,
                project: str, identity: str, stamp: dict[str, str] | None = None) -> SourceFiles:
    """`stamp`: columns with one value for every row (the machine and user that ingest)."""
    built = SourceFiles()
    for table in tables:
        table_rows = rows.get(table.name, [])
        built.rows[table.name] = len(table_rows)
        for (date, row_project), group in sorted(group_by_partition(table, table_rows, project).items()):
            if date == UNDATED:
                built.undated += len(group)
            rel = relative_path(table.name, date, row_project, provider, source_id, identity)
            built.data[rel] = parquet_bytes(_stamped(to_arrow(table, group), stamp or {}))
    return built


def write_files(store, built: SourceFiles, previous: dict[str, str]) -> WriteResult:
    """Put one source's files in place; `previous` is what the last run wrote (path -> sha)."""
    result = WriteResult(rows=built.rows, undated=built.undated)
    changed = {}
    for rel, data in built.data.items():
        digest = hashlib.sha256(data).hexdigest()
        result.files[rel] = digest
        # a truncated file left by a crash has another size: it is rewritten
        if previous.get(rel) == digest and store.size(rel) == len(data):
            result.unchanged += 1
        else:
            changed[rel] = data
    store.put_all(changed)
    result.replaced = len(changed)
    for rel in previous.keys() - result.files.keys():
        store.delete(rel)
        result.removed += 1
    return result


def read_file(store, rel: str) -> pa.Table:
    return pq.read_table(pa.BufferReader(store.read(rel)))


def append_rows(store, table: Table, rel: str, rows: list[dict]) -> None:
    """Add rows to a file (the `sources` run log), replacing it atomically."""
    new = to_arrow(table, rows)
    if store.size(rel) is not None:
        try:
            old = read_file(store, rel)
            old = old.select([c for c in table.column_names if c in old.column_names])
            new = pa.concat_tables([old, new], promote_options="permissive").cast(table.schema)
        except (pa.ArrowInvalid, OSError):
            pass  # an unreadable log is replaced by this run's rows rather than failing the run
    store.put_all({rel: parquet_bytes(new)})
