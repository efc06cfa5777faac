"""A day is a UTC day on every surface, whatever the time zone of the machine that ingests or
reads: the dashboard's time chart, the notebooks' and a reader's SQL session."""

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WEST_AND_EAST = ["America/Los_Angeles", "Pacific/Kiritimati", "UTC"]

CHART = """
import datetime, json, re
from warehouse.serve.dashboard import charts
rows = [(datetime.date(2026, 3, 1), "p", 1.5, "/a"), (datetime.date(2026, 3, 2), "p", 2.0, "/b")]
svg = charts.cost_over_time(rows, "day", "project", ["p"])
print(json.dumps(re.findall(r'<path[^>]*aria-label="([^"]*)"', svg)))
"""


@pytest.mark.parametrize("tz", WEST_AND_EAST)
def test_the_time_chart_puts_each_utc_day_on_its_own_date(tz):
    # vl-convert formats dates in its process's time zone: west of UTC every bar was labelled
    # with the day before ("day (UTC): Feb 28" for March 1st)
    out = subprocess.run([sys.executable, "-c", CHART], cwd=ROOT, env={**os.environ, "TZ": tz},
                         capture_output=True, text=True, check=True).stdout
    bars = [label for label in json.loads(out) if label.startswith("day (UTC)")]
    assert len(bars) == 2
    assert "day (UTC): Mar 01;" in bars[0] and "from: 2026-03-01;" in bars[0] and "cost: $1.5000" in bars[0]
    assert "day (UTC): Mar 02;" in bars[1] and "from: 2026-03-02;" in bars[1] and "end: Mar 03, 2026" in bars[1]



READ = """
import json, sys
from warehouse.lake.ducklake import connect
with connect(sys.argv[1]) as con:
    print(json.dumps(con.execute(
        "SELECT current_setting('TimeZone'), epoch(TIMESTAMP '2026-03-02 07:30:00'::TIMESTAMPTZ),"
        " strftime(now()::TIMESTAMP, '%Y-%m-%d %H') = strftime(now() AT TIME ZONE 'UTC', '%Y-%m-%d %H'),"
        " (SELECT COUNT(*) FROM sources WHERE run_at > now() - INTERVAL 1 HOUR),"
        " (SELECT COUNT(*) FROM sources WHERE date = current_date)").fetchone()))
"""


@pytest.mark.parametrize("tz", WEST_AND_EAST)
def test_a_readers_sql_session_is_in_utc(lake, tz):
    # the tables hold UTC wall-clock timestamps and UTC dates: in the machine's zone a run a
    # minute old was not "in the last hour" at UTC+14, and a cast to TIMESTAMPTZ moved the instant
    out = subprocess.run([sys.executable, "-c", READ, str(lake.warehouse)], cwd=ROOT, env={**os.environ, "TZ": tz},
                         capture_output=True, text=True, check=True).stdout
    zone, instant, same_hour, last_hour, today = json.loads(out)
    assert (zone, instant, same_hour) == ("UTC", 1772436600, True)
    assert last_hour == today >= 1  # the fixture's ingest, just now


def test_a_line_without_a_timestamp_counts_on_its_sessions_day(layout, tmp_path):
    """A Claude Code request whose line has no `timestamp` was dated 1970-01-01: its cost fell
    outside every `--since` window and the session's page hid it. It now takes its session's day."""
    from tests.conftest import ingest, query
    from tests.test_claude import FIXTURE, SID, project

    lines = FIXTURE.lstrip().splitlines()
    for at in (2, 3):  # both lines of the request msg_01QxYz
        line = json.loads(lines[at])
        del line["timestamp"]
        lines[at] = json.dumps(line)
    home = tmp_path / "claude"
    path = project(home) / f"{SID}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines) + "\n")
    (result,) = ingest(layout, homes={"claude": [home]}).results
    assert result.status == "ok", result.error
    assert any(w.endswith("rows without a usable timestamp (dated by their session's day)") for w in result.warnings)
    assert query(layout, "SELECT COUNT(*) FROM usage WHERE requested_at IS NULL")[0][0] == 1
    for table in ("sessions", "messages", "parts", "tool_calls", "usage"):
        assert query(layout, f"SELECT DISTINCT date FROM {table}") == [(datetime(2026, 3, 2).date(),)], table
    total = query(layout, "SELECT SUM(cost_usd::DECIMAL(38, 9)) FROM usage")[0][0]
    assert total > 0
    assert query(layout, "SELECT date, SUM(cost_usd) FROM daily_costs GROUP BY date") == [
        (datetime(2026, 3, 2).date(), total)]


def test_a_crush_message_at_zero_or_before_counts_on_its_sessions_day(layout, project):
    from tests.conftest import T0, ingest, query
    from transforms.synth.crush import add_message, add_session
    from transforms.synth.crush_parts import finish_part, text_part

    p = project("shop")
    add_session(p.conn, "S", title="s", created_at=T0, cost=0.4)
    for mid, at in (("m1", T0 + 60), ("m2", 0), ("m3", -5)):  # -5 was 1969-12-31 23:59:55, uncounted
        add_message(p.conn, mid, "S", "assistant", [text_part("ok"), finish_part("end_turn", at)], created_at=at,
                    model="claude-sonnet-4-5", provider="anthropic")
    p.close()
    (result,) = ingest(layout, p.db).results
    # the two messages and their two parts each
    assert any(w.startswith("6 rows without a usable timestamp") for w in result.warnings), result.warnings
    day = datetime.fromtimestamp(T0, timezone.utc).date()
    assert query(layout, "SELECT date, SUM(cost_usd) FROM daily_costs GROUP BY date") == [(day, Decimal("0.4"))]
    assert query(layout, "SELECT DISTINCT date FROM messages") == [(day,)]
