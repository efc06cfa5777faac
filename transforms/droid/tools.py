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
TOOLS = ToolVocabulary(_CATEGORY, file_keys=("file_path", "path", "filePath"), command_keys=("command", "cmd"))
tool_category = TOOLS.category  # the name every agent's tools module answers to
_EXIT = re.compile(r"(?:Exit code|exit code|Exit Code)[:\s]+(-?\d+)")


def exit_code_of(name: str | None, text: str | None) -> int | None:
    if name not in TOOLS.shell_tools or not isinstance(text, str):
        return None
    m = _EXIT.search(text)
    return int(m.group(1)) if m else None
