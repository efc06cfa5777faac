"""Issue 12, "Wrong numbers": defects found on real data, each reproduced on real files in
tmp_path (JSONL transcripts, JSON session files, SQLite databases) and read back through the lake."""

import json
import sqlite3
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from tests.conftest import ingest, ingest_tables, query, scalar
from transforms.synth.claude import base, project_slug, tool_result, tool_use, usage, user_line, write_jsonl
from transforms.pricing import Buckets, price_buckets

SID = "5d1e2c44-1111-4222-8333-444455556666"
SONNET = "claude-sonnet-4-5-20250929"
CWD = "/home/dev/shop"
T0 = datetime(2026, 3, 2, 9, 15, tzinfo=timezone.utc)


def claude_project(home):
    return home / "projects" / project_slug(CWD)


def streamed(at, n, output, stop_reason, call_id, line_uuid):
    """One assistant line of request n: a tool call, with its usage as recorded at that moment."""
    message = {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": SONNET,
               "content": [tool_use(call_id, "Bash", {"command": f"echo {n}"})],
               "stop_reason": stop_reason, "stop_sequence": None, "usage": usage(3, output, cache_read=1000)}
    return base("assistant", SID, at, CWD, line_uuid=line_uuid, requestId=f"req_{n}", message=message)


def test_claude_side_question_file_holds_the_final_copy_and_replays_lines_it_does_not_own(layout, tmp_path):
    """Items 1 and 2: `subagents/agent-aside_question-*.jsonl` replays its parent's lines. The
    main transcript holds an early streamed copy of three requests (stop_reason null, output
    36/47/49); the side file holds the final copy (611/165/151). Its replayed tool results are
    the parent's: their calls have results, and the side session holds only its own lines."""
    home = tmp_path / "claude"
    early, final = (36, 47, 49), (611, 165, 151)
    main = [user_line(SID, T0, CWD, "fix it", line_uuid="u-prompt")]
    side_replay = [user_line(SID, T0, CWD, "fix it", line_uuid="u-prompt")]
    for n in range(3):
        at = T0 + timedelta(seconds=10 * (n + 1))
        main.append(streamed(at, n, early[n], None, f"toolu_{n}", f"u-call-{n}"))
        side_replay.append(streamed(at, n, final[n], "tool_use", f"toolu_{n}", f"u-call-{n}"))
        result = user_line(SID, at + timedelta(seconds=2), CWD, [tool_result(f"toolu_{n}", f"out {n}")],
                           line_uuid=f"u-result-{n}")
        side_replay.append(result)
        if n < 2:
            main.append(result)  # the third result line sits only in the side file
    # the main session goes on after the side question: its file ends later than the side file
    later = T0 + timedelta(hours=1)
    main.append(user_line(SID, later, CWD, "and now?", line_uuid="u-later"))
    main.append(streamed(later, 9, 20, "end_turn", "toolu_9", "u-call-9"))
    main.append(user_line(SID, later + timedelta(seconds=1), CWD, [tool_result("toolu_9", "done")],
                          line_uuid="u-result-9"))
    write_jsonl(claude_project(home) / f"{SID}.jsonl", main)
    aside = "aside_question-7f3a"
    own_at = T0 + timedelta(minutes=10)
    own = [user_line(SID, own_at, CWD, "what does step 2 do?", isSidechain=True, agentId=aside, line_uuid="u-q"),
           base("assistant", SID, own_at + timedelta(seconds=1), CWD, isSidechain=True, agentId=aside,
                line_uuid="u-a", requestId="req_aside",
                message={"id": "msg_aside", "type": "message", "role": "assistant", "model": SONNET,
                         "content": [{"type": "text", "text": "it echoes"}], "stop_reason": "end_turn",
                         "stop_sequence": None, "usage": usage(5, 12)})]
    write_jsonl(claude_project(home) / SID / "subagents" / f"agent-{aside}.jsonl", side_replay + own)
    summary = ingest_tables(layout, homes={"claude": [home]})
    assert summary.results[0].status == "ok" and summary.results[0].reconciled, summary.results[0].reconcile

    # item 1: the final copy of each request, wherever it sits, in the session that made it
    assert query(layout, "SELECT message_id, session_id, is_sidechain, output_tokens FROM usage ORDER BY 1") == [
        ("msg_0", SID, False, final[0]), ("msg_1", SID, False, final[1]), ("msg_2", SID, False, final[2]),
        ("msg_9", SID, False, 20), ("msg_aside", f"agent-{aside}", True, 12)]

    def price(b, at):
        return price_buckets(b, SONNET, "anthropic", at).cost_usd

    want = sum(price(Buckets(3, 1000, 0, 0, final[n]), T0 + timedelta(seconds=10 * (n + 1))) for n in range(3))
    want += price(Buckets(3, 1000, 0, 0, 20), later) + price(Buckets(5, 0, 0, 0, 12), own_at + timedelta(seconds=1))
    assert scalar(layout, "SELECT cost_usd FROM sessions WHERE is_root") == pytest.approx(want, abs=1e-12)

    # item 2: every call has its result, in the parent's session; the side session holds its own lines only
    assert query(layout, "SELECT session_id, tool_call_id, has_result, has_call FROM tool_calls ORDER BY 2") == [
        (SID, f"toolu_{n}", True, True) for n in (0, 1, 2, 9)]
    assert dict(query(layout, "SELECT session_id, COUNT(*) FROM messages GROUP BY 1")) == {
        SID: 1 + 3 + 3 + 3, f"agent-{aside}": 2}


# ---------------------------------------------------------------------------------- item 4

def test_a_session_that_made_no_billed_request_costs_a_known_zero(layout, tmp_path):
    """Item 4: a probe, a `<synthetic>` error reply, an aborted turn: no billed request, so a
    known $0 (`estimated`: Claude Code and Codex record no cost), never `unknown`."""
    from tests.test_codex import FIXTURE, write_fixture as write_rollout

    claude = tmp_path / "claude"
    synthetic = base("assistant", SID, T0 + timedelta(seconds=1), CWD, isApiErrorMessage=True, message={
        "id": "err", "type": "message", "role": "assistant", "model": "<synthetic>",
        "content": [{"type": "text", "text": "API Error: 529 overloaded"}], "usage": {"input_tokens": 0, "output_tokens": 0}})
    write_jsonl(claude_project(claude) / f"{SID}.jsonl", [user_line(SID, T0, CWD, "hello?"), synthetic])
    codex = tmp_path / "codex"
    probe = "\n".join(FIXTURE.splitlines()[:6])  # meta, context, prompts, a token_count with no info
    assert '"token_count","info":null' in probe and '"total_token_usage"' not in probe
    write_rollout(codex, probe)
    summary = ingest(layout, homes={"claude": [claude], "codex": [codex]})
    assert all(r.status == "ok" for r in summary.results)
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == 0
    assert query(layout, "SELECT provider, cost_usd, cost_source FROM sessions ORDER BY 1") == [
        ("claude", 0.0, "estimated"), ("codex", 0.0, "estimated")]
    # daily_costs shows the $0 as known, never a `<synthetic>` or blank-model row of unknown cost
    rows = query(layout, "SELECT provider, model, cost_source, cost_usd FROM daily_costs ORDER BY 1")
    assert [r[0] for r in rows] == ["claude", "codex"]
    assert all(r[2] == "estimated" and r[3] == 0 for r in rows), rows


# ---------------------------------------------------------------------------------- item 6

def test_a_stored_cost_that_is_not_a_number_is_unknown_and_reported(layout, tmp_path, project):
    """Item 6: text where Crush, CodeWhale or OpenCode store a cost is not a native cost: the
    cost is `unknown` (CodeWhale, OpenCode: estimated from the tokens where it can be) and each
    such value is counted in a warning."""
    from tests.test_opencode import answer, one_session
    from transforms.synth.codewhale import cost_snapshot, session_doc, text_block, write_session
    from transforms.synth.crush import add_session
    from transforms.synth.opencode import tokens, user_info

    p = project("shop")
    add_session(p.conn, "S", title="garbled", created_at=1767225600, cost=0.5)
    add_session(p.conn, "G", title="fine", created_at=1767225600, cost=0.25)
    p.conn.execute("UPDATE sessions SET cost = 'n/a' WHERE id = 'S'")
    p.close()
    assert sqlite3.connect(p.db).execute("SELECT typeof(cost) FROM sessions WHERE id = 'S'").fetchone() == ("text",)
    cw = tmp_path / "cw" / "sessions"
    garbled = dict(cost_snapshot(0.04), session_cost_usd="0,04 USD")
    msgs = [{"role": "user", "content": [text_block("hi")]}, {"role": "assistant", "content": [text_block("ok")]}]
    write_session(cw, session_doc("cw-garbled", title="g", created_at=T0, workspace=p.path, messages=msgs,
                                  total_tokens=5000, cost=garbled, model="glm-4.6", model_provider="custom"))
    oc = tmp_path / "oc"
    usage_tokens = tokens(input=100, output=10)
    one_session(oc, [(user_info("msg_u", "ses_A", 1772442901000), []),
                     answer("msg_a", "ses_A", cost="free", usage=usage_tokens)]).close()
    summary = ingest_tables(layout, p.db, codewhale_homes=[tmp_path / "cw"], homes={"opencode": [oc]})
    by = {r.source.provider: r for r in summary.results}
    assert {k: r.status for k, r in by.items()} == {"crush": "ok", "codewhale": "ok", "opencode": "ok"}
    assert query(layout, "SELECT provider, session_id, cost_usd, cost_source FROM sessions ORDER BY 1, 2") == [
        ("codewhale", "cw-garbled", None, "unknown"),  # glm-4.6 is unpriced: no estimate either
        ("crush", "G", 0.25, "native"), ("crush", "S", None, "unknown"),
        ("opencode", "ses_A", pytest.approx(price_buckets(Buckets(100, None, None, None, 10), "claude-sonnet-4-5",
                                                          "anthropic", None).cost_usd, rel=1e-6), "estimated")]
    for provider in ("crush", "codewhale", "opencode"):
        assert any("not a number" in w and w.startswith("1 ") for w in by[provider].warnings), \
            (provider, by[provider].warnings)


# ---------------------------------------------------------------------------------- item 7

def test_every_agent_uses_the_canonical_part_type_vocabulary(layout, built_once):
    """Item 7: `parts.part_type` is one vocabulary for every agent (contract.PART_TYPES,
    Crush's names); the agent's own name is in `native_part_type`."""
    from tests.test_five_agents import ingested_demo
    from transforms.contract import PART_TYPES

    ingested_demo(built_once, layout)  # every agent's generator, ingested once per session
    rows = query(layout, "SELECT provider, part_type, native_part_type, COUNT(*) FROM parts GROUP BY ALL")
    from transforms.providers import PROVIDERS

    # every agent of the demo, but Antigravity: no message content of its is read (docs/AGENTS.md)
    assert set(PROVIDERS) - {r[0] for r in rows} == {"antigravity"}
    assert {r[1] for r in rows} <= set(PART_TYPES), sorted({(r[0], r[1]) for r in rows if r[1] not in PART_TYPES})
    # the same thing has the same name everywhere: reasoning and tool calls of every agent that has them
    kinds = Counter((r[0], r[1]) for r in rows)
    for provider in ("claude", "codewhale", "codex", "crush", "opencode"):
        assert kinds[(provider, "tool_call")] and kinds[(provider, "text")], provider
    natives = {(r[0], r[2]): r[1] for r in rows}
    assert natives.get(("claude", "thinking"), "reasoning") == "reasoning"
    assert natives[("claude", "tool_use")] == "tool_call" and natives[("opencode", "tool")] == "tool_call"
    assert natives[("crush", "tool_call")] == "tool_call" and natives[("codex", "function_call")] == "tool_call"


# ---------------------------------------------------------------------------------- item 3

def test_opencode_oldest_layout_is_read_and_deduplicated(layout, tmp_path):
    """Item 3: OpenCode's oldest layout, `project/<id>/storage/session/{info,message,part}/`,
    was ignored without a word. It is read like the legacy `storage/` tree, a record found in
    both counted once."""
    from tests.test_opencode import fixture

    home = tmp_path / "oc"
    session, messages, parts = fixture()
    top = home / "project" / "shop-4f1c" / "storage" / "session"

    def put(path, obj):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(obj))

    put(top / "info" / f"{session['id']}.json", session)
    for m in messages:
        put(top / "message" / session["id"] / f"{m['id']}.json", m)
    for p in parts:
        put(top / "part" / session["id"] / p["messageID"] / f"{p['id']}.json", p)
    # the user message was also copied to the newer legacy tree (as OpenCode's migration does): once
    user = messages[0]
    put(home / "storage" / "message" / session["id"] / f"{user['id']}.json", user)
    for p in parts:
        if p["messageID"] == user["id"]:
            put(home / "storage" / "part" / user["id"] / f"{p['id']}.json", p)
    summary = ingest_tables(layout, homes={"opencode": [home]})
    (result,) = summary.results
    assert result.status == "ok" and result.reconciled, (result.error, result.reconcile)
    assert query(layout, "SELECT session_id, title, cost_usd, cost_source, message_count FROM sessions") == [
        (session["id"], session["title"], messages[1]["cost"], "native", len(messages))]
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == len(messages)
    assert scalar(layout, "SELECT COUNT(*) FROM parts") == len(parts)
    assert query(layout, "SELECT message_id, cost_usd FROM usage") == [(messages[1]["id"], messages[1]["cost"])]
    assert any("found in more than one place" in w for w in result.warnings)
