"""pi's tools (packages/coding-agent/src/core/tools/*.ts): categories, and which argument holds a
command or a file. pi's built-in tools take `path` (`file_path` from older Claude-style
prompts is accepted too); `bash` takes `command`. Extensions register tools under any name;
an MCP adapter extension names them `mcp__<server>__<tool>` or `mcp_<server>_<tool>`."""

from transforms.tools import categorise, first_str

_CATEGORY = {
    "bash": "shell",
    "read": "read", "ls": "read",
    "edit": "edit",
    "write": "write",
    "grep": "search", "find": "search",
    "subagent": "agent",  # the example sub-agent extension (examples/extensions/subagent)
    "todo": "todo",  # the example todo extension
}
SHELL_TOOLS = frozenset(n for n, c in _CATEGORY.items() if c == "shell")
FILE_KEYS = ("path", "file_path")
FILE_TOOLS = frozenset({"read", "edit", "write"})


def tool_category(name: str | None) -> str:
    if name and name.startswith("mcp__"):
        return "mcp"
    return categorise(name, _CATEGORY)


def command_of(name: str | None, args: dict | None) -> str | None:
    return first_str(args, ("command",)) if name in SHELL_TOOLS else None


def file_path_of(name: str | None, args: dict | None) -> str | None:
    return first_str(args, FILE_KEYS) if name in FILE_TOOLS else None
