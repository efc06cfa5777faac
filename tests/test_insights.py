"""The insight marts (issue 14): exact figures on fixtures built for them, through the real
ingest, merge and DuckLake. A real crush.db (no per-request usage: a step's cost is the root's
cost over the tree's assistant messages) and a real Claude Code home (per-request usage with the
`costUSD` Claude Code once recorded, so every cost is native and exact)."""

import dataclasses
import json
import re
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from tests.conftest import T0, Project, assistant, copy_home, ingest, ingest_tables, query, scalar
from transforms.synth.claude import assistant_lines, project_slug, tool_result, tool_use, usage, user_line, write_jsonl
from transforms.synth.crush import add_message, add_session
from transforms.synth.crush_parts import bash_output, finish_part, text_part, tool_call_part, tool_result_part
from warehouse.lake.layout import Layout

SONNET, HAIKU = "claude-sonnet-4-5", "claude-haiku-4-5"
D = Decimal


def step(c, mid, sid, t, call_id, name, args, result, *, is_error=False, model=SONNET):
    """One Crush step: an assistant message making one tool call, then the tool message with its result."""
    add_message(c, mid, sid, "assistant", [tool_call_part(call_id, name, args), finish_part("tool_use", t)],
                created_at=t, finished_at=t, model=model, provider="anthropic")
    add_message(c, f"{mid}-result", sid, "tool", [tool_result_part(call_id, name, result, is_error=is_error)],
                created_at=t + 1)


# --- a Crush project: root R (cost 1.6) with a sub-agent (0.3), root S (0.7), root Q (0.0) -------

# R makes 13 assistant messages and its sub-agent 3: the tree has 16, so each step costs 1.6 / 16 = 0.1


@pytest.fixture
def crush_lake(layout, built_once):
    """Built once per session (the tests only read it); each test has a copy of its home."""
    copy_home(built_once("insights-crush", _crush_lake).home, layout.home)
    return layout


def _crush_lake(root):
    layout = Layout.resolve(home=root / "home", machine="laptop", user="dev")
    p = Project(root / "projects", "shop")
    c = p.conn
    a, x = str(p.path / "a.py"), str(p.path / "x.py")
    add_session(c, "R", title="fix a", created_at=T0, cost=1.6)
    add_session(c, "m11$$call-agent", title="New Agent Session", created_at=T0 + 110, parent="R", cost=0.3)
    add_session(c, "S", title="stuck", created_at=T0 + 1000, cost=0.7)
    add_session(c, "Q", title="free", created_at=T0 + 2000, cost=0.0)
    view = {"file_path": a}
    steps = [  # R, one call per step, 10 s apart
        ("m1", "c1", "view", view, "A1"),  # first read of a.py
        ("m2", "c2", "view", view, "A1"),  # duplicate
        ("m3", "c3", "edit", {"file_path": a, "old_string": "1", "new_string": "2"}, "edited"),  # a change
        ("m4", "c4", "view", view, "A2"),  # not a duplicate: the file changed since
        ("m5", "c5", "view", view, "A2"),  # duplicate
        ("m6", "c6", "view", {"file_path": "b.py", "offset": 10, "limit": 5}, "B-part"),  # relative path, a range
        ("m7", "c7", "view", {"file_path": "b.py"}, "B-whole"),  # another range: not a duplicate
        ("m8", "c8", "bash", {"command": "npm test"}, bash_output("", stderr="fail", exit_code=1)),
        ("m9", "c9", "bash", {"command": "npm test"}, bash_output("", stderr="fail", exit_code=1)),
        ("m10", "c10", "bash", {"command": "npm test"}, bash_output("", stderr="fail", exit_code=1)),
        ("m11", "call-agent", "agent", {"prompt": "look around"}, "looked"),
    ]
    for i, (mid, cid, name, args, result) in enumerate(steps):
        step(c, mid, "R", T0 + 10 * (i + 1), cid, name, args, result)
    # the sub-agent (haiku) reads c.py twice, then answers
    sub = "m11$$call-agent"
    cpath = str(p.path / "c.py")
    step(c, "s1", sub, T0 + 112, "sc1", "view", {"file_path": cpath}, "C", model=HAIKU)
    step(c, "s2", sub, T0 + 114, "sc2", "view", {"file_path": cpath}, "C", model=HAIKU)
    assistant(c, "s3", sub, T0 + 116, model=HAIKU)
    # back in R: a command naming c.py (so c.py was used), then the answer
    step(c, "m12", "R", T0 + 130, "c12", "bash", {"command": "python c.py"}, bash_output("ok"))
    assistant(c, "m13", "R", T0 + 140)
    # S (0.7 over 7 steps: 0.1 each): an edit failing 3 times, a compaction, `make` failing twice
    for i in range(3):
        step(c, f"e{i}", "S", T0 + 1000 + 10 * i, f"ce{i}", "edit", {"file_path": x, "old_string": "q", "new_string": "r"},
             "old_string not found", is_error=True)
    add_message(c, "sum", "S", "assistant", [text_part("Summary so far"), finish_part("end_turn", T0 + 1040)],
                created_at=T0 + 1040, finished_at=T0 + 1040, model=SONNET, provider="anthropic", is_summary=True)
    step(c, "k1", "S", T0 + 1050, "ck1", "bash", {"command": "make"}, bash_output("", stderr="x", exit_code=2))
    step(c, "k2", "S", T0 + 1060, "ck2", "bash", {"command": "make"}, bash_output("", stderr="x", exit_code=2))
    assistant(c, "k3", "S", T0 + 1070)
    assistant(c, "q1", "Q", T0 + 2000)
    p.close()
    ingest(layout, p.db)
    return layout


def test_duplicate_reads(crush_lake):
    rows = query(crush_lake, "SELECT session_id, regexp_extract(path, '[^/]+$'), reads, duplicate_reads, "
                             "duplicate_result_bytes, duplicate_step_tokens, duplicate_cost_usd "
                             "FROM insight_duplicate_reads ORDER BY 1")
    assert rows == [
        # a.py read 4 times: m2 repeats m1, m5 repeats m4 (m4 follows the edit m3); each result is 2
        # bytes ("A1", "A2"): 2 + 2 = 4; two steps at 0.1 = 0.2; Crush records no per-step tokens
        ("R", "a.py", 4, 2, 4, None, D("0.2")),
        # the sub-agent's own context: s2 repeats s1 ("C", 1 byte), one step at 0.1
        ("m11$$call-agent", "c.py", 2, 1, 1, None, D("0.1")),
    ]  # b.py is read twice, but two different ranges: no row


def test_unused_reads(crush_lake):
    rows = query(crush_lake, "SELECT session_id, path, reads, result_bytes, read_cost_usd FROM insight_unused_reads")
    assert rows[0][1].endswith("/projects/shop/b.py")  # read by a relative path, resolved against the project
    b = rows[0][1]
    # a.py was edited after its first read; c.py (read by the sub-agent) is named by `python c.py`
    # afterwards; b.py never again: 2 reads ("B-part" 6 + "B-whole" 7 = 13 bytes), 2 steps at 0.1
    assert rows == [("R", b, 2, 13, D("0.2"))]


def test_read_edit_ratio(crush_lake):
    rows = query(crush_lake, "SELECT session_id, model, reads, changes, read_edit_ratio FROM insight_read_edit_ratio "
                             "ORDER BY model")
    # R's tree: sonnet read 6 times (m1 m2 m4 m5 m6 m7) and changed once (m3): 6 / 1; the sub-agent
    # (haiku) read twice and changed nothing: no ratio. S's edits all failed: no reads, no changes.
    assert rows == [("R", HAIKU, 2, 0, None), ("R", SONNET, 6, 1, 6.0)]


def test_idle_cost(crush_lake):
    rows = query(crush_lake, "SELECT session_id, cost_usd, assistant_messages, tool_calls FROM insight_idle_cost")
    # S cost 0.7 and every edit failed; R changed a.py; Q cost nothing
    assert rows == [("S", D("0.7"), 7, 5)]  # a DECIMAL, as every mart's money


def test_retry_loops(crush_lake):
    rows = query(crush_lake, "SELECT session_id, kind, tool_name, command, failures, step_tokens, cost_usd "
                             "FROM insight_retry_loops ORDER BY session_id")
    assert rows == [
        ("R", "shell_command", "bash", "npm test", 3, None, D("0.3")),  # m8 m9 m10: 3 steps at 0.1
        ("S", "tool_error", "edit", None, 3, None, D("0.3")),  # e0 e1 e2
    ]  # `make` failed only twice: no loop


def test_context_growth_and_compaction(crush_lake):
    rows = query(crush_lake, "SELECT session_id, requests, first_context_tokens, growth_per_request, compactions, "
                             "first_compaction_at, cost_usd, cost_after_compaction_usd FROM insight_context_growth")
    # Crush records no per-request usage (no context figures), but S's summary message is a
    # compaction: after it come k1, k2, k3 (3 steps at 0.1) of S's own 7 steps (0.7)
    at = datetime.fromtimestamp(T0 + 1040, timezone.utc).replace(tzinfo=None)
    assert rows == [("S", 0, None, None, 1, at, D("0.7"), D("0.3"))]


def test_subagent_share(crush_lake):
    rows = query(crush_lake, "SELECT session_id, agent_kind, subagents, subagent_cost_usd, root_cost_usd, share "
                             "FROM insight_subagent_share")
    # the sub-agent session `m11$$call-agent` was started by R's call `call-agent` of the `agent`
    # tool: 0.3 of R's 1.6 = 0.1875
    assert rows == [("R", "agent", 1, D("0.3"), D("1.6"), pytest.approx(0.3 / 1.6))]


def test_every_insight_has_the_lake_wide_session_key(crush_lake):
    from warehouse.catalog.marts import MARTS

    key = f"laptop/dev/crush/{query(crush_lake, 'SELECT DISTINCT source_id FROM sessions')[0][0]}/R"
    for mart in [m for m in MARTS if m.startswith("insight_") and m != "insight_usage_blocks"] + ["session_summary"]:
        columns = [r[0] for r in query(crush_lake, f"DESCRIBE {mart}")]
        assert columns[0] == "session_key", mart
    assert query(crush_lake, "SELECT session_key FROM session_summary WHERE session_id = 'R'") == [(key,)]


# --- a Claude Code home: per-request usage, cache buckets, a compaction, a sub-agent ----------

def at(hh, mm, ss=0):
    return datetime(2026, 2, 2, hh, mm, ss, tzinfo=timezone.utc)


def request(sid, when, cwd, n, blocks, u, cost, stop="end_turn", **fields):
    return assistant_lines(sid, when, cwd, message_id=f"msg_{sid}_{n}", request_id=f"req_{sid}_{n}", model=SONNET,
                           blocks=blocks, final_usage=u, stop_reason=stop, costUSD=cost, **fields)


@pytest.fixture
def claude_lake(layout, built_once):
    """Built once per session (the tests only read it); each test has a copy of its home."""
    copy_home(built_once("insights-claude", _claude_lake).home, layout.home)
    return layout


def _claude_lake(tmp_path):
    layout = Layout.resolve(home=tmp_path / "home", machine="laptop", user="dev")
    cwd = tmp_path / "web"
    cwd.mkdir()
    w = str(cwd)
    folder = tmp_path / "claude" / "projects" / project_slug(w)
    x = str(cwd / "x.py")
    c1 = [
        user_line("c1", at(10, 20), w, "go"),
        # r1: input 100, 5m write 1000, output 50 = 1150 tokens; context 1100
        *request("c1", at(10, 20), w, 1, [tool_use("t1", "Read", {"file_path": x})],
                 usage(100, 50, write_5m=1000), 0.01, stop="tool_use"),
        user_line("c1", at(10, 20, 5), w, [tool_result("t1", "print(1)")]),
        # r2: input 10, read 1000, 5m write 200, output 20 = 1230 tokens; context 1210; reads x.py again
        *request("c1", at(10, 22), w, 2, [tool_use("t2", "Read", {"file_path": x})],
                 usage(10, 20, cache_read=1000, write_5m=200), 0.02, stop="tool_use"),
        user_line("c1", at(10, 22, 5), w, [tool_result("t2", "print(1)")]),
        # r3: input 10, read 1200, 5m write 500, 1h write 300; context 2010
        *request("c1", at(10, 40), w, 3, [{"type": "text", "text": "hm"}],
                 usage(10, 30, cache_read=1200, write_5m=500, write_1h=300), 0.03),
        user_line("c1", at(11, 0), w, "Summary of the conversation so far", isCompactSummary=True),
        # r4: input 10, read 2290; context 2300
        *request("c1", at(11, 30), w, 4, [{"type": "text", "text": "done"}], usage(10, 10, cache_read=2290), 0.04),
    ]
    write_jsonl(folder / "c1.jsonl", c1)
    side = {"isSidechain": True, "agentId": "ag1"}
    write_jsonl(folder / "c1" / "subagents" / "agent-ag1.jsonl", [
        user_line("c1", at(10, 30), w, "Find it", **side),
        *request("c1", at(10, 30, 1), w, 9, [{"type": "text", "text": "found"}], usage(5, 5), 0.015, **side)])
    (folder / "c1" / "subagents" / "agent-ag1.meta.json").write_text(json.dumps({"agentType": "Explore"}))
    # c2: requests at 15:00 (exactly 5 h after the first block's start: still in it), 15:30
    # (past it: a new block from 15:00) and 21:10 (past 20:00: a new block from 21:00)
    c2 = [user_line("c2", at(15, 0), w, "more")]
    for n, (when, cost) in enumerate([(at(15, 0), 0.05), (at(15, 30), 0.06), (at(21, 10), 0.07)]):
        c2 += request("c2", when, w, n, [{"type": "text", "text": "ok"}], usage(1, 1), cost)
    write_jsonl(folder / "c2.jsonl", c2)
    ingest(layout, homes={"claude": [tmp_path / "claude"]})
    return layout


@pytest.fixture
def crush_and_claude_lake(layout, built_once):
    """The Crush project and the Claude Code home above in one lake (built once per session)."""
    def build(root):
        # the Crush lake above, copied rather than ingested again
        copy_home(built_once("insights-crush", _crush_lake).home, root / "home")
        return _claude_lake(root)  # the same home: its ingest keeps the Crush source it does not look at

    copy_home(built_once("insights-crush-and-claude", build).home, layout.home)
    return layout


def test_context_growth_lists_the_measured_growth_first_and_names_the_agent(crush_and_claude_lake, capsys):
    """Issue 32, item 14: Crush records no per-request usage, so its compacted sessions have no
    growth, yet they led the insight (0 requests, an empty growth) by their cost after the
    compaction; the dashboard showed a session id without its agent. The sessions whose growth is
    measured come first, costliest after a compaction then fastest; the others after them; each
    row names its agent."""
    from pipelines.cli import main
    from warehouse.lake.ducklake import connect
    from warehouse.serve.dashboard.server import render

    rows = query(crush_and_claude_lake, "SELECT provider, session_key, session_id, growth_per_request, "
                                        "cost_after_compaction_usd FROM insight_context_growth")
    measured = [r for r in rows if r[3] is not None]
    unmeasured = [r for r in rows if r[3] is None]  # Crush's compacted S; a one-request sub-agent
    assert measured and "crush" in {r[0] for r in unmeasured}
    # what put them first: a Crush session spent more after its compaction than any measured one
    assert max(r[4] or 0 for r in unmeasured) > max(r[4] or 0 for r in measured)
    # measured first; then the most spent after a compaction (none last), the fastest growth
    ordered = sorted(rows, key=lambda r: (r[3] is None, 1 if r[4] is None else -r[4], -(r[3] or 0), r[1]))
    assert main(["report", "--home", str(crush_and_claude_lake.home), "--insights", "--top", "0",
                 "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)["insight_context_growth"]
    assert [(r["provider"], r["session_key"]) for r in shown] == [r[:2] for r in ordered]
    with connect(crush_and_claude_lake.warehouse) as con:
        page, _ = render(con, "/insight", "name=insight_context_growth")
    table = re.search(r'<table id="insight_context_growth-table">(.*?)</table>', page, re.S).group(1)
    head = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>(.*?)</th>", table)]  # sort links in headers
    cells = [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
             for row in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>", 1)[1], re.S)]
    agent, session = head.index("provider"), head.index("session_key")
    assert [(c[agent], c[session]) for c in cells] == [(r[0], r[2]) for r in ordered]


def test_claude_duplicate_read_costs_its_request(claude_lake):
    rows = query(claude_lake, "SELECT session_id, reads, duplicate_reads, duplicate_result_bytes, "
                              "duplicate_step_tokens, duplicate_cost_usd FROM insight_duplicate_reads")
    # r2 re-read x.py ("print(1)", 8 bytes); its request made one call: 1230 tokens, $0.02
    assert rows == [("c1", 2, 1, 8, 1230.0, D("0.02"))]
    unused = query(claude_lake, "SELECT session_id, reads, result_bytes, read_step_tokens, read_cost_usd "
                                "FROM insight_unused_reads")
    assert unused == [("c1", 2, 16, 1150.0 + 1230.0, D("0.03"))]  # r1 + r2


def test_claude_context_growth(claude_lake):
    rows = query(claude_lake, "SELECT session_id, requests, first_context_tokens, last_context_tokens, "
                              "max_context_tokens, growth_per_request, compactions, cost_usd, "
                              "cost_after_compaction_usd FROM insight_context_growth WHERE session_id = 'c1'")
    # contexts 1100, 1210, 2010, 2300: (2300 - 1100) / 3 = 400 per request; the compaction at
    # 11:00 is followed by r4 only ($0.04) of c1's own 0.01 + 0.02 + 0.03 + 0.04 = 0.10
    assert rows == [("c1", 4, 1100, 2300, 2300, 400.0, 1, D("0.1"), D("0.04"))]


def test_claude_cache_efficiency(claude_lake):
    rows = query(claude_lake, "SELECT requests, input_tokens, cache_read_tokens, cache_write_tokens, "
                              "cache_read_share, unread_write_tokens FROM insight_cache_efficiency "
                              "WHERE session_id = 'c1'")
    # input 1100 + 1210 + 2010 + 2300 = 6620; reads 1000 + 1200 + 2290 = 4490; writes
    # 1000 + 200 + 500 + 300 = 2000. Read back: r1's 1000 (r2 read at +2 min), r3's 1h 300 (r4 at
    # +50 min). Never: r2's 200 (next read r3 at +18 min > 5), r3's 5m 500 (r4 at +50 min): 700
    assert rows == [(4, 6620, 4490, 2000, pytest.approx(4490 / 6620, rel=1e-12), 700)]


def test_claude_subagent_share_by_agent_type(claude_lake):
    rows = query(claude_lake, "SELECT session_id, agent_kind, subagents, subagent_cost_usd, root_cost_usd, share "
                              "FROM insight_subagent_share")
    # the root's cost holds its sub-agent's: 0.01 + 0.02 + 0.03 + 0.04 + 0.015 = 0.115
    assert rows == [("c1", "Explore", 1, D("0.015"), D("0.115"), pytest.approx(0.015 / 0.115))]


def test_claude_usage_blocks_follow_ccusage(claude_lake):
    rows = query(claude_lake, "SELECT \"user\", strftime(block_start, '%H:%M'), strftime(block_end, '%H:%M'), "
                              "requests, sessions, cost_usd FROM insight_usage_blocks ORDER BY block_start")
    assert rows == [
        # from 10:20 (floored to 10:00): c1's 4 requests, its sub-agent's, and c2's at 15:00 (not
        # MORE than 5 h after 10:00): 0.01 + 0.02 + 0.03 + 0.04 + 0.015 + 0.05 = 0.165
        ("dev", "10:00", "15:00", 6, 3, D("0.165")),
        ("dev", "15:00", "20:00", 1, 1, D("0.06")),  # 15:30 is 5.5 h after 10:00
        ("dev", "21:00", "02:00", 1, 1, D("0.07")),  # 21:10 is past 15:00 + 5 h
    ]


# --- a team lake: two machines, one source_id -------------------------------------------------

def test_two_machines_sharing_a_source_id_stay_apart(layout, project):
    """The same crush.db path on two machines hashes to the same source_id: the marts keep the
    machines' sessions apart (before the machine joined the keys, each side counted the other's)."""
    p = project("shop")
    c = p.conn
    a = str(p.path / "a.py")
    add_session(c, "R", title="r", created_at=T0, cost=1.0)
    assistant(c, "r1", "R", T0 + 10)
    assistant(c, "r2", "R", T0 + 20)
    c.commit()
    ingest_tables(layout, p.db)  # laptop: R with 2 messages (the marts are built by desktop's merge)
    step(c, "r3", "R", T0 + 30, "v1", "view", {"file_path": a}, "A")
    step(c, "r4", "R", T0 + 40, "v2", "view", {"file_path": a}, "A")
    p.close()
    ingest(dataclasses.replace(layout, machine="desktop"), p.db)  # desktop: 6 messages, a duplicate read
    assert len({r[0] for r in query(layout, "SELECT DISTINCT source_id FROM sessions")}) == 1
    rows = query(layout, "SELECT machine, session_key, messages, tool_calls, cost_usd FROM session_summary "
                         "ORDER BY machine")
    source = query(layout, "SELECT DISTINCT source_id FROM sessions")[0][0]
    assert rows == [("desktop", f"desktop/dev/crush/{source}/R", 6, 2, 1.0),
                    ("laptop", f"laptop/dev/crush/{source}/R", 2, 0, 1.0)]
    # each machine's 1.0 split over its own assistant messages, never the other's
    costs = query(layout, "SELECT machine, SUM(cost_usd), SUM(sessions) FROM daily_costs GROUP BY 1 ORDER BY 1")
    assert costs == [("desktop", D("1.0"), 1), ("laptop", D("1.0"), 1)]
    dupes = query(layout, "SELECT machine, duplicate_reads, duplicate_cost_usd FROM insight_duplicate_reads")
    assert dupes == [("desktop", 1, D("0.25"))]  # desktop's 1.0 over its 4 steps


def test_usage_blocks_match_ccusage_rule_on_many_requests(layout, tmp_path):
    """Seeded request times with gaps around the 5-hour edges; the blocks computed here by
    ccusage's loop (a new block when a request is more than 5 h after the block's start or after
    the request before; the start floored to the hour) are the mart's."""
    import random

    rng = random.Random(14)
    cwd = tmp_path / "long"
    cwd.mkdir()
    gaps = [timedelta(minutes=1), timedelta(minutes=40), timedelta(hours=2), timedelta(hours=4, minutes=59),
            timedelta(hours=5), timedelta(hours=5, minutes=1), timedelta(hours=7)]
    when, times, lines = at(9, 7), [], [user_line("long", at(9, 7), str(cwd), "go")]
    for n in range(80):
        times.append(when)
        lines += request("long", when, str(cwd), n, [{"type": "text", "text": "ok"}], usage(1, 1), 0.001)
        when += rng.choice(gaps)
    write_jsonl(tmp_path / "claude" / "projects" / project_slug(str(cwd)) / "long.jsonl", lines)
    ingest(layout, homes={"claude": [tmp_path / "claude"]})
    expected, start, last, within_runs = [], None, None, 0
    for t in times:
        if start is None or t - start > timedelta(hours=5) or t - last > timedelta(hours=5):
            within_runs += last is not None and t - last <= timedelta(hours=5)  # no gap: the start rule alone
            start = t.replace(minute=0, second=0, microsecond=0)
            expected.append([start.replace(tzinfo=None), 0])
        expected[-1][1] += 1
        last = t
    assert within_runs >= 3  # the fixture exercises both rules
    rows = query(layout, "SELECT block_start, requests FROM insight_usage_blocks ORDER BY block_start")
    assert [list(r) for r in rows] == expected
    assert len(expected) > 10 and sum(n for _, n in expected) == 80


def test_an_unpriced_step_leaves_the_cost_unknown_not_zero(layout, tmp_path):
    """A model no price table knows, and no recorded cost: the tokens are known, the cost NULL."""
    cwd = tmp_path / "glm"
    cwd.mkdir()
    w, f = str(cwd), str(cwd / "f.py")
    lines = [user_line("g", at(9, 0), w, "go")]
    for n in range(2):
        lines += assistant_lines("g", at(9, n + 1), w, message_id=f"msg_g{n}", request_id=f"req_g{n}", model="glm-4.6",
                                 blocks=[tool_use(f"tg{n}", "Read", {"file_path": f})], final_usage=usage(7, 3),
                                 stop_reason="tool_use")
        lines.append(user_line("g", at(9, n + 1, 5), w, [tool_result(f"tg{n}", "x")]))
    write_jsonl(tmp_path / "claude" / "projects" / project_slug(w) / "g.jsonl", lines)
    ingest(layout, homes={"claude": [tmp_path / "claude"]})
    assert query(layout, "SELECT duplicate_reads, duplicate_step_tokens, duplicate_cost_usd "
                         "FROM insight_duplicate_reads") == [(1, 10.0, None)]  # 7 + 3 tokens
    assert query(layout, "SELECT reads, read_step_tokens, read_cost_usd FROM insight_unused_reads") == [(2, 20.0, None)]


def test_an_incremental_refresh_equals_a_fresh_computation(layout, project, monkeypatch):
    """Every mart declared `-- refresh: by project` gives, after a merge that touched one project
    only, the rows computed afresh from the tables: their project really comes from their rows."""
    from tests.support_marts import recompute_marts
    from warehouse.catalog import marts
    from warehouse.catalog.marts import mart_sql
    from warehouse.lake.ducklake import connect

    monkeypatch.setattr(marts, "WHOLE_BELOW_ROWS", -1)  # refreshed by project, as a lake past it is

    dbs = []
    for name in ("shop", "blog"):
        p = project(name)
        add_session(p.conn, "R", title=name, created_at=T0, cost=0.4)
        for n in range(2):
            step(p.conn, f"m{n}", "R", T0 + 10 * n, f"c{n}", "view", {"file_path": str(p.path / "a.py")}, "A")
        p.conn.commit()
        dbs.append(p)
    ingest(layout, *(p.db for p in dbs))
    shop = dbs[0]
    add_session(shop.conn, "N", title="new", created_at=T0 + 100, cost=0.3)
    for n in range(3):
        step(shop.conn, f"n{n}", "N", T0 + 100 + 10 * n, f"d{n}", "bash", {"command": "make"},
             bash_output("", stderr="x", exit_code=2))
    shop.close()
    dbs[1].close()
    ingest(layout, *(p.db for p in dbs))  # only shop changed
    with connect(layout.warehouse) as con:
        recompute_marts(con, name_of=lambda name: f"fresh_{name}")
        for name, _ in mart_sql():
            if not name.startswith("_"):
                for a, b in ((name, f"fresh_{name}"), (f"fresh_{name}", name)):
                    assert con.execute(f"SELECT COUNT(*) FROM (FROM {a} EXCEPT ALL FROM {b})").fetchone()[0] == 0, name
        assert con.execute("SELECT COUNT(*) FROM insight_retry_loops WHERE session_id = 'N'").fetchone()[0] == 1
        assert con.execute("SELECT COUNT(*) FROM insight_duplicate_reads").fetchone()[0] == 2


# --- every agent of the demo: models named as the report names them --------------------------

def test_insights_group_and_name_models_as_the_report_does(layout, built_once, capsys):
    """Reads per edit listed `claude-sonnet-4-5-20250929` beside `claude-sonnet-4-5`, and Goose's
    and Kilo's steps as `no model recorded`, where `agentlake report --by model` counts them
    under one `model_name` (their requests' model). Each insight that shows models now shows the
    report's names, each once; a model no one recorded stays NULL in SQL (as in daily_costs) and
    reads `no model recorded` in the tables."""
    from pipelines.cli import main
    from tests.test_five_agents import ingested_demo
    from warehouse.serve.labels import NO_MODEL

    ingested_demo(built_once, layout)

    def report(*args):
        assert main(["report", "--home", str(layout.home), "--top", "0", *args]) == 0
        return capsys.readouterr().out

    by_model = json.loads(report("--by", "model", "--format", "json"))["by_model"]
    name_of = {m: r["model_name"] for r in by_model if r["models"] for m in r["models"].split(", ")}
    agents_of = {r["model_name"]: set(r["agents"].split(", ")) for r in by_model}
    assert name_of["claude-sonnet-4-5-20250929"] == name_of["claude-sonnet-4-5"] == "claude-sonnet-4-5"
    insights = json.loads(report("--insights", "--format", "json"))

    ratio = [r["model_name"] for r in insights["insight_read_edit_ratio"]]
    assert len(ratio) == len(set(ratio)) and "claude-sonnet-4-5" in ratio
    assert not {"claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001"} & set(ratio)
    # each step under the name the report gives its model, and a model the report counts that
    # agent's messages under (Goose and Kilo record the model on their requests only)
    steps = query(layout, "SELECT DISTINCT provider, model, model_name FROM insight_read_edit_ratio")
    assert {p for p, *_ in steps} >= {"claude", "goose", "kilo"}
    # Cursor records no model at all: its steps stay NULL (its edits count since is_error null is
    # no error), and every other's has the report's name
    unnamed = {p for (p,) in query(layout, "SELECT provider FROM messages GROUP BY 1 HAVING COUNT(model) = 0")}
    assert "cursor" in unnamed and "cursor" in {p for p, *_ in steps}
    for provider, model, name in steps:
        if model is None:
            assert provider in unnamed and name is None, (provider, model, name)
            continue
        assert name == name_of[model] and provider in agents_of[name], (provider, model)

    cache = {(r["project"], r["model_name"]) for r in insights["insight_cache_efficiency"]}
    assert len(cache) == len(insights["insight_cache_efficiency"])  # one row per project and name
    assert {n for _, n in cache} <= set(agents_of) and ("webshop", "claude-sonnet-4-5") in cache

    idle = insights["insight_idle_cost"]
    assert len({(r["project"], r["models"]) for r in idle}) == len(idle)
    assert {m for r in idle if r["models"] for m in r["models"].split(", ")} <= set(agents_of)
    for (models, names) in query(layout, "SELECT models, model_names FROM insight_idle_cost"):
        assert (names is None) == (models is None)
        assert names is None or names.split(", ") == sorted({name_of[m] for m in models.split(", ")})
    # NULL in SQL, said in words in the table (docs/CLI.md): the rows the table's words stand for
    nameless = [r for r in idle if r["models"] is None]
    assert nameless and sum(r["sessions"] for r in nameless) == scalar(
        layout, "SELECT COUNT(*) FROM insight_idle_cost WHERE model_names IS NULL")
    table = report("--insights")
    idle_table = table.split("Idle cost", 1)[1].split("\nSQL: ", 1)[0]
    assert sum(1 for line in idle_table.splitlines() if f"  {NO_MODEL}  " in line) == len(nameless)
    assert "claude-sonnet-4-5-20250929" not in table.split("Reads per edit", 1)[1].split("\nSQL: ", 1)[0]


def test_an_edit_of_an_agent_that_flags_only_failures_is_a_change(built_once):
    """Codex, Cursor, Aider and Codebuff record `is_error` only when a call failed (null
    otherwise): their edits with a result counted as no change, so `file_activity` held rows of
    zeros and `insight_idle_cost` blamed Codex sessions that had edited files (a trial)."""
    from tests.support_homes import quickstart_with_a_typo

    built = quickstart_with_a_typo(built_once)  # the default demo, read only
    assert built.code == 1 and ", 0 failed" in built.out  # 1: the place it was told of is missing
    layout = Layout.resolve(home=built.home)
    unflagged = dict(query(layout, "SELECT provider, COUNT(*) FROM tool_calls WHERE has_call AND file_path IS NOT NULL "
                                   "AND tool_category IN ('edit', 'write') AND has_result AND is_error IS NULL "
                                   "GROUP BY 1"))
    assert unflagged.get("codex"), unflagged
    changed = dict(query(layout, "SELECT provider, SUM(changes) FROM file_activity GROUP BY 1"))
    assert all(changed[provider] >= n for provider, n in unflagged.items()), (changed, unflagged)
    assert not query(layout, "SELECT provider, project FROM file_activity WHERE changes = 0 AND failed_changes = 0 "
                             "AND reads = 0 AND versions = 0")  # a row that counts nothing
    blamed = query(layout, """SELECT i.session_key FROM insight_idle_cost AS i
        JOIN sessions AS s ON s.is_root AND concat_ws('/', s.machine, s."user", s.provider, s.source_id,
                                                     s.session_id) = i.session_key
        JOIN tool_calls AS c ON c.machine = s.machine AND c.source_id = s.source_id
         AND (c.session_id = s.session_id OR c.session_id IN (SELECT session_id FROM sessions AS sub
              WHERE sub.machine = s.machine AND sub.source_id = s.source_id AND sub.root_session_id = s.session_id))
        WHERE c.tool_category IN ('edit', 'write') AND c.has_result AND c.is_error IS NULL AND c.file_path IS NOT NULL""")
    assert not blamed, blamed


# --- a folder's listing is no read of a file -----------------------------------------------

# each agent's tools that list a folder (name -> agent), in the `read` category with the folder as
# their file_path: OpenCode's `list` and Codex's `list_dir` were counted as reads of files, and
# listing one folder twice as a duplicate read
LISTINGS = {"ls": ("aider", "crush", "pi"), "LS": ("claude", "cursor", "droid"), "list": ("opencode",),
            "list_dir": ("antigravity", "codewhale", "codex", "cursor"), "read_dir": ("codex",),
            "list_directory": ("amp", "codebuff", "gemini", "qwen"), "list_files": ("kilo",), "tree": ("goose",),
            "list_code_definition_names": ("kilo",)}
# read-category tools whose names look like a listing's and are not one: none names a folder
NOT_LISTINGS = {"list_mcp_resources", "list_resources", "list_windows", "lsp", "lsp_diagnostics"}


def test_every_agents_folder_listing_is_named_in_the_marts_listings():
    import importlib

    import duckdb

    from transforms.providers import PROVIDERS
    from warehouse.catalog.marts import mart_sql

    with duckdb.connect() as con:
        con.execute(dict(mart_sql())["_listings"])
        listed = {r[0] for r in con.execute("SELECT tool_name FROM _listings()").fetchall()}
    assert listed == {name.lower() for name in LISTINGS}
    reads = {}  # agent -> its read-category tools
    for agent in PROVIDERS:
        tools = importlib.import_module(f"transforms.{agent}.tools")
        categories = tools.TOOLS.categories if hasattr(tools, "TOOLS") else tools._CATEGORY
        reads[agent] = {name for name, category in categories.items() if category == "read"}
    for name, agents in LISTINGS.items():
        assert all(name in reads[agent] for agent in agents), name
    # a new agent's listing tool is named here, in one set or the other
    looks_like_one = {n for names in reads.values() for n in names
                      if re.search(r"(^|_)(ls|list|dir|tree|folder)", n.lower())}
    assert looks_like_one <= set(LISTINGS) | NOT_LISTINGS, looks_like_one - set(LISTINGS) - NOT_LISTINGS


def test_a_folder_listed_twice_is_neither_a_file_nor_a_duplicate_read(layout, tmp_path):
    cwd = tmp_path / "web"
    cwd.mkdir()
    w, x = str(cwd), str(cwd / "x.py")
    folder = tmp_path / "claude" / "projects" / project_slug(w)
    lines = [user_line("l1", at(9, 0), w, "look")]
    for n, (name, args, result) in enumerate([("LS", {"path": w}, "- x.py"), ("LS", {"path": w}, "- x.py"),
                                              ("Read", {"file_path": x}, "print(1)"),
                                              ("Read", {"file_path": x}, "print(1)")], 1):
        lines += [*request("l1", at(9, n), w, n, [tool_use(f"t{n}", name, args)], usage(10, 5), 0.01, stop="tool_use"),
                  user_line("l1", at(9, n, 5), w, [tool_result(f"t{n}", result)])]
    write_jsonl(folder / "l1.jsonl", lines)
    ingest(layout, homes={"claude": [tmp_path / "claude"]})
    assert query(layout, "SELECT tool_name, file_path FROM tool_calls ORDER BY tool_call_id")[0] == ("LS", w)
    assert query(layout, "SELECT path, reads FROM file_activity") == [(x, 2)]  # the folder: no row
    assert query(layout, "SELECT path, reads, duplicate_reads FROM insight_duplicate_reads") == [(x, 2, 1)]
    assert query(layout, "SELECT COUNT(*) FROM insight_unused_reads WHERE path = ?", w) == [(0,)]
