"""The reader's side: the lake's DuckLake catalog, refreshed by one writer and read by many.

`build_warehouse` merges the landing files into the curated tables and rebuilds the marts
(warehouse.merge), then compacts when the merge left many small files; the catalog is then
published for readers (warehouse.ducklake). `connect` is how every reader opens it: an
in-memory DuckDB with the published catalog attached read-only and made the default, so
`SELECT ... FROM sessions` and `FROM daily_costs` work as they are, during a merge too.
"""

from pathlib import Path

from transforms.contract import ALL_TABLES
from warehouse import ducklake
from warehouse.marts import MARTS
from warehouse.merge import LAKE_TABLE, MergeResult, compact, merge
from warehouse.scratch import scratch

def build_warehouse(lake, warehouse: Path, tables=ALL_TABLES, *, full: bool = False) -> list[str]:
    """Merge what landed, rebuild the marts, compact now and then; returns the public table names."""
    refresh(lake, warehouse, full=full)
    return [t.name for t in tables] + list(MARTS)


def refresh(lake, warehouse: Path, *, full: bool = False, marts: bool = True) -> MergeResult:
    result = merge(lake, Path(warehouse), full=full, marts=marts)
    if result.crowded:
        compact(Path(warehouse))
    return result


# what an empty home is told to do first: a reader of a team's lake too (who was told to ingest)
FIRST_STEP = ("run `agentlake ingest` (or `agentlake demo`) first, or `agentlake merge --lake LAKE` "
              "to read a team's lake")


def connect(warehouse: Path, data_path: str | None = None, *, ours: bool = False):
    """A read-only connection to the lake, as every reader should open it; `data_path` is the
    layout's `tables_path`, for a home moved or copied since its last write; `ours`: only
    agentlake's own SQL runs on it (ducklake.connect)."""
    if not Path(warehouse).exists():
        raise FileNotFoundError(f"no warehouse at {warehouse}: {FIRST_STEP}")
    return ducklake.connect(Path(warehouse), data_path, ours=ours)


def checked(warehouse: Path, check):
    """`check(con)` on a reader capped at the writer's memory limit, spilling to a scratch folder;
    once more with most of the machine's memory if DuckDB ran out. For the checks of keys and
    parents over every merged source: uncapped, they took 741 and 872 MiB after a cold ingest of
    the large corpus, more than the merge (docs/BENCHMARKS.md, "Memory")."""
    return ducklake.retried_with_more_memory(lambda limit: _capped(warehouse, check, limit))


def _capped(warehouse: Path, check, memory_limit: str | None):
    with scratch("merge") as spill, connect(warehouse, ours=True) as con:
        con.execute(f"SET memory_limit = '{memory_limit or ducklake.WRITER_SETTINGS['memory_limit']}'")
        con.execute(f"SET temp_directory = {ducklake.sql_string(spill)}")
        return check(con)


def lake_of(con) -> str | None:
    """The lake whose landing files the catalog merges (None for a catalog without one)."""
    try:
        return con.execute(f"SELECT lake FROM {LAKE_TABLE}").fetchall()[0][0]
    except Exception:
        return None
