"""Kimi CLI's tool names (src/kimi_cli/tools/*: each tool's `name`) -> the shared categories; the
command and file a call names. An MCP tool keeps its server's bare tool name (soul/toolset.py
MCPTool): it cannot be told from a name alone and is `other`."""

from transforms.tools import categorise, first_str

_CATEGORY = {
    "Shell": "shell", "TaskOutput": "shell", "TaskStop": "shell", "TaskList": "shell",
    "ReadFile": "read", "ReadMediaFile": "read",
    "StrReplaceFile": "edit",
    "WriteFile": "write",
    "Glob": "search", "Grep": "search", "SearchWeb": "search",
    "FetchURL": "fetch",
    "Agent": "agent", "Task": "agent", "SendDMail": "agent",
    "SetTodoList": "todo",
}
SHELL_TOOLS = frozenset({"Shell"})
FILE_KEYS = ("path", "file_path")


def tool_category(name: str | None) -> str:
    return categorise(name, _CATEGORY)


def command_of(name: str | None, args: dict | None) -> str | None:
    return first_str(args, ("command",)) if name in SHELL_TOOLS else None


def file_path_of(args: dict | None) -> str | None:
    return first_str(args, FILE_KEYS)
