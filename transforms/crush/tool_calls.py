"""Crush's tool_calls table, built from the parts table: each call joined to its result.

A call and its result are two parts, usually in two messages, matched by (session, call id):
in message order, a result takes the oldest call of its key still waiting (a call id may be
reused); a result with no waiting call is kept, flagged `has_call` false. Only the call and
result parts are looked at, a column at a time; the per-call work left in Python is what only
Python does exactly: the arguments' JSON-inside-JSON, and the bash output's tail.
"""

from collections import deque
from functools import lru_cache

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from transforms.contract import TOOL_CALLS
from transforms.crush.columns import as_text, assemble
from transforms.crush.tools import bash_exit_code, split_cwd, tool_category
from transforms.tools import compact_json, decode_input


def _decode(raw) -> dict | None:
    """transforms.tools.decode_input, with orjson first: it reads the ordinary arguments several
    times faster, and what it refuses (NaN, huge integers, lone surrogates) the standard library
    decodes exactly as before."""
    if isinstance(raw, str) and raw.strip():
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return decode_input(raw)
        return value if isinstance(value, dict) else None
    return decode_input(raw)


def tool_calls(parts: pa.Table, lineage: dict) -> pa.Table:
    """One row per call (in the order of the calls), orphan results where they occur."""
    kinds = parts.column("part_type")
    events = parts.filter(pc.and_(parts.column("is_known_type"),
                                  pc.is_in(kinds, pa.array(["tool_call", "tool_result"]))))
    is_call = [kind == "tool_call" for kind in events.column("part_type").to_pylist()]
    keys = list(zip(events.column("session_id").to_pylist(), events.column("tool_call_id").to_pylist()))
    names = events.column("tool_name").to_pylist()
    # each row: the event that made it (its call, or an orphan result) and its result's event
    first, result = [], []
    waiting: dict[tuple, deque] = {}
    for i, call in enumerate(is_call):
        if call:
            waiting.setdefault(keys[i], deque()).append(len(first))
            first.append(i)
            result.append(None)
            continue
        queue = waiting.get(keys[i])
        if queue:
            result[queue.popleft()] = i
        else:  # a result whose call is missing: keep it, flagged
            first.append(i)
            result.append(i)
    has_call = [is_call[i] for i in first]
    first_at, result_at = pa.array(first, pa.int64()), pa.array(result, pa.int64())
    made, answered = events.take(first_at), events.take(result_at)
    columns = {name: made.column(name) for name in ("source_rowid", "session_id", "tool_call_id", "tool_name")}
    columns.update(
        called_at=made.column("created_at"),
        message_id=pc.if_else(pa.array(has_call, pa.bool_()), made.column("message_id"), None),
        has_call=pa.array(has_call, pa.bool_()),
        has_result=pc.is_valid(result_at),
        result_message_id=answered.column("message_id"),
        result_at=answered.column("created_at"),
        is_error=answered.column("is_error"),
        tool_category=pa.array([_category(names[i]) for i in first], pa.string()),
    )
    inputs = events.column("tool_input").to_pylist()
    columns.update(_call_columns([inputs[i] if called else None for i, called in zip(first, has_call)],
                                 [names[i] for i in first], has_call))
    outputs = answered.column("tool_result").to_pylist()
    columns.update(_result_columns(outputs, answered.column("is_error").to_pylist(), [names[i] for i in first],
                                   result))
    return assemble(TOOL_CALLS, len(first), {**lineage, "source_table": "messages", **columns})


def _call_columns(raws: list, names: list, has_call: list) -> dict:
    """The arguments' columns: decoded once, exactly as transforms.tools.decode_input does."""
    decoded_text, valid, command, file_path = [], [], [], []
    for raw, name, called in zip(raws, names, has_call):
        decoded = _decode(raw) if called else None
        decoded_text.append(compact_json(decoded) if decoded is not None else None)
        valid.append(decoded is not None if called else None)
        command.append(as_text(decoded.get("command")) if decoded and name == "bash" else None)
        file_path.append(as_text(decoded.get("file_path")) if decoded else None)
    return {"input": pa.array(decoded_text, pa.string()), "input_raw": pa.array(raws, pa.string()),
            "is_input_valid": pa.array(valid, pa.bool_()), "command": pa.array(command, pa.string()),
            "file_path": pa.array(file_path, pa.string())}


def _result_columns(outputs: list, errors: list, names: list, result: list) -> dict:
    """The result's columns: the `<cwd>` tag split off, a bash exit code read from the tail."""
    texts, cwds, codes = [], [], []
    for content, is_error, name, answered in zip(outputs, errors, names, result):
        if answered is None:
            texts.append(None)
            cwds.append(None)
            codes.append(None)
            continue
        text, cwd = split_cwd(content or "")
        texts.append(text)
        cwds.append(cwd)
        codes.append(bash_exit_code(text, is_error) if name == "bash" else None)
    result_text = pa.array(texts, pa.string())
    return {"result_text": result_text, "result_cwd": pa.array(cwds, pa.string()),
            "exit_code": pa.array(codes, pa.int64()),
            "result_size": pc.binary_length(result_text).cast(pa.int64())}


@lru_cache(maxsize=4096)
def _category(name):
    return tool_category(name)
