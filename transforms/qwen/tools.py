"""Qwen Code's tool names (packages/core/src/tools/tool-names.ts, older names kept) -> the shared
categories; the command and file a call names.

MCP tools are `mcp__<server>__<tool>`, older releases `<server>__<tool>` (Gemini CLI's naming
before its fork); sub-agents run through `task` (older) or `agent`.
"""

from transforms.tools import ToolVocabulary

_CATEGORY = {
    "run_shell_command": "shell", "exec": "shell", "monitor": "shell",
    "read_file": "read", "read_many_files": "read", "read_data_file": "read", "list_directory": "read",
    "lsp": "read", "read_mcp_resource": "read", "zoom_image": "read",
    "edit": "edit", "replace": "edit", "notebook_edit": "edit",
    "write_file": "write",
    "glob": "search", "grep_search": "search", "search_file_content": "search", "web_search": "search",
    "tool_search": "search",
    "web_fetch": "fetch",
    "task": "agent", "agent": "agent", "create_sub_session": "agent", "send_message": "agent",
    "team_create": "agent", "team_delete": "agent", "list_agents": "agent",
    "todo_write": "todo", "task_create": "todo", "task_update": "todo", "task_list": "todo", "task_stop": "todo",
}
TOOLS = ToolVocabulary(_CATEGORY, file_keys=("file_path", "absolute_path", "path", "notebook_path"),
                       mcp_separator="__")  # mcp__<server>__<tool>, or <server>__<tool>
tool_category = TOOLS.category  # the name every agent's tools module answers to
