"""Gemini CLI's tool names (packages/core/src/tools/definitions/base-declarations.ts, older
names kept) -> the shared categories; the command and file a call names; the exit code a shell
result reports.

MCP tools are `mcp_<server>_<tool>` (mcp-tool.ts); releases before that wrote `<server>__<tool>`.
Sub-agents run as tools named after the agent (`codebase_investigator`, `generalist`, ...) or
through `invoke_agent`/`delegate_to_agent`.
"""

from transforms.tools import categorise, first_str

_CATEGORY = {
    "run_shell_command": "shell",
    "read_file": "read", "read_many_files": "read", "list_directory": "read", "get_internal_docs": "read",
    "read_mcp_resource": "read", "list_mcp_resources": "read",
    "replace": "edit", "edit": "edit",
    "write_file": "write",
    "glob": "search", "grep_search": "search", "search_file_content": "search", "grep": "search",
    "google_web_search": "search",
    "web_fetch": "fetch",
    "invoke_agent": "agent", "delegate_to_agent": "agent", "codebase_investigator": "agent",
    "generalist": "agent", "cli_help": "agent", "complete_task": "agent",
    "write_todos": "todo", "tracker_create_task": "todo", "tracker_update_task": "todo",
    "tracker_get_task": "todo", "tracker_list_tasks": "todo", "tracker_add_dependency": "todo",
    "tracker_visualize": "todo",
}
SHELL_TOOLS = frozenset(n for n, c in _CATEGORY.items() if c == "shell")
FILE_KEYS = ("file_path", "absolute_path", "path", "dir_path")


def tool_category(name: str | None) -> str:
    if name and "__" in name.strip("_"):  # older MCP naming: <server>__<tool>
        return "mcp"
    return categorise(name, _CATEGORY)


def command_of(name: str | None, args: dict | None) -> str | None:
    return first_str(args, ("command",)) if name in SHELL_TOOLS else None


def file_path_of(args: dict | None) -> str | None:
    return first_str(args, FILE_KEYS)
