"""Claude Code message content: a message from its lines, its parts, and tool calls joined with
their results; Claude's tool names -> the shared categories (docs/FORMATS.md,
"Claude Code: tools").

`native_part_type` is Claude's own block type (`text`, `thinking`, `tool_use`, `tool_result`, ...);
`part_type` is the canonical name (contract.PART_TYPES, see `PART_TYPES` below).
A `tool_result` arrives in a later `user` line, with the tool's own account of the run beside
it in `toolUseResult` (kept as the part's metadata, never added to any usage: an Agent/Task
result repeats its sub-agent's token totals, which the sub-agent's own transcript holds).
A user line is a prompt (`user`) only when typed: tool results are `tool`; meta and command
lines, interruptions and compact summaries are `system`.
"""

import re

from transforms.findings import Findings
from transforms.tools import categorise, compact_json, first_str

NOT_PROMPTS = ("<command-", "<local-command-", "[Request interrupted", "<task-notification>",
               "This session is being continued", "Caveat: The messages below")
# line fields with a canonical column (or used to place the line): not repeated in extra_columns
MAPPED_KEYS = frozenset({
    "type", "uuid", "timestamp", "message", "sessionId", "requestId", "agentId", "isSidechain", "cwd",
    "version", "gitBranch", "userType", "toolUseResult", "isCompactSummary", "isMeta", "costUSD",
})
# documented line fields without a column: kept in extra_columns, not reported as unknown
KEPT_KEYS = frozenset({
    "parentUuid", "logicalParentUuid", "isApiErrorMessage", "durationMs", "slug", "level", "todos",
    "isVisibleInTranscriptOnly", "sourceToolUseID", "toolUseID", "thinkingMetadata", "permissionMode",
    "imagePasteIds", "error", "apiError", "planContent", "requestDuration", "promptId", "entrypoint",
    "sourceToolAssistantUUID", "origin", "promptSource", "effort",
})

_CATEGORY = {
    "Bash": "shell", "BashOutput": "shell", "KillShell": "shell", "KillBash": "shell",
    "Read": "read", "LS": "read", "NotebookRead": "read",
    "Write": "write",
    "Edit": "edit", "MultiEdit": "edit", "NotebookEdit": "edit",
    "Glob": "search", "Grep": "search", "WebSearch": "search", "web_search": "search",
    "WebFetch": "fetch", "web_fetch": "fetch",
    "Task": "agent", "Agent": "agent",
    "TodoWrite": "todo", "TodoRead": "todo",
}
FILE_KEYS = ("file_path", "path", "notebook_path")
CALL_TYPES = ("tool_use", "server_tool_use")
RESULT_TYPES = ("tool_result", "web_search_tool_result", "web_fetch_tool_result")
# Claude's block type -> the canonical part type
PART_TYPES = {"text": "text", "thinking": "reasoning", "redacted_thinking": "reasoning", "image": "binary",
              "document": "binary", **{t: "tool_call" for t in CALL_TYPES}, **{t: "tool_result" for t in RESULT_TYPES}}
KNOWN_TYPES = frozenset(PART_TYPES)
_EXIT_CODE = re.compile(r"^Exit code (-?\d+)")


def tool_category(name: str | None) -> str:
    return categorise(name, _CATEGORY)  # `mcp__<server>__<tool>` -> mcp


def _str(v):
    return v if isinstance(v, str) else None


def _stored(value) -> str | None:
    """A value as stored: text as is, anything else as compact JSON."""
    return value if isinstance(value, str) or value is None else compact_json(value)


def part_columns(block, findings: Findings, tool_use_result=None) -> dict:
    """The typed columns of one content block (a user's plain-string prompt is a `text` block)."""
    if isinstance(block, str):
        return {"part_type": "text", "native_part_type": "text", "is_known_type": True, "text": block}
    if not isinstance(block, dict):
        findings.unknown_part_types[None] += 1
        return {"part_type": "other", "native_part_type": None, "is_known_type": False}
    kind = _str(block.get("type"))
    cols = {"part_type": PART_TYPES.get(kind, "other"), "native_part_type": kind, "is_known_type": kind in KNOWN_TYPES}
    if not cols["is_known_type"]:
        findings.unknown_part_types[kind] += 1
    if kind == "text":
        cols["text"] = _str(block.get("text"))
    elif kind == "thinking":
        cols["reasoning"] = _str(block.get("thinking"))
    elif kind in CALL_TYPES:
        cols.update(tool_call_id=_str(block.get("id")), tool_name=_str(block.get("name")),
                    tool_input=_stored(block.get("input")))
    elif kind in RESULT_TYPES:
        cols.update(tool_call_id=_str(block.get("tool_use_id")), tool_result=_stored(block.get("content")),
                    is_error=bool(block.get("is_error", False)),
                    tool_result_metadata=_stored(tool_use_result) if kind == "tool_result" else None)
    elif kind in ("image", "document"):
        source = block.get("source")
        cols["mime_type"] = _str(source.get("media_type")) if isinstance(source, dict) else None
    return cols


def result_text(content) -> str:
    """A result's text: the string, or the text items of a content array joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(c["text"] for c in content if isinstance(c, dict) and isinstance(c.get("text"), str))
    return ""


def _exit_code(category: str, text: str, is_error: bool, metadata) -> int | None:
    """Bash: `Exit code N` at the head of a failed result; 0 for a success; null when
    interrupted, or failed without saying how."""
    if category != "shell":
        return None
    if isinstance(metadata, dict) and metadata.get("interrupted") is True:
        return None
    m = _EXIT_CODE.match(text)
    if m:
        return int(m.group(1))
    return None if is_error else 0


def _call(part: dict) -> dict:
    args = part["_input"]
    name = part.get("tool_name")
    category = tool_category(name)
    return {
        **part["_lineage"], "session_id": part["session_id"], "message_id": part["message_id"],
        "tool_call_id": part.get("tool_call_id"), "tool_name": name, "tool_category": category,
        "input": compact_json(args) if isinstance(args, dict) else None, "input_raw": part.get("tool_input"),
        "is_input_valid": isinstance(args, dict),
        "command": first_str(args, ("command",)) if category == "shell" and isinstance(args, dict) else None,
        "file_path": first_str(args, FILE_KEYS) if isinstance(args, dict) else None,
        "has_call": True, "has_result": False, "called_at": part["created_at"],
    }


def join_tool_calls(parts: list[dict]) -> list[dict]:
    """One row per call, joined to its result by (session, call id); orphan results kept.

    `parts` are in message order and carry `_input` (the decoded arguments), `_content` (the
    raw result content) and `_lineage`; the result part gets its call's tool name.
    """
    calls: dict[tuple, dict] = {}
    out = []
    for part in parts:
        if part["native_part_type"] in CALL_TYPES:
            call = _call(part)
            out.append(call)
            calls.setdefault((part["session_id"], part.get("tool_call_id")), call)
    for part in parts:
        if part["native_part_type"] not in RESULT_TYPES:
            continue
        call = calls.pop((part["session_id"], part.get("tool_call_id")), None)
        if call is None:  # a result whose call is missing (or answered twice): kept, flagged
            call = {**part["_lineage"], "session_id": part["session_id"], "message_id": None,
                    "tool_call_id": part.get("tool_call_id"), "tool_name": None, "tool_category": "other",
                    "has_call": False, "called_at": part["created_at"]}
            out.append(call)
        part["tool_name"] = call["tool_name"]
        text = result_text(part["_content"])
        call.update(result_message_id=part["message_id"], has_result=True, is_error=part["is_error"],
                    exit_code=_exit_code(call["tool_category"], text, part["is_error"], part["_metadata"]),
                    result_text=text, result_size=len(text.encode("utf-8", "replace")),
                    result_at=part["created_at"])
    return out


def user_role(rec: dict) -> tuple[str, bool]:
    """(role, is_summary) of a `user` line."""
    content = rec["message"].get("content")
    if rec.get("isCompactSummary") is True:
        return "system", True
    blocks = content if isinstance(content, list) else []
    if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
        return "tool", False
    first = content if isinstance(content, str) else next(
        (b.get("text") for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)), "")
    if rec.get("isMeta") is True or (first or "").lstrip().startswith(NOT_PROMPTS):
        return "system", False
    return "user", False


def blocks_of(content) -> list:
    if isinstance(content, list):
        return content
    return [] if content is None else [content]  # a plain-string prompt is one text part


def message_rows(group: list, lineage, findings: Findings, unknown: set) -> tuple[dict, list]:
    """One message from its lines (a streamed response: one content block per line), and its
    parts. `lineage(line)` gives a row's lineage columns; unknown line fields go to `unknown`."""
    first, msg = group[0], group[0].rec["message"]
    assistant = first.rec["type"] == "assistant"
    role, is_summary = ("assistant", False) if assistant else user_role(first.rec)
    mid = (_str(msg.get("id")) if assistant else None) or _str(first.rec.get("uuid")) or f"{first.rel}:{first.lineno}"
    extra: dict = {}
    blocks = []
    for ln in group:
        for k, v in ln.rec.items():
            if k not in MAPPED_KEYS:
                extra.setdefault(k, v)
                if k not in KEPT_KEYS:
                    unknown.add(k)
        blocks += [(b, ln) for b in blocks_of(ln.rec["message"].get("content"))]
    stops = [ln.ts for ln in group if ln.rec["message"].get("stop_reason") is not None]
    model = _str(msg.get("model")) if assistant else None
    message = {
        **lineage(first), "message_id": mid, "session_id": first.session, "role": role, "model": model,
        "llm_provider": "anthropic" if model and "claude" in model.lower() else None,
        "created_at": first.ts, "updated_at": group[-1].ts, "finished_at": stops[-1] if stops else None,
        "is_summary": is_summary, "part_count": len(blocks), "parts_ok": True,
        "extra_columns": compact_json(extra) if extra else None,
    }
    parts = []
    for j, (block, ln) in enumerate(blocks):
        part = part_columns(block, findings, ln.rec.get("toolUseResult"))
        part.update(lineage(ln), message_id=mid, session_id=first.session, part_index=j, role=role,
                    created_at=first.ts, raw=compact_json(block), _lineage=lineage(ln),
                    _input=block.get("input") if isinstance(block, dict) else None,
                    _content=block.get("content") if isinstance(block, dict) else None,
                    _metadata=ln.rec.get("toolUseResult"))
        parts.append(part)
    return message, parts


def strip_private(parts: list[dict]) -> None:
    for part in parts:
        for k in ("_lineage", "_input", "_content", "_metadata"):
            del part[k]
