"""Cursor agent's tools, by the names the peers see in its transcripts (agentsview
`NormalizeToolCategory`: `Shell`, `StrReplace`, `LS`; Claude-style `Read`, `Write`, `Grep`,
`Glob`, ...). Cursor is closed source: names not seen by a peer are `other`. Its MCP naming is
not known from any peer; a `mcp_`/`mcp__` prefix is taken as MCP, as for the other agents."""

from transforms.tools import ToolVocabulary

_CATEGORY = {
    "Shell": "shell", "Bash": "shell", "run_terminal_cmd": "shell",
    "Read": "read", "ReadFile": "read", "LS": "read", "read_file": "read", "list_dir": "read",
    "StrReplace": "edit", "Edit": "edit", "MultiEdit": "edit", "EditNotebook": "edit", "edit_file": "edit",
    "search_replace": "edit", "Delete": "edit", "delete_file": "edit",
    "Write": "write", "write": "write",
    "Grep": "search", "Glob": "search", "codebase_search": "search", "grep_search": "search",
    "file_search": "search", "WebSearch": "search", "web_search": "search",
    "WebFetch": "fetch",
    "Task": "agent",
    "TodoWrite": "todo", "todo_write": "todo",
}
TOOLS = ToolVocabulary(_CATEGORY, file_keys=("path", "file_path", "target_file", "filePath"),
                       command_keys=("command", "cmd"))
tool_category = TOOLS.category  # the name every agent's tools module answers to
