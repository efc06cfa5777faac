"""One Codex rollout (one session, one JSONL file) -> messages, parts, tool_calls, usage. Pure.

The traps (docs/FORMATS.md, "Codex: traps") and what is done about them:
- usage: deltas of the cumulative `total_token_usage`, repeats skipped, drops re-baselined
  (transforms.codex.usage); cached input and reasoning are parts of input and output, never added;
- a fork or sub-agent replays its parent's history first: those lines (`Rollout.replay_end`) give
  no rows; their token counts only set the baseline the session's own totals continue from;
- the model is the latest `turn_context.model` before each request, never a key of session_meta;
  times are each line's `timestamp` (UTC), never the file name or folder (local time);
- no is_error is stored: exit codes and failures are read from the output (transforms.codex.tools).

Messages come from `response_item` lines only (the `event_msg` user/agent messages mirror them).
A run of assistant-side items (reasoning, tool calls, assistant text) up to the response's
`token_count` is ONE assistant message, whose parts are those items; each tool output is a
`tool` message; a `compacted` line is an assistant summary (`is_summary`). Ids are
`<session id>:<line number>` (Codex gives items no ids).

Injected context is kept but is not a prompt: text blocks of `developer`/`system` messages and
user-role blocks starting with `<environment_context>`, `<user_instructions>` or
`# AGENTS.md instructions` keep their role and get part_type `injected_context` (a prompt is a
part with part_type `text` and role `user`).
"""

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from transforms.codex import tools as t
from transforms.codex.usage import TokenDeltas, buckets
from transforms.contract import PART_TYPES
from transforms.findings import Findings
from transforms.pricing import price_buckets
from transforms.tools import compact_json

PROVIDER = "codex"
INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")
TEXT_BLOCKS = {"input_text", "output_text", "text"}
CALLS = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
OUTPUTS = {"function_call_output", "custom_tool_call_output"}
KEPT_RAW = {"ghost_snapshot", "compaction", "compaction_summary", "image_generation_call", "tool_search_call",
            "tool_search_output"}  # known items without typed columns
KNOWN_EVENTS = {  # persisted event_msg types that add nothing to the rows
    "user_message", "agent_message", "agent_reasoning", "agent_reasoning_raw_content", "context_compacted",
    "entered_review_mode", "exited_review_mode", "undo_completed", "turn_aborted", "task_started",
    "task_complete", "item_completed", "mcp_tool_call_end", "web_search_end", "view_image_tool_call",
    "agent_reasoning_section_break", "thread_rolled_back", "error", "warning", "token_count",
    "exec_command_end", "patch_apply_end",
}


@dataclass
class Line:
    no: int  # 0-based line number in the file
    at: datetime | None
    type: str | None
    payload: Any


@dataclass
class Rollout:
    path: str
    lines: list[Line]  # the parseable lines, in file order
    replay_end: int = 1  # index in `lines` of the first line that is the session's own

    @property
    def meta(self) -> dict:
        return self.lines[0].payload


@dataclass
class Context:
    source_id: str
    session_id: str
    project_path: str
    llm_provider: str
    is_sidechain: bool
    price_replay: bool = False  # a fork: price the replayed requests (its inherited cost)


@dataclass
class Session:
    rows: dict[str, list[dict]]
    costs: list = field(default_factory=list)  # each own request's cost (None: unpriced)
    inherited: list = field(default_factory=list)  # replayed requests' costs (forks)
    model: str | None = None  # of the last priced request, else of the last request or turn


def _str(v):
    return v if isinstance(v, str) else None


class Walker:
    def __init__(self, rollout: Rollout, ctx: Context, findings: Findings):
        self.r, self.ctx, self.findings = rollout, ctx, findings
        self.out = {"messages": [], "parts": [], "tool_calls": []}
        self.usage: list[dict] = []
        self.model: str | None = None
        self.deltas = TokenDeltas()
        self.open: dict | None = None  # the assistant message being built
        self.unbilled: str | None = None  # last assistant message not yet tied to a request
        self.calls: dict[str, dict] = {}
        self.exits: dict[str, int] = {}  # call id -> exit code of an exec_command_end event
        self.failed_patches: set[str] = set()
        self.skipped: Counter = Counter()
        self.session = Session(self.out)

    def run(self) -> Session:
        for i, line in enumerate(self.r.lines[1:], 1):
            (self.replayed if i < self.r.replay_end else self.own)(line)
        self.finish()
        self.out["usage"] = self.usage
        return self.session

    def lineage(self, table: str, no: int) -> dict:
        return {"provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": self.ctx.project_path,
                "source_table": table, "source_rowid": no}

    # --- lines

    def replayed(self, line: Line) -> None:
        if line.type == "turn_context":
            self.turn(line)
        elif line.type == "event_msg" and isinstance(line.payload, dict) and line.payload.get("type") == "token_count":
            delta = self.deltas.feed(line.payload.get("info"))  # the baseline the session goes on from
            if delta and self.ctx.price_replay:
                self.session.inherited.append(
                    price_buckets(buckets(delta.tokens), self.model, self.ctx.llm_provider, line.at).cost_usd)

    def own(self, line: Line) -> None:
        p = line.payload if isinstance(line.payload, dict) else {}
        if line.type == "response_item":
            self.item(line, p)
        elif line.type == "event_msg":
            self.event(line, p)
        elif line.type == "turn_context":
            self.close()
            self.turn(line)
        elif line.type == "compacted":
            self.close()
            msg = self.message(line, "assistant", is_summary=True)
            self.add_part(msg, line, {"part_type": "text", "native_part_type": "compacted", "is_known_type": True,
                                      "text": _str(p.get("message"))}, p)
        else:
            self.skipped[f"line type {line.type}"] += 1

    def turn(self, line: Line) -> None:
        if isinstance(line.payload, dict) and isinstance(line.payload.get("model"), str):
            self.model = line.payload["model"]

    def event(self, line: Line, p: dict) -> None:
        kind = _str(p.get("type"))
        if kind == "token_count":
            self.request(line, p.get("info"))
        elif kind == "exec_command_end" and t.exit_code(p.get("exit_code")) is not None:
            self.exits[str(p.get("call_id"))] = p["exit_code"]
        elif kind == "patch_apply_end" and p.get("success") is False:
            self.failed_patches.add(str(p.get("call_id")))
        elif kind not in KNOWN_EVENTS:
            self.skipped[f"event {kind}"] += 1

    def item(self, line: Line, p: dict) -> None:
        kind = _str(p.get("type"))
        if kind == "message" and p.get("role") != "assistant":
            self.close()
            role = _str(p.get("role"))
            self.content(self.message(line, role), line, p, role)
        elif kind == "message":
            self.content(self.assistant(line), line, p, "assistant")
        elif kind in OUTPUTS:
            self.result(line, p)
        elif kind in CALLS:
            self.call(self.assistant(line), line, p)
        elif kind == "reasoning":
            self.add_part(self.assistant(line), line, {"part_type": "reasoning", "is_known_type": True,
                                                       "reasoning": _reasoning_text(p)}, p)
        else:
            known = kind in KEPT_RAW
            if not known:
                self.findings.unknown_part_types[kind] += 1
            self.add_part(self.assistant(line), line, {"part_type": _str(kind), "is_known_type": known}, line.payload)

    # --- messages and parts

    def message(self, line: Line, role: str | None, is_summary: bool = False) -> dict:
        source_table = line.type or "response_item"
        row = {**self.lineage(source_table, line.no), "message_id": f"{self.ctx.session_id}:{line.no}",
               "session_id": self.ctx.session_id, "message_index": len(self.out["messages"]), "role": role,
               "model": self.model if role == "assistant" else None,
               "llm_provider": self.ctx.llm_provider if role == "assistant" else None,
               "created_at": line.at, "updated_at": line.at, "is_summary": is_summary, "part_count": 0,
               "parts_ok": True}
        self.out["messages"].append(row)
        return row

    def assistant(self, line: Line) -> dict:
        if self.open is None:
            self.open = self.message(line, "assistant")
            self.unbilled = self.open["message_id"]
        return self.open

    def close(self) -> None:
        self.open = None

    def add_part(self, msg: dict, line: Line, cols: dict, raw) -> dict:
        """`cols["part_type"]` is canonical (contract.PART_TYPES; an unknown type becomes `other`);
        `native_part_type` is the item's or content block's own `type`."""
        if "native_part_type" not in cols:
            cols["native_part_type"] = _str(raw.get("type")) if isinstance(raw, dict) else \
                ("text" if isinstance(raw, str) else None)
        if cols["part_type"] not in PART_TYPES:
            cols["part_type"] = "other"
        part = {**self.lineage(line.type or "response_item", line.no), **cols, "message_id": msg["message_id"],
                "session_id": self.ctx.session_id, "part_index": msg["part_count"], "role": msg["role"],
                "created_at": msg["created_at"], "raw": compact_json(raw)}
        msg["part_count"] += 1
        msg["updated_at"] = line.at or msg["updated_at"]
        self.out["parts"].append(part)
        return part

    def content(self, msg: dict, line: Line, item: dict, role: str | None) -> None:
        extra = {k: v for k, v in item.items() if k not in ("type", "role", "content")}
        if extra:  # item fields (id, phase, end_turn): kept with the message
            msg["extra_columns"] = compact_json(extra)
        blocks = item.get("content")
        for block in blocks if isinstance(blocks, list) else [blocks]:
            self.add_part(msg, line, self.block(block, role), block)

    def block(self, block, role: str | None) -> dict:
        kind = _str(block.get("type")) if isinstance(block, dict) else ("text" if isinstance(block, str) else None)
        if kind in TEXT_BLOCKS:
            text = block if isinstance(block, str) else _str(block.get("text"))
            injected = role in ("developer", "system") or (role == "user" and (text or "").lstrip().startswith(INJECTED))
            return {"part_type": "injected_context" if injected else "text", "is_known_type": True, "text": text}
        if kind == "input_image":
            image = block.get("image_url")
            return {"part_type": "image_url", "is_known_type": True,
                    "url": _str(image.get("url")) if isinstance(image, dict) else _str(image)}
        self.findings.unknown_part_types[kind] += 1
        return {"part_type": _str(kind), "is_known_type": False}

    # --- tool calls

    def call(self, msg: dict, line: Line, p: dict) -> None:
        kind = p["type"]
        name, raw, args = t.call_input(kind, p)
        call_id = _str(p.get("call_id")) or _str(p.get("id")) or f"{self.ctx.session_id}:{line.no}"
        self.add_part(msg, line, {"part_type": "tool_call", "is_known_type": True, "tool_call_id": call_id,
                                  "tool_name": name, "tool_input": raw}, p)
        row = {**self.lineage(line.type, line.no), "session_id": self.ctx.session_id, "message_id": msg["message_id"],
               "tool_call_id": call_id, "tool_name": name, "tool_category": t.tool_category(name),
               "input": compact_json(args) if args is not None else None, "input_raw": raw,
               "is_input_valid": args is not None, "command": t.command_of(name, args),
               "file_path": t.file_path_of(name, args), "has_call": True, "has_result": False,
               "called_at": line.at}
        self.out["tool_calls"].append(row)
        self.calls.setdefault(call_id, row)

    def result(self, line: Line, p: dict) -> None:
        self.close()
        msg = self.message(line, "tool")
        call_id = _str(p.get("call_id"))
        output = p.get("output")
        text = t.output_text(output)
        call = self.calls.pop(call_id, None) if call_id else None
        if call is None:  # a result whose call is missing: kept, flagged
            call = {**self.lineage(line.type, line.no), "session_id": self.ctx.session_id, "message_id": None,
                    "tool_call_id": call_id, "tool_name": None, "tool_category": "other", "has_call": False,
                    "called_at": line.at}
            self.out["tool_calls"].append(call)
        is_error = t.failed_to_run(output, text)
        self.add_part(msg, line, {"part_type": "tool_result", "is_known_type": True, "tool_call_id": call_id,
                                  "tool_name": call["tool_name"], "tool_result": text, "is_error": is_error}, p)
        shell = call["tool_name"] in t.SHELL_TOOLS
        call.update(result_message_id=msg["message_id"], has_result=True, is_error=is_error,
                    exit_code=t.exit_code_of(text) if shell and not is_error else None, result_text=text,
                    result_size=len((text or "").encode("utf-8", "replace")), result_at=line.at)

    def finish(self) -> None:
        """Facts recorded as events: an exec's exit code, a patch that failed to apply."""
        for row in self.out["tool_calls"]:
            call_id = row.get("tool_call_id")
            if row.get("has_result") and row.get("exit_code") is None and call_id in self.exits:
                row["exit_code"] = self.exits[call_id]
            if row.get("has_result") and call_id in self.failed_patches:
                row["is_error"] = True
        priced = [u for u in self.usage if u["cost_usd"] is not None]
        self.session.model = (priced or self.usage or [{"model": self.model}])[-1]["model"]
        if self.skipped:
            kinds = ", ".join(f"{k}={n}" for k, n in sorted(self.skipped.items()))
            self.findings.notes.append(f"{self.ctx.session_id}: lines not used: {kinds}")
        if self.deltas.bad_totals:
            self.findings.notes.append(
                f"{self.ctx.session_id}: {self.deltas.bad_totals} token_count events with a cumulative total out of "
                "range (a negative count): counted from their last_token_usage, else by the next total")

    # --- usage

    def request(self, line: Line, info) -> None:
        delta = self.deltas.feed(info)
        message_id = self.unbilled
        self.close()
        if delta is None:
            return
        self.unbilled = None
        bucket = buckets(delta.tokens)
        priced = price_buckets(bucket, self.model, self.ctx.llm_provider, line.at)
        self.usage.append({
            **self.lineage("event_msg", line.no), "session_id": self.ctx.session_id, "message_id": message_id,
            "request_id": None, "requested_at": line.at, "model": self.model, "llm_provider": self.ctx.llm_provider,
            "is_sidechain": self.ctx.is_sidechain, **bucket.columns(), "cost_usd": priced.cost_usd,
            "cost_source": priced.cost_source,
            "pricing_note": priced.note if delta.how == "delta" else f"{priced.note}; {delta.how}",
        })
        self.session.costs.append(priced.cost_usd)


def _reasoning_text(p: dict) -> str | None:
    """The summary Codex shows; the raw reasoning text where there is no summary."""
    for key in ("summary", "content"):
        blocks = p.get(key)
        texts = [b["text"] for b in blocks or () if isinstance(b, dict) and isinstance(b.get("text"), str)] \
            if isinstance(blocks, list) else []
        if texts:
            return "\n\n".join(texts)
    return None
