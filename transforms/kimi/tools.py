"""Kimi CLI's tool names (src/kimi_cli/tools/*: each tool's `name`) -> the shared categories; the
command and file a call names. An MCP tool keeps its server's bare tool name (soul/toolset.py
MCPTool): it cannot be told from a name alone and is `other`."""

from transforms.tools import ToolVocabulary

_CATEGORY = {
    "Shell": "shell", "TaskOutput": "shell", "TaskStop": "shell", "TaskList": "shell",
    "ReadFile": "read", "ReadMediaFile": "read",
    "StrReplaceFile": "edit",
    "WriteFile": "write",
    "Glob": "search", "Grep": "search", "SearchWeb": "search",
    "FetchURL": "fetch",
    "Agent": "agent", "Task": "agent", "SendDMail": "agent",
    "SetTodoList": "todo",
}
# a command and its exit code are read from `Shell` calls only
TOOLS = ToolVocabulary(_CATEGORY, file_keys=("path", "file_path"), shell_tools=frozenset({"Shell"}))
tool_category = TOOLS.category  # the name every agent's tools module answers to
