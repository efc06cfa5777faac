"""Crush's `messages.parts` JSON: parse it and give each part its typed columns.

The column holds `[{"type": kind, "data": {...}}, ...]` written by Go's encoding/json. Tool
inputs and result metadata are JSON text inside that JSON; they stay text here and are decoded
where they are used (transforms.tools).
"""

from transforms import jsontext
from transforms.timestamps import from_epoch
from transforms.tools import compact_json

KNOWN_TYPES = frozenset(
    {"text", "reasoning", "image_url", "binary", "tool_call", "tool_result", "finish", "shell_command"}
)


class PartsError(ValueError):
    """The parts text is not a JSON array; the message goes to quarantine."""


def parse_parts(text) -> list:
    if text is None:
        raise PartsError("parts is NULL")
    if isinstance(text, bytes):  # stored as a BLOB
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise PartsError(f"parts is a {type(text).__name__}, not JSON text")
    try:
        value = jsontext.loads(text)
    except (ValueError, RecursionError) as exc:
        raise PartsError(f"parts is not valid JSON: {exc}") from None
    if not isinstance(value, list):
        raise PartsError(f"parts is a JSON {type(value).__name__}, not an array")
    return value


def _s(v):
    """A string column: strings as they are, other JSON values as JSON text."""
    if v is None or isinstance(v, str):
        return v
    return compact_json(v)


def _i(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int) and -(2**63) <= v < 2**63:
        return v
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
        return int(v)
    return None


def _b(v):
    return v if isinstance(v, bool) else None


def _base64_size(data) -> int | None:
    if not isinstance(data, str):
        return None
    n = len(data.rstrip("="))
    return n * 3 // 4


def part_columns(part, counter: dict) -> dict:
    """Typed columns of one part. Unknown shapes yield just the part types (and raw, elsewhere)."""
    if not isinstance(part, dict):
        return {"part_type": "other", "native_part_type": None, "is_known_type": False}
    kind = part.get("type")
    data = part.get("data")
    known = isinstance(kind, str) and kind in KNOWN_TYPES
    # Crush's names are the canonical vocabulary (contract.PART_TYPES): an unknown one is `other`
    cols = {"part_type": kind if known else "other", "native_part_type": _s(kind), "is_known_type": known}
    if not isinstance(data, dict):
        cols["is_known_type"] = False  # a known name with a shape we cannot read
        return cols
    if kind == "text":
        cols["text"] = _s(data.get("text"))
    elif kind == "reasoning":
        cols["reasoning"] = _s(data.get("thinking"))
        cols["reasoning_started_at"] = from_epoch(data.get("started_at"), counter)
        cols["reasoning_finished_at"] = from_epoch(data.get("finished_at"), counter)
    elif kind == "tool_call":
        cols["tool_call_id"] = _s(data.get("id"))
        cols["tool_name"] = _s(data.get("name"))
        cols["tool_input"] = _s(data.get("input"))
    elif kind == "tool_result":
        cols["tool_call_id"] = _s(data.get("tool_call_id"))
        cols["tool_name"] = _s(data.get("name"))
        cols["tool_result"] = _s(data.get("content"))
        cols["tool_result_metadata"] = _s(data.get("metadata"))
        cols["is_error"] = _b(data.get("is_error"))
        cols["mime_type"] = _s(data.get("mime_type")) or None
    elif kind == "finish":
        cols["finish_reason"] = _s(data.get("reason"))
        cols["finish_time"] = from_epoch(data.get("time"), counter)
        cols["finish_message"] = _s(data.get("message"))
        cols["finish_details"] = _s(data.get("details"))
    elif kind == "binary":
        cols["binary_path"] = _s(data.get("Path"))
        cols["mime_type"] = _s(data.get("MIMEType"))
        cols["binary_size"] = _base64_size(data.get("Data"))
    elif kind == "image_url":
        cols["url"] = _s(data.get("url"))
    elif kind == "shell_command":
        cols["shell_command"] = _s(data.get("command"))
        cols["shell_output"] = _s(data.get("output"))
        cols["shell_exit_code"] = _i(data.get("exit_code"))
    return cols
