"""Factory Droid's tools (Claude Code-like names): categories, the command and file a call names.

A `tool_result` block carries `is_error` where the tool failed. MCP tools follow the
`mcp__<server>__<tool>` convention here (Droid's own naming is not in any source we could read).
"""

import re

from transforms.tools import categorise, first_str

_CATEGORY = {
    "Execute": "shell", "Bash": "shell", "Shell": "shell",
    "Read": "read", "LS": "read", "View": "read",
    "Edit": "edit", "MultiEdit": "edit", "ApplyPatch": "edit",
    "Create": "write", "Write": "write",
    "Grep": "search", "Glob": "search", "WebSearch": "search",
    "FetchUrl": "fetch", "WebFetch": "fetch",
    "Task": "agent",
    "TodoWrite": "todo",
}
SHELL_TOOLS = frozenset(n for n, c in _CATEGORY.items() if c == "shell")
_EXIT = re.compile(r"(?:Exit code|exit code|Exit Code)[:\s]+(-?\d+)")


def tool_category(name: str | None) -> str:
    if name and name.startswith("mcp__"):
        return "mcp"
    return categorise(name, _CATEGORY)


def command_of(name: str | None, args: dict | None) -> str | None:
    return first_str(args, ("command", "cmd")) if name in SHELL_TOOLS else None


def file_path_of(args: dict | None) -> str | None:
    return first_str(args, ("file_path", "path", "filePath"))


def exit_code_of(name: str | None, text: str | None) -> int | None:
    if name not in SHELL_TOOLS or not isinstance(text, str):
        return None
    m = _EXIT.search(text)
    return int(m.group(1)) if m else None
