"""Shared tool-call helpers: categories across providers, arguments stored as JSON text, and the
`tool_calls` rows of agents that write a call and its result apart."""

import json

from transforms import jsontext


def categorise(name: str | None, native: dict[str, str]) -> str:
    """One of contract.TOOL_CATEGORIES for a native tool name, given a provider's own map.

    MCP tools are `mcp_<server>_<tool>` (or `mcp__...`) for every agent we know.
    """
    if not name:
        return "other"
    if name.startswith("mcp_"):
        return "mcp"
    return native.get(name, "other")


def decode_input(raw) -> dict | None:
    """Tool arguments are often JSON text stored inside the record's JSON: decode that layer.

    Returns the object, or None when the text is empty (still streaming, killed) or not a JSON
    object. An object is returned as it is (agents that store it unencoded).
    """
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or not raw.strip():
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def compact_json(value) -> str:
    return jsontext.dumps(value)


def first_str(args: dict | None, keys: tuple[str, ...]) -> str | None:
    """The first of `keys` whose value is a string (agents name the same argument differently)."""
    if not args:
        return None
    for key in keys:
        if isinstance(args.get(key), str):
            return args[key]
    return None


# ------------------------------------------------------------------------- tool_calls rows
# For the agents whose transcripts hold a call and its result as two records (Amp, Droid,
# Copilot CLI). `base` is a row's lineage plus its `session_id`; `tools` is the agent's tools
# module (`tool_category`, `command_of`, `file_path_of`).

def call_row(base: dict, message_id, call_id, name, args, at, tools, category=None) -> tuple[str | None, dict]:
    """(the arguments as stored, the call's row)."""
    raw = args if isinstance(args, str) or args is None else compact_json(args)
    decoded = decode_input(args)
    row = {**base, "message_id": message_id, "tool_call_id": call_id, "tool_name": name,
           "tool_category": category or tools.tool_category(name),
           "input": compact_json(decoded) if decoded is not None else None, "input_raw": raw,
           "is_input_valid": decoded is not None, "command": tools.command_of(name, decoded),
           "file_path": tools.file_path_of(decoded), "has_call": True, "has_result": False, "called_at": at}
    return raw, row


def orphan_row(base: dict, call_id, at) -> dict:
    """A result whose call was not found: kept, flagged."""
    return {**base, "message_id": None, "tool_call_id": call_id, "tool_name": None, "tool_category": "other",
            "has_call": False, "called_at": at}


def add_result(call: dict, message_id, text: str | None, is_error, exit_code, at) -> None:
    call.update(result_message_id=message_id, has_result=True, is_error=is_error, exit_code=exit_code,
                result_text=text, result_size=len((text or "").encode("utf-8", "replace")), result_at=at)
