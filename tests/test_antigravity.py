"""Antigravity (closed source): real Antigravity CLI conversation databases (SQLite, WAL, protobuf
rows in the layout tokscale's reader documents) in tmp homes, through the lake, read back by
DuckDB; the IDE's .pb files are reported as not readable and never opened."""

import io
import os
import re
from datetime import datetime, timedelta, timezone

import pytest

from tests.conftest import ingest_tables, query, scalar
from transforms.antigravity.discover import discover
from transforms.antigravity.normalise import fields
from transforms.synth.antigravity import generate_home, generation, trajectory, write_conversation
from transforms.pricing import Buckets, price_buckets

CONV = "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
T = datetime(2026, 3, 2, 8, 15, tzinfo=timezone.utc)


def conversations(home):
    return home / ".gemini" / "antigravity-cli" / "conversations"


def test_fixture_exact_totals(layout, tmp_path):
    """Three generations, one written twice (same response id), one on the routing id
    `gemini-default` whose display label names gemini-2.5-pro elsewhere in the file.
    Tokens: input = system prompt 1132 + new input; output = text + thinking:
      r1: 1132 + 500 = 1632 in, 0 read, 200 + 50 = 250 out
      r2: 1132 + 40 = 1172 in, 9000 read, 30 + 0 = 30 out
      r3 (routing id): 1132 + 10 = 1142 in, 9500 read, 20 + 5 = 25 out; r2 again: skipped."""
    gens = [generation(new=500, text=200, thinking=50, response_id="r1", model="gemini-2.5-pro",
                       label="Gemini 2.5 Pro", at=T + timedelta(seconds=10)),
            generation(new=40, cache_read=9000, text=30, response_id="r2", model="gemini-2.5-pro",
                       label="Gemini 2.5 Pro", at=T + timedelta(seconds=20)),
            generation(new=40, cache_read=9000, text=30, response_id="r2", model="gemini-2.5-pro",
                       label="Gemini 2.5 Pro", at=T + timedelta(seconds=20)),
            generation(new=10, cache_read=9500, text=20, thinking=5, response_id="r3", model="gemini-default",
                       label="Gemini 2.5 Pro", at=T + timedelta(seconds=30))]
    write_conversation(conversations(tmp_path) / f"{CONV}.db", gens, trajectory(T, "/home/dev/shop"))
    summary = ingest_tables(layout, homes={"antigravity": [conversations(tmp_path)]})
    assert [(r.status, r.reconciled) for r in summary.results] == [("ok", True)]
    rows = query(layout, "SELECT request_id, model, input_uncached_tokens, cache_read_tokens, "
                         "cache_write_5m_tokens, output_tokens, reasoning_tokens, cost_usd, cost_source "
                         "FROM usage ORDER BY requested_at")
    expected = [("r1", 1632, 0, 250, 50), ("r2", 1172, 9000, 30, 0), ("r3", 1142, 9500, 25, 5)]
    assert [r[:7] for r in rows] == [(rid, "gemini-2.5-pro", i, c, None, o, reasoning)
                                     for rid, i, c, o, reasoning in expected]
    for row, (rid, i, c, o, reasoning), s in zip(rows, expected, (10, 20, 30)):
        priced = price_buckets(Buckets(i, c, None, None, o, reasoning), "gemini-2.5-pro", "google",
                               T + timedelta(seconds=s))
        assert row[7:] == (pytest.approx(priced.cost_usd), "estimated")
    assert query(layout, "SELECT session_id, project_path, created_at, total_tokens, cost_source FROM sessions") == [
        (CONV, "/home/dev/shop", datetime(2026, 3, 2, 8, 15), (1632 + 250) + (1172 + 9000 + 30) + (1142 + 9500 + 25),
         "estimated")]


def test_an_antigravity_only_model_is_unknown_never_zero(layout, tmp_path):
    write_conversation(conversations(tmp_path) / f"{CONV}.db",
                       [generation(new=100, text=10, response_id="r1", model="gemini-3-flash-a", at=T)],
                       trajectory(T, "/home/dev/shop"))
    ingest_tables(layout, homes={"antigravity": [conversations(tmp_path)]})
    assert query(layout, "SELECT model, cost_usd, cost_source FROM usage") == [("gemini-3-flash-a", None, "unknown")]
    assert query(layout, "SELECT cost_usd, cost_source FROM sessions") == [(None, "unknown")]


def test_a_generation_without_its_own_time_is_dated_at_the_start(layout, tmp_path):
    write_conversation(conversations(tmp_path) / f"{CONV}.db",
                       [generation(new=100, text=10, response_id="r1", model="gemini-2.5-pro")],
                       trajectory(T, "/home/dev/shop"))
    summary = ingest_tables(layout, homes={"antigravity": [conversations(tmp_path)]})
    assert query(layout, "SELECT requested_at FROM usage") == [(datetime(2026, 3, 2, 8, 15),)]
    assert any("dated at the conversation's start" in w for w in summary.results[0].warnings)


def test_a_row_that_is_not_protobuf_is_quarantined(layout, tmp_path):
    bad = b"\x0f\xff\xff"
    assert pytest.raises(ValueError, fields, bad)
    write_conversation(conversations(tmp_path) / f"{CONV}.db",
                       [bad, generation(new=100, text=10, response_id="r1", model="gemini-2.5-pro", at=T)],
                       trajectory(T, "/home/dev/shop"))
    summary = ingest_tables(layout, homes={"antigravity": [conversations(tmp_path)]})
    assert summary.results[0].status == "ok"
    assert query(layout, "SELECT source_rowid, raw FROM quarantine") == [(0, bad.hex())]
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == 1


def test_discovery_reads_the_cli_and_reports_the_ide_as_unreadable(tmp_path):
    home = tmp_path / "user"
    write_conversation(conversations(home) / f"{CONV}.db", [], None)
    ide = home / ".gemini" / "antigravity" / "conversations"
    ide.mkdir(parents=True)
    os.mkfifo(ide / "abc.pb")  # discovery must not open it
    found = discover(env={"HOME": str(home)})
    assert [s.identity for s in found.sources] == [CONV]
    assert len(found.problems) == 1 and "not readable" in found.problems[0]
    assert [s.identity for s in discover(env={"USERPROFILE": str(home)}).sources] == [CONV]
    assert discover(env={}, extra_roots=[str(tmp_path / "none")], use_default=False).problems


def test_a_database_that_is_not_antigravitys_fails_alone_with_a_clear_message(layout, tmp_path):
    import sqlite3

    path = conversations(tmp_path) / "other.db"
    path.parent.mkdir(parents=True)
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.close()
    write_conversation(conversations(tmp_path) / f"{CONV}.db",
                       [generation(new=1, text=1, response_id="r1", model="gemini-2.5-pro", at=T)], None)
    summary = ingest_tables(layout, homes={"antigravity": [conversations(tmp_path)]})
    by_status = {r.status: r for r in summary.results}
    assert set(by_status) == {"ok", "failed"}
    assert "no gen_metadata table" in by_status["failed"].error


def test_generated_home_totals(layout, tmp_path):
    truth = generate_home(conversations(tmp_path / "user").parent, sessions=6, seed=2)
    summary = ingest_tables(layout, homes={"antigravity": [conversations(tmp_path / "user")]})
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == truth.sessions
    assert query(layout, "SELECT COUNT(*), COUNT(*) FILTER (WHERE cost_usd IS NULL), SUM(input_uncached_tokens), "
                         "SUM(cache_read_tokens), SUM(output_tokens), SUM(reasoning_tokens) FROM usage") == [
        (truth.usage_rows, truth.unpriced_rows, truth.input_tokens, truth.cache_read, truth.output_tokens,
         truth.reasoning)]
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions") == pytest.approx(truth.cost_usd)
    assert dict(query(layout, "SELECT project_path, COALESCE(SUM(cost_usd), 0) FROM sessions GROUP BY 1")) == \
        pytest.approx(truth.by_workspace)
    assert scalar(layout, "SELECT COUNT(DISTINCT project) FROM sessions") == 2


def test_the_store_is_never_written(tmp_path):
    """Read through the backup API, `mode=ro`; SQLite itself may leave an empty `-wal`/`-shm`
    beside a WAL database it opened (as for Crush and OpenCode), never a byte of data."""
    import hashlib

    from warehouse.lake.layout import Layout

    generate_home(conversations(tmp_path / "user").parent, sessions=2, seed=1)
    folder = conversations(tmp_path / "user")
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob("*.db")}
    ingest_tables(Layout.resolve(home=tmp_path / "lake", machine="m", user="u"), homes={"antigravity": [folder]})
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob("*.db")} == before
    assert all(p.stat().st_size == 0 for p in folder.glob("*.db-wal"))


def test_discovery_reads_a_quiet_database_without_making_files_beside_it(tmp_path):
    """Discovery reads each conversation's workspace every run: a WAL database its agent is not
    writing (no `-wal` or `-shm` beside it) is read `immutable`, so SQLite makes no `-shm` and
    `-wal` in the agent's folder; one the agent is writing is read through its WAL."""
    import sqlite3
    from contextlib import closing

    folder = conversations(tmp_path / "user")
    generate_home(folder.parent, sessions=2, seed=1)
    for db in folder.glob("*.db"):
        with closing(sqlite3.connect(db)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")  # as the agent keeps it; closed cleanly: no -wal, no -shm
    before = sorted(p.name for p in folder.iterdir())
    found = discover(env={}, extra_roots=[str(folder)], use_default=False).sources
    assert sorted(p.name for p in folder.iterdir()) == before
    assert sorted(s.project for s in found) == ["infra-tools", "webshop"]
    # the agent writing one: read through its WAL (its own files, already there)
    busy = sorted(folder.glob("*.db"))[0]
    with closing(sqlite3.connect(busy)) as writer:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("BEGIN IMMEDIATE")
        assert {s.project for s in discover(env={}, extra_roots=[str(folder)], use_default=False).sources} == \
            {"infra-tools", "webshop"}
        writer.execute("ROLLBACK")


def test_a_conversation_is_a_source_of_the_project_its_rows_land_in(layout, tmp_path):
    """The demo's ingest printed `[48/65] ok antigravity unknown 0 messages, 0 parts` and the
    `sources` table named each conversation `antigravity-unknown-...`, while its rows landed in
    its workspace's project: the source's project was never read (it is inside the database).
    Discovery reads the workspace now, as other agents' discovery reads a session's cwd. Not an
    empty source: one conversation, its session and requests (Antigravity records no messages)."""
    from pipelines.runner import PrintingReporter

    home = conversations(tmp_path / "user")
    truth = generate_home(home.parent, sessions=4, seed=3)
    summary = ingest_tables(layout, homes={"antigravity": [home]})
    assert [r.status for r in summary.results] == ["ok"] * 4
    landed = dict(query(layout, "SELECT source_id, project FROM sessions"))
    assert sorted(landed.values()) == ["infra-tools", "infra-tools", "webshop", "webshop"]
    for r in summary.results:
        assert r.source.project == landed[r.source.source_id]
        assert r.source.partition_key == f"antigravity-{landed[r.source.source_id]}-{r.source.source_id[:8]}"
        assert r.source.project_path == f"/home/dev/{landed[r.source.source_id]}"
    assert query(layout, "SELECT source_id, project, partition_key, project_path, sessions, messages FROM sources "
                         "ORDER BY source_id") == sorted(
        (r.source.source_id, r.source.project, r.source.partition_key, r.source.project_path, 1, 0)
        for r in summary.results)
    # the progress line names the project
    out = io.StringIO()
    reporter = PrintingReporter(stream=out)
    reporter.total = len(summary.results)
    for n, r in enumerate(summary.results):
        reporter.source_done(n, reporter.total, r)
    said = [re.match(r"\[\d/4\] ok +antigravity +(\S+) +(.*) \(", line).groups() for line in out.getvalue().splitlines()]
    assert sorted(project for project, _ in said) == sorted(landed.values())
    # no messages to count (Antigravity keeps only its requests): its session and requests, not "0 messages"
    assert sorted(what for _, what in said) == sorted(
        f"1 session, {r.rows['usage']} request{'s' if r.rows['usage'] != 1 else ''}" for r in summary.results)
    # every request landed, counted
    assert sum(r.rows["usage"] for r in summary.results) == truth.usage_rows == scalar(
        layout, "SELECT COUNT(*) FROM usage")
    assert sum(r.rows["sessions"] for r in summary.results) == truth.sessions == 4
    # a configured project name applies as it does to the rows; a database naming no workspace is `unknown`
    named = discover(env={}, extra_roots=[str(home)], use_default=False,
                     project_names={"/home/dev/webshop": "Shop Front"})
    assert sorted(s.project for s in named.sources) == ["infra-tools", "infra-tools", "shop-front", "shop-front"]
    write_conversation(home / f"{CONV}.db", [generation(new=1, text=1, response_id="r1", model="gemini-2.5-pro",
                                                        at=T)], None)
    assert {s.identity: s.project for s in discover(env={}, extra_roots=[str(home)], use_default=False).sources
            }[CONV] == "unknown"
