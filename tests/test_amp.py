"""Amp: real thread JSON files in tmp data dirs, through the lake, read back by DuckDB. Expected
numbers are spelled out from each fixture's own inputs."""

import copy
import hashlib
import json
import os
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from pipelines.command_args import agent_homes
from tests.conftest import ingest_tables, query, scalar
from transforms.amp.discover import discover
from transforms.synth.amp import ThreadBuilder, generate_home, usage
from transforms.pricing import Buckets, price_buckets
from warehouse.lake.config import load_config

TID = "T-7f3e2a1b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
SONNET = "claude-sonnet-4-5-20250929"
T0 = 1772439300000  # 2026-03-02T08:15:00Z, in milliseconds as Amp writes `created` and `sentAt`
AT = datetime(2026, 3, 2, 8, 15, tzinfo=timezone.utc)


def fixture() -> dict:
    """One thread as the peers describe Amp's files: a prompt, thinking + a Bash call, its result,
    a failed edit, an answer whose request the (partial) ledger does not list, a summary, and a
    ledger event with no message (work billed to the thread outside its messages)."""
    def sonnet(inp, out, write, read):
        return {"model": SONNET, "inputTokens": inp, "outputTokens": out, "cacheCreationInputTokens": write,
                "cacheReadInputTokens": read, "totalInputTokens": inp + write + read}
    return {
        "v": 7, "id": TID, "created": T0, "title": "Fix login test",
        "env": {"initial": {"trees": [{"uri": "file:///home/dev/shop", "displayName": "shop"}]}},
        "messages": [
            {"role": "user", "messageId": 0, "content": [{"type": "text", "text": "Fix the failing login test"}],
             "meta": {"sentAt": T0 + 1000}},
            {"role": "assistant", "messageId": 1, "meta": {"sentAt": T0 + 4000}, "state": {"type": "complete"},
             "content": [{"type": "thinking", "thinking": "Run the test first.", "signature": "c2ln"},
                         {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"cmd": "npm test -- login"}}],
             "usage": sonnet(12, 350, 1250, 14800)},
            {"role": "user", "messageId": 2, "meta": {"sentAt": T0 + 8000},
             "content": [{"type": "tool_result", "toolUseID": "toolu_01",
                          "run": {"status": "done", "result": {"output": "FAIL src/login.test.ts", "exitCode": 1}}}]},
            {"role": "assistant", "messageId": 3, "meta": {"sentAt": T0 + 10000}, "state": {"type": "complete"},
             "content": [{"type": "tool_use", "id": "toolu_02", "name": "edit_file",
                          "input": {"path": "/home/dev/shop/src/auth.ts", "old_str": "401", "new_str": "200"}}],
             "usage": sonnet(8, 120, 0, 16062)},
            {"role": "user", "messageId": 4, "meta": {"sentAt": T0 + 10500},
             "content": [{"type": "tool_result", "toolUseID": "toolu_02",
                          "run": {"status": "error", "error": {"message": "old_str not found"}}}]},
            {"role": "assistant", "messageId": 5, "meta": {"sentAt": T0 + 14000}, "state": {"type": "complete"},
             "content": [{"type": "text", "text": "Fixed the status code."}], "usage": sonnet(5, 40, 300, 16200)},
            {"role": "info", "messageId": 6, "meta": {"sentAt": T0 + 15000},
             "content": [{"type": "summary", "summary": {"type": "message", "summary": "Fixed the login test"}}]},
        ],
        "usageLedger": {"events": [
            {"id": "ev-1", "timestamp": "2026-03-02T08:15:04.500Z", "model": SONNET, "credits": 0.01842,
             "tokens": {"input": 12, "output": 350}, "operationType": "inference", "fromMessageId": 0,
             "toMessageId": 1},
            {"id": "ev-3", "timestamp": "2026-03-02T08:15:10.200Z", "model": SONNET, "credits": 0.00652,
             "tokens": {"input": 8, "output": 120}, "operationType": "inference", "fromMessageId": 2,
             "toMessageId": 3},
            {"id": "ev-oracle", "timestamp": "2026-03-02T08:15:12.000Z", "model": "gpt-5", "credits": 0.031,
             "tokens": {"input": 2000, "output": 500}, "operationType": "oracle"},
        ]},
    }


def write_thread(data_dir: Path, thread: dict) -> Path:
    (data_dir / "threads").mkdir(parents=True, exist_ok=True)
    path = data_dir / "threads" / f"{thread['id']}.json"
    path.write_text(json.dumps(thread, indent=2))
    return path


def digests(root: Path) -> dict:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def amp(layout, *dirs):
    return ingest_tables(layout, homes={"amp": list(dirs)})


USAGE_SQL = ("SELECT message_id, request_id, input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens, "
             "output_tokens, total_tokens, cost_usd, cost_source FROM usage ORDER BY requested_at")


def test_the_fixture_gives_exact_totals(layout, tmp_path):
    data = tmp_path / "amp"
    write_thread(data, fixture())
    before = digests(data)
    (result,) = amp(layout, data).results
    assert result.status == "ok" and result.reconciled, (result.error, result.reconcile)
    rates = calc_price(Usage(input_tokens=1), SONNET, genai_request_timestamp=AT).model_price
    base = {k: getattr(rates, k).base for k in ("input_mtok", "cache_read_mtok", "cache_write_mtok", "output_mtok")}
    # message 5 has no ledger event: priced from its tokens (16 545 input, under the long-context tier)
    msg5 = float((5 * base["input_mtok"] + 16200 * base["cache_read_mtok"] + 300 * base["cache_write_mtok"]
                  + 40 * base["output_mtok"]) / Decimal(10**6))
    # inputTokens is uncached (totalInputTokens = input + cache creation + cache read); credits are dollars
    assert query(layout, USAGE_SQL) == [
        (f"{TID}:1", "ev-1", 12, 14800, 1250, 350, 12 + 14800 + 1250 + 350, 0.01842, "native"),
        (f"{TID}:3", "ev-3", 8, 16062, 0, 120, 8 + 16062 + 120, 0.00652, "native"),
        (None, "ev-oracle", 2000, None, None, 500, 2500, 0.031, "native"),
        (f"{TID}:5", None, 5, 16200, 300, 40, 5 + 16200 + 300 + 40, pytest.approx(msg5, abs=1e-9), "estimated")]
    total = 16412 + 16190 + 2500 + 16545
    assert query(layout, "SELECT title, project, cost_usd, cost_source, total_tokens, message_count, created_at, "
                         "summary_message_id FROM sessions") == [
        ("Fix login test", "shop", pytest.approx(0.01842 + 0.00652 + 0.031 + msg5, abs=1e-9), "estimated", total, 7,
         datetime(2026, 3, 2, 8, 15), f"{TID}:6")]
    assert query(layout, "SELECT role, COUNT(*) FROM messages GROUP BY 1 ORDER BY 1") == [
        ("assistant", 3), ("system", 1), ("user", 3)]
    assert query(layout, "SELECT part_type, native_part_type, COUNT(*) FROM parts GROUP BY 1, 2 ORDER BY 1, 2") == [
        ("reasoning", "thinking", 1), ("text", "summary", 1), ("text", "text", 2), ("tool_call", "tool_use", 2),
        ("tool_result", "tool_result", 2)]
    assert query(layout, "SELECT tool_name, tool_category, command, file_path, exit_code, is_error, result_text "
                         "FROM tool_calls ORDER BY called_at") == [
        ("Bash", "shell", "npm test -- login", None, 1, False, "FAIL src/login.test.ts"),
        ("edit_file", "edit", None, "/home/dev/shop/src/auth.ts", None, True, '{"message":"old_str not found"}')]
    assert digests(data) == before


def test_ccusage_drops_a_request_the_ledger_does_not_list(layout, tmp_path):
    """ccusage reads only `usageLedger.events` when a thread has a ledger
    (rust/crates/ccusage/src/adapter/amp/parser.rs: `return Ok(parse_ledger_events(...))`), so
    message 5, which carries its own usage but no ledger event, is lost to it. Amp wrote that
    usage from the model's response: the request was made and billed. tokscale keeps it
    (unmatched message records are appended); so does agentlake."""
    data = tmp_path / "amp"
    thread = fixture()
    write_thread(data, thread)
    amp(layout, data)
    ledger_only = {e["toMessageId"] for e in thread["usageLedger"]["events"] if "toMessageId" in e}
    with_usage = {m["messageId"] for m in thread["messages"] if "usage" in m}
    assert with_usage - ledger_only == {5}
    assert scalar(layout, "SELECT COUNT(*) FROM usage WHERE message_id = ?", f"{TID}:5") == 1
    # and each request the ledger does list is counted once, not once per record
    assert scalar(layout, "SELECT COUNT(*) FROM usage WHERE message_id = ?", f"{TID}:1") == 1


def test_recorded_credits_win_zero_is_free_text_is_not_a_cost(layout, tmp_path):
    data = tmp_path / "amp"
    thread = fixture()
    events = thread["usageLedger"]["events"]
    events[0]["credits"] = 0  # Amp Free: a real $0
    events[1]["credits"] = "n/a"  # not a number: priced from the tokens instead
    events.pop()
    del thread["messages"][5]["usage"]
    write_thread(data, thread)
    amp(layout, data)
    rows = query(layout, "SELECT message_id, cost_usd, cost_source FROM usage ORDER BY requested_at")
    at = datetime(2026, 3, 2, 8, 15, 10, 200_000, tzinfo=timezone.utc)
    priced = price_buckets(Buckets(8, 16062, 0, None, 120), SONNET, None, at).cost_usd
    assert rows == [(f"{TID}:1", 0.0, "native"), (f"{TID}:3", pytest.approx(priced, abs=1e-9), "estimated")]


def test_a_fork_does_not_count_its_parents_copied_requests(layout, tmp_path):
    data = tmp_path / "amp"
    parent = fixture()
    del parent["usageLedger"]
    write_thread(data, parent)
    fork = copy.deepcopy(parent)
    fork["id"] = "T-00000000-0000-4000-8000-00000000f0c1"
    fork["relationships"] = [{"threadID": TID, "type": "fork", "role": "parent"}]
    fork["messages"] = fork["messages"][:4] + [
        {"role": "user", "messageId": 4, "meta": {"sentAt": T0 + 60000},
         "content": [{"type": "text", "text": "Again"}]},
        {"role": "assistant", "messageId": 5, "meta": {"sentAt": T0 + 62000},
         "content": [{"type": "text", "text": "Ok"}], "usage": usage(SONNET, 3, 30, read=16000)}]
    write_thread(data, fork)
    summary = amp(layout, data)
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    copied = [price_buckets(Buckets(12, 14800, 1250, None, 350), SONNET, None, datetime.fromtimestamp(
        (T0 + 4000) / 1000, timezone.utc)).cost_usd,
              price_buckets(Buckets(8, 16062, 0, None, 120), SONNET, None, datetime.fromtimestamp(
                  (T0 + 10000) / 1000, timezone.utc)).cost_usd]
    own = price_buckets(Buckets(3, 16000, 0, None, 30), SONNET, None,
                        datetime.fromtimestamp((T0 + 62000) / 1000, timezone.utc)).cost_usd
    assert query(layout, "SELECT forked_from_session_id, cost_usd, inherited_cost_usd, message_count, total_tokens "
                         "FROM sessions WHERE session_id = ?", fork["id"]) == [
        (TID, pytest.approx(own, abs=1e-9), pytest.approx(sum(copied), abs=1e-9), 2, 3 + 16000 + 30)]
    # the parent's three requests once (its own source), the fork's one
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == 3 + 1


def test_a_message_still_streaming_and_an_unbilled_thread(layout, tmp_path):
    data = tmp_path / "amp"
    b = ThreadBuilder("T-00000000-0000-4000-8000-0000000000aa", start=AT)
    b.prompt("hello")
    b.add("assistant", [{"type": "text", "text": "Work"}], state={"type": "streaming"})  # no usage yet
    b.write(data)
    (result,) = amp(layout, data).results
    assert result.reconciled
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == 0
    assert query(layout, "SELECT cost_usd, cost_source, message_count FROM sessions") == [(0.0, "estimated", 2)]


def test_a_malformed_thread_is_quarantined_whole(layout, tmp_path):
    data = tmp_path / "amp"
    (data / "threads").mkdir(parents=True)
    (data / "threads" / "T-broken.json").write_text('{"id": "T-broken", "messages": [')
    (result,) = amp(layout, data).results
    assert result.status == "ok"
    assert scalar(layout, "SELECT COUNT(*) FROM quarantine WHERE error LIKE 'malformed thread file%'") == 1


def test_discovery_the_data_dir_then_the_extensions_old_store(tmp_path):
    user = tmp_path / "user"
    write_thread(tmp_path / "xdg" / "amp", fixture())
    old = copy.deepcopy(fixture())
    old["env"]["initial"]["trees"][0]["uri"] = "file:///elsewhere"
    legacy = user / ".config" / "Code" / "User" / "globalStorage" / "sourcegraph.amp" / "threads3"
    legacy.mkdir(parents=True)
    (legacy / f"{TID}.json").write_text(json.dumps(old))
    only_old = ThreadBuilder("T-00000000-0000-4000-8000-0000000000bb", start=AT, cwd="/home/dev/old")
    only_old.prompt("hi")
    (legacy / f"{only_old.thread['id']}.json").write_text(json.dumps(only_old.thread))
    os.mkfifo(tmp_path / "xdg" / "amp" / "secrets.json")  # credentials: a FIFO blocks any open
    found = discover(env={"HOME": str(user), "XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert sorted((s.identity, s.project_path) for s in found.sources) == [
        ("T-00000000-0000-4000-8000-0000000000bb", "/home/dev/old"), (TID, "/home/dev/shop")]
    # without XDG_DATA_HOME: ~/.local/share/amp; on Windows %APPDATA%\amp
    write_thread(user / ".local" / "share" / "amp", fixture())
    assert TID in {s.identity for s in discover(env={"HOME": str(user)}).sources}
    appdata = tmp_path / "roaming"
    write_thread(appdata / "amp", fixture())
    found = discover(env={"USERPROFILE": str(tmp_path / "nobody"), "APPDATA": str(appdata)})
    assert [s.identity for s in found.sources] == [TID]


def test_a_thread_name_on_a_pipe_is_said_never_opened(tmp_path):
    """A named pipe by a thread file's name was left out without a word (docs/SOURCES.md: it is
    named): a problem names it; the other thread is found."""
    write_thread(tmp_path / "xdg" / "amp", fixture())
    pipe = tmp_path / "xdg" / "amp" / "threads" / "T-00000000-0000-4000-8000-0000000000cc.json"
    os.mkfifo(pipe)
    found = discover(env={"HOME": str(tmp_path / "user"), "XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert found.problems == [f"Amp thread file {pipe} is a named pipe, not a regular file: not read"]
    assert [s.identity for s in found.sources] == [TID]


def test_the_generator_writes_what_its_truth_says(layout, tmp_path):
    truth = generate_home(tmp_path / "amp", sessions=6, seed=5)
    summary = amp(layout, tmp_path / "amp")
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == truth.sessions
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == truth.messages
    assert scalar(layout, "SELECT COUNT(*) FROM parts") == truth.parts
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls") == truth.tool_calls
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == truth.requests
    assert query(layout, "SELECT SUM(input_uncached_tokens), SUM(cache_read_tokens), SUM(cache_write_5m_tokens), "
                         "SUM(output_tokens) FROM usage") == [
        (truth.tokens["input_uncached"], truth.tokens["cache_read"], truth.tokens["cache_write"],
         truth.tokens["output"])]
    assert scalar(layout, "SELECT SUM(cost_usd) FROM usage WHERE cost_source = 'native'") == pytest.approx(
        truth.native_usd, abs=1e-9)


def test_agent_home_flag_and_config_section(tmp_path):
    assert agent_homes([f"amp={tmp_path}"]) == {"amp": (str(tmp_path),)}
    config = tmp_path / "config.toml"
    config.write_text(f'[amp]\nextra_roots = ["{tmp_path / "amp"}"]\n')
    assert load_config(config).extra_roots["amp"] == (str(tmp_path / "amp"),)
