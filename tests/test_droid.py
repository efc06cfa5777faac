"""Factory Droid: real session transcripts and settings files in tmp homes, through the lake, read
back by DuckDB. Expected numbers are spelled out from each fixture's own inputs."""

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
from transforms.droid.discover import discover
from transforms.droid.normalise import model_name
from transforms.synth.droid import SessionBuilder, generate_home, token_usage
from transforms.pricing import Buckets, price_buckets
from warehouse.lake.config import load_config

SID = "5d2e8f1a-3b4c-4d5e-8f6a-7b8c9d0e1f2a"
SONNET = "claude-sonnet-4-5-20250929"

# A session as Droid writes it: session_start, a prompt behind its system reminder, thinking + a
# shell call, its result (exit 1, not an error), a failed edit, an answer written twice (same id),
# and a line that is not a message.
TRANSCRIPT = r"""
{"type":"session_start","id":"5d2e8f1a-3b4c-4d5e-8f6a-7b8c9d0e1f2a","title":"Fix login test","sessionTitle":"Fix login test","owner":"dev","version":2,"cwd":"/home/dev/shop"}
{"type":"message","id":"m1","timestamp":"2026-03-02T08:15:02.000Z","message":{"role":"user","content":[{"type":"text","text":"<system-reminder>cwd: /home/dev/shop; git: main</system-reminder>"},{"type":"text","text":"Fix the failing login test"}]}}
{"type":"message","id":"m2","timestamp":"2026-03-02T08:15:05.000Z","parentId":"m1","message":{"role":"assistant","content":[{"type":"thinking","thinking":"Run the test first.","signature":"c2ln"},{"type":"text","text":"Running it."},{"type":"tool_use","id":"toolu_01","name":"Execute","input":{"command":"npm test -- login","riskLevel":"low"}}]}}
{"type":"message","id":"m3","timestamp":"2026-03-02T08:15:09.000Z","parentId":"m2","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"Exit code: 1\nFAIL src/login.test.ts","is_error":false}]}}
{"type":"message","id":"m4","timestamp":"2026-03-02T08:15:12.000Z","parentId":"m3","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_02","name":"Edit","input":{"file_path":"/home/dev/shop/src/auth.ts","old_str":"401","new_str":"200"}}]}}
{"type":"message","id":"m5","timestamp":"2026-03-02T08:15:12.500Z","parentId":"m4","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_02","content":"old_str not found","is_error":true}]}}
{"type":"message","id":"m6","timestamp":"2026-03-02T08:15:15.000Z","parentId":"m5","message":{"role":"assistant","content":[{"type":"text","text":"Fixed"}]}}
{"type":"todo_state","id":"t1","todos":[{"content":"fix login","status":"completed"}]}
{"type":"message","id":"m6","timestamp":"2026-03-02T08:15:16.000Z","parentId":"m5","message":{"role":"assistant","content":[{"type":"text","text":"Fixed the status code."}]}}
""".strip()

SETTINGS = {"model": SONNET, "providerLock": "anthropic", "providerLockTimestamp": "2026-02-27T09:00:00.000Z",
            "reasoningEffort": "medium", "autonomyMode": "auto-low",
            "tokenUsage": {"inputTokens": 73400, "outputTokens": 4748, "cacheCreationTokens": 12000,
                           "cacheReadTokens": 351884, "thinkingTokens": 1200}}


def write_session(home: Path, transcript=TRANSCRIPT, settings=SETTINGS, sid=SID, folder="-home-dev-shop"):
    d = home / "sessions" / folder
    d.mkdir(parents=True, exist_ok=True)
    if transcript is not None:
        (d / f"{sid}.jsonl").write_text(transcript + "\n")
    if settings is not None:
        (d / f"{sid}.settings.json").write_text(json.dumps(settings, indent=2))
    return d


def digests(root: Path) -> dict:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def droid(layout, *homes):
    return ingest_tables(layout, homes={"droid": list(homes)})


def base_rates(model, at):
    rates = calc_price(Usage(input_tokens=1), model, genai_request_timestamp=at).model_price
    return {k: getattr(rates, k).base if hasattr(getattr(rates, k), "base") else getattr(rates, k)
            for k in ("input_mtok", "cache_read_mtok", "cache_write_mtok", "output_mtok")}


def test_the_fixture_gives_exact_totals(layout, tmp_path):
    home = tmp_path / "factory"
    write_session(home)
    before = digests(home)
    (result,) = droid(layout, home).results
    assert result.status == "ok" and result.reconciled, (result.error, result.reconcile)
    last = datetime(2026, 3, 2, 8, 15, 16)
    # one row: the session's running total; output 4 748 + thinking 1 200 (disjoint, as the peers read it)
    usage = query(layout, "SELECT requested_at, model, llm_provider, input_uncached_tokens, cache_read_tokens, "
                          "cache_write_5m_tokens, output_tokens, reasoning_tokens, total_tokens, cost_usd, "
                          "cost_source FROM usage")
    assert [u[:9] for u in usage] == [
        (last, SONNET, "anthropic", 73400, 351884, 12000, 4748 + 1200, 1200, 73400 + 351884 + 12000 + 5948)]
    r = base_rates(SONNET, last.replace(tzinfo=timezone.utc))
    by_hand = (73400 * r["input_mtok"] + 351884 * r["cache_read_mtok"] + 12000 * r["cache_write_mtok"]
               + 5948 * r["output_mtok"]) / Decimal(10**6)
    assert usage[0][9] == pytest.approx(float(by_hand), abs=1e-9) and usage[0][10] == "estimated"
    assert query(layout, "SELECT session_id, title, project, cost_usd, total_tokens, message_count, created_at, "
                         "updated_at FROM sessions") == [
        (SID, "Fix login test", "shop", pytest.approx(float(by_hand), abs=1e-9), 443232, 6,
         datetime(2026, 3, 2, 8, 15, 2), last)]
    # m6 written twice: counted once, the last copy's text
    assert query(layout, "SELECT role, COUNT(*) FROM messages GROUP BY 1 ORDER BY 1") == [("assistant", 3),
                                                                                          ("user", 3)]
    assert scalar(layout, "SELECT text FROM parts WHERE message_id = 'm6'") == "Fixed the status code."
    assert query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1 ORDER BY 1") == [
        ("injected_context", 1), ("reasoning", 1), ("text", 3), ("tool_call", 2), ("tool_result", 2)]
    assert query(layout, "SELECT tool_name, tool_category, command, file_path, exit_code, is_error "
                         "FROM tool_calls ORDER BY called_at") == [
        ("Execute", "shell", "npm test -- login", None, 1, False),
        ("Edit", "edit", None, "/home/dev/shop/src/auth.ts", None, True)]
    assert digests(home) == before


def test_a_session_total_is_not_priced_as_one_long_context_request(layout, tmp_path):
    """437 284 input tokens over the session: priced as ONE request they would cross Sonnet's
    200k tier and take its long-context rates. They were many requests, each under it."""
    home = tmp_path / "factory"
    write_session(home)
    droid(layout, home)
    at = datetime(2026, 3, 2, 8, 15, 16, tzinfo=timezone.utc)
    as_one = price_buckets(Buckets(73400, 351884, 12000, None, 5948), SONNET, "anthropic", at).cost_usd
    ours = scalar(layout, "SELECT cost_usd FROM usage")
    assert as_one > ours


def test_the_total_is_dated_at_the_last_message_not_the_provider_lock(layout, tmp_path):
    """ccusage dates a session's total at `providerLockTimestamp` (parser.rs `settings_timestamp`):
    here 2026-02-27, three days before any message. The totals are rewritten as the session spends
    (tokscale's droid.rs: the lock "records when the provider was *selected*"), so the spend
    belongs to the days the messages were sent."""
    home = tmp_path / "factory"
    write_session(home)
    droid(layout, home)
    assert scalar(layout, "SELECT CAST(requested_at AS DATE) FROM usage").isoformat() == "2026-03-02"


def test_peers_turn_dots_into_dashes_and_lose_the_model(layout, tmp_path):
    """ccusage and tokscale normalise every model name (`gemini-2.5-pro` -> `gemini-2-5-pro`),
    an id no provider uses: Google's own id has the dot, and it is priced as stored. A BYOK
    `custom:` name loses only its prefix, bracketed provider and index."""
    assert model_name("custom:Claude-Opus-4.5-Thinking-[Anthropic]-0") == "claude-opus-4.5-thinking"
    assert model_name("gemini-2.5-pro") == "gemini-2.5-pro"
    at = datetime(2026, 3, 2, tzinfo=timezone.utc)
    assert price_buckets(Buckets(1000, None, None, None, 100), "gemini-2-5-pro", None, at).cost_source == "unknown"
    home = tmp_path / "factory"
    write_session(home, settings={**SETTINGS, "model": "gemini-2.5-pro", "providerLock": "google",
                                  "tokenUsage": token_usage(1000, 100)})
    droid(layout, home)
    assert query(layout, "SELECT model, cost_source FROM usage") == [("gemini-2.5-pro", "estimated")]


def test_sub_agent_sessions_a_lost_transcript_and_an_unpriced_model(layout, tmp_path):
    home = tmp_path / "factory"
    sub = SessionBuilder("sub-1", start=datetime(2026, 3, 2, 9, tzinfo=timezone.utc),
                         title="# Task Tool Invocation\nList the tests")
    sub.prompt("List the tests")
    sub.answer("Three.")
    sub.settle(SONNET, token_usage(100, 20))
    sub.write(home)
    write_session(home, transcript=None, sid="gone-1")  # the transcript was deleted, the totals kept
    unpriced = SessionBuilder("byok-1", start=datetime(2026, 3, 2, 10, tzinfo=timezone.utc))
    unpriced.prompt("hi")
    unpriced.answer("hello")
    unpriced.settle("custom:My-Local-Model-[Ollama]-0", token_usage(500, 50), provider="generic-chat-completion-api")
    unpriced.write(home)
    no_totals = SessionBuilder("no-totals", start=datetime(2026, 3, 2, 11, tzinfo=timezone.utc))
    no_totals.prompt("hi")
    no_totals.answer("hello")
    no_totals.write(home)
    summary = droid(layout, home)
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    assert query(layout, "SELECT session_id, is_sidechain FROM usage ORDER BY session_id") == [
        ("byok-1", False), ("gone-1", False), ("sub-1", True)]
    assert query(layout, "SELECT session_id, model, cost_usd IS NULL, cost_source, message_count FROM sessions "
                         "ORDER BY session_id") == [
        ("byok-1", "my-local-model", True, "unknown", 2), ("gone-1", SONNET, False, "estimated", 0),
        ("no-totals", None, True, "unknown", 2), ("sub-1", SONNET, False, "estimated", 2)]


def test_discovery_both_layouts_one_source_per_session(tmp_path):
    user = tmp_path / "user"
    write_session(user / ".factory")
    write_session(user / ".factory", folder="")  # an older flat copy of the same session
    flat_only = SessionBuilder("flat-only", start=datetime(2026, 1, 1, tzinfo=timezone.utc), cwd="/home/dev/old")
    flat_only.prompt("hi")
    flat_only.write(user / ".factory", flat=True)
    os.mkfifo(user / ".factory" / "auth.json")  # credentials: a FIFO blocks any open
    found = discover(env={"HOME": str(user)})
    assert sorted((s.identity, s.project_path, Path(s.path).parent.name) for s in found.sources) == [
        (SID, "/home/dev/shop", "-home-dev-shop"), ("flat-only", "/home/dev/old", "sessions")]
    assert [s.identity for s in discover(env={"USERPROFILE": str(user)}).sources] == [SID, "flat-only"]


def test_the_generator_writes_what_its_truth_says(layout, tmp_path):
    truth = generate_home(tmp_path / "factory", sessions=6, seed=2)
    summary = droid(layout, tmp_path / "factory")
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == truth.sessions
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == truth.messages
    assert scalar(layout, "SELECT COUNT(*) FROM parts") == truth.parts
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls") == truth.tool_calls
    assert query(layout, "SELECT SUM(input_uncached_tokens), SUM(cache_read_tokens), SUM(cache_write_5m_tokens), "
                         "SUM(output_tokens), SUM(reasoning_tokens) FROM usage") == [
        (truth.tokens["input_uncached"], truth.tokens["cache_read"], truth.tokens["cache_write"],
         truth.tokens["output"], truth.tokens["reasoning"])]


def test_agent_home_flag_and_config_section(tmp_path):
    assert agent_homes([f"droid={tmp_path}"]) == {"droid": (str(tmp_path),)}
    config = tmp_path / "config.toml"
    config.write_text(f'[droid]\nextra_roots = ["{tmp_path / "factory"}"]\n')
    assert load_config(config).extra_roots["droid"] == (str(tmp_path / "factory"),)
