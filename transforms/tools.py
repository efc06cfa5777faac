"""Shared tool-call helpers: categories across providers, an agent's tools as data
(`ToolVocabulary`), arguments stored as JSON text, and the `tool_calls` rows of agents that write
a call and its result apart."""

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class ToolVocabulary:
    """One agent's tools as data: its tool names -> the shared categories, how it names an MCP
    tool, which argument holds a shell command or a file, and how a shell result states its exit
    code. The agent's folder keeps the table; what is read from a call is worked out here, the
    same way for every agent."""

    categories: Mapping[str, str]
    file_keys: tuple[str, ...] = ()
    command_keys: tuple[str, ...] = ("command",)
    # MCP names besides `mcp_...` (every agent's, see `categorise`): a prefix of the agent's own
    # (`mcp--<server>--<tool>`), or a separator anywhere but at the ends (`<server>__<tool>`)
    mcp_prefixes: tuple[str, ...] = ()
    mcp_separator: str | None = None
    # the tools whose command is kept; None: every tool in the `shell` category
    shell_tools: frozenset[str] | None = None
    # the tools whose file is kept; None: any tool's
    file_tools: frozenset[str] | None = None
    # a tool -> its argument that lists paths (the first string is the file)
    path_lists: Mapping[str, str] = field(default_factory=dict)
    # a tool -> its argument that lists file objects (the first object's `file_keys` name the file)
    file_lists: Mapping[str, str] = field(default_factory=dict)
    # what a shell tool's result text says of the exit code (its first group), for an agent that writes one
    exit_pattern: re.Pattern | None = None

    def __post_init__(self):
        if self.shell_tools is None:
            shell = frozenset(name for name, category in self.categories.items() if category == "shell")
            object.__setattr__(self, "shell_tools", shell)

    def category(self, name: str | None) -> str:
        if name and (name.startswith(self.mcp_prefixes)
                     or (self.mcp_separator and self.mcp_separator in name.strip("_"))):
            return "mcp"
        return categorise(name, self.categories)

    def command(self, name: str | None, args: dict | None) -> str | None:
        return first_str(args, self.command_keys) if name in self.shell_tools else None

    def file_path(self, name: str | None, args: dict | None) -> str | None:
        if self.file_tools is not None and name not in self.file_tools:
            return None
        args = args or {}
        if name in self.path_lists and isinstance(args.get(self.path_lists[name]), list):
            return next((path for path in args[self.path_lists[name]] if isinstance(path, str)), None)
        if name in self.file_lists and isinstance(args.get(self.file_lists[name]), list):
            files = args[self.file_lists[name]]
            first = files[0] if files else None
            return first_str(first if isinstance(first, dict) else None, self.file_keys)
        return first_str(args, self.file_keys)

    def exit_code(self, name: str | None, text: str | None) -> int | None:
        if self.exit_pattern is None or name not in self.shell_tools or not isinstance(text, str):
            return None
        found = self.exit_pattern.search(text)
        return int(found.group(1)) if found else None


# ------------------------------------------------------------------------- tool_calls rows
# For the agents whose transcripts hold a call and its result as two records (Amp, Droid,
# Copilot CLI, Kilo Code, pi). `base` is a row's lineage plus its `session_id`; `tools` is the
# agent's vocabulary.

def call_row(base: dict, message_id, call_id, name, args, at, tools: ToolVocabulary,
             category=None) -> tuple[str | None, dict]:
    """(the arguments as stored, the call's row)."""
    raw = args if isinstance(args, str) or args is None else compact_json(args)
    decoded = decode_input(args)
    row = {**base, "message_id": message_id, "tool_call_id": call_id, "tool_name": name,
           "tool_category": category or tools.category(name),
           "input": compact_json(decoded) if decoded is not None else None, "input_raw": raw,
           "is_input_valid": decoded is not None, "command": tools.command(name, decoded),
           "file_path": tools.file_path(name, decoded), "has_call": True, "has_result": False, "called_at": at}
    return raw, row


def orphan_row(base: dict, call_id, at) -> dict:
    """A result whose call was not found: kept, flagged."""
    return {**base, "message_id": None, "tool_call_id": call_id, "tool_name": None, "tool_category": "other",
            "has_call": False, "called_at": at}


def add_result(call: dict, message_id, text: str | None, is_error, exit_code, at) -> None:
    call.update(result_message_id=message_id, has_result=True, is_error=is_error, exit_code=exit_code,
                result_text=text, result_size=len((text or "").encode("utf-8", "replace")), result_at=at)
