"""BI access: a serving database of the marts, and readers that keep working during ingestion."""

import time

import duckdb

from tests import support_forked as forked
from tests.conftest import ingest
from transforms.synth.crush import generate_store
from warehouse.serve.serving_file import build_serving
from warehouse.catalog.marts import MARTS
from warehouse.lake.ducklake import connect


def test_serving_database_holds_the_marts_as_tables(lake, tmp_path):
    target = tmp_path / "bi" / "serving.duckdb"
    counts = build_serving(lake.warehouse, target)
    assert set(counts) == set(MARTS)
    with duckdb.connect(str(target), read_only=True) as bi, connect(lake.warehouse) as wh:
        tables = {r[0] for r in bi.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        assert tables == set(MARTS)
        assert bi.execute("SELECT COUNT(*) FROM duckdb_views() WHERE NOT internal").fetchone()[0] == 0
        for mart in MARTS:
            assert sorted(bi.execute(f"SELECT * FROM {mart}").fetchall(), key=repr) == \
                sorted(wh.execute(f"SELECT * FROM {mart}").fetchall(), key=repr), mart


INGEST = """
import sys
from transforms.provider import DiscoverOptions
from warehouse.land.ingest import discover_sources, ingest_all
from warehouse.lake.layout import Layout
from warehouse.catalog.build import build_warehouse
layout = Layout.resolve(home=sys.argv[2], machine="laptop", user="dev")  # the same machine as the test's
sources, _ = discover_sources(DiscoverOptions(env={}, extra_roots={"crush": (sys.argv[1],)}, use_default=False))
ingest_all(sources, layout, full_refresh=True)
build_warehouse(layout.lake, layout.warehouse)
"""


def test_readers_query_while_an_ingestion_runs(layout, tmp_path):
    store = generate_store(tmp_path / "crush", projects=6, sessions_per_project=12, seed=5)
    ingest(layout, roots=[store.global_dir])  # a first lake and warehouse to read from
    held = connect(layout.warehouse)  # a BI tool that stays connected
    writer = forked.code(INGEST, store.global_dir, layout.home)  # a process of its own, as a scheduled run
    queries = 0
    while writer.poll() is None or queries == 0:
        with connect(layout.warehouse) as reader:  # a new reader each time
            assert reader.execute("SELECT COUNT(*) FROM messages").fetchone()[0] > 0
        assert held.execute("SELECT SUM(cost_usd) FROM sessions WHERE is_root").fetchone()[0] > 0
        queries += 1
        time.sleep(0.02)
    assert writer.returncode == 0
    assert queries > 1
    with connect(layout.warehouse) as reader:
        assert reader.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == store.messages
    held.close()
