"""A plain hive-Parquet copy of the tables, for engines without a DuckLake reader (Spark, Trino).

    <lake>/export/<table>/date=YYYY-MM-DD/project=<slug>/data_0.parquet

One file per (table, date, project), written by DuckDB from the catalog's current snapshot, the
partition keys only in the directory names: the layout Spark and Trino's Hive connector
discover by themselves. The central deployment refreshes it after each merge. Files are
replaced one by one, so a reader during an export may see some partitions newer than others;
DuckDB, polars and BI read the DuckLake tables themselves and never see that.
"""

from pathlib import Path

from transforms.contract import ALL_TABLES
from warehouse.lake.scratch_dirs import scratch
from warehouse.lake.storage import open_store
from warehouse.lake.ducklake import connect

EXPORT = "export"


def export_tables(warehouse: Path, lake) -> dict[str, int]:
    """Write every table's current rows under `<lake>/export/`; returns files per table."""
    store = open_store(lake)
    counts = {}
    with scratch("export") as work:
        with connect(warehouse, ours=True) as con:
            for table in ALL_TABLES:
                target = work / table.name
                cols = ", ".join(['"date"', '"project"'] + [f'"{c}"' for c in table.column_names])
                con.execute(f'COPY (SELECT {cols} FROM "{table.name}") TO \'{target}\' '
                            "(FORMAT parquet, COMPRESSION zstd, PARTITION_BY (\"date\", \"project\"), "
                            "WRITE_PARTITION_COLUMNS false)")
        written = {str(p.relative_to(work)): p.read_bytes() for p in work.rglob("*.parquet")}
        prefix = f"{EXPORT}/"
        store.put_all({prefix + rel: data for rel, data in written.items()})
        for rel in set(store.list(EXPORT)) - {prefix + r for r in written}:
            store.delete(rel)  # partitions that no longer have rows
        for table in ALL_TABLES:
            counts[table.name] = sum(1 for rel in written if rel.startswith(f"{table.name}/"))
    return counts
