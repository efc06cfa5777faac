"""Each Crush trap of docs/FORMATS.md, "Crush", on a real crush.db, through the lake, read back by DuckDB."""

import json

import pytest

from tests.conftest import T0, ingest_tables, query, scalar
from transforms.synth.crush import add_file, add_message, add_read_file, add_session
from transforms.synth.crush_parts import (
    bash_output, binary_part, finish_part, image_url_part, reasoning_part, shell_command_part, text_part,
    tool_call_part, tool_result_part,
)


def _turn(conn, sid, mid, call_id, name, args, result, *, t, is_error=False, legacy=False):
    """An assistant step calling one tool, and the tool row with its result."""
    add_message(conn, mid, sid, "assistant",
                [tool_call_part(call_id, name, args, legacy=legacy), finish_part("tool_use", t + 1)],
                created_at=t, finished_at=t + 1, model="claude-sonnet-4-5", provider="anthropic")
    add_message(conn, mid + "-r", sid, "tool",
                [tool_result_part(call_id, name, result, is_error=is_error), finish_part("stop")], created_at=t + 1)


def test_root_cost_already_includes_subagents(layout, project):
    p = project()
    add_session(p.conn, "root", title="Fix bug", created_at=T0, cost=1.5)  # 1.2 own + 0.3 child
    add_session(p.conn, "m1$$call1", title="New Agent Session", created_at=T0 + 5, parent="root", cost=0.3)
    add_session(p.conn, "m1$$call1$$x", title="New Agent Session", created_at=T0 + 6, parent="m1$$call1", cost=0.1)
    p.close()
    ingest_tables(layout, p.db)
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(1.5, abs=1e-9)
    rows = query(layout, "SELECT session_id, root_session_id, is_root, cost_includes_subagents FROM sessions ORDER BY 1")
    assert rows == [("m1$$call1", "root", False, True), ("m1$$call1$$x", "root", False, True), ("root", "root", True, True)]


def test_token_columns_are_last_step_sizes(layout, project):
    p = project()
    add_session(p.conn, "s", title="t", created_at=T0, prompt_tokens=51234, completion_tokens=812)
    p.close()
    ingest_tables(layout, p.db)
    cols = {r[0] for r in query(layout, "SELECT column_name FROM (DESCRIBE sessions)")}
    assert {"last_step_prompt_tokens", "last_step_completion_tokens"} <= cols
    assert not {"prompt_tokens", "completion_tokens", "input_tokens", "output_tokens"} & cols
    assert query(layout, "SELECT last_step_prompt_tokens, last_step_completion_tokens FROM sessions") == [(51234, 812)]


def test_seconds_and_millisecond_timestamps(layout, project):
    p = project()
    add_session(p.conn, "s", title="seconds", created_at=T0)
    add_session(p.conn, "ms", title="millis", created_at=(T0 + 86400) * 1000)
    add_message(p.conn, "m", "ms", "user", [text_part("hi")], created_at=(T0 + 86400) * 1000 + 250)
    p.close()
    summary = ingest_tables(layout, p.db)
    got = dict(query(layout, "SELECT session_id, strftime(created_at, '%Y-%m-%d %H:%M:%S') FROM sessions"))
    assert got == {"s": "2026-01-01 00:00:00", "ms": "2026-01-02 00:00:00"}
    assert query(layout, "SELECT date::VARCHAR, created_at FROM messages")[0][0] == "2026-01-02"
    warnings = " ".join(summary.results[0].warnings)
    assert "timestamps in ms instead of seconds" in warnings


def test_tool_input_is_json_inside_json(layout, project):
    p = project()
    add_session(p.conn, "s", title="t", created_at=T0)
    _turn(p.conn, "s", "a1", "c1", "bash", {"command": "ls -la <dir> && echo 'ok'", "description": "list"},
          bash_output("x"), t=T0)
    _turn(p.conn, "s", "a2", "c2", "edit", {"file_path": "/p/a.go", "old_string": "a", "new_string": "b"}, "ok", t=T0 + 5)
    _turn(p.conn, "s", "a3", "c3", "view", "", "streaming died", t=T0 + 10)  # killed mid-stream
    _turn(p.conn, "s", "a4", "c4", "view", "{}", "invalid args replaced", t=T0 + 15)
    p.close()
    ingest_tables(layout, p.db)
    rows = query(layout, "SELECT tool_call_id, command, file_path, is_input_valid, input FROM tool_calls ORDER BY 1")
    assert rows[0][:4] == ("c1", "ls -la <dir> && echo 'ok'", None, True)
    assert json.loads(rows[0][4]) == {"command": "ls -la <dir> && echo 'ok'", "description": "list"}
    assert rows[1][:4] == ("c2", None, "/p/a.go", True)
    assert rows[2][3:] == (False, None)  # "" is not a valid input
    assert rows[3][3:] == (True, "{}")
    # the raw parts keep the text exactly, second layer undecoded
    raw = scalar(layout, "SELECT tool_input FROM parts WHERE tool_call_id = 'c1' AND part_type = 'tool_call'")
    assert json.loads(raw)["command"].startswith("ls -la <dir>")


def test_bash_results_exit_codes_and_cwd(layout, project):
    p = project()
    add_session(p.conn, "s", title="t", created_at=T0)
    cases = {
        "ok": bash_output("fine", cwd="/home/u/proj"),
        "fail": bash_output("", stderr="boom", exit_code=2, cwd="/home/u/proj"),
        "empty": bash_output(""),
        "aborted": bash_output("partial", aborted=True),
    }
    for i, (cid, text) in enumerate(cases.items()):
        _turn(p.conn, "s", f"a{i}", cid, "bash", {"command": cid}, text, t=T0 + 10 * i)
    _turn(p.conn, "s", "a9", "denied", "bash", {"command": "rm -rf /"}, "User denied permission", t=T0 + 99, is_error=True)
    p.close()
    ingest_tables(layout, p.db)
    got = {r[0]: r[1:] for r in query(layout, "SELECT tool_call_id, exit_code, is_error, result_cwd, result_text FROM tool_calls")}
    assert got["ok"] == (0, False, "/home/u/proj", "fine")
    assert got["fail"][:3] == (2, False, "/home/u/proj")  # a non-zero exit is not a tool error
    assert got["empty"] == (0, False, None, "no output")
    assert got["aborted"][0] is None
    assert got["denied"][:2] == (None, True)
    assert not any("<cwd>" in (r[3] or "") for r in got.values())


def test_same_second_messages_keep_insertion_order(layout, project):
    p = project()
    add_session(p.conn, "s", title="t", created_at=T0)
    for i in range(5):  # all in one second: rowid decides
        add_message(p.conn, f"z{i}", "s", "user", [text_part(str(i))], created_at=T0)
    p.close()
    ingest_tables(layout, p.db)
    assert query(layout, "SELECT message_id FROM messages ORDER BY message_index") == [(f"z{i}",) for i in range(5)]


def test_every_part_type_has_typed_columns_and_raw(layout, project):
    p = project()
    add_session(p.conn, "s", title="t", created_at=T0)
    parts = [
        reasoning_part("think", signature="sig", started_at=T0, finished_at=T0 + 3,
                       responses_data={"type": "openai.responses.reasoning_metadata",
                                       "data": {"item_id": "rs_1", "encrypted_content": None, "summary": []}}),
        text_part("Use <b> & co"),
        binary_part("/tmp/a.png", "image/png", b"\x89PNG12345"),
        image_url_part("https://example.test/a.png", "high"),
        shell_command_part("git status", "clean", 0),
        finish_part("error", T0 + 4, message="Provider error", details="overloaded"),
    ]
    add_message(p.conn, "m", "s", "assistant", parts, created_at=T0, finished_at=T0 + 4, model="gpt-5.1", provider="openai")
    p.close()
    ingest_tables(layout, p.db)
    rows = {r[0]: r[1:] for r in query(layout, """
        SELECT part_type, text, reasoning, reasoning_finished_at, binary_size, mime_type, url, shell_command,
               shell_exit_code, finish_reason, finish_message, raw FROM parts""")}
    assert rows["text"][0] == "Use <b> & co"  # Go's \u003c escapes decoded
    assert rows["reasoning"][1] == "think" and rows["reasoning"][2].timestamp() == T0 + 3
    assert rows["binary"][3:5] == (9, "image/png")
    assert rows["image_url"][5] == "https://example.test/a.png"
    assert rows["shell_command"][6:8] == ("git status", 0)
    assert rows["finish"][8:10] == ("error", "Provider error")
    assert json.loads(rows["reasoning"][-1])["data"]["responses_data"]["data"]["item_id"] == "rs_1"


def test_unknown_part_types_and_columns_are_kept_and_counted(layout, project):
    p = project()
    p.conn.execute("ALTER TABLE messages ADD COLUMN workspace_cwd TEXT")
    add_session(p.conn, "s", title="t", created_at=T0)
    add_message(p.conn, "m", "s", "assistant", [{"type": "citation", "data": {"url": "u"}}, text_part("x")], created_at=T0)
    p.conn.execute("UPDATE messages SET workspace_cwd = '/w' WHERE id = 'm'")
    p.close()
    summary = ingest_tables(layout, p.db)
    result = summary.results[0]
    assert result.status == "ok" and result.unknown_part_types == 1
    assert query(layout, "SELECT part_type, native_part_type, is_known_type, raw FROM parts WHERE part_index = 0") == [
        ("other", "citation", False, '{"type":"citation","data":{"url":"u"}}')]
    assert json.loads(scalar(layout, "SELECT extra_columns FROM messages")) == {"workspace_cwd": "/w"}
    assert any("workspace_cwd" in w for w in result.warnings)
    assert not any("newer than this release" in w for w in result.warnings)


def test_a_crush_schema_newer_than_known_is_said(layout, project):
    """A migration this release does not know: read by the columns it knows, and said so (the
    run was only "ok", with `migrations` empty)."""
    p = project()
    p.conn.execute("INSERT INTO goose_db_version (version_id, is_applied) VALUES (20991231000000, 1)")
    p.conn.execute("ALTER TABLE sessions ADD COLUMN workspace TEXT")
    add_session(p.conn, "s", title="t", created_at=T0)
    p.close()
    (result,) = ingest_tables(layout, p.db).results
    assert result.status == "ok" and result.schema_version == 20991231000000 and result.migrations is None
    assert any(w.startswith("Crush schema newer than this release knows (goose version 20991231000000")
               for w in result.warnings), result.warnings


def test_invalid_parts_row_is_quarantined_and_the_rest_kept(layout, project):
    p = project()
    add_session(p.conn, "s", title="t", created_at=T0)
    add_message(p.conn, "good", "s", "user", [text_part("fine")], created_at=T0)
    add_message(p.conn, "bad", "s", "assistant", '[{"type":"text","data":{"text":"cut', created_at=T0 + 1)
    add_message(p.conn, "obj", "s", "assistant", '{"type":"text"}', created_at=T0 + 2)
    p.close()
    summary = ingest_tables(layout, p.db)
    assert summary.results[0].status == "ok" and summary.results[0].reconciled
    assert query(layout, "SELECT key, raw FROM quarantine ORDER BY key") == [
        ("bad", '[{"type":"text","data":{"text":"cut'), ("obj", '{"type":"text"}')]
    assert query(layout, "SELECT message_id, parts_ok FROM messages ORDER BY message_index") == [
        ("good", True), ("bad", False), ("obj", False)]
    assert scalar(layout, "SELECT COUNT(*) FROM parts") == 1


def test_legacy_v012_shapes(layout, project):
    """Before v0.13: tool_call has a "type" key, one tool row holds all results, summaries only
    via sessions.summary_message_id, and sub-agent ids are bare tool call ids."""
    p = project(stage=4)
    add_session(p.conn, "s", title="t", created_at=T0, cost=0.7, summary_message_id="sum")
    add_session(p.conn, "call_b", title="New Agent Session", created_at=T0 + 2, parent="s", cost=0.2)
    add_message(p.conn, "a", "s", "assistant", [
        tool_call_part("call_a", "diagnostics", {}, legacy=True), tool_call_part("call_b", "agent", {"prompt": "p"}, legacy=True),
        finish_part("tool_use", T0 + 1)], created_at=T0, model="claude-3-7", provider="anthropic")
    add_message(p.conn, "r", "s", "tool", [
        tool_result_part("call_a", "diagnostics", "none", legacy=True),
        tool_result_part("call_b", "agent", "done", legacy=True), finish_part("stop")],
        created_at=T0 + 3, provider="anthropic")
    add_message(p.conn, "sum", "s", "assistant", [text_part("summary"), finish_part("end_turn", T0 + 5)], created_at=T0 + 5)
    p.close()
    summary = ingest_tables(layout, p.db)
    assert summary.results[0].migrations == 4
    assert query(layout, "SELECT tool_call_id, tool_category, result_message_id FROM tool_calls ORDER BY 1") == [
        ("call_a", "read", "r"), ("call_b", "agent", "r")]
    assert query(layout, "SELECT message_id FROM messages WHERE is_summary") == [("sum",)]
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(0.7)


def test_model_and_provider_null_on_user_rows(layout, project):
    p = project()
    add_session(p.conn, "s", title="t", created_at=T0)
    add_message(p.conn, "u", "s", "user", [text_part("q"), finish_part("stop")], created_at=T0)  # model ''
    p.close()
    ingest_tables(layout, p.db)
    assert query(layout, "SELECT model, llm_provider FROM messages") == [(None, None)]


def test_orphan_results_and_unanswered_calls(layout, project):
    p = project()
    add_session(p.conn, "s", title="t", created_at=T0)
    add_message(p.conn, "a", "s", "assistant", [tool_call_part("c1", "grep", {"pattern": "x"}, finished=False)],
                created_at=T0)  # crashed before the result
    add_message(p.conn, "r", "s", "tool", [tool_result_part("lost", "view", "content")], created_at=T0 + 1)
    p.close()
    ingest_tables(layout, p.db)
    assert query(layout, "SELECT tool_call_id, has_call, has_result, is_error FROM tool_calls ORDER BY 1") == [
        ("c1", True, False, None), ("lost", False, True, False)]


def test_mcp_and_category_mapping(layout, project):
    p = project()
    add_session(p.conn, "s", title="t", created_at=T0)
    for i, name in enumerate(["mcp_github_create_issue", "todos", "multiedit", "web_search", "crush_logs"]):
        _turn(p.conn, "s", f"a{i}", f"c{i}", name, {}, "ok", t=T0 + 5 * i)
    p.close()
    ingest_tables(layout, p.db)
    assert dict(query(layout, "SELECT tool_name, tool_category FROM tool_calls")) == {
        "mcp_github_create_issue": "mcp", "todos": "todo", "multiedit": "edit", "web_search": "search",
        "crush_logs": "other"}


def test_files_and_read_files_paths(layout, project):
    p = project()
    add_session(p.conn, "s", title="t", created_at=T0)
    add_file(p.conn, "f0", "s", str(p.path / "src/a.py"), "", 0, created_at=T0)
    add_file(p.conn, "f3", "s", str(p.path / "src/a.py"), "print(1)\n", 3, created_at=T0 + 1)
    add_read_file(p.conn, "s", "src/a.py", read_at=T0 + 2)
    add_read_file(p.conn, "s", "../shared/b.py", read_at=T0 + 2)
    p.conn.execute("INSERT INTO files VALUES ('ftext', 's', ?, 'x', '7', ?, ?)", (str(p.path / "t.txt"), T0, T0))
    p.close()
    ingest_tables(layout, p.db)
    assert query(layout, "SELECT file_id, version, size_bytes FROM file_versions ORDER BY 1") == [
        ("f0", 0, 0), ("f3", 3, 9), ("ftext", 7, 1)]
    assert dict(query(layout, "SELECT path_raw, path FROM read_files")) == {
        "src/a.py": str(p.path / "src/a.py"), "../shared/b.py": str(p.path.parent / "shared/b.py")}
