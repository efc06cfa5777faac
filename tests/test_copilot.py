"""GitHub Copilot CLI: real `events.jsonl` session logs in tmp homes, through the lake, read back
by DuckDB. Expected numbers are spelled out from each fixture's own inputs."""

import hashlib
import json
from collections import Counter
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from pipelines.command_args import agent_homes
from tests.conftest import ingest_tables, query, scalar
from transforms.copilot.discover import discover
from transforms.copilot.normalise import Context, expected_counts, normalise, parse_lines
from transforms.synth.copilot import SessionBuilder, generate_home, iso, metric
from transforms.pricing import Buckets, price_buckets
from warehouse.lake.config import load_config

SID = "3b1c6f9e-2a4d-4e8f-9b7a-5c6d7e8f9a0b"
T = datetime(2026, 3, 2, 8, 15, tzinfo=timezone.utc)

# One session as Copilot CLI writes it (event shapes from github/copilot-sdk's generated schema):
# a prompt, an injected skill prompt, reasoning written twice (event + reasoningText), a streamed
# delta (ephemeral), three calls each written twice (toolRequests + tool.execution_start), one MCP
# call, one failed edit, a checkpoint, and the shutdown with per-model and per-agent metrics.
FIXTURE = r"""
{"type":"session.start","data":{"sessionId":"3b1c6f9e-2a4d-4e8f-9b7a-5c6d7e8f9a0b","version":1,"producer":"copilot-agent","copilotVersion":"1.0.40","startTime":"2026-03-02T08:15:00.100Z","selectedModel":"claude-sonnet-4.5","context":{"cwd":"/home/dev/shop","gitRoot":"/home/dev/shop","branch":"main","repository":"dev/shop"}},"id":"e0","timestamp":"2026-03-02T08:15:00.120Z","parentId":null}
{"type":"user.message","data":{"content":"Fix the failing login test","transformedContent":"<current_datetime>2026-03-02</current_datetime>\nFix the failing login test","attachments":[]},"id":"e1","timestamp":"2026-03-02T08:15:02.000Z","parentId":"e0"}
{"type":"user.message","data":{"content":"<skill name=\"pdf\">Use the pdf tool</skill>","source":"skill-pdf"},"id":"e2","timestamp":"2026-03-02T08:15:02.010Z","parentId":"e1"}
{"type":"assistant.turn_start","data":{"turnId":"0","model":"claude-sonnet-4.5"},"id":"e3","timestamp":"2026-03-02T08:15:02.100Z","parentId":"e2"}
{"type":"assistant.reasoning","data":{"reasoningId":"r1","content":"Run the test first."},"id":"e4","timestamp":"2026-03-02T08:15:04.000Z","parentId":"e3"}
{"type":"assistant.message_delta","data":{"messageId":"m1","deltaContent":"I'll"},"id":"e5","timestamp":"2026-03-02T08:15:04.100Z","parentId":"e4","ephemeral":true}
{"type":"assistant.message","data":{"messageId":"m1","content":"I'll run the login test.","model":"claude-sonnet-4.5","outputTokens":120,"reasoningText":"Run the test first.","toolRequests":[{"toolCallId":"toolu_01","name":"bash","arguments":{"command":"npm test -- login","description":"Run login tests"},"type":"function"}]},"id":"e6","timestamp":"2026-03-02T08:15:05.000Z","parentId":"e5"}
{"type":"tool.execution_start","data":{"toolCallId":"toolu_01","toolName":"bash","arguments":{"command":"npm test -- login","description":"Run login tests"}},"id":"e7","timestamp":"2026-03-02T08:15:05.100Z","parentId":"e6"}
{"type":"tool.execution_complete","data":{"toolCallId":"toolu_01","success":true,"model":"claude-sonnet-4.5","result":{"content":"FAIL src/login.test.ts\n<exited with exit code 1>","detailedContent":"FAIL src/login.test.ts\n<exited with exit code 1>"}},"id":"e8","timestamp":"2026-03-02T08:15:08.000Z","parentId":"e7"}
{"type":"assistant.message","data":{"messageId":"m2","content":"","model":"claude-sonnet-4.5","outputTokens":80,"toolRequests":[{"toolCallId":"toolu_02","name":"edit","arguments":{"path":"/home/dev/shop/src/auth.ts","old_str":"401","new_str":"200"},"type":"function"},{"toolCallId":"toolu_03","name":"github-mcp-server-get_issue","arguments":{"owner":"dev","repo":"shop","issue_number":7},"mcpServerName":"github-mcp-server","mcpToolName":"get_issue","type":"function"}]},"id":"e9","timestamp":"2026-03-02T08:15:10.000Z","parentId":"e8"}
{"type":"tool.execution_start","data":{"toolCallId":"toolu_02","toolName":"edit","arguments":{"path":"/home/dev/shop/src/auth.ts","old_str":"401","new_str":"200"}},"id":"e10","timestamp":"2026-03-02T08:15:10.100Z","parentId":"e9"}
{"type":"tool.execution_complete","data":{"toolCallId":"toolu_02","success":false,"error":{"message":"old_str not found in /home/dev/shop/src/auth.ts","code":"failure"}},"id":"e11","timestamp":"2026-03-02T08:15:10.200Z","parentId":"e10"}
{"type":"tool.execution_start","data":{"toolCallId":"toolu_03","toolName":"github-mcp-server-get_issue","arguments":{"owner":"dev","repo":"shop","issue_number":7},"mcpServerName":"github-mcp-server","mcpToolName":"get_issue"},"id":"e12","timestamp":"2026-03-02T08:15:10.300Z","parentId":"e11"}
{"type":"tool.execution_complete","data":{"toolCallId":"toolu_03","success":true,"result":{"content":"Issue #7: login returns 401"}},"id":"e13","timestamp":"2026-03-02T08:15:11.000Z","parentId":"e12"}
{"type":"assistant.message","data":{"messageId":"m3","content":"Fixed the status code.","model":"claude-sonnet-4.5","outputTokens":40},"id":"e14","timestamp":"2026-03-02T08:15:14.000Z","parentId":"e13"}
{"type":"session.usage_checkpoint","data":{"totalNanoAiu":1500000000,"totalPremiumRequests":1},"id":"e15","timestamp":"2026-03-02T08:15:14.100Z","parentId":"e14"}
{"type":"session.shutdown","data":{"shutdownType":"routine","sessionStartTime":1772439300100,"totalApiDurationMs":9000,"totalPremiumRequests":1,"totalNanoAiu":2500000000,"codeChanges":{"linesAdded":0,"linesRemoved":0,"filesModified":[]},"currentModel":"claude-sonnet-4.5","modelMetrics":{"claude-sonnet-4.5":{"requests":{"count":3,"cost":3},"usage":{"inputTokens":30000,"outputTokens":900,"cacheReadTokens":24000,"cacheWriteTokens":4000,"reasoningTokens":200},"totalNanoAiu":2400000000},"gpt-5-mini":{"requests":{"count":1,"cost":0},"usage":{"inputTokens":2000,"outputTokens":100,"cacheReadTokens":0,"cacheWriteTokens":0},"totalNanoAiu":100000000}},"agentMetrics":{"main":{"modelMetrics":{"claude-sonnet-4.5":{"requests":{"count":3},"usage":{"inputTokens":30000,"outputTokens":900,"cacheReadTokens":24000,"cacheWriteTokens":4000,"reasoningTokens":200},"totalNanoAiu":2400000000}},"totalApiDurationMs":8000,"totalNanoAiu":2400000000},"agent-1":{"agentName":"explore","modelMetrics":{"gpt-5-mini":{"requests":{"count":1},"usage":{"inputTokens":2000,"outputTokens":100,"cacheReadTokens":0,"cacheWriteTokens":0},"totalNanoAiu":100000000}},"totalApiDurationMs":1000,"totalNanoAiu":100000000}}},"id":"e16","timestamp":"2026-03-02T08:15:20.000Z","parentId":"e15"}
""".strip()

USAGE_SQL = ("SELECT model, input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, "
             "output_tokens, reasoning_tokens, total_tokens, cost_usd, cost_source FROM usage ORDER BY model")


def write_fixture(home: Path, text: str = FIXTURE, sid: str = SID, title="Fix login test") -> Path:
    folder = home / "session-state" / sid
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "events.jsonl").write_text(text + "\n")
    (folder / "workspace.yaml").write_text(f"id: {sid}\ncwd: /home/dev/shop\nsummary: {title}\n"
                                           "created_at: 2026-03-02T08:15:00.100Z\n")
    return folder / "events.jsonl"


def digests(root: Path) -> dict:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def cp(layout, *homes):
    return ingest_tables(layout, homes={"copilot": list(homes)})


def without_nano(text: str) -> str:
    """The same session under a premium-request plan: no nano-AIU anywhere."""
    lines = []
    for line in text.splitlines():
        event = json.loads(line)
        data = event["data"]
        data.pop("totalNanoAiu", None)
        agents = [a["modelMetrics"] for a in data.get("agentMetrics", {}).values()]
        for metrics in [data.get("modelMetrics", {})] + agents:
            for m in metrics.values():
                m.pop("totalNanoAiu", None)
        if event["type"] != "session.usage_checkpoint":
            lines.append(json.dumps(event))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- the fixture

def test_the_documented_fixture(layout, tmp_path):
    home = tmp_path / "copilot"
    write_fixture(home)
    before = digests(home)
    (result,) = cp(layout, home).results
    assert result.status == "ok" and result.reconciled, (result.error, result.reconcile)
    # inputTokens includes the cache: uncached = 30 000 - 24 000 read - 4 000 written = 2 000;
    # reasoning (200) is inside the 900 output; a nano-AIU is $1e-11: 2.4e9 -> $0.024, 1e8 -> $0.001
    assert query(layout, USAGE_SQL) == [
        ("claude-sonnet-4.5", 2000, 24000, 4000, None, 900, 200, 2000 + 24000 + 4000 + 900, 0.024, "native"),
        ("gpt-5-mini", 2000, 0, 0, None, 100, None, 2100, 0.001, "native")]
    # the shutdown's agentMetrics (main + the explore sub-agent) is a breakdown: never added
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == 2
    assert query(layout, "SELECT session_id, title, project, cost_usd, cost_source, total_tokens, message_count, "
                         "created_at, is_root, model FROM sessions") == [
        (SID, "Fix login test", "shop", 0.025, "native", 30900 + 2100, 8, datetime(2026, 3, 2, 8, 15, 0, 100_000),
         True, "gpt-5-mini")]
    # 2 prompts (one injected), 3 assistant messages (the reasoning event is m1's), 3 tool results; no delta
    assert query(layout, "SELECT role, COUNT(*) FROM messages GROUP BY 1 ORDER BY 1") == [
        ("assistant", 3), ("tool", 3), ("user", 2)]
    # the reasoning is written twice (event + reasoningText) and counted once, in the message it
    # preceded; 3 calls written twice, once each
    assert query(layout, "SELECT message_id FROM parts WHERE part_type = 'reasoning'") == [("e6",)]
    assert query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1 ORDER BY 1") == [
        ("injected_context", 1), ("reasoning", 1), ("text", 3), ("tool_call", 3), ("tool_result", 3)]
    assert scalar(layout, "SELECT COUNT(*) FROM parts WHERE part_type = 'text' AND role = 'user'") == 1
    assert query(layout, "SELECT tool_name, tool_category, command, file_path, exit_code, is_error, has_result, "
                         "result_text FROM tool_calls ORDER BY called_at, tool_name") == [
        ("bash", "shell", "npm test -- login", None, 1, False, True,
         "FAIL src/login.test.ts\n<exited with exit code 1>"),
        ("edit", "edit", None, "/home/dev/shop/src/auth.ts", None, True, True,
         "old_str not found in /home/dev/shop/src/auth.ts"),
        ("github-mcp-server-get_issue", "mcp", None, None, None, False, True, "Issue #7: login returns 401")]
    assert any("1 streamed or ephemeral events skipped" in w for w in result.warnings)
    assert digests(home) == before


def test_a_premium_plan_session_is_priced_from_its_tokens(layout, tmp_path):
    home = tmp_path / "copilot"
    write_fixture(home, without_nano(FIXTURE))
    cp(layout, home)
    rows = query(layout, USAGE_SQL)
    at = datetime(2026, 3, 2, 8, 15, 20, tzinfo=timezone.utc)
    rates = calc_price(Usage(input_tokens=1), "claude-sonnet-4.5", genai_request_timestamp=at).model_price
    base = {k: getattr(rates, k).base for k in ("input_mtok", "cache_read_mtok", "cache_write_mtok", "output_mtok")}
    # 30 000 input tokens: under the 200k tier, so the base rates apply
    by_hand = (2000 * base["input_mtok"] + 24000 * base["cache_read_mtok"] + 4000 * base["cache_write_mtok"]
               + 900 * base["output_mtok"]) / Decimal(10**6)
    assert rows[0][:8] == ("claude-sonnet-4.5", 2000, 24000, 4000, None, 900, 200, 30900)
    assert rows[0][8] == pytest.approx(float(by_hand), abs=1e-9) and rows[0][9] == "estimated"
    mini = price_buckets(Buckets(2000, 0, 0, None, 100), "gpt-5-mini", None, at)
    assert rows[1][8:] == (pytest.approx(mini.cost_usd, abs=1e-9), "estimated")
    assert query(layout, "SELECT cost_usd, cost_source FROM sessions") == [
        (pytest.approx(float(by_hand) + mini.cost_usd, abs=1e-9), "estimated")]


def test_ccusage_adds_reasoning_to_output_copilot_counts_it_inside(layout, tmp_path):
    """ccusage's Copilot adapter prices `output_tokens + reasoning_output_tokens`
    (rust/crates/ccusage/src/adapter/copilot/loader.rs). Copilot's API is OpenAI-shaped, where
    reasoning tokens are a detail OF the completion tokens, and the CLI shows them "as a
    parenthetical on output token count" (copilot-cli changelog): adding them counts them twice."""
    home = tmp_path / "copilot"
    write_fixture(home, without_nano(FIXTURE))
    cp(layout, home)
    output, reasoning, total = query(layout, "SELECT output_tokens, reasoning_tokens, total_tokens FROM usage "
                                             "WHERE model = 'claude-sonnet-4.5'")[0]
    assert (output, reasoning) == (900, 200)
    assert total == 2000 + 24000 + 4000 + 900  # not + 200
    ccusage_like = price_buckets(Buckets(2000, 24000, 4000, None, 900 + 200), "claude-sonnet-4.5", None, T)
    ours = price_buckets(Buckets(2000, 24000, 4000, None, 900), "claude-sonnet-4.5", None, T)
    assert ccusage_like.cost_usd > ours.cost_usd


# ---------------------------------------------------------------------------------- traps

def lifetime(b: SessionBuilder, n: int, out_tokens=60):
    b.prompt(f"step {n}")
    b.turn(n)
    b.answer(f"answer {n}", output_tokens=out_tokens)


def test_resumed_lifetimes_add_their_metrics_but_the_nano_aiu_total_is_cumulative(layout, tmp_path):
    b = SessionBuilder(SID, start=T)
    lifetime(b, 0)
    b.shutdown({"claude-sonnet-4.5": metric(10_000, 300, read=6_000, write=1_000, nano_aiu=500_000_000)},
               total_nano_aiu=500_000_000)
    b.resume()
    lifetime(b, 1)
    b.checkpoint(700_000_000)
    b.shutdown({"claude-sonnet-4.5": metric(8_000, 200, read=7_000, nano_aiu=300_000_000)},
               total_nano_aiu=800_000_000)  # 5e8 restored from the checkpoint + this lifetime's 3e8
    b.write(tmp_path / "copilot")
    cp(layout, tmp_path / "copilot")
    assert query(layout, "SELECT input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens, output_tokens, "
                         "cost_usd FROM usage ORDER BY requested_at") == [
        (10_000 - 6_000 - 1_000, 6_000, 1_000, 300, 0.005), (8_000 - 7_000, 7_000, 0, 200, 0.003)]
    cost, source, tokens = query(layout, "SELECT cost_usd, cost_source, total_tokens FROM sessions")[0]
    assert (cost, source) == (0.008, "native")  # 8e8 nano-AIU; summing the totals (5e8 + 8e8) would say 0.013
    assert tokens == (10_000 + 300) + (8_000 + 200)


def test_a_lifetime_killed_before_its_shutdown_keeps_its_checkpointed_cost(layout, tmp_path):
    b = SessionBuilder(SID, start=T)
    lifetime(b, 0)
    b.shutdown({"claude-sonnet-4.5": metric(10_000, 300, read=6_000, nano_aiu=500_000_000)},
               total_nano_aiu=500_000_000)
    b.resume()
    lifetime(b, 1)
    b.checkpoint(900_000_000)  # then the process was killed: no shutdown, no token counts
    b.write(tmp_path / "copilot")
    killed = SessionBuilder("killed-no-checkpoint", start=T)
    lifetime(killed, 0)
    killed.write(tmp_path / "copilot")
    probe = SessionBuilder("prompt-only", start=T)
    probe.prompt("hello")
    probe.write(tmp_path / "copilot")
    cp(layout, tmp_path / "copilot")
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == 1
    assert query(layout, "SELECT session_id, cost_usd, cost_source FROM sessions ORDER BY session_id") == [
        (SID, 0.009, "native"), ("killed-no-checkpoint", None, "unknown"), ("prompt-only", 0.0, "estimated")]


def test_sub_agent_events_stay_in_the_session_and_their_usage_is_not_added(layout, tmp_path):
    b = SessionBuilder(SID, start=T)
    b.prompt("Explore the repo")
    b.answer("", requests=[("toolu_task", "task", {"agent_type": "explore", "prompt": "list the tests"})])
    b.add("subagent.started", {"toolCallId": "toolu_task", "agentName": "explore", "agentDisplayName": "Explore",
                               "agentDescription": "reads code"})
    b.answer("", requests=[("toolu_g", "grep", {"pattern": "test", "path": "src"})], agentId="agent-1")
    b.tool("toolu_g", "grep", {"pattern": "test"}, "src/a.test.ts", agentId="agent-1")
    b.answer("Three tests.", agentId="agent-1")
    b.add("subagent.completed", {"toolCallId": "toolu_task", "agentName": "explore"})
    b.tool("toolu_task", "task", {"agent_type": "explore"}, "Three tests.")
    sub = metric(3_000, 100)
    main = metric(5_000, 200)
    b.shutdown({"claude-sonnet-4.5": main, "claude-haiku-4.5": sub},
               agent_metrics={"main": {"modelMetrics": {"claude-sonnet-4.5": main}, "totalNanoAiu": 0},
                              "agent-1": {"agentName": "explore", "modelMetrics": {"claude-haiku-4.5": sub},
                                          "totalNanoAiu": 0}})
    b.write(tmp_path / "copilot")
    (result,) = cp(layout, tmp_path / "copilot").results
    assert result.reconciled, result.reconcile
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == 5_200 + 3_100
    assert scalar(layout, "SELECT COUNT(*) FROM messages WHERE extra_columns LIKE '%\"agentId\":\"agent-1\"%'") == 3
    assert query(layout, "SELECT tool_name, tool_category FROM tool_calls ORDER BY called_at") == [
        ("task", "agent"), ("grep", "search")]
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 1


def test_a_line_that_is_not_an_event_is_quarantined_and_the_rest_read(layout, tmp_path):
    lines = FIXTURE.splitlines()
    write_fixture(tmp_path / "copilot", "\n".join(lines[:3] + ['{"type": "user.mess'] + lines[3:]))
    (result,) = cp(layout, tmp_path / "copilot").results
    assert result.status == "ok" and result.reconciled
    assert query(layout, "SELECT source_rowid, raw FROM quarantine") == [(3, '{"type": "user.mess')]
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 8


def test_config_json_is_never_opened(layout, tmp_path):
    from tests.test_gemini import ingest_with_fifos

    home = tmp_path / "copilot"
    write_fixture(home)
    ingest_with_fifos(layout, "copilot", home, ("config.json",))  # it may hold a token
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 1


# ---------------------------------------------------------------------------------- discovery

def test_copilot_home_is_exact_and_a_relative_one_is_refused(tmp_path):
    home = tmp_path / "ch"
    write_fixture(home)
    found = discover(env={"COPILOT_HOME": str(home), "HOME": str(tmp_path / "nobody")})
    assert [(s.identity, s.project_path) for s in found.sources] == [(SID, "/home/dev/shop")] and not found.problems
    found = discover(env={"COPILOT_HOME": "rel/dir", "HOME": str(tmp_path)})
    assert not found.sources and "relative" in found.problems[0]


def test_the_default_home_then_older_xdg_homes_one_source_per_session(tmp_path):
    user = tmp_path / "user"
    write_fixture(user / ".copilot")  # the folder layout, current home
    flat = SessionBuilder(SID, start=T, cwd="/elsewhere")
    flat.prompt("older copy")
    flat.write(tmp_path / "state" / ".copilot", flat=True)  # the same session, not migrated yet
    only_old = SessionBuilder("old-only", start=T, cwd="/home/dev/old")
    only_old.prompt("hi")
    only_old.write(tmp_path / "state" / ".copilot", flat=True)
    write_legacy(tmp_path / "state" / ".copilot", legacy_session())  # the first format (no cwd recorded)
    found = discover(env={"HOME": str(user), "XDG_STATE_HOME": str(tmp_path / "state")})
    assert sorted((s.identity, s.project_path) for s in found.sources) == [
        (SID, "/home/dev/shop"), (LEGACY_SID, ""), ("old-only", "/home/dev/old")]
    assert not found.problems
    # USERPROFILE is the home on Windows
    found = discover(env={"USERPROFILE": str(user)})
    assert [s.identity for s in found.sources] == [SID]


def test_agent_home_flag_and_config_section(tmp_path):
    assert agent_homes([f"copilot={tmp_path}"]) == {"copilot": (str(tmp_path),)}
    config = tmp_path / "config.toml"
    config.write_text(f'[copilot]\nextra_roots = ["{tmp_path / "copilot"}"]\n')
    assert load_config(config).extra_roots["copilot"] == (str(tmp_path / "copilot"),)


# ---------------------------------------------------------------------------------- demo data

def test_the_generator_writes_what_its_truth_says(layout, tmp_path):
    truth = generate_home(tmp_path / "copilot", sessions=6, seed=3)
    summary = cp(layout, tmp_path / "copilot")
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == truth.sessions
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == truth.messages
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls") == truth.tool_calls
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == truth.usage_rows
    assert query(layout, "SELECT SUM(input_uncached_tokens), SUM(cache_read_tokens), SUM(cache_write_5m_tokens), "
                         "SUM(output_tokens) FROM usage") == [
        (truth.tokens["input_uncached"], truth.tokens["cache_read"], truth.tokens["cache_write"],
         truth.tokens["output"])]
    native = scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE cost_source = 'native'")
    assert native == pytest.approx(truth.native_usd, abs=1e-9)


# ---------------------------------------------------------------------------------- message counts

def test_one_assistant_message_per_model_response(tmp_path):
    """A store's `assistant.message` events are the model's responses, and so are the lake's
    assistant messages. The reasoning a response streamed first is written again as an
    `assistant.reasoning` event (the same text as the message's `reasoningText`): it is a part of
    that response, not a message of its own; a reasoning whose response never came (aborted) is one.
    A tool the user ran (`tool.user_requested`, then its start) is the user's message, not Copilot's."""
    b = SessionBuilder(SID, start=T)
    b.prompt("Fix the login test")
    b.turn(0)
    b.add("assistant.reasoning", {"reasoningId": "r1", "content": "Run the test first."})
    b.answer("I'll run it.", requests=[("toolu_1", "bash", {"command": "npm test", "description": "Run tests"})],
             reasoning="Run the test first.")
    b.tool("toolu_1", "bash", {"command": "npm test"}, "FAIL\n<exited with exit code 1>")
    b.add("assistant.reasoning", {"reasoningId": "r2", "content": "The handler returns 401."})
    b.answer("Fixed.", reasoning="The handler returns 401.")
    b.add("assistant.turn_end", {"turnId": "0"})
    b.add("tool.user_requested", {"toolCallId": "user_1", "toolName": "bash", "arguments": {"command": "git diff"}})
    b.tool("user_1", "bash", {"command": "git diff"}, "diff --git a/src/auth.ts\n<exited with exit code 0>")
    b.prompt("Also the signup test")
    b.turn(1)
    b.add("assistant.reasoning", {"reasoningId": "r3", "content": "Look at signup."})
    b.add("abort", {"reason": "user initiated"})  # no response after its reasoning
    events, bad = parse_lines(b.text().encode())
    rows, _ = normalise(events, Context("src", SID, "/home/dev/shop"))
    kinds = Counter(e["type"] for e in b.events)
    assistant = [m for m in rows["messages"] if m["role"] == "assistant"]
    assert len(assistant) == kinds["assistant.message"] + 1  # + the aborted response's reasoning
    assert [m["role"] for m in rows["messages"]].count("user") == kinds["user.message"] + kinds["tool.user_requested"]
    reasoning = [(p["message_id"], p["reasoning"]) for p in rows["parts"] if p["part_type"] == "reasoning"]
    answers = [e["id"] for e in b.events if e["type"] == "assistant.message"]
    assert reasoning == [(answers[0], "Run the test first."), (answers[1], "The handler returns 401."),
                         (assistant[-1]["message_id"], "Look at signup.")]
    assert expected_counts(events)["messages"] == len(rows["messages"])


# ---------------------------------------------------------------------------------- the first format

LEGACY_SID = "5d3c1b2a-7e6f-4a8b-9c0d-1e2f3a4b5c6d"
REMINDER = "\n\n<reminder>\nWhen you need to run several tools, call them in parallel.\n</reminder>"
VIEW_ARGS = {"command": "view", "path": "/home/dev/shop/src/auth.ts"}
EDIT_ARGS = {"command": "str_replace", "path": "/home/dev/shop/src/auth.ts", "old_str": "401", "new_str": "200"}


def completed(entry_id, at, call_id, name, title, args, kind, log, **more):
    """A timeline `tool_call_requested` entry as updateToolCallTimelineEntryResult rewrites it in place."""
    return {"type": "tool_call_completed", "id": entry_id, "timestamp": at, "callId": call_id, "name": name,
            "toolTitle": title, "intentionSummary": title, "arguments": args,
            "result": {"type": kind, "log": log, "markdown": False}, **more}


def legacy_session() -> dict:
    """One session as Copilot CLI 0.0.340 saved it (the zod schema and the session manager of
    @github/copilot 0.0.340): the model's context in `chatMessages` (OpenAI chat messages), what
    the CLI showed in `timeline`. A prompt that @-mentions a file (the CLI's synthetic turn reading
    it: chat only), a response with text and a shell call, a response with two calls (one failed),
    a final answer, an error line, a `!` shell command the user ran (timeline only), and a call
    interrupted before its result."""
    bash_args = {"command": "npm test -- login", "description": "Run login tests"}
    chat = [
        {"role": "user", "content": "Fix the login test in /home/dev/shop/src/login.test.ts\n\n"
                                    "<current_datetime>2025-10-01T09:00:01.000Z</current_datetime>" + REMINDER},
        {"role": "assistant", "content": "I need to read the content of those paths to answer this request.",
         "tool_calls": [{"id": "mention-1", "type": "function", "function": {"name": "str_replace_editor",
                         "arguments": json.dumps({"command": "view", "path": "/home/dev/shop/src/login.test.ts"})}}]},
        {"role": "tool", "tool_call_id": "mention-1", "content": "1.test('login', ...)"},
        {"role": "assistant", "content": "I'll run the login test.", "tool_calls": [
            {"id": "toolu_01", "type": "function", "function": {"name": "bash", "arguments": json.dumps(bash_args)}}]},
        {"role": "tool", "tool_call_id": "toolu_01", "content": "FAIL src/login.test.ts\n<exited with exit code 1>"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "toolu_02", "type": "function", "function": {"name": "str_replace_editor",
                                                                 "arguments": json.dumps(VIEW_ARGS)}},
            {"id": "toolu_03", "type": "function", "function": {"name": "str_replace_editor",
                                                                 "arguments": json.dumps(EDIT_ARGS)}}]},
        {"role": "tool", "tool_call_id": "toolu_02", "content": "1.export const status = 401;"},
        {"role": "tool", "tool_call_id": "toolu_03", "content": "No replacement was performed."},
        {"role": "assistant", "content": "The handler returns 401; I'll look again.", "tool_calls": [
            {"id": "toolu_04", "type": "function", "function": {"name": "bash",
                                                                 "arguments": json.dumps({"command": "git log"})}}]},
        {"role": "tool", "tool_call_id": "toolu_04", "content": "The execution of this tool, or a previous tool "
                                                                "was interrupted."},
    ]
    timeline = [
        {"id": "t1", "timestamp": "2025-10-01T09:00:01.000Z", "type": "user",
         "text": "Fix the login test in @src/login.test.ts"},
        {"id": "t2", "timestamp": "2025-10-01T09:00:04.000Z", "type": "copilot", "text": "I'll run the login test."},
        completed("t3", "2025-10-01T09:00:04.100Z", "toolu_01", "bash", "Run login tests", bash_args, "success",
                  "FAIL src/login.test.ts\n<exited with exit code 1>"),
        completed("t4", "2025-10-01T09:00:09.000Z", "toolu_02", "str_replace_editor", "View auth.ts", VIEW_ARGS,
                  "success", "export const status = 401;"),
        completed("t5", "2025-10-01T09:00:09.100Z", "toolu_03", "str_replace_editor", "Edit auth.ts", EDIT_ARGS,
                  "failure", "No match found"),
        {"id": "t6", "timestamp": "2025-10-01T09:00:12.000Z", "type": "copilot",
         "text": "The handler returns 401; I'll look again."},
        completed("t7", "2025-10-01T09:00:12.100Z", "toolu_04", "bash", "git log", {"command": "git log"}, "rejected",
                  "The execution of this tool, or a previous tool was interrupted."),
        {"id": "t8", "timestamp": "2025-10-01T09:00:13.000Z", "type": "info", "text": "Operation cancelled by user"},
        completed("t9", "2025-10-01T09:00:20.000Z", "1759309220000", "bash", "$ git status",
                  {"command": "git status", "description": "Execute shell command: git status"}, "success",
                  "On branch main", isAlwaysExpanded=True, showNoContent=True),
    ]
    return {"sessionId": LEGACY_SID, "startTime": "2025-10-01T09:00:00.000Z", "chatMessages": chat,
            "timeline": timeline, "selectedModel": "claude-sonnet-4.5"}


def write_legacy(home: Path, session: dict) -> Path:
    """`history-session-state/session_<id>_<start ms>.json`, as JSON.stringify(session, null, 2)."""
    folder = home / "history-session-state"
    folder.mkdir(parents=True, exist_ok=True)
    start = datetime.fromisoformat(session["startTime"].replace("Z", "+00:00"))
    path = folder / f"session_{session['sessionId']}_{int(start.timestamp() * 1000)}.json"
    path.write_text(json.dumps(session, indent=2))
    return path


def shown(session: dict) -> Counter:
    """Messages by role, counted on the fixture: each prompt, each `!` command (a call no response
    names), each response with an entry in the timeline, each completed call's result."""
    chat, entries = session["chatMessages"], session["timeline"]
    calls = {c["id"]: i for i, m in enumerate(chat) if m["role"] == "assistant" for c in m.get("tool_calls", ())}
    texts = {m["content"]: i for i, m in enumerate(chat) if m["role"] == "assistant" and m["content"]}
    tools = [e for e in entries if e["type"].startswith("tool_call")]
    responses = {calls[e["callId"]] for e in tools if e["callId"] in calls}
    responses |= {texts[e["text"]] for e in entries if e["type"] == "copilot"}
    return Counter(user=sum(e["type"] == "user" for e in entries) + sum(e["callId"] not in calls for e in tools),
                   assistant=len(responses), tool=sum(e["type"] == "tool_call_completed" for e in tools))


def test_a_session_of_the_first_format_is_read(layout, tmp_path):
    """Before 0.0.342 a session was one JSON file; a user with only such sessions got nothing."""
    home = tmp_path / "copilot"
    session = legacy_session()
    write_legacy(home, session)
    found = discover(env={"COPILOT_HOME": str(home)})
    assert [s.identity for s in found.sources] == [LEGACY_SID] and not found.problems
    (result,) = cp(layout, home).results
    assert result.status == "ok" and result.reconciled, (result.error, result.reconcile)
    timeline = session["timeline"]
    roles = shown(session)
    # no token counts in this format: no usage rows, NULL tokens, and a session that answered costs unknown
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == 0
    assert query(layout, "SELECT session_id, cost_usd, cost_source, total_tokens, model, created_at, updated_at, "
                         "message_count FROM sessions") == [
        (LEGACY_SID, None, "unknown", None, "claude-sonnet-4.5", datetime(2025, 10, 1, 9),
         datetime(2025, 10, 1, 9, 0, 20), roles.total())]
    # the model's responses as the chat groups them (the @-mention turn made no model call: no
    # timeline entry); each completed call a tool message; the prompt and the `!` command the user's
    assert dict(query(layout, "SELECT role, COUNT(*) FROM messages GROUP BY 1")) == roles == {
        "assistant": 3, "tool": 5, "user": 2}
    assert query(layout, "SELECT message_id, COUNT(*) FILTER (WHERE part_type = 'tool_call'), "
                         "COUNT(*) FILTER (WHERE part_type = 'text') FROM parts WHERE role = 'assistant' "
                         "GROUP BY 1 ORDER BY 1") == [("t2", 1, 1), ("t4", 2, 0), ("t6", 1, 1)]
    assert scalar(layout, "SELECT text FROM parts WHERE role = 'user' AND part_type = 'text'") == timeline[0]["text"]
    # results as the model saw them (the chat's tool messages), the error flag from the result type
    chat_results = {m["tool_call_id"]: m["content"] for m in session["chatMessages"] if m["role"] == "tool"}
    assert query(layout, "SELECT tool_call_id, tool_name, tool_category, command, file_path, is_error, exit_code, "
                         "result_text FROM tool_calls ORDER BY called_at") == [
        ("toolu_01", "bash", "shell", "npm test -- login", None, False, 1, chat_results["toolu_01"]),
        ("toolu_02", "str_replace_editor", "read", None, "/home/dev/shop/src/auth.ts", False, None,
         chat_results["toolu_02"]),
        ("toolu_03", "str_replace_editor", "edit", None, "/home/dev/shop/src/auth.ts", True, None,
         chat_results["toolu_03"]),
        ("toolu_04", "bash", "shell", "git log", None, True, None, chat_results["toolu_04"]),
        ("1759309220000", "bash", "shell", "git status", None, False, None, "On branch main")]
    assert any("1 info and error lines" in w for w in result.warnings)


def test_a_migrated_session_keeps_its_first_format_history_once(layout, tmp_path):
    """`copilot --resume` (0.0.342+) moved a first-format session into a log: a `session.start`
    with the same id, the whole session as one `session.import_legacy` event, then the new turns;
    and it deleted the old file (here it is still there, as after a crash in between). A file of
    the first format being rewritten when it is read is quarantined whole; the rest is read."""
    home = tmp_path / "copilot"
    session = legacy_session()
    write_legacy(home, session)
    b = SessionBuilder(LEGACY_SID, start=datetime(2025, 10, 20, 9, tzinfo=timezone.utc))
    del b.events[0]["data"]["context"]  # 0.0.343 recorded no cwd
    b.add("session.import_legacy", {"legacySession": session, "importTime": iso(b.now),
                                    "sourceFile": "session_x.json"})
    b.prompt("Now the signup test")
    b.answer("Done.")
    log = b.write(home)
    torn = write_legacy(home, {**session, "sessionId": "torn-1"})
    torn.write_text(torn.read_text()[:200])
    found = discover(env={"COPILOT_HOME": str(home)})
    assert sorted((s.identity, Path(s.path).name) for s in found.sources) == [
        (LEGACY_SID, log.name), ("torn-1", torn.name)]
    summary = cp(layout, home)
    assert all(r.status == "ok" and r.reconciled for r in summary.results), summary.results
    new = sum(e["type"] in ("user.message", "assistant.message") for e in b.events)
    legacy_messages = scalar(layout, "SELECT COUNT(*) FROM messages WHERE source_table = 'session.import_legacy'")
    assert legacy_messages == shown(session).total()
    assert query(layout, "SELECT session_id, message_count FROM sessions") == [(LEGACY_SID, legacy_messages + new)]
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls") == sum(
        e["type"] == "tool_call_completed" for e in session["timeline"])
    assert query(layout, "SELECT source_table, raw FROM quarantine") == [
        ("history-session-state", torn.read_text())]
