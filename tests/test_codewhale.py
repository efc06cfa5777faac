"""CodeWhale: real session files in tmp homes, through the lake, read back by DuckDB."""

import json
from collections import Counter
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest
from genai_prices import Usage, calc_price

from tests.conftest import T0, ingest_tables, query, scalar
from transforms.codewhale.discover import discover
from transforms.synth.codewhale import (
    cost_snapshot, generate_home, session_doc, text_block, tool_result_block, tool_use_block, write_session,
)
from transforms.synth.crush import add_message, add_session
from transforms.synth.crush_parts import text_part

WHEN = datetime(2026, 7, 14, 10, 0, tzinfo=timezone.utc)
SID = "0f8b9c1e-2d3a-4b5c-8d9e-0a1b2c3d4e5f"


def _messages():
    return [
        {"role": "user", "content": [text_block("Fix the failing login test")]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "Run the test first."},
                                          tool_use_block("call_00_aB3", "exec_shell", {"command": "npm test -- login"})]},
        {"role": "user", "content": [tool_result_block("call_00_aB3", "FAIL src/login.test.ts", is_error=True)]},
        {"role": "assistant", "content": [text_block("The handler returns 401; fixing.")]},
    ]


def _doc(sid=SID, cost=None, **kw):
    kw.setdefault("workspace", "/home/dev/shop")
    kw.setdefault("total_tokens", 48213)
    return session_doc(sid, title="Fix the failing login test", created_at=WHEN, messages=_messages(),
                       cost=cost, **kw)


def test_the_documented_example_gives_exact_totals(layout, tmp_path):
    home = tmp_path / "cw"
    write_session(home / "sessions", _doc(cost=cost_snapshot(0.0123, 0.0021)))
    summary = ingest_tables(layout, codewhale_homes=[home])
    assert [r.status for r in summary.results] == ["ok"] and summary.results[0].reconciled
    assert query(layout, "SELECT provider, project, cost_usd, cost_source, total_tokens, model, llm_provider "
                         "FROM sessions") == [("codewhale", "shop", pytest.approx(0.0144), "native", 48213,
                                               "deepseek-v4-flash", "deepseek")]
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == 4
    assert Counter(dict(query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1"))) == Counter(
        text=2, reasoning=1, tool_call=1, tool_result=1)
    assert query(layout, "SELECT tool_name, tool_category, command, is_error, result_text FROM tool_calls") == [
        ("exec_shell", "shell", "npm test -- login", True, "FAIL src/login.test.ts")]
    cols = {r[0] for r in query(layout, "SELECT column_name FROM (DESCRIBE sessions)")}
    assert not {"input_tokens", "output_tokens"} & cols  # one undivided total, never split


def test_generated_home_totals(layout, tmp_path):
    truth = generate_home(tmp_path / "cw", sessions=9, seed=3)
    ingest_tables(layout, codewhale_homes=[tmp_path / "cw"])
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == truth.sessions
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == truth.messages
    assert round(scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root"), 6) == round(truth.cost_usd, 6)
    assert Counter(dict(query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1"))) == truth.parts_by_type
    assert Counter(dict(query(layout, "SELECT tool_name, COUNT(*) FROM tool_calls GROUP BY 1"))) == truth.tool_calls_by_name
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE is_error") == truth.tool_errors
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE NOT has_result") == 0


def test_side_files_are_skipped(tmp_path):
    generate_home(tmp_path / "cw", sessions=2)
    sessions = tmp_path / "cw" / "sessions"
    (sessions / SID).mkdir()  # a per-session folder (artifacts)
    (sessions / SID / "approvals.json").write_text("{}")
    found = discover(env={"CODEWHALE_HOME": str(tmp_path / "cw")})
    assert len(found.sources) == 2
    assert not {"latest", "offline_queue", "session_boot_owners", "approvals"} & {
        s.identity for s in found.sources}


def test_a_session_name_on_a_pipe_is_said_never_opened(tmp_path):
    """A named pipe by a session file's name was left out without a word (docs/SOURCES.md: it is
    named): a problem names it, in the home and in a named store folder; the sessions are found."""
    import os

    generate_home(tmp_path / "cw", sessions=2)
    pipe = tmp_path / "cw" / "sessions" / "00000000-0000-4000-8000-0000000000ff.json"
    os.mkfifo(pipe)
    said = f"CodeWhale session file {pipe} is a named pipe, not a regular file: not read"
    for found in (discover(env={"CODEWHALE_HOME": str(tmp_path / "cw")}),
                  discover(env={}, use_default=False, extra_stores=[str(pipe.parent)])):
        assert found.problems == [said] and len(found.sources) == 2


def test_duplicate_id_across_homes_current_copy_wins(layout, tmp_path):
    home = tmp_path / "user"
    write_session(home / ".deepseek" / "sessions", _doc(cost=cost_snapshot(0.5)))
    write_session(home / ".codewhale" / "sessions", _doc(cost=cost_snapshot(0.7)))
    found = discover(env={"HOME": str(home)})
    assert [s.path for s in found.sources] == [str(home / ".codewhale" / "sessions" / f"{SID}.json")]
    # ingest through the default homes, as a user with both would
    from transforms.provider import DiscoverOptions
    from warehouse.land.ingest import discover_sources, ingest_all
    from warehouse.catalog.build import refresh

    sources, _ = discover_sources(DiscoverOptions(env={"HOME": str(home), "CRUSH_GLOBAL_DATA": str(tmp_path / "none")}))
    ingest_all(sources, layout)
    refresh(layout.lake, layout.warehouse, marts=False)
    assert query(layout, "SELECT session_id, cost_usd FROM sessions") == [(SID, pytest.approx(0.7))]


def test_explicit_home_is_exact_and_a_relative_one_is_refused(tmp_path):
    write_session(tmp_path / "user" / ".deepseek" / "sessions", _doc(cost=cost_snapshot(0.5)))
    env = {"HOME": str(tmp_path / "user"), "CODEWHALE_HOME": str(tmp_path / "explicit")}
    assert discover(env=env).sources == []  # no legacy fallback behind an explicit home
    found = discover(env={"HOME": str(tmp_path / "user"), "CODEWHALE_HOME": "relative/home"})
    assert found.sources == [] and "relative" in found.problems[0]


def test_a_stored_zero_is_a_real_zero(layout, tmp_path):
    write_session(tmp_path / "cw" / "sessions", _doc(cost=cost_snapshot(0.0, 0.0)))
    ingest_tables(layout, codewhale_homes=[tmp_path / "cw"])
    assert query(layout, "SELECT cost_usd, cost_source FROM sessions") == [(0.0, "native")]


def test_missing_cost_snapshot_is_estimated_from_total_tokens(layout, tmp_path):
    write_session(tmp_path / "cw" / "sessions", _doc(cost=None))
    summary = ingest_tables(layout, codewhale_homes=[tmp_path / "cw"])
    updated = WHEN + timedelta(minutes=5)
    rate = calc_price(Usage(input_tokens=100_000), "deepseek-v4-flash", provider_id="deepseek",
                      genai_request_timestamp=updated.replace(minute=0)).total_price / 100_000
    want = float(round(Decimal(rate) * 48213, 9))
    assert query(layout, "SELECT cost_usd, cost_source, total_tokens FROM sessions") == [
        (pytest.approx(want, rel=1e-9), "estimated", 48213)]
    assert any("no cost snapshot: estimated" in w for w in summary.results[0].warnings)


def test_unpriced_model_is_unknown_never_zero(layout, tmp_path):
    write_session(tmp_path / "cw" / "sessions", _doc(cost=None, model="glm-4.6", model_provider="custom"))
    ingest_tables(layout, codewhale_homes=[tmp_path / "cw"])
    assert query(layout, "SELECT cost_usd, cost_source FROM sessions") == [(None, "unknown")]


def test_fork_does_not_double_count_its_parent(layout, tmp_path):
    sessions = tmp_path / "cw" / "sessions"
    parent, fork = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
    write_session(sessions, _doc(parent, cost=cost_snapshot(0.40, 0.10), total_tokens=30000))
    # the fork copied the parent's totals (0.50, 30000) and then spent 0.25 and 12000 more
    write_session(sessions, _doc(fork, cost=cost_snapshot(0.65, 0.10), total_tokens=42000, parent=parent,
                                 forked_from_message_count=4))
    ingest_tables(layout, codewhale_homes=[tmp_path / "cw"])
    rows = query(layout, "SELECT session_id, cost_usd, inherited_cost_usd, total_tokens, forked_from_session_id "
                         "FROM sessions ORDER BY 1")
    assert rows == [(parent, pytest.approx(0.50), None, 30000, None),
                    (fork, pytest.approx(0.25), pytest.approx(0.50), 12000, parent)]
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(0.75)
    snapshot = json.loads(scalar(layout, "SELECT extra_columns FROM sessions WHERE session_id = ?", fork))
    assert snapshot["total_tokens_snapshot"] == 42000  # the file's own figures are kept


def test_fork_without_its_parent_is_kept_whole_and_flagged(layout, tmp_path):
    write_session(tmp_path / "cw" / "sessions", _doc(cost=cost_snapshot(0.3), parent="gone-parent"))
    summary = ingest_tables(layout, codewhale_homes=[tmp_path / "cw"])
    assert query(layout, "SELECT cost_usd, inherited_cost_usd FROM sessions") == [(pytest.approx(0.3), None)]
    assert any("parent's file was not found" in w for w in summary.results[0].warnings)


def test_malformed_file_is_quarantined_and_the_rest_ingested(layout, tmp_path):
    sessions = tmp_path / "cw" / "sessions"
    write_session(sessions, _doc(cost=cost_snapshot(0.2)))
    (sessions / "99999999-9999-4999-8999-999999999999.json").write_text('{"metadata": {"id": "9999", "title": "cut')
    (sessions / "88888888-8888-4888-8888-888888888888.json").write_text('[1, 2, 3]')
    summary = ingest_tables(layout, codewhale_homes=[tmp_path / "cw"])
    assert {r.status for r in summary.results} == {"ok"}
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 1
    bad = query(layout, "SELECT key, error, raw FROM quarantine ORDER BY key")
    assert [b[0].rsplit("/", 1)[1] for b in bad] == ["88888888-8888-4888-8888-888888888888.json",
                                                      "99999999-9999-4999-8999-999999999999.json"]
    assert "not a CodeWhale session file" in bad[0][1] and "not valid JSON" in bad[1][1]
    assert bad[1][2] == '{"metadata": {"id": "9999", "title": "cut'


def test_a_resaved_session_is_upserted_and_a_pruned_one_keeps_its_history(layout, tmp_path):
    sessions = tmp_path / "cw" / "sessions"
    other = "33333333-3333-4333-8333-333333333333"
    write_session(sessions, _doc(cost=cost_snapshot(0.1)))
    path = write_session(sessions, _doc(other, cost=cost_snapshot(0.2)))
    ingest_tables(layout, codewhale_homes=[tmp_path / "cw"])
    write_session(sessions, _doc(cost=cost_snapshot(0.15)))  # CodeWhale saves the whole session again
    path.unlink()  # and prunes another
    ingest_tables(layout, codewhale_homes=[tmp_path / "cw"])
    assert sorted(query(layout, "SELECT session_id, cost_usd FROM sessions")) == [
        (SID, pytest.approx(0.15)), (other, pytest.approx(0.2))]


def test_journal_gives_message_times(layout, tmp_path):
    write_session(tmp_path / "cw" / "sessions", _doc(cost=cost_snapshot(0.1), journal=True))
    ingest_tables(layout, codewhale_homes=[tmp_path / "cw"])
    times = [r[0] for r in query(layout, "SELECT created_at FROM messages ORDER BY message_index")]
    assert [(t - times[0]).total_seconds() for t in times] == [0, 30, 60, 90]


def test_crush_and_codewhale_side_by_side_for_one_project(layout, project, tmp_path):
    p = project("shop")
    add_session(p.conn, "crush-root", title="t", created_at=T0, cost=1.25)
    add_message(p.conn, "m", "crush-root", "user", [text_part("hi")], created_at=T0)
    p.close()
    write_session(tmp_path / "cw" / "sessions", _doc(cost=cost_snapshot(0.5), workspace=str(p.path)))
    ingest_tables(layout, p.db, codewhale_homes=[tmp_path / "cw"])
    assert query(layout, "SELECT project, provider, SUM(cost_usd), COUNT(*) FROM sessions WHERE is_root "
                         "GROUP BY ALL ORDER BY provider") == [
        ("shop", "codewhale", pytest.approx(0.5), 1), ("shop", "crush", pytest.approx(1.25), 1)]
    assert query(layout, "SELECT provider, COUNT(*) FROM messages GROUP BY 1 ORDER BY 1") == [
        ("codewhale", 4), ("crush", 1)]


def test_snapshots_that_know_nothing_are_not_a_real_zero(layout, tmp_path):
    sessions = tmp_path / "cw" / "sessions"
    legacy = {**cost_snapshot(0.0), "coverage_recorded": False}
    unpriced = {**cost_snapshot(0.0), "priced_turns": 0, "unpriced_turns": 3}
    write_session(sessions, _doc("aaaaaaaa-0000-4000-8000-000000000001", cost=legacy))
    write_session(sessions, _doc("aaaaaaaa-0000-4000-8000-000000000002", cost=unpriced, model="glm-4.6",
                                 model_provider="custom"))
    ingest_tables(layout, codewhale_homes=[tmp_path / "cw"])
    assert dict(query(layout, "SELECT session_id[-1:], cost_source FROM sessions")) == {
        "1": "estimated", "2": "unknown"}


def test_a_renamed_copy_is_not_a_second_session(layout, tmp_path):
    sessions = tmp_path / "cw" / "sessions"
    path = write_session(sessions, _doc(cost=cost_snapshot(0.05)))
    (sessions / f"{SID}.bak.json").write_bytes(path.read_bytes())
    summary = ingest_tables(layout, codewhale_homes=[tmp_path / "cw"])
    assert query(layout, "SELECT COUNT(*), SUM(cost_usd) FROM sessions") == [(1, pytest.approx(0.05))]
    assert any("is a copy of session" in w for r in summary.results for w in r.warnings)


def test_odd_metadata_values_quarantine_the_file_or_are_tolerated(layout, tmp_path):
    sessions = tmp_path / "cw" / "sessions"
    odd = _doc("bbbbbbbb-0000-4000-8000-000000000001", cost={**cost_snapshot(0.1), "subagent_cost_usd": "n/a"},
               journal=True)
    odd["journal"]["leaf_id"] = ["not", "an", "id"]
    del odd["metadata"]["created_at"]
    write_session(sessions, odd)
    summary = ingest_tables(layout, codewhale_homes=[tmp_path / "cw"])
    assert summary.results[0].status == "ok"
    (row,) = query(layout, "SELECT cost_usd, cost_source, created_at IS NOT NULL FROM sessions")
    # the garbled sub-agent amount is not a native $0: the session's own spend is a partial cost,
    # and the garbled value is reported; created falls back
    assert row == (pytest.approx(0.1), "partial", True)
    assert any("1 stored costs that are not a number (subagent_cost_usd)" in w for w in summary.results[0].warnings)


def test_compacted_session_keeps_its_message_times(layout, tmp_path):
    doc = _doc(cost=cost_snapshot(0.1), journal=True)
    doc["messages"].append({"role": "system", "content": [text_block("summary of the above")]})
    entries = doc["journal"]["entries"]
    entries.append({"id": "compact", "parent_id": entries[-1]["id"], "kind": "compaction",
                    "summary": "summary of the above", "created_at": "2026-07-20T10:00:00Z"})
    doc["journal"]["leaf_id"] = doc["leaf_id"] = "compact"
    write_session(tmp_path / "cw" / "sessions", doc)
    ingest_tables(layout, codewhale_homes=[tmp_path / "cw"])
    days = [r[0] for r in query(layout, "SELECT created_at::DATE::VARCHAR FROM messages ORDER BY message_index")]
    assert days == ["2026-07-14"] * 4 + ["2026-07-20"]


def test_a_fork_finds_its_parent_under_the_legacy_home(layout, tmp_path):
    home = tmp_path / "user"
    parent, fork = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
    write_session(home / ".deepseek" / "sessions", _doc(parent, cost=cost_snapshot(0.5)))
    write_session(home / ".codewhale" / "sessions", _doc(fork, cost=cost_snapshot(0.75), parent=parent,
                                                         forked_from_message_count=4))
    from transforms.provider import DiscoverOptions
    from warehouse.land.ingest import discover_sources, ingest_all
    from warehouse.catalog.build import refresh

    sources, _ = discover_sources(DiscoverOptions(env={"HOME": str(home), "CRUSH_GLOBAL_DATA": str(tmp_path / "x")}))
    ingest_all(sources, layout, workers=1)
    refresh(layout.lake, layout.warehouse, marts=False)
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(0.75)


def test_a_model_served_by_an_unknown_provider_is_not_priced_as_an_api():
    from transforms.pricing import price_total_tokens

    assert price_total_tokens(1_000_000, "deepseek-r1", "ollama", WHEN).cost_source == "unknown"
    assert price_total_tokens(1_000_000, "deepseek-chat", None, WHEN).cost_source == "estimated"
