"""The dashboard a team lead takes away (issue 34): windows a click sets (the last 7, 30 and 90
days, this month, relative to today's UTC date), bars per day, week or month, every table sorted by
a column header's link and downloaded as CSV. On the known-totals lake (conftest's `lake`: one
project, January 1-7 2026); every figure is checked against the lake's own tables."""

import csv
from contextlib import closing
import html
import io
import re
import urllib.error
import urllib.request
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from urllib.parse import urljoin

import pytest

from tests.conftest import query
from tests.support_dashboard_built import lake_copy, shared_chromium
from warehouse.serve.dashboard import page_parts
from warehouse.serve.dashboard.server import running
from warehouse.serve.labels import label

DATA_FIRST, DATA_LAST = date(2026, 1, 1), date(2026, 1, 7)


@pytest.fixture(scope="module")
def lake_ro(built_once):
    """A copy of the known-totals lake, only read by this module's tests."""
    return lake_copy(built_once, "dashboard-takeaway")


@pytest.fixture(scope="module")
def dashboard(lake_ro):
    """One server for the module's tests, whose kept pages they share as visitors do: a page is
    kept under the day it was drawn on, so a test that moves today is drawn its own pages."""
    with running(lake_ro.warehouse, port=0) as url:
        yield url


def get(url: str) -> tuple[int, str, dict]:
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            return answer.status, answer.read().decode(), dict(answer.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


def text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


def part(page: str, pattern: str) -> str:
    found = re.search(pattern, page, re.S)
    assert found, pattern
    return found.group(1)


def anchors(fragment: str) -> dict[str, str]:
    """Link text -> href."""
    return {text(t).strip(): html.unescape(h) for h, t in re.findall(r'<a[^>]*href="([^"]+)"[^>]*>(.*?)</a>', fragment)}


def rows(page: str, table_id: str) -> list[list[str]]:
    body = part(page, rf'<table id="{table_id}">.*?<tbody>(.*?)</tbody>')
    return [[text(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
            for r in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]


def errors(page: str) -> str:
    return text(part(page, r'<div class="errors" id="filter-errors">(.*?)</div>'))


def bars(page: str) -> list[str]:
    svg = part(page, r'<figure id="cost-over-time"[^>]*>(.*?)</figure>')
    return [html.unescape(a) for a in re.findall(r'<path[^>]*aria-label="([^"]*)"', svg)]


def read_csv(body: str) -> tuple[list[str], list[list[str]]]:
    lines = list(csv.reader(io.StringIO(body)))
    return lines[0], lines[1:]


def cell(value) -> str:
    """A value as the CSV writes it (warehouse.serve.formatting): exact, a DECIMAL from its digits."""
    if value is None:
        return ""
    if isinstance(value, Decimal):
        digits = format(value, "f")
        return (digits.rstrip("0").rstrip(".") if "." in digits else digits) or "0"
    return str(value)


# --- windows and grain


@pytest.mark.parametrize("grain, start", [("day", "day"), ("week", "week"), ("month", "month")])
def test_the_grain_sets_one_bar_per_period(dashboard, lake_ro, grain, start):
    status, page, _ = get(dashboard + f"?grain={grain}")
    assert status == 200 and "filter-errors" not in page
    expected = query(lake_ro, f"SELECT CAST(date_trunc('{start}', date) AS DATE), project, SUM(cost_usd) FROM "
                              "daily_costs GROUP BY ALL HAVING SUM(cost_usd) IS NOT NULL")
    drawn = bars(page)
    assert len(drawn) == len(expected)
    for first, project, cost in expected:
        assert any(f"project: {project};" in b and f"from: {first}; cost: ${float(cost):,.4f}" in b
                   for b in drawn), first
    assert f"one bar per {grain}" in page and f"one bar per {grain} (by the span)" not in page
    toggle = part(page, r'<p class="toggle" id="grain">(.*?)</p>')
    assert f'<b aria-current="true">{grain}</b>' in toggle
    assert anchors(toggle)["by the span"] == "/"  # back to the default, nothing else changed
    assert re.search(rf'<select name="grain">.*?<option value="{grain}" selected>', page, re.S)


def test_without_a_grain_the_span_picks_it_and_a_bad_one_is_named(dashboard):
    _, default, _ = get(dashboard)
    assert "one bar per day (by the span)" in default  # a week of data: days
    status, page, _ = get(dashboard + "?grain=hour")
    assert status == 400
    assert "grain: 'hour' is not one of day, week, month; the bars follow the span" in errors(page)
    assert bars(page) == bars(default) and "one bar per day (by the span)" in page
    status, page, _ = get(dashboard + "?grain=WEEK")  # in any case, as the other filters (a trial)
    assert status == 200 and "one bar per week" in page and "one bar per week (by the span)" not in page


def windows(today: date) -> dict[str, tuple[str, str] | None]:
    return {"last 7 days": (str(today - timedelta(days=6)), str(today)),
            "last 30 days": (str(today - timedelta(days=29)), str(today)),
            "last 90 days": (str(today - timedelta(days=89)), str(today)),
            "this month": (str(today.replace(day=1)), str(today)), "all days": None}


def window_of(href: str) -> tuple[str, str] | None:
    found = dict(re.findall(r"(since|until)=([0-9-]+)", href))
    return (found["since"], found["until"]) if found else None


def test_the_presets_end_today_utc_and_an_empty_window_says_so(dashboard, lake_ro):
    today = datetime.now(timezone.utc).date()
    _, page, _ = get(dashboard + "?agent=crush&grain=week")
    presets = part(page, r'<p class="presets" id="presets">(.*?)</p>')
    assert f"today is {today}" in text(presets)
    links = anchors(presets)
    assert '<b aria-current="true">all days</b>' in presets and "all days" not in links  # the page's own window
    expected = windows(today)
    assert {k: window_of(v) for k, v in links.items()} == {k: v for k, v in expected.items() if v}
    assert all("agent=crush" in h and "grain=week" in h for h in links.values())  # the other choices kept
    # the demo's data lies in the past: the last 7 days hold none, and the page says where data is
    status, week, _ = get(urljoin(dashboard, links["last 7 days"]))
    assert status == 200 and '<b aria-current="true">last 7 days</b>' in week
    empty = text(part(week, r'<p class="empty" id="empty-window">(.*?)</p>'))
    first, last = query(lake_ro, "SELECT MIN(date), MAX(date) FROM daily_costs WHERE provider = 'crush'")[0]
    assert f"No data in {expected['last 7 days'][0]} – {today} (UTC days) for these filters" in empty
    assert f"their data runs from {first} to {last}" in empty
    recent = anchors(part(week, r'<p class="empty" id="empty-window">(.*?)</p>'))[f"the 30 days to {last}"]
    assert window_of(recent) == (str(last - timedelta(days=29)), str(last)) and "agent=crush" in recent
    status, back, _ = get(urljoin(dashboard, recent))
    assert status == 200 and "empty-window" not in back and bars(back)
    # a day after today: said, as the report says it (a dashboard trial took it for a mistyped one)
    ahead = today + timedelta(days=400)
    _, later, _ = get(dashboard + f"?since={ahead}")
    assert f"No data in {ahead} – the last day (since {ahead} is after today, {today}) (UTC days)" in \
        text(part(later, r'<p class="empty" id="empty-window">(.*?)</p>'))


def test_a_preset_relative_to_a_today_within_the_data(dashboard, lake_ro, monkeypatch):
    monkeypatch.setattr(page_parts, "today", lambda zone="UTC": DATA_LAST)
    _, page, _ = get(dashboard)
    week = anchors(part(page, r'<p class="presets" id="presets">(.*?)</p>'))["last 7 days"]
    assert window_of(week) == (str(DATA_FIRST), str(DATA_LAST))
    _, shown, _ = get(urljoin(dashboard, week))
    total = query(lake_ro, "SELECT SUM(cost_usd) FROM daily_costs WHERE date BETWEEN ? AND ?", DATA_FIRST, DATA_LAST)
    assert f"Total cost: ${float(total[0][0]):,.4f}" in shown and "empty-window" not in shown
    month = anchors(part(page, r'<p class="presets" id="presets">(.*?)</p>'))["this month"]
    assert window_of(month) == ("2026-01-01", "2026-01-07")


# --- tables you can take away: CSV


RANKING_SQL = """
    WITH c AS (SELECT {key} AS k, SUM(cost_usd) AS cost FROM daily_costs WHERE date BETWEEN ? AND ? GROUP BY 1),
         s AS (SELECT {key} AS k, COUNT(*) AS n, SUM(messages) AS m, SUM(tool_calls) AS t,
                      SUM(failed_tool_calls) AS f FROM session_summary
               WHERE CAST(started_at AS DATE) BETWEEN ? AND ? GROUP BY 1)
    SELECT k, COALESCE(n, 0), COALESCE(m, 0), COALESCE(t, 0), COALESCE(f, 0), cost FROM c FULL JOIN s USING (k)"""


@pytest.mark.parametrize("table, key", [("projects", "project"), ("users", '"user"')])
def test_a_ranking_as_csv_holds_every_row_with_exact_figures(dashboard, lake_ro, table, key):
    since, until = "2026-01-02", "2026-01-07"
    page_url = dashboard + f"?since={since}&until={until}&top=0"
    _, page, _ = get(page_url)
    link = anchors(part(page, rf'<p class="cut takeaway" id="{table}-takeaway">(.*?)</p>'))
    href = next(h for t, h in link.items() if t.startswith("CSV of all"))
    assert f"table={table}" in href and f"since={since}" in href and "top=" not in href
    status, body, headers = get(urljoin(dashboard, href))
    assert status == 200 and headers["Content-Type"] == "text/csv; charset=utf-8"
    assert headers["Content-Disposition"] == f'attachment; filename="agentlake-{table}-{since}-to-{until}.csv"'
    columns, got = read_csv(body)
    assert columns == [key.strip('"'), "agents" if table == "projects" else "machines", "sessions_started",
                       "messages", "tool_calls", "failed_calls", "cost_usd", "cost_sources"]
    expected = query(lake_ro, RANKING_SQL.format(key=key), since, until, since, until)
    assert sorted((r[0], *r[2:7]) for r in got) == sorted(tuple(cell(v) for v in r) for r in expected)
    assert [r[0] for r in rows(page, table)] == [r[0] for r in got]  # the table's rows, in its order


def test_the_csv_holds_every_row_not_the_top_n_and_in_the_tables_order(dashboard, lake_ro):
    """A project's sessions, cut to 2 on the page: the CSV has them all, sorted as the page is."""
    _, page, _ = get(dashboard + "project?project=shop&top=2&sort=sessions:messages:desc")
    assert rows(page, "sessions")[-1][0].startswith("others (")
    href = anchors(part(page, r'<p class="cut takeaway" id="sessions-takeaway">(.*?)</p>'))
    status, body, headers = get(urljoin(dashboard, next(h for t, h in href.items() if t.startswith("CSV"))))
    assert status == 200 and 'filename="agentlake-sessions-shop.csv"' in headers["Content-Disposition"]
    columns, got = read_csv(body)
    expected = query(lake_ro, "SELECT session_id, messages, cost_usd FROM session_summary WHERE project = 'shop'")
    assert sorted(r[columns.index("session_id")] for r in got) == sorted(r[0] for r in expected)
    counts = [int(r[columns.index("messages")]) for r in got]
    assert counts == sorted((r[1] for r in expected), reverse=True)
    costs = {r[0]: cell(r[2]) for r in expected}  # exact, not the page's 4 decimals
    assert all(r[columns.index("cost_usd")] == costs[r[columns.index("session_id")]] for r in got)
    # the page's two rows are the CSV's first two
    shown = [r[1] for r in rows(page, "sessions")[:2]]
    assert shown == [r[columns.index("title")] for r in got[:2]]


def test_an_insight_as_csv_is_its_sql_with_the_hidden_columns(dashboard, lake_ro):
    _, page, _ = get(dashboard + "insight?name=insight_idle_cost&until=2026-01-05&top=1")
    sql = html.unescape(part(page, r'<pre id="insight-sql">(.*?)</pre>'))
    href = anchors(part(page, r'<p class="cut takeaway" id="insight_idle_cost-takeaway">(.*?)</p>'))
    status, body, _ = get(urljoin(dashboard, next(h for t, h in href.items() if t.startswith("CSV"))))
    assert status == 200
    columns, got = read_csv(body)
    expected = query(lake_ro, sql)
    assert len(expected) > 1 and len(rows(page, "insight_idle_cost-table")) == 1  # the page shows one
    assert columns == ["project", "models", "sessions", "cost_usd"] and got == [[cell(v) for v in r] for r in expected]


@pytest.mark.parametrize("params, message, status", [
    ("table=nope", "table: 'nope' is not one of the dashboard's tables", 404),
    ("table=sessions", "table sessions: a project's sessions; choose the project", 400),
    ("table=projects&since=2026-02-30", "since: '2026-02-30' is not a date", 400),
    ("table=projects&sort=projects:nope", "sort: projects has no column 'nope'", 400),
])
def test_a_bad_csv_request_gets_a_page_that_names_it(dashboard, params, message, status):
    got, page, headers = get(dashboard + "csv?" + params)
    assert got == status and headers["Content-Type"].startswith("text/html")
    assert message in errors(page)


# --- sorting


def test_a_column_header_sorts_its_table_and_the_next_click_reverses(dashboard, lake_ro):
    _, page, _ = get(dashboard + "project?project=shop")
    head = part(page, r'<table id="sessions"><thead>(.*?)</thead>')
    titles = anchors(head)
    assert set(titles) == {"started (UTC)", "title", "agent", "duration", "messages", "tool calls", "failed calls",
                           "sub-agents", "models", "cost", "cost source"}
    assert "sort=sessions%3Amessages%3Adesc" in titles["messages"]  # a number: largest first
    assert "sort=sessions%3Atitle%3Aasc" in titles["title"]  # text: from A
    expected = query(lake_ro, "SELECT title, messages, duration_s FROM session_summary WHERE project = 'shop'")
    _, by_messages, _ = get(urljoin(dashboard, titles["messages"]))
    assert [int(r[4]) for r in rows(by_messages, "sessions")] == sorted((r[1] for r in expected), reverse=True)
    again = anchors(part(by_messages, r'<table id="sessions"><thead>(.*?)</thead>'))
    assert "messages ▼" in again and "sort=sessions%3Amessages%3Aasc" in again["messages ▼"]
    _, by_title, _ = get(urljoin(dashboard, titles["title"]))
    # text from A in any case, a session without a title last (it came first, as "(untitled)": a trial)
    titled = sorted((r[0] for r in expected if r[0] is not None), key=str.casefold)
    assert [r[1] for r in rows(by_title, "sessions")] == titled + ["(untitled)"] * (len(expected) - len(titled))
    # the other links keep the order, and the way back to the table's own
    note = part(by_title, r'<p class="cut takeaway" id="sessions-takeaway">(.*?)</p>')
    assert "sorted by title, ascending" in text(note) and "sort=" not in anchors(note)["its own order"]
    assert "sort=sessions%3Atitle%3Aasc" in part(by_title, r'<p class="presets" id="presets">(.*?)</p>')
    assert '<input type="hidden" name="sort" value="sessions:title:asc">' in by_title  # "apply" keeps it


def test_sorted_then_cut_the_top_rows_are_the_first_of_every_row(dashboard, lake_ro):
    _, page, _ = get(dashboard + "project?project=shop&top=3&sort=sessions:duration_s:asc")
    durations = sorted(d for (d,) in query(lake_ro, "SELECT duration_s FROM session_summary WHERE project = 'shop' "
                                                    "AND duration_s IS NOT NULL"))
    shown = rows(page, "sessions")
    assert len(shown) == 4 and shown[-1][0] == "others (3 sessions)"
    assert [r[3] for r in shown[:3]] == [page_parts.duration_text(d) for d in durations[:3]]


@pytest.mark.parametrize("column, direction", [("cost_usd", "asc"), ("sessions", "desc"), ("models", "asc")])
def test_an_insight_table_sorts_in_sql_every_finding(dashboard, lake_ro, column, direction):
    name = "insight_idle_cost"
    _, page, _ = get(dashboard + f"insight?name={name}&top=0")
    columns = list(anchors(part(page, rf'<table id="{name}-table"><thead>(.*?)</thead>')))
    assert column in columns
    _, by_column, _ = get(dashboard + f"insight?name={name}&top=0&sort={name}:{column}:{direction}")
    sql = html.unescape(part(page, r'<pre id="insight-sql">(.*?)</pre>'))
    values = [r[0] for r in query(lake_ro, f"SELECT {column} FROM ({sql})")]
    assert len(values) > 1
    expected = sorted((v for v in values if v is not None), reverse=direction == "desc")
    expected += [v for v in values if v is None]
    got = [r[columns.index(column)] for r in rows(by_column, f"{name}-table")]
    shown = {"cost_usd": lambda v: f"${float(v):,.4f}", "sessions": lambda v: f"{v:,}",
             "models": lambda v: label("models", v)}[column]  # none: said in words, as the report says it
    assert got == [shown(v) for v in expected]
    assert f'ORDER BY "{column}" {direction.upper()} NULLS LAST' in html.unescape(by_column)  # the SQL shown


@pytest.mark.parametrize("sort, message", [
    ("projects", "sort: 'projects' is not <table>:<column>[:asc|desc]; ignored"),
    ("tables:cost", "sort: unknown table 'tables'"),
    ("projects:cost_usd:up", "sort: 'up' in 'projects:cost_usd:up' is neither asc nor desc; ignored"),
    ("projects:price", "sort: projects has no column 'price'"),
    ("insight_idle_cost:price:desc", "sort: insight_idle_cost has no column 'price'"),
])
def test_a_bad_sort_is_named_and_the_table_keeps_its_order(dashboard, sort, message):
    _, plain, _ = get(dashboard)
    status, page, _ = get(dashboard + f"?sort={sort}")
    assert status == 400 and message in errors(page)
    assert rows(page, "projects") == rows(plain, "projects")
    assert rows(page, "insight_idle_cost-table") == rows(plain, "insight_idle_cost-table")
    assert "sort=" not in part(page, r'<p class="toggle" id="grain">(.*?)</p>')  # not carried on


def test_the_overview_with_a_preset_and_a_grain_in_a_real_browser(dashboard, monkeypatch, tmp_path, request):
    """Chromium lays out the window links, the grain toggle over a chart of weekly bars, and the
    tables' CSV links. The screenshot is kept in the test's tmp dir."""
    from tests.support_browser import CHROMIUM

    if not CHROMIUM:
        pytest.skip("no chromium on this machine: apt-get install chromium")
    monkeypatch.setattr(page_parts, "today", lambda zone="UTC": date(2026, 1, 20))  # the last 30 days hold the data
    _, page, _ = get(dashboard)
    url = urljoin(dashboard, anchors(part(page, r'<p class="presets" id="presets">(.*?)</p>'))["last 30 days"])
    url += "&grain=week&sort=projects:cost_usd:desc"
    with closing(shared_chromium(request).context()) as tab:
        tab.call("Emulation.setDeviceMetricsOverride", width=1440, height=1400, deviceScaleFactor=1, mobile=False)
        assert tab.load(url) is None
        boxes = tab.call("Runtime.evaluate", returnByValue=True, expression="""
            ['presets', 'grain', 'cost-over-time', 'projects-takeaway'].map(id => {
                const r = document.getElementById(id).getBoundingClientRect(); return [id, r.top, r.height]; })""")
        boxes = boxes["result"]["value"]
        assert all(b[2] > 10 for b in boxes)  # each drawn
        assert [b[0] for b in sorted(boxes, key=lambda b: b[1])] == [b[0] for b in boxes]  # in that order
        error, dom = tab.dom(url)
        assert error is None and '<b aria-current="true">last 30 days</b>' in dom and "one bar per week" in dom
        assert len(bars(dom)) == 2  # Jan 1-4 (the week of Dec 29) and Jan 5-7
        tab.screenshot(url, tmp_path / "overview-preset-week.png", width=1440, height=1400)
        shot = (tmp_path / "overview-preset-week.png").read_bytes()
        assert shot.startswith(b"\x89PNG\r\n\x1a\n") and len(shot) > 20_000


def test_text_sorts_from_a_in_any_case_and_a_missing_value_last_either_way():
    """A dashboard trial: sessions without a title (shown "(untitled)") came first from A, and
    `Session 4` before `legacy`. The CSV leaves such a title empty, as the report's CSV would."""
    from warehouse.serve.dashboard.page_parts import sort_rows
    from warehouse.serve.dashboard.request import parse_request

    rows = [("Session 4",), (None,), ("legacy",), ("apple",), ("Zed",)]
    for direction, expected in (("asc", ["apple", "legacy", "Session 4", "Zed", None]),
                                ("desc", ["Zed", "Session 4", "legacy", "apple", None])):
        req = parse_request(f"sort=sessions:title:{direction}", ["p"], ["crush"], "/project")
        assert [r[0] for r in sort_rows(req, "sessions", ["title"], rows)] == expected


def test_an_insight_cell_of_unknown_cost_says_unknown_as_the_projects_table_does():
    """A dashboard trial: an unknown cost was an empty cell in the insights' tables, `unknown` in
    the projects'. Other empty values stay empty."""
    from warehouse.serve.dashboard.pages import _cell

    assert _cell(None, "wasted_usd") == "unknown" and _cell(None, "cost_usd") == "unknown"
    assert _cell(None, "file_path") == "" and _cell(0.5, "cost_usd") == "$0.5000"
