"""Kimi CLI: real wire logs (wire.jsonl), state.json and kimi.json in tmp share dirs, through the
lake, read back by DuckDB. Expected numbers are spelled out from each fixture's own lines."""

import hashlib
import json
from collections import Counter
from datetime import datetime, timezone

import pytest
from genai_prices import Usage, calc_price

from tests.conftest import ingest_tables, query, scalar
from tests.test_gemini import digests, ingest_with_fifos, through_the_cli
from transforms.findings import Findings
from transforms.kimi.discover import discover
from transforms.kimi.normalise import Context, Session, parse_wire
from transforms.synth.kimi import (
    WireWriter, generate_home, register_work_dir, session_dir, token_usage, write_state,
)

SID = "6a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d"
WORK = "/home/dev/shop"
T = 1772439300.0  # 2026-03-02T08:15:00Z, epoch seconds as Kimi writes them


def line(dt: float, type_: str, payload: dict, agent: str | None = None) -> dict:
    message = {"type": type_, "payload": payload}
    if agent:
        message = {"type": "SubagentEvent", "payload": {"parent_tool_call_id": "tool_2", "agent_id": agent,
                                                        "subagent_type": "coder", "event": message}}
    return {"timestamp": T + dt, "message": message}


LINES = [
    {"type": "metadata", "protocol_version": "1.10"},
    line(1.0, "TurnBegin", {"user_input": "Fix the failing login test"}),
    line(1.1, "StepBegin", {"n": 1}),
    line(1.2, "ContentPart", {"type": "think", "think": "Run the ", "encrypted": None}),
    line(1.3, "ContentPart", {"type": "think", "think": "test first.", "encrypted": None}),
    line(1.4, "ToolCall", {"type": "function", "id": "tool_1", "function": {"name": "Shell", "arguments": '{"comm'},
                           "extras": None}),
    line(1.5, "ToolCallPart", {"arguments_part": 'and": "npm test"}'}),
    line(1.6, "StatusUpdate", {"context_usage": 0.05, "token_usage": token_usage(3000, 120, cache_read=6000),
                               "message_id": "chatcmpl-1", "plan_mode": False}),
    line(4.0, "ToolResult", {"tool_call_id": "tool_1", "return_value": {
        "is_error": True, "output": "FAIL src/login.test.ts", "message": "Command failed with exit code: 1.",
        "display": [{"type": "brief", "text": "Failed with exit code: 1"}]}}),
    line(4.1, "StepBegin", {"n": 2}),
    line(4.2, "ContentPart", {"type": "text", "text": "Fixed: "}),
    line(4.3, "ContentPart", {"type": "text", "text": "the handler."}),
    line(4.4, "StatusUpdate", {"token_usage": token_usage(1500, 40, cache_read=9000), "message_id": "chatcmpl-2"}),
    line(4.5, "StatusUpdate", {"plan_mode": False}),  # a status without usage: no request
    line(4.6, "TurnEnd", {}),
    line(5.0, "TurnBegin", {"user_input": [{"type": "text", "text": "Review the diff"}]}, agent="a1"),
    line(5.1, "StepBegin", {"n": 1}, agent="a1"),
    line(5.2, "ContentPart", {"type": "text", "text": "Looks fine."}, agent="a1"),
    line(5.3, "StatusUpdate", {"token_usage": token_usage(800, 20)}, agent="a1"),
]


def write_session(share, lines=LINES, sid=SID, title="Fix login"):
    register_work_dir(share, WORK)
    d = session_dir(share, WORK, sid)
    d.mkdir(parents=True, exist_ok=True)
    (d / "wire.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    write_state(d, title)
    return d


def test_a_session_by_hand(layout, tmp_path):
    share = tmp_path / ".kimi"
    write_session(share)
    before = digests(share)
    (result,) = ingest_tables(layout, homes={"kimi": [share]}).results
    assert result.status == "ok" and result.reconciled, (result.error, result.reconcile)
    # token_usage is disjoint already: total = input_other + cache read + cache creation + output
    assert query(layout, "SELECT session_id, request_id, input_uncached_tokens, cache_read_tokens, "
                         "cache_write_5m_tokens, output_tokens, total_tokens, is_sidechain, cost_usd, cost_source "
                         "FROM usage ORDER BY requested_at") == [
        (SID, "chatcmpl-1", 3000, 6000, 0, 120, 9120, False, None, "unknown"),
        (SID, "chatcmpl-2", 1500, 9000, 0, 40, 10540, False, None, "unknown"),
        (f"{SID}:a1", None, 800, 0, 0, 20, 820, True, None, "unknown")]
    assert query(layout, "SELECT session_id, parent_session_id, is_root, title, cost_usd, cost_source, total_tokens, "
                         "project_path, created_at FROM sessions ORDER BY is_root") == [
        (f"{SID}:a1", SID, False, None, None, "unknown", 820, WORK, datetime(2026, 3, 2, 8, 15, 5)),
        (SID, None, True, "Fix login", None, "unknown", 9120 + 10540, WORK, datetime(2026, 3, 2, 8, 15, 1))]
    # main: the prompt, one thinking run, the call, its result, one text run; the sub-agent: two
    assert dict(query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1")) == {
        "text": 4, "reasoning": 1, "tool_call": 1, "tool_result": 1}
    assert query(layout, "SELECT tool_name, tool_category, command, input, exit_code, is_error, result_text "
                         "FROM tool_calls") == [
        ("Shell", "shell", "npm test", '{"command":"npm test"}', 1, False, "FAIL src/login.test.ts")]
    assert digests(share) == before


def test_streamed_fragments_are_one_part(layout, tmp_path):
    """Kimi streams `ContentPart` fragments and merges a run of one type (kosong merge_in_place):
    4 fragment events here, 2 parts; tool arguments arrive as ToolCallPart deltas."""
    share = tmp_path / ".kimi"
    write_session(share)
    ingest_tables(layout, homes={"kimi": [share]})
    fragments = [x for x in LINES[:15] if x.get("message", {}).get("type") == "ContentPart"]
    assert len(fragments) == 4
    assert query(layout, "SELECT part_type, COALESCE(text, reasoning) FROM parts WHERE session_id = ? "
                         "AND part_type IN ('text', 'reasoning') AND role = 'assistant' ORDER BY created_at", SID) == [
        ("reasoning", "Run the test first."), ("text", "Fixed: the handler.")]


def test_a_sub_agents_own_wire_wins_over_the_wrapped_copies(layout, tmp_path):
    """Its events are in `subagents/a1/wire.jsonl` AND wrapped in the parent's wire: counted once.
    ccusage reads neither (is_kimi_wire_file keeps depth-3 files only; SubagentEvent lines are
    dropped by its `message.type == StatusUpdate` check), so the sub-agent's 820 tokens go missing;
    its `meta.json` names the model, so it is priced."""
    share = tmp_path / ".kimi"
    d = write_session(share)
    own = WireWriter(d / "subagents" / "a1" / "wire.jsonl", datetime.fromtimestamp(T + 5, timezone.utc))
    own.turn([{"type": "text", "text": "Review the diff"}])
    own.step(1, text="Looks fine.", usage=token_usage(800, 20))
    own.write()
    (d / "subagents" / "a1" / "meta.json").write_text(json.dumps({
        "agent_id": "a1", "subagent_type": "coder", "status": "completed", "description": "Review",
        "launch_spec": {"agent_id": "a1", "subagent_type": "coder", "model_override": None,
                        "effective_model": "kimi-k2-turbo-preview", "created_at": T}}))
    ingest_tables(layout, homes={"kimi": [share]})
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == 9120 + 10540 + 820
    at = datetime.fromtimestamp(T + 5, timezone.utc)
    cost = float(calc_price(Usage(input_tokens=800, output_tokens=20), "kimi-k2-turbo-preview",
                            genai_request_timestamp=at).total_price)
    child = query(layout, "SELECT title, model, cost_usd, cost_source FROM sessions WHERE NOT is_root")[0]
    assert child[:2] == ("Review", "kimi-k2-turbo-preview") and child[3] == "estimated"
    assert child[2] == pytest.approx(cost, abs=1e-6)  # priced at a timestamp a few ms apart
    root = query(layout, "SELECT cost_usd, cost_source FROM sessions WHERE is_root")[0]
    assert root == (pytest.approx(child[2]), "partial")  # its own requests are unpriced


def test_a_fork_counts_its_copied_lines_once(layout, tmp_path):
    """/fork (session_fork.py) copies the wire lines of the first turns verbatim and titles the
    new session `Fork: <title>`; ccusage keys entries on the session folder, so it counts the
    copied requests twice (here 9120 + 10540 tokens)."""
    share = tmp_path / ".kimi"
    write_session(share)
    fork_lines = LINES[:15] + [line(90.0, "TurnBegin", {"user_input": "another way"}),
                               line(90.1, "StepBegin", {"n": 1}),
                               line(90.2, "StatusUpdate", {"token_usage": token_usage(2000, 60)})]
    fork = "7b1c2d3e-4f5a-4b6c-9d7e-8f9a0b1c2d3e"
    write_session(share, fork_lines, sid=fork, title="Fork: Fix login")
    (result,) = ingest_tables(layout, homes={"kimi": [share]}).results
    assert result.reconciled, result.reconcile
    assert dict(query(layout, "SELECT session_id, SUM(total_tokens) FROM usage GROUP BY 1")) == {
        SID: 9120 + 10540, f"{SID}:a1": 820, fork: 2060}
    assert query(layout, "SELECT forked_from_session_id, message_count FROM sessions WHERE session_id = ?", fork) \
        == [(SID, 1)]


def test_homes_are_honoured(tmp_path):
    for where in ("user/.kimi", "share", "win/.kimi"):
        write_session(tmp_path / where)
    paths = lambda env: [s.path for s in discover(env=env).sources]  # noqa: E731
    group = hashlib.md5(WORK.encode()).hexdigest()
    assert paths({"HOME": str(tmp_path / "user")}) == [str(tmp_path / "user" / ".kimi" / "sessions" / group)]
    assert paths({"HOME": str(tmp_path / "user"), "KIMI_SHARE_DIR": str(tmp_path / "share")}) == [
        str(tmp_path / "share" / "sessions" / group)]
    assert paths({"USERPROFILE": str(tmp_path / "win")}) == [str(tmp_path / "win" / ".kimi" / "sessions" / group)]
    (found,) = discover(env={}, extra_roots=[str(tmp_path / "share")], use_default=False).sources
    assert found.project_path == WORK  # from kimi.json: the md5 folder name cannot be reversed
    assert "no Kimi CLI sessions" in discover(env={}, extra_roots=[str(tmp_path)], use_default=False).problems[0]


def test_agent_home_flag_and_config_section(tmp_path, monkeypatch, capsys):
    write_session(tmp_path / "k")
    assert through_the_cli(tmp_path, monkeypatch, capsys, "kimi", tmp_path / "k") == [
        {"provider": "kimi", "t": 9120 + 10540 + 820}]


def test_credentials_are_never_opened(layout, tmp_path):
    share = tmp_path / ".kimi"
    write_session(share)
    # config.toml holds API keys; credentials/ the OAuth tokens
    ingest_with_fifos(layout, "kimi", share, ("config.toml", "credentials/kimi-code.json"))
    assert scalar(layout, "SELECT COUNT(*) FROM sessions WHERE is_root") == 1


def test_a_legacy_wire_without_header(layout, tmp_path):
    """Wire protocol 1.1 files have no metadata line (WireFile falls back to
    WIRE_PROTOCOL_LEGACY_VERSION) and named a sub-agent's caller `task_tool_call_id`."""
    share = tmp_path / ".kimi"
    legacy = json.loads(json.dumps([x for x in LINES if x.get("type") != "metadata"]))  # a copy: edited below
    for x in legacy:
        wrapped = x["message"]["payload"]
        if x["message"]["type"] == "SubagentEvent":
            wrapped["task_tool_call_id"] = wrapped.pop("parent_tool_call_id")
    write_session(share, legacy)
    (result,) = ingest_tables(layout, homes={"kimi": [share]}).results
    assert result.reconciled, result.reconcile
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == 9120 + 10540 + 820
    assert scalar(layout, "SELECT extra_columns FROM sessions WHERE is_root") == '{"archived":false}'


def test_bad_lines_are_quarantined(layout, tmp_path):
    share = tmp_path / ".kimi"
    d = write_session(share)
    with open(d / "wire.jsonl", "a") as fh:
        fh.write('{"timestamp": 1772439400.0, "message": {"type": "Status\n')
    ingest_tables(layout, homes={"kimi": [share]})
    assert scalar(layout, "SELECT COUNT(*) FROM quarantine") == 1
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == 9120 + 10540 + 820


def test_generated_home_totals(layout, tmp_path):
    share = tmp_path / ".kimi"
    truth = generate_home(share, sessions=4, seed=3)
    before = digests(share)
    summary = ingest_tables(layout, homes={"kimi": [share]})
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    assert query(layout, "SELECT COUNT(*), COUNT(*) FILTER (WHERE is_root) FROM sessions") == [
        (truth.sessions, truth.roots)]
    cols = ("input_uncached_tokens", "cache_read_tokens", "cache_write_5m_tokens", "output_tokens", "total_tokens")
    assert query(layout, f"SELECT COUNT(*), COUNT(cost_usd), {', '.join(f'SUM({c})' for c in cols)} FROM usage") \
        == [(truth.requests, truth.priced_requests, *(truth.tokens[c] for c in cols))]
    assert dict(query(layout, "SELECT tool_name, COUNT(*) FROM tool_calls GROUP BY 1")) == truth.tool_calls
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE exit_code <> 0") == truth.nonzero_exits
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE is_error") == 0
    assert digests(share) == before


def test_one_assistant_message_per_step_though_tool_results_arrive_mid_stream():
    """kosong's `step` hands each tool call to the toolset as soon as the next streamed part
    arrives, and the result goes to the wire when the tool finishes: a ToolResult may sit between
    the step's own ToolCalls, before its StatusUpdate. One step is still one model response,
    one assistant message. Wire protocol 1.3 wrapped a sub-agent's events with only its
    `task_tool_call_id` (no `agent_id`): two Task calls run side by side are two sub-agents,
    each step of each one assistant message."""
    def wrapped(dt, task, type_, payload):
        return {"timestamp": T + dt, "message": {"type": "SubagentEvent", "payload": {
            "task_tool_call_id": task, "event": {"type": type_, "payload": payload}}}}

    def call(dt, cid, name, args):
        return line(dt, "ToolCall", {"type": "function", "id": cid, "function": {"name": name, "arguments": args},
                                     "extras": None})

    def result(dt, cid, output):
        return line(dt, "ToolResult", {"tool_call_id": cid, "return_value": {
            "is_error": False, "output": output, "message": "", "display": [], "extras": None}})

    def status(dt, n, wrap=None):
        payload = {"context_usage": 0.01 * n, "token_usage": token_usage(1000 * n, 50), "message_id": f"chatcmpl-{n}"}
        return wrapped(dt, wrap, "StatusUpdate", payload) if wrap else line(dt, "StatusUpdate", payload)

    lines = [
        {"type": "metadata", "protocol_version": "1.3"},
        line(1.0, "TurnBegin", {"user_input": "Compare the two handlers"}),
        line(1.1, "StepBegin", {"n": 1}),
        line(1.2, "ContentPart", {"type": "think", "think": "Read both.", "encrypted": None}),
        line(1.3, "ContentPart", {"type": "text", "text": "Reading "}),
        call(1.4, "tool_a", "ReadFile", '{"path": "a.ts"}'),
        call(1.5, "tool_b", "ReadFile", '{"pa'),
        result(1.51, "tool_a", "export const a = 1"),  # a is done while b and c stream
        line(1.52, "ToolCallPart", {"arguments_part": 'th": "b.ts"}'}),
        call(1.53, "tool_c", "ReadFile", '{"path": "c.ts"}'),
        result(1.54, "tool_b", "export const b = 2"),
        status(1.7, 1),
        result(1.8, "tool_c", "export const c = 3"),
        line(2.0, "StepBegin", {"n": 2}),
        call(2.1, "tool_t1", "Task", '{"description": "a", "subagent_name": "coder", "prompt": "Review a"}'),
        call(2.2, "tool_t2", "Task", '{"description": "b", "subagent_name": "coder", "prompt": "Review b"}'),
        status(2.3, 2),
        wrapped(2.4, "tool_t1", "TurnBegin", {"user_input": "Review a"}),
        wrapped(2.5, "tool_t2", "TurnBegin", {"user_input": "Review b"}),
        wrapped(2.6, "tool_t1", "StepBegin", {"n": 1}),
        wrapped(2.7, "tool_t2", "StepBegin", {"n": 1}),
        wrapped(2.8, "tool_t1", "ContentPart", {"type": "text", "text": "a is fine"}),
        wrapped(2.9, "tool_t2", "ContentPart", {"type": "text", "text": "b is "}),
        status(3.0, 3, wrap="tool_t1"),
        wrapped(3.1, "tool_t2", "ContentPart", {"type": "text", "text": "fine"}),
        status(3.2, 4, wrap="tool_t2"),
        wrapped(3.3, "tool_t1", "TurnEnd", {}),
        wrapped(3.4, "tool_t2", "TurnEnd", {}),
        result(3.5, "tool_t1", "a is fine"),
        result(3.6, "tool_t2", "b is fine"),
        line(4.0, "StepBegin", {"n": 3}),
        line(4.1, "ContentPart", {"type": "text", "text": "Both fine."}),
        status(4.2, 5),
        line(4.3, "TurnEnd", {}),
    ]
    wire = parse_wire("wire.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    steps = Counter()  # StatusUpdates with usage, per agent (None: the main agent), counted on the lines
    for x in lines[1:]:
        inner = x["message"]["payload"]["event"] if x["message"]["type"] == "SubagentEvent" else x["message"]
        task = x["message"]["payload"].get("task_tool_call_id") if inner is not x["message"] else None
        steps[task] += inner["type"] == "StatusUpdate" and "token_usage" in inner["payload"]
    assert steps == {None: 3, "tool_t1": 1, "tool_t2": 1}
    ctx = lambda agent: Context("src", WORK, f"{SID}:{agent}" if agent else SID, None, agent is not None)  # noqa: E731
    for agent, n in steps.items():
        session = Session(ctx(agent), Findings(), "wire").run([e for e in wire.events if e.agent == agent])
        assistant = [m for m in session.rows["messages"] if m["role"] == "assistant"]
        assert len(assistant) == n, agent
        assert [u["message_id"] for u in session.rows["usage"]] == [m["message_id"] for m in assistant]
    main = Session(ctx(None), Findings(), "wire").run([e for e in wire.events if e.agent is None])
    first = main.rows["messages"][1]["message_id"]  # step 1: its thinking, text, the 3 calls (b's arguments whole)
    assert [(p["part_type"], p.get("tool_input")) for p in main.rows["parts"] if p["message_id"] == first] == [
        ("reasoning", None), ("text", None), ("tool_call", '{"path": "a.ts"}'), ("tool_call", '{"path": "b.ts"}'),
        ("tool_call", '{"path": "c.ts"}')]
