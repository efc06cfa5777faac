"""Codebuff's tools (common/src/tools/constants.ts in CodebuffAI/codebuff): categories, and which
argument holds a command or a file. A sub-agent shows as an `agent` block (spawned by
`spawn_agents`); MCP tools, where an agent template declares an MCP server, are `mcp__<server>__<tool>`."""

from transforms.tools import ToolVocabulary

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
TOOLS = ToolVocabulary(_CATEGORY, file_keys=("path", "file_path"), path_lists={"read_files": "paths"})
tool_category = TOOLS.category  # the name every agent's tools module answers to
