"""Data checks over the landing files one source just wrote: unique keys and no orphans.

Run with an in-memory DuckDB over those files only, so they never touch the catalog
and cost nothing for sources that did not change.
"""

import duckdb

from warehouse.lakefs import NO_DOWNLOADS, attach_lake
from warehouse.store import open_store

# table -> key columns that must be unique within a source
KEYS = {
    "sessions": ("session_id",),
    "messages": ("message_id",),
    "parts": ("message_id", "part_index"),
    "file_versions": ("file_id",),
    "read_files": ("session_id", "path_raw"),
}
# (child table, column) -> (parent table, column): every child must find its parent
REFERENCES = {
    ("messages", "session_id"): ("sessions", "session_id"),
    ("parts", "message_id"): ("messages", "message_id"),
    ("tool_calls", "session_id"): ("sessions", "session_id"),
    ("file_versions", "session_id"): ("sessions", "session_id"),
    ("read_files", "session_id"): ("sessions", "session_id"),
}


def _files_by_table(lake, files: list[str]) -> dict[str, list[str]]:
    """A source's landing files by table (`.../<table>.parquet`)."""
    store = open_store(lake)
    out: dict[str, list[str]] = {}
    for rel in files:
        out.setdefault(rel.rsplit("/", 1)[-1].removesuffix(".parquet"), []).append(store.uri(rel))
    return out


def _connect(lake):
    con = duckdb.connect(config=NO_DOWNLOADS)
    attach_lake(con, lake)
    return con


def _scan(paths: list[str]) -> str:
    quoted = ", ".join("'" + p.replace("'", "''") + "'" for p in paths)
    return f"read_parquet([{quoted}])"


def duplicate_keys(lake, files: list[str]) -> dict[str, int]:
    """Rows whose key repeats, per table (0 everywhere when all is well)."""
    tables = _files_by_table(lake, files)
    out = {}
    with _connect(lake) as con:
        for table, cols in KEYS.items():
            if not tables.get(table):
                out[table] = 0
                continue
            keys = ", ".join(cols)
            sql = f"SELECT COUNT(*) - COUNT(DISTINCT ({keys})) FROM {_scan(tables[table])}"
            out[table] = con.execute(sql).fetchone()[0]
    return out


def orphans(lake, files: list[str]) -> dict[str, int]:
    """Rows whose parent row is missing, per reference (0 everywhere when all is well)."""
    tables = _files_by_table(lake, files)
    out = {}
    with _connect(lake) as con:
        for (child, col), (parent, pcol) in REFERENCES.items():
            name = f"{child}.{col} -> {parent}.{pcol}"
            if not tables.get(child):
                out[name] = 0
                continue
            parents = tables.get(parent)
            sql = f"SELECT COUNT(*) FROM {_scan(tables[child])} WHERE {col} IS NOT NULL"
            if parents:
                sql += f" AND {col} NOT IN (SELECT {pcol} FROM {_scan(parents)})"
            out[name] = con.execute(sql).fetchone()[0]
    return out
