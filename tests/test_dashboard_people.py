"""The dashboard by person and machine (issue 34), and its headline: a lake of three (user,
machine) pairs, the known-totals lake (dev on laptop: Crush and CodeWhale) with Claude Code's
sessions of ana and of dev on a second machine, desk. Every figure the page shows is checked
against a query of the lake's own tables, written apart from the dashboard's."""

import html
import re
import threading
import urllib.error
import urllib.request
from datetime import date, datetime, timedelta, timezone
from urllib.parse import urljoin

import pytest

from tests.conftest import query, scalar
from tests.support_dashboard import tool_bar_labels
from tests.support_dashboard_built import shared_chromium
from warehouse.serve.labels import model_label
from warehouse.serve.dashboard.server import make_server


@pytest.fixture(scope="module")
def people(built_once):
    """The warehouse of the last machine to merge: every pair's rows. Built once, only read."""
    from tests.conftest import _known_totals, copy_home, ingest, ingest_tables
    from transforms.synth.claude import generate_home
    from warehouse.lake.layout import Layout

    def build(root):
        copy_home(built_once("known-totals", _known_totals, workers=True).home, root / "home")
        laptop = Layout.resolve(home=root / "home", machine="laptop", user="dev")
        for user, seed, day in (("ana", 5, 6), ("dev", 7, 2)):
            generate_home(root / f"claude-{user}", sessions=4, seed=seed,
                          start=datetime(2026, 1, day, 9, tzinfo=timezone.utc))
            desk = Layout.resolve(home=root / f"desk-{user}", lake=laptop.lake, machine="desk", user=user)
            # dev's warehouse, the last to merge, is the one read: ana's lands her sessions, no mart of it read
            merge = ingest if user == "dev" else ingest_tables
            merge(desk, homes={"claude": [root / f"claude-{user}"]})
        return desk

    return built_once("dashboard-people", build)


@pytest.fixture(scope="module")
def dashboard(people):
    server = make_server(people.warehouse, port=0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


def rows(page: str, table_id: str) -> list[list[str]]:
    """The cells' text of a table's rows."""
    body = re.search(rf'<table id="{table_id}">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    return [[text(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
            for r in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]


def links(page: str, table_id: str) -> dict[str, str]:
    body = re.search(rf'<table id="{table_id}">(.*?)</table>', page, re.S).group(1)
    return {html.unescape(t): html.unescape(h) for h, t in re.findall(r'<td[^>]*><a href="([^"]+)">([^<]*)</a>', body)}


def tile(page: str, name: str) -> str:
    return text(re.search(rf'<div class="tile" id="tile-{name}">(.*?</div>)</div>', page, re.S).group(1))


def figure(page: str, fig_id: str) -> str:
    return re.search(rf'<figure id="{fig_id}"[^>]*>(.*?)</figure>', page, re.S).group(1)


def usd(value) -> str:
    return f"${float(value):,.4f}"


def test_the_lake_holds_three_people_and_machines(people):
    pairs = query(people, 'SELECT DISTINCT "user", machine FROM sessions ORDER BY 1, 2')
    assert pairs == [("ana", "desk"), ("dev", "desk"), ("dev", "laptop")]


@pytest.mark.parametrize("who", [{"user": "ana"}, {"machine": "desk"}, {"user": "dev", "machine": "laptop"}])
def test_every_figure_honours_the_user_and_machine_filters(dashboard, people, who):
    where = " AND ".join(f'"{k}" = ?' for k in who)
    args = list(who.values())
    status, page = get(dashboard + "?" + "&".join(f"{k}={v}" for k, v in who.items()))
    assert status == 200 and "filter-errors" not in page
    for key, value in who.items():  # the form shows the filter chosen
        assert re.search(rf'<select name="{key}">.*?<option value="{value}" selected>', page, re.S)
    cost = scalar(people, f"SELECT SUM(cost_usd) FROM daily_costs WHERE {where}", *args)
    roots = scalar(people, f"SELECT COUNT(*) FROM sessions WHERE is_root AND {where}", *args)
    assert f"Total cost: {usd(cost)} · {roots:,} root session{'' if roots == 1 else 's'} started" in page
    # cost over time: one bar per day and project with a known cost, each at its figure
    bars = [html.unescape(b) for b in re.findall(r'<path[^>]*aria-label="([^"]*)"', figure(page, "cost-over-time"))]
    days = query(people, f"SELECT date, project, SUM(cost_usd) FROM daily_costs WHERE {where} GROUP BY ALL "
                         "HAVING SUM(cost_usd) IS NOT NULL", *args)
    assert len(bars) == len(days)
    for day, project, spent in days:
        assert any(f"project: {project};" in b and f"from: {day}; cost: {usd(spent)}" in b for b in bars), (day, project)
    # cost by model: a bar for each model (the name it groups under) and agent of these rows, and no other
    models = {f"{model_label(m)} · {a}" for m, a in query(
        people, f"SELECT DISTINCT model_name, provider FROM daily_costs WHERE {where}", *args)}
    chart = html.unescape(figure(page, "cost-by-model"))
    axis = re.search(r"Y-axis for a discrete scale with \d+ values: ([^\"]*)", chart).group(1)
    assert set(axis.split(", ")) == models  # an unknown cost's row too (written, not drawn)
    # tool calls: tool_usage's rows of these users and machines (the mart has both columns)
    tools = figure(page, "tool-usage")
    for label in tool_bar_labels(people, where, *args).values():
        assert label in html.unescape(tools), label
    # the insights: their findings are those of these rows (context growth: one a session)
    count = scalar(people, f"SELECT COUNT(*) FROM insight_context_growth WHERE {where}", *args)
    section = re.search(r'<div class="insight" id="insight_context_growth">(.*?)</div>', page, re.S).group(1)
    assert f"of {count} findings shown" in section


@pytest.mark.parametrize("who", [("--user", "ana", "\"user\" = 'ana'"), ("--machine", "desk", "machine = 'desk'"),
                                 ("--user", "dev", "\"user\" = 'dev'")])
def test_the_report_takes_the_dashboards_user_and_machine_filters(people, who):
    """`report --user`, `--machine` as the dashboard's ?user= and ?machine= and MCP's user (a new
    user's trial: `report --user ana` was refused, "did you mean --since?")."""
    import json

    from tests.conftest import run_cli

    flag, value, where = who
    ran = run_cli("report", "--home", str(people.home), "--warehouse", str(people.warehouse), flag, value,
                  "--format", "json", "--section", "totals")
    assert ran.returncode == 0, ran.stderr
    [totals] = json.loads(ran.stdout)["totals"]
    assert totals["root_sessions"] == scalar(people, f"SELECT COUNT(*) FROM sessions WHERE is_root AND {where}")
    assert float(totals["cost_usd"]) == pytest.approx(float(scalar(
        people, f"SELECT SUM(cost_usd) FROM sessions WHERE is_root AND {where}")), abs=1e-9)
    # as many calls as tool_calls holds for them (MCP's usage_report with a user counted none when
    # tool_usage had no "user": DuckDB read it as its own current user)
    calls = scalar(people, f"SELECT COUNT(*) FROM tool_calls WHERE has_call AND {where}")
    assert calls and totals["tool_calls"] == calls
    if flag == "--user":
        from warehouse.serve.dashboard.server import Reader
        from warehouse.serve.mcp_tools import Tools

        answer = Tools(Reader(people.warehouse)).usage_report(user=value, by="tool")
        mcp = json.loads(answer.split("\n", 1)[1])
        assert mcp["totals"][0]["tool_calls"] == calls and sum(r["calls"] for r in mcp["by_tool"]) == calls
    # the insights: the filter where a mart has its column, said where it has none (the usage blocks
    # have no machine: `--insights --machine` failed, found reviewing this stop's change)
    insights = run_cli("report", "--home", str(people.home), "--warehouse", str(people.warehouse), flag, value,
                       "--insights", "--format", "json")
    assert insights.returncode == 0, insights.stderr
    blocks = json.loads(insights.stdout)["sql"]["insight_usage_blocks"]
    assert (f"{where}" in blocks) == (flag == "--user")
    if flag == "--machine":
        table = run_cli("report", "--home", str(people.home), "--warehouse", str(people.warehouse), flag, value,
                        "--insights", "--section", "insight_usage_blocks")
        assert "every machine: this insight has none" in table.stdout
    unknown = run_cli("report", "--home", str(people.home), "--warehouse", str(people.warehouse), flag, value[:-1])
    assert unknown.returncode == 2 and f"no {flag[2:]} {value[:-1]!r}" in unknown.stderr, unknown.stderr


def test_an_insight_without_a_machine_says_the_filter_does_not_apply(dashboard, people):
    """insight_usage_blocks holds a user and no machine: filtered by user, and it says it shows
    every machine when a machine is chosen."""
    columns = {c for (c,) in query(people, "SELECT column_name FROM information_schema.columns "
                                           "WHERE table_name = 'insight_usage_blocks'")}
    assert "user" in columns and "machine" not in columns
    _, page = get(dashboard + "?machine=desk&user=ana")
    title = text(re.search(r'<div class="insight" id="insight_usage_blocks"><h3>(.*?)</h3>', page, re.S).group(1))
    assert "every machine: this insight has none" in title
    blocks = scalar(people, "SELECT COUNT(*) FROM insight_usage_blocks WHERE \"user\" = 'ana'")
    assert blocks and f"of {blocks} findings shown" in page
    _, sql_page = get(dashboard + "insight?name=insight_usage_blocks&user=ana")
    sql = html.unescape(re.search(r'<pre id="insight-sql">(.*?)</pre>', sql_page, re.S).group(1))
    assert len(query(people, sql)) == blocks  # the SQL shown gives the same findings
    # the page says its filters (they were in its SQL alone: a dashboard trial)
    said = text(re.search(r'<p class="meta" id="insight-filters">(.*?)</p>', sql_page, re.S).group(1))
    assert " ".join(said.split()) == "Filters: user ana · the overview changes them"
    _, every = get(dashboard + "insight?name=insight_usage_blocks")
    assert "Filters: none: every finding" in text(re.search(r'id="insight-filters">(.*?)</p>', every, re.S).group(1))


def test_the_people_ranking_lists_each_user_with_their_machines(dashboard, people):
    _, page = get(dashboard)
    expected = query(people, """
        SELECT "user", STRING_AGG(DISTINCT machine, ', ' ORDER BY machine), COUNT(*), SUM(messages),
               SUM(tool_calls), SUM(failed_tool_calls), SUM(cost_usd)
        FROM session_summary GROUP BY 1""")
    costs = dict(query(people, 'SELECT "user", SUM(cost_usd) FROM daily_costs GROUP BY 1'))
    shown = rows(page, "users")
    # ranked by the cost of their days, costliest first
    assert [r[0] for r in shown] == sorted(costs, key=lambda u: -costs[u])
    for user, machines, sessions, messages, calls, failed, _ in expected:
        row = next(r for r in shown if r[0] == user)
        assert row[1:7] == [machines, f"{sessions:,}", f"{messages:,}", f"{calls:,}", f"{failed:,}", usd(costs[user])]
    assert next(r for r in shown if r[0] == "dev")[1] == "desk, laptop"
    # a user's row opens the overview of that user alone; its ranking then holds them only
    _, ana = get(urljoin(dashboard, links(page, "users")["ana"]))
    assert [r[0] for r in rows(ana, "users")] == ["ana"]
    cut = rows(get(dashboard + "?top=1")[1], "users")
    assert cut[-1][0] == "others (1 users)"


@pytest.mark.parametrize("param, value", [("user", "nobody"), ("machine", "nowhere")])
def test_an_unknown_user_or_machine_is_named_and_ignored(dashboard, people, param, value):
    status, page = get(dashboard + f"?{param}={value}")
    assert status == 400
    errors = text(re.search(r'<div class="errors" id="filter-errors">(.*?)</div>', page, re.S).group(1))
    assert f"unknown {param} '{value}' (not in this lake); ignored" in errors
    assert f"Total cost: {usd(scalar(people, 'SELECT SUM(cost_usd) FROM daily_costs'))}" in page  # not filtered


def test_a_user_and_a_machine_with_no_session_together_are_said_as_the_report_says(dashboard, people):
    """ana works on the desk only: her and the laptop showed $0 everywhere without a word (a team
    lead's trial), where the report names her machines. A note, not a filter problem: both filters
    hold, and the page is answered 200."""
    status, page = get(dashboard + "?user=ana&machine=laptop")
    assert status == 200 and 'id="filter-errors"' not in page
    note = text(re.search(r'<p class="note" id="filter-notes">(.*?)</p>', page, re.S).group(1))
    assert note == "user 'ana' has no session on machine 'laptop'; theirs are on desk"
    assert "Total cost: $0" in page
    assert 'id="filter-notes"' not in get(dashboard + "?user=ana&machine=desk")[1]


def test_the_filters_are_kept_by_every_link_down_and_back(dashboard):
    _, page = get(dashboard + "?user=ana&machine=desk")
    project = links(page, "projects")
    assert project and all("user=ana" in h and "machine=desk" in h for h in project.values())
    _, project_page = get(urljoin(dashboard, next(iter(project.values()))))
    assert '<option value="ana" selected>' in project_page
    sessions = links(project_page, "sessions")
    assert sessions and all("machine=desk" in h for h in sessions.values())
    status, session = get(urljoin(dashboard, next(iter(sessions.values()))))
    assert status == 200 and "filter-errors" not in session
    # on a session's page `machine` names the session's machine: the way back keeps the user only
    back = html.unescape(re.search(r'<nav><a href="([^"]+)">overview</a>', session).group(1))
    assert "user=ana" in back and "machine=" not in back


def tiles(page: str) -> dict[str, str]:
    return {name: tile(page, name) for name in ("cost", "sessions", "failed", "cache")}


def window_figures(people, first: date, last: date, **who):
    """The headline's figures of a window, from the tables they come from (usage for the cache)."""
    where = "".join(f' AND "{k}" = ?' for k in who)
    args = [first, last, *who.values()]
    cost = scalar(people, f"SELECT SUM(cost_usd) FROM daily_costs WHERE date BETWEEN ? AND ?{where}", *args)
    roots = scalar(people, f"SELECT COUNT(*) FROM sessions WHERE is_root AND date BETWEEN ? AND ?{where}", *args)
    calls, failed = query(people, f"SELECT COUNT(*), COUNT(*) FILTER (WHERE is_error OR exit_code <> 0) FROM "
                                  f"tool_calls WHERE has_call AND date BETWEEN ? AND ?{where}", *args)[0]
    read, inputs = query(people, "SELECT SUM(cache_read_tokens), SUM(COALESCE(input_uncached_tokens, 0) + "
                                 "COALESCE(cache_read_tokens, 0) + COALESCE(cache_write_5m_tokens, 0) + "
                                 "COALESCE(cache_write_1h_tokens, 0)) FROM usage WHERE (cache_read_tokens IS NOT NULL "
                                 "OR cache_write_5m_tokens IS NOT NULL OR cache_write_1h_tokens IS NOT NULL) AND "
                                 f"date BETWEEN ? AND ?{where}", *args)[0]
    return cost, roots, calls, failed, (read / inputs if inputs else None)


def change(now, then, written) -> str:
    arrow = "▲" if now > then else "▼"
    part = f" ({(now - then) / then:+.0%})" if then else ""
    return f"{arrow} {written(abs(now - then))}{part} from {written(then)}"


def test_the_headline_compares_the_window_with_the_one_before(dashboard, people):
    """Jan 5-7 against Jan 2-4, for dev: each tile's figure and its change, as the tables hold them."""
    first, last = date(2026, 1, 5), date(2026, 1, 7)
    _, page = get(dashboard + f"?since={first}&until={last}&user=dev")
    said = text(re.search(r'<p class="meta" id="headline-window">(.*?)</p>', page, re.S).group(1))
    assert "2026-01-05 – 2026-01-07 (3 days)" in said and "against the previous window, 2026-01-02 – 2026-01-04 (3 days)" in said
    now = window_figures(people, first, last, user="dev")
    then = window_figures(people, date(2026, 1, 2), date(2026, 1, 4), user="dev")
    shown = tiles(page)
    assert usd(now[0]) in shown["cost"] and change(now[0], then[0], usd) in shown["cost"]
    assert f"Total cost: {usd(now[0])}" in page  # the tile is the page's total over the same days
    count = lambda v: f"{v:,}"  # noqa: E731
    assert change(now[1], then[1], count) in shown["sessions"] if now[1] != then[1] else "no change" in shown["sessions"]
    assert f"{now[3]:,}" in shown["failed"]
    assert f"of {now[2]:,} tool calls" in shown["failed"] if now[2] else "no tool calls in the window" in shown["failed"]
    assert change(now[3], then[3], count) in shown["failed"]
    # dev's Claude sessions on desk were Jan 2-3: cache reads before the window, none in it
    assert now[4] is None and then[4] is not None
    assert "no tokens recorded" in shown["cache"] and "%" not in shown["cache"]


def test_the_cache_share_and_its_change_in_points(dashboard, people):
    """All users, Jan 5-7 (ana's Claude sessions) against Jan 2-4 (dev's on desk)."""
    _, page = get(dashboard + "?since=2026-01-05&until=2026-01-07")
    now = window_figures(people, date(2026, 1, 5), date(2026, 1, 7))[4]
    then = window_figures(people, date(2026, 1, 2), date(2026, 1, 4))[4]
    assert now and then and round(now, 3) != round(then, 3)
    cache = tile(page, "cache")
    points = abs(round(now, 3) - round(then, 3)) * 100
    assert f"{now:.1%}" in cache and f"{'▲' if now > then else '▼'} {points:.1f} points from {then:.1%}" in cache


def test_without_dates_the_headline_takes_the_30_days_to_the_last_day_with_data(dashboard, people):
    # the last day a root session started or money was spent, whoever's
    last = scalar(people, "SELECT GREATEST((SELECT MAX(date) FROM sessions WHERE is_root), "
                          "(SELECT MAX(date) FROM daily_costs WHERE cost_usd > 0))")
    first = last - timedelta(days=29)
    _, default = get(dashboard + "?user=ana")
    said = text(re.search(r'<p class="meta" id="headline-window">(.*?)</p>', default, re.S).group(1))
    assert f"{first} – {last} (30 days)" in said
    assert "the last day with data (a root session started or money spent; the page below: every day)" in said
    assert "no data in the previous window" in said and "no previous figure to compare with" in tile(default, "cost")
    _, window = get(dashboard + f"?user=ana&since={first}&until={last}")
    assert tiles(default) == tiles(window)  # the same figures as that window given by hand


def test_a_window_with_no_token_counts_never_says_0_percent(dashboard, people):
    assert not scalar(people, "SELECT COUNT(*) FROM token_usage WHERE provider = 'crush'")
    _, page = get(dashboard + "?agent=crush")
    cache = tile(page, "cache")
    assert "no tokens recorded" in cache and "0%" not in cache and "0.0%" not in cache
    assert "Crush, CodeWhale, Cursor and Codebuff record no per-request tokens" in cache
    # a window with nothing in it: said so, no agent blamed (a dashboard trial)
    empty = tile(get(dashboard + "?since=2030-01-01&until=2030-01-31")[1], "cache")
    assert "no tokens recorded" in empty and "no request in the window" in empty and "Crush" not in empty


def test_the_overview_filtered_by_a_user_in_a_real_browser(dashboard, people, tmp_path, request):
    """Chromium lays out the page: four tiles in a row over the totals, the people ranking with
    the one user. The screenshot is kept in the test's tmp dir."""
    from tests.support_browser import CHROMIUM

    if not CHROMIUM:
        pytest.skip("no chromium on this machine: apt-get install chromium")
    tab = shared_chromium(request).context()
    try:
        url = dashboard + "?user=ana&since=2026-01-05&until=2026-01-07"
        tab.call("Emulation.setDeviceMetricsOverride", width=1440, height=1400, deviceScaleFactor=1, mobile=False)
        assert tab.load(url) is None
        boxes = tab.call("Runtime.evaluate", returnByValue=True, expression="""
            [...document.querySelectorAll('.tile')].map(t => { const r = t.getBoundingClientRect();
                                                               return [t.id, r.top, r.left, r.width]; })""")
        boxes = boxes["result"]["value"]
        assert [b[0] for b in boxes] == ["tile-cost", "tile-sessions", "tile-failed", "tile-cache"]
        assert len({round(b[1]) for b in boxes}) == 1 and all(b[3] > 150 for b in boxes)  # one row, readable
        error, dom = tab.dom(url)
        assert error is None and [r[0] for r in rows(dom, "users")] == ["ana"]
        png = tmp_path / "overview-ana.png"
        tab.screenshot(url, png, width=1440, height=1400)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    finally:
        tab.close()


@pytest.mark.parametrize("dates", ["since=0001-01-01&until=2026-01-31", "until=0001-01-10", "since=0001-02-01"])
def test_a_window_at_the_first_days_a_date_can_have_still_answers(dashboard, people, dates):
    """The previous window of one starting in year 1 reached before the first date: the page
    answered 500 ("cannot read the warehouse"). It answers, the headline cut at that first day."""
    status, page = get(dashboard + "?" + dates)
    assert status == 200, page
    said = text(re.search(r'<p class="meta" id="headline-window">(.*?)</p>', page, re.S).group(1))
    if dates.startswith("since=0001-01-01"):  # every day of the data is in the window: its total is the lake's
        assert f"Total cost: {usd(scalar(people, 'SELECT SUM(cost_usd) FROM daily_costs'))}" in page
        assert "0001-01-01 – 2026-01-31" in said


def test_names_as_typed_filter_the_pages_as_the_report_takes_them(dashboard, people):
    """An analyst's trial: `report --project Acme/WebShop --user Ana.Smith` (and MCP, and search)
    found acme-webshop and ana-smith; the dashboard said them unknown and showed the whole lake,
    and its CSV and project pages answered 400."""
    from warehouse.serve.formatting import dollars

    typed, stored = "?project=WebShop&user=ANA&machine=Desk", "?project=webshop&user=ana&machine=desk"
    status, page = get(dashboard + typed)
    assert status == 200 and "filter-errors" not in page
    assert tile(page, "cost") == tile(get(dashboard + stored)[1], "cost")
    total = scalar(people, "SELECT SUM(cost_usd) FROM daily_costs WHERE project = 'webshop' AND \"user\" = 'ana' "
                           "AND machine = 'desk'")
    assert total and f"Total cost: {dollars(total)}" in page
    for path in ("project" + typed, "csv" + typed + "&table=users"):
        assert get(dashboard + path)[0] == 200, path
    assert "unknown user 'Ana.Smyth'" in html.unescape(get(dashboard + "?user=Ana.Smyth")[1])  # still said as typed
