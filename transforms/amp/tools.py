"""Amp's tools: categories, the command and file a call names, what a result says.

A `tool_result` block holds a `run` with a `status` (`done`, `error`, `cancelled`,
`rejected-by-user`, ...); anything but `done` is a tool-level error. A Bash run's `result` is
`{"output": ..., "exitCode": N}`. MCP tools are named `mcp__<server>__<tool>` by convention here
(Amp's own naming is not documented in any source we could read).
"""

from transforms import jsontext
from transforms.tools import categorise, first_str

_CATEGORY = {
    "Bash": "shell", "bash": "shell", "shell_command": "shell",
    "Read": "read", "read_file": "read", "list_directory": "read", "read_mcp_resource": "read",
    "get_diagnostics": "read", "look_at": "read",
    "edit_file": "edit", "undo_edit": "edit", "format_file": "edit", "apply_patch": "edit",
    "create_file": "write",
    "Grep": "search", "grep": "search", "glob": "search", "codebase_search_agent": "search", "finder": "search",
    "web_search": "search",
    "read_web_page": "fetch",
    "Task": "agent", "oracle": "agent", "librarian": "agent",
    "todo_write": "todo", "todo_read": "todo",
}
SHELL_TOOLS = frozenset(n for n, c in _CATEGORY.items() if c == "shell")
ERROR_STATUSES = frozenset({"error", "cancelled", "rejected-by-user", "blocked-on-user"})


def tool_category(name: str | None) -> str:
    if name and name.startswith("mcp__"):
        return "mcp"
    return categorise(name, _CATEGORY)


def command_of(name: str | None, args: dict | None) -> str | None:
    return first_str(args, ("cmd", "command")) if name in SHELL_TOOLS else None


def file_path_of(args: dict | None) -> str | None:
    return first_str(args, ("path", "file_path", "filePath"))


def result_text(run: dict) -> str | None:
    """The result as text: a string, a Bash `output`, else the JSON of what was stored."""
    result = run.get("result", run.get("progress"))
    if isinstance(result, str):
        return result
    if isinstance(result, dict) and isinstance(result.get("output"), str):
        return result["output"]
    if result is None:
        error = run.get("error")
        return error if isinstance(error, str) else (jsontext.dumps(error) if error is not None else None)
    return jsontext.dumps(result)


def exit_code_of(run: dict) -> int | None:
    result = run.get("result")
    code = result.get("exitCode") if isinstance(result, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None
