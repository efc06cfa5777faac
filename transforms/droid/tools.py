"""Factory Droid's tools (Claude Code-like names): categories, the command and file a call names.

A `tool_result` block carries `is_error` where the tool failed. MCP tools follow the
`mcp__<server>__<tool>` convention here (Droid's own naming is not in any source we could read).
"""

import re

from transforms.tools import ToolVocabulary

_CATEGORY = {
    "Execute": "shell", "Bash": "shell", "Shell": "shell",
    "Read": "read", "LS": "read", "View": "read",
    "Edit": "edit", "MultiEdit": "edit", "ApplyPatch": "edit",
    "Create": "write", "Write": "write",
    "Grep": "search", "Glob": "search", "WebSearch": "search",
    "FetchUrl": "fetch", "WebFetch": "fetch",
    "Task": "agent",
    "TodoWrite": "todo",
}
TOOLS = ToolVocabulary(_CATEGORY, file_keys=("file_path", "path", "filePath"), command_keys=("command", "cmd"),
                       exit_pattern=re.compile(r"(?:Exit code|exit code|Exit Code)[:\s]+(-?\d+)"))
tool_category = TOOLS.category  # the name every agent's tools module answers to
