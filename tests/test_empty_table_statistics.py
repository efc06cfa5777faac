"""Every table of the warehouse has DuckLake statistics, an empty one too. DuckLake 1.5.5 keeps
none for a table that never held a row and looks them up in the catalog again for each column
at every bind, so an empty `usage` (an agent that records no per-request usage) slowed every
query and mart that reads it (docs/BENCHMARKS.md, "Figures behind the code's choices")."""

from tests.conftest import copy_home, ingest, query
from warehouse.lake.layout import Layout
from warehouse.lake import ducklake

META = f"__ducklake_metadata_{ducklake.CATALOG}"
WITHOUT_STATS = (f"SELECT t.table_name FROM {META}.ducklake_table t WHERE t.end_snapshot IS NULL AND NOT EXISTS "
                 f"(SELECT 1 FROM {META}.ducklake_table_stats s WHERE s.table_id = t.table_id) ORDER BY 1")


def _without_stats(layout) -> list[str]:
    return [r[0] for r in query(layout, WITHOUT_STATS)]


def test_a_new_warehouses_empty_tables_and_marts_have_statistics_and_no_file(lake):
    layout = lake
    empty = [t for (t,) in query(layout, "SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake' "
                                         "AND estimated_size = 0")]
    assert "usage" in empty and query(layout, "SELECT COUNT(*) FROM usage") == [(0,)]
    assert _without_stats(layout) == []
    # the row that gave them statistics was never written to a file, and is not read back
    assert not list(layout.lake.glob("main/usage/**/*.parquet"))
    assert query(layout, "SELECT COUNT(*) FROM file_versions WHERE machine IS NULL") == [(0,)]


def test_a_catalog_made_before_gets_statistics_for_its_empty_tables_on_the_next_merge(lake, project):
    layout = lake
    with ducklake.writing(layout.warehouse) as con:  # as an earlier release made a table: no statistics
        con.execute('CREATE TABLE lake.main."older_empty" (a VARCHAR, b DOUBLE)')
    assert _without_stats(layout) == ["older_empty"]
    rows = query(layout, "SELECT COUNT(*), SUM(cost_usd) FROM sessions")
    p = project("another")
    p.close()
    ingest(layout, p.db)  # a merge
    assert _without_stats(layout) == []
    assert query(layout, 'SELECT COUNT(*) FROM "older_empty"') == [(0,)]
    assert query(layout, "SELECT COUNT(*), SUM(cost_usd) FROM sessions") == rows


def test_a_home_copied_elsewhere_with_an_empty_table_of_an_earlier_release_merges(lake, project, tmp_path):
    """A copied home's next merge finds its lake under another name and partitions the tables
    again (ensure_tables); an empty curated table without statistics, as an earlier release left
    it, is given them after that, or DuckLake refuses the ALTER on it (a merge that failed ever after)."""
    with ducklake.writing(lake.warehouse) as con:  # `usage` as before statistics were given: none
        con.execute('CREATE OR REPLACE TABLE lake.main."usage" AS SELECT * FROM lake.main."usage" WHERE false')
    assert _without_stats(lake) == ["usage"]
    moved = Layout.resolve(home=tmp_path / "moved" / "home", machine="laptop", user="dev")
    copy_home(lake.home, moved.home)
    rows = query(moved, "SELECT COUNT(*), SUM(cost_usd) FROM sessions")
    p = project("another")
    p.close()
    ingest(moved, p.db)
    assert _without_stats(moved) == []
    assert query(moved, "SELECT COUNT(*), SUM(cost_usd) FROM sessions") == rows
