"""Antigravity's tool names, for the shared categories. No tool call is read from the store today
(the CLI database's conversation content is not decoded: see transforms.antigravity.normalise);
the map is kept for when it is, from the tool names Antigravity shows in its UI and docs."""

from transforms.tools import categorise

_CATEGORY = {
    "run_command": "shell",
    "view_file": "read", "list_dir": "read", "view_file_outline": "read",
    "replace_file_content": "edit", "multi_replace_file_content": "edit",
    "write_to_file": "write",
    "grep_search": "search", "find_by_name": "search", "search_web": "search", "codebase_search": "search",
    "read_url_content": "fetch", "browser_subagent": "agent",
}


def tool_category(name: str | None) -> str:
    return categorise(name, _CATEGORY)
