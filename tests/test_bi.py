"""BI connections as docs/BI.md describes them: Superset through duckdb-engine (SQLAlchemy),
and the read-only, absolute-path properties Metabase and Evidence rely on."""

import sqlalchemy as sa

from warehouse.serving import build_serving


def test_superset_connects_with_duckdb_engine_read_only(lake):
    # the SQLAlchemy URI and engine parameters docs/BI.md gives for Superset
    # (DuckLake's extensions are installed once by any agentlake command, from the pinned packages)
    engine = sa.create_engine(f"duckdb:///ducklake:{lake.warehouse}", connect_args={"read_only": True})
    tables = set(sa.inspect(engine).get_table_names())
    assert {"daily_costs", "tool_usage", "session_summary", "sessions", "tool_calls"} <= tables
    with engine.connect() as a, engine.connect() as b:  # concurrent chart refreshes
        total = a.execute(sa.text("SELECT SUM(cost_usd) FROM daily_costs WHERE provider = 'crush'")).scalar()
        calls = b.execute(sa.text("SELECT SUM(calls) FROM tool_usage")).scalar()
    assert float(total) == 1.3 and calls == 5


def test_metabase_and_evidence_read_the_serving_file_from_anywhere(lake, tmp_path, monkeypatch):
    target = tmp_path / "serving.duckdb"
    build_serving(lake.warehouse, target)
    monkeypatch.chdir(tmp_path.parent)  # a BI container has its own working directory
    engine = sa.create_engine(f"duckdb:///{target}", connect_args={"read_only": True})
    with engine.connect() as con:
        rows = con.execute(sa.text("SELECT model, cost_usd FROM model_usage WHERE model = 'gpt-5.1'")).fetchall()
    assert [(m, float(c)) for m, c in rows] == [("gpt-5.1", 0.111111111)]
    # the serving file needs no lake: it holds tables, not views over Parquet paths
    with engine.connect() as con:
        assert con.execute(sa.text("SELECT COUNT(*) FROM duckdb_views() WHERE NOT internal")).scalar() == 0
