"""Codebuff's tools (common/src/tools/constants.ts in CodebuffAI/codebuff): categories, and which
argument holds a command or a file. A sub-agent shows as an `agent` block (spawned by
`spawn_agents`); MCP tools, where an agent template declares an MCP server, are `mcp__<server>__<tool>`."""

from transforms.tools import categorise, first_str

_CATEGORY = {
    "run_terminal_command": "shell",
    "read_files": "read", "read_docs": "read", "browser_logs": "read", "list_directory": "read",
    "str_replace": "edit", "apply_patch": "edit",
    "write_file": "write",
    "code_search": "search", "find_files": "search", "glob": "search", "web_search": "search",
    "spawn_agents": "agent", "spawn_agents_async": "agent", "spawn_agent_inline": "agent", "agent": "agent",
    "create_plan": "todo", "add_subgoal": "todo", "update_subgoal": "todo", "write_todos": "todo",
    "think_deeply": "other", "end_turn": "other", "set_output": "other",
}
SHELL_TOOLS = frozenset(n for n, c in _CATEGORY.items() if c == "shell")
FILE_KEYS = ("path", "file_path")


def tool_category(name: str | None) -> str:
    if name and name.startswith("mcp__"):
        return "mcp"
    return categorise(name, _CATEGORY)


def command_of(name: str | None, args: dict | None) -> str | None:
    return first_str(args, ("command",)) if name in SHELL_TOOLS else None


def file_path_of(name: str | None, args: dict | None) -> str | None:
    if name == "read_files" and isinstance((args or {}).get("paths"), list):
        paths = [p for p in args["paths"] if isinstance(p, str)]
        return paths[0] if paths else None
    return first_str(args, FILE_KEYS)
