"""Kimi CLI wire logs (`wire.jsonl`) -> canonical rows. Pure.

Learnt from the agent's source (MoonshotAI/kimi-cli: src/kimi_cli/wire/{file,types}.py,
soul/kimisoul.py, session_fork.py, subagents/{runner,store}.py; packages/kosong message.py,
chat_provider TokenUsage, tooling ToolReturnValue), read against ccusage (rust/crates/ccusage/src/
adapter/kimi). tokscale's snapshot here has no Kimi reader.

The wire log is every event Kimi's UI saw: a `{"type": "metadata", "protocol_version"}` header
(none before protocol 1.1's header existed), then `{"timestamp": <epoch seconds>, "message":
{"type": <event class>, "payload": {...}}}` lines: `TurnBegin`/`SteerInput` (the prompt),
`StepBegin` (one model call), `ContentPart` (`text`, `think`, `image_url`, ...), `ToolCall` and
its `ToolCallPart` argument deltas, `ToolResult`, `StatusUpdate` (per step: `token_usage`,
`message_id`), `SubagentEvent` (a sub-agent's event, wrapped), `TurnEnd`, compaction, hooks, ...

The traps, and what is done about them:
- streamed duplicates: content arrives as many `ContentPart` fragments and tool arguments as
  `ToolCallPart` deltas; Kimi merges consecutive fragments of one type (kosong `merge_in_place`):
  so do we, one part per run. Counting events would count a sentence word by word.
- tokens: `StatusUpdate.token_usage` is one step's usage, already disjoint (kosong TokenUsage:
  `input_other` excludes `input_cache_read` and `input_cache_creation`; `output` includes the
  thinking). No cumulative counters. `input_cache_creation` is a 5-minute write (Anthropic only).
- cost and model: neither is recorded. The model is in `config.toml` (which holds API keys and is
  never opened) and may change mid-session: requests are `unknown`, never $0, except a
  sub-agent's, whose `meta.json` names its `effective_model` (priced from genai-prices). ccusage
  assumes the config's model, or `kimi-for-coding`, for every request.
- forks: `/fork` copies the wire lines of the first N turns verbatim into a new session of the
  same work dir. A line found in several sessions counts once, in the session whose own
  (unshared) history starts first; the fork keeps `forked_from_session_id` and the priced part of
  what it copied (`inherited_cost_usd`). ccusage keys on the session folder: it counts them twice.
- sub-agents: a sub-agent's events go to its own `subagents/<id>/wire.jsonl` AND, wrapped in
  `SubagentEvent`, to the parent's wire. Its own file is read when it has events, else the
  wrapped copies; never both. Each is a child session (`<session>:<agent id>`), `is_sidechain`.
  ccusage reads neither (its file filter skips them, its line filter drops `SubagentEvent`).
- one step, one assistant message: kosong's `step` hands a tool call to the toolset as soon as the
  next part streams in, and its `ToolResult` reaches the wire when the tool finishes: between the
  step's later ToolCalls, before its StatusUpdate. A result ends no message and no run of fragments:
  only the next StepBegin (or prompt) does. So a session has one assistant message per step that
  streamed anything: as many as its StatusUpdates with usage, but for a step interrupted before
  its usage (a message, no usage) or one that streamed nothing (usage, no message).
- sub-agents before protocol 1.6 are named by the tool call that started them (`task_tool_call_id`:
  no `agent_id` yet); Task calls run side by side, and their wrapped events interleave.
- tool errors: `return_value.is_error` is Kimi's flag, but its Shell tool reports a non-zero exit
  as an error (`Command failed with exit code: N.`): that is an exit code, not a tool failure.
- pruned history: `context.jsonl` is rotated (copied) on /clear and checkpoint reverts; the wire
  keeps everything, and only the wire is read. Kimi deletes a session only on request.
"""

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from transforms import jsontext
from transforms.findings import Findings
from transforms.kimi import tools as t
from transforms.pricing import Buckets, price_buckets
from transforms.timestamps import from_epoch
from transforms.tools import compact_json, decode_input

PROVIDER = "kimi"
PART_TYPES = {"text": "text", "think": "reasoning", "image_url": "image_url", "audio_url": "binary",
              "video_url": "binary"}
MERGED = {"text": "text", "think": "think"}  # part types whose fragments Kimi concatenates
KNOWN_EVENTS = {"TurnEnd", "StepInterrupted", "StepRetry", "HookTriggered", "HookResolved", "CompactionBegin",
                "CompactionEnd", "MCPLoadingBegin", "MCPLoadingEnd", "Notification", "ApprovalResponse",
                "ApprovalRequest", "PlanDisplay", "BtwBegin", "BtwEnd", "ToolCallRequest", "QuestionRequest",
                "HookRequest", "ApprovalRequestResolved"}
_EXIT = re.compile(r"Command failed with exit code: (-?\d+)")


@dataclass
class Event:
    no: int  # 0-based line number in its file
    at: datetime | None
    type: str
    payload: dict
    line: str  # the line as stored: what a fork copies
    agent: str | None = None  # a wrapped sub-agent event's agent id (else the tool call that started it)
    caller: str | None = None  # a wrapped sub-agent event's parent (Agent/Task) tool call id


@dataclass
class Wire:
    path: str
    version: str | None = None
    events: list[Event] = field(default_factory=list)
    bad: list[tuple[int, str, str]] = field(default_factory=list)


def parse_wire(path: str, text: str) -> Wire:
    wire = Wire(path)
    for no, raw, rec, error in jsontext.json_lines(text):
        if error:
            wire.bad.append((no, raw, error))
            continue
        if isinstance(rec, dict) and rec.get("type") == "metadata":
            wire.version = rec.get("protocol_version") if isinstance(rec.get("protocol_version"), str) else None
            continue
        message = rec.get("message") if isinstance(rec, dict) else None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str) \
                or not isinstance(message.get("payload"), dict):
            wire.bad.append((no, raw, "not a wire record: no message {type, payload}"))
            continue
        at = from_epoch(rec.get("timestamp"))
        event = Event(no, at, message["type"], message["payload"], raw)
        inner = event.payload.get("event") if event.type == "SubagentEvent" else None
        if isinstance(inner, dict) and isinstance(inner.get("type"), str) and isinstance(inner.get("payload"), dict):
            agent, caller = (event.payload.get(k) for k in ("agent_id", "parent_tool_call_id"))
            caller = caller if isinstance(caller, str) else event.payload.get("task_tool_call_id")  # before 1.6
            caller = caller if isinstance(caller, str) else None
            # no agent_id before 1.6: each Task call ran its own sub-agent, side by side with the others
            agent = agent if isinstance(agent, str) else caller or "?"
            event = Event(no, at, inner["type"], inner["payload"], raw, agent, caller)
        wire.events.append(event)
    return wire


def user_parts(user_input) -> list:
    if isinstance(user_input, str):
        return [{"type": "text", "text": user_input}] if user_input else []
    return [p for p in user_input] if isinstance(user_input, list) else []


def expected_parts(events: list[Event]) -> int:
    """Parts these events make, counted on the events: a run of fragments of one type is one."""
    n, last = 0, None
    for e in events:
        kind = e.payload.get("type") if e.type == "ContentPart" else None
        if e.type in ("TurnBegin", "SteerInput"):
            n += len(user_parts(e.payload.get("user_input")))
        elif e.type == "ContentPart" and not (kind in MERGED and kind == last):
            n += 1
        elif e.type in ("ToolCall", "ToolResult"):
            n += 1
        if e.type in ("TurnBegin", "SteerInput", "StepBegin", "ToolCall") or e.type == "ContentPart":
            last = kind if e.type == "ContentPart" else None  # a ToolResult mid-step breaks no run
    return n


def usage_buckets(usage) -> Buckets | None:
    """A status update's counts; None when it holds none (a plan-mode or MCP status). A count out of
    range (negative) is kept as written: its request is not priced, and the lake nulls it with the
    source's warning (it was read as no request at all, and its session's cost left it out)."""
    if not isinstance(usage, dict):
        return None
    counts = {k: usage.get(k) for k in ("input_other", "output", "input_cache_read", "input_cache_creation")}
    if any(v is not None and jsontext.int64_or_none(v) is None for v in counts.values()) or not any(counts.values()):
        return None  # not a count (text, a float, a bool): no request
    return Buckets(input_uncached=counts["input_other"], cache_read=counts["input_cache_read"],
                   cache_write_5m=counts["input_cache_creation"], output=counts["output"])


@dataclass
class Context:
    source_id: str
    project_path: str
    session_id: str
    model: str | None  # a sub-agent's effective model; None: not recorded
    is_sidechain: bool


class Session:
    """One session's own events -> messages, parts, tool_calls, usage."""

    def __init__(self, ctx: Context, findings: Findings, source_table: str):
        self.ctx, self.findings, self.source_table = ctx, findings, source_table
        self.rows = {"messages": [], "parts": [], "tool_calls": [], "usage": []}
        self.costs: list[float | None] = []
        self.open: dict | None = None  # the assistant message of the current step
        self.last_part: dict | None = None  # the part a fragment may extend
        self.calls: dict[str, dict] = {}
        self.last_call: tuple[dict, dict] | None = None  # (part, row) a ToolCallPart extends
        self.skipped: Counter = Counter()

    def lineage(self, no: int) -> dict:
        return {"provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": self.ctx.project_path,
                "source_table": self.source_table, "source_rowid": no}

    def run(self, events: list[Event]) -> "Session":
        for e in events:
            handler = getattr(self, f"on_{e.type}", None)
            if handler:
                handler(e)
            elif e.type not in KNOWN_EVENTS:
                self.skipped[e.type] += 1
        for part, row in self.calls.values():
            self.finish_call(part, row)
        if self.skipped:
            kinds = ", ".join(f"{k}={n}" for k, n in sorted(self.skipped.items()))
            self.findings.notes.append(f"{self.ctx.session_id}: events not used: {kinds}")
        return self

    # --- messages and parts

    def message(self, e: Event, role: str) -> dict:
        row = {**self.lineage(e.no), "message_id": f"{self.ctx.session_id}:{e.no}", "session_id": self.ctx.session_id,
               "message_index": len(self.rows["messages"]), "role": role,
               "model": self.ctx.model if role == "assistant" else None, "llm_provider": None,
               "created_at": e.at, "updated_at": e.at, "is_summary": False, "part_count": 0, "parts_ok": True}
        self.rows["messages"].append(row)
        self.last_part = None
        return row

    def assistant(self, e: Event) -> dict:
        if self.open is None:
            self.open = self.message(e, "assistant")
        return self.open

    def add_part(self, msg: dict, e: Event, cols: dict, raw) -> dict:
        part = {**self.lineage(e.no), "part_type": "other", "is_known_type": True, **cols,
                "message_id": msg["message_id"], "session_id": self.ctx.session_id, "part_index": msg["part_count"],
                "role": msg["role"], "created_at": msg["created_at"], "raw": compact_json(raw)}
        msg["part_count"] += 1
        msg["updated_at"] = e.at or msg["updated_at"]
        self.rows["parts"].append(part)
        self.last_part = part
        return part

    def content(self, msg: dict, e: Event, block, merge: bool = True) -> None:
        kind = block.get("type") if isinstance(block, dict) else None
        last = self.last_part
        same_run = last is not None and last["native_part_type"] == kind and last["message_id"] == msg["message_id"]
        if merge and kind in MERGED and same_run:
            key = "text" if kind == "text" else "reasoning"
            last[key] = (last[key] or "") + (block.get(kind) or "")
            merged = jsontext.loads(last["raw"])
            merged[kind] = last[key]
            last["raw"] = compact_json(merged)
            return
        cols = {"native_part_type": kind, "part_type": PART_TYPES.get(kind, "other"),
                "is_known_type": kind in PART_TYPES}
        if kind == "text":
            cols["text"] = block.get("text")
        elif kind == "think":
            cols["reasoning"] = block.get("think")
        elif kind == "image_url" and isinstance(block.get("image_url"), dict):
            cols["url"] = block["image_url"].get("url")
        elif kind in ("audio_url", "video_url") and isinstance(block.get(kind), dict):
            cols["binary_path"] = block[kind].get("url")
        if not cols["is_known_type"]:
            self.findings.unknown_part_types[kind] += 1
        self.add_part(msg, e, cols, block)

    # --- events

    def on_TurnBegin(self, e: Event) -> None:  # noqa: N802 (Kimi's event names)
        self.open = None
        msg = self.message(e, "user")
        for block in user_parts(e.payload.get("user_input")):
            self.content(msg, e, block, merge=False)

    on_SteerInput = on_TurnBegin

    def on_StepBegin(self, e: Event) -> None:  # noqa: N802
        self.open = None

    def on_ContentPart(self, e: Event) -> None:  # noqa: N802
        self.content(self.assistant(e), e, e.payload)

    def on_ToolCall(self, e: Event) -> None:  # noqa: N802
        msg = self.assistant(e)
        function = e.payload.get("function") if isinstance(e.payload.get("function"), dict) else {}
        name = function.get("name") if isinstance(function.get("name"), str) else None
        call_id = e.payload.get("id") if isinstance(e.payload.get("id"), str) else f"{msg['message_id']}:call"
        args = function.get("arguments") if isinstance(function.get("arguments"), str) else None
        part = self.add_part(msg, e, {"part_type": "tool_call", "native_part_type": "ToolCall", "tool_call_id": call_id,
                                      "tool_name": name, "tool_input": args}, e.payload)
        row = {**self.lineage(e.no), "session_id": self.ctx.session_id, "message_id": msg["message_id"],
               "tool_call_id": call_id, "tool_name": name, "tool_category": t.TOOLS.category(name),
               "input_raw": args, "has_call": True, "has_result": False, "called_at": e.at}
        self.rows["tool_calls"].append(row)
        self.calls[call_id] = (part, row)
        self.last_call = (part, row)
        self.last_part = None

    def on_ToolCallPart(self, e: Event) -> None:  # noqa: N802
        delta = e.payload.get("arguments_part")
        if self.last_call and isinstance(delta, str):
            part, row = self.last_call
            row["input_raw"] = part["tool_input"] = (row["input_raw"] or "") + delta

    def finish_call(self, part: dict, row: dict) -> None:
        args = decode_input(row["input_raw"])
        row.update(input=compact_json(args) if args is not None else None, is_input_valid=args is not None,
                   command=t.TOOLS.command(row["tool_name"], args),
                   file_path=t.TOOLS.file_path(row["tool_name"], args))

    def on_ToolResult(self, e: Event) -> None:  # noqa: N802
        # a result goes to the wire when its tool finishes, maybe while the step still streams:
        # the step's message stays open, and so does its run of fragments
        run = self.last_part
        msg = self.message(e, "tool")
        call_id = e.payload.get("tool_call_id") if isinstance(e.payload.get("tool_call_id"), str) else None
        value = e.payload.get("return_value") if isinstance(e.payload.get("return_value"), dict) else {}
        output = value.get("output")
        text = output if isinstance(output, str) else compact_json(output) if output is not None else None
        note = value.get("message") if isinstance(value.get("message"), str) else ""
        found = self.calls.get(call_id)
        row = found[1] if found else None
        exit_code = None
        if row and row["tool_name"] in t.TOOLS.shell_tools:
            m = _EXIT.search(note)
            exit_code = int(m.group(1)) if m else (0 if value.get("is_error") is False else None)
        is_error = value.get("is_error") if isinstance(value.get("is_error"), bool) else None
        if exit_code not in (None, 0):
            is_error = False  # the command ran and exited non-zero: an exit code, not a tool failure
        self.add_part(msg, e, {"part_type": "tool_result", "native_part_type": "ToolResult", "tool_call_id": call_id,
                               "tool_name": row["tool_name"] if row else None, "tool_result": text,
                               "tool_result_metadata": compact_json({k: v for k, v in value.items() if k != "output"}),
                               "is_error": is_error}, e.payload)
        if row is None:  # a result whose call is not in this session: kept, flagged
            row = {**self.lineage(e.no), "session_id": self.ctx.session_id, "message_id": None, "tool_call_id": call_id,
                   "tool_name": None, "tool_category": "other", "input_raw": None, "has_call": False, "called_at": e.at}
            self.rows["tool_calls"].append(row)
            self.calls[call_id or f"orphan:{e.no}"] = ({"tool_input": None}, row)
        row.update(result_message_id=msg["message_id"], has_result=True, is_error=is_error, exit_code=exit_code,
                   result_text=text, result_size=len(text.encode("utf-8", "replace")) if text is not None else None,
                   result_at=e.at)
        self.last_part = run

    def on_StatusUpdate(self, e: Event) -> None:  # noqa: N802
        bucket = usage_buckets(e.payload.get("token_usage"))
        if bucket is None:
            return  # a plan-mode or MCP status: no request
        msg = self.open or next((m for m in reversed(self.rows["messages"]) if m["role"] == "assistant"), None)
        priced = price_buckets(bucket, self.ctx.model, None, e.at)
        self.rows["usage"].append({
            **self.lineage(e.no), "session_id": self.ctx.session_id, "message_id": msg["message_id"] if msg else None,
            "request_id": e.payload.get("message_id") if isinstance(e.payload.get("message_id"), str) else None,
            "requested_at": e.at, "model": self.ctx.model, "llm_provider": None,
            "is_sidechain": self.ctx.is_sidechain, **bucket.columns(), "cost_usd": priced.cost_usd,
            "cost_source": priced.cost_source,
            "pricing_note": priced.note if self.ctx.model else "no model recorded (it is in config.toml, not read)"})
        self.costs.append(priced.cost_usd)
