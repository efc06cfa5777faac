"""Claude Code: real JSONL transcripts in tmp homes, through the lake, read back by DuckDB."""

import hashlib
import json
import os
import threading
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.conftest import discover_only, ingest_tables, query, scalar
from transforms.claude.discover import discover
from transforms.claude.provider import ClaudeProvider
from transforms.claude.reader import read_jsonl
from transforms.synth.claude import (
    assistant_lines, base, generate_home, project_slug, tool_result, tool_use, usage, user_line, write_jsonl,
)
from transforms.pricing import Buckets, price_buckets
from transforms.provider import AgentProvider, DiscoverOptions
from transforms.providers import PROVIDERS
from warehouse.land.ingest import ingest_all
from warehouse.catalog.build import refresh

SID = "7a1e2c44-1111-4222-8333-444455556666"
SONNET = "claude-sonnet-4-5-20250929"
CWD = "/home/dev/shop"
T0 = datetime(2026, 3, 2, 9, 15, tzinfo=timezone.utc)

# the transcript of docs/FORMATS.md, "Claude Code: a worked example" (the page says what it gives)
FIXTURE = r"""
{"type":"summary","summary":"Fix login test","leafUuid":"b2f0c6de-0000-4000-8000-000000000004"}
{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/home/dev/shop","sessionId":"7a1e2c44-1111-4222-8333-444455556666","version":"2.0.14","gitBranch":"main","type":"user","message":{"role":"user","content":"Fix the failing login test"},"uuid":"b2f0c6de-0000-4000-8000-000000000001","timestamp":"2026-03-02T09:15:01.123Z"}
{"parentUuid":"b2f0c6de-0000-4000-8000-000000000001","isSidechain":false,"userType":"external","cwd":"/home/dev/shop","sessionId":"7a1e2c44-1111-4222-8333-444455556666","version":"2.0.14","gitBranch":"main","type":"assistant","requestId":"req_011CAbCdEf","message":{"id":"msg_01QxYz","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"thinking","thinking":"Need to run the test first.","signature":"EqQB…"}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":1200,"cache_read_input_tokens":14000,"cache_creation":{"ephemeral_5m_input_tokens":1200,"ephemeral_1h_input_tokens":0},"output_tokens":9,"service_tier":"standard"}},"uuid":"b2f0c6de-0000-4000-8000-000000000002","timestamp":"2026-03-02T09:15:04.500Z"}
{"parentUuid":"b2f0c6de-0000-4000-8000-000000000002","isSidechain":false,"userType":"external","cwd":"/home/dev/shop","sessionId":"7a1e2c44-1111-4222-8333-444455556666","version":"2.0.14","gitBranch":"main","type":"assistant","requestId":"req_011CAbCdEf","message":{"id":"msg_01QxYz","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"tool_use","id":"toolu_01Abc","name":"Bash","input":{"command":"npm test -- login","description":"Run login tests"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":1200,"cache_read_input_tokens":14000,"cache_creation":{"ephemeral_5m_input_tokens":1200,"ephemeral_1h_input_tokens":0},"output_tokens":142,"service_tier":"standard"}},"uuid":"b2f0c6de-0000-4000-8000-000000000003","timestamp":"2026-03-02T09:15:05.010Z"}
{"parentUuid":"b2f0c6de-0000-4000-8000-000000000003","isSidechain":false,"userType":"external","cwd":"/home/dev/shop","sessionId":"7a1e2c44-1111-4222-8333-444455556666","version":"2.0.14","gitBranch":"main","type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_01Abc","type":"tool_result","content":"FAIL src/login.test.ts\n  expected 200, got 401","is_error":true}]},"toolUseResult":{"stdout":"FAIL src/login.test.ts","stderr":"","interrupted":false,"isImage":false},"uuid":"b2f0c6de-0000-4000-8000-000000000004","timestamp":"2026-03-02T09:15:09.870Z"}
{"parentUuid":null,"logicalParentUuid":"b2f0c6de-0000-4000-8000-000000000004","isSidechain":false,"type":"system","subtype":"compact_boundary","content":"Conversation compacted","compactMetadata":{"trigger":"auto","preTokens":155025},"sessionId":"7a1e2c44-1111-4222-8333-444455556666","uuid":"b2f0c6de-0000-4000-8000-000000000005","timestamp":"2026-03-02T10:02:00.000Z"}
{"parentUuid":"b2f0c6de-0000-4000-8000-000000000005","isSidechain":false,"type":"user","isCompactSummary":true,"message":{"role":"user","content":[{"type":"text","text":"Summary: login test fails with 401…"}]},"sessionId":"7a1e2c44-1111-4222-8333-444455556666","uuid":"b2f0c6de-0000-4000-8000-000000000006","timestamp":"2026-03-02T10:02:01.000Z"}
{"parentUuid":"b2f0c6de-0000-4000-8000-000000000006","isSidechain":false,"type":"assistant","isApiErrorMessage":true,"message":{"id":"b9b0…","type":"message","role":"assistant","model":"<synthetic>","content":[{"type":"text","text":"API Error: 529 overloaded"}],"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}},"sessionId":"7a1e2c44-1111-4222-8333-444455556666","uuid":"b2f0c6de-0000-4000-8000-000000000007","timestamp":"2026-03-02T10:02:30.000Z"}
"""

# claude-sonnet-4-5, USD per token: $3 in, $0.30 cache read, $3.75 5m write, $6 1h write, $15 out per MTok
IN, READ, W5M, W1H, OUT = 3e-6, 0.30e-6, 3.75e-6, 6e-6, 15e-6


def project(home: Path, cwd: str = CWD) -> Path:
    return home / "projects" / project_slug(cwd)


def write_fixture(home: Path) -> Path:
    path = project(home) / f"{SID}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(FIXTURE.lstrip(), encoding="utf-8")
    return path


def response(sid, at, msg_id, u, *, model=SONNET, blocks=None, **fields):
    return assistant_lines(sid, at, CWD, message_id=msg_id, request_id=f"req_{msg_id}", model=model,
                           blocks=blocks or [{"type": "text", "text": "ok"}], final_usage=u, stop_reason="end_turn",
                           **fields)


def cost(b: Buckets, model=SONNET, at=T0) -> float:
    return price_buckets(b, model, "anthropic", at).cost_usd


def digest(root: Path) -> dict:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_documented_fixture(layout, tmp_path):
    home = tmp_path / "claude"
    write_fixture(home)
    summary = ingest_tables(layout, homes={"claude": [home]})
    (result,) = summary.results
    assert result.status == "ok" and result.reconciled, result.reconcile
    # one API call for msg_01QxYz: output 142 (the final line), not 9 + 142; <synthetic> is not billed
    rows = query(layout, "SELECT message_id, request_id, model, input_uncached_tokens, cache_read_tokens, "
                         "cache_write_5m_tokens, cache_write_1h_tokens, output_tokens, reasoning_tokens, total_tokens, "
                         "cost_usd, cost_source, requested_at FROM usage")
    hand = 3 * IN + 14000 * READ + 1200 * W5M + 0 * W1H + 142 * OUT  # = $0.010839
    first_line = datetime(2026, 3, 2, 9, 15, 4, 500000)
    assert rows == [("msg_01QxYz", "req_011CAbCdEf", SONNET, 3, 14000, 1200, 0, 142, None, 3 + 14000 + 1200 + 142,
                     pytest.approx(hand, abs=1e-12), "estimated", first_line)]
    assert rows[0][10] == cost(Buckets(3, 14000, 1200, 0, 142), at=first_line.replace(tzinfo=timezone.utc))
    assert query(layout, "SELECT tool_name, tool_category, command, is_error, has_result, result_text FROM tool_calls") == [
        ("Bash", "shell", "npm test -- login", True, True, "FAIL src/login.test.ts\n  expected 200, got 401")]
    assert query(layout, "SELECT session_id, is_root, title, cost_usd, cost_source, total_tokens, model, message_count, "
                         "summary_message_id, project, project_path FROM sessions") == [
        (SID, True, "Fix login test", pytest.approx(hand, abs=1e-12), "estimated", 15345, SONNET, 5,
         "b2f0c6de-0000-4000-8000-000000000006", "shop", CWD)]
    assert query(layout, "SELECT message_id, role, model, is_summary, part_count FROM messages ORDER BY message_index") == [
        ("b2f0c6de-0000-4000-8000-000000000001", "user", None, False, 1),
        ("msg_01QxYz", "assistant", SONNET, False, 2),  # two streamed lines, one message
        ("b2f0c6de-0000-4000-8000-000000000004", "tool", None, False, 1),
        ("b2f0c6de-0000-4000-8000-000000000006", "system", None, True, 1),
        ("b9b0…", "assistant", "<synthetic>", False, 1)]
    assert query(layout, "SELECT part_type, native_part_type FROM parts WHERE message_id = 'msg_01QxYz' "
                         "ORDER BY part_index") == [("reasoning", "thinking"), ("tool_call", "tool_use")]
    assert json.loads(scalar(layout, "SELECT tool_result_metadata FROM parts WHERE part_type = 'tool_result'")) == {
        "stdout": "FAIL src/login.test.ts", "stderr": "", "interrupted": False, "isImage": False}
    assert any("summary=1, system=1" in w for w in result.warnings)  # skipped line types are counted


def test_trap1_streamed_lines_count_once_with_the_final_output(layout, tmp_path):
    home = tmp_path / "claude"
    u = usage(7, 300, cache_read=1000)
    lines = response(SID, T0, "msg_A", u, blocks=[{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "a"},
                                                   tool_use("toolu_1", "Read", {"file_path": "/x"})])
    write_jsonl(project(home) / f"{SID}.jsonl", [user_line(SID, T0, CWD, "go")] + lines)
    ingest_tables(layout, homes={"claude": [home]})
    # three lines with outputs 1, 2, 300: one request, output 300, at the first line's time
    assert query(layout, "SELECT COUNT(*), SUM(output_tokens), MIN(requested_at) FROM usage") == [
        (1, 300, T0.replace(tzinfo=None))]
    assert scalar(layout, "SELECT total_tokens FROM sessions") == 7 + 1000 + 300


def test_trap1_a_resumed_session_replaying_its_parent_counts_once(layout, tmp_path):
    home = tmp_path / "claude"
    resumed = "99999999-1111-4222-8333-444455556666"
    first = [user_line(SID, T0, CWD, "go")] + response(SID, T0 + timedelta(seconds=1), "msg_A", usage(5, 50))
    write_jsonl(project(home) / f"{SID}.jsonl", first)
    # the resumed file replays the parent's lines (same uuids, same message and request ids) ...
    replay = [dict(line, sessionId=resumed) for line in first]
    # ... and a copy of a response under a new uuid: still the same request
    copy = [dict(line, sessionId=resumed, uuid="fresh-uuid") for line in first[1:]]
    later = T0 + timedelta(hours=1)
    new = [user_line(resumed, later, CWD, "again")] + response(resumed, later, "msg_B", usage(8, 80))
    write_jsonl(project(home) / f"{resumed}.jsonl", replay + copy + new)
    summary = ingest_tables(layout, homes={"claude": [home]})
    assert summary.results[0].reconciled
    assert query(layout, "SELECT session_id, message_id, output_tokens FROM usage ORDER BY 2") == [
        (SID, "msg_A", 50), (resumed, "msg_B", 80)]
    assert query(layout, "SELECT session_id, COUNT(*) FROM messages GROUP BY 1 ORDER BY 2, 1") == [
        (SID, 2), (resumed, 2)]
    want = cost(Buckets(5, 0, 0, 0, 50), at=T0 + timedelta(seconds=1)) + cost(Buckets(8, 0, 0, 0, 80), at=later)
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(want, abs=1e-12)
    assert any("3 replayed lines" in w for w in summary.results[0].warnings)
    # copies with the same numbers: the row's line is its own session's (it was the resumed file's,
    # said as "counted from their final copy in another file")
    assert query(layout, "SELECT message_id, source_table, source_rowid FROM usage ORDER BY 1") == [
        ("msg_A", f"{SID}.jsonl", 2), ("msg_B", f"{resumed}.jsonl", 5)]
    assert not [w for w in summary.results[0].warnings if "final copy" in w], summary.results[0].warnings


def test_trap1_the_non_sidechain_copy_wins(layout, tmp_path):
    home = tmp_path / "claude"
    main = [user_line(SID, T0, CWD, "go")] + response(SID, T0 + timedelta(seconds=5), "msg_A", usage(5, 50))
    write_jsonl(project(home) / f"{SID}.jsonl", main)
    # a sidechain log that copied the parent's response, written earlier than the parent's own line
    side = response(SID, T0 + timedelta(seconds=1), "msg_A", usage(5, 50), isSidechain=True, agentId="btw1")
    write_jsonl(project(home) / SID / "subagents" / "agent-btw1.jsonl", side)
    ingest_tables(layout, homes={"claude": [home]})
    assert query(layout, "SELECT session_id, is_sidechain, output_tokens FROM usage") == [(SID, False, 50)]


def test_trap2_cache_buckets_are_disjoint_and_priced_apart(layout, tmp_path):
    home = tmp_path / "claude"
    split = usage(10, 500, cache_read=20000, write_5m=400, write_1h=800)
    unsplit = {"input_tokens": 5, "output_tokens": 100, "cache_creation_input_tokens": 1000}  # no TTL: all 5m
    lines = [user_line(SID, T0, CWD, "go")] + response(SID, T0, "msg_A", split) + response(SID, T0, "msg_B", unsplit)
    write_jsonl(project(home) / f"{SID}.jsonl", lines)
    ingest_tables(layout, homes={"claude": [home]})
    assert query(layout, "SELECT message_id, input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens, "
                         "cache_write_1h_tokens, output_tokens, total_tokens, cost_usd FROM usage ORDER BY 1") == [
        ("msg_A", 10, 20000, 400, 800, 500, 21710,
         pytest.approx(10 * IN + 20000 * READ + 400 * W5M + 800 * W1H + 500 * OUT)),
        ("msg_B", 5, None, 1000, None, 100, 1105, pytest.approx(5 * IN + 1000 * W5M + 100 * OUT))]
    # 0.01983 + 0.005265
    assert scalar(layout, "SELECT cost_usd FROM sessions") == pytest.approx(0.025095, abs=1e-12)


def test_web_searches_are_billed_per_request_on_top_of_tokens(layout, tmp_path):
    home = tmp_path / "claude"
    searched = {**usage(10, 500), "server_tool_use": {"web_search_requests": 3, "web_fetch_requests": 1}}
    lines = [user_line(SID, T0, CWD, "look it up")] + response(SID, T0, "msg_S", searched)
    write_jsonl(project(home) / f"{SID}.jsonl", lines)
    ingest_tables(layout, homes={"claude": [home]})
    # Anthropic bills web search at $10 per 1,000 requests: 3 searches add $0.03
    assert scalar(layout, "SELECT cost_usd FROM usage") == pytest.approx(10 * IN + 500 * OUT + 3 * 0.01, abs=1e-12)


def _subagent_home(home: Path) -> dict:
    """A root with a nested sub-agent, a flat (older) sub-agent file, sidechain lines with and
    without an agentId in the parent's file. Returns each request's buckets by message id."""
    req = {"m0": usage(10, 100), "n1": usage(20, 200), "f1": usage(30, 300), "s1": usage(40, 400), "s2": usage(50, 500)}
    haiku = "claude-haiku-4-5-20251001"
    main = [user_line(SID, T0, CWD, "go")]
    main += response(SID, T0, "m0", req["m0"], blocks=[tool_use("toolu_T", "Task", {"subagent_type": "Explore"})])
    main += response(SID, T0, "s1", req["s1"], model=haiku, isSidechain=True, agentId="s1")
    main += response(SID, T0, "s2", req["s2"], model=haiku, isSidechain=True)  # no agentId: stays in the parent
    # the Task result repeats the sub-agent's totals: never to be added
    done = [tool_result("toolu_T", [{"type": "text", "text": "done"}])]
    main.append(user_line(SID, T0 + timedelta(minutes=1), CWD, done,
                          toolUseResult={"agentId": "n1", "totalTokens": 999_999, "usage": usage(999_999, 999_999)}))
    write_jsonl(project(home) / f"{SID}.jsonl", main)
    nested = project(home) / SID / "subagents"
    write_jsonl(nested / "agent-n1.jsonl", [user_line(SID, T0, CWD, "find it", isSidechain=True, agentId="n1")]
                + response(SID, T0, "n1", req["n1"], model=haiku, isSidechain=True, agentId="n1"))
    (nested / "agent-n1.meta.json").write_text(json.dumps({"agentType": "Explore", "description": "Find the handler"}))
    write_jsonl(project(home) / "agent-f1.jsonl", response(SID, T0, "f1", req["f1"], model=haiku, isSidechain=True,
                                                           agentId="f1"))
    return {k: (Buckets(u["input_tokens"], 0, 0, 0, u["output_tokens"]), SONNET if k == "m0" else haiku)
            for k, u in req.items()}


def test_trap3_subagent_transcripts_roll_into_the_root_and_task_totals_are_not_added(layout, tmp_path):
    home = tmp_path / "claude"
    req = _subagent_home(home)
    summary = ingest_tables(layout, homes={"claude": [home]})
    assert summary.results[0].reconciled
    price = {k: cost(b, model) for k, (b, model) in req.items()}
    assert query(layout, "SELECT session_id, is_root, parent_session_id, root_session_id, title, total_tokens, cost_usd "
                         "FROM sessions ORDER BY is_root DESC, session_id") == [
        (SID, True, None, SID, None, 110 + 550, pytest.approx(sum(price.values()), abs=1e-12)),
        ("agent-f1", False, SID, SID, None, 330, pytest.approx(price["f1"], abs=1e-12)),
        ("agent-n1", False, SID, SID, "Find the handler", 220, pytest.approx(price["n1"], abs=1e-12)),
        ("agent-s1", False, SID, SID, None, 440, pytest.approx(price["s1"], abs=1e-12))]
    assert query(layout, "SELECT message_id, session_id, is_sidechain FROM usage ORDER BY 1") == [
        ("f1", "agent-f1", True), ("m0", SID, False), ("n1", "agent-n1", True), ("s1", "agent-s1", True),
        ("s2", SID, True)]
    # every token is from a transcript: 110 + 220 + 330 + 440 + 550, none of the 999,999
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == 1650


def test_trap4_only_typed_text_is_a_prompt(layout, tmp_path):
    home = tmp_path / "claude"
    lines = [
        user_line(SID, T0, CWD, "Fix the test"),  # a plain string: a prompt
        user_line(SID, T0, CWD, [{"type": "text", "text": "look at this"}, {"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": "iVBO"}}]),  # typed text with an image
        user_line(SID, T0, CWD, "<command-name>/clear</command-name>"),
        user_line(SID, T0, CWD, "<local-command-stdout>ok</local-command-stdout>"),
        user_line(SID, T0, CWD, [{"type": "text", "text": "[Request interrupted by user]"}]),
        user_line(SID, T0, CWD, "Caveat: injected", isMeta=True),
        user_line(SID, T0, CWD, [tool_result("toolu_X", "ok")]),
        user_line(SID, T0, CWD, [{"type": "text", "text": "Summary: ..."}], isCompactSummary=True),
    ]
    write_jsonl(project(home) / f"{SID}.jsonl", lines)
    ingest_tables(layout, homes={"claude": [home]})
    assert query(layout, "SELECT role, is_summary, COUNT(*) FROM messages GROUP BY ALL ORDER BY ALL") == [
        ("system", False, 4), ("system", True, 1), ("tool", False, 1), ("user", False, 2)]
    assert query(layout, "SELECT part_type, mime_type FROM parts WHERE native_part_type = 'image'") == [
        ("binary", "image/png")]
    # the orphan result is kept, flagged
    assert query(layout, "SELECT has_call, has_result FROM tool_calls") == [(False, True)]


def test_trap5_synthetic_lines_are_not_priced_and_advisor_iterations_are(layout, tmp_path):
    home = tmp_path / "claude"
    u = dict(usage(2, 491, cache_read=9000, write_5m=700), iterations=[
        {"type": "message", "input_tokens": 1, "output_tokens": 45},
        {"type": "advisor_message", "model": "claude-opus-4-6", "input_tokens": 15000, "output_tokens": 700,
         "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}])
    lines = [user_line(SID, T0, CWD, "go")] + response(SID, T0, "msg_A", u)
    lines.append(base("assistant", SID, T0, CWD, isApiErrorMessage=True, message={
        "id": "err", "type": "message", "role": "assistant", "model": "<synthetic>",
        "content": [{"type": "text", "text": "API Error"}], "usage": {"input_tokens": 0, "output_tokens": 0}}))
    write_jsonl(project(home) / f"{SID}.jsonl", lines)
    summary = ingest_tables(layout, homes={"claude": [home]})
    assert summary.results[0].reconciled
    main, advisor = cost(Buckets(2, 9000, 700, 0, 491)), cost(Buckets(15000, 0, 0, None, 700), "claude-opus-4-6")
    assert query(layout, "SELECT model, input_uncached_tokens, output_tokens, cost_usd FROM usage ORDER BY 1") == [
        ("claude-opus-4-6", 15000, 700, pytest.approx(advisor, abs=1e-12)),
        (SONNET, 2, 491, pytest.approx(main, abs=1e-12))]
    assert scalar(layout, "SELECT cost_usd FROM sessions") == pytest.approx(main + advisor, abs=1e-12)
    assert scalar(layout, "SELECT COUNT(*) FROM messages WHERE model = '<synthetic>'") == 1  # kept as a message
    assert any("1 <synthetic> API-error responses not billed" in w for w in summary.results[0].warnings)


def test_trap5_transcripts_claude_code_deletes_keep_their_history(layout, tmp_path, monkeypatch):
    """Their rows stay, kept from the read cache. The note is said once per lake, by the run that
    lands the project without them: not by each later run, not lost to a run that failed before
    it landed, and said to each lake the home lands into."""
    from warehouse.lake.layout import Layout
    from warehouse.land import ingest as ingest_module

    home = tmp_path / "claude"
    other = "88888888-1111-4222-8333-444455556666"
    old = write_jsonl(project(home) / f"{SID}.jsonl",
                      [user_line(SID, T0, CWD, "old")] + response(SID, T0, "m1", usage(1, 10)))
    write_jsonl(project(home) / f"{other}.jsonl", [user_line(other, T0, CWD, "new")])
    team = Layout.resolve(home=layout.home, lake=tmp_path / "team-lake", machine="laptop", user="dev")
    for lake in (layout, team):
        ingest_tables(lake, homes={"claude": [home]})
    old.unlink()  # cleanupPeriodDays passed
    real_write = ingest_module.write_files
    monkeypatch.setattr(ingest_module, "write_files", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    (failed,) = ingest_tables(layout, homes={"claude": [home]}).results  # nothing landed: nothing said
    assert failed.status == "failed" and "disk full" in failed.error
    monkeypatch.setattr(ingest_module, "write_files", real_write)
    summary = ingest_tables(layout, homes={"claude": [home]})
    assert summary.results[0].status == "ok"
    assert query(layout, "SELECT session_id, total_tokens FROM sessions ORDER BY 1") == [(SID, 11), (other, None)]
    gone = "1 transcript no longer on disk (Claude Code deletes old ones) kept from the cache"
    assert gone in summary.results[0].warnings, summary.results[0].warnings
    # said by the run that found it gone: the project's later runs keep it without a word
    write_jsonl(project(home) / f"{other}.jsonl", [user_line(other, T0, CWD, "new"), user_line(other, T0, CWD, "more")])
    (later,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert later.status == "ok" and not [w for w in later.warnings if "no longer on disk" in w], later.warnings
    assert query(layout, "SELECT session_id, total_tokens FROM sessions ORDER BY 1") == [(SID, 11), (other, None)]
    (told,) = ingest_tables(team, homes={"claude": [home]}).results  # the other lake's run log has it too
    assert gone in told.warnings, told.warnings
    assert not [w for w in ingest_tables(team, homes={"claude": [home]}).results[0].warnings if "no longer" in w]
    first = Layout.resolve(home=layout.home, lake=tmp_path / "new-lake", machine="laptop", user="dev")
    assert gone in ingest_tables(first, homes={"claude": [home]}).results[0].warnings  # a lake never told
    # back on disk, then deleted once more: said again
    write_jsonl(old, [user_line(SID, T0, CWD, "old")] + response(SID, T0, "m1", usage(1, 10)))
    (back,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert not [w for w in back.warnings if "no longer on disk" in w], back.warnings
    old.unlink()
    (again,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert gone in again.warnings, again.warnings


def test_native_cost_wins_and_session_cost_sources(layout, tmp_path):
    home = tmp_path / "claude"
    native = response(SID, T0, "m1", usage(1, 10))
    for line in native:
        line["costUSD"] = 0.0421  # old versions wrote the cost on the line
    write_jsonl(project(home) / f"{SID}.jsonl", [user_line(SID, T0, CWD, "a")] + native)
    partial, unknown = "22222222-1111-4222-8333-444455556666", "33333333-1111-4222-8333-444455556666"
    write_jsonl(project(home) / f"{partial}.jsonl", [user_line(partial, T0, CWD, "b")]
                + response(partial, T0, "m2", usage(1, 10)) + response(partial, T0, "m3", usage(1, 10), model="glm-4.6"))
    write_jsonl(project(home) / f"{unknown}.jsonl", [user_line(unknown, T0, CWD, "c")]
                + response(unknown, T0, "m4", usage(1, 10), model="glm-4.6"))
    ingest_tables(layout, homes={"claude": [home]})
    assert query(layout, "SELECT message_id, cost_usd, cost_source FROM usage ORDER BY 1") == [
        ("m1", 0.0421, "native"), ("m2", pytest.approx(1 * IN + 10 * OUT), "estimated"), ("m3", None, "unknown"),
        ("m4", None, "unknown")]
    assert query(layout, "SELECT session_id, cost_usd, cost_source FROM sessions ORDER BY 1") == [
        (partial, pytest.approx(1 * IN + 10 * OUT), "partial"), (unknown, None, "unknown"), (SID, 0.0421, "native")]


def test_a_token_count_out_of_range_is_nulled_unpriced_and_its_project_still_lands(layout, tmp_path):
    """A negative count (a trial's hand-edited transcript) failed the whole project: genai-prices
    refuses it. Now its request has no price (the session's cost is partial), the count is nulled
    and kept in quarantine with the source's warning, and the project's other sessions land."""
    home = tmp_path / "claude"
    write_jsonl(project(home) / f"{SID}.jsonl", [user_line(SID, T0, CWD, "a")] + response(SID, T0, "m1", usage(1, 10))
                + response(SID, T0, "m2", {"input_tokens": -5, "output_tokens": 10}))
    other = "22222222-1111-4222-8333-444455556666"
    write_jsonl(project(home) / f"{other}.jsonl", [user_line(other, T0, CWD, "b")] + response(other, T0, "m3", usage(2, 20)))
    [result] = ingest_tables(layout, homes={"claude": [home]}).results
    assert result.status == "ok"
    assert [w for w in result.warnings if "1 value out of range nulled (kept in quarantine)" in w
            and "input_uncached_tokens" in w], result.warnings
    assert query(layout, "SELECT message_id, input_uncached_tokens, output_tokens, total_tokens, cost_usd, cost_source "
                         "FROM usage ORDER BY 1") == [
        ("m1", 1, 10, 11, pytest.approx(1 * IN + 10 * OUT), "estimated"), ("m2", None, 10, 10, None, "unknown"),
        ("m3", 2, 20, 22, pytest.approx(2 * IN + 20 * OUT), "estimated")]
    assert query(layout, "SELECT session_id, cost_usd, cost_source FROM sessions ORDER BY 1") == [
        (other, pytest.approx(2 * IN + 20 * OUT), "estimated"), (SID, pytest.approx(1 * IN + 10 * OUT), "partial")]
    assert scalar(layout, "SELECT COUNT(*) FROM quarantine WHERE raw LIKE '%-5%'") == 1


def test_bedrock_and_vertex_ids_are_priced_as_the_anthropic_model(layout, tmp_path):
    home = tmp_path / "claude"
    lines = [user_line(SID, T0, CWD, "go")]
    lines += response(SID, T0, "m1", usage(100, 10), model="us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    lines += response(SID, T0, "m2", usage(100, 10), model="claude-sonnet-4-5@20250929")
    write_jsonl(project(home) / f"{SID}.jsonl", lines)
    ingest_tables(layout, homes={"claude": [home]})
    rows = query(layout, "SELECT model, llm_provider, cost_usd, cost_source, pricing_note FROM usage ORDER BY 1")
    want = pytest.approx(100 * IN + 10 * OUT)
    assert [r[:4] for r in rows] == [("claude-sonnet-4-5@20250929", "anthropic", want, "estimated"),
                                     ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic", want, "estimated")]
    assert "priced as claude-sonnet-4-5-20250929" in rows[1][4]


def test_incremental_reading_reads_only_the_appended_bytes(tmp_path):
    path, cache = tmp_path / "s.jsonl", tmp_path / "cache"
    write_jsonl(path, [user_line(SID, T0, CWD, "one")] + response(SID, T0, "m1", usage(1, 10)))
    first = read_jsonl(path, "s.jsonl", cache)
    assert (first.read_from, first.offset) == (0, path.stat().st_size)
    write_jsonl(path, [user_line(SID, T0, CWD, "two")])
    partial = json.dumps(user_line(SID, T0, CWD, "three"))[:40]  # a line still being written
    with open(path, "a") as fh:
        fh.write(partial)
    second = read_jsonl(path, "s.jsonl", cache)
    assert second.read_from == first.offset  # only the new bytes were read
    assert second.offset == path.stat().st_size - len(partial)  # the partial line is not consumed
    cold = read_jsonl(path, "s.jsonl", None)
    assert (second.records, second.bad) == (cold.records, cold.bad)
    assert second.bad[-1][2] == "incomplete last line (no newline yet)"
    with open(path, "a") as fh:  # the line is finished
        fh.write(json.dumps(user_line(SID, T0, CWD, "three"))[40:] + "\n")
    third = read_jsonl(path, "s.jsonl", cache)
    assert third.read_from == second.offset and third.bad == [] and len(third.records) == 4
    assert third.records == read_jsonl(path, "s.jsonl", None).records


@pytest.mark.parametrize("change", ["truncated", "rewritten"])
def test_incremental_reading_rereads_a_file_that_is_not_the_same_one_grown(tmp_path, change):
    path, cache = tmp_path / "s.jsonl", tmp_path / "cache"
    write_jsonl(path, [user_line(SID, T0, CWD, "one", line_uuid="a"), user_line(SID, T0, CWD, "two", line_uuid="b")])
    read_jsonl(path, "s.jsonl", cache)
    text = path.read_text()
    if change == "truncated":
        path.write_text(text.splitlines(keepends=True)[0])
    else:  # same size, other head, same inode: only the head hash tells
        with open(path, "r+") as fh:
            fh.write(text.replace('"one"', '"eno"'))
    again = read_jsonl(path, "s.jsonl", cache)
    assert again.read_from == 0 and again.records == read_jsonl(path, "s.jsonl", None).records
    assert again.records[0][1]["message"]["content"] == ("one" if change == "truncated" else "eno")


def test_an_appended_source_ingests_like_a_cold_read(layout, tmp_path):
    from warehouse.lake.layout import Layout

    home = tmp_path / "claude"
    path = write_fixture(home)
    ingest_tables(layout, homes={"claude": [home]})
    write_jsonl(path, [user_line(SID, T0 + timedelta(hours=2), CWD, "and now?")]
                + response(SID, T0 + timedelta(hours=2), "msg_late", usage(4, 40)))
    ingest_tables(layout, homes={"claude": [home]})
    assert len(list(layout.cache_dir.rglob("files/*.pkl"))) == 1  # the transcript's reads, one cache
    cold = Layout.resolve(home=tmp_path / "cold")
    ingest_tables(cold, homes={"claude": [home]})
    for table in ("sessions", "messages", "parts", "tool_calls", "usage"):
        sql = f"SELECT * EXCLUDE (machine, user) FROM {table} ORDER BY ALL"
        assert query(layout, sql) == query(cold, sql), table
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == 2


def test_a_full_refresh_reads_each_transcript_again_from_its_first_byte(layout, tmp_path):
    """The cache of what was read trusts a file that looks appended to (its head and the bytes before
    the offset unchanged): an edit in its middle is not seen (a trial fixed a bad count by hand, and
    `--full-refresh` still read the cached one). A full refresh reads every byte again."""
    home = tmp_path / "claude"
    padding = [user_line(SID, T0, CWD, f"note {i} " + "x" * 200, line_uuid=f"p{i}") for i in range(40)]
    path = project(home) / f"{SID}.jsonl"
    write_jsonl(path, padding[:20] + response(SID, T0, "m1", usage(1000, 10)) + padding[20:])
    ingest_tables(layout, homes={"claude": [home]})
    text = path.read_bytes()
    assert text.count(b'"input_tokens": 1000') == 1 and len(text) > 3 * 4096
    with open(path, "r+b") as fh:  # the same inode and size: only the middle changed
        fh.write(text.replace(b'"input_tokens": 1000', b'"input_tokens": 2000'))
    ingest_tables(layout, homes={"claude": [home]}, full_refresh=True)
    assert query(layout, "SELECT input_uncached_tokens, cost_usd FROM usage") == [
        (2000, pytest.approx(2000 * IN + 10 * OUT))]


def test_claude_config_dir_replaces_the_default_home(tmp_path):
    user = tmp_path / "user"
    write_jsonl(project(user / ".claude", "/home/dev/a") / f"{SID}.jsonl", [user_line(SID, T0, "/home/dev/a", "a")])
    write_jsonl(project(tmp_path / "cfg", "/home/dev/b") / f"{SID}.jsonl", [user_line(SID, T0, "/home/dev/b", "b")])
    found = discover(env={"HOME": str(user), "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")})
    assert [(s.project, s.project_path) for s in found.sources] == [("b", "/home/dev/b")]
    found = discover(env={"HOME": str(user)})
    assert [(s.project, s.project_path) for s in found.sources] == [("a", "/home/dev/a")]


def test_project_path_comes_from_the_records_not_the_lossy_slug(tmp_path):
    cwd = "/home/dev/my.app"
    write_jsonl(project(tmp_path / "cfg", cwd) / f"{SID}.jsonl", [user_line(SID, T0, cwd, "a")])
    (source,) = discover(env={"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}).sources
    assert (Path(source.path).name, source.project_path, source.project) == ("-home-dev-my-app", cwd, "my-app")


def test_credential_files_are_never_opened(layout, tmp_path):
    """`.credentials.json` holds tokens. Make it (and `~/.claude.json`) a FIFO: opening one would block."""
    user, cfg = tmp_path / "user", tmp_path / "user" / ".claude"
    write_fixture(cfg)
    os.mkfifo(cfg / ".credentials.json")
    os.mkfifo(user / ".claude.json")
    done = threading.Event()

    def run():
        found = ClaudeProvider().discover(DiscoverOptions(env={"HOME": str(user)}))
        ingest_all(found.sources, layout, workers=1)
        refresh(layout.lake, layout.warehouse, marts=False)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(60), "ingestion blocked: it opened a credential file"
    assert query(layout, "SELECT session_id FROM sessions") == [(SID,)]


def test_a_malformed_line_is_quarantined_and_the_rest_ingested(layout, tmp_path):
    home = tmp_path / "claude"
    bad = "55555555-1111-4222-8333-444455556666"
    path = project(home) / f"{bad}.jsonl"
    write_jsonl(path, [user_line(bad, T0, CWD, "go")])
    with open(path, "a") as fh:
        fh.write('{"type":"assistant","message":{"id":"cut\n[1, 2, 3]\n')
    write_jsonl(path, response(bad, T0, "m1", usage(1, 10)))
    write_fixture(home)  # another transcript in the same project
    summary = ingest_tables(layout, homes={"claude": [home]})
    (result,) = summary.results
    assert result.status == "ok" and result.reconciled
    assert query(layout, "SELECT key, raw FROM quarantine ORDER BY key") == [
        (f"{bad}.jsonl:2", '{"type":"assistant","message":{"id":"cut'), (f"{bad}.jsonl:3", "[1, 2, 3]")]
    assert [e.split(":")[0] for (e,) in query(layout, "SELECT error FROM quarantine ORDER BY key")] == [
        "not valid JSON", "not a JSON object"]
    # the lines around the bad ones, and the other transcript, are all in
    assert query(layout, "SELECT message_id FROM usage ORDER BY 1") == [("m1",), ("msg_01QxYz",)]
    assert query(layout, "SELECT session_id, message_count FROM sessions ORDER BY 1") == [(bad, 2), (SID, 5)]


def test_the_source_is_left_byte_identical(layout, tmp_path):
    home = tmp_path / "claude"
    generate_home(home, sessions=4, seed=2)
    before = digest(home)
    sources, _ = discover_only(homes={"claude": [home]})  # read and landed; the merge reads only what landed
    ingest_all(sources, layout, workers=1)
    ingest_all(sources, layout, full_refresh=True, workers=1)
    assert digest(home) == before


def test_unknown_blocks_are_kept_raw_and_reported(layout, tmp_path):
    home = tmp_path / "claude"
    block = {"type": "hologram", "payload": [1, 2]}
    write_jsonl(project(home) / f"{SID}.jsonl", [user_line(SID, T0, CWD, "go")]
                + response(SID, T0, "m1", usage(1, 10), blocks=[block]))
    summary = ingest_tables(layout, homes={"claude": [home]})
    assert query(layout, "SELECT part_type, native_part_type, is_known_type, raw FROM parts WHERE role = 'assistant'") == [
        ("other", "hologram", False, '{"type":"hologram","payload":[1,2]}')]
    assert any("hologram=1" in w for w in summary.results[0].warnings)


def test_generated_home_totals(layout, tmp_path):
    home = tmp_path / "claude"
    truth = generate_home(home, sessions=9, seed=3)
    summary = ingest_tables(layout, homes={"claude": [home]})
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    assert query(layout, "SELECT COUNT(*) FILTER (WHERE is_root), COUNT(*) FILTER (WHERE NOT is_root) FROM sessions") == [
        (truth.sessions, truth.subagents)]
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == truth.messages
    assert scalar(layout, "SELECT COUNT(*) FROM messages WHERE role = 'user'") == truth.prompts
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == truth.requests
    assert scalar(layout, "SELECT COUNT(*) FROM usage WHERE cost_source = 'unknown'") == truth.unpriced_requests
    assert Counter(dict(query(layout, "SELECT model, COUNT(*) FROM usage GROUP BY 1"))) == truth.models
    for bucket, tokens in truth.tokens.items():
        assert scalar(layout, f"SELECT SUM({bucket}) FROM usage") == tokens, bucket
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(truth.cost_usd, abs=1e-9)
    assert dict(query(layout, "SELECT project_path, SUM(cost_usd) FROM sessions WHERE is_root GROUP BY 1")) == {
        w: pytest.approx(c, abs=1e-9) for w, c in truth.by_workspace.items()}
    assert Counter(dict(query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1"))) == truth.parts_by_type
    assert Counter(dict(query(layout, "SELECT tool_name, COUNT(*) FROM tool_calls GROUP BY 1"))) == truth.tool_calls_by_name
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE is_error") == truth.tool_errors
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE NOT has_result") == 0


def test_the_generator_is_seeded(tmp_path):
    generate_home(tmp_path / "a", sessions=3, seed=5)
    generate_home(tmp_path / "b", sessions=3, seed=5)
    a, b = tmp_path / "a", tmp_path / "b"
    assert {p.relative_to(a): h for p, h in digest(a).items()} == {p.relative_to(b): h for p, h in digest(b).items()}


def test_tool_names_map_to_the_shared_categories():
    from transforms.claude import tools
    from transforms.contract import TOOL_CATEGORIES

    assert set(tools._CATEGORY.values()) <= set(TOOL_CATEGORIES)
    assert [tools.tool_category(n) for n in ("Bash", "MultiEdit", "NotebookEdit", "Glob", "WebFetch", "TodoWrite",
                                             "Agent", "mcp__github__create_issue", "Skill")] == [
        "shell", "edit", "edit", "search", "fetch", "todo", "agent", "mcp", "other"]


def test_odd_values_are_tolerated(layout, tmp_path):
    home = tmp_path / "claude"
    other = "66666666-1111-4222-8333-444455556666"
    odd = response(SID, T0, "m1", {"input_tokens": "12", "output_tokens": 2**70, "cache_read_input_tokens": True},
                   blocks=[tool_use("toolu_1", "Bash", "not an object")])
    lines = [user_line(SID, T0, CWD, 42)] + odd + response(SID, T0, "m2", usage(1, 10), blocks=[{"no": "type"}])
    lines.append(user_line(SID, T0, CWD, [tool_result("toolu_1", "boom", True)], toolUseResult="Error: boom"))
    del lines[0]["timestamp"]  # a line without a time sorts last, never crashes the ordering
    write_jsonl(project(home) / f"{SID}.jsonl", lines)
    write_jsonl(project(home) / f"{other}.jsonl", [{"type": "summary", "summary": "only a title", "leafUuid": "x"}])
    summary = ingest_tables(layout, homes={"claude": [home]})
    (result,) = summary.results
    assert result.status == "ok" and result.reconciled, (result.error, result.reconcile)
    # no usable count is null, never 0; the bucket total is null when all are
    assert query(layout, "SELECT input_uncached_tokens, output_tokens, cache_read_tokens, total_tokens, cost_source "
                         "FROM usage WHERE message_id = 'm1'") == [(None, None, None, None, "unknown")]
    assert query(layout, "SELECT is_input_valid, input_raw, is_error, exit_code, command FROM tool_calls") == [
        (False, "not an object", True, None, None)]
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 1  # a file of titles only holds no session
    assert scalar(layout, "SELECT COUNT(*) FROM parts WHERE NOT is_known_type") == 2  # the number and the typeless block


def older_release(monkeypatch) -> None:
    """Claude Code as the releases before families landed it: a project directory, one source."""

    class Older(ClaudeProvider):
        discover = AgentProvider.discover
        takes_cached_notes = True

    monkeypatch.setitem(PROVIDERS, "claude", Older())


def _other_session(sid: str) -> str:
    """The fixture as another session: its ids changed, its figures the same."""
    return (FIXTURE.lstrip().replace(SID, sid).replace("b2f0c6de", sid[:8]).replace("msg_01QxYz", f"msg_{sid[:6]}")
            .replace("req_011CAbCdEf", f"req_{sid[:6]}"))


def test_a_backup_home_counts_each_session_once(layout, tmp_path, monkeypatch):
    """The README's `extra_roots = ["/mnt/backup/.claude"]`: every session in both homes was a
    row twice, under two sources (double the cost). The project's directory in both homes is now
    one source, reading the larger copy of each transcript, and a backup landed alone before is
    taken over."""
    live, backup = tmp_path / "live", tmp_path / "backup"
    write_fixture(live)
    old = "0bd0e6a1-2222-4333-8444-555566667777"  # deleted from the live home by Claude Code
    (project(backup)).mkdir(parents=True)
    (project(backup) / f"{old}.jsonl").write_text(_other_session(old))
    # the backup's copy of the live session is older: its first three lines
    (project(backup) / f"{SID}.jsonl").write_text("\n".join(FIXTURE.lstrip().splitlines()[:3]) + "\n")
    with monkeypatch.context() as before:  # landed alone first, named by its path, as releases before did
        before.setattr("transforms.claude.discover.identity", str)
        older_release(before)
        ingest_tables(layout, homes={"claude": [backup]})
    assert query(layout, "SELECT COUNT(*) FROM sessions") == [(2,)]
    (source,) = discover({"CLAUDE_CONFIG_DIR": str(live)}, extra_roots=[str(backup)]).sources
    assert source.path == os.path.realpath(project(live)) and source.copies_in == (os.path.realpath(project(backup)),)
    assert source.identity == f"projects/{project_slug(CWD)}"  # whichever homes hold it
    (result,) = ingest_tables(layout, homes={"claude": [live, backup]}).results
    assert result.status == "ok", result.error
    assert any(w.startswith("took over 2 sessions from the project's source of an older release")
               for w in result.warnings), result.warnings
    # each session once: the live one whole (its larger copy), the old one from the backup
    assert query(layout, "SELECT session_id, COUNT(*) FROM sessions GROUP BY ALL ORDER BY 1") == [(old, 1), (SID, 1)]
    assert query(layout, "SELECT COUNT(DISTINCT source_id) FROM sessions") == [(1,)]
    # the two are the same conversation: the live one's request is its final figure, not the
    # backup's streamed first line of it
    (live_cost, old_cost), = query(layout, f"SELECT SUM(cost_usd) FILTER (session_id = '{SID}'), "
                                           f"SUM(cost_usd) FILTER (session_id = '{old}') FROM usage")
    assert live_cost == old_cost > 0
    assert query(layout, "SELECT COUNT(*) FROM usage") == [(2,)]
    again = ingest_tables(layout, homes={"claude": [live, backup]}).results[0]
    assert again.status == "unchanged"
    before = query(layout, "SELECT session_id, source_id, cost_usd FROM usage ORDER BY 1")
    # Claude Code deletes the live transcripts after 30 days: the backup's directory is read
    # now, the same source, and its older copy of the live session does not replace the whole
    # one read before (kept from the cache)
    (project(live) / f"{SID}.jsonl").unlink()
    (result,) = ingest_tables(layout, homes={"claude": [live, backup]}).results
    assert result.status == "ok" and result.source.path == os.path.realpath(project(backup))
    assert "1 transcripts on disk only in older copies than the ones read before (a backup's): kept from the cache" \
        in result.warnings
    assert query(layout, "SELECT session_id, COUNT(*) FROM sessions GROUP BY ALL ORDER BY 1") == [(old, 1), (SID, 1)]
    assert query(layout, "SELECT session_id, source_id, cost_usd FROM usage ORDER BY 1") == before
    # the homes named the other way round: the same source, nothing to do
    (result,) = ingest_tables(layout, homes={"claude": [backup, live]}).results
    assert result.status == "unchanged"


def test_a_line_without_a_timestamp_keeps_its_place_in_the_transcript(layout, tmp_path):
    """Undated lines were ordered after every dated one: the conversation read user, assistant,
    then the undated assistant and user lines at the end."""
    lines = [json.loads(ln) for ln in FIXTURE.lstrip().splitlines()]
    for at in (2, 3, 4):  # the request's two lines and the tool result after them
        del lines[at]["timestamp"]
    home = tmp_path / "claude"
    path = project(home) / f"{SID}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(json.dumps(ln) for ln in lines) + "\n")
    ingest_tables(layout, homes={"claude": [home]})
    order = [r[0] for r in query(layout, "SELECT source_rowid FROM messages WHERE session_id = ? ORDER BY message_index", SID)]
    assert order == sorted(order), order


def test_a_first_line_without_a_timestamp_leaves_the_session_its_start(layout, tmp_path):
    """Ordered by the time after it, an undated first line became the session's first line, and
    its missing time the session's `created_at`."""
    lines = [json.loads(ln) for ln in FIXTURE.lstrip().splitlines()]
    del lines[1]["timestamp"]  # the prompt
    home = tmp_path / "claude"
    path = project(home) / f"{SID}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(json.dumps(ln) for ln in lines) + "\n")
    ingest_tables(layout, homes={"claude": [home]})
    assert query(layout, "SELECT created_at FROM sessions") == [(datetime(2026, 3, 2, 9, 15, 4, 500000),)]
    assert query(layout, "SELECT COUNT(*) FROM usage WHERE requested_at IS NULL") == [(0,)]


def test_bytes_that_are_not_utf8_are_counted(layout, tmp_path):
    """Invalid UTF-8 inside a line was replaced by U+FFFD and the run said nothing."""
    home = tmp_path / "claude"
    path = write_fixture(home)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b"Fix the failing login test", b"Fix the failing login test \xff\xfe")
    path.write_bytes(b"".join(lines))
    (result,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert result.status == "ok"
    assert "1 lines held bytes that are not UTF-8: read with U+FFFD in their place" in result.warnings
    assert scalar(layout, "SELECT text FROM parts WHERE role = 'user' AND part_type = 'text'") == \
        "Fix the failing login test \ufffd\ufffd"


def test_the_notes_of_lines_read_before_are_said_once_by_the_run_that_read_them(layout, tmp_path):
    """A project whose transcripts grow said, at every run that read anything new, the notes of
    every line an earlier run had read: "non-message lines not stored as messages" with the
    whole history's counts, the same `<synthetic>` reply, the same unknown part. Each is said by
    the run that reads its line; the counts stay in the `sources` table; a first landing into
    another lake says them all again (that lake was never told)."""
    home = tmp_path / "claude"
    path = write_fixture(home)  # a summary and a system line, a <synthetic> reply
    (first,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert "non-message lines not stored as messages: summary=1, system=1" in first.warnings, first.warnings
    assert "1 <synthetic> API-error responses not billed" in first.warnings

    write_jsonl(path, [base("file-history-snapshot", SID, T0 + timedelta(hours=2), CWD)]
                + response(SID, T0 + timedelta(hours=2), "msg_new", usage(1, 5),
                           blocks=[{"type": "mystery_block", "x": 1}]))
    (grown,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert grown.status == "ok"
    notes = [w for w in grown.warnings if "non-message" in w or "synthetic" in w or "part types" in w]
    assert notes == ["unknown part types kept raw: mystery_block=1",
                     "non-message lines not stored as messages: file-history-snapshot=1"], grown.warnings

    other = "88888888-1111-4222-8333-444455556666"  # another session: none of the notes above again
    write_jsonl(project(home) / f"{other}.jsonl", [user_line(other, T0, CWD, "new")])
    (again,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert again.status == "ok" and again.unknown_part_types == 1, again
    assert not [w for w in again.warnings if "non-message" in w or "synthetic" in w or "part types" in w], \
        again.warnings
    assert scalar(layout, "SELECT unknown_part_types FROM sources ORDER BY run_at DESC LIMIT 1") == 1

    from warehouse.lake.layout import Layout

    team = Layout.resolve(home=layout.home, lake=tmp_path / "team-lake", machine="laptop", user="dev")
    (told,) = ingest_tables(team, homes={"claude": [home]}).results
    assert "non-message lines not stored as messages: file-history-snapshot=1, summary=1, system=1" in told.warnings
    assert "1 <synthetic> API-error responses not billed" in told.warnings
    assert "unknown part types kept raw: mystery_block=1" in told.warnings, told.warnings


def test_a_last_line_still_being_written_is_said_as_such_not_as_an_unparseable_row(layout, tmp_path):
    """A session being written when a scheduled run reads it ends in a line without its newline:
    said as "1 unparseable rows quarantined", as a broken line is, every run that met one. It is
    said for what it is (still kept in quarantine for the run), and a broken line still is."""
    home = tmp_path / "claude"
    path = write_fixture(home)
    with open(path, "a") as fh:
        fh.write(json.dumps(user_line(SID, T0, CWD, "three"))[:40])
    (result,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert result.status == "ok"
    assert ("1 last line without its newline yet (a session still being written, or cut short): in "
            "quarantine for this run, read again once complete") in result.warnings
    assert not [w for w in result.warnings if "unparseable" in w], result.warnings
    assert scalar(layout, "SELECT error FROM quarantine") == "incomplete last line (no newline yet)"

    with open(path, "a") as fh:  # finished, and a broken line after it
        fh.write(json.dumps(user_line(SID, T0, CWD, "three"))[40:] + "\n{broken\n")
    (result,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert "1 unparseable row quarantined" in result.warnings
    assert not [w for w in result.warnings if "newline yet" in w], result.warnings
    assert scalar(layout, "SELECT error FROM quarantine").startswith("not valid JSON")

    with open(path, "ab") as fh:  # a line of bytes that are not UTF-8: said by the run that reads it
        fh.write(json.dumps(user_line(SID, T0, CWD, "four")).replace("four", "caf\\u00e9").encode()[:-3]
                 + b"\xe9\"}}\n")
    (result,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert "1 lines held bytes that are not UTF-8: read with U+FFFD in their place" in result.warnings
    assert not [w for w in result.warnings if "unparseable" in w], result.warnings  # said by the run before
    with open(path, "a") as fh:  # then a good line: neither is said again, and both stay as they were
        fh.write(json.dumps(user_line(SID, T0, CWD, "five")) + "\n")
    (result,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert result.status == "ok" and not [w for w in result.warnings if "unparseable" in w or "UTF-8" in w], \
        result.warnings
    assert scalar(layout, "SELECT error FROM quarantine").startswith("not valid JSON")


def test_a_transcript_that_cannot_be_read_is_named_in_the_warnings(layout, tmp_path):
    """It was counted as "1 unparseable rows quarantined", naming no file."""
    home = tmp_path / "claude"
    path = write_fixture(home)
    (path.parent / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")  # a sync tool's dangling link
    (result,) = ingest_tables(layout, homes={"claude": [home]}).results
    said = [w for w in result.warnings if w.startswith("gone.jsonl: cannot read the transcript: ")]
    assert said and said[0].endswith("(in quarantine; read again next run)"), result.warnings
    assert not [w for w in result.warnings if "unparseable" in w], result.warnings
    assert scalar(layout, "SELECT key FROM quarantine") == "gone.jsonl:0"


def test_a_named_pipe_where_a_transcript_would_be_is_named_never_opened(layout, tmp_path):
    """A trial: a FIFO named like a transcript hung the ingest for ever (opening it waits for a
    writer). It is left out, named, and the source is read again next run; the rest is landed."""
    import os

    home = tmp_path / "claude"
    path = write_fixture(home)
    os.mkfifo(path.parent / "pipe.jsonl")
    (path.parent / "folder.jsonl").mkdir()  # its session is not there either: said, not skipped
    (result,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert result.status == "ok" and f"{path.parent / 'pipe.jsonl'} is a named pipe, not a regular file: not read" \
        in result.warnings, result.warnings
    assert f"{path.parent / 'folder.jsonl'} is a directory, not a regular file (the files in it are read)" \
        in result.warnings
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 1


def test_an_upgraded_home_keeps_every_session_once_when_its_sources_are_renamed(layout, tmp_path, monkeypatch):
    """Releases before named a project's source by its directory's path; this one by its slug.
    The first ingest after the upgrade takes the old source over: a session Claude Code deleted
    since (only in the old source's cache and files) is kept, and nothing counts twice."""
    home = tmp_path / "claude"
    write_fixture(home)
    old = "0bd0e6a1-2222-4333-8444-555566667777"
    (project(home) / f"{old}.jsonl").write_text(_other_session(old))
    with monkeypatch.context() as before:
        before.setattr("transforms.claude.discover.identity", str)
        ingest_tables(layout, homes={"claude": [home]})
    landed = query(layout, "SELECT session_id, cost_usd FROM usage ORDER BY 1")
    (project(home) / f"{old}.jsonl").unlink()  # deleted by Claude Code after 30 days
    (result,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert result.status == "ok" and result.retained_sessions == 1, result.warnings
    assert query(layout, "SELECT session_id, cost_usd FROM usage ORDER BY 1") == landed
    assert query(layout, "SELECT COUNT(DISTINCT source_id), COUNT(*) FROM sessions") == [(1, 2)]


def test_the_cache_share_counts_only_the_requests_that_record_a_cache(layout, tmp_path):
    """An analyst's trial: the dashboard's cache share summed token_usage's rows that hold a cache
    bucket, a row being a day and model of many requests: a request without one, on the same day
    and model, had its input counted (49.6% where the requests said 52.3%). The mart now counts the
    requests that record a cache and their input, as insight_cache_efficiency does."""
    from tests.conftest import ingest
    from warehouse.lake.ducklake import connect, writing
    from warehouse.serve.dashboard.headline import _TRENDS, TREND_FIGURES, Window, _cache_share, headline_figures
    from warehouse.serve.dashboard.page_parts import filtered_rows
    from warehouse.serve.report import Filters

    home = tmp_path / "claude"
    cached = usage(1000, 50, cache_read=3000, write_5m=500)
    plain = {"input_tokens": 7000, "output_tokens": 20}  # an older record: no cache keys at all
    write_jsonl(project(home) / f"{SID}.jsonl", [user_line(SID, T0, CWD, "hi"), *response(SID, T0, "msg_a", cached),
                                                 user_line(SID, T0 + timedelta(minutes=1), CWD, "again"),
                                                 *response(SID, T0 + timedelta(minutes=1), "msg_b", plain)])
    ingest(layout, homes={"claude": [home]})
    assert query(layout, "SELECT requests, cache_requests, cache_input_tokens, cache_read_tokens FROM token_usage") == [
        (2, 1, 1000 + 3000 + 500, 3000)]
    assert query(layout, "SELECT SUM(requests), SUM(input_tokens), SUM(cache_read_tokens) "
                         "FROM insight_cache_efficiency") == [(1, 4500, 3000)]
    day = T0.date()
    with connect(layout.warehouse) as con:
        now, _ = headline_figures(con, Filters(), Window(day, day, ""))
    assert (now.cache_read, now.input, now.requests) == (3000, 4500, 1) and now.share == 3000 / 4500
    # a warehouse an older release merged has neither count until its next merge: the page still
    # shows, as that release counted it (a review: the headline failed on the missing column)
    with writing(layout.warehouse) as con:
        for column in ("cache_requests", "cache_input_tokens"):
            con.execute(f"ALTER TABLE token_usage DROP COLUMN {column}")
    with connect(layout.warehouse) as con:
        before, _ = headline_figures(con, Filters(), Window(day, day, ""))
        trends = filtered_rows(con, _cache_share(_TRENDS, con), Filters())  # the trends' query too
    assert (before.cache_read, before.input, before.requests) == (3000, 4500 + 7000, 2)
    assert [dict(zip(("date", *TREND_FIGURES), r))["input"] for r in trends] == [4500 + 7000]


def test_a_result_of_content_blocks_reads_as_its_text_in_the_transcripts(layout, tmp_path):
    """A new user's trial: a Task (sub-agent) result is a list of content blocks; the dashboard's
    session page and MCP's open_session printed it as JSON (`[{"type":"text","text":...}]`). Both
    show the call's text now; the part keeps the content as Claude Code wrote it."""
    import threading
    import urllib.parse
    import urllib.request

    from tests.conftest import ingest
    from warehouse.lake.ducklake import connect
    from warehouse.serve.dashboard.server import make_server
    from warehouse.serve.mcp_tools import Limits
    from warehouse.serve.session_text import transcript

    home = tmp_path / "claude"
    blocks = [{"type": "text", "text": "It is in src/login.ts."}, {"type": "text", "text": "Line 12."}]
    call = tool_use("toolu_task", "Task", {"description": "find it", "prompt": "Find the login handler"})
    twice = tool_use("toolu_twice", "Bash", {"command": "ls"})  # answered twice: each answer its own
    write_jsonl(project(home) / f"{SID}.jsonl", [
        user_line(SID, T0, CWD, "where is login?"), *response(SID, T0, "msg_a", usage(10, 5), blocks=[call]),
        user_line(SID, T0 + timedelta(seconds=9), CWD, [tool_result("toolu_task", blocks)]),
        *response(SID, T0 + timedelta(seconds=10), "msg_b", usage(10, 5), blocks=[twice]),
        user_line(SID, T0 + timedelta(seconds=11), CWD, [tool_result("toolu_twice", "first answer")]),
        user_line(SID, T0 + timedelta(seconds=12), CWD,
                  [tool_result("toolu_twice", [{"type": "text", "text": "second answer"}])])])
    ingest(layout, homes={"claude": [home]})  # the session page reads session_summary
    assert scalar(layout, "SELECT tool_result FROM parts WHERE part_type = 'tool_result'").startswith('[{"type"')
    with connect(layout.warehouse) as con:
        key, source = con.execute("SELECT concat_ws('/', machine, \"user\", provider, source_id, session_id), "
                                  "source_id FROM sessions").fetchone()
        text = transcript(con, key, 0, Limits())
    assert "<- Task result toolu_task: It is in src/login.ts.\nLine 12." in text and '"type"' not in text
    assert "<- Bash result toolu_twice: first answer" in text and "<- Bash result toolu_twice: second answer" in text
    server = make_server(layout.warehouse, port=0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        query_string = urllib.parse.urlencode({"source": source, "id": SID, "machine": layout.machine})
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/session?{query_string}") as answer:
            page = answer.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert "It is in src/login.ts.\nLine 12." in page and "&quot;type&quot;" not in page
    # each answer read where it was written, under its call's name; the call named by its own row
    assert "<pre>first answer</pre>" in page and "<pre>second answer</pre>" in page
    assert page.count("result of Bash (toolu_twice)") == 2 and "<b>Bash</b> <code>ls</code>" in page
