"""Gemini CLI's tool names (packages/core/src/tools/definitions/base-declarations.ts, older
names kept) -> the shared categories; the command and file a call names; the exit code a shell
result reports.

MCP tools are `mcp_<server>_<tool>` (mcp-tool.ts); releases before that wrote `<server>__<tool>`.
Sub-agents run as tools named after the agent (`codebase_investigator`, `generalist`, ...) or
through `invoke_agent`/`delegate_to_agent`.
"""

from transforms.tools import ToolVocabulary

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
TOOLS = ToolVocabulary(_CATEGORY, file_keys=("file_path", "absolute_path", "path", "dir_path"),
                       mcp_separator="__")  # older MCP naming: <server>__<tool>
tool_category = TOOLS.category  # the name every agent's tools module answers to
