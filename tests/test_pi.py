"""pi (badlogic/pi-mono coding agent): real session files in tmp homes, through the lake, read
back by DuckDB. The format is pi's own (packages/coding-agent/src/core/session-manager.ts)."""

import hashlib
import json
import os
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pipelines.cli import main
from tests.conftest import ingest_tables, query, scalar
from transforms.pi.discover import discover
from transforms.pi.normalise import PRICE_PROVIDER
from transforms.synth.pi import SessionBuilder, generate_home
from transforms.pricing import Buckets, price_buckets

SID = "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
T = datetime(2026, 3, 2, 8, 15, tzinfo=timezone.utc)

# A v3 session as pi writes it, by hand. Costs are pi's calculateCost with claude-sonnet-4-5's
# rates ($3 in, $15 out, $0.30 cache read, $3.75 cache write per million):
#   L3: 3*3 + 120*15 + 0*0.3 + 9000*3.75 = 9 + 1800 + 33750 = 35559 micro-dollars -> 0.035559
#   L5: 5*3 + 80*15 + 9000*0.3 + 200*3.75 = 15 + 1200 + 2700 + 750 = 4665 -> 0.004665
#   L7: 4*3 + 30*15 + 9200*0.3 = 12 + 450 + 2760 = 3222 -> 0.003222
# L11 is an error reply with no tokens and no cost: a message, not a billed request.
FIXTURE = r"""
{"type":"session","version":3,"id":"0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","timestamp":"2026-03-02T08:15:00.000Z","cwd":"/home/dev/shop"}
{"type":"model_change","id":"a0000001","parentId":null,"timestamp":"2026-03-02T08:15:00.100Z","provider":"anthropic","modelId":"claude-sonnet-4-5"}
{"type":"message","id":"a0000002","parentId":"a0000001","timestamp":"2026-03-02T08:15:01.000Z","message":{"role":"user","content":"Fix the failing login test","timestamp":1772439301000}}
{"type":"message","id":"a0000003","parentId":"a0000002","timestamp":"2026-03-02T08:15:05.000Z","message":{"role":"assistant","content":[{"type":"thinking","thinking":"Run the test first.","thinkingSignature":"sig"},{"type":"toolCall","id":"toolu_01","name":"bash","arguments":{"command":"npm test -- login"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":3,"output":120,"cacheRead":0,"cacheWrite":9000,"totalTokens":9123,"cost":{"input":0.000009,"output":0.0018,"cacheRead":0,"cacheWrite":0.03375,"total":0.035559}},"stopReason":"toolUse","timestamp":1772439302000}}
{"type":"message","id":"a0000004","parentId":"a0000003","timestamp":"2026-03-02T08:15:09.000Z","message":{"role":"toolResult","toolCallId":"toolu_01","toolName":"bash","content":[{"type":"text","text":"FAIL login.test.ts\n\nCommand exited with code 1"}],"isError":true,"timestamp":1772439309000}}
{"type":"message","id":"a0000005","parentId":"a0000004","timestamp":"2026-03-02T08:15:14.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"toolu_02","name":"edit","arguments":{"path":"src/login.ts","oldText":"a","newText":"b"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":5,"output":80,"cacheRead":9000,"cacheWrite":200,"totalTokens":9285,"cost":{"input":0.000015,"output":0.0012,"cacheRead":0.0027,"cacheWrite":0.00075,"total":0.004665}},"stopReason":"toolUse","timestamp":1772439310000}}
{"type":"message","id":"a0000006","parentId":"a0000005","timestamp":"2026-03-02T08:15:14.500Z","message":{"role":"toolResult","toolCallId":"toolu_02","toolName":"edit","content":[{"type":"text","text":"Successfully replaced text in src/login.ts."}],"details":{"diff":"-a\n+b"},"isError":false,"timestamp":1772439314500}}
{"type":"message","id":"a0000007","parentId":"a0000006","timestamp":"2026-03-02T08:15:20.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Fixed."}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":4,"output":30,"cacheRead":9200,"cacheWrite":0,"totalTokens":9234,"cost":{"input":0.000012,"output":0.00045,"cacheRead":0.00276,"cacheWrite":0,"total":0.003222}},"stopReason":"stop","timestamp":1772439315000}}
{"type":"message","id":"a0000008","parentId":"a0000007","timestamp":"2026-03-02T08:16:00.000Z","message":{"role":"bashExecution","command":"git status","output":"clean","exitCode":0,"cancelled":false,"truncated":false,"timestamp":1772439360000}}
{"type":"session_info","id":"a0000009","parentId":"a0000008","timestamp":"2026-03-02T08:16:10.000Z","name":"Fix login"}
{"type":"compaction","id":"a000000a","parentId":"a0000009","timestamp":"2026-03-02T08:17:00.000Z","summary":"The login test was fixed.","firstKeptEntryId":"a0000007","tokensBefore":27642}
{"type":"message","id":"a000000b","parentId":"a000000a","timestamp":"2026-03-02T08:18:00.000Z","message":{"role":"assistant","content":[],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"error","errorMessage":"overloaded_error","timestamp":1772439480000}}
""".strip()


def write_fixture(home: Path, text: str = FIXTURE, folder="--home-dev-shop--", name=None) -> Path:
    path = home / "sessions" / folder / (name or f"2026-03-02T08-15-00-000Z_{SID}.jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return path


def builder(sid=SID, **kw) -> SessionBuilder:
    return SessionBuilder(sid, start=kw.pop("start", T), **kw)


def forked_pair() -> tuple[SessionBuilder, SessionBuilder]:
    """A session with one request, and a fork of it (`/fork`) with one request of its own."""
    parent = builder()
    parent.prompt("first question")
    parent.assistant([{"type": "text", "text": "one"}], tokens=(10, 100, 0, 2000))
    fork = parent.fork("22222222-2222-4222-8222-222222222222")
    fork.prompt("second question")
    fork.assistant([{"type": "text", "text": "two"}], tokens=(12, 40, 2000, 100))
    return parent, fork


def test_fixture_exact_totals(layout, tmp_path):
    write_fixture(tmp_path / "pi")
    summary = ingest_tables(layout, homes={"pi": [tmp_path / "pi"]})
    assert [(r.status, r.reconciled) for r in summary.results] == [("ok", True)]
    assert query(layout, "SELECT COUNT(*), SUM(input_uncached_tokens), SUM(cache_read_tokens), "
                         "SUM(cache_write_5m_tokens), COUNT(cache_write_1h_tokens), SUM(output_tokens), "
                         "COUNT(reasoning_tokens), SUM(total_tokens) FROM usage") == [
        (3, 3 + 5 + 4, 0 + 9000 + 9200, 9000 + 200 + 0, 0, 120 + 80 + 30, 0, 27642)]
    assert query(layout, "SELECT cost_usd, cost_source FROM usage ORDER BY requested_at") == [
        (pytest.approx(0.035559), "native"), (pytest.approx(0.004665), "native"), (pytest.approx(0.003222), "native")]
    assert query(layout, "SELECT session_id, title, is_root, cost_source, model, llm_provider, total_tokens, "
                         "message_count, created_at FROM sessions") == [
        (SID, "Fix login", True, "native", "claude-sonnet-4-5", "anthropic", 27642, 9, datetime(2026, 3, 2, 8, 15))]
    assert scalar(layout, "SELECT cost_usd FROM sessions") == pytest.approx(0.035559 + 0.004665 + 0.003222)
    assert dict(query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1")) == {
        "text": 3, "reasoning": 1, "tool_call": 2, "tool_result": 2, "shell_command": 1}
    assert query(layout, "SELECT native_part_type FROM parts WHERE part_type = 'text' ORDER BY created_at") == [
        ("text",), ("text",), ("compaction",)]
    assert query(layout, "SELECT role, is_summary FROM messages ORDER BY message_index") == [
        ("user", False), ("assistant", False), ("tool", False), ("assistant", False), ("tool", False),
        ("assistant", False), ("user", False), ("assistant", True), ("assistant", False)]
    # pi flags a non-zero exit as isError; it is an exit code here, not a tool failure
    assert query(layout, "SELECT tool_name, tool_category, command, file_path, exit_code, is_error, has_result "
                         "FROM tool_calls ORDER BY called_at") == [
        ("bash", "shell", "npm test -- login", None, 1, False, True),
        ("edit", "edit", None, "src/login.ts", None, False, True)]
    assert query(layout, "SELECT shell_command, shell_output, shell_exit_code FROM parts "
                         "WHERE part_type = 'shell_command'") == [("git status", "clean", 0)]
    assert scalar(layout, "SELECT tool_result_metadata FROM parts WHERE tool_name = 'edit' AND "
                          "part_type = 'tool_result'") == '{"diff":"-a\\n+b"}'
    raw = json.loads(scalar(layout, "SELECT raw FROM parts WHERE part_type = 'tool_result' AND tool_name = 'bash'"))
    assert raw["isError"] is True  # pi's own flag is kept


def test_cost_zero_is_priced_and_an_unpriced_model_is_unknown_never_zero(layout, tmp_path):
    b = builder()
    b.prompt("hi")
    b.assistant([{"type": "text", "text": "a"}], model="gpt-5.1-codex", provider="openai-codex",
                 tokens=(1000, 50, 4000, 0), priced=False)  # a ChatGPT subscription: pi records cost 0
    b.assistant([{"type": "text", "text": "b"}], model="qwen3-coder:30b", provider="ollama",
                 tokens=(800, 20, 0, 0), priced=False)
    b.write(tmp_path / "pi")
    ingest_tables(layout, homes={"pi": [tmp_path / "pi"]})
    at = b.requests[0][4]
    expected = price_buckets(Buckets(1000, 4000, 0, None, 50), "gpt-5.1-codex", PRICE_PROVIDER["openai-codex"], at)
    assert expected.cost_usd and expected.cost_usd > 0
    assert query(layout, "SELECT model, cost_usd, cost_source FROM usage ORDER BY requested_at") == [
        ("gpt-5.1-codex", pytest.approx(expected.cost_usd), "estimated"), ("qwen3-coder:30b", None, "unknown")]
    assert query(layout, "SELECT cost_usd, cost_source, model FROM sessions") == [
        (pytest.approx(expected.cost_usd), "partial", "gpt-5.1-codex")]


def test_a_negative_input_as_pi_writes_one_leaves_its_request_unpriced_not_priced_without_it(layout, tmp_path):
    """pi writes an input below zero (its issue 2048); read as not recorded, the request was priced
    on its other counts as if it had no input. It is not priced, and the lake nulls the count with
    the source's warning."""
    b = builder()
    b.prompt("hi")
    b.assistant([{"type": "text", "text": "a"}], tokens=(-1200, 50, 4000, 0), priced=False)
    b.assistant([{"type": "text", "text": "b"}], tokens=(1000, 50, 0, 0), priced=False)
    b.write(tmp_path / "pi")
    [result] = ingest_tables(layout, homes={"pi": [tmp_path / "pi"]}).results
    rows = query(layout, "SELECT input_uncached_tokens, cache_read_tokens, output_tokens, total_tokens, cost_source "
                         "FROM usage ORDER BY requested_at")
    assert rows == [(None, 4000, 50, 4050, "unknown"), (1000, 0, 50, 1050, "estimated")]
    assert scalar(layout, "SELECT cost_source FROM sessions") == "partial"
    assert [w for w in result.warnings if "out of range nulled" in w and "input_uncached_tokens" in w], result.warnings


def test_a_fork_copies_its_parents_entries_they_count_once(layout, tmp_path):
    """pi's forkFrom/createBranchedSession write a new file whose header names the parent
    (`parentSession`) and which starts with copies of the parent's entries (session-manager.ts).
    ccusage keys a request by (project, session id, timestamp, model, tokens) and tokscale by
    (session id, entry id): the copies have a new session id, so both count them twice."""
    home = tmp_path / "pi"
    parent, fork = forked_pair()
    named = {"type": "session_info", "id": "c0ffee00", "parentId": None, "timestamp": parent.lines[1]["timestamp"],
             "name": "login work"}
    parent.lines.insert(2, named)
    fork.lines.insert(2, dict(named))  # copied with the rest: the fork shows the parent's name
    parent.write(home)
    fork_path = fork.write(home)
    summary = ingest_tables(layout, homes={"pi": [home]})
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    own = {b.sid: [r[1] for r in b.requests] for b in (parent, fork)}
    assert query(layout, "SELECT session_id, cost_usd FROM usage ORDER BY requested_at") == [
        (SID, pytest.approx(own[SID][0])), (fork.sid, pytest.approx(own[fork.sid][0]))]
    assert query(layout, "SELECT session_id, is_root, forked_from_session_id, inherited_cost_usd, cost_usd "
                         "FROM sessions ORDER BY created_at") == [
        (SID, True, None, None, pytest.approx(own[SID][0])),
        (fork.sid, True, SID, pytest.approx(own[SID][0]), pytest.approx(own[fork.sid][0]))]
    assert scalar(layout, "SELECT string_agg(text, '|') FROM parts WHERE role = 'user' AND session_id = ?",
                  fork.sid) == "second question"
    assert scalar(layout, "SELECT title FROM sessions WHERE session_id = ?", fork.sid) == "login work"
    # what a per-file reader (ccusage, tokscale) sums: the parent's request a second time
    per_file = sum(json.loads(line)["message"]["usage"]["cost"]["total"]
                   for path in (home / "sessions").rglob("*.jsonl") for line in path.read_text().splitlines()
                   if json.loads(line).get("message", {}).get("role") == "assistant")
    assert per_file == pytest.approx(2 * own[SID][0] + own[fork.sid][0])
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(
        own[SID][0] + own[fork.sid][0])
    assert json.loads(fork_path.read_text().splitlines()[0])["parentSession"].endswith(f"_{SID}.jsonl")


def test_a_fork_whose_parent_is_gone_skips_the_entries_dated_before_it(layout, tmp_path):
    parent, fork = forked_pair()
    fork.write(tmp_path / "pi")  # the parent's file is never written (deleted by the user)
    summary = ingest_tables(layout, homes={"pi": [tmp_path / "pi"]})
    assert query(layout, "SELECT session_id, input_uncached_tokens FROM usage") == [(fork.sid, 12)]
    assert query(layout, "SELECT forked_from_session_id, inherited_cost_usd FROM sessions") == [
        (SID, pytest.approx(parent.requests[0][1]))]
    assert any("dated before the fork" in w for w in summary.results[0].warnings)


def test_lines_written_twice_by_pi_count_once(layout, tmp_path):
    """pi <= 0.55.1 (fixed in 2f64df1e, #1672): a branch taken before the first reply wrote the
    header and entries, then appended them all again on the first reply."""
    lines = FIXTURE.splitlines()
    doubled = lines[:3] + lines[:3] + lines[3:]
    write_fixture(tmp_path / "pi", "\n".join(doubled))
    summary = ingest_tables(layout, homes={"pi": [tmp_path / "pi"]})
    assert query(layout, "SELECT COUNT(*), SUM(total_tokens) FROM usage") == [(3, 27642)]
    assert scalar(layout, "SELECT COUNT(*) FROM messages WHERE role = 'user' AND message_id = 'a0000002'") == 1
    assert any("3 lines written twice" in w for w in summary.results[0].warnings)


def test_a_last_line_still_being_written_is_said_as_such(layout, tmp_path):
    """pi's own line parser: a last line without its newline is a session being written (the
    shared reason, jsontext.UNFINISHED), not a line that is not valid JSON."""
    from transforms.jsontext import UNFINISHED

    path = write_fixture(tmp_path / "pi")
    path.write_text(FIXTURE.rstrip("\n") + '\n{"type":"message","id":"zz", "mess')
    (result,) = ingest_tables(layout, homes={"pi": [tmp_path / "pi"]}).results
    assert query(layout, "SELECT error FROM quarantine") == [(UNFINISHED,)]
    assert any(w.startswith("1 last line without its newline yet") for w in result.warnings), result.warnings
    assert query(layout, "SELECT COUNT(*), SUM(total_tokens) FROM usage") == [(3, 27642)]


def test_every_branch_of_the_tree_counts(layout, tmp_path):
    """`/tree` branches in place: entries of an abandoned branch stay in the file and were billed."""
    b = builder()
    first = b.prompt("try A")["id"]
    b.assistant([{"type": "text", "text": "A"}], tokens=(10, 10, 0, 0))
    b.branch(first)
    b.entry("branch_summary", fromId=b.leaf, summary="A did not work")
    b.prompt("try B")
    b.assistant([{"type": "text", "text": "B"}], tokens=(20, 20, 0, 0))
    b.write(tmp_path / "pi")
    ingest_tables(layout, homes={"pi": [tmp_path / "pi"]})
    assert query(layout, "SELECT SUM(input_uncached_tokens), SUM(output_tokens), COUNT(*) FROM usage") == [(30, 30, 2)]
    assert scalar(layout, "SELECT text FROM parts WHERE native_part_type = 'branch_summary'") == "A did not work"


def test_schema_versions_1_and_2(layout, tmp_path):
    home = tmp_path / "pi"
    v1 = builder("11111111-1111-4111-8111-111111111111", version=None)  # no version, no ids
    v1.prompt("old")
    v1.assistant([{"type": "text", "text": "x"}], tokens=(100, 10, 0, 0))
    v1.write(home)
    v2 = builder("22222222-2222-4222-8222-222222222222", version=2, start=T + timedelta(hours=1))
    v2.message(role="hookMessage", customType="plan", content="Use the plan", display=True)
    v2.prompt("go")
    v2.assistant([{"type": "text", "text": "y"}], tokens=(200, 20, 0, 0))
    v2.write(home)
    summary = ingest_tables(layout, homes={"pi": [home]})
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    # one source for the project: the oldest of its sessions' formats
    assert query(layout, "SELECT schema_version FROM sources") == [(1,)]
    assert query(layout, "SELECT session_id, SUM(input_uncached_tokens) FROM usage GROUP BY 1 ORDER BY 1") == [
        (v1.sid, 100), (v2.sid, 200)]
    assert scalar(layout, "SELECT message_id FROM messages WHERE session_id = ? AND role = 'user'", v1.sid) == \
        f"{v1.sid}:1"
    assert query(layout, "SELECT role, part_type, native_part_type, text FROM parts WHERE role = 'system'") == [
        ("system", "injected_context", "hookMessage", "Use the plan")]


def test_malformed_lines_are_quarantined_and_the_rest_ingested(layout, tmp_path):
    home = tmp_path / "pi"
    lines = FIXTURE.splitlines()
    lines.insert(4, '{"type":"message","id":"zz", "mess')
    lines.insert(6, "[1, 2]")
    lines.append('{"type":"future_entry","id":"b0000001","parentId":"a000000b","timestamp":"2026-03-02T08:19:00.000Z"}')
    path = write_fixture(home, "\n".join(lines))
    other = "99999999-9999-4999-8999-999999999999"  # pi's loader skips a bad first line too
    junk_first = write_fixture(home, "not json\n" + FIXTURE.replace(SID, other), name=f"x_{other}.jsonl")
    headless = write_fixture(home, "\n".join(FIXTURE.splitlines()[1:]), name="2026-03-02T09-00-00-000Z_h.jsonl")
    summary = ingest_tables(layout, homes={"pi": [home]})
    assert {r.status for r in summary.results} == {"ok"}
    errors = dict(query(layout, "SELECT key, error FROM quarantine"))
    assert sorted(errors) == sorted([f"{junk_first}:1", f"{headless}:1", f"{path}:5", f"{path}:7"])
    assert "no `session` header" in errors[f"{headless}:1"] and "not valid JSON" in errors[f"{path}:5"]
    assert query(layout, "SELECT session_id, COUNT(*), SUM(total_tokens) FROM usage GROUP BY 1 ORDER BY 1") == [
        (SID, 3, 27642), (other, 3, 27642)]
    assert query(layout, "SELECT part_type, native_part_type, is_known_type FROM parts WHERE NOT is_known_type") == [
        ("other", "future_entry", False)]
    assert any("unknown part types kept raw: future_entry=1" in w for r in summary.results for w in r.warnings)


def test_discovery_honours_pis_own_env_and_homes(tmp_path):
    write_fixture(tmp_path / "user" / ".pi" / "agent")
    other = "99999999-9999-4999-8999-999999999999"
    write_fixture(tmp_path / "explicit", FIXTURE.replace(SID, other), name=f"x_{other}.jsonl")
    # PI_CODING_AGENT_DIR (config.ts ENV_AGENT_DIR) replaces ~/.pi/agent
    env = {"HOME": str(tmp_path / "user"), "PI_CODING_AGENT_DIR": str(tmp_path / "explicit")}
    assert [s.identity for s in discover(env=env).sources] == [other]
    assert [s.identity for s in discover(env={"HOME": str(tmp_path / "user")}).sources] == [SID]
    # pi expands a leading ~ itself; on Windows os.homedir() is %USERPROFILE%
    assert [s.identity for s in discover(env={"HOME": str(tmp_path / "user"),
                                              "PI_CODING_AGENT_DIR": "~/.pi/agent"}).sources] == [SID]
    assert [s.identity for s in discover(env={"USERPROFILE": str(tmp_path / "user")}).sources] == [SID]
    # ccusage's PI_AGENT_DIR is not pi's variable
    assert [s.identity for s in discover(env={"HOME": str(tmp_path / "user"),
                                              "PI_AGENT_DIR": str(tmp_path / "explicit")}).sources] == [SID]
    assert "is relative" in discover(env={"PI_CODING_AGENT_DIR": "rel/agent"}).problems[0]
    # a --session-dir folder (flat) as a store; a copy of a session is one source
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / f"copy_{SID}.jsonl").write_text(FIXTURE)
    found = discover(env={"HOME": str(tmp_path / "user")}, extra_stores=[str(flat)])
    assert [s.identity for s in found.sources] == [SID]
    assert discover(env={}, extra_roots=[str(tmp_path / "none")], use_default=False).problems


def test_a_session_name_on_a_pipe_is_said_and_the_rest_landed(layout, tmp_path):
    """A trial: a named pipe by a session file's name was left out without a word (docs/SOURCES.md:
    it is named). A problem names it, in the agent's own dir, a named home and a named store folder;
    it is never opened (the ingest ends), and the other sessions land."""
    session = write_fixture(tmp_path / "user" / ".pi" / "agent")
    pipe = session.with_name("2026-11-07T10-00-00.000Z_77777777-7777-4777-8777-777777777777.jsonl")
    os.mkfifo(pipe)
    said = f"pi session file {pipe} is a named pipe, not a regular file: not read"
    found = discover(env={"HOME": str(tmp_path / "user")})
    assert found.problems == [said] and [s.identity for s in found.sources] == [SID]
    for where in ({"extra_roots": [str(tmp_path / "user" / ".pi" / "agent")]}, {"extra_stores": [str(pipe.parent)]}):
        found = discover(env={}, use_default=False, **where)
        assert found.problems == [said] and [s.identity for s in found.sources] == [SID]
    done = threading.Event()
    threading.Thread(target=lambda: (ingest_tables(layout, homes={"pi": [tmp_path / "user" / ".pi" / "agent"]}),
                                     done.set()), daemon=True).start()
    assert done.wait(60), "ingestion blocked: it opened the pipe"
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 1


def test_agent_home_flag_and_config_section(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENTLAKE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own Dagster instance, as a user's
    # one run (a Dagster run each is most of the test): a session named by the flag, another by config.toml
    write_fixture(tmp_path / "pi-flag")
    other = "99999999-9999-4999-8999-999999999999"
    write_fixture(tmp_path / "pi-config", FIXTURE.replace(SID, other), name=f"x_{other}.jsonl")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text(f'[pi]\nextra_roots = ["{tmp_path / "pi-config"}"]\n')
    assert main(["ingest", "--no-default", "--agent-home", f"pi={tmp_path / 'pi-flag'}"]) == 0
    capsys.readouterr()
    assert main(["sql", "SELECT provider, COUNT(*) AS n FROM usage GROUP BY 1", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"provider": "pi", "n": 3 + 3}]
    assert main(["sql", "SELECT COUNT(*) AS n FROM sessions WHERE provider = 'pi'", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 2}]
    assert main(["sql", "SELECT session_id FROM sessions ORDER BY 1", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"session_id": s} for s in sorted((SID, other))]  # each place's


def ingest_beside_fifos(layout, home: Path, provider: str, names) -> None:
    """Ingest `home` with FIFOs named `names` beside the sessions: opening one would block forever,
    so a finished run proves they were never opened (credentials, settings, editor state)."""
    for name in names:
        os.mkfifo(home / name)
    done = threading.Event()

    def run():
        ingest_tables(layout, homes={provider: [home]})
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(60), f"ingestion blocked: it opened one of {names}"


def test_credentials_are_never_opened(layout, tmp_path):
    write_fixture(tmp_path / "pi")
    ingest_beside_fifos(layout, tmp_path / "pi", "pi", ("auth.json", "models.json", "settings.json"))
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 1


def digests(home: Path) -> dict:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in home.rglob("*") if p.is_file()}


def assert_common_totals(layout, truth) -> None:
    """What every generated home's truth counts: sessions, messages, cost by workspace, tools, parts."""
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == truth.sessions
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == truth.messages
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(truth.cost_usd)
    assert dict(query(layout, "SELECT project_path, SUM(cost_usd) FROM sessions GROUP BY 1")) == \
        pytest.approx(dict(truth.by_workspace))
    assert dict(query(layout, "SELECT tool_name, COUNT(*) FROM tool_calls GROUP BY 1")) == truth.tool_calls_by_name
    assert dict(query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1")) == truth.parts_by_type
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE exit_code <> 0") == truth.nonzero_exits


def test_generated_home_totals(layout, tmp_path):
    home = tmp_path / "pi"
    truth = generate_home(home, sessions=9, seed=3)
    before = digests(home)
    summary = ingest_tables(layout, homes={"pi": [home]})
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    assert_common_totals(layout, truth)
    assert scalar(layout, "SELECT COUNT(*) FROM parts WHERE part_type = 'text' AND role = 'user'") == truth.prompts
    assert query(layout, "SELECT COUNT(*), COUNT(*) FILTER (WHERE cost_source = 'native'), "
                         "COUNT(*) FILTER (WHERE cost_usd IS NULL), SUM(input_uncached_tokens), "
                         "SUM(cache_read_tokens), SUM(cache_write_5m_tokens), SUM(output_tokens) FROM usage") == [
        (truth.usage_rows, truth.native_rows, truth.unpriced_rows, truth.input_tokens, truth.cache_read,
         truth.cache_write, truth.output_tokens)]
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE is_error") == truth.tool_errors
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE NOT has_result") == 0
    assert digests(home) == before


def test_a_sub_agents_usage_in_a_tool_result_is_not_added(layout, tmp_path):
    """The example `subagent` extension runs `pi --no-session` (examples/extensions/subagent/
    index.ts): no transcript, its usage only in the tool result's `details`. Not a request of
    this session: not added (its cost is not in the parent's `usage.cost` either)."""
    b = builder()
    b.prompt("review this")
    b.assistant([{"type": "toolCall", "id": "t1", "name": "subagent", "arguments": {"agent": "reviewer"}}],
                tokens=(100, 20, 0, 0), stop="toolUse")
    b.message(role="toolResult", toolCallId="t1", toolName="subagent", isError=False,
              content=[{"type": "text", "text": "looks fine"}],
              details={"results": [{"usage": {"input": 5000, "output": 900, "cost": {"total": 0.5}}}]})
    b.write(tmp_path / "pi")
    ingest_tables(layout, homes={"pi": [tmp_path / "pi"]})
    assert query(layout, "SELECT COUNT(*), SUM(input_uncached_tokens) FROM usage") == [(1, 100)]
    assert query(layout, "SELECT tool_category, has_result FROM tool_calls") == [("agent", True)]
    assert scalar(layout, "SELECT cost_usd FROM sessions") == pytest.approx(b.requests[0][1])


def test_the_header_is_the_first_json_line_read_to_its_end_within_the_cap(tmp_path):
    """Discovery reads each session file's header at every run: line by line now, where it read
    FIRST_LINE_CAP of every file (a heavy user's large sessions, at every no-op run)."""
    from transforms.jsontext import FIRST_LINE_CAP
    from transforms.pi.discover import read_header

    header = {"type": "session", "id": "abc", "cwd": "/work/shop"}
    path = tmp_path / "s.jsonl"
    path.write_text("not json\n" + json.dumps(header) + "\n" + (json.dumps({"type": "message"}) + "\n") * 5)
    assert read_header(path) == header  # pi's loader skips a line it cannot parse
    path.write_text(json.dumps({"type": "message"}) + "\n" + json.dumps(header) + "\n")
    assert read_header(path) is None  # the first JSON line is no session header
    path.write_text("x" * FIRST_LINE_CAP + "\n" + json.dumps(header) + "\n")
    assert read_header(path) is None  # beyond the cap: not looked for
