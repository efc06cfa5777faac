"""OpenCode's tool parts: native tool ids -> the shared categories, and one `tool_calls` row per
`tool` part (docs/FORMATS.md, "OpenCode: tools").

A tool part holds the call and its result together: `state.status` is pending, running,
completed or error. Ids are the `Tool.define` ids (`webfetch`, `todowrite`, `apply_patch`), not
the registry keys (`fetch`, `todo`, `patch`). MCP tools are `<server>_<tool>`, but so are plugin
tools (`<file>_<export>`) and `apply_patch`: without the user's MCP configuration a `_` proves
nothing, so such names stay `other`.
"""

from transforms.timestamps import from_epoch
from transforms.tools import ToolVocabulary, compact_json

_CATEGORY = {
    "bash": "shell",
    "read": "read", "list": "read", "lsp": "read",
    "write": "write",
    "edit": "edit", "multiedit": "edit", "apply_patch": "edit", "patch": "edit",
    "glob": "search", "grep": "search", "websearch": "search", "codesearch": "search",
    "webfetch": "fetch",
    "task": "agent",
    "todowrite": "todo", "todoread": "todo",
    "skill": "other", "question": "other", "batch": "other", "plan_exit": "other", "invalid": "other",
}
TOOLS = ToolVocabulary(_CATEGORY, file_keys=("filePath", "path", "file_path"))  # inputs are camelCase
tool_category = TOOLS.category  # the name every agent's tools module answers to
RESULT_STATUSES = ("completed", "error")


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _str(value) -> str | None:
    return value if isinstance(value, str) else None


def _json_or_none(value) -> str | None:
    return None if value is None else compact_json(value)


def state_of(part: dict) -> dict:
    return _dict(part.get("state"))


def result_text(state: dict) -> str | None:
    """What the tool returned: its output, or its error message."""
    if state.get("status") == "completed":
        return _str(state.get("output"))
    if state.get("status") == "error":
        return _str(state.get("error"))
    return None


def tool_part_columns(part: dict) -> dict:
    """The `parts` columns of a `tool` part."""
    state = state_of(part)
    status = state.get("status")
    return {
        "tool_call_id": _str(part.get("callID")), "tool_name": _str(part.get("tool")),
        "tool_input": _json_or_none(state.get("input")), "tool_result": result_text(state),
        "tool_result_metadata": _json_or_none(state.get("metadata")),
        "is_error": status == "error" if status in RESULT_STATUSES else None,
    }


def exit_code(name: str | None, state: dict) -> int | None:
    """bash records the exit code in `state.metadata.exit` (null when killed)."""
    if name != "bash":
        return None
    code = _dict(state.get("metadata")).get("exit")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def tool_call_row(part: dict, part_row: dict) -> dict:
    """One `tool_calls` row for a `tool` part; `part_row` is its `parts` row (lineage, ids)."""
    state = state_of(part)
    name = _str(part.get("tool"))
    args = state.get("input")
    args = args if isinstance(args, dict) else None
    has_result = state.get("status") in RESULT_STATUSES
    text = result_text(state) if has_result else None
    times = _dict(state.get("time"))
    lineage = {k: part_row[k] for k in ("provider", "source_id", "project_path", "source_table", "source_rowid")}
    if "project" in part_row:
        lineage["project"] = part_row["project"]
    return {
        **lineage, "session_id": part_row["session_id"], "message_id": part_row["message_id"],
        "result_message_id": part_row["message_id"] if has_result else None,
        "tool_call_id": _str(part.get("callID")), "tool_name": name, "tool_category": TOOLS.category(name),
        "input": compact_json(args) if args is not None else None, "input_raw": _json_or_none(state.get("input")),
        "is_input_valid": args is not None, "command": TOOLS.command(name, args),
        "file_path": TOOLS.file_path(name, args), "has_call": True, "has_result": has_result,
        "is_error": state.get("status") == "error" if has_result else None,
        "exit_code": exit_code(name, state) if has_result else None,
        "result_text": text, "result_size": len(text.encode("utf-8", "replace")) if text is not None else None,
        "called_at": from_epoch(times.get("start")) or part_row["created_at"],
        "result_at": from_epoch(times.get("end")) if has_result else None,
    }
