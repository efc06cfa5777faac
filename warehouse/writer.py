"""The lake writer: one Parquet file per (table, date, project, source), replaced atomically.

Each file is built in memory, compared with what the source last wrote (by SHA-256), and only
when it differs is it staged under <lake>/_staging and moved into place with os.replace.
Readers therefore see the old file or the new one, never half of one, and a rerun over
unchanged input touches nothing. A source's files for dates that no longer have rows are
removed after the new ones are in place.
"""

import hashlib
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from transforms.contract import Table
from warehouse.layout import relative_path

UNDATED = "1970-01-01"  # rows without a usable timestamp: visible, and deterministic


def to_arrow(table: Table, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=table.schema)


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


def stage(path: Path, data: bytes, staging: Path) -> Path:
    """Write the bytes meant for `path` into the staging dir, on disk; returns the staged file."""
    staging.mkdir(parents=True, exist_ok=True)
    tmp = staging / f"{os.getpid()}-{uuid.uuid4().hex}.tmp"  # pid: leftovers of dead runs are found
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())  # the rename must never publish a file whose bytes are not on disk
    return tmp


def publish(tmp: Path, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, path)  # atomic: readers see the old file or the new one


def atomic_write(path: Path, data: bytes, staging: Path) -> None:
    publish(stage(path, data, staging), path)


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
                project: str) -> SourceFiles:
    built = SourceFiles()
    for table in tables:
        table_rows = rows.get(table.name, [])
        built.rows[table.name] = len(table_rows)
        for (date, row_project), group in sorted(group_by_partition(table, table_rows, project).items()):
            if date == UNDATED:
                built.undated += len(group)
            rel = relative_path(table.name, date, row_project, provider, source_id)
            built.data[rel] = parquet_bytes(to_arrow(table, group))
    return built


def _in_place(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size  # a truncated file left by a crash is rewritten
    except OSError:
        return False


def write_files(lake: Path, staging: Path, built: SourceFiles, previous: dict[str, str]) -> WriteResult:
    """Put one source's files in place; `previous` is what the last run wrote (path -> sha)."""
    result = WriteResult(rows=built.rows, undated=built.undated)
    staged: list[tuple[Path, Path]] = []
    try:  # stage every changed file first: a full disk then leaves the lake as it was
        for rel, data in built.data.items():
            digest = hashlib.sha256(data).hexdigest()
            result.files[rel] = digest
            if previous.get(rel) == digest and _in_place(lake / rel, len(data)):
                result.unchanged += 1
                continue
            staged.append((stage(lake / rel, data, staging), lake / rel))
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, path in staged:  # renames need no space
        publish(tmp, path)
        result.replaced += 1
    for rel in previous.keys() - result.files.keys():
        remove_file(lake, rel)
        result.removed += 1
    return result


def remove_file(lake: Path, rel: str) -> None:
    path = lake / rel
    path.unlink(missing_ok=True)
    for parent in (path.parent, path.parent.parent):  # tidy empty project=/date= dirs
        try:
            parent.rmdir()
        except OSError:
            break


def append_rows(lake: Path, staging: Path, table: Table, rel: str, rows: list[dict]) -> None:
    """Add rows to a file (the `sources` run log), replacing it atomically."""
    new = to_arrow(table, rows)
    path = lake / rel
    if path.exists():
        try:
            old = pq.read_table(path)
            old = old.select([c for c in table.column_names if c in old.column_names])
            new = pa.concat_tables([old, new], promote_options="permissive").cast(table.schema)
        except (pa.ArrowInvalid, OSError):
            pass  # an unreadable log is replaced by this run's rows rather than failing the run
    atomic_write(path, parquet_bytes(new), staging)
