"""Goose's tools: every tool comes from an MCP extension and is named `<extension>__<tool>`
(`developer__shell`, `developer__text_editor`, `platform__manage_extensions`, ...). The built-in
extensions' tools map to the shared categories; any other extension's tool is `mcp`.

A call is a `toolRequest` content item (`toolCall` = `{"status": "success", "value": {"name",
"arguments"}}`, or `{"status": "error", "error"}` when the model's call could not be parsed); its
result a `toolResponse` with the same `id` in a later user message (`toolResult` =
`{"status": "success", "value": {"content": [...], "isError": bool}}`, older Goose: `value` is the
content list itself; or `{"status": "error", "error"}`). Goose records no exit code.
"""

from transforms.tools import categorise, compact_json, decode_input, first_str

# built-in extensions (goose-mcp and the platform extensions): their unknown tools are `other`
BUILTIN = frozenset({"developer", "platform", "computercontroller", "memory", "todo", "dynamic_task", "subagent",
                     "chatrecall", "extensionmanager", "autovisualiser", "tutorial", "skills", "code_execution",
                     "apps", "summon", "tom"})
_CATEGORY = {
    "shell": "shell", "automation_script": "shell",
    "text_editor": "edit", "edit": "edit",
    "write": "write",
    "tree": "read", "analyze": "read", "read": "read", "read_resource": "read", "list_resources": "read",
    "image_processor": "read", "screen_capture": "read", "list_windows": "read", "pdf_tool": "read",
    "docx_tool": "read", "xlsx_tool": "read", "cache": "read",
    "web_search": "search", "search_available_extensions": "search", "rg": "search", "glob": "search",
    "web_scrape": "fetch",
    "create_task": "agent", "execute_task": "agent", "subagent": "agent", "delegate": "agent",
    "todo_write": "todo", "todo_read": "todo", "write_todo": "todo",
}
SHELL_KEYS = ("command",)
FILE_KEYS = ("path", "file_path", "filePath")


def split_name(name: str | None) -> tuple[str | None, str | None]:
    """(extension, tool) of `<extension>__<tool>`; (None, name) for a bare name."""
    if not name or "__" not in name:
        return None, name
    extension, _, tool = name.partition("__")
    return extension, tool


def tool_category(name: str | None) -> str:
    extension, tool = split_name(name)
    if extension is not None and extension not in BUILTIN:
        return "mcp"  # a user-added MCP server's tool
    return categorise(tool, _CATEGORY)


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def call_of(item: dict) -> tuple[str | None, dict | None, str | None]:
    """(name, arguments, input as stored) of a `toolRequest` / `frontendToolRequest`."""
    call = _dict(item.get("toolCall"))
    value = _dict(call.get("value"))
    name = value.get("name") if isinstance(value.get("name"), str) else None
    args = value.get("arguments")
    error = call.get("error") if isinstance(call.get("error"), str) else None  # a call Goose could not parse
    stored = compact_json(args) if args is not None else error
    return name, args if isinstance(args, dict) else None, stored


def result_of(item: dict) -> tuple[str | None, bool | None]:
    """(text, is_error) of a `toolResponse`: the text items joined, or the error message."""
    result = _dict(item.get("toolResult"))
    if result.get("status") == "error":
        return (result.get("error") if isinstance(result.get("error"), str) else None), True
    value = result.get("value")
    contents = value if isinstance(value, list) else _dict(value).get("content")
    texts = [c.get("text") for c in contents or [] if isinstance(c, dict) and isinstance(c.get("text"), str)]
    flag = _dict(value).get("isError")
    return ("\n".join(texts) if texts else None), (flag if isinstance(flag, bool) else False)


def tool_call_row(call_part: dict | None, result_part: dict | None, lineage: dict) -> dict:
    """One `tool_calls` row from a call's `parts` row and its result's (either may be missing)."""
    base = call_part or result_part
    name = base["tool_name"]
    args = decode_input(call_part["tool_input"]) if call_part is not None else None
    _, tool = split_name(name)
    text = result_part["tool_result"] if result_part else None
    return {
        **lineage, "session_id": base["session_id"],
        "message_id": call_part["message_id"] if call_part else None,
        "result_message_id": result_part["message_id"] if result_part else None,
        "tool_call_id": base["tool_call_id"], "tool_name": name, "tool_category": tool_category(name),
        "input": compact_json(args) if args is not None else None,
        "input_raw": call_part["tool_input"] if call_part else None, "is_input_valid": args is not None,
        "command": first_str(args, SHELL_KEYS) if _CATEGORY.get(tool) == "shell" else None,
        "file_path": first_str(args, FILE_KEYS), "has_call": call_part is not None,
        "has_result": result_part is not None, "is_error": result_part["is_error"] if result_part else None,
        "exit_code": None, "result_text": text,
        "result_size": len(text.encode("utf-8", "replace")) if text is not None else None,
        "called_at": (call_part or result_part)["created_at"],
        "result_at": result_part["created_at"] if result_part else None,
    }

