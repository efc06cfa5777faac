"""pi's tools (packages/coding-agent/src/core/tools/*.ts): categories, and which argument holds a
command or a file. pi's built-in tools take `path` (`file_path` from older Claude-style
prompts is accepted too); `bash` takes `command`. Extensions register tools under any name;
an MCP adapter extension names them `mcp__<server>__<tool>` or `mcp_<server>_<tool>`."""

from transforms.tools import ToolVocabulary

_CATEGORY = {
    "bash": "shell",
    "read": "read", "ls": "read",
    "edit": "edit",
    "write": "write",
    "grep": "search", "find": "search",
    "subagent": "agent",  # the example sub-agent extension (examples/extensions/subagent)
    "todo": "todo",  # the example todo extension
}
TOOLS = ToolVocabulary(_CATEGORY, file_keys=("path", "file_path"), file_tools=frozenset({"read", "edit", "write"}))
tool_category = TOOLS.category  # the name every agent's tools module answers to
