"""Budgets on the dashboard (issue 34): the overview's Budgets table gives the figures of
warehouse.serve.budgets (those of `report --budgets`), the ones over or projected over marked; the
cost chart of months draws the budget's line and marks this month; days and weeks say where the
line is. On a lake that spends $2.50 today (tests.test_budgets)."""

import calendar
import html
import re
from contextlib import closing
from datetime import datetime, timezone
from decimal import Decimal

import pytest

from tests.conftest import run_cli
from tests.support_dashboard_built import shared_chromium
from tests.test_budgets import SPENT, _budgets, spending  # noqa: F401  (spending: the lake, built once)
from tests.test_dashboard_people import figure, get, links, rows
from tests.test_dashboard_trends import text  # tags taken out, no space put for them
from warehouse.lake.config import load_config
from warehouse.lake.ducklake import connect
from warehouse.serve.budgets import OK, OVER, PROJECTED_OVER, budget_statuses
from warehouse.serve.dashboard.server import running


def _today():
    return datetime.now(timezone.utc).date()


def _between() -> Decimal | None:
    """A monthly amount above this month's spend but below its projection: projected over (none on
    a month's last day, when the projection is the spend)."""
    today = _today()
    projected = SPENT * calendar.monthrange(today.year, today.month)[1] / today.day
    return None if projected == SPENT else ((SPENT + projected) / 2).quantize(Decimal("0.01"))


def _pages(layout, *queries: str, config=True) -> list[str]:
    """A page per query, from one server started with the home's budgets (or without them)."""
    budgets = load_config(layout.config_file).budgets if config else ()
    pages = []
    with running(layout.warehouse, port=0, data_path=layout.tables_path, budgets=budgets,
                 config_file=layout.config_file if config else None) as url:
        for query in queries:
            status, page = get(url + query)
            assert status == 200, page
            pages.append(page)
    return pages


def _page(layout, query: str = "", config=True) -> str:
    return _pages(layout, query, config=config)[0]


def _statuses(layout):
    with connect(layout.warehouse, ours=True, data_path=layout.tables_path) as con:
        return budget_statuses(con, load_config(layout.config_file).budgets, _today())


def _usd(value) -> str:
    return f"${float(value):,.4f}"


def test_the_budgets_table_gives_the_reports_figures_and_marks_the_ones_over(spending):  # noqa: F811
    layout, _ = spending
    between = _between()
    _budgets(layout, "[[budgets]]", "monthly_usd = 100000", "[[budgets]]", "monthly_usd = 2", 'user = "dev"',
             *(["[[budgets]]", f"monthly_usd = {between}", 'project = "shop"'] if between else []))
    page = _page(layout)
    statuses = _statuses(layout)
    assert [s.status for s in statuses] == [OK, OVER] + ([PROJECTED_OVER] if between else [])
    today = _today()
    assert f"Budgets, {today:%B %Y} to {today} (UTC)" in text(page)
    assert rows(page, "budgets") == [[s.budget.name, _usd(s.budget.monthly_usd), _usd(s.spent_usd),
                                      f"{s.share_used:.2%}", _usd(s.projected_usd), s.status] for s in statuses]
    assert rows(page, "budgets")[1][1:4] == ["$2.0000", "$2.5000", "125.00%"]
    marks = re.findall(r'<tr class="([^"]+)"><td>', re.search(r'<table id="budgets">.*?</table>', page, re.S)[0])
    assert marks == ["budget-ok", "budget-over"] + (["budget-projected"] if between else [])
    warned = text(re.search(r'<p class="bad" id="budgets-warn">(.*?)</p>', page, re.S)[1])
    assert warned.startswith("over budget: user dev")
    assert ("; projected over by the month's end: project shop" in warned) == bool(between)
    # each row opens its costs a month per bar
    assert links(page, "budgets")["user dev"] == "/?user=dev&grain=month"
    assert links(page, "budgets")["team"] == "/?grain=month"
    if between:
        assert links(page, "budgets")["project shop"] == "/project?project=shop&grain=month"


def test_the_monthly_chart_draws_the_line_and_marks_this_month(spending):  # noqa: F811
    layout, _ = spending
    _budgets(layout, "[[budgets]]", "monthly_usd = 2", "[[budgets]]", "monthly_usd = 40", 'user = "dev"')
    page, dev_page, daily_page, weekly_page = _pages(layout, "?grain=month", "?grain=month&user=dev", "?grain=day",
                                                     "?grain=week&user=dev")
    chart = figure(page, "cost-over-time")
    assert "team budget $2.00 a month" in html.unescape(chart)  # the line's label, drawn
    assert ">over budget · $" in chart  # this month's bar, marked, with where it ends
    said = text(re.search(r'<p class="cut budget-over" id="budget-line">(.*?)</p>', chart, re.S)[1])
    assert said == (f"Dashed line: the team budget $2.00 a month. {_today():%B %Y}: $2.50 spent, "
                    f"${_statuses(layout)[0].projected_usd:,.2f} projected at this pace: over.")
    # filtered to a user with a budget of its own: that one's line, and how it stands
    mine = figure(dev_page, "cost-over-time")
    assert "user dev budget $40.00 a month" in html.unescape(mine) and "team budget" not in html.unescape(mine)
    assert ">over budget" not in mine
    # days or weeks: no line (a monthly amount against a day's bar means nothing), a link to months
    daily = figure(daily_page, "cost-over-time")
    assert "budget $2.00 a month" not in re.sub(r'<p class="cut[^"]*" id="budget-line">.*?</p>', "", daily, flags=re.S)
    note = re.search(r'<p class="cut" id="budget-line">(.*?)</p>', daily, re.S)[1]
    assert text(note) == "The team budget $2.00 a month is drawn on the monthly view (one bar per month)."
    assert html.unescape(re.search(r'href="([^"]+)"', note)[1]) == "/?grain=month"
    weekly = figure(weekly_page, "cost-over-time")
    assert "/?user=dev&amp;grain=month" in weekly


def test_a_budget_far_above_every_month_is_said_not_drawn(spending):  # noqa: F811
    """$10,000 a month over bars of $2.50 scaled the axis to the line: every bar lay flat on it
    (the quickstart's demo with a $500 budget showed no bar at all). It is said under the chart."""
    layout, _ = spending
    _budgets(layout, "[[budgets]]", "monthly_usd = 10000")
    chart = figure(_page(layout, "?grain=month"), "cost-over-time")
    said = text(re.search(r'<p class="cut budget-ok" id="budget-line">(.*?)</p>', chart, re.S)[1])
    assert said.startswith("The team budget $10,000.00 a month is far above every month here (the highest $2.50): "
                           "not drawn, so that the bars stay readable.")
    assert "budget $10,000.00 a month" not in html.unescape(re.sub(r'<p class="cut[^"]*" id="budget-line">.*?</p>',
                                                                   "", chart, flags=re.S))


def test_a_projected_over_month_is_marked_amber(spending):  # noqa: F811
    layout, _ = spending
    between = _between()
    if between is None:
        pytest.skip("the month's last day: nothing is projected beyond what is spent")
    _budgets(layout, "[[budgets]]", f"monthly_usd = {between}")
    chart = figure(_page(layout, "?grain=month"), "cost-over-time")
    assert ">projected over: $" in chart and 'id="budget-line"' in chart and "cut budget-projected" in chart


def test_without_budgets_one_line_says_how_to_set_one(spending):  # noqa: F811
    layout, _ = spending
    page = _page(layout, "?grain=month")
    said = text(re.search(r'<p class="meta" id="budgets-none">(.*?)</p>', page, re.S)[1])
    assert said.startswith("No budgets set: add [[budgets]] with monthly_usd = 500")
    assert str(layout.config_file) in said and "docs/CONFIG.md" in said
    assert 'id="budgets"' not in page and 'id="budget-line"' not in page
    # a server started without them (a notebook, a test) says the same of the home's config.toml
    assert "to the home's config.toml" in text(_page(layout, config=False))


def test_a_budget_for_a_scope_the_warehouse_does_not_hold_is_said(spending):  # noqa: F811
    layout, _ = spending
    _budgets(layout, "[[budgets]]", "monthly_usd = 5", 'user = "deb"')
    page = _page(layout, "?grain=month")
    assert text(re.search(r'<p class="bad" id="budgets-unknown">(.*?)</p>', page, re.S)[1]) == (
        "budget user deb: no user 'deb' in the warehouse; close ones: dev")
    assert "user deb" not in links(page, "budgets")  # no link to a filter the page would refuse
    # no team budget and the page not filtered to deb: no line, and why
    assert "No budget line: no team budget" in text(figure(page, "cost-over-time"))


def test_a_bad_budget_stops_the_dashboard_at_start(spending):  # noqa: F811
    layout, _ = spending
    _budgets(layout, "[[budgets]]", "monthly_usd = 0")
    ran = run_cli("dashboard", "--home", layout.home, "--port", "0")
    assert ran.returncode == 1 and "error: " in ran.stderr
    assert "monthly_usd must be an amount in USD above 0" in ran.stderr


def test_the_overview_over_budget_in_a_real_browser(spending, tmp_path, request):  # noqa: F811
    """Chromium lays out the Budgets table above the cost chart, its over row red; the monthly
    chart draws the line. The screenshot is kept in the test's tmp dir."""
    from tests.support_browser import CHROMIUM

    if not CHROMIUM:
        pytest.skip("no chromium on this machine: apt-get install chromium")
    layout, _ = spending
    _budgets(layout, "[[budgets]]", "monthly_usd = 2", "[[budgets]]", "monthly_usd = 40", 'user = "dev"')
    budgets = load_config(layout.config_file).budgets
    with running(layout.warehouse, port=0, data_path=layout.tables_path, budgets=budgets,
                 config_file=layout.config_file) as url, closing(shared_chromium(request).context()) as tab:
        url += "?grain=month"
        tab.call("Emulation.setDeviceMetricsOverride", width=1440, height=1300, deviceScaleFactor=1, mobile=False)
        assert tab.load(url) is None
        found = tab.call("Runtime.evaluate", returnByValue=True, expression="""
            [...['budgets', 'cost-over-time'].map(id => document.getElementById(id).getBoundingClientRect().top),
             getComputedStyle(document.querySelector('#budgets tr.budget-over td')).color,
             document.querySelector('#cost-over-time svg').getBoundingClientRect().height]""")["result"]["value"]
        assert found[0] < found[1] and found[2] == "rgb(176, 0, 32)" and found[3] > 200
        tab.screenshot(url, tmp_path / "overview-budgets.png", width=1440, height=1300)
        shot = (tmp_path / "overview-budgets.png").read_bytes()
        assert shot.startswith(b"\x89PNG\r\n\x1a\n") and len(shot) > 20_000


def test_a_team_budget_is_not_drawn_over_a_part_of_the_team(spending):  # noqa: F811
    """A new user's trial: a project's page drew the team's budget over that project's bars, as if
    it were the project's. A page filtered to a part of the team without a budget of its own draws
    none, says why, and links to the whole team's monthly view, where the team's line is."""
    layout, _ = spending
    _budgets(layout, "[[budgets]]", "monthly_usd = 2")
    chart = figure(_page(layout, "?grain=month&user=dev&machine=laptop"), "cost-over-time")
    assert "team budget $2.00 a month" not in html.unescape(re.sub(r'<p class="cut[^"]*" id="budget-line">.*?</p>',
                                                                   "", chart, flags=re.S))
    note = re.search(r'<p class="cut" id="budget-line">(.*?)</p>', chart, re.S)[1]
    assert text(note) == ("No budget line: this page shows user dev, machine laptop, which has no budget of its own; "
                          "the team budget $2.00 a month is drawn on the whole team's monthly view.")
    assert html.unescape(re.search(r'href="([^"]+)"', note)[1]) == "/?grain=month"
    assert "team budget $2.00 a month" in html.unescape(figure(_page(layout, "?grain=month"), "cost-over-time"))


def test_a_budget_named_as_typed_is_drawn_on_its_own_page_only(spending):  # noqa: F811
    """A review: a budget for `user = "DEV"` spent dev's month in the table, but the chart compared
    the name as written with the page's (dev) and drew none. It is drawn on dev's page, and on no
    narrower one (dev on one machine is a part of what it covers), and its row links there."""
    layout, _ = spending
    _budgets(layout, "[[budgets]]", "monthly_usd = 2", "[[budgets]]", "monthly_usd = 40", 'user = "DEV"')
    mine, narrower, overview = _pages(layout, "?grain=month&user=dev", "?grain=month&user=dev&machine=laptop",
                                      "?grain=month")
    assert "user DEV budget $40.00 a month" in html.unescape(figure(mine, "cost-over-time"))
    said = text(re.search(r'<p class="cut" id="budget-line">(.*?)</p>', figure(narrower, "cost-over-time"), re.S)[1])
    assert said.startswith("No budget line: this page shows user dev, machine laptop, which has no budget of its own")
    assert links(overview, "budgets")["user DEV"] == "/?user=dev&grain=month"
