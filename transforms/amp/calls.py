"""The `tool_calls` rows of a call and of its result, for the agents whose transcripts hold a
call and its result as two records (Amp, Droid, Copilot CLI). `base` is a row's lineage plus its
`session_id`; `tools` is the agent's tools module (`tool_category`, `command_of`, `file_path_of`)."""

from transforms.tools import compact_json, decode_input


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
