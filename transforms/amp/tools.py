"""Amp's tools: categories, the command and file a call names, what a result says.

A `tool_result` block holds a `run` with a `status` (`done`, `error`, `cancelled`,
`rejected-by-user`, ...); anything but `done` is a tool-level error. A Bash run's `result` is
`{"output": ..., "exitCode": N}`. MCP tools are named `mcp__<server>__<tool>` by convention here
(Amp's own naming is not documented in any source we could read).
"""

from transforms import jsontext
from transforms.tools import ToolVocabulary

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
TOOLS = ToolVocabulary(_CATEGORY, file_keys=("path", "file_path", "filePath"), command_keys=("cmd", "command"))
tool_category = TOOLS.category  # the name every agent's tools module answers to
ERROR_STATUSES = frozenset({"error", "cancelled", "rejected-by-user", "blocked-on-user"})


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
