"""OpenCode: a real opencode.db (WAL) and legacy JSON in tmp data dirs, through the lake, read
back by DuckDB. Expected numbers are derived from each fixture's own inputs."""

import hashlib
import os
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from tests.conftest import ingest_tables, query, scalar
from transforms.opencode.discover import discover
from transforms.opencode.provider import OpenCodeProvider
from transforms.synth.opencode import (
    Writer,
    assistant_info,
    create_opencode_db,
    generate_home,
    part,
    session_info,
    tokens,
    tool_part,
    user_info,
    write_json,
)
from transforms.provider import DiscoverOptions
from warehouse.land.ingest import discover_sources, ingest_all
from warehouse.catalog.build import refresh

EPOCH = datetime(1970, 1, 1)
T = 1772442901123  # ms, as OpenCode writes them


def ms(value: int) -> datetime:
    return EPOCH + timedelta(milliseconds=value)


def fixture() -> tuple[dict, list[dict], list[dict]]:
    """docs/FORMATS.md, "OpenCode: a worked example", exactly: (session, messages, parts), ids
    inline as in the legacy files."""
    sid, user, asst = "ses_3a9f1c2b7ffeAbCdEf", "msg_3a9f1c2c0001", "msg_3a9f1c2d0003"
    usage = tokens(input=12, output=350, reasoning=0, read=14800, write=1250)  # total 16412
    session = session_info(sid, directory="/home/dev/shop", title="Fix login test", created=1772442901123,
                           updated=1772443100456)
    messages = [user_info(user, sid, 1772442901200),
                assistant_info(asst, sid, 1772442902000, completed=1772442915000, parent_id=user, cost=0.01842,
                               tokens=usage)]
    parts = [
        part("prt_3a9f1c2c0002", user, sid, "text", text="Fix the failing login test"),
        part("prt_3a9f1c2d0004", asst, sid, "step-start", snapshot="9c1e"),
        part("prt_3a9f1c2d0005", asst, sid, "reasoning", text="Run the test first.",
             time={"start": 1772442902100, "end": 1772442902900}),
        tool_part("prt_3a9f1c2d0006", asst, sid, "toolu_01Abc", "bash", status="completed",
                  input={"command": "npm test -- login", "description": "Run login tests"},
                  output="FAIL src/login.test.ts", metadata={"exit": 1}, start=1772442903000, end=1772442906000),
        tool_part("prt_3a9f1c2d0007", asst, sid, "toolu_01Def", "edit", status="error",
                  input={"filePath": "/home/dev/shop/src/auth.ts", "oldString": "401", "newString": "200"},
                  error="oldString not found", start=1772442907000, end=1772442907050),
        part("prt_3a9f1c2d0008", asst, sid, "text", text="Fixed the status code."),
        part("prt_3a9f1c2d0009", asst, sid, "step-finish", reason="stop", cost=0.01842, tokens=usage),
    ]
    return session, messages, parts


def write_fixture(data_dir, *, to_db=True, to_json=False):
    """The worked example's fixture into `data_dir`; returns the open database connection (or None)."""
    conn = create_opencode_db(Path(data_dir) / "opencode.db") if to_db else None
    session, messages, parts = fixture()
    writer = Writer(data_dir, conn)
    writer.session(session, to_db, to_json)
    for info in messages:
        writer.message(info, [p for p in parts if p["messageID"] == info["id"]], to_db, to_json)
    return conn


def oc(layout, *homes):
    return ingest_tables(layout, homes={"opencode": list(homes)})


def one_session(data_dir, messages, *, to_db=True, to_json=False, sid="ses_A", directory="/home/dev/shop",
                parent=None, conn=None, **columns):
    """A session with (info, parts) messages; returns the open connection (or None)."""
    conn = conn or (create_opencode_db(Path(data_dir) / "opencode.db") if to_db else None)
    writer = Writer(data_dir, conn)
    writer.session(session_info(sid, directory=directory, title=sid, created=T, parent=parent), to_db, to_json,
                   **columns)
    for info, parts in messages:
        writer.message(info, parts, to_db, to_json)
    return conn


def answer(mid, sid, *, cost, usage, steps=(), at=T + 1000, **kw):
    """An assistant message and its parts: a step-finish per entry of `steps` (cost, tokens)."""
    parts = [part(f"prt_{mid}_{i}", mid, sid, "step-finish", reason="stop", cost=c, tokens=t)
             for i, (c, t) in enumerate(steps)]
    return assistant_info(mid, sid, at, completed=at + 500, parent_id="msg_u", cost=cost, tokens=usage, **kw), parts


def closed(conn):
    if conn is not None:
        conn.close()


# ---------------------------------------------------------------------------- the worked example

@pytest.mark.parametrize("stored_as", ["json", "db"])
def test_the_documented_fixture_gives_exact_totals(layout, tmp_path, stored_as):
    home = tmp_path / "oc"
    closed(write_fixture(home, to_db=stored_as == "db", to_json=stored_as == "json"))
    summary = oc(layout, home)
    (result,) = summary.results
    assert result.status == "ok" and result.reconciled, (result.error, result.reconcile)
    session, messages, parts = fixture()
    usage = messages[1]["tokens"]
    # buckets as stored: input is already uncached; cache read and write are their own buckets
    assert query(layout, "SELECT input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens, "
                         "cache_write_1h_tokens, output_tokens, reasoning_tokens, total_tokens, cost_usd, "
                         "cost_source, model, llm_provider, is_sidechain, requested_at FROM usage") == [
        (12, 14800, 1250, None, 350, 0, usage["total"], 0.01842, "native", "claude-sonnet-4-5", "anthropic",
         False, ms(1772442915000))]
    assert usage["total"] == 12 + 14800 + 1250 + 350
    assert query(layout, "SELECT project, project_path, cost_usd, cost_source, total_tokens, message_count, "
                         "created_at, is_root FROM sessions") == [
        ("shop", "/home/dev/shop", 0.01842, "native", 16412, 2, ms(session["time"]["created"]), True)]
    assert query(layout, "SELECT role, message_index, created_at FROM messages ORDER BY message_index") == [
        ("user", 0, ms(1772442901200)), ("assistant", 1, ms(1772442902000))]
    assert Counter(dict(query(layout, "SELECT native_part_type, COUNT(*) FROM parts GROUP BY 1"))) == Counter(
        p["type"] for p in parts)
    canonical = {"text": "text", "reasoning": "reasoning", "tool": "tool_call", "step-finish": "finish",
                 "step-start": "other"}
    assert Counter(dict(query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1"))) == Counter(
        canonical[p["type"]] for p in parts)
    assert query(layout, "SELECT tool_name, tool_category, command, file_path, has_result, is_error, exit_code, "
                         "result_text FROM tool_calls ORDER BY tool_name") == [
        ("bash", "shell", "npm test -- login", None, True, False, 1, "FAIL src/login.test.ts"),
        ("edit", "edit", None, "/home/dev/shop/src/auth.ts", True, True, None, "oldString not found")]
    assert scalar(layout, "SELECT reasoning FROM parts WHERE part_type = 'reasoning'") == "Run the test first."


# ---------------------------------------------------------------------------------- trap 1: every store

def test_db_and_legacy_json_copies_are_counted_once(layout, tmp_path):
    home = tmp_path / "oc"
    closed(write_fixture(home, to_db=True, to_json=True))  # an upgrade leaves the JSON behind
    (result,) = oc(layout, home).results
    assert result.reconciled
    _, messages, parts = fixture()
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == len(messages)
    assert scalar(layout, "SELECT COUNT(*) FROM parts") == len(parts)
    assert query(layout, "SELECT COUNT(*), SUM(cost_usd) FROM usage") == [(1, 0.01842)]
    assert scalar(layout, "SELECT DISTINCT source_table FROM messages") == "message"  # the database row won


def test_wal_rows_are_read_and_the_store_is_untouched(layout, tmp_path):
    home = tmp_path / "oc"
    conn = write_fixture(home, to_db=True)  # still open: the rows are in the -wal, not checkpointed
    db, wal = home / "opencode.db", home / "opencode.db-wal"
    assert wal.stat().st_size > 0
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (db, wal)}
    try:
        assert oc(layout, home).results[0].status == "ok"
        assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (db, wal)} == before
    finally:
        conn.close()
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 2


def test_channel_databases_and_opencode_db_are_read(layout, tmp_path):
    home = tmp_path / "share" / "opencode"
    closed(write_fixture(home, to_db=True))
    dev = create_opencode_db(home / "opencode-dev.db")
    one_session(home, [answer("msg_d", "ses_dev", cost=0.5, usage=tokens(input=1, output=2))], sid="ses_dev",
                conn=dev)
    dev.close()
    custom = tmp_path / "elsewhere" / "mine.db"
    custom.parent.mkdir()
    one_session(custom.parent, [], sid="ses_custom", conn=create_opencode_db(custom)).close()
    env = {"HOME": str(tmp_path / "nobody"), "XDG_DATA_HOME": str(tmp_path / "share"), "OPENCODE_DB": str(custom)}
    found = discover(env)
    assert sorted(s.path for s in found.sources) == sorted([str(home.resolve()), str(custom.resolve())])
    sources, _ = discover_sources(DiscoverOptions(env=env), {"opencode": OpenCodeProvider()})
    ingest_all(sources, layout, workers=1)
    refresh(layout.lake, layout.warehouse, marts=False)
    assert query(layout, "SELECT session_id, source_table FROM sessions ORDER BY 1") == [
        ("ses_3a9f1c2b7ffeAbCdEf", "session"), ("ses_custom", "mine.db:session"), ("ses_dev", "opencode-dev.db:session")]
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(0.01842 + 0.5)


def test_xdg_data_home_is_honoured(tmp_path):
    xdg, home = tmp_path / "xdg", tmp_path / "home"
    closed(write_fixture(xdg / "opencode"))
    closed(write_fixture(home / ".local" / "share" / "opencode"))
    assert [s.path for s in discover({"XDG_DATA_HOME": str(xdg), "HOME": str(home)}).sources] == [
        str((xdg / "opencode").resolve())]
    assert [s.path for s in discover({"HOME": str(home)}).sources] == [
        str((home / ".local" / "share" / "opencode").resolve())]
    assert discover({"HOME": str(tmp_path / "empty")}).sources == []  # no data, no problem


# ---------------------------------------------------------------------------------- traps 2-4: tokens

def test_a_zero_cost_is_priced_with_the_cache_buckets_apart(layout, tmp_path):
    usage = tokens(input=12, output=350, read=14800, write=1250)
    conn = one_session(tmp_path / "oc", [answer("msg_a", "ses_A", cost=0, usage=usage)])
    closed(conn)
    oc(layout, tmp_path / "oc")
    # genai-prices takes the TOTAL input, the cache buckets as parts of it
    price = calc_price(Usage(input_tokens=12 + 14800 + 1250, cache_read_tokens=14800, cache_write_tokens=1250,
                             output_tokens=350), "claude-sonnet-4-5", provider_id="anthropic",
                       genai_request_timestamp=ms(T + 1500).replace(tzinfo=UTC))
    expected = float(round(Decimal(price.total_price), 9))
    assert query(layout, "SELECT input_uncached_tokens, cost_usd, cost_source FROM usage") == [
        (12, pytest.approx(expected), "estimated")]
    assert query(layout, "SELECT cost_usd, cost_source FROM sessions") == [(pytest.approx(expected), "estimated")]


def test_a_negative_input_as_opencode_writes_one_keeps_its_request_unpriced(layout, tmp_path):
    """OpenCode writes a negative input (its issue 15293: -423 beside a cache read of 84,160). The
    request is kept, unpriced, its input nulled with the source's warning: a review found it dropped
    as a placeholder once its total was taken for no count."""
    bad, good = tokens(input=-423, output=655, read=84160, write=0), tokens(input=12, output=350, read=14800, write=0)
    only = tokens(input=-5, output=0, read=0, write=0)  # no count in range: still a request, not a placeholder
    conn = one_session(tmp_path / "oc", [answer("msg_a", "ses_A", cost=0, usage=bad),
                                         answer("msg_b", "ses_A", cost=0, usage=good, at=T + 3000),
                                         answer("msg_c", "ses_A", cost=0, usage=only, at=T + 5000)])
    closed(conn)
    [result] = oc(layout, tmp_path / "oc").results
    assert query(layout, "SELECT message_id, input_uncached_tokens, cache_read_tokens, total_tokens, cost_source "
                         "FROM usage ORDER BY 1") == [("msg_a", None, 84160, 84160 + 655, "unknown"),
                                                      ("msg_b", 12, 14800, 12 + 14800 + 350, "estimated"),
                                                      ("msg_c", None, 0, 0, "unknown")]
    assert query(layout, "SELECT cost_source FROM sessions") == [("partial",)]
    assert [w for w in result.warnings if "out of range nulled" in w and "input_uncached_tokens" in w], result.warnings


@pytest.mark.parametrize("inside", [False, True])
def test_reasoning_is_added_to_output_unless_total_shows_it_inside(layout, tmp_path, inside):
    usage = tokens(input=100, output=500, reasoning=200, reasoning_inside=inside)
    assert usage["total"] == (600 if inside else 800)
    closed(one_session(tmp_path / "oc", [answer("msg_a", "ses_A", cost=0.01, usage=usage)]))
    oc(layout, tmp_path / "oc")
    output = 500 if inside else 500 + 200
    assert query(layout, "SELECT output_tokens, reasoning_tokens, total_tokens FROM usage") == [
        (output, 200, 100 + output)]


def test_a_multi_step_message_sums_its_steps_and_never_the_session_aggregates(layout, tmp_path):
    step1 = tokens(input=10, output=100, read=1000, write=500)
    step2 = tokens(input=20, output=200, reasoning=30, read=1500)
    # message.tokens holds the last step only; message.cost is the sum of the steps
    msg = answer("msg_a", "ses_A", cost=0.003 + 0.004, usage=step2, steps=[(0.003, step1), (0.004, step2)])
    closed(one_session(tmp_path / "oc", [msg], cost=99.0, tokens_input=999_999, tokens_output=999_999))
    oc(layout, tmp_path / "oc")
    output = 100 + 200 + 30  # reasoning is disjoint in step 2 (total says so)
    total = (10 + 20) + (1000 + 1500) + 500 + output
    assert query(layout, "SELECT input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens, output_tokens, "
                         "reasoning_tokens, total_tokens, cost_usd FROM usage") == [
        (30, 2500, 500, output, 30, total, pytest.approx(0.007))]
    assert query(layout, "SELECT cost_usd, total_tokens FROM sessions") == [(pytest.approx(0.007), total)]


def test_an_aborted_placeholder_has_no_usage_row(layout, tmp_path):
    msg = answer("msg_a", "ses_A", cost=0, usage=tokens(), finish=None)
    msg[0]["error"] = {"name": "MessageAbortedError", "data": {}}
    closed(one_session(tmp_path / "oc", [msg]))
    oc(layout, tmp_path / "oc")
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 1
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == 0
    assert query(layout, "SELECT cost_usd, cost_source, total_tokens FROM sessions") == [(0.0, "native", None)]


def test_an_unpriced_model_is_unknown_and_its_session_partial(layout, tmp_path):
    free = answer("msg_a", "ses_A", cost=0, usage=tokens(input=50, output=5), provider="ollama",
                  model="qwen3-coder:30b")
    paid = answer("msg_b", "ses_A", cost=0.25, usage=tokens(input=10, output=10), at=T + 5000)
    closed(one_session(tmp_path / "oc", [free, paid]))
    oc(layout, tmp_path / "oc")
    assert query(layout, "SELECT model, cost_usd, cost_source FROM usage ORDER BY requested_at") == [
        ("qwen3-coder:30b", None, "unknown"), ("claude-sonnet-4-5", 0.25, "native")]
    assert query(layout, "SELECT cost_usd, cost_source, model FROM sessions") == [(0.25, "partial", "claude-sonnet-4-5")]


# ---------------------------------------------------------------------------------- trap 5: tools, sub-agents

def test_tool_ids_map_to_categories_and_underscores_prove_nothing(layout, tmp_path):
    names = {"webfetch": "fetch", "websearch": "search", "codesearch": "search", "todowrite": "todo",
             "apply_patch": "edit", "multiedit": "edit", "list": "read", "task": "agent",
             "github_create_issue": "other", "fetch": "other", "my_plugin_tool": "other"}
    parts = [tool_part(f"prt_{i:02d}", "msg_a", "ses_A", f"c{i}", name, status="completed", input={}, output="ok",
                       start=T, end=T + 1) for i, name in enumerate(names)]
    parts.append(tool_part("prt_99", "msg_a", "ses_A", "c99", "bash", status="running", input={"command": "sleep 9"},
                           start=T))
    info, _ = answer("msg_a", "ses_A", cost=0.01, usage=tokens(input=1, output=1))
    closed(one_session(tmp_path / "oc", [(info, parts)]))
    oc(layout, tmp_path / "oc")
    got = dict(query(layout, "SELECT tool_name, tool_category FROM tool_calls WHERE has_result"))
    assert got == names
    assert query(layout, "SELECT tool_name, has_result, is_error, exit_code FROM tool_calls WHERE NOT has_result") == [
        ("bash", False, None, None)]


def _three_generations(home):
    """A root R ($0.01), its sub-agent C ($0.02) and C's own G ($0.005), in one database."""
    conn = one_session(home, [answer("msg_r", "ses_R", cost=0.01, usage=tokens(input=1, output=1))], sid="ses_R")
    one_session(home, [answer("msg_c", "ses_C", cost=0.02, usage=tokens(input=2, output=2))], sid="ses_C",
                parent="ses_R", conn=conn)
    one_session(home, [answer("msg_g", "ses_G", cost=0.005, usage=tokens(input=3, output=3))], sid="ses_G",
                parent="ses_C", conn=conn)
    conn.close()


def test_sub_agent_sessions_roll_up_into_their_root(layout, tmp_path):
    home = tmp_path / "oc"
    _three_generations(home)
    oc(layout, home)
    assert query(layout, "SELECT session_id, parent_session_id, root_session_id, is_root, cost_usd, total_tokens, "
                         "cost_includes_subagents FROM sessions ORDER BY session_id") == [
        ("ses_C", "ses_R", "ses_R", False, pytest.approx(0.02 + 0.005), 4, True),
        ("ses_G", "ses_C", "ses_R", False, pytest.approx(0.005), 6, True),
        ("ses_R", None, "ses_R", True, pytest.approx(0.01 + 0.02 + 0.005), 2, True)]
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(0.035)
    assert dict(query(layout, "SELECT session_id, is_sidechain FROM usage")) == {
        "ses_R": False, "ses_C": True, "ses_G": True}


def test_a_sub_agent_deleted_from_the_store_stays_in_its_ancestors_cost(layout, tmp_path):
    """A sub-agent deleted from the database is kept in the lake (history outlives the agent), and
    its cost stays in its parent's and its root's: the roots' costs still add up to the requests'
    (a trial: the root lost the child's cost while the lake kept the child's requests). Its own gone
    sub-agent is in its cost already, not counted again."""
    import sqlite3

    home = tmp_path / "oc"
    _three_generations(home)
    oc(layout, home)
    costs = "SELECT session_id, cost_usd, cost_source FROM sessions ORDER BY session_id"
    first = query(layout, costs)

    def delete(sid):
        with sqlite3.connect(home / "opencode.db") as db:
            for sql in ("DELETE FROM part WHERE session_id = ?", "DELETE FROM message WHERE session_id = ?",
                        "DELETE FROM session WHERE id = ?"):
                db.execute(sql, [sid])
        db.close()

    def roots_hold_every_request():
        assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(
            scalar(layout, "SELECT SUM(cost_usd) FROM usage"))

    delete("ses_G")
    summary = oc(layout, home)
    assert summary.results[0].retained_sessions == 1
    assert query(layout, costs) == first  # G kept, and still in C's and R's cost
    roots_hold_every_request()
    delete("ses_C")
    oc(layout, home)
    assert query(layout, costs) == first and scalar(layout, "SELECT COUNT(*) FROM usage") == 3
    roots_hold_every_request()


def test_a_compaction_summary_is_flagged(layout, tmp_path):
    summary = answer("msg_s", "ses_A", cost=0.01, usage=tokens(input=5, output=5), summary=True)
    closed(one_session(tmp_path / "oc", [summary]))
    oc(layout, tmp_path / "oc")
    assert query(layout, "SELECT is_summary FROM messages") == [(True,)]
    assert scalar(layout, "SELECT summary_message_id FROM sessions") == "msg_s"


# ---------------------------------------------------------------------------------- projects, bad rows

def test_two_projects_from_one_database_land_in_two_project_dirs(layout, tmp_path):
    home = tmp_path / "oc"
    conn = write_fixture(home)  # /home/dev/shop
    usage = tokens(input=1, output=1)
    one_session(home, [answer("msg_i", "ses_I", cost=0.1, usage=usage, steps=[(0.1, usage)])], sid="ses_I",
                directory="/home/dev/infra", conn=conn)
    conn.close()
    assert oc(layout, home).results[0].reconciled
    assert query(layout, "SELECT project, project_path, cost_usd FROM sessions ORDER BY 1") == [
        ("infra", "/home/dev/infra", 0.1), ("shop", "/home/dev/shop", 0.01842)]
    for table in ("sessions", "messages", "parts", "usage"):  # each row in its own session's partition
        assert query(layout, f"SELECT DISTINCT project FROM {table} ORDER BY 1") == [("infra",), ("shop",)], table


def test_a_malformed_row_is_quarantined_and_the_rest_ingests(layout, tmp_path):
    home = tmp_path / "oc"
    conn = write_fixture(home)
    conn.execute("UPDATE part SET data = '{\"type\": \"text\", \"text\": ' WHERE id = 'prt_3a9f1c2d0008'")
    conn.close()
    extra = user_info("msg_z", "ses_3a9f1c2b7ffeAbCdEf", T + 99_000)
    bad = write_json(home, "message", "ses_3a9f1c2b7ffeAbCdEf", extra)
    bad.write_text('{"id": "msg_z", "role": ')  # a truncated legacy file
    write_json(home, "part", "msg_z", part("prt_z", "msg_z", "ses_3a9f1c2b7ffeAbCdEf", "text", text="kept"))
    (result,) = oc(layout, home).results
    assert result.status == "ok" and result.reconciled, result.reconcile
    assert sorted(query(layout, "SELECT key, source_table FROM quarantine")) == [
        ("msg_z", "storage/message/ses_3a9f1c2b7ffeAbCdEf/msg_z.json"), ("prt_3a9f1c2d0008", "part")]
    _, messages, parts = fixture()
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == len(messages)  # + msg_z, quarantined
    assert scalar(layout, "SELECT COUNT(*) FROM parts") == len(parts) - 1 + 1  # - the bad one + prt_z
    assert scalar(layout, "SELECT parts_ok FROM messages WHERE role = 'assistant'") is False
    assert scalar(layout, "SELECT SUM(cost_usd) FROM usage") == 0.01842


@pytest.mark.parametrize("odd", ["folder", "pipe"])
def test_a_folder_or_a_pipe_by_a_records_name_is_quarantined_never_opened(layout, tmp_path, odd):
    """A trial: a legacy session file turned into a folder or a named pipe was skipped without a
    word, its session gone and its messages kept without it. It is quarantined, naming the file,
    and the rest ingests; an opencode.db that is no file fails its data dir as a corrupt one does."""
    import os

    home = tmp_path / "oc"
    closed(write_fixture(home))
    extra = user_info("msg_z", "ses_3a9f1c2b7ffeAbCdEf", T + 99_000)
    bad = write_json(home, "message", "ses_3a9f1c2b7ffeAbCdEf", extra)
    bad.unlink()
    bad.mkdir() if odd == "folder" else os.mkfifo(bad)
    channel = home / "opencode-dev.db"  # a channel database's name on it too
    channel.mkdir() if odd == "folder" else os.mkfifo(channel)
    (result,) = oc(layout, home).results
    assert result.status == "ok", result.error
    why = "is a directory, not a regular file" if odd == "folder" else "is a named pipe, not a regular file"
    assert sorted(query(layout, "SELECT key, source_table FROM quarantine")) == sorted([
        ("msg_z", "storage/message/ses_3a9f1c2b7ffeAbCdEf/msg_z.json"), (str(channel), "opencode-dev.db")])
    assert all(why in error for (error,) in query(layout, "SELECT error FROM quarantine"))
    assert f"{channel} skipped: {channel} {why}" in result.warnings
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == len(fixture()[1])
    db = home / "opencode.db"
    for side in ("opencode.db-wal", "opencode.db-shm"):
        (home / side).unlink(missing_ok=True)
    db.unlink()
    db.mkdir() if odd == "folder" else os.mkfifo(db)
    (result,) = oc(layout, home).results
    assert result.status == "failed" and f"{db} {why}; the data dir is not read without it" in result.error


def test_a_corrupt_channel_database_does_not_sink_the_others(layout, tmp_path):
    home = tmp_path / "oc"
    closed(write_fixture(home))
    (home / "opencode-dev.db").write_bytes(b"not a database at all" * 100)
    (result,) = oc(layout, home).results
    assert result.status == "ok" and result.reconciled
    assert any("opencode-dev.db skipped" in w for w in result.warnings), result.warnings
    assert query(layout, "SELECT source_table FROM quarantine") == [("opencode-dev.db",)]
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == len(fixture()[1])


def test_a_corrupt_opencode_db_fails_its_source_and_the_lake_keeps_its_rows(layout, tmp_path):
    """opencode.db's rows win over every other copy. Read without it, the legacy JSON the
    migration left would stand in for the sessions it holds, shorter than the database's (a
    session continued after the upgrade), and the run would look fine. It fails, naming the file
    (exit 1: a scheduled run flags it), and the lake keeps what it held."""
    home = tmp_path / "oc"
    first = answer("msg_1", "ses_A", cost=0.01, usage=tokens(input=10, output=5))
    conn = one_session(home, [first], to_json=True)  # in both, as after the upgrade
    Writer(home, conn).message(*answer("msg_2", "ses_A", cost=0.02, usage=tokens(input=20, output=5), at=T + 9000),
                               True, False)  # the session went on in the database only
    one_session(home, [answer("msg_3", "ses_B", cost=0.04, usage=tokens(input=1, output=1))], sid="ses_B", conn=conn)
    conn.close()
    summary = oc(layout, home)
    assert summary.exit_code == 0 and summary.results[0].reconciled
    totals = "SELECT COUNT(DISTINCT session_id), COUNT(*), SUM(cost_usd) FROM usage"
    before = query(layout, totals)
    assert before == [(2, 3, pytest.approx(0.07))]
    db = home / "opencode.db"
    assert db.stat().st_size > 8192
    with open(db, "r+b") as fh:
        fh.truncate(8192)
    summary = oc(layout, home)
    (result,) = summary.results
    assert result.status == "failed" and summary.exit_code == 1
    assert str(db) in result.error and "not a readable SQLite database" in result.error
    assert query(layout, totals) == before
    again = oc(layout, home)  # the same bytes are not read again, and still fail the run
    assert again.results[0].status == "failed" and again.exit_code == 1 and str(db) in again.results[0].error


def test_an_unknown_part_type_is_kept_raw(layout, tmp_path):
    info, _ = answer("msg_a", "ses_A", cost=0.01, usage=tokens(input=1, output=1))
    odd = part("prt_a", "msg_a", "ses_A", "hologram", beam={"x": 1})
    closed(one_session(tmp_path / "oc", [(info, [odd])]))
    (result,) = oc(layout, tmp_path / "oc").results
    assert query(layout, "SELECT part_type, native_part_type, is_known_type, raw FROM parts") == [
        ("other", "hologram", False, '{"type":"hologram","beam":{"x":1}}')]
    assert result.unknown_part_types == 1 and any("hologram=1" in w for w in result.warnings)


def test_credential_files_are_never_opened(layout, tmp_path):
    """auth.json sits in the data dir and holds API keys. As a FIFO, opening it would block."""
    home = tmp_path / "oc"
    closed(write_fixture(home, to_db=True, to_json=True))
    for name in ("auth.json", "mcp-auth.json"):
        os.mkfifo(home / name)
    done = threading.Event()
    threading.Thread(target=lambda: (oc(layout, home), done.set()), daemon=True).start()
    assert done.wait(60), "ingestion blocked: it opened a credential file"
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 1


def test_a_new_legacy_file_changes_the_fingerprint(layout, tmp_path):
    home = tmp_path / "oc"
    closed(write_fixture(home, to_db=False, to_json=True))
    assert oc(layout, home).results[0].status == "ok"
    assert oc(layout, home).results[0].status == "unchanged"
    write_json(home, "part", "msg_3a9f1c2c0001", part("prt_3a9f1c2c0099", "msg_3a9f1c2c0001",
                                                      "ses_3a9f1c2b7ffeAbCdEf", "text", text="more"))
    assert oc(layout, home).results[0].status == "ok"
    assert scalar(layout, "SELECT COUNT(*) FROM parts") == len(fixture()[2]) + 1


# ---------------------------------------------------------------------------------- generated home

def test_generated_home_totals(layout, tmp_path):
    truth = generate_home(tmp_path / "oc", sessions=9, seed=3)
    assert truth.legacy_only and truth.both and truth.unknown_requests  # every path is exercised
    (result,) = oc(layout, tmp_path / "oc").results
    assert result.reconciled, result.reconcile
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == truth.sessions
    assert scalar(layout, "SELECT COUNT(*) FROM sessions WHERE is_root") == truth.roots
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == truth.messages
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == truth.usage_rows
    assert scalar(layout, "SELECT COUNT(*) FROM usage WHERE cost_source = 'unknown'") == truth.unknown_requests
    buckets = query(layout, "SELECT SUM(input_uncached_tokens), SUM(cache_read_tokens), SUM(cache_write_5m_tokens), "
                            "SUM(output_tokens), SUM(reasoning_tokens) FROM usage")[0]
    assert buckets == tuple(truth.tokens[f"{k}_tokens"] for k in ("input_uncached", "cache_read", "cache_write_5m", "output",
                                                       "reasoning"))
    assert round(scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root"), 6) == round(truth.cost_usd, 6)
    by_project = dict(query(layout, "SELECT project, ROUND(SUM(cost_usd), 6) FROM sessions WHERE is_root GROUP BY 1"))
    priced = {project: cost for project, cost in by_project.items() if cost is not None}  # not all unknown
    assert priced == {Path(d).name: round(c, 6) for d, c in truth.by_workspace.items()}
    assert Counter(dict(query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1"))) == truth.parts_by_type
    assert Counter(dict(query(layout, "SELECT tool_name, COUNT(*) FROM tool_calls GROUP BY 1"))) == truth.tool_calls_by_name
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE is_error") == truth.tool_errors


def test_configured_project_names_reach_a_store_that_spans_projects(layout, tmp_path):
    """config.toml [projects] names OpenCode's projects too, though they are only known at extract."""
    from transforms.synth.opencode import generate_home
    from transforms.provider import DiscoverOptions
    from warehouse.land.ingest import discover_sources, ingest_all
    from warehouse.catalog.build import refresh

    home = tmp_path / "oc"
    truth = generate_home(home, sessions=4, seed=1, workspaces=("/home/dev/webshop",))
    options = DiscoverOptions(env={}, extra_roots={"opencode": (str(home),)}, use_default=False,
                              project_names={"/home/dev/webshop": "storefront"})
    sources, _ = discover_sources(options)
    ingest_all(sources, layout, workers=1)
    refresh(layout.lake, layout.warehouse, marts=False)
    assert query(layout, "SELECT DISTINCT project FROM sessions") == [("storefront",)]
    assert truth.usage_rows == scalar(layout, "SELECT COUNT(*) FROM usage")
