"""`agentlake dashboard --tz ZONE` (and a page's `?tz=`): every page counts that zone's days, as
`report --tz` does, on a lake whose requests straddle midnight UTC (tests.support_tz); the
zone's marts are computed once per reader connection, not per page."""

import csv
import io
import re
from collections import Counter
from contextlib import closing
from datetime import timedelta
from decimal import Decimal

import pytest

from tests.conftest import run_cli
from tests.support_dashboard_built import lake_copy, shared_chromium
from tests.support_tz import COST, CREATED, STRADDLING, day_of, split_cost, straddling  # noqa: F401  (the fixture)
from tests.test_dashboard_people import figure, get, tile, usd
from warehouse.lake.zones import today_in
from warehouse.serve.dashboard import charts, zoned
from warehouse.serve.dashboard.server import running

BERLIN = "Europe/Berlin"  # UTC+1 in January: the requests at 23:30 UTC land on the next day


def _serve(layout, **kwargs):
    return running(layout.warehouse, port=0, data_path=layout.tables_path, **kwargs)


@pytest.fixture(scope="module")
def straddling_read_only(built_once):
    """A copy of the straddling lake for the module's tests that only read it."""
    from tests.support_tz import _straddling

    return lake_copy(built_once, "dashboard-tz-read-only", "report-tz-straddling", _straddling)


@pytest.fixture(scope="module")
def berlin(straddling_read_only):
    """`dashboard --tz Europe/Berlin` for the tests that only read its pages: one server, whose
    kept pages (and zone's marts, on its one connection) they share as visitors do."""
    with _serve(straddling_read_only, zone=BERLIN) as url:
        yield url


def _project_cost(url: str, day, query: str = "") -> Decimal:
    """The CSV of the projects table for one day: its cost, exact."""
    status, text = get(f"{url}csv?table=projects&since={day}&until={day}{query}")
    assert status == 200, text
    return Decimal(next(csv.DictReader(io.StringIO(text)))["cost_usd"])


def test_a_cost_lands_on_its_day_in_the_zone(berlin):
    days = Counter(day_of(t, BERLIN) for t in STRADDLING)
    assert days != Counter(day_of(t, "UTC") for t in STRADDLING)  # the zone moves a request across midnight
    expected = split_cost(COST, days)
    assert {d: _project_cost(berlin, d) for d in days} == expected
    first, last = min(days), max(days)
    status, page = get(f"{berlin}?since={last}&until={last}")
    assert status == 200, page
    # the headline tiles compare the zone's day with the zone's day before it
    assert usd(expected[last]) in tile(page, "cost")
    assert f"against the previous window, {first} – {first} (1 day)" in page
    started = day_of(CREATED, BERLIN)
    assert ("1 root session started" if started == last else "0 root sessions started") in page


def test_every_label_names_the_zone(berlin):
    status, page = get(berlin + "?grain=day")
    assert status == 200, page
    assert f"Window ({BERLIN} days, today is {today_in(BERLIN)})" in page
    assert f"day ({BERLIN})" in figure(page, "cost-over-time") and "(UTC)" not in figure(page, "cost-over-time")
    # the trends beside it (Crush records no tokens: drawn here from a row of their own)
    day = day_of(CREATED, BERLIN)
    assert f"week from Monday ({BERLIN})" in charts.trend([(day, "x", 1)], "week", day, day, [("x", "#000")], "t",
                                                         "~s", ",d", zone=BERLIN)
    # the project's link keeps nothing of the zone (the server's), the form shows it
    assert f'placeholder="{BERLIN}"' in page


def test_a_page_names_its_own_zone_and_its_links_keep_it(berlin):
    tokyo = "Asia/Tokyo"
    days = Counter(day_of(t, tokyo) for t in STRADDLING)
    status, page = get(f"{berlin}?tz={tokyo}&grain=day")
    assert status == 200, page
    assert f"Window ({tokyo} days" in page and "tz=Asia%2FTokyo" in page
    # a table's CSV keeps the lake's UTC times, as the report's: said beside its link (a trial)
    assert f"(times in UTC, not {tokyo})" in page and "(times in UTC" not in get(f"{berlin}?tz=UTC")[1]
    day = max(days)
    assert _project_cost(berlin, day, f"&tz={tokyo}") == split_cost(COST, days)[day]


def test_a_bad_zone_is_named_on_the_page_and_the_servers_used(berlin):
    status, page = get(berlin + "?tz=Europe/Berln")
    assert status == 400
    errors = re.search(r'<div class="errors" id="filter-errors">(.*?)</div>', page, re.S).group(1)
    assert "Europe/Berln" in errors and "did you mean Europe/Berlin" in errors and f"{BERLIN} days used" in errors
    assert f"Window ({BERLIN} days" in page


def test_the_zones_marts_are_computed_once_per_connection(straddling, monkeypatch):  # noqa: F811
    computed = []
    real = zoned.use_zone
    monkeypatch.setattr(zoned, "use_zone", lambda con, zone, marts: computed.append(zone) or real(con, zone, marts))
    days = sorted({day_of(t, BERLIN) for t in STRADDLING})
    with _serve(straddling, zone=BERLIN) as url:
        for query in ("", "?grain=day", f"?since={days[0]}", "?project=shop", "?tz=UTC"):
            status, page = get(url + query)
            assert status == 200, page
    assert computed == [BERLIN]


def test_utc_pages_are_as_before(straddling_read_only, berlin):
    """The server's UTC and a page's `tz=UTC` read the stored marts: the same page."""
    days = Counter(day_of(t, "UTC") for t in STRADDLING)
    with _serve(straddling_read_only) as url:
        plain = get(url + "?grain=day")[1]
        assert {d: _project_cost(url, d) for d in days} == split_cost(COST, days)
    named = get(berlin + "?grain=day&tz=UTC")[1]
    assert "Window (UTC days" in plain and "day (UTC)" in figure(plain, "cost-over-time")
    assert figure(named, "cost-over-time").replace("&amp;tz=UTC", "") == figure(plain, "cost-over-time")


@pytest.mark.parametrize("flag, env, config, used", [
    (None, None, None, "UTC"),
    (None, None, BERLIN, BERLIN),
    (None, "Asia/Tokyo", BERLIN, "Asia/Tokyo"),
    ("America/New_York", "Asia/Tokyo", BERLIN, "America/New_York"),
])
def test_the_flag_wins_then_the_variable_then_the_config(straddling, monkeypatch,  # noqa: F811
                                                         flag, env, config, used):
    import warehouse.serve.dashboard.server as server

    given = {}

    class Served:  # what make_server is given, and a server that returns at once
        url = "http://127.0.0.1:0/"

        def __init__(self, *args, **kwargs):
            given.update(kwargs)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def serve_forever(self):
            pass

    monkeypatch.setattr(server, "make_server", Served)
    if config:
        (straddling.home / "config.toml").write_text(f'tz = "{config}"\n')
    ran = run_cli("dashboard", "--home", straddling.home, *(["--tz", flag] if flag else []),
                  env={"AGENTLAKE_TZ": env} if env else {})
    assert ran.returncode == 0, ran.stderr
    assert given["zone"] == used and f"{used} days" in ran.stderr


def test_a_bad_zone_stops_the_dashboard_at_start(straddling):  # noqa: F811
    ran = run_cli("dashboard", "--home", straddling.home, "--tz", "Europe/Berln", "--port", "0")
    assert ran.returncode == 2 and "did you mean Europe/Berlin" in ran.stderr


def test_the_overview_in_a_zone_in_a_real_browser(berlin, tmp_path, request):
    """Chromium lays the overview out with the zone's days; the screenshot is kept in tmp_path."""
    from tests.support_browser import CHROMIUM

    if not CHROMIUM:
        pytest.skip("no chromium on this machine: apt-get install chromium")
    days = sorted({day_of(t, BERLIN) for t in STRADDLING})
    with closing(shared_chromium(request).context()) as tab:
        url = berlin + f"?since={days[0] - timedelta(days=2)}&until={days[-1] + timedelta(days=2)}&grain=day"
        tab.call("Emulation.setDeviceMetricsOverride", width=1440, height=1300, deviceScaleFactor=1, mobile=False)
        assert tab.load(url) is None
        said = tab.call("Runtime.evaluate", returnByValue=True,
                        expression="document.getElementById('presets').textContent")["result"]["value"]
        assert said.startswith(f"Window ({BERLIN} days")
        tab.screenshot(url, tmp_path / "overview-berlin.png", width=1440, height=1300)
    shot = (tmp_path / "overview-berlin.png").read_bytes()
    assert shot.startswith(b"\x89PNG\r\n\x1a\n") and len(shot) > 20_000


def test_a_sessions_times_are_on_the_zones_clock(berlin):
    from datetime import datetime
    from zoneinfo import ZoneInfo

    local = datetime.fromtimestamp(CREATED, ZoneInfo(BERLIN))  # 2025-12-31 19:00 in Berlin
    status, project = get(f"{berlin}project?project=shop")
    assert status == 200, project
    assert f"started ({BERLIN})" in project and f"{local:%Y-%m-%d %H:%M}" in project
    link = re.search(r'href="(/session\?[^"]+)"', project).group(1).replace("&amp;", "&")
    status, session = get(berlin + link.lstrip("/"))
    assert status == 200, session
    assert f"<th>started ({BERLIN})</th><td>{local:%Y-%m-%d %H:%M:%S}</td>" in session
    assert f"#0 · user · {local:%Y-%m-%d %H:%M:%S}" in session  # each message on the same clock
