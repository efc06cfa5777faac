"""The headline's window and its cost tile when a sub-agent is dated long after its root (a new
user's lake: Cursor dates a sub-agent by its file's time, which can be today, while its root is
months old). The known-totals lake (conftest's `lake`, January 2026) with one Cursor conversation
of 2026-01-05 whose sub-agent's file is of 2026-12-06; figures checked against the lake's tables."""

import html
import os
import re
from datetime import date, datetime, timedelta, timezone

import pytest

from tests.conftest import ingest, query, scalar
from transforms.synth.cursor import jsonl_line, transcripts_dir, write_summaries
from warehouse.lake.ducklake import connect
from warehouse.serve.dashboard.server import render

ROOT_ID = "5e1f0c2a-7d3b-4a8e-9c41-2b6d8f0a1e37"
ROOT_AT = datetime(2026, 1, 5, 9, tzinfo=timezone.utc)
SUB_AT = datetime(2026, 12, 6, 12, tzinfo=timezone.utc)


@pytest.fixture
def late_subagent(lake, tmp_path):
    home = tmp_path / ".cursor"
    folder = transcripts_dir(home, str(tmp_path / "work" / "shop")) / ROOT_ID
    (folder / "subagents").mkdir(parents=True)
    (folder / f"{ROOT_ID}.jsonl").write_text(jsonl_line("user", "fix it") + "\n"
                                             + jsonl_line("assistant", "done") + "\n")
    sub = folder / "subagents" / "explore.jsonl"
    sub.write_text(jsonl_line("user", "look around") + "\n" + jsonl_line("assistant", "found it") + "\n")
    os.utime(sub, (SUB_AT.timestamp(), SUB_AT.timestamp()))  # no summary row: dated by its file's time
    write_summaries(home, [{"conversationId": ROOT_ID, "title": "fix", "model": "claude-4.5-sonnet",
                            "updatedAt": int(ROOT_AT.timestamp() * 1000)}])
    ingest(lake, homes={"cursor": [home]})
    return lake


def page(layout, params: str = "") -> str:
    with connect(layout.warehouse, ours=True) as con:
        body, status = render(con, "/", params)
    assert status == 200
    return body


def text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def tile(body: str, name: str) -> str:
    return text(re.search(rf'<div class="tile" id="tile-{name}">(.*?</div>)</div>', body, re.S).group(1))


def test_a_late_sub_agent_neither_anchors_the_headline_nor_makes_its_cost_tile_contradict_itself(late_subagent):
    lake = late_subagent
    # the scenario: the lake's last row is the sub-agent's share of its root's unknown cost
    assert query(lake, "SELECT is_root, cost_source, date FROM sessions WHERE provider = 'cursor' ORDER BY 1") == [
        (False, "unknown", SUB_AT.date()), (True, "unknown", ROOT_AT.date())]
    assert query(lake, "SELECT MAX(date), COUNT(*), COUNT(cost_usd) FROM daily_costs WHERE date > ?",
                 date(2026, 1, 31)) == [(SUB_AT.date(), 1, 0)]
    # the default window ends on the last day a root session started or money was spent (Q's $0.20)
    last = scalar(lake, "SELECT GREATEST((SELECT MAX(date) FROM sessions WHERE is_root), "
                        "(SELECT MAX(date) FROM daily_costs WHERE cost_usd > 0))")
    assert last == date(2026, 1, 7)
    first = last - timedelta(days=29)
    body = page(lake)
    said = text(re.search(r'<p class="meta" id="headline-window">(.*?)</p>', body, re.S).group(1))
    assert f"{first} – {last} (30 days)" in said and "a root session started or money spent" in said
    cost = scalar(lake, "SELECT SUM(cost_usd) FROM daily_costs WHERE date BETWEEN ? AND ?", first, last)
    roots, unknown = query(lake, "SELECT COUNT(*), COUNT(*) FILTER (WHERE cost_source = 'unknown') FROM sessions "
                                 "WHERE is_root AND date BETWEEN ? AND ?", first, last)[0]
    assert (roots, unknown) == (7, 2)  # shop's three Crush and three CodeWhale roots, Cursor's; cw-unknown, Cursor's
    # the cost is a floor (cw-unknown's and the Cursor root's costs are unknown): never "every cost known"
    assert tile(body, "cost") == (f"Cost ${float(cost):,.4f} a floor: some costs on these days unknown, not "
                                  "counted · root sessions started in the window: 2 of unknown cost "
                                  "no previous figure to compare with")
    assert tile(body, "sessions").startswith(f"Root sessions {roots} started in the window")
    # the cost chart's axis covers the days the trends beside it cover, the sub-agent's December too:
    # that day has no bar (its cost is unknown, not $0), and the note under the chart says so
    chart = re.search(r'<svg.*?</svg>', body[body.index('id="cost-over-time"'):], re.S).group(0)
    assert re.findall(r">([A-Z][a-z]{2} \d{2})<", chart)[-1] == "Dec 01"
    assert f"1 day whose every cost is unknown ({SUB_AT.date()}): no bar, not $0" in text(body)
    # the sub-agent's days alone: unknown, and said so; no root session started in them
    late = page(lake, "since=2026-11-07&until=2026-12-06")
    assert tile(late, "cost") == "Cost unknown every cost on these days unknown nothing to compare"
    assert tile(late, "sessions").startswith("Root sessions 0 started in the window")


def test_a_cost_priced_in_part_is_a_floor_not_every_cost_known(layout, tmp_path):
    """A Claude root with a request of an unpriced model is `partial`: its cost counts the priced
    requests only. The tile said "every cost known" beside the totals' "1 priced in part"."""
    from tests.test_claude import CWD, SID, T0, project, response
    from transforms.synth.claude import usage, user_line, write_jsonl

    home, other = tmp_path / "claude", "22222222-1111-4222-8333-444455556666"
    write_jsonl(project(home) / f"{SID}.jsonl", [user_line(SID, T0, CWD, "a")] + response(SID, T0, "m1", usage(1, 10)))
    write_jsonl(project(home) / f"{other}.jsonl", [user_line(other, T0, CWD, "b")]
                + response(other, T0, "m2", usage(1, 10)) + response(other, T0, "m3", usage(1, 10), model="glm-4.6"))
    ingest(layout, homes={"claude": [home]})
    assert query(layout, "SELECT cost_source, COUNT(*) FROM sessions WHERE is_root GROUP BY 1 ORDER BY 1") == [
        ("estimated", 1), ("partial", 1)]
    cost = scalar(layout, "SELECT SUM(cost_usd) FROM daily_costs")
    body = page(layout)
    assert "2 root sessions started · 1 priced in part" in body  # the totals, on the same days
    assert tile(body, "cost") == (f"Cost ${float(cost):,.4f} a floor: some requests on these days unpriced, not "
                                  "counted · root sessions started in the window: 1 priced in part "
                                  "no previous figure to compare with")
