"""Odd values and failures half-way: one source may fail, the run and the lake never break."""

import sqlite3

import pyarrow as pa
import pytest

from tests.conftest import T0, ingest_tables, query, scalar
from transforms.synth.crush import add_message, add_session
from transforms.synth.crush_parts import bash_output, finish_part, text_part, tool_call_part, tool_result_part
from warehouse.land import landing_files
from warehouse.lake.storage import LocalStore


def _bash(p, cid, output):
    add_message(p.conn, f"a-{cid}", "s", "assistant", [tool_call_part(cid, "bash", {"command": cid})], created_at=T0)
    add_message(p.conn, f"r-{cid}", "s", "tool", [tool_result_part(cid, "bash", output), finish_part("stop")],
                created_at=T0 + 1)


def test_bash_output_that_looks_like_crush_markers(layout, project):
    p = project()
    add_session(p.conn, "s", title="t", created_at=T0)
    _bash(p, "grep", bash_output('x.py: re.compile("<cwd>(.*)</cwd>")', stderr="", exit_code=2, cwd="/w"))
    _bash(p, "echo", bash_output("Exit code 3", cwd="/w"))  # exit 0, printing the marker
    p.close()
    ingest_tables(layout, p.db)
    got = {r[0]: r[1:] for r in query(layout, "SELECT tool_call_id, exit_code, result_cwd, result_text FROM tool_calls")}
    assert got["grep"][:2] == (2, "/w") and got["grep"][2].startswith('x.py: re.compile("<cwd>(.*)</cwd>")')
    assert got["echo"] == (0, "/w", "Exit code 3")


def test_odd_values_are_kept_or_nulled_never_fatal(layout, project):
    p = project()
    add_session(p.conn, "s", title="t", created_at=T0)
    p.conn.execute("UPDATE sessions SET prompt_tokens = 1e20")  # REAL beyond int64
    add_message(p.conn, "lone", "s", "user", '[{"type":"text","data":{"text":"half emoji \\ud83d"}}]', created_at=T0)
    add_message(p.conn, "listtype", "s", "user", [{"type": ["x"], "data": {}}, text_part("after")], created_at=T0 + 1)
    add_message(p.conn, "nan", "s", "user", '[{"type":"text","data":{"n":NaN}}]', created_at=T0 + 2)
    p.conn.execute("INSERT INTO files VALUES ('f', 's', '/p/a', 'x', '99999999999999999999999', ?, ?)", (T0, T0))
    p.close()
    summary = ingest_tables(layout, p.db)
    result = summary.results[0]
    assert result.status == "ok" and result.reconciled, result.reconcile
    assert scalar(layout, "SELECT last_step_prompt_tokens FROM sessions") is None
    assert scalar(layout, "SELECT text FROM parts WHERE message_id = 'lone'") == "half emoji ?"
    assert query(layout, "SELECT part_index, is_known_type FROM parts WHERE message_id = 'listtype' ORDER BY 1") == [
        (0, False), (1, True)]
    assert query(layout, "SELECT key FROM quarantine") == [("nan",)]  # NaN is not JSON
    assert query(layout, "SELECT version FROM file_versions") == [(None,)]


def test_a_write_failing_half_way_leaves_no_orphan_files(layout, project, monkeypatch):
    p = project()
    for day in range(3):
        add_session(p.conn, f"s{day}", title="t", created_at=T0 + day * 86400, cost=1.0)
    p.close()
    ingest_tables(layout, p.db)
    con = sqlite3.connect(p.db)
    add_session(con, "new", title="t", created_at=T0 + 9 * 86400, cost=5.0)  # a new date
    add_message(con, "m", "new", "user", [text_part("hi")], created_at=T0 + 9 * 86400)
    con.commit()
    con.close()
    real = LocalStore._stage

    def full_disk(self, rel, data):  # the new sessions file is staged, then the disk is full
        if rel.endswith("/messages.parquet"):
            raise OSError(28, "No space left on device")
        return real(self, rel, data)

    def landed():
        return {q: q.read_bytes() for q in layout.lake.glob("_landing/*/*/*/*/*.parquet")}

    before, rows = landed(), query(layout, "SELECT * FROM sessions ORDER BY session_id")
    monkeypatch.setattr(LocalStore, "_stage", full_disk)
    failed = ingest_tables(layout, p.db)
    assert failed.results[0].status == "failed" and "No space left" in failed.results[0].error
    monkeypatch.undo()
    assert landed() == before  # the lake is as it was
    assert query(layout, "SELECT * FROM sessions ORDER BY session_id") == rows
    assert not [f for f in layout.staging_dir.rglob("*") if f.is_file()]  # and nothing is left staged

    con = sqlite3.connect(p.db)
    con.execute("PRAGMA foreign_keys = ON")
    con.execute("DELETE FROM sessions WHERE id = 'new'")
    con.commit()
    con.close()
    ingest_tables(layout, p.db)
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(3.0)
    assert scalar(layout, "SELECT COUNT(*) FROM sessions WHERE date = DATE '2026-01-10'") == 0


def test_value_arrow_cannot_hold_fails_only_its_source(layout, project, monkeypatch):
    good, bad = project("good"), project("bad")
    for p in (good, bad):
        add_session(p.conn, "s", title="t", created_at=T0)
        p.close()
    real = landing_files.to_arrow

    def picky(table, rows):
        rows = rows.to_pylist() if isinstance(rows, pa.Table) else rows  # Crush's tables come as Arrow
        if table.name != "sources" and any(r["project_path"].endswith("bad") for r in rows):
            raise OverflowError("value too large")
        return real(table, rows)

    monkeypatch.setattr(landing_files, "to_arrow", picky)
    summary = ingest_tables(layout, good.db, bad.db)
    assert sorted((r.source.project, r.status) for r in summary.results) == [("bad", "failed"), ("good", "ok")]
    assert "OverflowError" in next(r.error for r in summary.results if r.status == "failed")


def test_rows_for_a_table_or_column_the_contract_has_not_fail_their_source_not_silently(layout, project,
                                                                                        monkeypatch):
    """A new agent's extractor that misspelt `tool_calls` (or a column) had its rows dropped, and
    the run said `ok`: the lake lost them without a word. Its source fails, naming the key, and
    writes nothing; the other sources land."""
    from transforms.providers import PROVIDERS

    stores = {name: project(name) for name in ("good", "table", "column")}
    for p in stores.values():
        add_session(p.conn, "s", title="t", created_at=T0)
        add_message(p.conn, "m", "s", "assistant", [text_part("hi")], created_at=T0)
        p.close()
    crush = PROVIDERS["crush"]
    real = crush.extract

    def misspelt(source, *args, **kwargs):
        extract = real(source, *args, **kwargs)
        if source.project == "table":
            extract.rows["tool_call"] = extract.rows.pop("tool_calls")
        elif source.project == "column":
            sessions = extract.rows["sessions"]
            extract.rows["sessions"] = sessions.append_column("titel", pa.array(["t"] * sessions.num_rows))
        return extract

    monkeypatch.setattr(crush, "extract", misspelt)
    summary = ingest_tables(layout, *(p.db for p in stores.values()))
    by_project = {r.source.project: r for r in summary.results}
    assert {name: r.status for name, r in by_project.items()} == {"good": "ok", "table": "failed", "column": "failed"}
    assert by_project["table"].error.startswith("crush's extractor gave rows for 'tool_call', not a table of the "
                                                "contract (sessions, "), by_project["table"].error
    assert by_project["column"].error == ("crush's extractor gave sessions rows the column 'titel', not in the "
                                          "contract (transforms/contract.py): nothing of the source was written")
    assert query(layout, "SELECT project, COUNT(*) FROM messages GROUP BY 1") == [("good", 1)]


def test_a_rows_own_project_is_the_one_key_beside_the_contracts_columns():
    from transforms.contract import DATA_TABLES

    rows = {"messages": [{"message_id": "m", "session_id": "s", "project": "other"}]}
    landing_files.check_rows(list(DATA_TABLES), rows, "opencode")  # a store spanning projects names each row's
    rows["messages"][0]["Role"] = "user"
    with pytest.raises(landing_files.RowsOutsideContract, match="gave messages rows the column 'Role', not in"):
        landing_files.check_rows(list(DATA_TABLES), rows, "opencode")
