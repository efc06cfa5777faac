"""BI connections as docs/BI.md describes them: Superset through duckdb-engine (SQLAlchemy),
and the read-only, absolute-path properties Metabase and Evidence rely on."""

import pytest
import sqlalchemy as sa

from warehouse.serve.serving_file import build_serving
from tests.conftest import scalar
from warehouse.lake.ducklake import connect


@pytest.fixture
def installed(lake):
    """DuckLake's extension installed as any agentlake command installs it (a reader's connection,
    from the pinned package): a plain DuckDB then opens the catalog. Without it these tests passed
    only after another test had run a command."""
    connect(lake.warehouse).close()
    return lake


def test_superset_connects_with_duckdb_engine_read_only(installed):
    # the SQLAlchemy URI and engine parameters docs/BI.md gives for Superset
    lake = installed
    engine = sa.create_engine(f"duckdb:///ducklake:{lake.warehouse}", connect_args={"read_only": True})
    tables = set(sa.inspect(engine).get_table_names())
    assert {"daily_costs", "tool_usage", "session_summary", "sessions", "tool_calls"} <= tables
    # a dataset's columns, as Superset reads them when one is added (SQLAlchemy 2.1 asked DuckDB for
    # pg_catalog.pg_collation: a new user's trial)
    columns = [c["name"] for c in sa.inspect(engine).get_columns("daily_costs")]
    assert columns[:3] == ["date", "provider", "project"] and "cost_usd" in columns
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


def test_a_reader_sees_the_next_merge_through_attach_or_without_a_pool(installed, project):
    """docs/BI.md: `duckdb.connect("ducklake:...")` hands back the database the process has open
    under that name, so while one such connection is held a new one reads the old snapshot; a
    new in-memory database with the catalog attached, or an engine with no pool, reads the last
    merge."""
    import duckdb

    from tests.conftest import T0, ingest
    from transforms.synth.crush import add_message, add_session
    from transforms.synth.crush_parts import text_part

    lake = installed

    def sessions(con) -> int:
        return con.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]

    held = duckdb.connect(f"ducklake:{lake.warehouse}", read_only=True)
    before = sessions(held)
    more = project("more")
    add_session(more.conn, "N", title="new", created_at=T0, cost=0.5)
    add_message(more.conn, "n1", "N", "user", [text_part("hi")], created_at=T0)
    more.close()
    ingest(lake, more.db)  # merged: a new catalog published
    with duckdb.connect(f"ducklake:{lake.warehouse}", read_only=True) as again:
        assert sessions(again) == before  # the pitfall the page warns of
    attached = duckdb.connect()
    attached.execute(f"ATTACH 'ducklake:{lake.warehouse}' AS lake (READ_ONLY)")
    attached.execute("USE lake")
    assert sessions(attached) == before + 1
    attached.close()
    held.close()
    engine = sa.create_engine(f"duckdb:///ducklake:{lake.warehouse}", connect_args={"read_only": True},
                              poolclass=sa.pool.NullPool)
    with engine.connect() as con:
        assert con.execute(sa.text("SELECT COUNT(*) FROM sessions")).scalar() == before + 1


def test_any_agentlake_command_installs_ducklake_for_a_plain_duckdb(lake, tmp_path, monkeypatch):
    """docs/BI.md: after any agentlake command, a plain DuckDB of the same version opens the catalog.
    agentlake's own connections load the pinned binary by its path, which installed nothing: a
    plain ATTACH then tried to download the extension (a new user's trial)."""
    import duckdb

    from tests.conftest import run_cli
    from warehouse.lake import ducklake

    monkeypatch.setenv("HOME", str(tmp_path))  # a DuckDB folder of its own, empty
    monkeypatch.setattr(ducklake, "_INSTALLED", set(), raising=False)
    assert run_cli("sql", "--home", lake.home, "SELECT COUNT(*) FROM sessions").returncode == 0
    assert list((tmp_path / ".duckdb" / "extensions").rglob("ducklake.duckdb_extension"))
    with duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}) as con:
        con.execute(f"ATTACH 'ducklake:{lake.warehouse}' AS lake (READ_ONLY)")
        assert con.execute("SELECT COUNT(*) FROM lake.sessions").fetchone()[0] == scalar(lake, "SELECT COUNT(*) FROM sessions")
