"""serving.duckdb: a copy of the marts in a plain DuckDB file, for BI tools that cannot load
DuckDB's extensions (the marts are DuckLake tables in the lake), sit on another host, or hold a
lock while they are open.

It is small (aggregates only), holds no paths to the lake, and is rebuilt into a temporary file
and swapped in. Its storage format is pinned to an old version by default
so that BI drivers bundling an older DuckDB can open it.
"""

import os
from pathlib import Path

import duckdb

from warehouse.views import MARTS, connect

DEFAULT_STORAGE_VERSION = "v1.0.0"  # readable by DuckDB 1.0 and newer


def build_serving(warehouse: Path, target: Path, storage_version: str = DEFAULT_STORAGE_VERSION,
                  data_path: str | None = None) -> dict[str, int]:
    """Copy the marts' tables from the lake's catalog into `target`; returns rows per table.
    `data_path`: the layout's, for a home moved or copied since its last write (views.connect)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    counts = {}
    try:
        with connect(warehouse, data_path) as con:
            quoted = str(tmp).replace("'", "''")
            con.execute(f"ATTACH '{quoted}' AS serving (STORAGE_VERSION '{storage_version}')")
            for mart in MARTS:
                con.execute(f'CREATE TABLE serving."{mart}" AS SELECT * FROM lake.main."{mart}"')
                counts[mart] = con.execute(f'SELECT COUNT(*) FROM serving."{mart}"').fetchone()[0]
            con.execute("DETACH serving")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
        Path(str(tmp) + ".wal").unlink(missing_ok=True)
    return counts
