"""`agentlake report --tz ZONE`: the report's days are that zone's days (by day, the windows,
--since/--until), every section agreeing, and each root session's cost split over them exactly."""

import csv
import io
import json
from collections import Counter
from datetime import datetime, timedelta, timezone
from decimal import ROUND_HALF_UP, Decimal
from zoneinfo import ZoneInfo

import pytest

from tests.conftest import T0, copy_home, ingest, query, run_cli
from tests.support_tz import COST, CREATED, STRADDLING, day_of, split_cost, straddling  # noqa: F401  (the fixture)
from transforms.synth.claude import generate_home
from warehouse.lake.layout import Layout


def _report(home, *args, env=None):
    ran = run_cli("report", "--home", home, "--format", "json", *args, env=env)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout), ran.stderr


def _by_day(home, *args, env=None) -> dict:
    data, _ = _report(home, "--by", "day", *args, env=env)
    return {row["date"]: row for row in data["by_day"]}


@pytest.mark.parametrize("zone", ["Asia/Tokyo", "America/Los_Angeles", "Asia/Kolkata", "UTC"])
def test_costs_and_counts_move_to_the_zones_days(straddling, zone):
    rows = _by_day(straddling.home, "--tz", zone)
    days = Counter(day_of(t, zone) for t in STRADDLING)
    costs = split_cost(COST, days)
    messages = days + Counter([day_of(CREATED, zone)])  # the user message, sent as R was created
    assert {d: Decimal(str(r["cost_usd"])) for d, r in rows.items()} == {str(d): c for d, c in costs.items()}
    assert {d: r["messages"] for d, r in rows.items()} == {str(d): n for d, n in messages.items()}
    started = [d for d, r in rows.items() if r["root_sessions"]]
    assert started == [str(day_of(CREATED, zone))]
    assert sum(Decimal(str(r["cost_usd"])) for r in rows.values()) == COST


def test_kolkatas_half_hour_splits_what_a_whole_hour_keeps_on_one_day(straddling):
    a_minute_before, a_minute_after = STRADDLING[2], STRADDLING[3]  # midnight in Kolkata, 23:29 and 23:31 at UTC+5
    assert day_of(a_minute_before, "Asia/Karachi") == day_of(a_minute_after, "Asia/Karachi")
    assert day_of(a_minute_before, "Asia/Kolkata") != day_of(a_minute_after, "Asia/Kolkata")
    kolkata, karachi = (_by_day(straddling.home, "--tz", z) for z in ("Asia/Kolkata", "Asia/Karachi"))
    before = str(day_of(a_minute_before, "Asia/Kolkata"))
    assert kolkata[before]["messages"] == karachi[before]["messages"] - 1


def test_every_section_agrees_with_utc_on_the_whole(lake, zone="America/Los_Angeles"):
    # the known-totals lake: sessions over a week from midnight UTC, sub-agents, tool calls, costs
    # of every source (native, estimated, unknown)
    utc, _ = _report(lake.home, "--by", "day")
    local, _ = _report(lake.home, "--by", "day", "--tz", zone)
    assert local["totals"] == utc["totals"]
    for section in ("top_projects", "models", "tools", "failing_tools"):
        assert local[section] == utc[section], section
    for measure in ("cost_usd", "root_sessions", "messages", "tool_calls"):
        summed = sum(Decimal(str(r[measure] or 0)) for r in local["by_day"])
        assert summed == Decimal(str(utc["totals"][0][measure])), measure
    ran = run_cli("report", "--home", lake.home, "--by", "day", "--format", "csv", "--tz", zone)
    table = list(csv.DictReader(io.StringIO(ran.stdout)))
    assert [(r["date"], Decimal(r["cost_usd"] or 0)) for r in table] == [
        (r["date"], Decimal(str(r["cost_usd"] or 0))) for r in local["by_day"]]


def test_since_and_until_name_the_zones_days(straddling):
    zone = "America/Los_Angeles"
    first = min(day_of(t, zone) for t in STRADDLING)
    data, said = _report(straddling.home, "--tz", zone, "--since", first, "--until", first)
    on_it = Counter(day_of(t, zone) for t in STRADDLING)
    assert Decimal(str(data["totals"][0]["cost_usd"])) == split_cost(COST, on_it)[first]
    assert "no session" not in said
    _, said = _report(straddling.home, "--insights", "--tz", zone, "--since", first, "--until", first)
    assert "no session" not in said  # the zone's day, though the insights read the UTC tables
    tokyo = sorted({day_of(t, "Asia/Tokyo") for t in STRADDLING})  # every one a day after some UTC day
    _, said = _report(straddling.home, "--insights", "--tz", "Asia/Tokyo", "--until", str(tokyo[0] - timedelta(days=1)))
    assert f"the sessions are from {tokyo[0]} to {tokyo[-1]}" in said


class _HalfPastMidnight(datetime):
    """The clock at 2026-01-01 00:30 UTC: 31 December still in Los Angeles."""

    @classmethod
    def now(cls, tz=None):
        return datetime.fromtimestamp(T0 + 1800, tz)


def test_today_is_today_in_the_zone(straddling, monkeypatch):
    import warehouse.lake.zones as zones

    monkeypatch.setattr(zones, "datetime", _HalfPastMidnight)
    zone = "America/Los_Angeles"
    today = day_of(T0 + 1800, zone)
    assert today != day_of(T0 + 1800, "UTC")
    data, err = _report(straddling.home, "--today", "--tz", zone)
    assert f"--today: {today} to {today} ({zone} days)" in err
    days = Counter(day_of(t, zone) for t in STRADDLING)
    assert Decimal(str(data["totals"][0]["cost_usd"])) == split_cost(COST, days)[today]
    assert data["totals"][0]["messages"] == days[today] + (day_of(CREATED, zone) == today)


def test_the_config_sets_the_zone_the_variable_and_the_flag_win(straddling):
    (straddling.home / "config.toml").write_text('tz = "Asia/Tokyo"\n')
    utc = [str(d) for d in sorted(set(day_of(t, "UTC") for t in STRADDLING))]
    assert list(_by_day(straddling.home)) == sorted({str(day_of(t, "Asia/Tokyo")) for t in STRADDLING})
    via_env = _by_day(straddling.home, env={"AGENTLAKE_TZ": "America/Los_Angeles"})
    assert list(via_env) == sorted({str(day_of(t, "America/Los_Angeles")) for t in STRADDLING})
    assert list(_by_day(straddling.home, "--tz", "UTC", env={"AGENTLAKE_TZ": "America/Los_Angeles"})) == utc


@pytest.mark.parametrize("how", ["flag", "variable", "config"])
def test_an_unknown_zone_is_named_with_the_close_ones(straddling, how):
    args, env = (["--tz", "Europe/Berln"] if how == "flag" else []), {}
    if how == "variable":
        env["AGENTLAKE_TZ"] = "Europe/Berln"
    if how == "config":
        (straddling.home / "config.toml").write_text('tz = "Europe/Berln"\n')
    ran = run_cli("report", "--home", straddling.home, *args, env=env)
    assert ran.returncode == (1 if how == "config" else 2)
    assert "'Europe/Berln' is not a time zone (did you mean Europe/Berlin" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_a_zone_in_other_case_is_that_zone():
    """`--tz utc` was "not a time zone", with no suggestion, though UTC works (a trial)."""
    from warehouse.lake.zones import check_zone

    assert (check_zone("utc"), check_zone("europe/berlin"), check_zone("AMERICA/NEW_YORK")) == (
        "UTC", "Europe/Berlin", "America/New_York")


def test_a_city_alone_is_answered_with_its_zone():
    """`--tz berlin` named no zone at all: the city's spelling is not close to `Europe/Berlin`
    by difflib's measure (a trial)."""
    from warehouse.lake.zones import BadZone, check_zone

    for typed, meant in (("berlin", "Europe/Berlin"), ("new york", "America/New_York"), ("Kolkata", "Asia/Kolkata")):
        with pytest.raises(BadZone, match=f"'{typed}' is not a time zone \\(did you mean {meant}\\?\\)"):
            check_zone(typed)


def test_a_zone_nothing_is_close_to_is_named(straddling):
    mars = run_cli("report", "--home", straddling.home, "--tz", "Mars/Base")
    assert mars.returncode == 2 and "--tz 'Mars/Base' is not a time zone: give an IANA name" in mars.stderr


def test_the_report_says_whose_days_it_counts_and_an_empty_zone_is_refused(straddling):
    zoned = run_cli("report", "--home", straddling.home, "--by", "day", "--tz", "Asia/Tokyo")
    assert zoned.returncode == 0 and "note: days of Asia/Tokyo (the lake keeps UTC, and the times in these tables are UTC)" in zoned.stderr
    utc = run_cli("report", "--home", straddling.home, "--by", "day")
    assert utc.returncode == 0 and "days of" not in utc.stderr
    empty = run_cli("report", "--home", straddling.home, "--tz", "")
    assert empty.returncode == 2 and "--tz is empty" in empty.stderr


def test_the_insights_sql_names_the_zones_days(straddling):
    data, _ = _report(straddling.home, "--insights", "--tz", "Asia/Kolkata", "--since", "2026-01-01")
    assert all("timezone('Asia/Kolkata'" in sql for sql in data["sql"].values())


def test_the_budgets_month_is_the_zones(straddling):
    (straddling.home / "config.toml").write_text('[[budgets]]\nmonthly_usd = 100\n')
    ran = run_cli("report", "--home", straddling.home, "--budgets", "--tz", "Asia/Tokyo")
    today = datetime.now(ZoneInfo("Asia/Tokyo")).date()
    assert ran.returncode == 0, ran.stderr
    assert f"Budgets, {today:%B %Y} to {today} (Asia/Tokyo)" in ran.stdout


def _claude(root):
    layout = Layout.resolve(home=root / "home", machine="laptop", user="dev")
    generate_home(root / "claude", sessions=6, seed=5)  # a session every 7 hours: some answered past midnight
    ingest(layout, homes={"claude": [root / "claude"]})
    return layout


def _expected_costs(layout, zone: str) -> dict:
    """Each root session's cost split over the zone's days of its tree's requests (their own costs,
    as weights; their counts where none costs anything), summed per day, from the tables' rows."""
    roots = {(m, src, sid): root for m, src, sid, root in query(
        layout, "SELECT machine, source_id, session_id, COALESCE(root_session_id, session_id) FROM sessions")}
    costs = dict(query(layout, "SELECT session_id, cost_usd::DECIMAL(38, 9) FROM sessions WHERE is_root"))
    weights = {}  # root -> {(day, model, llm_provider): (priced nanos, requests)}
    for m, src, sid, at, model, llm, cost in query(
            layout, "SELECT machine, source_id, session_id, requested_at, model, llm_provider, cost_usd FROM usage"):
        key = (day_of(int(at.replace(tzinfo=timezone.utc).timestamp()), zone), model or "", llm or "")
        nanos, n = weights.setdefault(roots[m, src, sid], {}).get(key, (0, 0))
        priced = int(Decimal(str(cost)).scaleb(9).quantize(Decimal(1), ROUND_HALF_UP)) if cost and cost > 0 else 0
        weights[roots[m, src, sid]][key] = (nanos + priced, n + 1)
    out = Counter()
    for root, keys in weights.items():
        if costs.get(root) is None:
            continue
        priced = any(nanos for nanos, _ in keys.values())
        split = split_cost(costs[root], {k: nanos if priced else n for k, (nanos, n) in keys.items() if nanos or not priced})
        for (day, _, _), amount in split.items():
            out[str(day)] += amount
    return dict(out)


def test_a_request_cost_split_follows_the_requests_local_days(layout, built_once):
    copy_home(built_once("report-tz-claude", _claude).home, layout.home)
    rows = _by_day(layout.home, "--tz", "Asia/Tokyo")
    expected = _expected_costs(layout, "Asia/Tokyo")
    assert expected != _expected_costs(layout, "UTC")
    assert {d: Decimal(str(r["cost_usd"])) for d, r in rows.items() if r["cost_usd"] is not None} == expected
    utc_total = _report(layout.home)[0]["totals"][0]["cost_usd"]
    assert sum(expected.values()) == Decimal(str(utc_total))
