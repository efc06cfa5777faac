"""warehouse.duckdb: views only, over the Parquet lake, built atomically.

The file holds no data, so ingestion never needs its lock: it is rebuilt into a temporary
file and swapped in with os.replace. Readers open it read_only; a reader that has it open
keeps the old file until it reconnects. Lake paths inside the views are absolute, so any
client, from any working directory, sees the same data.
"""

import os
from pathlib import Path

import duckdb
import pyarrow as pa

from transforms.contract import ALL_TABLES, Table
from warehouse.lakefs import NO_DOWNLOADS, attach_lake
from warehouse.layout import table_glob
from warehouse.store import open_store

HIVE_KEYS = ("date", "project")

_DUCK_TYPES = {
    pa.string(): "VARCHAR",
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN",
    pa.timestamp("us"): "TIMESTAMP",
}


def duck_type(type_: pa.DataType) -> str:
    return _DUCK_TYPES[type_]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def view_sql(table: Table, lake: Path, union_by_name: bool = False) -> str:
    """The view of one table: hive keys first, then the contract's columns, in order.

    Every file of a table has the contract's schema (a contract change rewrites old files on
    the next run), so DuckDB can take the schema from one file instead of opening them all;
    `union_by_name` is only the fallback while old and new files are mixed.
    """
    cols = ", ".join(f'"{c.name}"' for c in table.columns)
    pattern = table_glob(lake, table.name)
    if open_store(lake).list(table.name):
        union = ", union_by_name = true" if union_by_name else ""
        source = (
            f"read_parquet({_quote(pattern)}, hive_partitioning = true{union}, "
            "hive_types = {'date': 'DATE', 'project': 'VARCHAR'})"
        )
        return f'CREATE OR REPLACE VIEW "{table.name}" AS SELECT "date", "project", {cols} FROM {source}'
    # no file yet: an empty view with the same columns, so queries work on an empty lake
    typed = ", ".join(f'CAST(NULL AS {duck_type(c.type)}) AS "{c.name}"' for c in table.columns)
    return (
        f'CREATE OR REPLACE VIEW "{table.name}" AS SELECT CAST(NULL AS DATE) AS "date", '
        f'CAST(NULL AS VARCHAR) AS "project", {typed} WHERE false'
    )


MARTS_DIR = Path(__file__).parent / "sql" / "marts"


def mart_sql() -> list[tuple[str, str]]:
    """(view name, SQL) of every mart, in dependency order (the files are numbered).
    Names starting with `_` are internal building blocks."""
    out = []
    for path in sorted(MARTS_DIR.glob("*.sql")):
        sql = path.read_text()
        name = sql.split("CREATE OR REPLACE VIEW", 1)[1].split()[0]
        out.append((name, sql))
    return out


MARTS = tuple(name for name, _ in mart_sql() if not name.startswith("_"))


LAKE_TABLE = "_agentlake_lake"  # one row: where the views read, so a reader can reach it


def create_views(con, lake, tables=ALL_TABLES) -> list[str]:
    attach_lake(con, lake)
    for table in tables:
        try:
            con.execute(view_sql(table, lake))
        except duckdb.BinderException:  # files of two schema versions side by side, until the next run
            con.execute(view_sql(table, lake, union_by_name=True))
    for _, sql in mart_sql():
        con.execute(sql)
    return [t.name for t in tables] + list(MARTS)


def build_warehouse(lake: Path, warehouse: Path, tables=ALL_TABLES) -> list[str]:
    """(Re)build the views file atomically; returns the public view names."""
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    tmp = warehouse.with_name(f".{warehouse.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        with duckdb.connect(str(tmp), config=NO_DOWNLOADS) as con:
            names = create_views(con, lake, tables)
            con.execute(f"CREATE TABLE {LAKE_TABLE} AS SELECT {_quote(_without_userinfo(str(lake)))} AS lake")
        os.replace(tmp, warehouse)
    finally:
        tmp.unlink(missing_ok=True)
        Path(str(tmp) + ".wal").unlink(missing_ok=True)
    return names


def connect(warehouse: Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection, as every reader should open the warehouse; it can read the lake
    wherever it is (object storage included)."""
    if not Path(warehouse).exists():
        raise FileNotFoundError(f"no warehouse at {warehouse}: run `agentlake ingest` (or `agentlake demo`) first")
    con = duckdb.connect(str(warehouse), read_only=True, config=NO_DOWNLOADS)
    attach_lake(con, lake_of(con))
    return con


def _without_userinfo(lake: str) -> str:
    """Never keep credentials written into a URI (`s3://KEY:SECRET@bucket/...`) in the file."""
    scheme, sep, rest = lake.partition("://")
    return f"{scheme}{sep}{rest.split('@', 1)[1]}" if sep and "@" in rest.split("/", 1)[0] else lake


def lake_of(con) -> str | None:
    """The lake a warehouse file's views read (None for a file built before it was recorded)."""
    try:
        return con.execute(f"SELECT lake FROM {LAKE_TABLE}").fetchall()[0][0]
    except duckdb.CatalogException:
        return None
