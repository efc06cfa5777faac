"""Cursor's CLI agent: real transcript files (plain text and JSONL) and a real summaries database
in a tmp `.cursor` home, in the shapes the peers read (Cursor is closed source), through the
lake, read back by DuckDB. Expected numbers are counted from each fixture by hand."""

import json
import os
from collections import Counter
from datetime import datetime

import pytest

from pipelines.cli import main
from tests.conftest import ingest_tables, query, scalar
from transforms.cursor.discover import discover
from transforms.cursor.normalise import decode_project
from transforms.synth.cursor import (
    encode_project,
    generate_home,
    jsonl_line,
    text_transcript,
    transcripts_dir,
    write_summaries,
)

SID = "1031d227-0c67-4e17-8954-0b6e2b3322f0"
UPDATED_MS = 1772442000000  # 2026-03-02T09:00:00Z


def cursor(layout, *homes):
    return ingest_tables(layout, homes={"cursor": list(homes)})


def jsonl_session(home, workspace):
    """A Composer-2 conversation: prompt, a Shell call and an Edit call (one fails), their results,
    an answer; a sub-agent; and a stale .txt copy of the same conversation."""
    folder = transcripts_dir(home, workspace) / SID
    folder.mkdir(parents=True)
    (folder / f"{SID}.jsonl").write_text("\n".join([
        jsonl_line("user", [{"type": "text", "text": "<user_info>os: linux</user_info>\n<user_query>\nfix the test\n"
                                                     "</user_query>"}]),
        jsonl_line("assistant", [{"type": "thinking", "thinking": "run it"},
                                 {"type": "tool_use", "id": "t1", "name": "Shell", "input": {"command": "npm test"}},
                                 {"type": "tool_use", "id": "t2", "name": "StrReplace",
                                  "input": {"path": "src/a.ts", "old": "401", "new": "200"}}]),
        jsonl_line("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "FAIL"},
                            {"type": "tool_result", "tool_use_id": "t2",
                             "content": [{"type": "text", "text": "no match"}], "is_error": True}]),
        "{not json",
        jsonl_line("assistant", "Fixed."),
    ]) + "\n")
    (folder / f"{SID}.txt").write_text("user:\n<user_query>fix the test</user_query>\nA:\nFixed.\n")  # a copy
    (folder / "subagents").mkdir()
    (folder / "subagents" / "explore.jsonl").write_text(
        jsonl_line("user", "find the test") + "\n" + jsonl_line("assistant", "src/a.test.ts") + "\n")


def test_a_jsonl_conversation_with_a_sub_agent(layout, tmp_path):
    home, workspace = tmp_path / ".cursor", str(tmp_path / "work" / "my-app.v2")
    os.makedirs(workspace)  # the lossy project id is decoded against the directory that exists
    jsonl_session(home, workspace)
    write_summaries(home, [{"conversationId": SID, "title": "Fix test", "model": "claude-4.5-sonnet",
                            "updatedAt": UPDATED_MS}])
    (result,) = cursor(layout, home).results
    assert result.status == "ok" and result.reconciled, (result.error, result.reconcile)
    assert query(layout, "SELECT session_id, parent_session_id, is_root, title, model, cost_usd, cost_source, "
                         "total_tokens, message_count, project_path FROM sessions ORDER BY is_root") == [
        ("explore", SID, False, None, None, None, "unknown", None, 2, workspace),
        (SID, None, True, "Fix test", "claude-4.5-sonnet", None, "unknown", None, 4, workspace)]
    assert scalar(layout, "SELECT created_at FROM sessions WHERE is_root") == datetime(2026, 3, 2, 9)
    # no tokens anywhere: no usage rows (codeburn would estimate chars / 4 and price them)
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == 0
    # 1 text + (thinking, 2 tool_use) + 2 tool_result + 1 text, plus the sub-agent's 2 texts
    assert Counter(dict(query(layout, "SELECT native_part_type, COUNT(*) FROM parts GROUP BY 1"))) == Counter(
        {"text": 4, "thinking": 1, "tool_use": 2, "tool_result": 2})
    assert scalar(layout, "SELECT text FROM parts WHERE role = 'user' AND session_id = ? ORDER BY source_rowid "
                          "LIMIT 1", SID) == "fix the test"
    assert query(layout, "SELECT tool_name, tool_category, command, file_path, has_result, is_error, result_text "
                         "FROM tool_calls ORDER BY tool_call_id") == [
        ("Shell", "shell", "npm test", None, True, None, "FAIL"),
        ("StrReplace", "edit", None, "src/a.ts", True, True, "no match")]
    assert query(layout, "SELECT key FROM quarantine") == [(f"{SID}.jsonl:4",)]
    assert any("text copy" in w for w in result.warnings)


def test_a_text_transcript(layout, tmp_path):
    home = tmp_path / ".cursor"
    folder = transcripts_dir(home, "/home/dev/shop")
    (folder / "chat-1.txt").write_text(text_transcript([
        ("fix it", [("thinking", "look first"), ("call", "Read", ['{"path": "a.py"}']), ("result", ["x = 1"]),
                    "Fixed it.", ("call", "Shell", ['{"command": "pytest"}'])]),
    ]))
    os.utime(folder / "chat-1.txt", (UPDATED_MS / 1000, UPDATED_MS / 1000))  # no summary: the mtime is the time
    (result,) = cursor(layout, home).results
    assert result.status == "ok" and result.reconciled, result.reconcile
    assert query(layout, "SELECT role, part_type, native_part_type FROM parts ORDER BY source_rowid, part_index") == [
        ("user", "text", "text"),
        ("assistant", "reasoning", "[Thinking]"), ("assistant", "tool_call", "[Tool call]"),
        ("assistant", "tool_result", "[Tool result]"), ("assistant", "text", "text"),
        ("assistant", "tool_call", "[Tool call]")]
    assert query(layout, "SELECT tool_name, file_path, command, has_result, result_text FROM tool_calls "
                         "ORDER BY tool_name") == [
        ("Read", "a.py", None, True, "x = 1"), ("Shell", None, "pytest", False, None)]
    assert query(layout, "SELECT created_at, project_path, cost_source FROM sessions") == [
        (datetime(2026, 3, 2, 9), "/home/dev/shop", "unknown")]


def test_decode_project_against_existing_dirs(tmp_path):
    real = tmp_path / "a-b" / "c.d"
    real.mkdir(parents=True)
    assert decode_project(encode_project(str(real))) == str(real)
    assert decode_project("home-nobody-x-y") == "/home/nobody/x/y"  # nothing exists: the `/` guess
    # a dot-directory on the way (`~/.local/share/...`, where the demo lives): `/.` became `--`
    hidden = tmp_path / ".local" / "share" / "my-app"
    hidden.mkdir(parents=True)
    assert decode_project(encode_project(str(hidden))) == str(hidden)
    assert decode_project("home-nobody--config-x") == "/home/nobody/.config/x"  # the guess keeps the dot
    assert decode_project("1767225600000") is None and decode_project(None) is None  # workspace-less


def test_a_deep_workspace_is_decoded_whole(tmp_path):
    """A workspace 27 pieces deep (a demo under a test's temporary folder on a worker) was past
    the search's bounds and named by its last piece: `ml-pipeline` became `pipeline`."""
    deep = tmp_path.joinpath(*[f"d-{n}.x" for n in range(12)], "ml-pipeline")
    deep.mkdir(parents=True)
    assert len(encode_project(str(deep)).split("-")) > 30
    assert decode_project(encode_project(str(deep))) == str(deep)
    (deep.parent / "ml").mkdir()  # a shorter directory sharing a prefix is passed over
    assert decode_project(encode_project(str(deep))) == str(deep)


def test_discovery_default_home_and_agent_home_forms(tmp_path):
    home = tmp_path / "u" / ".cursor"
    generate_home(home, sessions=2)
    real = str(home.resolve())
    assert [s.path for s in discover({"HOME": str(tmp_path / "u")}).sources] == [real]
    assert [s.path for s in discover({"USERPROFILE": str(tmp_path / "u")}).sources] == [real]  # Windows
    for place in (home, home / "projects", next((home / "projects").iterdir())):
        assert [s.path for s in discover({}, extra_roots=[str(place)], use_default=False).sources] == [real]
    assert discover({"HOME": str(tmp_path / "empty")}).sources == []
    assert "no Cursor agent transcripts" in discover({}, extra_roots=[str(tmp_path)], use_default=False).problems[0]


def test_cli_agent_home_and_generated_truth(layout, tmp_path, monkeypatch, capsys):
    truth = generate_home(tmp_path / ".cursor", sessions=6, seed=4)
    (result,) = cursor(layout, tmp_path / ".cursor").results
    assert result.status == "ok" and result.reconciled
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == truth.sessions
    assert scalar(layout, "SELECT COUNT(*) FROM sessions WHERE NOT is_root") == truth.subagents
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == truth.messages
    assert scalar(layout, "SELECT COUNT(*) FROM parts") == truth.parts
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls") == truth.tool_calls
    assert scalar(layout, "SELECT COUNT(*) FROM sessions WHERE cost_usd IS NOT NULL") == 0  # never invented
    # a sub-agent (no summary row: dated by its file) has its parent's time, not the generation's:
    # the demo comes out the same whenever it is generated
    assert query(layout, "SELECT s.created_at = p.created_at FROM sessions AS s JOIN sessions AS p "
                         "ON p.session_id = s.parent_session_id WHERE NOT s.is_root") == [(True,)] * truth.subagents
    monkeypatch.setenv("AGENTLAKE_HOME", str(tmp_path / "al"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own Dagster instance, as a user's
    assert main(["ingest", "--no-default", "--agent-home", f"cursor={tmp_path / '.cursor'}"]) == 0
    capsys.readouterr()
    assert main(["sql", "SELECT COUNT(*) AS n FROM sessions WHERE provider = 'cursor'", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": truth.sessions}]


@pytest.mark.parametrize("updated", [UPDATED_MS, "2026-03-02T09:00:00Z", str(UPDATED_MS)])
def test_summary_time_in_any_form(layout, tmp_path, updated):
    home = tmp_path / ".cursor"
    folder = transcripts_dir(home, "/home/dev/shop")
    (folder / f"{SID}.txt").write_text("user:\n<user_query>hi</user_query>\nA:\nhello\n")
    write_summaries(home, [{"conversationId": SID, "title": "t", "model": None, "updatedAt": updated}])
    cursor(layout, home)
    assert scalar(layout, "SELECT created_at FROM sessions") == datetime(2026, 3, 2, 9)
