"""The dashboard's trends beside cost (issue 34): tokens, the tool-call failure rate and the cache
share per period, and the freshness line on every page. Read from the people lake (Claude Code
sessions that record tokens and cache, beside Crush and CodeWhale that record none per request);
every figure is checked against a query of the lake's own tables, written apart from the
dashboard's."""

import html
import re
from contextlib import closing
from datetime import date, timedelta

import pytest

from tests.conftest import query
from tests.support_dashboard_built import shared_chromium
from tests.test_dashboard_people import figure, get, people  # noqa: F401  (people: the lake, built once)
from warehouse.serve.dashboard.server import running

TREND_FIGURES = ("tokens-over-time", "failure-rate-over-time", "cache-share-over-time")


@pytest.fixture(scope="module")
def dashboard(people):  # noqa: F811
    with running(people.warehouse, port=0) as url:
        yield url


def text(fragment: str) -> str:
    """The words of a fragment of HTML, its tags taken out."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def points(page: str, fig_id: str) -> dict[tuple[str, str], str]:
    """(series, period) -> the value a point says (its accessible label)."""
    labels = [html.unescape(a) for a in re.findall(r'aria-label="([^"]*)"', figure(page, fig_id))]
    found = [re.search(r"series: (.*?); from: (.*?); value: (.*)$", a) for a in labels]
    return {(m[1], m[2]): m[3] for m in found if m}


def note(page: str, fig_id: str) -> str:
    return text(re.search(r'<p class="cut">(.*?)</p>', figure(page, fig_id), re.S).group(1))


def expected(people, where: str = "", args=(), period: str = "day"):  # noqa: F811
    """Per period start: (input tokens with cache, output tokens, calls, failed, cache reads,
    input of the requests that record a cache), from the lake's tables, not the marts the page reads."""
    start = "date" if period == "day" else f"CAST(date_trunc('{period}', date) AS DATE)"
    where = f"WHERE {where}" if where else ""
    tokens = dict((d, (i, o)) for d, i, o in query(people, f"""
        SELECT {start}, SUM(CASE WHEN COALESCE(input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens,
                   cache_write_1h_tokens) IS NOT NULL THEN COALESCE(input_uncached_tokens, 0)
                   + COALESCE(cache_read_tokens, 0) + COALESCE(cache_write_5m_tokens, 0)
                   + COALESCE(cache_write_1h_tokens, 0) END), SUM(output_tokens)
        FROM usage {where} GROUP BY 1""", *args))
    calls = dict((d, (n, f)) for d, n, f in query(people, f"""
        SELECT {start}, COUNT(*), COUNT(*) FILTER (WHERE is_error OR exit_code <> 0)
        FROM (SELECT * FROM tool_calls WHERE has_call) {where} GROUP BY 1""", *args))
    cache = dict((d, (r, i)) for d, r, i in query(people, f"""
        SELECT {start}, SUM(COALESCE(cache_read_tokens, 0)), SUM(COALESCE(input_uncached_tokens, 0)
               + COALESCE(cache_read_tokens, 0) + COALESCE(cache_write_5m_tokens, 0) + COALESCE(cache_write_1h_tokens, 0))
        FROM (SELECT * FROM usage WHERE cache_read_tokens IS NOT NULL OR cache_write_5m_tokens IS NOT NULL
              OR cache_write_1h_tokens IS NOT NULL) {where} GROUP BY 1""", *args))
    return tokens, calls, cache


def label(day: date, period: str) -> str:
    return {"day": day.isoformat(), "week": f"week from {day.isoformat()}"}.get(period, day.strftime("%Y-%m"))


@pytest.mark.parametrize("params, where, args, period", [
    ("", "", (), "day"),
    ("?grain=week", "", (), "week"),
    ("?user=ana", '"user" = ?', ("ana",), "day"),
    ("?machine=laptop&grain=month", "machine = ?", ("laptop",), "month"),
    ("?project=shop", "project = ?", ("shop",), "day"),
])
def test_each_period_shows_the_tokens_failure_rate_and_cache_share_the_lake_holds(dashboard, people, params,  # noqa: F811
                                                                                   where, args, period):
    status, page = get(dashboard + params)
    assert status == 200 and "filter-errors" not in page
    tokens, calls, cache = expected(people, where, args, period)
    drawn = {fig: points(page, fig) for fig in TREND_FIGURES}
    # tokens: a point per series and period that records them, at its exact figure, and no other
    want = {}
    for day, (inp, out) in tokens.items():
        if inp is not None:
            want[("input (with cache)", label(day, period))] = f"{int(inp):,}"
        if out is not None:
            want[("output", label(day, period))] = f"{int(out):,}"
    assert drawn["tokens-over-time"] == want
    assert drawn["failure-rate-over-time"] == {("failed", label(d, period)): f"{f / n:.1%}"
                                               for d, (n, f) in calls.items() if n}
    assert drawn["cache-share-over-time"] == {("cache share", label(d, period)): f"{r / i:.1%}"
                                              for d, (r, i) in cache.items() if i}
    # the notes' totals
    assert f"{sum(int(i or 0) for i, _ in tokens.values()):,} input tokens" in note(page, "tokens-over-time")
    n, f = sum(n for n, _ in calls.values()), sum(f for _, f in calls.values())
    if n:
        assert f"{f:,} of {n:,} tool calls failed ({f / n:.1%})" in note(page, "failure-rate-over-time")
    read, inp = sum(r for r, _ in cache.values()), sum(i for _, i in cache.values())
    if inp:
        assert f"{read / inp:.1%} of {int(inp):,} input tokens read from cache" in note(page, "cache-share-over-time")
    # one bar or point per the same period as the cost chart
    assert f"one bar per {period}" in note(page, "cost-over-time")


def test_a_month_grains_trends_write_each_month_once_on_their_axis(dashboard):
    """Six ticks over three months wrote "Nov 2026, Nov 2026, Nov 2026, Dec 2026" under the tokens
    and cache share charts (a new user's trial): a tick per month at most, as the cost chart."""
    status, page = get(dashboard + "?grain=month")
    assert status == 200
    for fig in ("cost-over-time", *TREND_FIGURES):
        svg = figure(page, fig)
        axis = re.search(r'<g class="mark-text role-axis-label"[^>]*>(.*?)</g>', svg, re.S)
        labels = [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", axis.group(1))]
        assert labels and len(labels) == len(set(labels)), (fig, labels)


def test_a_period_without_tokens_is_a_gap_not_a_zero(dashboard, people):  # noqa: F811
    """Crush and CodeWhale record no per-request tokens: their days have no point (the line is
    broken there) and the note names them, while a real 0% failure rate is drawn."""
    _, page = get(dashboard)
    first, last = query(people, "SELECT MIN(date), MAX(date) FROM daily_costs")[0]
    recorded = {d for (d,) in query(people, "SELECT DISTINCT date FROM usage WHERE COALESCE(input_uncached_tokens, "
                                            "output_tokens, cache_read_tokens) IS NOT NULL")}
    days = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    missing = [d for d in days if d not in recorded]
    assert missing and recorded  # the lake holds both
    tokens = points(page, "tokens-over-time")
    for day in missing:
        assert ("input (with cache)", str(day)) not in tokens and ("output", str(day)) not in tokens
        assert ("cache share", str(day)) not in points(page, "cache-share-over-time")
    said = note(page, "tokens-over-time")
    assert f"no tokens recorded in {len(missing)} of {len(days)} days" in said and "a gap, not 0" in said
    assert str(missing[0]) in said
    # the line breaks at a gap: one SVG path of several pieces (each piece starts with M)
    line = re.findall(r'<path[^>]*d="(M[^"]*)"[^>]*stroke="#4e79a7"', figure(page, "tokens-over-time"))
    line = line or re.findall(r'<path[^>]*stroke="#4e79a7"[^>]*d="(M[^"]*)"', figure(page, "tokens-over-time"))
    assert line and line[0].count("M") >= 2
    assert "0.0%" in points(page, "failure-rate-over-time").values()  # a day whose calls all succeeded


def test_where_no_request_records_tokens_every_trend_says_so(dashboard):
    """CodeWhale's sessions alone: no tokens, no cache, so no points and no 0, and said."""
    _, page = get(dashboard + "?agent=codewhale")
    for fig in ("tokens-over-time", "cache-share-over-time"):
        assert points(page, fig) == {} and "no data for these filters" in figure(page, fig)
    assert "no request records its cache" in note(page, "cache-share-over-time")


def freshness(page: str) -> str:
    return text(re.search(r'<p [^>]*id="about-data"[^>]*>(.*?)</p>', page, re.S).group(1))


def test_every_page_says_when_it_was_merged_and_each_machines_last_run(dashboard, people):  # noqa: F811
    runs = query(people, "SELECT machine, MAX(run_at) FROM sources GROUP BY 1 ORDER BY 1")
    runs_said = "last run per machine: " + ", ".join(f"{m} {at:%Y-%m-%d %H:%M} UTC" for m, at in runs)
    (project, source, session, machine), = query(
        people, "SELECT project, source_id, session_id, machine FROM session_summary ORDER BY started_at LIMIT 1")
    pages = ["", f"project?project={project}", f"session?source={source}&id={session}&machine={machine}",
             "insight?name=insight_idle_cost", "session?source=x&id=nope", "insight?name=nope"]
    said = set()
    for path in pages:
        _, page = get(dashboard + path)
        line = freshness(page)
        assert re.search(r"last merged \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", line) and runs_said in line, (path, line)
        assert "demo" not in line.lower()  # none of these stores is the demo's
        said.add(line)
    assert len(said) == 1  # the same line on every page


def test_a_machine_far_behind_the_newest_run_is_marked(monkeypatch):
    """A machine whose last run is more than 72 hours before the lake's newest is marked as
    behind (against the lake's newest run, not today: a page is kept until the next merge)."""
    from datetime import datetime

    from warehouse.serve.dashboard import page_parts

    newest = datetime(2026, 3, 9, 8, 0)
    fresh = page_parts.Freshness(newest, True, {"desk": newest, "laptop": newest - timedelta(days=5)}, 0, 2)
    monkeypatch.setattr(page_parts, "freshness", lambda con: fresh)
    line = text(page_parts.about_data(None))
    assert line == ("last merged 2026-03-09 08:00:00 UTC · last run per machine: desk 2026-03-09 08:00 UTC, "
                    "laptop 2026-03-04 08:00 UTC 5 days behind the newest run")
    fresh.demo = 2  # the demo's banner keeps the same line
    demo = text(page_parts.about_data(None))
    assert demo.startswith("Demo data: every session here was generated by agentlake demo") and demo.endswith(line)


def test_the_overview_with_its_trends_in_a_real_browser(dashboard, tmp_path, request):
    """Chromium lays out the three trends under the cost chart, each drawn, with the freshness
    line under the title. The screenshot is kept in the test's tmp dir."""
    from tests.support_browser import CHROMIUM

    if not CHROMIUM:
        pytest.skip("no chromium on this machine: apt-get install chromium")
    url = dashboard + "?grain=day"
    with closing(shared_chromium(request).context()) as tab:
        tab.call("Emulation.setDeviceMetricsOverride", width=1440, height=1500, deviceScaleFactor=1, mobile=False)
        assert tab.load(url) is None
        boxes = tab.call("Runtime.evaluate", returnByValue=True, expression="""
            ['about-data', 'cost-over-time', ...%s].map(id => {
                const r = document.getElementById(id).getBoundingClientRect();
                return [id, r.top, r.left, r.width, r.height]; })""" % list(TREND_FIGURES))["result"]["value"]
        place = {b[0]: b[1:] for b in boxes}
        assert all(h > 10 for _, _, _, h in place.values())
        assert place["about-data"][0] < place["cost-over-time"][0] < place["tokens-over-time"][0]
        # the three trends side by side on a wide screen, under the cost chart
        tops = {round(place[f][0]) for f in TREND_FIGURES}
        assert len(tops) == 1 and place["tokens-over-time"][1] < place["failure-rate-over-time"][1] \
            < place["cache-share-over-time"][1]
        tab.screenshot(url, tmp_path / "overview-trends.png", width=1440, height=1500)
        shot = (tmp_path / "overview-trends.png").read_bytes()
        assert shot.startswith(b"\x89PNG\r\n\x1a\n") and len(shot) > 20_000



def test_a_short_span_has_one_tick_per_day_and_a_long_one_keeps_vegas():
    """A dashboard trial: over two or three days Vega put a tick every few hours, each labelled
    with its date (`Dec 07, Dec 07, Dec 08, Dec 08`), on the cost chart and the trends."""
    from warehouse.serve.dashboard import charts

    days = [date(2026, 12, 7) + timedelta(days=i) for i in range(3)]
    label = re.compile(r"<text[^>]*>([A-Z][a-z]{2} \d\d)</text>")
    bars = charts.cost_over_time([(d, "a", 1.0 + i, None) for i, d in enumerate(days)], "day", "agent", ["a"])
    assert label.findall(bars) == ["Dec 07", "Dec 08", "Dec 09"]
    line = charts.trend([(d, "x", 1.0) for d in days[:2]], "day", days[0], days[1], [("x", "#000")], "v", ",d", ",d")
    assert label.findall(line) == ["Dec 07", "Dec 08"]
    many = [date(2026, 1, 1) + timedelta(days=i) for i in range(60)]
    shown = label.findall(charts.cost_over_time([(d, "a", 1.0, None) for d in many], "day", "agent", ["a"]))
    assert 4 <= len(shown) <= 12 and len(set(shown)) == len(shown)
