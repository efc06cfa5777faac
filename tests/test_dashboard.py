"""The dashboard in a real headless browser (Debian's Chromium): Vega-Lite charts rendered to SVG
with the fixture's figures on real axes, top-N with an "others" row that says what it holds,
validated filters, and links followed from the overview down to one session's transcript.
Every page is also saved as a screenshot (in the test's tmp dir) and checked to be a real image."""

import html
import os
import re
import threading
from urllib.parse import urljoin

import pytest

from tests.support_browser import CHROMIUM
from tests.support_dashboard_built import lake_copy, shared_chromium
from warehouse.serve.dashboard.server import make_server

if not CHROMIUM and not os.environ.get("CI"):  # CI installs it (.ci/run); a laptop may not have it
    pytest.skip("no chromium on this machine: apt-get install chromium", allow_module_level=True)


def serve(warehouse, **kwargs):
    server = make_server(warehouse, port=0, **kwargs)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def read_only_lake(built_once):
    """A copy of the known-totals lake (conftest's `lake`) for the module's tests that only read
    it: one copy and one server for them all, whose kept pages they share as visitors do."""
    return lake_copy(built_once, "dashboard-read-only")


@pytest.fixture(scope="module")
def dashboard(read_only_lake):
    server = serve(read_only_lake.warehouse)
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def chromium(request):
    """One browser for the module's pages (the session's): a start per page was most of these tests' time."""
    return shared_chromium(request)


@pytest.fixture
def tab(chromium):
    """The test's own browser context: its cookies are its own, as its own profile's were."""
    context = chromium.context()
    yield context
    context.close()


def browse(url: str, tab) -> str:
    """The DOM as Chromium built it."""
    error, dom = tab.dom(url)
    assert error is None, error
    return dom


def screenshot(url: str, tab, tmp_path, name: str) -> None:
    png = tmp_path / f"{name}.png"
    tab.screenshot(url, png, width=1440, height=1800)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000, name


def figure(dom: str, fig_id: str) -> str:
    return re.search(rf'<figure id="{fig_id}"[^>]*>(.*?)</figure>', dom, re.S).group(1)


def table_links(dom: str, table_id: str) -> list[tuple[str, str]]:
    """(text, href) of the first-cell links of a table's rows."""
    body = re.search(rf'<table id="{table_id}">(.*?)</table>', dom, re.S).group(1)
    return [(html.unescape(t), html.unescape(h)) for h, t in re.findall(r'<td[^>]*><a href="([^"]+)">([^<]*)</a>', body)]


def bar_labels(svg: str) -> list[str]:
    """The accessible label of every mark item Vega drew (one per bar, with its exact figures)."""
    return [html.unescape(a) for a in re.findall(r'<path[^>]*aria-label="([^"]*)"', svg)]


def test_overview_has_real_axes_legend_and_the_fixture_figures(dashboard, read_only_lake, tab, tmp_path):
    from tests.conftest import query, scalar

    dom = browse(dashboard, tab)
    over_time = figure(dom, "cost-over-time")
    # a time axis (days, with dates) and a cost axis in dollars, both titled
    assert re.search(r"X-axis titled 'day \(UTC\)' for a utc scale", over_time)  # UTC days, drawn in UTC
    assert re.search(r"Y-axis titled 'cost \(USD\)' for a linear scale with values from \$0 to \$", over_time)
    assert "role-legend" in over_time and "Symbol legend titled 'project'" in over_time
    # one bar per (day, project) that has a known cost, with its exact figure
    expected = query(read_only_lake, "SELECT date, project, SUM(cost_usd) FROM daily_costs GROUP BY ALL "
                                     "HAVING SUM(cost_usd) IS NOT NULL ORDER BY 1")
    labels = bar_labels(over_time)
    assert len(labels) == len(expected)
    from warehouse.serve.formatting import dollars

    for day, project, cost in expected:  # rounded as the report rounds it, not as d3 rounds the double
        assert any(f"from: {day}" in a and f"project: {project}" in a and f"cost: {dollars(cost)}" in a
                   for a in labels), (day, project)
    by_model = figure(dom, "cost-by-model")
    assert "unknown cost" in by_model  # glm-4.6: unknown, not drawn as $0
    unknown = scalar(read_only_lake, "SELECT COUNT(*) FROM sessions WHERE is_root AND cost_source = 'unknown'")
    assert unknown and f"{unknown} of them with unknown cost" in dom  # root sessions, as the report counts
    for fig in ("cost-by-project", "cost-by-model", "tool-usage"):
        assert "all " in figure(dom, fig) and " shown" in figure(dom, fig)  # nothing cut, and it says so
    tools = figure(dom, "tool-usage")
    failed = scalar(read_only_lake, "SELECT COUNT(*) FROM tool_calls WHERE has_call AND tool_name = 'bash' "
                                    "AND (is_error OR exit_code <> 0)")  # a call failed both ways is one failure
    assert f"({failed} failed)" in tools
    assert "<h2>Insights</h2>" in dom
    screenshot(dashboard, tab, tmp_path, "overview")


def test_filters_change_the_page(dashboard, tab):
    crush = browse(dashboard + "?agent=crush", tab)  # the parameter named as the form labels it
    assert "Total cost: $1.3000" in crush
    assert "glm-4.6" not in figure(crush, "cost-by-model")
    assert '<select name="agent">' in crush and "filter-errors" not in crush
    assert "Total cost: $1.3000" in browse(dashboard + "?provider=crush", tab)  # its older name, in old links
    window = browse(dashboard + "?agent=crush&since=2026-01-03&until=2026-01-05", tab)
    assert "Total cost: $0.1000" in window
    assert len(bar_labels(figure(window, "cost-over-time"))) == 3  # S's three thirds, one a day
    assert re.search(r'<option value="crush" selected', window)
    assert "filter-errors" not in window


@pytest.mark.parametrize("query, message", [
    ("since=2026-13-01", "since: '2026-13-01' is not a date"),
    ("until=yesterday", "until: 'yesterday' is not a date"),
    ("since=2026-W01", "since: '2026-W01' is not a date"),  # an ISO week, taken as its Monday before
    ("since=2026-01-05&until=2026-01-01", "since 2026-01-05 is after until 2026-01-01"),
    ("project=nope", "unknown project 'nope'"),
    ("provider=gpt", "unknown agent 'gpt'"),
    ("top=many", "top: 'many' is not a whole number"),
    ("top=-1", "top: '-1' is negative: rows per ranking must be 0 (all) or more"),
    ("agent=gpt", "unknown agent 'gpt' (not in this lake); ignored"),
    ("agent=crus", "unknown agent 'crus' (not in this lake; close ones: crush); ignored"),  # as the CLI says
    ("agnet=crush", "unknown parameter 'agnet': this page takes since, until, project, agent, top, user, machine, "
                    "grain, tz, sort; ignored"),
    ("agent=crush&agent=codewhale", "agent given 2 times ('crush', 'codewhale'): one value each; 'codewhale' used"),
])
def test_bad_filters_are_named_on_the_page(dashboard, tab, query, message):
    """A bad filter is shown and left out, never silently ignored; the rest of the page still works."""
    import urllib.error
    import urllib.request

    dom = browse(dashboard + "?" + query, tab)
    errors = re.search(r'<div class="errors" id="filter-errors">(.*?)</div>', dom, re.S).group(1)
    assert message in html.unescape(errors)
    assert "Total cost: $" in dom
    with pytest.raises(urllib.error.HTTPError) as answer:  # and the status says so
        urllib.request.urlopen(dashboard + "?" + query, timeout=30)
    assert answer.value.code == 400


def test_links_lead_from_the_overview_down_to_a_transcript(dashboard, read_only_lake, tab, tmp_path):
    from tests.conftest import query, scalar

    overview = browse(dashboard, tab)
    projects = dict(table_links(overview, "projects"))
    assert list(projects) == ["shop"]
    # a bar of "Cost by project" links to the same project page (the agent chosen too)
    assert re.search(r'<a xlink:href="/project\?project=shop&amp;agent=crush"', figure(overview, "cost-by-project"))

    project = browse(urljoin(dashboard, projects["shop"]), tab)
    assert "project shop" in project
    sessions = table_links(project, "sessions")
    roots = query(read_only_lake, "SELECT session_id, cost_usd FROM session_summary WHERE project = 'shop' "
                                  "ORDER BY cost_usd DESC NULLS LAST, started_at DESC")
    assert len(sessions) == len(roots)  # all shown: fewer than the top 15
    assert f"all {len(roots)} shown" in project
    screenshot(urljoin(dashboard, projects["shop"]), tab, tmp_path, "project")

    top = urljoin(dashboard, sessions[0][1])  # the most expensive: R, $1.0 with its sub-agent
    assert roots[0][0] == "R" and "id=R" in top
    session = browse(top, tab)
    assert "session two days" in session and "$1.0000 (native)" in session
    transcript = re.search(r'<div id="transcript">(.*)</div>', session, re.S).group(1)
    calls = re.findall(r'<div class="call tool-call"><b>([^<]+)</b> <code>([^<]*)</code> · (.*?) ·', transcript)
    expected = query(read_only_lake, "SELECT tool_name, command, file_path, is_error, exit_code FROM tool_calls "
                                     "WHERE session_id = 'R' AND has_call ORDER BY called_at")
    assert [c[0] for c in calls] == [e[0] for e in expected]
    for (name, shown, status), (_, command, path, is_error, exit_code) in zip(calls, expected):
        assert html.unescape(shown) == (command or path)
        if is_error:
            assert "tool error" in status
        elif exit_code:
            assert f"exit code {exit_code}" in status
        else:
            assert "ok" in status
    messages = scalar(read_only_lake, "SELECT COUNT(*) FROM messages WHERE session_id = 'R'")
    assert f"Transcript ({messages} messages)" in session
    # the tree's figures, as session_summary has them: the tool calls' count showed the calls' rows
    root_facts = dict(re.findall(r"<tr><th>([^<]*)</th><td>([^<]*)</td></tr>",
                                 session.split('id="session-facts"')[1].split("</table>")[0]))
    summary = query(read_only_lake, "SELECT messages, tool_calls, tool_errors FROM session_summary "
                                    "WHERE session_id = 'R'")[0]
    assert (root_facts["messages (with sub-agents)"], root_facts["tool calls (with sub-agents)"],
            root_facts["tool errors"]) == tuple(str(v) for v in summary), root_facts
    assert "old_string not found" in transcript  # the failed edit's result is there
    subagents = table_links(session, "subagents")
    assert [s[0] for s in subagents] == ["a1$$call-sub"]
    screenshot(top, tab, tmp_path, "session")
    sub = browse(urljoin(dashboard, subagents[0][1]), tab)
    assert "sub-agent of" in sub and "$0.3000" in sub
    # the facts only its root's summary has are left out, not shown empty (a trial's blank duration)
    shown = sub.split('id="session-facts"')[1].split("</table>")[0]
    facts = dict(re.findall(r"<tr><th>([^<]*)</th><td>([^<]*)</td></tr>", shown))
    assert "started (UTC)" in facts and "duration" not in facts and "messages (with sub-agents)" not in facts, facts
    assert all(facts.values()), facts


def chart_links(dom: str) -> list[str]:
    """The link of every linked mark in the page's charts (SVG anchors), as the browser follows it."""
    return [html.unescape(h) for h in re.findall(r'<a xlink:href="([^"]*)"', dom)]


def test_every_chart_mark_links_to_a_page_or_nowhere(dashboard, tab):
    """Issue 32, item 11: a bar without a page (a model, a tool, an "others" row) linked to `null`,
    a 404. Each mark links where its row does (a project's bar to its project page, as the projects
    table's row), or is drawn without a link; every link the charts hold answers a page."""
    import urllib.request

    pages = {url: browse(dashboard + url, tab)
             for url in ("", "?top=1", "project?project=shop", "project?project=shop&top=1")}
    links = {link for dom in pages.values() for link in chart_links(dom)}
    assert links and "null" not in links
    for link in links:
        assert urllib.request.urlopen(urljoin(dashboard, link), timeout=30).status == 200, link
    overview = pages[""]
    # no table row lists a model or a tool with a link: their bars are drawn, linked nowhere
    for fig in ("cost-by-model", "tool-usage"):
        assert bar_labels(figure(overview, fig)) and "<a " not in figure(overview, fig), fig
    assert "<a " not in figure(pages["project?project=shop"], "cost-over-time")  # by model
    # a project's bar goes to the project its table row goes to; the "others" bar nowhere
    rows = dict(table_links(pages["?top=1"], "projects"))
    by_project = figure(pages["?top=1"], "cost-by-project")
    assert "others (1)" in by_project
    assert {re.sub(r"&agent=[^&]*", "", link) for link in chart_links(by_project)} == {rows["shop"]}
    assert len(chart_links(by_project)) == 1 == len(bar_labels(by_project)) - 1


def test_a_cost_without_a_model_is_named_as_the_report_names_it(dashboard, read_only_lake, tab):
    """Issue 32, item 12: a cost no model is recorded for (Q's: a session without an assistant
    message) was drawn as "(session-level)", a blank in the report. Both say it in the words of
    warehouse.serve.labels: the chart's bar, the project page's series and the insights."""
    from tests.conftest import query
    from warehouse.serve.labels import NO_MODEL

    nameless = query(read_only_lake, "SELECT provider, SUM(cost_usd) FROM daily_costs WHERE model IS NULL "
                                     "GROUP BY 1 ORDER BY 1")
    assert nameless
    by_model = bar_labels(figure(browse(dashboard, tab), "cost-by-model"))
    for provider, cost in nameless:
        assert any(f"label: {NO_MODEL} · {provider}; value: ${float(cost):,.4f}" in a for a in by_model), provider
    project = browse(dashboard + "project?project=shop", tab)
    assert f"model: {NO_MODEL} · crush" in figure(project, "cost-over-time")
    assert "session-level" not in project
    idle = insight_section(project, "insight_idle_cost")  # Q: idle, and its models none
    assert f"<td>{NO_MODEL}</td>" in idle


# every cell of the insight tables as Chromium lays it out: (table, column, text, text-align)
INSIGHT_CELLS = """[...document.querySelectorAll('#insights table')].flatMap(t => {
  const heads = [...t.querySelectorAll('th')].map(h => h.textContent);
  return [...t.querySelectorAll('tbody tr')].filter(r => r.children.length === heads.length)
    .flatMap(r => [...r.children].map((td, i) => [t.id, heads[i], td.textContent, getComputedStyle(td).textAlign]));
})"""


def test_insight_tables_write_each_kind_of_number_alike_and_right_aligned(dashboard, tab):
    """Issue 32, item 13: the insight tables showed a cost as `0.3000` (no `$`), a token growth as
    `13,487.0000`, everything left-aligned, where the projects table has `$` and right-aligned
    numbers. Each column is written by its kind: money `$0.0000`, counts and tokens whole with
    thousands separators, ratios with 3 decimals; numbers right-aligned, text left."""
    assert tab.load(dashboard + "?top=0") is None
    cells = tab.call("Runtime.evaluate", expression=INSIGHT_CELLS, returnByValue=True)["result"]["value"]
    kinds = set()
    for table_id, column, text, align in cells:
        if not text:
            continue
        if column.endswith("_usd"):
            kind, pattern = "money", r"\$[0-9,]+\.[0-9]{4}"
        elif column.endswith(("_ratio", "_share")):
            kind, pattern = "ratio", r"[0-9,]+\.[0-9]{3}"
        elif re.fullmatch(r"[0-9,]+", text):
            kind, pattern = "count", r"[0-9]{1,3}(,[0-9]{3})*"
        else:
            kind, pattern = "text", r".*"
        kinds.add(kind)
        assert re.fullmatch(pattern, text), (table_id, column, text)
        assert align == ("left" if kind == "text" else "right"), (table_id, column, text, align)
    assert kinds == {"money", "ratio", "count", "text"}


def test_an_insight_cell_is_written_by_its_columns_kind():
    """The kinds, on the figures the demo showed: a growth in tokens per request is whole."""
    from decimal import Decimal

    from warehouse.serve.dashboard.pages import _cell

    assert _cell(13487.0, "growth_per_request") == "13,487"
    assert _cell(17038, "max_context_tokens") == "17,038"
    assert _cell(Decimal("0.006812345"), "cost_usd") == "$0.0068"
    assert _cell(Decimal("1234.5"), "subagent_cost_usd") == "$1,234.5000"
    assert _cell(0.767, "cache_read_share") == "0.767" and _cell(0.17, "read_edit_ratio") == "0.170"
    assert _cell(None, "cost_after_compaction_usd") == "" and _cell("shop", "project") == "shop"


def test_the_curated_insights_round_their_ratios_to_the_decimals_the_page_shows():
    """The page writes a ratio with 3 decimals: a query that rounded 2/3 to 0.67 was shown as
    0.670, a precision it did not have (a new user's trial); `report --insights` prints the same."""
    from warehouse.serve.dashboard.pages import _cell
    from warehouse.serve.report import INSIGHTS

    rounded = [(i.mart, digits) for i in INSIGHTS for digits in re.findall(r",\s*(\d+)\)\s+AS\s", i.sql)]
    assert ("insight_read_edit_ratio", "3") in rounded and {d for _, d in rounded} == {"3"}, rounded
    assert _cell(round(2 / 3, 3), "read_edit_ratio") == "0.667"


def about(dom: str) -> str:
    """The line under a page's title saying whose data it shows and when it was last merged."""
    return html.unescape(re.sub(r"<[^>]+>", "", re.search(r'<p [^>]*id="about-data"[^>]*>(.*?)</p>', dom, re.S)[1]))


def test_every_page_says_when_the_warehouse_was_last_merged_and_if_its_data_is_the_demos(layout, tmp_path, tab,
                                                                                           dashboard):
    """Issue 32, item 15: nothing on the dashboard said its figures were the quickstart's generated
    demo, nor how old they were. Every page says when the last merge changed the warehouse (a
    compaction after it reorganises files, changes no row: not a merge), and, where the stores read
    are the ones `agentlake demo` writes (under `demo-data`, warehouse.land.demo_home), that its
    sessions are generated."""
    from datetime import datetime, timezone

    from tests.conftest import ingest, query, run_cli
    from transforms.synth.crush import generate_store
    from warehouse.land.demo_home import DEMO_DATA

    def merged_at(said):
        return datetime.strptime(re.search(r"last merged (\S+ \S+) UTC", said)[1], "%Y-%m-%d %H:%M:%S")

    demo = generate_store(tmp_path / DEMO_DATA / "crush", projects=1, sessions_per_project=1, seed=3, days=5).dbs
    before = datetime.now(timezone.utc).replace(microsecond=0, tzinfo=None)
    ingest(layout, *[db.path for db in demo])
    after = datetime.now(timezone.utc).replace(tzinfo=None)
    assert run_cli("compact", "--home", layout.home).returncode == 0
    (project, source, session), = query(layout, "SELECT project, source_id, session_id FROM session_summary LIMIT 1")
    server = serve(layout.warehouse)  # its reader follows each catalog a merge publishes
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        for path in ("", f"project?project={project}", f"session?source={source}&id={session}",
                     "insight?name=insight_idle_cost"):
            said = about(browse(base + path, tab))
            assert "generated by agentlake demo" in said and before <= merged_at(said) <= after, (path, said)
    finally:
        server.shutdown()
        server.server_close()
    known = about(browse(dashboard, tab))  # the agents' own stores only
    assert "demo" not in known.lower() and merged_at(known)


def test_a_missing_session_says_so(dashboard, tab):
    dom = browse(dashboard + "session?source=x&id=nope", tab)
    assert "no such session in this lake: source 'x', id 'nope'" in dom
    # named by half, or not at all: what names one, never Python's None (a trial)
    for query, said in (("session", "none named"), ("session?id=nope", "id 'nope'")):
        dom = browse(dashboard + query, tab)
        assert f"no such session in this lake: {said} (a session is named by key=, or by source= and id=)" in dom
        assert "None" not in dom.split('id="filter-errors"')[1].split("</div>")[0]


@pytest.fixture
def twenty(tmp_path):
    """A lake of 20 projects (the generator's real Crush stores), to cut to the top 15."""
    from tests.conftest import ingest
    from transforms.synth.crush import generate_store
    from warehouse.lake.layout import Layout

    truth = generate_store(tmp_path / "crush", projects=20, sessions_per_project=2, seed=3, days=40)
    layout = Layout.resolve(home=tmp_path / "home20", machine="laptop", user="dev")
    ingest(layout, *[db.path for db in truth.dbs])
    return layout


def test_twenty_projects_cut_to_fifteen_and_others(twenty, tab):
    from tests.conftest import query

    server = serve(twenty.warehouse)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        dom = browse(base, tab)
        ranked = query(twenty, "SELECT project, SUM(cost_usd) AS c FROM daily_costs GROUP BY 1 "
                               "ORDER BY c DESC NULLS LAST, project")
        assert len(ranked) == 20
        assert [t for t, _ in table_links(dom, "projects")] == [p for p, _ in ranked[:15]]
        assert "15 of 20 shown, 5 in others" in dom
        others = re.search(r'<tr class="others">(.*?)</tr>', dom, re.S).group(1)
        rest = sum(float(c) for _, c in ranked[15:])
        assert "others (5 projects)" in others and f"${rest:,.4f}" in others
        # the time chart: ten projects in ten distinct colours, the other ten in grey "others (10)"
        over_time = figure(dom, "cost-over-time")
        assert "Symbol legend titled 'project' for fill color with 11 values" in over_time
        assert "others (10)" in over_time and "projects: 10 of 20 shown, 10 in others" in dom
        from warehouse.serve.dashboard.charts import OTHERS_COLOR, PALETTE

        assert len(set(PALETTE)) == 10 and OTHERS_COLOR not in PALETTE
        drawn = set(re.findall(r'fill="(#[0-9a-f]{6})"', over_time))
        assert set(PALETTE) <= drawn and OTHERS_COLOR in drawn
        by_project = figure(dom, "cost-by-project")
        assert "15 of 20 shown, 5 in others" in by_project
        # ?top=0 shows every row, and says so
        every = browse(base + "?top=0", tab)
        assert len(table_links(every, "projects")) == 20 and "all 20 shown" in every
    finally:
        server.shutdown()
        server.server_close()


def insight_section(dom: str, name: str) -> str:
    return re.search(rf'<div class="insight" id="{name}">(.*?)</div>', dom, re.S).group(1)


def test_insights_that_exist_are_shown_and_the_rest_skipped(lake, tab, tmp_path):
    """Each insight mart in the lake is shown with its top findings (up to 5, and how many there
    are) and a link to the SQL that gives them all, which runs as shown; an insight that is not in
    the lake is listed as missing, without error. Every finding's link leads to a page."""
    import urllib.request

    from tests.conftest import query
    from warehouse.lake import ducklake
    from warehouse.serve.dashboard.request import INSIGHT_ROWS, INSIGHTS

    with ducklake.writing(lake.warehouse) as con:
        con.execute("DROP TABLE IF EXISTS insight_usage_blocks")  # as if its mart did not exist yet
    present = [n for n in INSIGHTS if query(lake, "SELECT COUNT(*) FROM information_schema.tables "
                                                  "WHERE table_name = ?", n)[0][0]]
    assert "insight_usage_blocks" not in present
    server = serve(lake.warehouse)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        dom = browse(base, tab)
        assert "Not in this lake yet: insight_usage_blocks" in dom
        for name in present:
            section = insight_section(dom, name)
            page = browse(urljoin(base, html.unescape(re.search(r'href="(/insight\?name=[^"]+)"', section).group(1))),
                          tab)
            sql = html.unescape(re.search(r'<pre id="insight-sql">(.*?)</pre>', page, re.S).group(1))
            every = query(lake, sql)  # the SQL shown runs as it is, and gives what the page counts
            assert f"{min(len(every), INSIGHT_ROWS)} of {len(every)} findings shown" in section, name
            for _, link in table_links(section, f"{name}-table"):
                assert urllib.request.urlopen(urljoin(base, link), timeout=30).status == 200, link
        screenshot(base + f"insight?name={present[0]}", tab, tmp_path, "insight")
    finally:
        server.shutdown()
        server.server_close()


def test_an_insight_without_a_curated_query_shows_its_rows_by_cost(lake, tab, monkeypatch):
    """An insight mart the report has no query for yet: its rows, costliest first, each linked to
    its session by the lake-wide session_key (machine/user/provider/source_id/session_id)."""
    from tests.conftest import query
    from warehouse.serve.dashboard import pages
    from warehouse.lake import ducklake

    monkeypatch.setattr(pages, "curated", lambda name: None)
    keys = dict(query(lake, "SELECT session_id, concat_ws('/', machine, \"user\", provider, source_id, session_id) "
                            "FROM sessions WHERE session_id IN ('R', 'S')"))
    with ducklake.writing(lake.warehouse) as con:
        con.execute("DROP TABLE IF EXISTS insight_duplicate_reads")
        con.execute("CREATE TABLE insight_duplicate_reads AS SELECT * FROM (VALUES "
                    "('shop', ?, 'a.py', 3, 0.25), ('shop', ?, 'b.py', 2, 0.5)) "
                    "AS t(project, session_key, path, reads, wasted_cost_usd)", [keys["R"], keys["S"]])
    server = serve(lake.warehouse)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        section = insight_section(browse(base, tab), "insight_duplicate_reads")
        links = table_links(section, "insight_duplicate_reads-table")
        # S's $0.50 before R's $0.25, each linked from its session cell (the key's session id)
        assert [t for t, _ in links] == ["S", "R"] and "2 of 2 findings shown" in section
        assert "session thirds" in browse(urljoin(base, links[0][1]), tab)  # S, by its key
        assert "session two days" in browse(urljoin(base, links[1][1]), tab)
        page = browse(base + "insight?name=insight_duplicate_reads", tab)
        sql = html.unescape(re.search(r'<pre id="insight-sql">(.*?)</pre>', page, re.S).group(1))
        assert sql == 'SELECT * FROM "insight_duplicate_reads" ORDER BY "wasted_cost_usd" DESC NULLS LAST'
    finally:
        server.shutdown()
        server.server_close()


def test_token_once_then_the_cookie_in_a_real_browser(lake, tab):
    """A dashboard with a token: Chromium without it gets the 401 page; with `?token=` once it is
    redirected to the page (token gone from the URL) and the cookie carries it from then on."""
    server = serve(lake.warehouse, token="tok-123")
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        assert "needs its token" in browse(url, tab)
        assert "Total cost" not in browse(url, tab)
        dom = browse(url + "project?project=shop&provider=crush&token=tok-123", tab)
        assert "Total cost: $1.3000" in dom and "project shop" in dom  # the same page, token gone
        assert len(bar_labels(figure(dom, "cost-over-time"))) > 0
        dom = browse(url + "?agent=crush", tab)  # same profile: the cookie is enough now
        assert "Total cost: $1.3000" in dom
    finally:
        server.shutdown()
        server.server_close()


def test_a_merge_shows_on_the_next_reload(lake):
    """Pages are kept between requests, but a new catalog (every merge publishes one) is a new
    page: here an insight mart dropped by a writer disappears from the very next response."""
    import urllib.request

    from warehouse.lake import ducklake

    server = serve(lake.warehouse)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        first = urllib.request.urlopen(base, timeout=30).read().decode()
        assert urllib.request.urlopen(base, timeout=30).read().decode() == first
        assert 'id="insight_idle_cost"' in first
        with ducklake.writing(lake.warehouse) as con:
            con.execute("DROP TABLE insight_idle_cost")
        after = urllib.request.urlopen(base, timeout=30).read().decode()
        assert 'id="insight_idle_cost"' not in after and "insight_idle_cost" in after  # listed as missing
    finally:
        server.shutdown()
        server.server_close()


def test_a_claude_transcript_shows_each_request_cost(layout, tab, tmp_path):
    """Claude Code records usage per request: the transcript puts each message's priced cost
    next to it, the sum of its `usage` rows (an unpriced request leaves the message without one)."""
    import urllib.request

    from tests.conftest import ingest, query
    from transforms.synth.claude import generate_home

    generate_home(tmp_path / "claude", sessions=4, seed=5)
    ingest(layout, homes={"claude": [tmp_path / "claude"]})
    source, session = query(layout, "SELECT source_id, session_id FROM session_summary WHERE provider = 'claude' "
                                     "AND cost_usd IS NOT NULL ORDER BY cost_usd DESC LIMIT 1")[0]
    costs = query(layout, "SELECT m.message_index, SUM(u.cost_usd) FROM usage u JOIN messages m "
                          "USING (source_id, session_id, message_id) WHERE u.source_id = ? AND u.session_id = ? "
                          "GROUP BY 1 HAVING SUM(u.cost_usd) IS NOT NULL ORDER BY 1", source, session)
    assert costs
    server = serve(layout.warehouse)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/session?source={source}&id={session}"
        dom = urllib.request.urlopen(url, timeout=30).read().decode()
        shown = {int(i): c for i, c in re.findall(r'<div class="msg [a-z]+" id="m(\d+)"><div class="meta">[^<]*'
                                                  r'· cost \$([0-9.,]+)</div>', dom)}
        assert shown == {index: f"{float(cost):,.4f}" for index, cost in costs}
        assert "records no per-request usage" not in dom
        screenshot(url, tab, tmp_path, "claude-session")
    finally:
        server.shutdown()
        server.server_close()


def test_top_with_others_sums_the_rest_and_keeps_unknown_unknown():
    """The others row sums what the cut left out, by hand: 3 + 2 = 5 and 30 + 20 = 50; a column
    whose left-out values are all unknown stays unknown (None), never $0."""
    from warehouse.serve.dashboard.charts import top_with_others

    rows = [("a", 10, 100, None), ("b", 5, 50, None), ("c", 3, 30, None), ("d", 2, 20, None)]
    cut = top_with_others(rows, 2)
    assert cut.rows == rows[:2] and cut.others == ("others (2)", 5.0, 50.0, None)
    assert cut.note == "2 of 4 shown, 2 in others"
    assert top_with_others(rows, 4).others is None and top_with_others(rows, 4).note == "all 4 shown"
    assert top_with_others(rows, 0).note == "all 4 shown"  # 0: no cut


def test_one_connection_per_catalog_file(lake):
    """Requests share a read-only connection while the catalog file is the same, and get a new
    one as soon as a merge publishes another (whose tables they then see)."""
    from warehouse.lake import ducklake
    from warehouse.serve.dashboard.server import Reader

    reader = Reader(lake.warehouse)
    with reader.cursor() as cur:
        assert cur.execute("SELECT COUNT(*) FROM daily_costs").fetchall()[0][0] > 0
    first = reader.con
    reader.cursor().close()
    assert reader.con is first
    with ducklake.writing(lake.warehouse) as con:
        con.execute("CREATE TABLE dashboard_probe AS SELECT 42 AS answer")
    with reader.cursor() as cur:
        assert cur.execute("SELECT answer FROM dashboard_probe").fetchall() == [(42,)]
    assert reader.con is not first


def test_the_same_session_on_two_machines_links_to_each(tmp_path):
    """A team lake holds the same store (so the same source and session ids) from two machines:
    the project page links each row to its own machine's session, which shows that one."""
    import sqlite3
    from urllib.request import urlopen

    from tests.conftest import ingest, ingest_tables, query
    from transforms.synth.crush import generate_store
    from warehouse.lake.layout import Layout

    db = generate_store(tmp_path / "crush", projects=1, sessions_per_project=1, seed=3, days=5).dbs[0].path
    lake = tmp_path / "shared-lake"
    # a's own warehouse is never read here: its store lands in the lake, its marts are not needed
    ingest_tables(Layout.resolve(home=tmp_path / "a", lake=lake, machine="laptop-a", user="dev"), db)
    with sqlite3.connect(db) as con:  # the second machine's copy of the store differs in its titles
        con.execute("UPDATE sessions SET title = 'seen on b'")
    reader = Layout.resolve(home=tmp_path / "b", lake=lake, machine="laptop-b", user="dev")
    ingest(reader, db)  # lands b's copy, and merges both machines'
    (project,), = query(reader, "SELECT DISTINCT project FROM sessions")
    server = serve(reader.warehouse)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        page = urlopen(f"{base}/project?project={project}").read().decode()
        rows = re.findall(r'<td[^>]*><a href="([^"]+)">([^<]*)</a>', re.search(
            r'<table id="sessions">(.*?)</table>', page, re.S).group(1))
        by_machine = {}
        for href, _ in rows:
            href = html.unescape(href)
            machine = re.search(r"machine=([^&]+)", href).group(1)
            by_machine.setdefault(machine, []).append(href)
        assert set(by_machine) == {"laptop-a", "laptop-b"}
        for machine, hrefs in by_machine.items():
            for href in hrefs:
                session = urlopen(base + href).read().decode()
                assert ("seen on b" in session) == (machine == "laptop-b"), (machine, href)
    finally:
        server.shutdown()
        server.server_close()
