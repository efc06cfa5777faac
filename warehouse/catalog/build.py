"""Build the warehouse: merge what landed into the curated tables and the marts, then compact
when the merge left many small files (warehouse.catalog.merge). The catalog is then published
for readers (warehouse.lake.ducklake)."""

from pathlib import Path

from transforms.contract import ALL_TABLES
from warehouse.catalog.marts import MARTS
from warehouse.catalog.merge import LAKE_TABLE, MergeResult, compact, merge


def build_warehouse(lake, warehouse: Path, tables=ALL_TABLES, *, full: bool = False) -> list[str]:
    """Merge what landed, rebuild the marts, compact now and then; returns the public table names."""
    refresh(lake, warehouse, full=full)
    return [t.name for t in tables] + list(MARTS)


def refresh(lake, warehouse: Path, *, full: bool = False, marts: bool = True) -> MergeResult:
    result = merge(lake, Path(warehouse), full=full, marts=marts)
    if result.crowded:
        compact(Path(warehouse))
    return result


def lake_of(con) -> str | None:
    """The lake whose landing files the catalog merges (None for a catalog without one)."""
    try:
        return con.execute(f"SELECT lake FROM {LAKE_TABLE}").fetchall()[0][0]
    except Exception:
        return None
