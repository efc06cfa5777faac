"""Aider's in-chat commands (`aider/commands.py`, `cmd_<name>`): Aider has no model tool calls
(its edits are search/replace blocks in the reply), but the user's `/run`, `!` and `/test`
commands run a shell, and `/web` fetches a page: those are the session's tool calls. Aider has no
MCP tools."""

from transforms.tools import categorise

_CATEGORY = {
    "run": "shell", "test": "shell", "lint": "shell", "git": "shell",
    "web": "fetch",
    "add": "read", "read-only": "read", "ls": "read", "map": "read",
    "drop": "other", "undo": "edit", "commit": "other",
}
# the commands that become tool calls: a shell, or a page fetched
CALL_COMMANDS = ("run", "test", "web")


def tool_category(name: str | None) -> str:
    return categorise(name, _CATEGORY)


def command_of(text: str) -> tuple[str, str] | None:
    """(command name, its argument) of a user input that runs a command (`/run x`, `!x`,
    `/test x`, `/web url`); None for anything else."""
    text = text.strip()
    if text.startswith("!") and len(text) > 1:
        return "run", text[1:].strip()
    for name in CALL_COMMANDS:
        if text.startswith(f"/{name} ") and text[len(name) + 2:].strip():
            return name, text[len(name) + 2:].strip()
    return None
