"""GitHub Copilot CLI's tools: categories, the command and file a call names, a shell exit code.

MCP tools are named `<server>-<tool>` (`github-mcp-server-get_issue`), which a name alone cannot
tell from a built-in tool; the call's `mcpServerName` says it (transforms.copilot.normalise).
A shell result ends with `<exited with exit code N>`; `success: false` is the tool-level error
(a command that ran and exited non-zero is not an error: `exit_code` says it).
"""

import re

from transforms.tools import ToolVocabulary, decode_input

_CATEGORY = {
    "bash": "shell", "read_bash": "shell", "write_bash": "shell", "stop_bash": "shell", "list_bash": "shell",
    "powershell": "shell", "read_powershell": "shell", "write_powershell": "shell", "stop_powershell": "shell",
    "list_powershell": "shell",
    "view": "read", "show_file": "read",
    "edit": "edit", "str_replace_editor": "edit", "str_replace": "edit", "apply_patch": "edit",
    "create": "write",
    "grep": "search", "glob": "search", "rg": "search", "web_search": "search",
    "web_fetch": "fetch", "fetch_copilot_cli_documentation": "fetch",
    "task": "agent", "read_agent": "agent", "list_agents": "agent",
    "update_todo": "todo", "report_intent": "other", "think": "other",
}
TOOLS = ToolVocabulary(_CATEGORY, file_keys=("path", "file_path", "filePath"),
                       exit_pattern=re.compile(r"<exited with exit code (-?\d+)>\s*$"))
tool_category = TOOLS.category  # the name every agent's tools module answers to


def call_category(name: str | None, args) -> str | None:
    """A category the arguments decide, else None (the name's): `str_replace_editor`, the one
    file tool of the first releases, only reads with `command: view`."""
    if name == "str_replace_editor" and (decode_input(args) or {}).get("command") == "view":
        return "read"
    return None
