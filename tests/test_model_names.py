"""Issue 34, "Names that group": one model recorded under several names (a dated id, a dotted one,
another agent's `provider/` prefix) is one `model_name` in the marts, the report and the
dashboard, from the catalog's `model_names` table the merge fills with genai-prices' ids."""

import json
from decimal import Decimal

import pytest

from tests.conftest import T0, Project, assistant, copy_home, ingest, query, run_cli
from transforms.pricing import model_name, prices_version
from transforms.synth.crush import add_session
from warehouse.lake.ducklake import writing
from warehouse.lake.layout import Layout, tables_path

# three spellings genai-prices resolves to one model (the last as OpenRouter names it), and a name
# it does not know; each session's whole cost is on its one assistant message's model
SONNET = [("claude-sonnet-4-5", "anthropic", 0.1), ("claude-sonnet-4-5-20250929", "anthropic", 0.2),
          ("anthropic/claude-sonnet-4.5", "openrouter", 0.4)]
LOCAL = ("local-coder-7b", "ollama", 0.05)


def _store(project, name, sessions):
    p = project(name)
    for i, (model, provider, cost) in enumerate(sessions):
        add_session(p.conn, f"s{i}", title=model, created_at=T0 + 100 * i, cost=cost)
        assistant(p.conn, f"m{i}", f"s{i}", T0 + 100 * i + 1, model=model, provider=provider)
    p.close()
    return p


def _named(root):
    """A lake of the three spellings and the unknown name, built once per worker."""
    shop = _store(lambda name: Project(root / "projects", name), "shop", SONNET + [LOCAL])
    layout = Layout.resolve(home=root / "home", machine="laptop", user="dev")
    model_name.cache_clear()
    ingest(layout, shop.db)
    assert model_name.cache_info().misses == 4  # the first merge looks every name up
    return layout, shop


@pytest.fixture
def named(layout, built_once):
    """A copy of that lake at `layout` (the store it was read from stays where it was made)."""
    template, shop = built_once("model-names", _named)
    copy_home(template.home, layout.home)
    return layout, shop


def test_the_library_maps_the_spellings_together():
    assert {model_name(m, p) for m, p, _ in SONNET} == {"claude-sonnet-4-5"}
    assert model_name("Claude-Sonnet-4-5", None) == "claude-sonnet-4-5"
    assert model_name(*LOCAL[:2]) == "local-coder-7b"  # not known: its own name
    assert model_name("Local-Coder-7B", None) == "local-coder-7b"  # lower-cased, as the library compares


def test_the_marts_group_the_spellings_under_one_name(named):
    layout, _ = named
    by_name = query(layout, "SELECT model_name, SUM(cost_usd), SUM(sessions) FROM daily_costs GROUP BY 1 ORDER BY 1")
    assert by_name == [("claude-sonnet-4-5", Decimal("0.7"), 3), ("local-coder-7b", Decimal("0.05"), 1)]
    # `model` keeps each name as recorded
    recorded = query(layout, "SELECT model, llm_provider, model_name, cost_usd FROM daily_costs ORDER BY cost_usd")
    assert recorded == [("local-coder-7b", "ollama", "local-coder-7b", Decimal("0.05"))] + [
        (m, p, "claude-sonnet-4-5", Decimal(str(c))) for m, p, c in SONNET]
    usage = query(layout, "SELECT model_name, SUM(cost_usd), SUM(messages), COUNT(*) FROM model_usage "
                          "GROUP BY 1 ORDER BY 1")
    assert usage == [("claude-sonnet-4-5", Decimal("0.7"), 3, 3), ("local-coder-7b", Decimal("0.05"), 1, 1)]
    names = query(layout, "SELECT model, llm_provider, model_name FROM model_names ORDER BY 1")
    assert names == sorted([(m, p, "claude-sonnet-4-5") for m, p, _ in SONNET] + [LOCAL[:2] + ("local-coder-7b",)])


def test_a_second_merge_looks_up_only_the_new_names(named, layout, project):
    layout, shop = named  # its first merge looked every name up (_named)
    other = _store(project, "other", [("claude-sonnet-4-5", "anthropic", 1.0), ("gpt-5-mini", "openai", 0.25)])
    model_name.cache_clear()
    ingest(layout, shop.db, other.db)
    assert model_name.cache_info().misses == 1  # gpt-5-mini alone
    assert query(layout, "SELECT model_name, SUM(cost_usd) FROM daily_costs GROUP BY 1 ORDER BY 1") == [
        ("claude-sonnet-4-5", Decimal("1.7")), ("gpt-5-mini", Decimal("0.25")), ("local-coder-7b", Decimal("0.05"))]


def test_names_resolved_by_another_release_are_looked_up_again(named, layout, project):
    """A genai-prices release that resolves a name otherwise: the next merge looks every name up
    again, and rebuilds the marts whole (a project no source of the merge touched included)."""
    layout, shop = named
    with writing(layout.warehouse, tables_path(layout.lake, layout.warehouse)) as con:
        con.execute("UPDATE lake.main.model_names SET model_name = 'sonnet-old', resolved_by = '0.0.1'")
        con.execute("UPDATE lake.main.daily_costs SET model_name = 'sonnet-old'")
    other = _store(project, "other", [("gpt-5-mini", "openai", 0.25)])
    ingest(layout, shop.db, other.db)
    assert query(layout, "SELECT DISTINCT resolved_by FROM model_names") == [(prices_version(),)]
    assert query(layout, "SELECT model_name, SUM(cost_usd) FROM daily_costs WHERE project = 'shop' "
                         "GROUP BY 1 ORDER BY 1") == [("claude-sonnet-4-5", Decimal("0.7")),
                                                      ("local-coder-7b", Decimal("0.05"))]


def test_report_by_model_is_one_row_per_name_with_the_recorded_names(named):
    layout, _ = named
    ran = run_cli("report", "--home", layout.home, "--by", "model", "--format", "json")
    assert ran.returncode == 0, ran.stderr
    rows = json.loads(ran.stdout)["by_model"]
    assert rows == [
        {"model_name": "claude-sonnet-4-5", "cost_usd": 0.7, "assistant_messages": 3, "tokens": None,
         "models": "anthropic/claude-sonnet-4.5, claude-sonnet-4-5, claude-sonnet-4-5-20250929",
         "agents": "crush", "cost_source": "native"},
        {"model_name": "local-coder-7b", "cost_usd": 0.05, "assistant_messages": 1, "tokens": None,
         "models": "local-coder-7b", "agents": "crush", "cost_source": "native"}]
    table = run_cli("report", "--home", layout.home, "--by", "model").stdout
    section = table.split("Cost and use by model\n", 1)[1].split("\n\n", 1)[0]
    assert sum(line.startswith("claude-sonnet-4-5 ") for line in section.splitlines()) == 1


def test_the_dashboards_model_charts_group_by_the_name(named):
    from warehouse.lake.ducklake import connect
    from warehouse.serve.dashboard.server import render

    layout, _ = named
    with connect(layout.warehouse) as con:
        overview, _ = render(con, "/", "")
        page, _ = render(con, "/project", "project=shop")
    ranking = overview.split('id="cost-by-model"', 1)[1].split("</figure>", 1)[0]
    assert "claude-sonnet-4-5 · crush" in ranking and "20250929" not in ranking and "openrouter" not in ranking
    over_time = page.split('id="cost-over-time"', 1)[1].split("</figure>", 1)[0]
    assert "claude-sonnet-4-5 · crush" in over_time and "anthropic/claude-sonnet-4.5" not in over_time


def test_a_lake_merged_before_the_names_gets_them_at_its_next_merge(named):
    """A lake an older release merged: no `model_names`, marts without the column, their SQL's
    hash another. The next merge, with nothing landed, fills the table and rebuilds them whole."""
    from warehouse.catalog.build import refresh

    layout, _ = named
    with writing(layout.warehouse, tables_path(layout.lake, layout.warehouse)) as con:
        con.execute("DROP TABLE lake.main.model_names")
        for mart in ("daily_costs", "model_usage", "token_usage"):
            con.execute(f"CREATE OR REPLACE TABLE lake.main.{mart} AS SELECT * EXCLUDE (model_name) FROM lake.main.{mart}")
            con.execute("UPDATE lake.main._agentlake_marts SET sql_sha = 'older' WHERE name = ?", [mart])
    result = refresh(layout.lake, layout.warehouse)
    assert not result.merged
    assert query(layout, "SELECT model_name, SUM(cost_usd) FROM daily_costs GROUP BY 1 ORDER BY 1") == [
        ("claude-sonnet-4-5", Decimal("0.7")), ("local-coder-7b", Decimal("0.05"))]
    assert query(layout, "SELECT COUNT(*) FROM model_names") == [(4,)]
