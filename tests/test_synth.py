"""Tests for the synthetic Crush store generator (transforms/synth/crush.py).

The schema comparison reads Crush's reference DDL from tests/fixtures/crush-schema (copied into
the repository, see its README); nothing outside the repository is read.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import sqlite3
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

from transforms.synth.crush import (
    MIGRATIONS, STAGES, add_file, add_message, add_read_file, add_session, bash_output, binary_part,
    create_crush_db, encode_parts, finish_part, generate_store, image_url_part, reasoning_part,
    shell_command_part, text_part, tool_call_part, tool_result_part, write_registry,
)

REF = Path(__file__).resolve().parent / "fixtures" / "crush-schema"
ALL_STAGES = sorted(STAGES)

# expected PRAGMA table_info column order per stage (docs/FORMATS.md, "Crush: schema and migrations")
SESSIONS = ["id", "parent_session_id", "title", "message_count", "prompt_tokens", "completion_tokens", "cost",
            "updated_at", "created_at", "summary_message_id"]
MESSAGES = ["id", "session_id", "role", "parts", "model", "created_at", "updated_at", "finished_at", "provider"]
FILES = ["id", "session_id", "path", "content", "version", "created_at", "updated_at"]
EXPECTED_COLUMNS = {
    4: {"sessions": SESSIONS, "messages": MESSAGES, "files": FILES, "read_files": []},
    5: {"sessions": SESSIONS, "messages": MESSAGES + ["is_summary_message"], "files": FILES, "read_files": []},
    6: {"sessions": SESSIONS + ["todos"], "messages": MESSAGES + ["is_summary_message"], "files": FILES,
        "read_files": []},
    7: {"sessions": SESSIONS + ["todos"], "messages": MESSAGES + ["is_summary_message"], "files": FILES,
        "read_files": ["session_id", "path", "read_at"]},
}


def columns(conn, table):
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


# ---------------------------------------------------------------------------
# schema
# ---------------------------------------------------------------------------


def reference_file(stage: int) -> Path:
    if stage == 7:
        return REF / "final.sql"
    (hit,) = (REF / "history").glob(f"*_goose{STAGES[stage]}.sql")
    return hit


def parse_reference(text: str):
    """-> ([(type, name, sql)] in file order, [(version_id, is_applied)]) from a reference .sql file."""
    stmts, rows, cur = [], [], None
    for line in text.split("\n"):
        if cur is None:
            m = re.match(r"INSERT INTO goose_db_version \(version_id, is_applied\) VALUES \((\d+), (\d+)\);", line)
            if m:
                rows.append((int(m[1]), int(m[2])))
            if not line.startswith("CREATE "):
                continue
            cur = [line]
        else:
            cur.append(line)
        done = line == "END;" if cur[0].startswith("CREATE TRIGGER") else line.endswith(";")
        if done:
            sql = "\n".join(cur)[:-1]  # sqlite_master keeps the text without the final ';'
            kind, name = re.match(r"CREATE (\w+) (\w+)", sql).groups()
            stmts.append((kind.lower(), name, sql))
            cur = None
    return stmts, rows


def stored_schema(conn):
    return [tuple(r) for r in conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name != 'sqlite_sequence' ORDER BY rowid")]


def test_reference_schema_is_inside_the_repository():
    """The schema tests must run (not skip) in a fresh clone: their DDL lives in the repo."""
    repo = Path(__file__).resolve().parents[1]
    assert REF.is_relative_to(repo) and (REF / "final.sql").is_file()
    assert all(reference_file(stage).is_file() for stage in ALL_STAGES)


@pytest.mark.parametrize("stage", ALL_STAGES)
def test_schema_matches_reference(tmp_path, stage):
    expected, goose = parse_reference(reference_file(stage).read_text())
    conn = create_crush_db(tmp_path / "crush.db", stage)
    try:
        assert stored_schema(conn) == expected  # exact text, same order as `.schema`
        assert conn.execute("SELECT version_id, is_applied FROM goose_db_version ORDER BY id").fetchall() == goose
    finally:
        conn.close()


def test_reference_parser_sees_everything():
    stmts, goose = parse_reference((REF / "final.sql").read_text())
    names = {n for _k, n, _s in stmts}
    assert {"goose_db_version", "sessions", "messages", "files", "read_files", "update_session_message_count_on_delete",
            "idx_read_files_path"} <= names
    assert len(stmts) == 18 and len(goose) == 8


@pytest.mark.parametrize("stage", ALL_STAGES)
def test_columns_wal_and_goose_rows(tmp_path, stage):
    conn = create_crush_db(tmp_path / "crush.db", stage)
    try:
        for table, cols in EXPECTED_COLUMNS[stage].items():
            assert columns(conn, table) == cols, table
        assert columns(conn, "goose_db_version") == ["id", "version_id", "is_applied", "tstamp"]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        rows = conn.execute("SELECT version_id, is_applied FROM goose_db_version ORDER BY id").fetchall()
        assert rows == [(0, 1)] + [(v, 1) for v, _n, _s in MIGRATIONS[:stage]]
        assert conn.execute("SELECT MAX(version_id) FROM goose_db_version WHERE is_applied=1").fetchone()[0] \
            == STAGES[stage]
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name='sqlite_sequence'").fetchone()  # AUTOINCREMENT
        # the stale "milliseconds" comments are part of the stored text, and ADD COLUMN splices before them
        msql = conn.execute("SELECT sql FROM sqlite_master WHERE name='messages'").fetchone()[0]
        assert "finished_at INTEGER, provider TEXT" in msql and "-- Unix timestamp in milliseconds" in msql
    finally:
        conn.close()


def test_create_refuses_existing_file(tmp_path):
    create_crush_db(tmp_path / "crush.db").close()
    with pytest.raises(FileExistsError):
        create_crush_db(tmp_path / "crush.db")


# ---------------------------------------------------------------------------
# parts JSON
# ---------------------------------------------------------------------------


def test_part_key_order_and_go_encoding():
    call = tool_call_part("toolu_01A", "bash", {"command": "ls <dir> && echo ü"})
    assert list(call["data"]) == ["id", "name", "input", "provider_executed", "finished"]
    assert call["data"]["input"] == '{"command":"ls <dir> && echo ü"}'  # JSON text inside JSON
    legacy = tool_call_part("call_1", "view", "", finished=False, legacy=True)
    assert list(legacy["data"]) == ["id", "name", "input", "type", "finished"] and legacy["data"]["type"] == "function"
    res = tool_result_part("toolu_01A", "bash", "a\n\n<cwd>/p</cwd>", metadata={"start_time": 1, "output": "<x>"})
    assert list(res["data"]) == ["tool_call_id", "name", "content", "data", "mime_type", "metadata", "is_error"]
    assert json.loads(res["data"]["metadata"]) == {"start_time": 1, "output": "<x>"}
    assert tool_result_part("c", "view", "x")["data"]["metadata"] == ""
    assert list(reasoning_part("t")["data"]) == ["thinking", "signature", "thought_signature", "tool_id",
                                                 "responses_data"]  # started/finished_at omitempty
    assert reasoning_part("t", started_at=5, finished_at=6)["data"]["finished_at"] == 6
    assert finish_part("stop") == {"type": "finish", "data": {"reason": "stop", "time": 0}}
    assert list(finish_part("error", 9, "Provider error", "boom")["data"]) == ["reason", "time", "message", "details"]
    assert binary_part("a.png", "image/png", b"\x00\xff") == {
        "type": "binary", "data": {"Path": "a.png", "MIMEType": "image/png", "Data": "AP8="}}
    assert binary_part("a.txt", "text/plain", None)["data"]["Data"] is None
    assert image_url_part("http://x") == {"type": "image_url", "data": {"url": "http://x"}}
    assert shell_command_part("ls", "a", 0)["data"] == {"command": "ls", "output": "a", "exit_code": 0}

    enc = encode_parts([text_part("a <b> & ü"), call, res, finish_part("stop")])
    assert "\\u003cb\\u003e \\u0026 ü" in enc and "<" not in enc and "&" not in enc and ", " not in enc
    assert "\\u003ccwd\\u003e" in enc
    back = json.loads(enc)
    assert back[0]["data"]["text"] == "a <b> & ü" and back[1]["data"]["input"] == call["data"]["input"]
    assert encode_parts([]) == "[]"


def test_bash_output_format():
    assert bash_output("") == "no output"
    assert bash_output("a.txt", cwd="/p") == "a.txt\n\n<cwd>/p</cwd>"
    assert bash_output("out", "warn", 0, cwd="/p") == "out\n\nwarn\n\n<cwd>/p</cwd>"
    assert bash_output("FAIL", "", 1, cwd="/p") == "FAIL\nexit status 1\nExit code 1\n\n<cwd>/p</cwd>"
    assert bash_output("", "boom", 2, cwd="/p") == "\nboom\nExit code 2\n\n<cwd>/p</cwd>"
    assert bash_output("x", aborted=True, cwd="/p") == "x\nCommand was aborted before completion\n\n<cwd>/p</cwd>"


# ---------------------------------------------------------------------------
# row writers and registry
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("stage", [4, 7])
def test_row_writers_tolerate_stage(tmp_path, stage):
    conn = create_crush_db(tmp_path / "crush.db", stage)
    try:
        # messages before their session (FKs off) so the triggers cannot stamp wall-clock updated_at
        conn.execute("PRAGMA foreign_keys=OFF")
        add_message(conn, "m1", "s1", "user", [text_part("hi"), finish_part("stop")], created_at=100)
        add_message(conn, "m2", "s1", "assistant", "[{not json", created_at=101, model="gpt-5.1",
                    provider="openai", is_summary=True)
        add_session(conn, "s1", title="T", created_at=100, updated_at=130, cost=0.5, todos=[{"content": "x"}],
                    summary_message_id="m2", message_count=2)
        add_file(conn, "f1", "s1", "/p/a.go", "", 0, created_at=101)
        assert add_read_file(conn, "s1", "a.go", read_at=101) is (stage >= 7)
        assert add_read_file(conn, "s1", "a.go", read_at=120) is (stage >= 7)  # upsert, not a 2nd row
        assert conn.execute("SELECT parts FROM messages WHERE id='m2'").fetchone()[0] == "[{not json"
        row = conn.execute("SELECT message_count, updated_at, summary_message_id FROM sessions").fetchone()
        assert row == (2, 130, "m2")
        # the natural order works too, but Crush's triggers then own message_count and updated_at
        conn.execute("PRAGMA foreign_keys=ON")
        add_session(conn, "s2", title="T2", created_at=100)
        add_message(conn, "m3", "s2", "user", [text_part("yo")], created_at=100)
        count, updated = conn.execute("SELECT message_count, updated_at FROM sessions WHERE id='s2'").fetchone()
        assert count == 1 and updated > 1_700_000_000  # wall clock, not the fixture's 100
        if stage >= 7:
            assert conn.execute("SELECT read_at FROM read_files").fetchall() == [(120,)]
            assert conn.execute("SELECT todos FROM sessions").fetchone()[0] == '[{"content":"x"}]'
    finally:
        conn.close()


def test_write_registry_shapes(tmp_path):
    e = [{"path": "/p/a", "data_dir": "/p/a/.crush", "last_accessed": datetime(2026, 1, 2, 3, 4, 5, 120000,
                                                                                 tzinfo=timezone.utc)}]
    text = write_registry(tmp_path, e).read_text()
    assert text.startswith('{\n  "projects": [\n    {\n      "path": "/p/a"') and not text.endswith("\n")
    assert json.loads(text)["projects"][0]["last_accessed"] == "2026-01-02T03:04:05.12Z"  # Go trims zeros
    assert isinstance(json.loads(write_registry(tmp_path, e, shape="array").read_text()), list)
    keyed = json.loads(write_registry(tmp_path, e, shape="keyed").read_text())
    assert list(keyed.values())[0]["path"] == "/p/a"


# ---------------------------------------------------------------------------
# generate_store
# ---------------------------------------------------------------------------

START = datetime(2026, 1, 5, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return generate_store(tmp_path_factory.mktemp("store"), projects=5, sessions_per_project=8, seed=7)


def sql_truth(db: Path) -> dict:
    """Independent counts straight from the database."""
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        one = lambda q: c.execute(q).fetchone()[0]  # noqa: E731
        parts = "FROM messages, json_each(messages.parts) j"
        jtype = "json_extract(j.value, '$.type')"
        has_read = bool(one("SELECT COUNT(*) FROM sqlite_master WHERE name='read_files'"))
        return {
            "sessions": one("SELECT COUNT(*) FROM sessions"),
            "root_sessions": one("SELECT COUNT(*) FROM sessions WHERE parent_session_id IS NULL"),
            "root_cost": one("SELECT TOTAL(cost) FROM sessions WHERE parent_session_id IS NULL"),
            "messages": one("SELECT COUNT(*) FROM messages"),
            "parts_by_type": Counter(dict(c.execute(f"SELECT {jtype}, COUNT(*) {parts} GROUP BY 1"))),
            "tool_calls_by_name": Counter(dict(c.execute(
                f"SELECT json_extract(j.value, '$.data.name'), COUNT(*) {parts} WHERE {jtype}='tool_call' GROUP BY 1"))),
            "tool_errors": one(f"SELECT COUNT(*) {parts} WHERE {jtype}='tool_result' "
                               "AND json_extract(j.value, '$.data.is_error') = 1"),
            "file_versions": one("SELECT COUNT(*) FROM files"),
            "read_files": one("SELECT COUNT(*) FROM read_files") if has_read else 0,
        }
    finally:
        c.close()


def test_truth_matches_sql(store):
    assert len(store.dbs) == 5 and [d.stage for d in store.dbs] == [4, 5, 6, 7, 4]
    for d in store.dbs:
        got = sql_truth(d.path)
        assert got.pop("root_cost") == pytest.approx(d.root_cost, rel=1e-12, abs=1e-9)
        assert got == {k: getattr(d, k) for k in got}, d.path
        assert d.root_sessions == 8 and d.sessions >= 8
    assert sum(d.sessions - d.root_sessions for d in store.dbs) > 0  # sub-agent sessions on top
    assert store.messages == sum(sql_truth(d.path)["messages"] for d in store.dbs)
    assert store.tool_calls_by_name["view"] > 0 and store.parts_by_type["tool_result"] > 0


def test_store_realism(store):
    for d in store.dbs:
        c = sqlite3.connect(d.path)
        one = lambda q: c.execute(q).fetchone()[0]  # noqa: E731
        assert c.execute("PRAGMA foreign_key_check").fetchall() == []
        assert one("SELECT MAX(version_id) FROM goose_db_version") == STAGES[d.stage]
        # message_count agrees with the rows; timestamps are integer seconds in the simulated window
        assert one("SELECT COUNT(*) FROM sessions s WHERE message_count != "
                   "(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id)") == 0
        lo, hi = int(START.timestamp()), int(START.timestamp()) + 5 * 86400
        for col in ("s.created_at", "s.updated_at", "m.created_at", "m.updated_at"):
            assert one(f"SELECT COUNT(*) FROM sessions s JOIN messages m ON m.session_id=s.id "
                       f"WHERE typeof({col})!='integer' OR {col} NOT BETWEEN {lo} AND {hi}") == 0, col
        assert one("SELECT COUNT(*) FROM sessions WHERE updated_at < created_at") == 0
        # some session spans UTC midnight; one flat-rate root costs 0
        assert one("SELECT COUNT(*) FROM sessions WHERE created_at/86400 != updated_at/86400") >= 1
        assert one("SELECT COUNT(*) FROM sessions WHERE cost = 0 AND parent_session_id IS NULL") >= 1
        # user/tool rows: model '' ; provider NULL (except stage-4 tool rows)
        assert one("SELECT COUNT(*) FROM messages WHERE role='user' AND (model != '' OR provider IS NOT NULL)") == 0
        tool_prov = one("SELECT COUNT(*) FROM messages WHERE role='tool' AND provider IS NOT NULL")
        assert (tool_prov > 0) == (d.stage == 4)
        # sub-agent sessions: id shape per stage, parent's cost includes the children
        kids = c.execute("SELECT id, title FROM sessions WHERE parent_session_id IS NOT NULL").fetchall()
        for kid, title in kids:
            assert title in ("New Agent Session", "Fetch Analysis")
            assert ("$$" in kid) == (d.stage >= 5)
        assert one("SELECT COUNT(*) FROM sessions p WHERE p.cost + 1e-9 < "
                   "(SELECT TOTAL(cost) FROM sessions k WHERE k.parent_session_id = p.id)") == 0
        # files: version 0 per (session, path), later versions global per path
        assert one("SELECT COUNT(*) FROM (SELECT session_id, path FROM files GROUP BY 1, 2 HAVING MIN(version) != 0)") == 0
        assert one("SELECT COUNT(*) FROM files WHERE path NOT LIKE '/%' OR created_at != updated_at") == 0
        if d.stage >= 7:
            assert one("SELECT COUNT(*) FROM read_files WHERE path LIKE '/%'") == 0
        c.close()


def test_store_covers_format_features(tmp_path):
    t = generate_store(tmp_path, projects=4, sessions_per_project=24, seed=3)
    pbt, calls = t.parts_by_type, t.tool_calls_by_name
    assert {"text", "reasoning", "tool_call", "tool_result", "finish", "binary", "shell_command"} <= set(pbt)
    assert {"bash", "view", "edit", "multiedit", "write", "glob", "grep", "ls", "fetch", "agent", "agentic_fetch",
            "todos", "mcp_github_create_issue", "lsp_diagnostics", "diagnostics"} <= set(calls)
    assert t.tool_errors > 0
    by_stage = {d.stage: d for d in t.dbs}
    c7 = sqlite3.connect(by_stage[7].path)
    q = lambda c, s: c.execute(s).fetchone()[0]  # noqa: E731
    assert q(c7, "SELECT COUNT(*) FROM messages WHERE parts='[]' AND finished_at IS NULL AND role='assistant'") >= 1
    assert q(c7, "SELECT COUNT(*) FROM messages WHERE is_summary_message=1") >= 1
    assert q(c7, "SELECT COUNT(*) FROM sessions s JOIN messages m ON m.id = s.summary_message_id "
                 "WHERE m.is_summary_message = 1") >= 1
    assert q(c7, "SELECT COUNT(*) FROM sessions WHERE todos IS NOT NULL") >= 1
    assert q(c7, "SELECT COUNT(*) FROM read_files WHERE path LIKE '../%'") >= 1
    assert q(c7, "SELECT COUNT(*) FROM messages WHERE parts LIKE '%user cancelled assistant tool calling%'") >= 1
    assert q(c7, "SELECT COUNT(*) FROM messages WHERE parts LIKE '%Exit code 1%' "
                 "AND parts LIKE '%\"is_error\":false%'") >= 1
    # files: a session's versions are increasing but not contiguous somewhere
    assert q(c7, "SELECT COUNT(*) FROM (SELECT path, session_id, MAX(version) - MIN(version) + 1 AS span, "
                 "COUNT(*) AS n FROM files GROUP BY 1, 2) WHERE span > n") >= 1
    c7.close()
    c4 = sqlite3.connect(by_stage[4].path)
    assert q(c4, "SELECT COUNT(*) FROM messages WHERE parts LIKE '%\"type\":\"function\"%'") >= 1
    assert q(c4, "SELECT COUNT(*) FROM messages WHERE role='tool' AND parts LIKE '%tool_result%tool_result%'") >= 1
    c4.close()
    reg = json.loads(t.registry_path.read_text())["projects"]
    stamps = [e["last_accessed"] for e in reg]
    assert stamps == sorted(stamps, reverse=True)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z", s) for s in stamps)
    assert {e["data_dir"] == ".crush" for e in reg} == {True, False}
    assert {str((Path(e["path"]) / e["data_dir"]).resolve() / "crush.db") for e in reg} == \
        {str(d.path.resolve()) for d in t.dbs}


def _normalised(truth, root: Path):
    out = []
    for d in truth.dbs:
        row = dataclasses.asdict(d)
        out.append({k: (str(Path(v).relative_to(root)) if isinstance(v, Path) else v) for k, v in row.items()})
    return out


def _message_keys(db: Path):
    c = sqlite3.connect(db)
    try:
        return c.execute("SELECT id, session_id, role, created_at, length(parts) FROM messages ORDER BY rowid").fetchall()
    finally:
        c.close()


def test_generate_store_is_deterministic(tmp_path):
    a = generate_store(tmp_path / "a", projects=4, sessions_per_project=5, seed=11)
    b = generate_store(tmp_path / "b", projects=4, sessions_per_project=5, seed=11, workers=2)
    c = generate_store(tmp_path / "c", projects=4, sessions_per_project=5, seed=12)
    assert _normalised(a, tmp_path / "a") == _normalised(b, tmp_path / "b")
    assert _normalised(a, tmp_path / "a") != _normalised(c, tmp_path / "c")
    # same ids and row order too (lengths can differ only via the temp path inside content)
    ka = [k[:4] for k in _message_keys(a.dbs[0].path)]
    assert ka == [k[:4] for k in _message_keys(b.dbs[0].path)]


def test_checkpoint_false_leaves_rows_in_wal(tmp_path):
    t = generate_store(tmp_path / "g", projects=2, sessions_per_project=6, seed=5, checkpoint=False)
    for d in t.dbs:
        wal = Path(f"{d.path}-wal")
        assert wal.exists() and wal.stat().st_size > 0
        # main file alone (what a naive copy would take) lacks the newest sessions
        lone = tmp_path / f"lone-{d.stage}" / "crush.db"
        lone.parent.mkdir()
        shutil.copyfile(d.path, lone)
        c = sqlite3.connect(lone)
        assert 0 < c.execute("SELECT COUNT(*) FROM messages").fetchone()[0] < d.messages
        c.close()
        # a reader that sees the WAL gets every committed row
        got = sql_truth(d.path)
        assert got["messages"] == d.messages and got["sessions"] == d.sessions
        assert got["root_cost"] == pytest.approx(d.root_cost)
    full = generate_store(tmp_path / "h", projects=1, sessions_per_project=3, seed=5)
    wal = Path(f"{full.dbs[0].path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
