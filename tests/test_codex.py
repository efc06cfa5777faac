"""Codex CLI: real rollout files in tmp homes, through the lake, read back by DuckDB."""

import hashlib
import json
import os
import threading
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from tests.conftest import ingest_tables, query, scalar
from transforms.codex.discover import discover
from transforms.synth.codex import RolloutBuilder, generate_home, spawn_source, tokens
from transforms.codex.usage import buckets
from transforms.pricing import Buckets, price_buckets
from transforms.sources import source_id_for
from warehouse.lake.layout import Layout

SID = "01958a2b-7c3d-7e4f-8a9b-0c1d2e3f4a5b"
T = datetime(2026, 3, 2, 8, 15, tzinfo=timezone.utc)

# the rollout of docs/FORMATS.md, "Codex: a worked example" (the page says what it gives)
FIXTURE = r"""
{"timestamp":"2026-03-02T08:15:00.120Z","type":"session_meta","payload":{"id":"01958a2b-7c3d-7e4f-8a9b-0c1d2e3f4a5b","timestamp":"2026-03-02T08:15:00.100Z","cwd":"/home/dev/shop","originator":"codex_cli_rs","cli_version":"0.120.0","instructions":null,"source":"cli","model_provider":"openai","git":{"commit_hash":"3f2a9e1","branch":"main"}}}
{"timestamp":"2026-03-02T08:15:02.000Z","type":"turn_context","payload":{"cwd":"/home/dev/shop","approval_policy":"on-request","sandbox_policy":{"type":"workspace-write","network_access":false},"model":"gpt-5.3-codex","effort":"medium","summary":"auto"}}
{"timestamp":"2026-03-02T08:15:02.010Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/home/dev/shop</cwd>\n</environment_context>"}]}}
{"timestamp":"2026-03-02T08:15:02.011Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Fix the failing login test"}]}}
{"timestamp":"2026-03-02T08:15:02.012Z","type":"event_msg","payload":{"type":"user_message","message":"Fix the failing login test","images":[]}}
{"timestamp":"2026-03-02T08:15:02.500Z","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{"primary":{"used_percent":4.0,"window_minutes":300,"resets_at":1772450000},"secondary":null}}}
{"timestamp":"2026-03-02T08:15:06.300Z","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"**Running the login test**"}],"content":null,"encrypted_content":"gAAAAB…"}}
{"timestamp":"2026-03-02T08:15:06.310Z","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"npm test -- login\",\"workdir\":\"/home/dev/shop\"}","call_id":"call_Xy12"}}
{"timestamp":"2026-03-02T08:15:06.400Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":9000,"cached_input_tokens":6000,"output_tokens":300,"reasoning_output_tokens":200,"total_tokens":9300},"last_token_usage":{"input_tokens":9000,"cached_input_tokens":6000,"output_tokens":300,"reasoning_output_tokens":200,"total_tokens":9300},"model_context_window":272000},"rate_limits":null}}
{"timestamp":"2026-03-02T08:15:06.450Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":9000,"cached_input_tokens":6000,"output_tokens":300,"reasoning_output_tokens":200,"total_tokens":9300},"last_token_usage":{"input_tokens":9000,"cached_input_tokens":6000,"output_tokens":300,"reasoning_output_tokens":200,"total_tokens":9300},"model_context_window":272000},"rate_limits":{"primary":{"used_percent":4.5,"window_minutes":300,"resets_at":1772450000},"secondary":null}}}
{"timestamp":"2026-03-02T08:15:09.900Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_Xy12","output":"Process exited with code 1\nWall time: 3.2 seconds\nOutput:\nFAIL src/login.test.ts"}}
{"timestamp":"2026-03-02T08:15:14.000Z","type":"response_item","payload":{"type":"custom_tool_call","status":"completed","call_id":"call_Pa34","name":"apply_patch","input":"*** Begin Patch\n*** Update File: src/auth.ts\n@@\n-  return 401\n+  return 200\n*** End Patch"}}
{"timestamp":"2026-03-02T08:15:14.200Z","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"call_Pa34","output":"Success. Updated the following files:\nM src/auth.ts"}}
{"timestamp":"2026-03-02T08:15:16.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Fixed: the handler returned 401."}]}}
{"timestamp":"2026-03-02T08:15:16.010Z","type":"event_msg","payload":{"type":"agent_message","message":"Fixed: the handler returned 401."}}
{"timestamp":"2026-03-02T08:15:16.100Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":19500,"cached_input_tokens":15000,"output_tokens":420,"reasoning_output_tokens":250,"total_tokens":19920},"last_token_usage":{"input_tokens":10500,"cached_input_tokens":9000,"output_tokens":120,"reasoning_output_tokens":50,"total_tokens":10620},"model_context_window":272000},"rate_limits":null}}
{"timestamp":"2026-03-02T09:40:00.000Z","type":"compacted","payload":{"message":"Summary of the conversation so far…"}}
{"timestamp":"2026-03-02T09:40:00.010Z","type":"event_msg","payload":{"type":"context_compacted"}}
""".strip()

PROMPTS = "SELECT COUNT(*) FROM parts WHERE part_type = 'text' AND role = 'user'"


def write_fixture(home: Path, text: str = FIXTURE, name=f"rollout-2026-03-02T09-15-00-{SID}.jsonl") -> Path:
    folder = home / "sessions" / "2026" / "03" / "02"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text + "\n")
    return folder / name


def digests(root: Path) -> dict:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def builder(sid=SID, **kw) -> RolloutBuilder:
    kw.setdefault("start", T)
    return RolloutBuilder(sid, **kw)


def test_the_documented_fixture(layout, tmp_path):
    home = tmp_path / "codex"
    write_fixture(home)
    before = digests(home)
    summary = ingest_tables(layout, homes={"codex": [home]})
    (result,) = summary.results
    assert result.status == "ok" and result.reconciled, (result.error, result.reconcile)
    # two responses: the 08:15:06.450 event repeats the 06.400 totals
    rows = query(layout, "SELECT requested_at, input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens, "
                         "output_tokens, reasoning_tokens, total_tokens, model FROM usage ORDER BY requested_at")
    assert [(r[0].time().isoformat(), *r[1:]) for r in rows] == [
        ("08:15:06.400000", 9000 - 6000, 6000, None, 300, 200, 9300, "gpt-5.3-codex"),
        ("08:15:16.100000", 10500 - 9000, 9000, None, 120, 50, 10620, "gpt-5.3-codex")]
    # session input 19 500 = uncached 4 500 + cached 15 000; output 420, of which reasoning 250
    assert query(layout, "SELECT SUM(input_uncached_tokens), SUM(cache_read_tokens), SUM(output_tokens), "
                         "SUM(reasoning_tokens), SUM(total_tokens) FROM usage") == [(4500, 15000, 420, 250, 19920)]
    per_request = [price_buckets(Buckets(3000, 6000, None, None, 300, 200), "gpt-5.3-codex", "openai",
                                 T.replace(second=6, microsecond=400_000)).cost_usd,
                   price_buckets(Buckets(1500, 9000, None, None, 120, 50), "gpt-5.3-codex", "openai",
                                 T.replace(second=16, microsecond=100_000)).cost_usd]
    rates = calc_price(Usage(input_tokens=1), "gpt-5.3-codex", provider_id="openai",
                       genai_request_timestamp=T).model_price
    by_hand = (4500 * rates.input_mtok + 15000 * rates.cache_read_mtok + 420 * rates.output_mtok) / Decimal(10**6)
    (session,) = query(layout, "SELECT cost_usd, cost_source, model, llm_provider, total_tokens, created_at, "
                               "is_root, title FROM sessions")
    assert session[0] == pytest.approx(sum(per_request), abs=1e-9) == pytest.approx(float(by_hand), abs=1e-9)
    assert session[1:] == ("estimated", "gpt-5.3-codex", "openai", 19920,
                           datetime(2026, 3, 2, 8, 15, 0, 100_000), True, None)
    assert scalar(layout, PROMPTS) == 1  # the <environment_context> message is not a prompt
    assert scalar(layout, "SELECT COUNT(*) FROM parts WHERE part_type = 'injected_context'") == 1
    calls = query(layout, "SELECT tool_name, tool_category, command, file_path, exit_code, is_error, has_result "
                          "FROM tool_calls ORDER BY called_at")
    assert calls == [("exec_command", "shell", "npm test -- login", None, 1, None, True),
                     ("apply_patch", "edit", None, "src/auth.ts", None, None, True)]
    # messages: 2 user, the reasoning+call response, 2 tool outputs, the patch call, the answer,
    # the compaction summary; the event_msg mirrors add none
    assert query(layout, "SELECT role, COUNT(*), COUNT(*) FILTER (WHERE is_summary) FROM messages "
                         "GROUP BY 1 ORDER BY 1") == [("assistant", 4, 1), ("tool", 2, 0), ("user", 2, 0)]
    assert scalar(layout, "SELECT COUNT(*) FROM usage WHERE message_id IS NULL") == 0
    assert digests(home) == before


def test_totals_that_drop_re_baseline(layout, tmp_path):
    b = builder()
    b.turn("gpt-5.3-codex")
    b.prompt("go")
    b.tokens(5000, 1000, 100)
    b.total = dict(tokens(0, 0, 0))  # Codex reset its totals (a resumed session)
    b.tokens(3000, 0, 50)
    b.tokens(2000, 500, 20)
    b.write(tmp_path / "codex")
    ingest_tables(layout, homes={"codex": [tmp_path / "codex"]})
    rows = query(layout, "SELECT input_uncached_tokens, cache_read_tokens, output_tokens, pricing_note "
                         "FROM usage ORDER BY requested_at")
    # after the drop, the event counts its own last_token_usage, then deltas go on from there
    assert [r[:3] for r in rows] == [(4000, 1000, 100), (3000, 0, 50), (1500, 500, 20)]
    assert "re-baselined" in rows[1][3] and "re-baselined" not in rows[2][3]


def test_a_count_out_of_range_is_not_priced_as_if_absent(layout, tmp_path):
    """A trial's rollout whose cumulative output went negative was priced as if it had no output (the
    count was dropped), with no word. A total out of range is no total to count from: its request
    counts its own last_token_usage, and the baseline moves on by as much; one whose last is out of
    range too is counted by the next total. A last out of range where the total re-baselines is
    not priced, and the lake nulls it with the source's warning."""
    b = builder()
    b.turn("gpt-5.3-codex")
    b.prompt("go")
    b.tokens(5000, 1000, 100)
    bad = {**b.total, "output_tokens": -700}
    for _ in range(2):  # re-emitted unchanged, as Codex does on a rate-limit refresh: counted once
        b.event(type="token_count", info={"total_token_usage": bad, "last_token_usage": tokens(3000, 0, 50)})
    b.total = {k: v + tokens(3000, 0, 50)[k] for k, v in b.total.items()}
    b.tokens(2000, 500, 20)
    b.event(type="token_count", info={"total_token_usage": bad, "last_token_usage": None})  # the next total counts it
    b.tokens(1000, 0, 10)
    b.total = dict(tokens(0, 0, 0))  # a reset, whose own request's output is negative
    b.event(type="token_count", info={"total_token_usage": tokens(400, 0, 30),
                                      "last_token_usage": {**tokens(400, 0, 30), "output_tokens": -30}})
    b.write(tmp_path / "codex")
    [result] = ingest_tables(layout, homes={"codex": [tmp_path / "codex"]}).results
    rows = query(layout, "SELECT input_uncached_tokens, cache_read_tokens, output_tokens, cost_source, pricing_note "
                         "FROM usage ORDER BY requested_at")
    assert [r[:4] for r in rows] == [(4000, 1000, 100, "estimated"), (3000, 0, 50, "estimated"),
                                     (1500, 500, 20, "estimated"), (1000, 0, 10, "estimated"),
                                     (400, 0, None, "unknown")]
    assert "last only" in rows[1][4] and "out of range" in rows[4][4]
    assert result.status == "ok" and f"{SID}: 2 token_count events with a cumulative total out of range" in \
        "; ".join(result.warnings)
    assert [w for w in result.warnings if "1 value out of range nulled" in w and "output_tokens" in w]
    assert scalar(layout, "SELECT cost_source FROM sessions") == "partial"


def test_a_first_total_out_of_range_is_the_baseline_its_last_gives():
    """With no total before it, the event's own counts are where the next total is counted from
    (a review: the next total was counted whole, this request again)."""
    from transforms.codex.usage import TokenDeltas

    deltas = TokenDeltas()
    first = deltas.feed({"total_token_usage": {**tokens(300, 0, 10), "output_tokens": -1},
                         "last_token_usage": tokens(300, 0, 10)})
    then = deltas.feed({"total_token_usage": tokens(700, 0, 30), "last_token_usage": tokens(400, 0, 20)})
    assert (first.tokens, first.how) == (tokens(300, 0, 10), "last only")
    assert then.tokens["input_tokens"] == 400 and then.tokens["output_tokens"] == 20 and deltas.bad_totals == 1


def test_cached_input_and_reasoning_are_not_added_again(layout, tmp_path):
    b = builder()
    b.turn("gpt-5.3-codex")
    b.tokens(10_000, 7_000, 900, reasoning=600, cache_write=1_000)
    b.write(tmp_path / "codex")
    ingest_tables(layout, homes={"codex": [tmp_path / "codex"]})
    assert query(layout, "SELECT input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens, "
                         "cache_write_1h_tokens, output_tokens, reasoning_tokens, total_tokens FROM usage") == [
        (10_000 - 7_000 - 1_000, 7_000, 1_000, None, 900, 600, 10_000 + 900)]


def test_a_fork_drops_its_parents_replayed_history(layout, tmp_path):
    home = tmp_path / "codex"
    parent = builder("11111111-1111-4111-8111-111111111111")
    parent.turn("gpt-5.3-codex")
    parent.prompt("first question")
    parent.say("first answer")
    parent.tokens(8000, 0, 200)
    fork = builder("22222222-2222-4222-8222-222222222222", start=parent.now + timedelta(minutes=5),
                   forked_from=parent.sid)
    # the fork's own prompt comes within the replay's second: only the parent's lines tell them apart
    fork.replay(parent, gap=timedelta(0))
    fork.prompt("second question")
    fork.say("second answer")
    fork.tokens(9000, 8000, 100)
    parent.prompt("the parent goes on")  # after the fork: never in the fork's copy
    parent.tokens(9500, 8000, 50)
    parent.write(home)
    fork.write(home)
    summary = ingest_tables(layout, homes={"codex": [home]})
    # the fork's own request only: its totals go on from the parent's
    assert query(layout, "SELECT session_id, input_uncached_tokens, cache_read_tokens, output_tokens FROM usage "
                         "ORDER BY session_id, requested_at") == [
        (parent.sid, 8000, 0, 200), (parent.sid, 1500, 8000, 50), (fork.sid, 1000, 8000, 100)]
    assert query(layout, "SELECT text FROM parts WHERE part_type = 'text' AND role = 'user' AND session_id = ?",
                 fork.sid) == [("second question",)]
    assert any("matched the parent's rollout" in w for r in summary.results for w in r.warnings)
    rows = query(layout, "SELECT session_id, is_root, forked_from_session_id, inherited_cost_usd, cost_usd "
                         "FROM sessions ORDER BY created_at")
    first, then = (price_buckets(buckets(delta), model, "openai", at).cost_usd for delta, model, at in parent.requests)
    assert rows[0] == (parent.sid, True, None, None, pytest.approx(first + then))
    assert rows[1][:4] == (fork.sid, True, parent.sid, pytest.approx(first))  # the cost at the fork
    assert scalar(layout, "SELECT COUNT(DISTINCT root_session_id) FROM sessions") == 2  # a fork is a root of its own


def test_a_fork_whose_parent_is_gone_drops_the_first_second_burst(layout, tmp_path):
    parent = builder("11111111-1111-4111-8111-111111111111")
    parent.turn("gpt-5.3-codex")
    parent.prompt("first question")
    parent.tokens(8000, 0, 200)
    fork = builder("22222222-2222-4222-8222-222222222222", start=parent.now, forked_from=parent.sid)
    fork.replay(parent)  # the parent's rollout itself is never written
    fork.prompt("second question")
    fork.tokens(9000, 8000, 100)
    fork.write(tmp_path / "codex")
    summary = ingest_tables(layout, homes={"codex": [tmp_path / "codex"]})
    assert query(layout, "SELECT input_uncached_tokens, cache_read_tokens FROM usage") == [(1000, 8000)]
    assert scalar(layout, "SELECT string_agg(text, '|') FROM parts WHERE role = 'user'") == "second question"
    assert any("first second" in w for w in summary.results[0].warnings)


def test_a_spawned_sub_agent_is_rolled_into_its_roots_cost(layout, tmp_path):
    home = tmp_path / "codex"
    root = builder()
    root.turn("gpt-5.3-codex")
    root.prompt("split the work")
    root.call("spawn_agent", {"message": "lint"}, "call_spawn")
    root.tokens(6000, 0, 300)
    child = builder("33333333-3333-4333-8333-333333333333", start=root.now, source=spawn_source(SID))
    child.replay(root)
    child.turn("gpt-5.1-codex-mini")
    child.prompt("lint")
    child.tokens(4000, 0, 80)
    root.output("call_spawn", '{"agent_id": "33333333-3333-4333-8333-333333333333"}')
    root.tokens(7000, 6000, 50)
    root.write(home)
    child.write(home)
    ingest_tables(layout, homes={"codex": [home]})

    def cost(delta, model, at):
        return price_buckets(buckets(delta), model, "openai", at).cost_usd

    own = {b.sid: sum(cost(*r) for r in b.requests) for b in (root, child)}
    rows = query(layout, "SELECT session_id, is_root, parent_session_id, root_session_id, cost_usd, "
                         "cost_includes_subagents FROM sessions ORDER BY is_root")
    assert rows == [(child.sid, False, SID, SID, pytest.approx(own[child.sid]), False),
                    (SID, True, None, SID, pytest.approx(own[SID] + own[child.sid]), True)]
    assert query(layout, "SELECT session_id, is_sidechain, model, input_uncached_tokens FROM usage "
                         "ORDER BY is_sidechain, requested_at") == [(SID, False, "gpt-5.3-codex", 6000),
                                                                    (SID, False, "gpt-5.3-codex", 1000),
                                                                    (child.sid, True, "gpt-5.1-codex-mini", 4000)]
    assert scalar(layout, "SELECT COUNT(DISTINCT source_id) FROM sessions") == 1
    assert query(layout, "SELECT tool_category FROM tool_calls") == [("agent",)]


def test_a_sub_agent_whose_parent_is_gone_is_kept_as_a_root(layout, tmp_path):
    child = builder("33333333-3333-4333-8333-333333333333", source=spawn_source(SID))
    child.turn("gpt-5.3-codex")
    child.prompt("lint")
    child.tokens(4000, 0, 80)
    child.write(tmp_path / "codex")
    summary = ingest_tables(layout, homes={"codex": [tmp_path / "codex"]})
    assert query(layout, "SELECT is_root, parent_session_id, root_session_id, cost_source FROM sessions") == [
        (True, None, child.sid, "estimated")]
    assert any("whose rollout was not found: kept as a root" in w for w in summary.results[0].warnings)


def test_an_archived_copy_is_counted_once_and_the_active_copy_wins(layout, tmp_path):
    home = tmp_path / "codex"
    (home / "archived_sessions").mkdir(parents=True)
    archived = write_fixture(home).rename(home / "archived_sessions" / f"rollout-2026-03-02T09-15-00-{SID}.jsonl")
    active = write_fixture(home, FIXTURE.replace("Fix the failing login test", "Fix the login test"))
    (source,) = discover(env={"CODEX_HOME": str(home)}).sources
    assert source.path == str(active) and source.members == (str(active),)
    ingest_tables(layout, homes={"codex": [home]})
    assert query(layout, "SELECT COUNT(*), SUM(total_tokens) FROM sessions") == [(1, 19920)]
    assert scalar(layout, "SELECT string_agg(text, '|') FROM parts WHERE part_type = 'text' AND role = 'user'") == \
        "Fix the login test"
    assert archived.exists()


def test_model_from_turn_context_and_times_from_the_lines(layout, tmp_path):
    # created just before midnight UTC; Codex names the folder and file in local time (the next day)
    b = builder(start=datetime(2026, 3, 2, 23, 59, 58, tzinfo=timezone.utc),
                dynamic_tools=[{"name": "lookup", "model": "gpt-4o"}], git={"model": "o3"})
    b.turn("gpt-5.3-codex")
    b.tokens(1000, 0, 10)
    b.turn("gpt-5.1-codex-mini")
    b.tokens(1000, 0, 10)
    path = b.write(tmp_path / "codex", local_day="2026-03-03")
    assert "2026/03/03" in path.as_posix() and "rollout-2026-03-03T" in path.name
    ingest_tables(layout, homes={"codex": [tmp_path / "codex"]})
    assert [r[0] for r in query(layout, "SELECT model FROM usage ORDER BY requested_at")] == [
        "gpt-5.3-codex", "gpt-5.1-codex-mini"]
    assert query(layout, "SELECT created_at, date::VARCHAR, model FROM sessions") == [
        (datetime(2026, 3, 2, 23, 59, 58), "2026-03-02", "gpt-5.1-codex-mini")]


def test_tool_failures_and_exit_codes_are_read_from_the_output(layout, tmp_path):
    b = builder()
    b.turn("gpt-5.3-codex")
    b.call("shell", {"command": ["bash", "-lc", "npm test -- 'a b'"]}, "c1")
    b.output("c1", json.dumps({"output": "boom", "metadata": {"exit_code": 2, "duration_seconds": 0.3}}))
    b.call("shell_command", {"command": "make lint"}, "c2")
    b.output("c2", "Exit code: 0\nWall time: 1.1 seconds\nOutput:\nProcess exited with code 9")
    b.call("exec_command", {"cmd": "npm run dev"}, "c3")
    b.output("c3", "Chunk ID: 7\nWall time: 10.0 seconds\nProcess running with session ID 4\nOutput:\nready")
    b.call("exec_command", {"cmd": 42}, "c4")
    b.output("c4", "failed to parse function arguments: invalid type: integer `42`, expected a string")
    b.patch("c5", "src/a.ts")
    b.patch_output("c5", "src/a.ts", ok=False)
    b.item(type="local_shell_call", call_id="c6", status="completed", action={"type": "exec", "command": ["ls", "-la"]})
    b.output("c6", "Exit code: 3\nWall time: 0.1 seconds\nOutput:\n")
    b.item(type="web_search_call", id="c7", status="completed", action={"type": "search", "query": "codex"})
    b.call("view_image", {"path": "shot.png"}, "c8")
    b.item(type="function_call", name="create_issue", namespace="mcp__github", arguments="{}", call_id="c9")
    b.write(tmp_path / "codex")
    ingest_tables(layout, homes={"codex": [tmp_path / "codex"]})
    assert query(layout, "SELECT tool_call_id, tool_name, tool_category, command, file_path, exit_code, is_error "
                         "FROM tool_calls ORDER BY 1") == [
        ("c1", "shell", "shell", "bash -lc 'npm test -- '\"'\"'a b'\"'\"''", None, 2, None),  # non-zero: no error
        ("c2", "shell_command", "shell", "make lint", None, 0, None),  # the output's own text never counts
        ("c3", "exec_command", "shell", "npm run dev", None, None, None),  # still running: no exit code
        ("c4", "exec_command", "shell", None, None, None, True),  # the tool could not run
        ("c5", "apply_patch", "edit", None, "src/a.ts", None, True),
        ("c6", "local_shell", "shell", "ls -la", None, 3, None),
        ("c7", "web_search", "search", None, None, None, None),
        ("c8", "view_image", "read", None, "shot.png", None, None),
        ("c9", "mcp__github__create_issue", "mcp", None, None, None, None)]
    assert scalar(layout, "SELECT COUNT(*) FROM parts WHERE part_type = 'tool_result' AND is_error") == 2


def test_injected_context_is_kept_but_is_not_a_prompt(layout, tmp_path):
    b = builder()
    b.item(type="message", role="developer", content=[{"type": "input_text", "text": "<permissions instructions>"}])
    b.item(type="message", role="user", content=[{"type": "input_text", "text": "# AGENTS.md instructions for /x"},
                                                 {"type": "input_text", "text": "<user_instructions>be brief"}])
    b.injected()
    b.prompt("the real question")
    b.write(tmp_path / "codex")
    ingest_tables(layout, homes={"codex": [tmp_path / "codex"]})
    assert scalar(layout, PROMPTS) == 1
    assert query(layout, "SELECT role, COUNT(*) FROM parts WHERE part_type = 'injected_context' "
                         "GROUP BY 1 ORDER BY 1") == [("developer", 1), ("user", 3)]


def test_unpriced_review_model_is_unknown_never_zero(layout, tmp_path):
    b = builder(source={"subagent": "review"})
    b.turn("codex-auto-review")
    b.tokens(1000, 0, 10)
    b.turn("gpt-5.3-codex")
    b.tokens(1000, 0, 10)
    b.write(tmp_path / "codex")
    ingest_tables(layout, homes={"codex": [tmp_path / "codex"]})
    assert query(layout, "SELECT model, cost_usd, cost_source FROM usage ORDER BY requested_at")[0] == (
        "codex-auto-review", None, "unknown")
    priced = price_buckets(Buckets(1000, 0, None, None, 10, 0), "gpt-5.3-codex", "openai", b.requests[1][2])
    assert query(layout, "SELECT is_root, cost_usd, cost_source FROM sessions") == [
        (True, pytest.approx(priced.cost_usd), "partial")]


def test_malformed_lines_are_quarantined_and_the_rest_ingested(layout, tmp_path):
    home = tmp_path / "codex"
    lines = FIXTURE.splitlines()
    lines.insert(5, '{"timestamp": "2026-03-02T08:15:02.400Z", "type": "event_msg", "payl')
    lines.insert(7, '[1, 2]')
    lines.append('{"timestamp":"2026-03-02T09:41:00.000Z","type":"response_item","payload":{"type":"new_kind"}}')
    lines.append('{"timestamp":"2026-03-02T09:41:01.000Z","type":"event_msg","payload":{"type":"new_event"}}')
    path = write_fixture(home, "\n".join(lines))
    bad = write_fixture(home, "not json\n" + FIXTURE, name="rollout-2026-03-02T10-00-00-bad.jsonl")
    summary = ingest_tables(layout, homes={"codex": [home]})
    assert sorted(r.status for r in summary.results) == ["ok", "ok"]
    errors = dict(query(layout, "SELECT key, error FROM quarantine"))
    assert sorted(errors) == sorted([f"{bad}:1", f"{path}:6", f"{path}:8"])
    assert "no session_meta on the first line" in errors[f"{bad}:1"] and "not valid JSON" in errors[f"{path}:6"]
    assert scalar(layout, "SELECT raw FROM quarantine WHERE key = ?", f"{path}:8") == "[1, 2]"
    assert query(layout, "SELECT COUNT(*), SUM(total_tokens) FROM usage") == [(2, 19920)]
    assert query(layout, "SELECT part_type, native_part_type, is_known_type FROM parts WHERE NOT is_known_type") == [
        ("other", "new_kind", False)]
    warnings = [w for r in summary.results for w in r.warnings]
    assert any("unknown part types kept raw: new_kind=1" in w for w in warnings)
    assert any("lines not used: event new_event=1" in w for w in warnings)


def test_a_last_line_still_being_written_is_said_as_such_and_read_once_complete(layout, tmp_path):
    """A trial: a rollout caught while Codex appends to it was said to hold a line that is "not
    valid JSON". Its last line without a newline is said as unfinished, and the next run, the
    line complete, has no quarantine row left."""
    from transforms.jsontext import UNFINISHED

    home = tmp_path / "codex"
    whole = '{"timestamp":"2026-03-02T09:41:01.000Z","type":"event_msg","payload":{"type":"new_event"}}'
    path = write_fixture(home)
    path.write_text(FIXTURE.rstrip("\n") + "\n" + whole[:40])  # no newline after it yet
    (result,) = ingest_tables(layout, homes={"codex": [home]}).results
    assert query(layout, "SELECT error FROM quarantine") == [(UNFINISHED,)]
    assert "1 last line without its newline yet (a session still being written, or cut short): in quarantine " \
           "for this run, read again once complete" in result.warnings, result.warnings
    assert not [w for w in result.warnings if "unparseable" in w], result.warnings
    path.write_text(FIXTURE.rstrip("\n") + "\n" + whole + "\n")
    ingest_tables(layout, homes={"codex": [home]})
    assert scalar(layout, "SELECT COUNT(*) FROM quarantine") == 0
    assert query(layout, "SELECT COUNT(*), SUM(total_tokens) FROM usage") == [(2, 19920)]


def test_a_first_landing_into_another_lake_keeps_the_notes_of_sessions_the_home_cached(tmp_path):
    """A team trial: a home that had ingested into its own lake landed into the team's lake from
    its cache, and the sessions' notes (lines not used, unknown types) reached neither the summary
    nor the team's run log (`sources`)."""
    home = tmp_path / "codex"
    lines = FIXTURE.splitlines()
    lines.append('{"timestamp":"2026-03-02T09:41:01.000Z","type":"event_msg","payload":{"type":"new_event"}}')
    write_fixture(home, "\n".join(lines))
    own = Layout.resolve(home=tmp_path / "agentlake", machine="laptop", user="ana")
    team = Layout.resolve(home=tmp_path / "agentlake", lake=tmp_path / "team-lake", machine="laptop", user="ana")
    cached = {}  # the home's cache after each landing: the team's takes the sessions from it
    for layout in (own, team):
        summary = ingest_tables(layout, homes={"codex": [home]})
        cached[layout] = {p: p.stat().st_mtime_ns for p in own.cache_dir.rglob("*.pkl")}
        warnings = [w for r in summary.results for w in r.warnings]
        assert any("lines not used: event new_event=1" in w for w in warnings), (layout.lake, warnings)
        logged = scalar(layout, "SELECT string_agg(warnings, ' | ') FROM sources WHERE provider = 'codex'")
        assert "lines not used: event new_event=1" in (logged or ""), logged
    assert cached[own] and cached[team] == cached[own]  # no session read again for its notes
    again = ingest_tables(team, homes={"codex": [home]})  # read before: its notes are not said again
    assert [r.status for r in again.results] == ["unchanged"]


def test_a_sessions_warnings_are_said_by_the_run_that_read_it_not_by_each_later_one(layout, tmp_path):
    """A trial: a rollout's broken line was said ("1 unparseable rows quarantined") in the run log
    of every later run that read another session of its project, never reading that rollout
    again. The row stays in quarantine; the warning is the run's that read it."""
    home = tmp_path / "codex"
    lines = FIXTURE.splitlines()
    kind = '{"timestamp":"2026-03-02T09:41:00.000Z","type":"response_item","payload":{"type":"new_kind"}}'
    write_fixture(home, "\n".join(lines[:3] + ["{broken"] + lines[3:] + [kind]))
    (first,) = ingest_tables(layout, homes={"codex": [home]}).results
    assert "1 unparseable row quarantined" in first.warnings, first.warnings
    assert "unknown part types kept raw: new_kind=1" in first.warnings, first.warnings

    def another(n: int, text: str):
        sid = f"0199bbbb-0000-7000-8000-00000000000{n}"
        path = write_fixture(home, name=f"rollout-2026-03-02T1{n}-15-00-{sid}.jsonl")
        path.write_text(text.replace(SID, sid))  # as given: a last line without its newline stays so
        (result,) = ingest_tables(layout, homes={"codex": [home]}).results
        assert result.status == "ok" and result.source.source_id == first.source.source_id  # one project: one source
        return result

    second = another(2, FIXTURE + "\n")
    assert not [w for w in second.warnings if "unparseable" in w or "part types" in w], second.warnings
    assert scalar(layout, "SELECT COUNT(*) FROM quarantine") == 1  # still there
    logged = query(layout, "SELECT quarantined, unknown_part_types, warnings FROM sources WHERE provider = 'codex' "
                           "ORDER BY run_at")
    assert [(q, k) for q, k, _ in logged] == [(1, 1), (1, 1)] and "unparseable" not in (logged[-1][2] or ""), logged
    # a session caught being written, then another with a broken line: each run says its own
    third = another(3, FIXTURE.rstrip("\n") + "\n" + kind[:40])
    assert [w for w in third.warnings if "newline yet" in w] and not [w for w in third.warnings if "unparseable" in w]
    fourth = another(4, "\n".join(lines[:1] + ["{broken"] + lines[1:]) + "\n")
    assert "1 unparseable row quarantined" in fourth.warnings, fourth.warnings
    assert not [w for w in fourth.warnings if "newline yet" in w], fourth.warnings
    assert scalar(layout, "SELECT COUNT(*) FROM quarantine") == 3


def test_codex_home_is_honoured(tmp_path):
    write_fixture(tmp_path / "user" / ".codex")
    write_fixture(tmp_path / "explicit", FIXTURE.replace(SID, "99999999-9999-4999-8999-999999999999"))
    found = discover(env={"HOME": str(tmp_path / "user"), "CODEX_HOME": str(tmp_path / "explicit")})
    assert [s.identity for s in found.sources] == ["99999999-9999-4999-8999-999999999999"]
    assert [s.identity for s in discover(env={"HOME": str(tmp_path / "user")}).sources] == [SID]
    assert discover(env={"CODEX_HOME": "rel/home"}).problems and not discover(env={"CODEX_HOME": "rel"}).sources
    assert "not a directory" in discover(env={"CODEX_HOME": str(tmp_path / "none")}).problems[0]


def test_credentials_are_never_opened(layout, tmp_path):
    home = tmp_path / "codex"
    write_fixture(home)
    os.mkfifo(home / "auth.json")  # opening it would block forever
    done = threading.Event()

    def run():
        ingest_tables(layout, homes={"codex": [home]})
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(60), "ingestion blocked: it opened auth.json"
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 1


def test_generated_home_totals(layout, tmp_path):
    home = tmp_path / "codex"
    truth = generate_home(home, sessions=9, seed=3)
    before = digests(home)
    summary = ingest_tables(layout, homes={"codex": [home]})
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    assert query(layout, "SELECT COUNT(*), COUNT(*) FILTER (WHERE is_root) FROM sessions") == [
        (truth.sessions, truth.roots)]
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == truth.messages
    assert scalar(layout, PROMPTS) == truth.prompts
    assert query(layout, "SELECT COUNT(*), COUNT(*) FILTER (WHERE cost_usd IS NULL), "
                         "SUM(input_uncached_tokens + cache_read_tokens), SUM(cache_read_tokens), "
                         "SUM(output_tokens) FROM usage") == [
        (truth.usage_rows, truth.unpriced_requests, truth.input_tokens, truth.cached_tokens, truth.output_tokens)]
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(truth.cost_usd)
    assert dict(query(layout, "SELECT project_path, SUM(cost_usd) FROM sessions WHERE is_root GROUP BY 1")) == \
        pytest.approx(dict(truth.by_workspace))
    assert dict(query(layout, "SELECT tool_name, COUNT(*) FROM tool_calls GROUP BY 1")) == truth.tool_calls_by_name
    assert dict(query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1")) == truth.parts_by_type
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE is_error") == truth.tool_errors
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE exit_code <> 0") == truth.nonzero_exits
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE NOT has_result") == 0
    assert digests(home) == before


# --- rollouts that cannot be read: named, counted, never counted twice -------------------------

def _spawning_parents(home: Path) -> dict[str, Path]:
    """The rollouts of the sessions that spawned a sub-agent, by session id."""
    rollouts = {json.loads(p.open().readline())["payload"]["id"]: p for p in sorted(home.rglob("rollout-*.jsonl"))}
    parents = set()
    for path in rollouts.values():
        source = json.loads(path.open().readline())["payload"]["source"]
        if isinstance(source, dict) and isinstance(source.get("subagent"), dict):
            parents.add(source["subagent"]["thread_spawn"]["parent_thread_id"])
    return {sid: rollouts[sid] for sid in sorted(parents)}


SESSIONS = ("SELECT session_id, is_root, parent_session_id, root_session_id, cost_usd FROM sessions "
            "ORDER BY session_id")
ROOT_TOTALS = "SELECT COUNT(*), SUM(cost_usd) FROM sessions WHERE is_root"


@pytest.mark.parametrize("damage", [b"", b'{"timestamp":"2026-01-06T23:00:00.000Z","type":"sess'])
def test_a_parent_rollout_emptied_after_ingest_keeps_its_sub_agent_inside_its_cost(layout, tmp_path, damage):
    """The lake keeps the parent's row, whose cost holds its sub-agent's: the sub-agent read as a
    root beside it would be counted twice. The session tree is a part that cannot be read: named,
    quarantined, its rows kept as the lake holds them."""
    home = tmp_path / "codex"
    truth = generate_home(home, sessions=9, seed=3)
    ingest_tables(layout, homes={"codex": [home]})
    before = query(layout, SESSIONS)
    assert query(layout, ROOT_TOTALS) == [(truth.roots, pytest.approx(truth.cost_usd))]
    parent_id, parent = next(iter(_spawning_parents(home).items()))
    tree_cost = scalar(layout, "SELECT cost_usd FROM sessions WHERE session_id = ?", parent_id)
    parent.write_bytes(damage)
    summary = ingest_tables(layout, homes={"codex": [home]})
    assert query(layout, ROOT_TOTALS) == [(truth.roots, pytest.approx(truth.cost_usd))]
    assert query(layout, SESSIONS) == before
    assert [r.status for r in summary.results if r.status != "unchanged"] == ["ok"] and summary.exit_code == 0
    warnings = [w for r in summary.results for w in r.warnings]
    assert any("could not be read" in w and str(parent) in w for w in warnings), warnings
    assert not any("kept as a root" in w for w in warnings)
    assert query(layout, "SELECT key FROM quarantine") == [(str(parent),)]
    assert [r.status for r in ingest_tables(layout, homes={"codex": [home]}).results] == ["unchanged"] * len(summary.results)
    # a lake that never held it: the tree waits for its parent, named; the other trees are whole
    fresh = Layout.resolve(home=tmp_path / "fresh", machine="laptop", user="dev")
    summary = ingest_tables(fresh, homes={"codex": [home]})
    assert summary.exit_code == 0
    assert any(str(parent) in w for r in summary.results for w in r.warnings)
    assert scalar(fresh, "SELECT COUNT(*) FROM sessions WHERE root_session_id = ?", parent_id) == 0
    assert query(fresh, ROOT_TOTALS) == [(truth.roots - 1, pytest.approx(truth.cost_usd - tree_cost))]


def test_a_parent_rollout_deleted_after_ingest_keeps_its_sub_agent_inside_its_cost(layout, tmp_path):
    """A parent's rollout deleted (a date folder pruned) while its sub-agent's stays: the lake
    keeps the parent's rows, whose root cost holds the sub-agent's, so the sub-agent stays its
    sub-agent (read as a root beside it, its cost was counted twice: a user's trial)."""
    home = tmp_path / "codex"
    truth = generate_home(home, sessions=9, seed=3)
    ingest_tables(layout, homes={"codex": [home]})
    before = query(layout, SESSIONS)
    parent_id, parent = next(iter(_spawning_parents(home).items()))
    own = scalar(layout, "SELECT SUM(cost_usd) FROM usage WHERE session_id = ?", parent_id)
    children = scalar(layout, "SELECT COUNT(*) FROM sessions WHERE parent_session_id = ?", parent_id)
    parent.unlink()
    # its tree keeps its source; each sub-agent's own tree of releases before (a root of its own)
    # is a former id of it, so a lake that holds them so moves their rows, not keeps them twice
    (tree,) = [s for s in discover(env={"CODEX_HOME": str(home)}).sources if s.identity == parent_id]
    kids = [sid for sid, parent_of in query(layout, "SELECT session_id, parent_session_id FROM sessions")
            if parent_of == parent_id]
    assert tree.gone == (parent_id,) and {source_id_for("codex", k) for k in kids} <= set(tree.formerly)
    summary = ingest_tables(layout, homes={"codex": [home]})
    assert query(layout, ROOT_TOTALS) == [(truth.roots, pytest.approx(truth.cost_usd))]
    assert query(layout, SESSIONS) == before
    warnings = [w for r in summary.results for w in r.warnings]
    assert any(f"sub-agent of {parent_id}, whose rollout is gone: still its sub-agent" in w for w in warnings), warnings
    assert not any("kept as a root" in w for w in warnings)
    assert [r.status for r in ingest_tables(layout, homes={"codex": [home]}).results] == ["unchanged"] * len(summary.results)
    # read again later (a sub-agent grown, then a full refresh): the parent's kept rows still hold it
    (child,) = [p for p in home.rglob("rollout-*.jsonl") if parent_id in p.open().readline()][:1]
    with open(child, "a") as fh:
        fh.write(json.dumps({"timestamp": "2026-03-30T00:00:00.000Z", "type": "event_msg",
                             "payload": {"type": "agent_reasoning", "text": "x"}}) + "\n")
    for full_refresh in (False, True):
        ingest_tables(layout, homes={"codex": [home]}, full_refresh=full_refresh)
        assert query(layout, ROOT_TOTALS) == [(truth.roots, pytest.approx(truth.cost_usd))]
        assert query(layout, SESSIONS) == before
    # a lake that never held the parent: its sub-agents are roots, each cost counted once
    fresh = Layout.resolve(home=tmp_path / "fresh", machine="laptop", user="dev")
    summary = ingest_tables(fresh, homes={"codex": [home]})
    assert any("whose rollout was not found: kept as a root" in w for r in summary.results for w in r.warnings)
    assert query(fresh, ROOT_TOTALS) == [(truth.roots - 1 + children, pytest.approx(truth.cost_usd - own))]
    assert scalar(fresh, "SELECT SUM(cost_usd) FROM usage") == pytest.approx(truth.cost_usd - own)


def _three_levels(home: Path):
    """A root that spawned a sub-agent that spawned another, in one project: the middle one's
    builder, and the three rollouts' paths."""
    root = builder(cwd="/home/dev/shop")
    root.turn("gpt-5.3-codex")
    root.tokens(6000, 0, 300)
    middle = builder("33333333-3333-4333-8333-333333333333", start=root.now, cwd="/home/dev/shop",
                     source=spawn_source(SID))
    middle.replay(root)
    middle.tokens(4000, 0, 80)
    leaf = builder("44444444-4444-4444-8444-444444444444", start=middle.now, cwd="/home/dev/shop",
                   source=spawn_source(middle.sid, depth=2))
    leaf.replay(middle)
    leaf.tokens(2000, 0, 40)
    return middle, [b.write(home) for b in (root, middle, leaf)]


def test_a_deleted_sub_agent_that_spawned_another_keeps_its_cost_and_its_sub_agent_in_its_root(layout, tmp_path):
    """A middle sub-agent's rollout deleted: its row stays in the lake, its cost in its root's, and
    its own sub-agent stays its own, found from that sub-agent's copy of its session_meta."""
    home = tmp_path / "codex"
    middle, paths = _three_levels(home)
    ingest_tables(layout, homes={"codex": [home]})
    before = query(layout, SESSIONS)
    assert query(layout, ROOT_TOTALS) == [(1, pytest.approx(scalar(layout, "SELECT SUM(cost_usd) FROM usage")))]
    paths[1].unlink()
    (source,) = discover(env={"CODEX_HOME": str(home)}).sources
    assert (source.identity, source.gone, source.gone_parents) == (SID, (middle.sid,), ((middle.sid, SID),))
    summary = ingest_tables(layout, homes={"codex": [home]})
    assert query(layout, SESSIONS) == [tuple(pytest.approx(v) if isinstance(v, float) else v for v in row)
                                       for row in before]
    assert query(layout, ROOT_TOTALS) == [(1, pytest.approx(scalar(layout, "SELECT SUM(cost_usd) FROM usage")))]
    assert any(f"sub-agent of {middle.sid}, whose rollout is gone: still its sub-agent" in w
               for r in summary.results for w in r.warnings)
    # a lake that never held the middle one: its sub-agent is a root, outside the root's tree, once
    fresh = Layout.resolve(home=tmp_path / "fresh", machine="laptop", user="dev")
    ingest_tables(fresh, homes={"codex": [home]})
    assert query(fresh, ROOT_TOTALS) == [(2, pytest.approx(scalar(fresh, "SELECT SUM(cost_usd) FROM usage")))]


def test_an_emptied_sub_agent_that_spawned_another_keeps_its_tree(layout, tmp_path):
    """A sub-agent's rollout begins with its parent's, session_meta first: an emptied middle
    rollout finds its own parent, and its project, in its child's copy of it."""
    home = tmp_path / "codex"
    middle, paths = _three_levels(home)
    ingest_tables(layout, homes={"codex": [home]})
    before = query(layout, SESSIONS)
    assert query(layout, ROOT_TOTALS) == [(1, pytest.approx(scalar(layout, "SELECT SUM(cost_usd) FROM usage")))]
    paths[1].write_bytes(b"")
    (source,) = discover(env={"CODEX_HOME": str(home)}).sources
    assert (source.identity, source.project_path, sorted(source.members)) == (SID, "/home/dev/shop",
                                                                              sorted(map(str, paths)))
    summary = ingest_tables(layout, homes={"codex": [home]})
    assert query(layout, SESSIONS) == before
    assert any(str(paths[1]) in w for r in summary.results for w in r.warnings)


def test_an_empty_rollout_is_named_and_makes_no_source(layout, tmp_path):
    """An empty rollout holds no session and names no project: it is counted and named in the
    warnings of the session started before it (an empty copy of a session read elsewhere, with
    that session), and no `unknown` source is made of it."""
    home = tmp_path / "codex"
    truth = generate_home(home, sessions=6, seed=3)
    day = home / "sessions" / "2026" / "01" / "08"
    day.mkdir(parents=True)
    lone = day / "rollout-2026-01-08T10-00-00-0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee.jsonl"
    lone.write_bytes(b"")
    copied = sorted((home / "sessions").rglob("rollout-*.jsonl"))[0]
    copy = copied.with_name(f"{copied.stem} (1).jsonl")  # as Codex Desktop leaves them
    copy.write_bytes(b"")
    summary = ingest_tables(layout, homes={"codex": [home]})
    assert summary.exit_code == 0 and {r.status for r in summary.results} == {"ok"}
    assert "unknown" not in {r.source.project for r in summary.results}
    assert scalar(layout, "SELECT COUNT(*) FROM sources WHERE project = 'unknown'") == 0
    warnings = [w for r in summary.results for w in r.warnings]
    for path in (lone, copy):
        assert any(str(path) in w and "empty rollout" in w for w in warnings), (path, warnings)
    assert sorted(k for (k,) in query(layout, "SELECT key FROM quarantine")) == sorted([f"{lone}:1", f"{copy}:1"])
    assert query(layout, ROOT_TOTALS) == [(truth.roots, pytest.approx(truth.cost_usd))]
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == truth.sessions
    # once Codex writes it, it is a session of its own
    b = builder("0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee", start=datetime(2026, 1, 8, 10, tzinfo=timezone.utc))
    b.turn("gpt-5.3-codex")
    b.tokens(1000, 0, 10)
    lone.write_text("".join(json.dumps(line) + "\n" for line in b.lines))
    ingest_tables(layout, homes={"codex": [home]})
    assert sorted(k for (k,) in query(layout, "SELECT key FROM quarantine")) == [f"{copy}:1"]
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == truth.sessions + 1


@pytest.mark.parametrize("archived", [False, True], ids=["in place", "archived since"])
def test_a_rollout_unreadable_at_first_leaves_no_quarantine_row_once_codex_wrote_it(layout, tmp_path, archived):
    """A rollout whose first line is cut (Codex caught writing its session_meta) is a source of
    its own in the `unknown` project, keyed by its path and quarantined whole. Once Codex wrote the
    line, the session lands in its project's bundle, which takes it out of that source: the
    quarantine row does not outlive the file's state, and the session counts once. So too when
    Codex has archived it since (`archived_sessions/`: another path)."""
    home = tmp_path / "codex"
    truth = generate_home(home, sessions=6, seed=3)
    sid = "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"
    day = home / "sessions" / "2026" / "01" / "08"
    day.mkdir(parents=True)
    rollout = day / f"rollout-2026-01-08T10-00-00-{sid}.jsonl"
    rollout.write_bytes(b'{"timestamp":"2026-01-08T10:00:00.000Z","type":"session_me')
    ingest_tables(layout, homes={"codex": [home]})
    assert query(layout, "SELECT project, key FROM quarantine") == [("unknown", f"{rollout}:1")]
    b = builder(sid, start=datetime(2026, 1, 8, 10, tzinfo=timezone.utc))
    b.turn("gpt-5.3-codex")
    b.tokens(1000, 0, 10)
    rollout.write_text("".join(json.dumps(line) + "\n" for line in b.lines))
    if archived:
        (home / "archived_sessions").mkdir(exist_ok=True)
        rollout.rename(home / "archived_sessions" / rollout.name)
    summary = ingest_tables(layout, homes={"codex": [home]})
    assert summary.exit_code == 0
    assert query(layout, "SELECT key FROM quarantine") == []
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == truth.sessions + 1
    assert scalar(layout, "SELECT COUNT(*) FROM sessions WHERE session_id = ? AND project <> 'unknown'", sid) == 1
    unknown = layout.lake / "_landing" / "laptop" / "dev" / "codex" / source_id_for("codex", "project:")
    assert not unknown.exists()  # the unknown project's folder went with its one rollout


def test_a_home_holding_only_an_empty_rollout_skips_it_by_name(layout, tmp_path):
    lone = tmp_path / "codex" / "sessions" / "2026" / "01" / "08" / f"rollout-2026-01-08T10-00-00-{SID}.jsonl"
    lone.parent.mkdir(parents=True)
    lone.write_bytes(b"")
    summary = ingest_tables(layout, homes={"codex": [tmp_path / "codex"]})
    assert [(r.status, str(lone) in r.error) for r in summary.results] == [("skipped", True)]
    assert summary.exit_code == 0
    assert not (layout.lake / "_landing" / "laptop" / "dev" / "codex").exists()


def test_a_rollout_of_codexs_first_format_is_said_as_that_not_as_malformed(layout, tmp_path):
    """Codex's rollouts before session_meta (2025): a header without `type`, a state record, bare
    response items, and no token counts. Quarantined whole as "malformed", which read as a
    broken file: it is said for what it is, and the other sessions are read as before."""
    home = tmp_path / "codex"
    truth = generate_home(home, sessions=3, seed=4)
    old = home / "sessions" / "2025" / "05" / "02" / "rollout-2025-05-02T10-00-00-0196aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee.jsonl"
    old.parent.mkdir(parents=True)
    lines = [{"id": "0196aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee", "timestamp": "2025-05-02T10:00:00.000Z",
              "instructions": None, "git": {"commit_hash": "abc", "branch": "main"}},
             {"record_type": "state"},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    old.write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    summary = ingest_tables(layout, homes={"codex": [home]})
    assert summary.exit_code == 0
    warnings = [w for r in summary.results for w in r.warnings]
    assert any(str(old) in w and "a rollout of Codex's first format" in w for w in warnings), warnings
    assert not [w for w in warnings if "malformed" in w], warnings
    assert query(layout, "SELECT key, error FROM quarantine") == [
        (f"{old}:1", "a rollout of Codex's first format (an {id, timestamp, instructions} header, before "
                     "session_meta and token counts, 2025): not read, kept whole in quarantine")]
    assert query(layout, ROOT_TOTALS) == [(truth.roots, pytest.approx(truth.cost_usd))]


def test_of_two_copies_of_a_session_the_larger_is_read_and_the_other_named(layout, tmp_path):
    """A sync tool's `... (1).jsonl` holding the first lines of a session sorted before the real
    rollout, and was read instead of it: 3 of 9 messages, $0, without a word."""
    home = tmp_path / "codex"
    full = write_fixture(home)
    stale = full.with_name(full.name.replace(".jsonl", " (1).jsonl"))
    stale.write_text("\n".join(FIXTURE.splitlines()[:4]) + "\n")
    assert sorted(p.name for p in full.parent.iterdir())[0] == stale.name  # it sorts first
    (source,) = discover(env={"CODEX_HOME": str(home)}).sources
    assert source.members == (str(full),) and source.copies == (str(stale),)
    (result,) = ingest_tables(layout, homes={"codex": [home]}).results
    assert any(w.startswith(f"{stale}: another copy of a session") for w in result.warnings), result.warnings
    assert query(layout, "SELECT COUNT(*), SUM(total_tokens) FROM sessions") == [(1, 19920)]


def test_a_named_pipe_where_a_rollout_would_be_is_a_problem_never_opened(layout, tmp_path):
    """A trial: a FIFO named like a rollout hung the ingest for ever, in discovery (its head is
    read there). It is a problem naming it (exit 1 from the CLI); the other rollouts are landed."""
    import os

    home = tmp_path / "codex"
    rollout = write_fixture(home)
    pipe = rollout.with_name("rollout-2026-03-02T10-00-00-0199a213-81c0-7800-8aa1-bbab2a035a99.jsonl")
    os.mkfifo(pipe)
    found = discover(env={"CODEX_HOME": str(home)})
    assert [s.path for s in found.sources] == [str(rollout)]
    assert found.problems == [f"{pipe} is a named pipe, not a regular file: not read"]
    ingest_tables(layout, homes={"codex": [home]})
    assert query(layout, "SELECT COUNT(*), SUM(total_tokens) FROM sessions") == [(1, 19920)]


def test_a_symlinked_month_folder_is_read(layout, tmp_path):
    """Old months moved to another disk and linked back were skipped without a word (rglob does
    not follow symlinked folders); a link loop still ends."""
    home = tmp_path / "codex"
    rollout = write_fixture(home)
    moved = tmp_path / "other-disk" / "03"
    moved.parent.mkdir()
    rollout.parent.parent.rename(moved)
    (home / "sessions" / "2026" / "03").symlink_to(moved, target_is_directory=True)
    (moved / "loop").symlink_to(home / "sessions", target_is_directory=True)
    (source,) = discover(env={"CODEX_HOME": str(home)}).sources
    assert source.path == str(moved / "02" / rollout.name)
    ingest_tables(layout, homes={"codex": [home]})
    assert query(layout, "SELECT COUNT(*), SUM(total_tokens) FROM sessions") == [(1, 19920)]


def test_discovery_reads_a_rollouts_first_line_only(tmp_path, monkeypatch):
    """Discovery reads each rollout's session_meta line at every run. It read the cap's worth of
    every file to find that line's end: a heavy Codex user's thousands of large rollouts were
    gigabytes of reads per no-op run (docs/BENCHMARKS.md). It reads to the line's end now; a line
    longer than the cap is still no head."""
    import builtins

    from transforms.jsontext import first_line

    path = tmp_path / "rollout.jsonl"
    meta = {"type": "session_meta", "payload": {"id": "s1", "instructions": "x" * 30_000}}
    path.write_text(json.dumps(meta) + "\r\n" + (json.dumps({"type": "event_msg", "payload": "y" * 5000}) + "\n") * 400)
    read = []
    opened = builtins.open

    class Counted:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def tell(self):
            return self.fh.tell()

        def readline(self, size=-1):
            line = self.fh.readline(size)
            read.append(self.fh.tell())  # what the buffered file took from the disk, to the line's end
            return line

        def read(self, size=-1):
            data = self.fh.read(size)
            read.append(self.fh.tell())
            return data

    monkeypatch.setattr(builtins, "open", lambda *a, **k: Counted(opened(*a, **k)))
    assert first_line(path) == meta
    monkeypatch.undo()
    assert read and max(read) < 40_000 < path.stat().st_size  # its first line, not the cap's worth of the file
    assert first_line(path, cap=1000) is None  # cut short by the cap: not JSON, no head
