"""Crush's tools: their categories, and what its bash results say (exit code, cwd)."""

import re

from transforms.tools import categorise

# Native tool name -> category. Categories are shared by every provider (contract.TOOL_CATEGORIES).
_CATEGORY = {
    "bash": "shell", "job_output": "shell", "job_kill": "shell",
    "view": "read", "ls": "read", "diagnostics": "read", "lsp_diagnostics": "read",
    "edit": "edit", "multiedit": "edit", "lsp_rename": "edit", "lsp_replace_symbol": "edit",
    "write": "write",
    "glob": "search", "grep": "search", "sourcegraph": "search", "web_search": "search",
    "lsp_references": "search", "lsp_definition": "search", "lsp_symbols": "search",
    "lsp_call_hierarchy": "search",
    "fetch": "fetch", "download": "fetch", "web_fetch": "fetch",
    # both start a sub-agent session whose cost lands in the caller's
    "agent": "agent", "agentic_fetch": "agent",
    "todos": "todo",
    "list_mcp_resources": "mcp", "read_mcp_resource": "mcp",
}


def tool_category(name: str | None) -> str:
    return categorise(name, _CATEGORY)


# Crush appends "\n\n<cwd>dir</cwd>" last: anchor on that tag only, since the command's own
# output may contain "<cwd>" too
_CWD_TAIL = re.compile(r"\n\n<cwd>([^\n]*)</cwd>\s*\Z")
# and a real exit line always follows a newline; a command printing "Exit code 3" is not one
_EXIT_TAIL = re.compile(r"\nExit code (-?\d+)\s*\Z")
_ABORTED_TAIL = "Command was aborted before completion"
_BACKGROUND = ("Background shell started with ID:", "Command is taking longer than expected")


def split_cwd(content: str) -> tuple[str, str | None]:
    """Strip the `<cwd>dir</cwd>` tag Crush appends to bash output; return (text, cwd)."""
    m = _CWD_TAIL.search(content)
    if not m:
        return content, None
    return content[: m.start()], m.group(1)


def bash_exit_code(text: str, is_error: bool | None) -> int | None:
    """Exit code of a bash result whose `<cwd>` tag is already stripped.

    Crush reports a non-zero exit as a trailing `Exit code N` and leaves is_error false. Null
    when the tool itself failed, the command was aborted or moved to the background.
    """
    if is_error:
        return None
    stripped = text.rstrip()
    m = _EXIT_TAIL.search(stripped)
    if m:
        return int(m.group(1))
    if stripped.endswith(_ABORTED_TAIL) or stripped.startswith(_BACKGROUND):
        return None
    return 0
