"""Kilo Code's tools (packages/types/src/tool.ts in Kilo-Org/kilocode-legacy): categories, and
which argument holds a command or a file. Native tool calls name MCP tools `mcp--<server>--<tool>`
(src/utils/mcp-name.ts); `use_mcp_tool` is the XML-protocol way to call one."""

from transforms.tools import categorise, first_str

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
SHELL_TOOLS = frozenset(n for n, c in _CATEGORY.items() if c == "shell")
FILE_KEYS = ("path", "file_path", "target_file")


def tool_category(name: str | None) -> str:
    if name and name.startswith("mcp--"):
        return "mcp"
    return categorise(name, _CATEGORY)


def command_of(name: str | None, args: dict | None) -> str | None:
    return first_str(args, ("command",)) if name in SHELL_TOOLS else None


def file_path_of(name: str | None, args: dict | None) -> str | None:
    if name == "read_file" and isinstance((args or {}).get("files"), list):  # several files: the first
        first = args["files"][0] if args["files"] else None
        return first_str(first if isinstance(first, dict) else None, FILE_KEYS)
    return first_str(args, FILE_KEYS)
