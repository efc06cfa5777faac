"""Every agent in the same projects, side by side: the marts, the report and the dashboard agree
with what each agent's own generator wrote (exact costs, tokens and tool calls for the first five
here; each newer agent's exact totals are in its own test file)."""

import json
import threading
import urllib.request

import pytest

from pipelines.cli import main
from tests.conftest import copy_home, query, scalar
from tests.support_dashboard import tool_bar_labels
from transforms.provider import DiscoverOptions
from transforms.providers import PROVIDERS
from transforms.synth.demo import generate_demo
from warehouse.catalog.build import build_warehouse
from warehouse.lake.layout import Layout
from warehouse.land.ingest import discover_sources, ingest_all
from warehouse.serve.dashboard.server import make_server

AGENTS = ("claude", "codewhale", "codex", "crush", "opencode")


@pytest.fixture
def five(layout, built_once):
    """The demo ingested once per session (the tests only read it); each test has a copy of its home."""
    return ingested_demo(built_once, layout)


def ingested_demo(built_once, layout):
    """A copy of the ingested demo's home at `layout.home` (machine laptop, user dev, as the
    `layout` fixture's); returns the demo, whose generators' truths the tests compare with. Also
    for the other tests that only read a lake of every agent."""
    demo, template = built_once("every-agent-demo", _ingest_demo, workers=True)
    copy_home(template.home, layout.home)
    return demo


def _ingest_demo(root):
    demo = generate_demo(root / "demo", projects=2, sessions=4, seed=11, without_cost=0)
    layout = Layout.resolve(home=root / "home", machine="laptop", user="dev")
    sources, problems = discover_sources(DiscoverOptions(env={}, extra_roots=demo.roots(), use_default=False))
    summary = ingest_all(sources, layout, workers=1)
    assert not problems and summary.by_status["failed"] == 0
    assert all(r.reconciled for r in summary.results)
    build_warehouse(layout.lake, layout.warehouse)
    return demo, layout


def expected_root_cost(demo, agent) -> float:
    """What each agent recorded or what its requests price to, from the generators' own truth."""
    truth = demo.truths[agent]
    return truth.root_cost if agent == "crush" else truth.cost_usd


def test_every_agent_appears_with_its_exact_cost(layout, five):
    by_agent = dict(query(layout, "SELECT provider, SUM(cost_usd) FROM daily_costs GROUP BY 1"))
    assert sorted(by_agent) == sorted(PROVIDERS)  # every agent the demo holds, side by side
    for agent in AGENTS:
        assert float(by_agent[agent]) == pytest.approx(expected_root_cost(five, agent), abs=1e-8), agent
        # the mart's exact split adds up to the sessions' own costs
        roots = scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root AND provider = ?", agent)
        assert float(by_agent[agent]) == pytest.approx(roots, abs=1e-8), agent


def test_tokens_side_by_side_in_disjoint_buckets(layout, five):
    rows = query(layout, "SELECT provider, SUM(input_uncached_tokens), SUM(cache_read_tokens), SUM(output_tokens), "
                         "SUM(total_tokens), SUM(requests) FROM token_usage GROUP BY 1 ORDER BY 1")
    got = {r[0]: r[1:] for r in rows}
    assert {"claude", "codex", "opencode"} <= set(got)
    assert not {"crush", "codewhale"} & set(got)  # Crush and CodeWhale record no per-request usage
    claude, codex, opencode = (five.truths[a] for a in ("claude", "codex", "opencode"))
    assert got["codex"][:3] == (codex.input_tokens - codex.cached_tokens, codex.cached_tokens, codex.output_tokens)
    assert got["codex"][4] == codex.usage_rows
    for agent, truth in (("claude", claude), ("opencode", opencode)):
        uncached, cache_read, output, total, requests = got[agent]
        t = truth.tokens  # by `usage` column
        assert (uncached, cache_read, output) == (t["input_uncached_tokens"], t["cache_read_tokens"],
                                                  t["output_tokens"]), agent
        assert total == sum(t[f"{b}_tokens"] for b in ("input_uncached", "cache_read", "cache_write_5m",
                                                       "cache_write_1h", "output")), agent
    assert got["claude"][4] == claude.requests and got["opencode"][4] == opencode.usage_rows
    # each bucket sums to the total, request by request
    assert scalar(layout, "SELECT COUNT(*) FROM usage WHERE total_tokens <> COALESCE(input_uncached_tokens, 0) + "
                          "COALESCE(cache_read_tokens, 0) + COALESCE(cache_write_5m_tokens, 0) + "
                          "COALESCE(cache_write_1h_tokens, 0) + COALESCE(output_tokens, 0)") == 0
    # an unpriced request is unknown, never $0
    assert scalar(layout, "SELECT COUNT(*) FROM usage WHERE cost_source = 'unknown' AND cost_usd IS NOT NULL") == 0
    assert scalar(layout, "SELECT COUNT(*) FROM usage WHERE cost_source = 'unknown' "
                          "AND provider IN ('claude', 'codex', 'opencode')") == (
        claude.unpriced_requests + codex.unpriced_requests + opencode.unknown_requests)


def test_tool_calls_of_every_agent_in_one_mart(layout, five):
    calls = dict(query(layout, "SELECT provider, SUM(calls) FROM tool_usage GROUP BY 1"))
    for agent in AGENTS:
        truth = five.truths[agent]
        expected = (sum(sum(d.tool_calls_by_name.values()) for d in truth.dbs) if agent == "crush"
                    else sum(truth.tool_calls_by_name.values()))
        assert calls[agent] == expected, agent


def test_report_by_agent(layout, five, capsys):
    assert main(["report", "--home", str(layout.home), "--by", "agent", "--top", "0", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert sorted(r["provider"] for r in data["by_agent"]) == sorted(PROVIDERS)
    by_agent = {r["provider"]: r["cost_usd"] for r in data["by_agent"]}
    for agent in AGENTS:  # exact in JSON, to the nano-dollar
        assert by_agent[agent] == pytest.approx(expected_root_cost(five, agent), abs=1e-9), agent


def test_dashboard_offers_and_draws_every_agent(layout, five):
    server = make_server(layout.warehouse, port=0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        page = urllib.request.urlopen(base, timeout=30).read().decode()
        for agent in PROVIDERS:
            assert f'<option value="{agent}"' in page, agent
        only = urllib.request.urlopen(base + "?provider=codex", timeout=30).read().decode()
        assert "· codex" in only and "· crush" not in only
    finally:
        server.shutdown()
        server.server_close()


def test_the_dashboard_draws_one_bar_per_tool_category_with_each_agents_names(layout, five):
    """`bash`, `Bash` and `Shell` are one tool: the tool chart has a bar per category, its calls
    those of every name in it, and its label the names as the agents gave them."""
    import html

    from warehouse.serve.dashboard.server import running

    with running(layout.warehouse, port=0) as url:
        page = html.unescape(urllib.request.urlopen(url, timeout=30).read().decode())
    chart = page.split('id="tool-usage"', 1)[1].split("</figure>", 1)[0]
    shell = query(layout, "SELECT list_distinct(list(tool_name)) FROM tool_calls WHERE tool_category = 'shell'")[0][0]
    assert {"bash", "Bash", "Shell"} <= set(shell)  # the agents' spellings of one tool: one bar
    for category, label in tool_bar_labels(layout).items():
        assert label in chart, category


def test_every_agent_has_its_sessions_in_the_lake(layout, five):
    """Each agent's generator says how many sessions it wrote; the lake holds exactly those."""
    got = {p: (n, roots) for p, n, roots in query(
        layout, "SELECT provider, COUNT(*), COUNT(*) FILTER (WHERE is_root) FROM sessions GROUP BY 1")}
    assert set(got) == set(PROVIDERS)
    wrong = {}
    for agent in PROVIDERS:
        truth = five.truths[agent]
        # Claude Code's generator counts its sub-agent transcripts apart
        expected = truth.sessions + truth.subagents if agent == "claude" else truth.sessions
        if got[agent][0] != expected:
            wrong[agent] = (got[agent], expected)
    assert wrong == {}
