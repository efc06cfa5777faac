"""Shared tool-call helpers: categories across providers, and arguments stored as JSON text."""

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
