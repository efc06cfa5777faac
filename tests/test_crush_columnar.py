"""Crush is normalised in columns (transforms.crush.parts, .columns, .tool_calls): each odd value
is read exactly as a row at a time read it, calls pair with results in message order, and the
writer and retention take an Arrow table just as they take dicts."""

from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import T0
from transforms.contract import DATA_TABLES, PARTS
from transforms.crush.normalise import RawTable, SourceContext, normalise_tables
from transforms.synth.crush_parts import encode_parts, text_part, tool_call_part, tool_result_part
from warehouse.land.retention import carry_forward
from warehouse.lake.storage import LocalStore
from warehouse.land.landing_files import build_files

CTX = SourceContext("src", "/p", datetime(2026, 2, 1, tzinfo=timezone.utc))
SESSION_COLS = ["id", "parent_session_id", "title", "message_count", "prompt_tokens", "completion_tokens", "cost",
                "updated_at", "created_at", "summary_message_id"]
MESSAGE_COLS = ["id", "session_id", "role", "parts", "model", "created_at", "updated_at", "finished_at", "provider",
                "is_summary_message"]


def _message(rowid, parts, *, sid="s", created=T0):
    return (rowid, f"m{rowid}", sid, "assistant", parts, "m", created, created, None, "p", 0)


def _normalise(messages, sessions=()):
    tables = {"sessions": RawTable(SESSION_COLS, list(sessions)), "messages": RawTable(MESSAGE_COLS, messages)}
    return normalise_tables(tables, CTX)


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc).replace(tzinfo=None)


def test_odd_part_values_are_read_value_by_value():
    """Where a value is not what the column holds, the column is converted one value at a time,
    as the row-at-a-time normaliser did; the ordinary values around it are unchanged."""
    parts = [
        {"type": "reasoning", "data": {"thinking": 5, "started_at": 1.5, "finished_at": True}},
        {"type": "finish", "data": {"reason": {"a": [1]}, "time": (T0 + 1) * 1000}},
        {"type": "finish", "data": {"reason": "end_turn", "time": T0 + 2}},
        {"type": "binary", "data": {"Path": "a.png", "MIMEType": "", "Data": "aGVsbG8="}},
        {"type": "tool_result", "data": {"tool_call_id": 9, "name": "view", "content": "x", "is_error": 1,
                                         "mime_type": ""}},
        {"type": "shell_command", "data": {"command": "ls", "output": "", "exit_code": 2.0}},
        {"type": "shell_command", "data": {"command": "ls", "output": "", "exit_code": True}},
        {"type": 7, "data": {}}, {"type": "text", "data": "flat"}, "bare",
    ]
    out, findings = _normalise([_message(1, encode_parts(parts))])
    got = out["parts"].to_pydict()
    assert got["part_type"] == ["reasoning", "finish", "finish", "binary", "tool_result", "shell_command",
                                "shell_command", "other", "text", "other"]
    assert got["native_part_type"][-3:] == ["7", "text", None]  # a number as JSON text; no type at all
    assert got["is_known_type"] == [True] * 7 + [False] * 3  # "text" with a string for data cannot be read
    assert got["reasoning"][0] == "5"  # a number where text belongs: its JSON text
    assert got["reasoning_started_at"][0] == _at(1.5)  # a float epoch keeps its fraction
    assert got["reasoning_finished_at"][0] is None  # true is not a time
    assert got["finish_reason"][1:3] == ['{"a":[1]}', "end_turn"]
    assert got["finish_time"][1:3] == [_at(T0 + 1), _at(T0 + 2)]  # milliseconds detected, seconds as they are
    assert findings.non_second_timestamps == {"ms": 1}
    assert got["mime_type"][3:5] == ["", None]  # a binary's empty MIME type kept, a result's is null
    assert got["binary_size"][3] == 5  # "aGVsbG8" (7 base64 digits) * 3 // 4
    assert got["tool_call_id"][4] == "9" and got["is_error"][4] is None  # 1 is not a boolean
    assert got["shell_exit_code"][5:7] == [2, 1]  # 2.0 is 2; true is 1
    assert findings.unknown_part_types == {"7": 1, "text": 1, None: 1}
    assert [r["raw"] for r in out["parts"].select(["raw"]).to_pylist()][-1] == '"bare"'


def test_results_take_the_oldest_waiting_call_of_their_id():
    """Call ids can repeat: in message order a result answers the oldest call of its (session,
    id) still waiting; a result with none waiting is an orphan, kept where it occurred."""
    messages = [
        _message(1, encode_parts([tool_result_part("a", "bash", "early")]), created=T0),       # orphan
        _message(2, encode_parts([tool_call_part("a", "bash", {"command": "one"})]), created=T0 + 1),
        _message(3, encode_parts([tool_call_part("a", "bash", {"command": "two"})]), created=T0 + 2),
        _message(4, encode_parts([tool_result_part("a", "bash", "first\nExit code 3")]), created=T0 + 3),
        _message(5, encode_parts([tool_result_part("a", "bash", "second")]), created=T0 + 4),
        _message(6, encode_parts([tool_result_part("a", "bash", "third")]), created=T0 + 5),   # orphan
        _message(7, encode_parts([tool_call_part("a", "bash", "not json")]), sid="t", created=T0),
    ]
    out, _ = _normalise(messages)
    rows = out["tool_calls"].select(["session_id", "message_id", "result_message_id", "command", "has_call",
                                     "result_text", "exit_code", "is_input_valid"]).to_pylist()
    assert [tuple(r.values()) for r in rows] == [
        ("s", None, "m1", None, False, "early", 0, None),  # sessions sort by id: "s" before "t"
        ("s", "m2", "m4", "one", True, "first\nExit code 3", 3, True),  # the exit line stays in the text
        ("s", "m3", "m5", "two", True, "second", 0, True),
        ("s", None, "m6", None, False, "third", 0, None),
        ("t", "m7", None, None, True, None, None, False),  # another session's call: never answered
    ]


def _landing(rows) -> dict[str, bytes]:
    return build_files(list(DATA_TABLES), rows, provider="crush", source_id="src", project="proj",
                       machine="m", user="u", landing_id="x").data


def test_the_writer_lands_a_table_exactly_as_it_lands_dicts():
    out, _ = _normalise([_message(1, encode_parts([text_part("hi")])), _message(2, encode_parts([]), created=None)],
                        [(1, "s", None, "t", 0, 0, 0, 0.5, T0, T0, None)])
    out["parts"] = out["parts"].append_column("project", pa.array(["other-project"], pa.string()))
    as_dicts = {name: data.to_pylist() for name, data in out.items()}
    assert _landing(out) == _landing(as_dicts)  # the same Parquet bytes, file by file
    built = build_files(list(DATA_TABLES), out, provider="crush", source_id="src", project="proj",
                        machine="m", user="u", landing_id="x")
    assert (built.undated, built.epoch_dated) == (1, 0)  # message 2 has no time: dated by its session
    messages = pq.read_table(pa.BufferReader(next(v for k, v in built.data.items() if k.endswith("/messages.parquet"))))
    session_day = datetime.fromtimestamp(T0, timezone.utc).date()
    assert messages.column("date").to_pylist() == [session_day, session_day]
    parts = pq.read_table(pa.BufferReader(next(v for k, v in built.data.items() if k.endswith("/parts.parquet"))))
    assert parts.column("project").to_pylist() == ["other-project"]  # a row's own project wins
    assert parts.schema.names[2:] == PARTS.column_names


def test_carry_forward_appends_the_lakes_rows_to_a_table(tmp_path):
    store = LocalStore(tmp_path / "lake", tmp_path / "staging")
    sessions = [(1, "kept", None, "t", 0, 0, 0, 0.5, T0, T0, None), (2, "gone", None, "t", 0, 0, 0, 0.5, T0, T0, None)]
    out, _ = _normalise([_message(1, encode_parts([text_part("a")]), sid="kept"),
                         _message(2, encode_parts([text_part("b")]), sid="gone")], sessions)
    files = _landing(out)
    store.put_all(files)
    now, _ = _normalise([_message(1, encode_parts([text_part("a")]), sid="kept")], sessions[:1])
    carried = carry_forward(store, {rel: "" for rel in files}, now)
    assert carried == {"sessions": 1, "messages": 1, "parts": 1}
    assert isinstance(now["parts"], pa.Table)
    assert now["parts"].column("session_id").to_pylist() == ["kept", "gone"]
    assert now["parts"].column("project").to_pylist() == [None, "proj"]  # the lake's row keeps its project


def test_a_gone_parent_stored_as_a_number_is_named_as_text():
    """SQLite's loose typing: a parent id stored as an INTEGER, its row pruned. The root is the
    parent as stored, as text (it once stayed an int and failed the whole source in the writer)."""
    out, _ = _normalise([], [(1, "child", 7, "t", 0, 0, 0, 0.5, T0, T0, None)])
    assert out["sessions"].select(["session_id", "parent_session_id", "root_session_id"]).to_pylist() == [
        {"session_id": "child", "parent_session_id": "7", "root_session_id": "7"}]


def test_odd_session_file_and_read_values_are_read_value_by_value():
    """Sessions, file versions and reads are built in columns too: a value of the wrong type is
    converted alone, as a row at a time converted it, and the ordinary values keep theirs."""
    sessions = [(1, "a", None, b"t\xff", "12", 3.0, 4, "free", 1_700_000_000_000, T0, "m1"),
                (2, 5, "a", "ok", 2, None, None, 0.25, T0, T0, None)]
    files = RawTable(["id", "session_id", "path", "content", "version", "created_at", "updated_at"],
                     [(1, "f1", "a", "src/x.py", "é", "3", T0, T0), (2, "f2", 5, b"y.py", None, 2, 0, None)])
    reads = RawTable(["session_id", "path", "read_at"], [(1, "a", "../z", T0 * 1000)])
    tables = {"sessions": RawTable(SESSION_COLS, sessions), "files": files, "read_files": reads,
              "messages": RawTable(MESSAGE_COLS, [])}
    out, findings = normalise_tables(tables, CTX)
    got = out["sessions"].to_pydict()
    assert got["session_id"] == ["a", "5"] and got["root_session_id"] == ["a", "a"]
    assert got["title"] == ["t\ufffd", "ok"]  # invalid UTF-8 replaced, the row kept
    assert got["message_count"] == [12, 2] and got["last_step_prompt_tokens"] == [3, None]
    assert got["cost_usd"] == [None, 0.25] and got["cost_source"] == ["unknown", "native"]
    assert got["created_at"][0] == _at(T0) and got["updated_at"][0] == _at(1_700_000_000)  # ms, detected
    assert "1 session costs that are not a number: cost unknown" in findings.notes
    files_out = out["file_versions"].to_pydict()
    assert files_out["path"] == ["/p/src/x.py", "/p/y.py"] and files_out["version"] == [3, 2]
    assert files_out["session_id"] == ["a", "5"] and files_out["size_bytes"] == [2, 0]
    assert files_out["created_at"] == [_at(T0), None]  # 0 is unset
    assert out["read_files"].to_pydict()["path"] == ["/z"]
    assert out["read_files"].to_pydict()["read_at"] == [_at(T0)]
    assert findings.non_second_timestamps == {"ms": 2}


def test_a_table_without_its_id_column_goes_to_quarantine_whole():
    """A store whose `files` table lost its `id` column cannot name a version: every row is
    kept in quarantine, with the reason, and the other tables are read as usual."""
    files = RawTable(["session_id", "path", "content", "version", "created_at", "updated_at"],
                     [(1, "a", "x.py", "one", 1, T0, T0), (2, "a", "x.py", "two", 2, T0, T0)])
    tables = {"sessions": RawTable(SESSION_COLS, [(1, "a", None, "t", 1, 0, 0, 0.5, T0, T0, None)]),
              "files": files, "messages": RawTable(MESSAGE_COLS, [])}
    out, findings = normalise_tables(tables, CTX)
    assert out["file_versions"].num_rows == 0 and out["sessions"].num_rows == 1
    assert out["quarantine"].column("error").to_pylist() == ["unreadable file row: 'id'"] * 2
    assert '"content": "two"' in out["quarantine"].column("raw").to_pylist()[1]
    assert findings.diverted["file_versions"] == 2
