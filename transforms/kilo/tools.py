"""Kilo Code's tools (packages/types/src/tool.ts in Kilo-Org/kilocode-legacy): categories, and
which argument holds a command or a file. Native tool calls name MCP tools `mcp--<server>--<tool>`
(src/utils/mcp-name.ts); `use_mcp_tool` is the XML-protocol way to call one."""

import re

from transforms.tools import ToolVocabulary

_CATEGORY = {
    "execute_command": "shell",
    "read_file": "read", "list_files": "read", "list_code_definition_names": "read", "fetch_instructions": "read",
    "apply_diff": "edit", "search_and_replace": "edit", "search_replace": "edit", "edit_file": "edit",
    "fast_edit_file": "edit", "apply_patch": "edit", "insert_content": "edit",
    "write_to_file": "write", "delete_file": "write", "new_rule": "write", "generate_image": "write",
    "search_files": "search", "codebase_search": "search",
    "browser_action": "fetch",
    "use_mcp_tool": "mcp", "access_mcp_resource": "mcp",
    "new_task": "agent", "switch_mode": "agent",
    "update_todo_list": "todo",
}
TOOLS = ToolVocabulary(_CATEGORY, file_keys=("path", "file_path", "target_file"), mcp_prefixes=("mcp--",),
                       file_lists={"read_file": "files"},  # several files read at once: the first
                       exit_pattern=re.compile(r"Exit code: (-?\d+)"))
tool_category = TOOLS.category  # the name every agent's tools module answers to
