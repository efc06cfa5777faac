"""Claude Code projects landed in families of sessions (transforms/claude/families.py): a grown
transcript costs its bucket, not its project, and the rules that look across files (a resumed
session's replay counted once, a root's cost over its sub-agents) give what one source gave."""

from datetime import timedelta

import pytest

from tests.conftest import ingest_tables, query, scalar
from tests.test_claude import CWD, SID, T0, older_release, project, response
from transforms import bundle
from transforms.claude.families import families
from transforms.sources import file_fingerprint, source_id_for
from transforms.synth.claude import generate_home, project_slug, usage, user_line, write_jsonl
from warehouse.lake.layout import Layout
from warehouse.land.source_state import SourceStates

TABLES = ("sessions", "messages", "parts", "tool_calls", "usage")
A, B, C = "aaaaaaaa-1111-4222-8333-444455556666", "bbbbbbbb-1111-4222-8333-444455556666", \
    "cccccccc-1111-4222-8333-444455556666"


def _session(home, sid, at, msg):
    lines = [user_line(sid, at, CWD, f"go {sid[:4]}")] + response(sid, at + timedelta(seconds=1), msg, usage(5, 50))
    write_jsonl(project(home) / f"{sid}.jsonl", lines)
    return lines


def _resumed(home, sid, parents: list[list[dict]], at, msg):
    """A session resumed from others: it replays their lines (same uuids and ids), then its own."""
    replay = [dict(line, sessionId=sid) for lines in parents for line in lines]
    own = [user_line(sid, at, CWD, "again")] + response(sid, at + timedelta(seconds=1), msg, usage(8, 80))
    write_jsonl(project(home) / f"{sid}.jsonl", replay + own)


def _rows(layout):
    """Every table as the source gives it (the bucket a row landed by aside)."""
    return {t: query(layout, f"SELECT * EXCLUDE (source_id, machine, user) FROM {t} ORDER BY ALL")
            for t in TABLES}


def test_the_files_that_share_a_session_a_line_or_a_request_are_one_family(tmp_path):
    home = tmp_path / "claude"
    a = _session(home, A, T0, "msg_A")
    _session(home, B, T0 + timedelta(hours=1), "msg_B")
    # a sub-agent by its folder, and one of the older flat layout by its caller's session id
    write_jsonl(project(home) / B / "subagents" / "agent-x1.jsonl",
                response(B, T0, "msg_x1", usage(1, 1), isSidechain=True, agentId="x1"))
    write_jsonl(project(home) / "agent-y2.jsonl", response(B, T0, "msg_y2", usage(1, 1), isSidechain=True,
                                                            agentId="y2"))
    _resumed(home, C, [a], T0 + timedelta(hours=2), "msg_C")
    cache = tmp_path / "cache"
    found = families((str(project(home)),), cache)
    assert sorted((f.family_id, f.rels) for f in found) == [
        (f"{A}.jsonl", (f"{A}.jsonl", f"{C}.jsonl")),
        (f"{B}.jsonl", ("agent-y2.jsonl", f"{B}.jsonl", f"{B}/subagents/agent-x1.jsonl"))]
    assert families((str(project(home)),), cache) == found  # from the index: nothing read again
    # a family's fingerprint is its files' (as a stat now gives it): an upgrade reads nothing again
    assert [f.fingerprint for f in found] == [file_fingerprint(*(str(project(home) / r) for r in f.rels)) for f in found]
    assert found[0].sizes == tuple((project(home) / r).stat().st_size for r in found[0].rels)

    # B resumed by a session that replays A's family too: the two are one, under the older id
    with open(project(home) / "agent-y2.jsonl", "a") as fh:
        fh.write('{"type":"assistant","sessionId":"' + A + '","isSidechain":false,"uuid":"u-late",'
                 '"message":{"id":"msg_late","role":"assistant","content":[]}}\n')
    (one,) = families((str(project(home)),), cache)
    assert one.family_id == f"{A}.jsonl" and one.formerly == (f"{B}.jsonl",)
    assert len(one.rels) == 5


def test_a_project_in_buckets_lands_what_one_source_landed(layout, tmp_path, monkeypatch):
    home = tmp_path / "claude"
    generate_home(home, sessions=12, seed=4, workspaces=(CWD,))
    parent = _session(home, A, T0, "msg_A")
    _resumed(home, C, [parent], T0 + timedelta(hours=3), "msg_C")
    whole = Layout.resolve(home=tmp_path / "whole")
    (one,) = ingest_tables(whole, homes={"claude": [home]}).results  # 14 families: one bucket
    assert one.status == "ok" and one.reconciled
    # a note each family gives is said once, with how many gave it
    assert "non-message lines not stored as messages: file-history-snapshot=1 (the same in 12 sessions)" \
        in one.warnings, one.warnings
    assert len(one.warnings) == len(set(one.warnings))
    monkeypatch.setattr(bundle, "BUCKET_SESSIONS", 2)
    summary = ingest_tables(layout, homes={"claude": [home]})
    assert len(summary.results) > 2 and all(r.status == "ok" and r.reconciled for r in summary.results)
    assert _rows(layout) == _rows(whole)
    assert query(layout, f"SELECT session_id, output_tokens FROM usage WHERE message_id IN ('msg_A', 'msg_C') "
                         "ORDER BY 1") == [(A, 50), (C, 80)]
    # the lake of one bucket, its project now split in more: said as that, no session changed project
    split = ingest_tables(whole, homes={"claude": [home]})
    said = [w for r in split.results for w in r.warnings]
    assert any("were taken out of the bucket that held them (the project's sessions are split in buckets" in w
               for w in said), said
    assert not any("old project's files" in w for w in said)
    assert _rows(whole) == _rows(layout)

    # one grown transcript: its bucket is read and landed, the others are unchanged
    write_jsonl(project(home) / f"{C}.jsonl", response(C, T0 + timedelta(hours=4), "msg_C2", usage(2, 20)))
    again = ingest_tables(layout, homes={"claude": [home]})
    assert sorted(r.status for r in again.results) == ["ok"] + ["unchanged"] * (len(summary.results) - 1)
    cold = Layout.resolve(home=tmp_path / "cold")
    ingest_tables(cold, homes={"claude": [home]})
    assert _rows(layout) == _rows(cold)


def _in_another_bucket(sid: str) -> str:
    """A session id whose family lands in the other bucket of two than `sid`'s."""
    def bucket(s):
        return bundle.bucket_of(source_id_for("claude", f"projects/{project_slug(CWD)}#{s}.jsonl"), 2)

    return next(o for o in (f"{n:08x}-1111-4222-8333-444455556666" for n in range(1, 99)) if bucket(o) != bucket(sid))


def test_two_families_in_two_buckets_joined_by_a_resumed_session_count_once(layout, tmp_path, monkeypatch):
    monkeypatch.setattr(bundle, "BUCKET_SESSIONS", 1)
    home = tmp_path / "claude"
    a = _session(home, A, T0, "msg_A")
    other = _in_another_bucket(A)
    b = _session(home, other, T0 + timedelta(hours=1), "msg_B")
    first = ingest_tables(layout, homes={"claude": [home]})
    assert len(first.results) == 2  # a bucket each
    _resumed(home, C, [a, b], T0 + timedelta(hours=2), "msg_C")  # replays both: one family now
    ingest_tables(layout, homes={"claude": [home]})
    assert query(layout, "SELECT message_id, COUNT(*) FROM usage GROUP BY 1 ORDER BY 1") == [
        ("msg_A", 1), ("msg_B", 1), ("msg_C", 1)]
    assert scalar(layout, "SELECT COUNT(DISTINCT session_id) = COUNT(*) FROM sessions")
    cold = Layout.resolve(home=tmp_path / "cold")
    ingest_tables(cold, homes={"claude": [home]})
    assert _rows(layout) == _rows(cold)


def test_a_lake_of_an_older_release_is_taken_over_each_session_once(layout, tmp_path, monkeypatch):
    """The project's one source of releases before families: each bucket takes its sessions out of
    that source's files; a transcript Claude Code deleted since is read from the cache, once."""
    home = tmp_path / "claude"
    truth = generate_home(home, sessions=10, seed=6, workspaces=(CWD,))
    parent = _session(home, A, T0, "msg_A")
    _resumed(home, C, [parent], T0 + timedelta(hours=3), "msg_C")
    with monkeypatch.context() as before:
        older_release(before)
        (old,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert old.status == "ok"
    want = _rows(layout)
    (project(home) / f"{A}.jsonl").unlink()  # cleanupPeriodDays passed: only the cache holds it
    monkeypatch.setattr(bundle, "BUCKET_SESSIONS", 4)
    summary = ingest_tables(layout, homes={"claude": [home]})
    assert len(summary.results) == 4 and all(r.status == "ok" for r in summary.results)
    took = [w for r in summary.results for w in r.warnings if w.startswith("took over ")]
    assert sum(int(w.split()[2]) for w in took) == truth.sessions + truth.subagents + 2, took
    assert _rows(layout) == want
    assert scalar(layout, "SELECT COUNT(DISTINCT session_id) = COUNT(*) FROM sessions")
    states = SourceStates(layout)
    assert old.source.source_id not in states.ids("claude")  # its folder emptied, and gone
    assert not [p for p in layout.lake.rglob("*.parquet") if old.source.source_id in str(p)]


@pytest.mark.parametrize("gone", ["parent", "child"])
def test_a_deleted_transcript_stays_in_its_family(layout, tmp_path, monkeypatch, gone):
    """Claude Code deletes the older file of a resumed pair first: the replayed lines stay its."""
    monkeypatch.setattr(bundle, "BUCKET_SESSIONS", 1)
    home = tmp_path / "claude"
    parent = _session(home, A, T0, "msg_A")
    _resumed(home, C, [parent], T0 + timedelta(hours=3), "msg_C")
    _session(home, B, T0 + timedelta(hours=1), "msg_B")
    ingest_tables(layout, homes={"claude": [home]})
    want = _rows(layout)
    (project(home) / f"{A if gone == 'parent' else C}.jsonl").unlink()
    summary = ingest_tables(layout, homes={"claude": [home]})
    assert all(r.status in ("ok", "unchanged") for r in summary.results)
    assert _rows(layout) == want
    said = [w for r in summary.results for w in r.warnings]
    assert "1 transcript no longer on disk (Claude Code deletes old ones) kept from the cache" in said, said


def test_an_older_release_run_again_or_a_lost_state_counts_each_session_once(layout, tmp_path, monkeypatch):
    """The project landed as one source again by an older release run on this home (its buckets
    are then not unchanged: they take their sessions out once more), and by one whose state this
    home has lost since (found in the lake by a bucket's first write). Its quarantine goes with it:
    the families quarantine those lines again."""
    import shutil

    home = tmp_path / "claude"
    generate_home(home, sessions=6, seed=7, workspaces=(CWD,))
    with open(project(home) / f"{_session(home, A, T0, 'msg_A') and A}.jsonl", "a") as fh:
        fh.write("{broken\n")
    monkeypatch.setattr(bundle, "BUCKET_SESSIONS", 2)
    ingest_tables(layout, homes={"claude": [home]})
    want = _rows(layout)
    counts = query(layout, "SELECT COUNT(*) FROM quarantine")
    for lose_state in (False, True):
        with monkeypatch.context() as before:
            older_release(before)
            (old,) = ingest_tables(layout, homes={"claude": [home]}).results
        assert old.status == "ok"
        assert scalar(layout, "SELECT COUNT(*) > COUNT(DISTINCT session_id) FROM sessions")  # counted twice
        if lose_state:
            shutil.rmtree(SourceStates(layout).dir)
        summary = ingest_tables(layout, homes={"claude": [home]})
        assert all(r.status == "ok" for r in summary.results), [(r.status, r.error) for r in summary.results]
        assert _rows(layout) == want, lose_state
        assert query(layout, "SELECT COUNT(*) FROM quarantine") == counts
        assert not [p for p in layout.lake.rglob("*.parquet") if old.source.source_id in str(p)]


def test_what_no_family_holds_stays_in_the_older_release_s_source_without_its_quarantine(layout, tmp_path):
    """A transcript deleted while the reader's cache had lost it: only the older release's source
    holds its session, which stays there; the lines that source quarantined are the families' now."""
    import hashlib

    home = tmp_path / "claude"
    _session(home, A, T0, "msg_A")
    _session(home, B, T0 + timedelta(hours=1), "msg_B")
    with open(project(home) / f"{A}.jsonl", "a") as fh:
        fh.write("{not json\n")
    with pytest.MonkeyPatch.context() as before:
        older_release(before)
        ingest_tables(layout, homes={"claude": [home]})
    (project(home) / f"{B}.jsonl").unlink()
    lost = hashlib.sha256(f"{B}.jsonl".encode()).hexdigest()[:24]
    for cached in layout.cache_dir.rglob(f"files/{lost}.pkl"):
        cached.unlink()
    for _ in range(2):
        ingest_tables(layout, homes={"claude": [home]})
        assert query(layout, "SELECT session_id FROM sessions ORDER BY 1") == [(A,), (B,)]
        assert query(layout, "SELECT key FROM quarantine") == [(f"{A}.jsonl:3",)]


def test_lines_appended_after_discovery_wait_for_the_next_run_and_no_request_counts_twice(layout, tmp_path):
    from tests.conftest import discover_only
    from warehouse.catalog.build import refresh
    from warehouse.land.ingest import ingest_all

    home = tmp_path / "claude"
    a = _session(home, A, T0, "msg_A")
    _session(home, C, T0 + timedelta(hours=2), "msg_C")
    sources, problems = discover_only(homes={"claude": [home]}, cache_root=layout.cache_dir)
    # C's session replays A's lines once discovery has linked the files: A and C are two families
    write_jsonl(project(home) / f"{C}.jsonl", [dict(line, sessionId=C) for line in a])
    (ran,) = ingest_all(sources, layout, problems=problems).results
    refresh(layout.lake, layout.warehouse, marts=False)
    assert ran.status == "ok" and ran.reconciled
    # C was read as discovery linked it: A's request is A's alone
    assert query(layout, "SELECT session_id, message_id FROM usage ORDER BY 2") == [(A, "msg_A"), (C, "msg_C")]

    # the next run links C to A (the replay): one family, read from where C's read stopped
    (again,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert again.status == "ok" and again.reconciled
    whole = Layout.resolve(home=tmp_path / "whole")
    ingest_tables(whole, homes={"claude": [home]})
    assert _rows(layout) == _rows(whole)
    assert scalar(layout, "SELECT COUNT(*) FROM usage WHERE message_id = 'msg_A'") == 1


def _per_session(layout):
    return {sid: (created, n, cost) for sid, created, n, cost in query(
        layout, "SELECT session_id, created_at, message_count, cost_usd FROM sessions WHERE is_root")}


def test_a_session_that_goes_on_after_it_was_resumed_keeps_its_lines(layout, tmp_path):
    """The original session still open in another terminal after a resume: its last line passes
    the copy's, and the copy took its lines, its cost and its start (a user's trial). The file
    found first keeps them."""
    home = tmp_path / "claude"
    a = _session(home, A, T0, "msg_A")
    _resumed(home, C, [a], T0 + timedelta(hours=1), "msg_C")
    ingest_tables(layout, homes={"claude": [home]})
    before = _per_session(layout)
    assert before[A][1] == 2 and before[C][1] == 2
    write_jsonl(project(home) / f"{A}.jsonl", [user_line(A, T0 + timedelta(hours=2), CWD, "more")]
                + response(A, T0 + timedelta(hours=2, seconds=1), "msg_A2", usage(1, 10)))
    ingest_tables(layout, homes={"claude": [home]})
    after = _per_session(layout)
    assert after[C] == before[C]
    assert after[A][0] == before[A][0] and after[A][1] == 4 and after[A][2] > before[A][2]
    assert scalar(layout, "SELECT COUNT(*) FROM usage WHERE message_id = 'msg_A'") == 1


def test_a_transcript_found_later_that_replays_two_sessions_leaves_each_its_own(layout, tmp_path):
    """A new session replaying two older ones, then its own turn: the second of them lost every
    line to it and was left undated (a user's trial)."""
    home = tmp_path / "claude"
    a = _session(home, A, T0, "msg_A")
    b = _session(home, B, T0 + timedelta(hours=1), "msg_B")
    ingest_tables(layout, homes={"claude": [home]})
    before = _per_session(layout)
    _resumed(home, C, [a, b], T0 + timedelta(hours=3), "msg_C")
    (ran,) = ingest_tables(layout, homes={"claude": [home]}).results
    assert ran.status == "ok" and ran.reconciled and not any("timestamp" in w for w in ran.warnings), ran.warnings
    after = _per_session(layout)
    assert after[A] == before[A] and after[B] == before[B]
    assert after[C][1] == 2 and after[C][0] > after[B][0]
    assert query(layout, "SELECT message_id, session_id FROM usage ORDER BY 1") == [
        ("msg_A", A), ("msg_B", B), ("msg_C", C)]


def test_a_read_up_to_a_limit_never_returns_what_a_cache_read_past_it(tmp_path):
    """Another run read further since this one's discovery: the lines past this one's limit are
    not this read's, whatever the cache holds."""
    from transforms.claude.reader import read_jsonl

    path = tmp_path / "t.jsonl"
    lines = [user_line(A, T0 + timedelta(seconds=i), CWD, f"line {i}") for i in range(3)]
    write_jsonl(path, lines[:2])
    limit = path.stat().st_size
    write_jsonl(path, lines[2:])
    assert len(read_jsonl(path, "t.jsonl", tmp_path / "cache").records) == 3  # the other run's read
    read = read_jsonl(path, "t.jsonl", tmp_path / "cache", limit=limit)
    assert [rec["message"]["content"] for _, rec in read.records] == ["line 0", "line 1"]
    assert len(read_jsonl(path, "t.jsonl", tmp_path / "cache").records) == 3  # the next read goes on
