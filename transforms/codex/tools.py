"""Codex CLI's tools (docs/FORMATS.md, "Codex: tools"): categories, the command and file a call
names, and what a result says (exit code, whether the tool could run at all).

Codex persists no is_error flag. A shell command that ran and exited non-zero is NOT an error
(as with Crush: `exit_code` says it); `is_error` is true only when the tool itself could not run
(arguments it could not parse, an unknown tool, a patch that did not apply), else null.
"""

import re
import shlex

from transforms import jsontext
from transforms.tools import categorise, compact_json, decode_input, first_str

_CATEGORY = {
    "exec_command": "shell", "write_stdin": "shell", "shell": "shell", "shell_command": "shell",
    "local_shell": "shell", "container.exec": "shell", "exec": "shell",
    "view_image": "read", "read_file": "read", "list_dir": "read", "read_dir": "read",
    "apply_patch": "edit", "apply_diff": "edit",
    "write_file": "write",
    "grep_files": "search", "web_search": "search",
    "spawn_agent": "agent", "send_input": "agent", "wait": "agent", "wait_agent": "agent",
    "close_agent": "agent", "resume_agent": "agent",
    "update_plan": "todo",
}
SHELL_TOOLS = frozenset(n for n, c in _CATEGORY.items() if c == "shell")
FILE_KEYS = ("path", "file_path", "target_file")
# what Codex answers when a call never ran (codex-rs FunctionCallError::RespondToModel, apply_patch)
_NOT_RUN = ("failed to parse function arguments", "unsupported call", "unsupported custom tool call",
            "apply_patch verification failed")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$", re.MULTILINE)
# `exec_command` (unified exec) and `shell_command` write a header, then "Output:" and the output
_EXIT_LINE = re.compile(r"^(?:Process exited with code|Exit code:)\s*(-?\d+)\s*$", re.MULTILINE)
_OUTPUT_LINE = re.compile(r"^Output:$", re.MULTILINE)


def tool_name(item: dict) -> str | None:
    """The call's name; an MCP tool split into `namespace` + `name` is joined back."""
    name = item.get("name") if isinstance(item.get("name"), str) else None
    namespace = item.get("namespace")
    if isinstance(namespace, str) and namespace and name:
        return f"{namespace}__{name}"
    return name


def tool_category(name: str | None) -> str:
    # MCP: `mcp__<server>__<tool>` (newer), `<server>__<tool>` (older), `<namespace>__<name>`
    if name and "__" in name.strip("_"):
        return "mcp"
    return categorise(name, _CATEGORY)


def _argv(value) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return shlex.join(value)
    return None


def command_of(name: str | None, args: dict | None) -> str | None:
    """exec_command `cmd`, shell_command `command` (a string), legacy shell and local_shell
    `command` (an argv list, joined as a shell would read it)."""
    if not args or name not in SHELL_TOOLS:
        return None
    return _argv(args.get("cmd")) or _argv(args.get("command"))


def patch_files(patch: str | None) -> list[str]:
    return _PATCH_FILE.findall(patch) if isinstance(patch, str) else []


def file_path_of(name: str | None, args: dict | None) -> str | None:
    if name == "apply_patch":  # the patch text names the files: the first one is kept
        files = patch_files(first_str(args, ("input", "patch")))
        return files[0] if files else None
    return first_str(args, FILE_KEYS)


def exit_code_of(text: str | None) -> int | None:
    """The exit code a shell result reports: a header line before `Output:`, or the legacy
    `shell` JSON `{"output": ..., "metadata": {"exit_code": N}}`. Null when it reports none
    (a process still running, a command that never ran)."""
    if not isinstance(text, str):
        return None
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            doc = jsontext.loads(stripped)
        except (ValueError, RecursionError):
            doc = None
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        code = meta.get("exit_code") if isinstance(meta, dict) else None
        if exit_code(code) is not None:
            return code
    marker = _OUTPUT_LINE.search(text)
    header = text[: marker.start()] if marker else text[:2000]  # never the command's own output
    m = _EXIT_LINE.search(header)
    return exit_code(int(m.group(1))) if m else None


def exit_code(value) -> int | None:
    """An exit status, or None for anything a process cannot exit with."""
    ok = isinstance(value, int) and not isinstance(value, bool) and -(1 << 31) <= value < 1 << 32
    return value if ok else None


def failed_to_run(output, text: str | None) -> bool | None:
    """True when the tool could not run; null otherwise (Codex records no flag)."""
    if isinstance(output, dict) and output.get("success") is False:
        return True
    if isinstance(text, str) and text.lstrip().lower().startswith(_NOT_RUN):
        return True
    return None


def output_text(output) -> str | None:
    """A call output as text: a string, `{"content": ...}` (older), or content items."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        return output_text(output.get("content"))
    if isinstance(output, list):
        texts = [b.get("text") for b in output if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "\n".join(texts) if texts else jsontext.dumps(output)
    return None


def call_input(kind: str, p: dict) -> tuple[str | None, str | None, dict | None]:
    """(tool name, input as stored, decoded input) of a call item."""
    if kind == "function_call":
        raw = p.get("arguments")
        raw = raw if isinstance(raw, str) or raw is None else compact_json(raw)
        return tool_name(p), raw, decode_input(raw)
    if kind == "custom_tool_call":  # freeform input (a patch, a program): kept as {"input": text}
        raw = p.get("input") if isinstance(p.get("input"), str) else None
        return tool_name(p), raw, {"input": raw} if raw else None
    action = p.get("action")
    name = "local_shell" if kind == "local_shell_call" else "web_search"
    return name, compact_json(action) if action is not None else None, action if isinstance(action, dict) else None
