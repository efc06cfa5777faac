"""Goose: a real sessions.db (WAL, Goose's schema at versions 5 and 13) and legacy .jsonl files in
tmp data dirs, through the lake, read back by DuckDB. Expected numbers come from each fixture's
own inputs, with the arithmetic shown."""

import hashlib
import json
from collections import Counter
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from genai_prices import Usage, calc_price

from pipelines.cli import main
from tests.conftest import ingest_tables, query, scalar
from transforms.goose.discover import data_dirs, discover
from transforms.synth.goose import (
    add_message,
    add_session,
    create_goose_db,
    generate_home,
    text,
    thinking,
    tool_request,
    tool_response,
    write_jsonl,
)
from warehouse.lake.config import load_config

T = 1772442000  # 2026-03-02T09:00:00Z, epoch seconds as Goose writes message times


def goose(layout, *homes):
    return ingest_tables(layout, homes={"goose": list(homes)})


def small_store(folder, version=13):
    """Two sessions: A with Goose's own cost, B without one (priced by us). Returns the open
    connection: its rows are still in the -wal."""
    conn = create_goose_db(folder / "sessions.db", version)
    # A: accumulated counters (input 30,000, output 1,200, total 31,200) and the LAST call's
    # counters (9,000 / 400 / 9,400), which are context occupancy and must never be added
    add_session(conn, "20260302_1", "/home/dev/shop", name="fix login", created="2026-03-02 09:00:00",
                updated="2026-03-02 09:30:00", model="claude-sonnet-4-5", provider="anthropic",
                acc=(30_000, 1_200, 31_200), last=(9_000, 400, 9_400), cost=0.108)
    add_message(conn, "20260302_1", "user", [text("fix the login test")], T)
    add_message(conn, "20260302_1", "assistant",
                [thinking("run it first"), tool_request("toolu_1", "developer__shell", {"command": "npm test"})], T + 1)
    add_message(conn, "20260302_1", "user", [tool_response("toolu_1", "FAIL login", is_error=True)], T + 2)
    add_message(conn, "20260302_1", "assistant",
                [tool_request("toolu_2", "developer__text_editor", {"command": "str_replace", "path": "src/a.ts"}),
                 tool_request("toolu_3", "github__create_issue", {"title": "flaky"})], T + 3)
    add_message(conn, "20260302_1", "user",
                [tool_response("toolu_2", "edited", legacy=True), tool_response("toolu_3", "", failed="denied")], T + 4)
    add_message(conn, "20260302_1", "assistant", [text("fixed")], T + 5)
    # B: no accumulated_cost: estimated from its counters
    add_session(conn, "20260302_2", "/home/dev/shop", name="b", created="2026-03-02 10:00:00",
                model="claude-sonnet-4-5", provider="anthropic", acc=(10_000, 500, 10_500))
    add_message(conn, "20260302_2", "user", [text("hi")], T + 3600)
    add_message(conn, "20260302_2", "assistant", [text("hello")], T + 3601)
    conn.commit()
    return conn


def price(inp, out, when):
    p = calc_price(Usage(input_tokens=inp, output_tokens=out), "claude-sonnet-4-5", provider_id="anthropic",
                   genai_request_timestamp=when)
    return float(round(Decimal(p.total_price), 9))


def test_the_small_store_gives_exact_totals(layout, tmp_path):
    folder = tmp_path / "g" / "data" / "sessions"
    conn = small_store(folder)
    db, wal = folder / "sessions.db", folder / "sessions.db-wal"
    assert wal.stat().st_size > 0  # the rows are in the WAL, not yet checkpointed
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (db, wal)}
    try:
        (result,) = goose(layout, tmp_path / "g").results  # a GOOSE_PATH_ROOT-style home
        assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (db, wal)} == before  # never written
    finally:
        conn.close()
    assert result.status == "ok" and result.reconciled, (result.error, result.reconcile)
    assert result.schema_version == 13  # MAX(version) of schema_version
    estimated_b = price(10_000, 500, datetime(2026, 3, 2, 10, tzinfo=UTC))
    # one usage row per session: the accumulated counters, all input uncached (Goose folds the
    # cache into input), total = 30,000 + 1,200 and 10,000 + 500
    assert query(layout, "SELECT session_id, input_uncached_tokens, cache_read_tokens, output_tokens, "
                         "reasoning_tokens, total_tokens, cost_usd, cost_source, request_id FROM usage ORDER BY 1") == [
        ("20260302_1", 30_000, None, 1_200, None, 31_200, 0.108, "native", None),
        ("20260302_2", 10_000, None, 500, None, 10_500, pytest.approx(estimated_b), "estimated", None)]
    assert query(layout, "SELECT session_id, project, title, cost_usd, cost_source, total_tokens, message_count, "
                         "is_root, model, llm_provider FROM sessions ORDER BY 1") == [
        ("20260302_1", "shop", "fix login", 0.108, "native", 31_200, 6, True, "claude-sonnet-4-5", "anthropic"),
        ("20260302_2", "shop", "b", pytest.approx(estimated_b), "estimated", 10_500, 2, True, "claude-sonnet-4-5",
         "anthropic")]
    # the last call's counters are kept, never added
    extra = json.loads(scalar(layout, "SELECT extra_columns FROM sessions WHERE session_id = '20260302_1'"))
    assert (extra["input_tokens"], extra["output_tokens"], extra["total_tokens"]) == (9_000, 400, 9_400)
    assert Counter(dict(query(layout, "SELECT native_part_type, COUNT(*) FROM parts GROUP BY 1"))) == Counter(
        {"text": 4, "thinking": 1, "toolRequest": 3, "toolResponse": 3})
    assert Counter(dict(query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1"))) == Counter(
        {"text": 4, "reasoning": 1, "tool_call": 3, "tool_result": 3})
    assert query(layout, "SELECT tool_call_id, tool_name, tool_category, command, file_path, has_result, is_error, "
                         "result_text FROM tool_calls ORDER BY 1") == [
        ("toolu_1", "developer__shell", "shell", "npm test", None, True, True, "FAIL login"),
        ("toolu_2", "developer__text_editor", "edit", None, "src/a.ts", True, False, "edited"),
        ("toolu_3", "github__create_issue", "mcp", None, None, True, True, "denied")]
    assert query(layout, "SELECT message_id, role, created_at FROM messages WHERE session_id = '20260302_2' "
                         "ORDER BY message_index") == [
        ("msg_20260302_2_7", "user", datetime(2026, 3, 2, 10, 0, 0)),
        ("msg_20260302_2_8", "assistant", datetime(2026, 3, 2, 10, 0, 1))]


def test_schema_v5_without_model_cost_or_message_ids(layout, tmp_path):
    """Before v6 Goose recorded no model (unpriceable: unknown), before v7 no message ids (Goose's
    own backfill form `msg_<session>_<row>` is used), before v13 no cost."""
    folder = tmp_path / "g" / "sessions"
    conn = create_goose_db(folder / "sessions.db", version=5)
    add_session(conn, "20250101_1", "/home/dev/old", name="old", created="2025-01-01 08:00:00", acc=(700, 30, 730))
    add_message(conn, "20250101_1", "user", [text("hi")], 1735718400)
    add_message(conn, "20250101_1", "assistant", [text("yo")], 1735718401)
    conn.commit()
    conn.close()
    (result,) = goose(layout, tmp_path / "g").results
    assert result.status == "ok" and result.reconciled and result.schema_version == 5
    assert query(layout, "SELECT total_tokens, cost_usd, cost_source, model FROM sessions") == [
        (730, None, "unknown", None)]
    assert query(layout, "SELECT message_id FROM messages ORDER BY message_index") == [
        ("msg_20250101_1_1",), ("msg_20250101_1_2",)]


def test_trap_last_call_counters_are_not_a_session_total_ccusage_disagrees(layout, tmp_path):
    """A session with only the last call's counters (accumulated ones null). ccusage
    (adapter/goose/parser.rs) falls back to `input_tokens`/`output_tokens` and reports 650 + 50.
    Goose's source (session/storage.rs, SessionMetadata) says those are "Retrieved from the
    provider's last usage" while the accumulated ones are "Accumulated across all messages
    (useful for tracking cost over an entire session)": the last call is one request's context,
    not the session's spend. agentlake reports the tokens as unknown, never 700."""
    folder = tmp_path / "g" / "sessions"
    conn = create_goose_db(folder / "sessions.db")
    add_session(conn, "s1", "/home/dev/shop", model="claude-sonnet-4-5", provider="anthropic", last=(650, 50, 700))
    add_message(conn, "s1", "user", [text("a")], T)
    add_message(conn, "s1", "assistant", [text("b")], T + 1)
    conn.commit()
    conn.close()
    goose(layout, tmp_path / "g")
    assert query(layout, "SELECT total_tokens, cost_usd, cost_source FROM sessions") == [(None, None, "unknown")]
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == 0
    ccusage_input = 650  # what ccusage would report: the last call's input
    assert json.loads(scalar(layout, "SELECT extra_columns FROM sessions"))["input_tokens"] == ccusage_input


def test_trap_total_beyond_input_and_output_is_output_priced_reasoning(layout, tmp_path):
    """Gemini's thinking tokens are in its total but not in its output count: Goose's total
    (180) exceeds input + output (100 + 50). The remainder, 30, is output (reasoning). ccusage
    agrees (`extra_total_tokens`, priced as output)."""
    folder = tmp_path / "g" / "sessions"
    conn = create_goose_db(folder / "sessions.db")
    add_session(conn, "s1", "/home/dev/shop", model="gemini-2.5-pro", provider="google", acc=(100, 50, 180),
                cost=0.002)
    conn.commit()
    conn.close()
    goose(layout, tmp_path / "g")
    assert query(layout, "SELECT input_uncached_tokens, output_tokens, reasoning_tokens, total_tokens FROM usage") == [
        (100, 50 + 30, 30, 180)]


def test_trap_legacy_jsonl_imported_copy_counted_once_and_unimported_session_read(layout, tmp_path):
    folder = tmp_path / "g" / "sessions"
    small_store(folder).close()
    # Goose imported this file when it created sessions.db and left it behind: not counted again
    write_jsonl(folder / "20260302_1.jsonl", {"description": "fix login", "message_count": 1},
                [{"role": "user", "created": T, "content": [text("fix the login test")]}])
    # a session of an older Goose, never imported: read from its file
    write_jsonl(folder / "20250105_093000.jsonl",
                {"description": "legacy", "message_count": 2, "working_dir": "/home/dev/shop",
                 "accumulated_input_tokens": 1_000, "accumulated_output_tokens": 20, "accumulated_total_tokens": 1_020},
                [{"id": "m1", "role": "user", "created": 1736069400, "content": [text("hi")]},
                 {"id": "m2", "role": "assistant", "created": 1736069405,
                  "content": [tool_request("c1", "developer__shell", {"command": "ls"})]},
                 {"id": "m3", "role": "user", "created": 1736069406, "content": [tool_response("c1", "a.txt")]}])
    (folder / "broken.jsonl").write_text('{"description": "x", "message_count": 0}\nnot json\n')
    (result,) = goose(layout, tmp_path / "g").results
    assert result.status == "ok" and result.reconciled, result.reconcile
    assert query(layout, "SELECT session_id, source_table, total_tokens, message_count FROM sessions ORDER BY 1") == [
        ("20250105_093000", "20250105_093000.jsonl", 1_020, 3), ("20260302_1", "sessions", 31_200, 6),
        ("20260302_2", "sessions", 10_500, 2), ("broken", "broken.jsonl", None, 0)]
    assert query(layout, "SELECT tool_name, result_text FROM tool_calls WHERE session_id = '20250105_093000'") == [
        ("developer__shell", "a.txt")]
    assert query(layout, "SELECT key, error FROM quarantine") == [("broken.jsonl:2", "not a JSON object")]
    assert any("counted once" in w for w in result.warnings)


def test_trap_streamed_duplicate_message_ids_stay_unique_and_do_not_add_tokens(layout, tmp_path):
    folder = tmp_path / "g" / "sessions"
    conn = create_goose_db(folder / "sessions.db")
    add_session(conn, "s1", "/home/dev/shop", acc=(100, 10, 110), cost=0.01)
    add_message(conn, "s1", "assistant", [text("part")], T, message_id="m1")
    add_message(conn, "s1", "assistant", [text("part and more")], T, message_id="m1")
    conn.commit()
    conn.close()
    (result,) = goose(layout, tmp_path / "g").results
    assert result.reconciled
    assert query(layout, "SELECT message_id FROM messages ORDER BY message_index") == [("m1",), ("m1#2",)]
    assert query(layout, "SELECT SUM(total_tokens), SUM(cost_usd) FROM usage") == [(110, 0.01)]


def test_trap_sub_agents_and_archived_sessions_count_their_own_spend(layout, tmp_path):
    folder = tmp_path / "g" / "sessions"
    conn = create_goose_db(folder / "sessions.db")
    add_session(conn, "p", "/home/dev/shop", acc=(1_000, 100, 1_100), cost=0.5)
    add_session(conn, "c", "/home/dev/shop", acc=(200, 20, 220), cost=0.1, session_type="sub_agent")
    add_session(conn, "old", "/home/dev/shop", acc=(50, 5, 55), cost=0.02, archived_at="2026-03-01 00:00:00")
    conn.commit()
    conn.close()
    goose(layout, tmp_path / "g")
    # no parent id is recorded: three roots, 0.5 + 0.1 + 0.02 (nothing double counted)
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(0.62)
    assert query(layout, "SELECT session_id, is_sidechain FROM usage ORDER BY 1") == [
        ("c", True), ("old", False), ("p", False)]


def test_trap_thread_messages_copies_counted_once(layout, tmp_path):
    """Schema v10's `thread_messages`: a copy of a session's message (same session and message id)
    is counted once; a thread message no session table holds is kept under its session."""
    folder = tmp_path / "g" / "sessions"
    conn = create_goose_db(folder / "sessions.db")
    add_session(conn, "s1", "/home/dev/shop", acc=(10, 1, 11), cost=0.001, thread_id="th1")
    add_message(conn, "s1", "user", [text("hi")], T, message_id="m1")
    conn.execute("INSERT INTO threads (id) VALUES ('th1')")
    for mid, words in (("m1", "hi"), ("m2", "only in the thread")):
        conn.execute("INSERT INTO thread_messages (thread_id, session_id, message_id, role, content_json, "
                     "created_timestamp) VALUES ('th1', 's1', ?, 'user', ?, ?)", (mid, json.dumps([text(words)]), T))
    conn.commit()
    conn.close()
    (result,) = goose(layout, tmp_path / "g").results
    assert result.reconciled
    assert query(layout, "SELECT message_id, source_table FROM messages ORDER BY message_index") == [
        ("m1", "messages"), ("m2", "thread_messages")]
    assert any("counted once" in w for w in result.warnings)


def test_unreadable_content_and_garbled_cost(layout, tmp_path):
    folder = tmp_path / "g" / "sessions"
    conn = create_goose_db(folder / "sessions.db")
    add_session(conn, "s1", "/home/dev/shop", model="claude-sonnet-4-5", provider="anthropic",
                acc=(1_000, 100, 1_100), cost="n/a")
    add_message(conn, "s1", "user", [text("ok")], T)
    conn.execute("INSERT INTO messages (session_id, role, content_json, created_timestamp) VALUES ('s1', "
                 "'assistant', '{broken', ?)", (T + 1,))
    conn.commit()
    conn.close()
    (result,) = goose(layout, tmp_path / "g").results
    assert result.status == "ok" and result.reconciled
    assert query(layout, "SELECT parts_ok, part_count FROM messages ORDER BY message_index") == [
        (True, 1), (False, None)]
    assert scalar(layout, "SELECT COUNT(*) FROM quarantine") == 1
    expected = price(1_000, 100, datetime(2026, 3, 2, 9, tzinfo=UTC))
    assert query(layout, "SELECT cost_usd, cost_source FROM sessions") == [(pytest.approx(expected), "estimated")]
    assert any("not a number" in w for w in result.warnings)


def test_a_session_that_never_called_a_model_costs_a_known_zero(layout, tmp_path):
    folder = tmp_path / "g" / "sessions"
    conn = create_goose_db(folder / "sessions.db")
    add_session(conn, "s1", "/home/dev/shop")
    add_message(conn, "s1", "user", [text("hello?")], T)
    conn.commit()
    conn.close()
    goose(layout, tmp_path / "g")
    assert query(layout, "SELECT cost_usd, cost_source FROM sessions") == [(0.0, "native")]


# ---------------------------------------------------------------------------------- discovery

def test_discovery_honours_goose_path_root_xdg_and_appdata(tmp_path):
    for where in ("root/data", "xdg/goose", "home/.local/share/goose", "appdata/Block/goose/data"):
        create_goose_db(tmp_path / where / "sessions" / "sessions.db").close()
    env = {"HOME": str(tmp_path / "home")}
    found = lambda e: [s.path for s in discover(e).sources]  # noqa: E731
    path = lambda where: str((tmp_path / where / "sessions").resolve())  # noqa: E731
    assert found({**env, "GOOSE_PATH_ROOT": str(tmp_path / "root"), "XDG_DATA_HOME": str(tmp_path / "xdg")}) == [
        path("root/data")]  # GOOSE_PATH_ROOT replaces every default
    assert found({**env, "GOOSE_PATH_ROOT": "relative/root"}) == [path("home/.local/share/goose")]  # ignored
    assert found({**env, "XDG_DATA_HOME": str(tmp_path / "xdg")}) == [path("xdg/goose")]
    assert found({**env, "XDG_DATA_HOME": "not/absolute"}) == [path("home/.local/share/goose")]
    assert found({"USERPROFILE": str(tmp_path / "nobody"), "APPDATA": str(tmp_path / "appdata")}) == [
        path("appdata/Block/goose/data")]
    assert data_dirs({"HOME": "/h"})[0].as_posix() == "/h/.local/share/goose"
    assert discover({"HOME": str(tmp_path / "empty")}).sources == []  # no data, no problem


def test_agent_home_forms_config_section_and_cli(tmp_path, monkeypatch, capsys):
    truth = generate_home(tmp_path / "gh" / "data", sessions=3, seed=2)
    sessions = (tmp_path / "gh" / "data" / "sessions").resolve()
    for place in ("gh", "gh/data", "gh/data/sessions", "gh/data/sessions/sessions.db"):
        got = discover({}, extra_roots=[str(tmp_path / place)], use_default=False)
        assert [s.path for s in got.sources] == [str(sessions)] and not got.problems, place
    assert "no Goose sessions" in discover({}, extra_roots=[str(tmp_path / "nope")], use_default=False).problems[0]
    config = tmp_path / "config.toml"
    config.write_text(f'[goose]\nextra_roots = ["{tmp_path / "gh"}"]\n')
    assert load_config(config).extra_roots["goose"] == (str(tmp_path / "gh"),)
    monkeypatch.setenv("AGENTLAKE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own Dagster instance, as a user's
    assert main(["ingest", "--no-default", "--agent-home", f"goose={tmp_path / 'gh'}"]) == 0
    capsys.readouterr()
    assert main(["sql", "SELECT COUNT(*) AS n, SUM(total_tokens) AS t FROM usage WHERE provider = 'goose'",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": truth.sessions, "t": truth.tokens}]


def test_generated_home_matches_its_truth(layout, tmp_path):
    truth = generate_home(tmp_path / "gh", sessions=6, seed=3)
    (result,) = goose(layout, tmp_path / "gh").results
    assert result.status == "ok" and result.reconciled, result.reconcile
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == truth.sessions
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == truth.messages
    assert scalar(layout, "SELECT COUNT(*) FROM parts") == truth.parts
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls") == truth.tool_calls
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == truth.tokens
    assert scalar(layout, "SELECT SUM(cost_usd) FROM usage WHERE cost_source = 'native'") == pytest.approx(
        truth.native_cost)
    for sid, (inp, out, total, cost) in truth.by_session.items():
        assert query(layout, "SELECT input_uncached_tokens, output_tokens, total_tokens FROM usage "
                             "WHERE session_id = ?", sid) == [(inp, out, total)]


def test_a_negative_counter_leaves_the_session_unpriced_and_is_said_as_it_lands(layout, tmp_path):
    """A negative accumulated input was read as not recorded: the session was priced on its output
    alone, plus a `total - input - output` of reasoning grown by the negative input. It is kept,
    not priced, and nulled with the source's warning."""
    folder = tmp_path / "g" / "sessions"
    conn = create_goose_db(folder / "sessions.db")
    add_session(conn, "s1", "/home/dev/shop", model="gemini-2.5-pro", provider="google", acc=(-100, 50, 180))
    # a total alone, out of range (a review): a known $0 of no counts at all, where it was unknown; a
    # total is a check on the two counts, read as not recorded, and said
    add_session(conn, "s2", "/home/dev/shop", model="gemini-2.5-pro", provider="google", acc=(None, None, -1))
    add_message(conn, "s2", "assistant", [text("done")], created=T)
    conn.commit()
    conn.close()
    [result] = goose(layout, tmp_path / "g").results
    assert query(layout, "SELECT session_id, input_uncached_tokens, output_tokens, reasoning_tokens, total_tokens, "
                         "cost_usd, cost_source FROM usage ORDER BY 1") == [("s1", None, 50, None, 50, None, "unknown")]
    assert query(layout, "SELECT cost_usd, cost_source FROM sessions") == [(None, "unknown")] * 2
    assert [w for w in result.warnings if w.startswith("accumulated_total_tokens out of range (negative or over "
                                                       "10^12) in 1 session: read as not recorded")], result.warnings
    assert [w for w in result.warnings if "out of range nulled" in w and "input_uncached_tokens" in w], result.warnings
