"""Every marimo notebook runs headless against the fixture warehouse and computes what it shows."""

import pytest



@pytest.fixture
def warehouse_env(lake, monkeypatch):
    monkeypatch.setenv("AGENTLAKE_WAREHOUSE", str(lake.warehouse))
    return lake


def test_cost_overview(warehouse_env):
    from notebooks import cost_overview

    _, defs = cost_overview.app.run()
    daily = defs["daily"]
    assert round(daily.filter(daily["provider"] == "crush")["cost_usd"].sum(), 9) == 1.3
    assert defs["cost_over_time"].to_dict()["mark"]["type"] == "bar"
    assert set(defs["by_project_model"]["project"].to_list()) == {"shop"}


def test_tool_usage(warehouse_env):
    from notebooks import tool_usage

    _, defs = tool_usage.app.run()
    tools = {r["tool_name"]: r for r in defs["tools"].iter_rows(named=True)}
    assert tools["edit"]["calls"] == 2 and tools["edit"]["errors"] == 1
    assert defs["failing_commands"]["command"].to_list() == ["npm test -- --watch"]


def test_session_explorer_walks_one_session_in_order(warehouse_env):
    from notebooks import session_explorer
    from tests.conftest import scalar

    _, defs = session_explorer.app.run()
    transcript = defs["transcript"]
    assert defs["choice"].value == "S"  # the newest session with messages
    assert transcript.height == scalar(warehouse_env, "SELECT COUNT(*) FROM parts WHERE session_id = 'S'")
    assert transcript["message_index"].to_list() == sorted(transcript["message_index"].to_list())
