"""One GitHub Copilot CLI session log (`events.jsonl`) -> sessions, messages, parts, tool_calls,
usage. Pure.

Copilot CLI is closed source; its repository (github/copilot-cli) holds only the changelog. The
event format is learnt from the event schema GitHub publishes with its SDK (github/copilot-sdk,
`nodejs/src/generated/session-events.ts`, generated from the CLI's `session-events.schema.json`),
the changelog, and the peers: ccusage reads only OpenTelemetry exports (`~/.copilot/otel`),
tokscale the OpenTelemetry exports and `session-store.db`; neither reads `events.jsonl`.

Every line is `{type, data, id, parentId, timestamp, agentId?, ephemeral?}`. The traps:
- **No per-request usage on disk.** `assistant.usage` is `ephemeral: true` (never persisted);
  the only token counts are each `session.shutdown`'s `modelMetrics` (per model, for the life of
  that process). So `usage` holds one row per (shutdown, model), not per request, `request_id`
  null. `inputTokens` includes the cache reads and writes (changelog 1.0.x: "input token usage
  includes cached"; tokscale subtracts both), so uncached = input - read - write; reasoning is
  inside `outputTokens` (shown "as a parenthetical on output token count"). A row is a total of
  many requests: priced at the base rates (transforms.costs.price_aggregate), never as one request
  large enough to take the long-context rates.
- **Cumulative counters.** A resumed session appends a new lifetime to the same file; each
  lifetime ends with its own shutdown whose `modelMetrics` count that lifetime only (they are not
  in `session.usage_checkpoint`, so nothing restores them), and they are summed. The session-wide
  `totalNanoAiu` and `totalPremiumRequests` ARE restored from the checkpoint on resume: they are
  cumulative, so the session's native cost is their high-water mark (checkpoint or shutdown),
  never a sum. A nano-AIU is 1e-9 AI credit and an AI credit is $0.01 (tokscale's
  NANO_AIU_PER_USD = 1e11): USD = nano-AIU / 1e11. Zero or absent (premium-request plans) is no
  cost recorded: priced from the tokens (`estimated`), else `unknown`.
- **Streamed duplicates.** Deltas (`assistant.message_delta`, `streaming_delta`,
  `reasoning_delta`, `tool_call_delta`) are ephemeral; if a log holds them they are skipped
  (counted in a note). The reasoning is written twice (an `assistant.reasoning` event before the
  message, and the message's `reasoningText`): counted once, as a part of that message. A call is
  written twice (the message's `toolRequests` and `tool.execution_start`): one `tool_calls` row.
- **One assistant message per model response**: an `assistant.message` (a response split at its
  reasoning boundaries, `chunkIndex`, is one event per chunk), plus a reasoning whose response
  never came (aborted), plus a compaction summary (`is_summary`). A tool the user ran
  (`tool.user_requested`, then its start: no request) is a `user` message holding the call; a
  start no request named otherwise is an assistant message of its own.
- **Sub-agents** run in the same log: their events carry `agentId` (`subagent.started` names
  it). They stay in the session; the shutdown's `agentMetrics` is a breakdown of `modelMetrics`
  and is never added.
- **Archived copies and pruned history** are discovery's: one source per session id
  (transforms.copilot.discover); a deleted session's rows stay in the lake.
- A session that never shut down (killed, or still running) has no token counts: its cost is the
  checkpoint's, else `unknown` if it answered anything, else a known $0.
Injected input (`system.message`, and `user.message` with a `source` such as `skill-pdf` or
`agent-<id>`) is `injected_context`, not a prompt. A session of the first format (before 0.0.342),
a file of its own or migrated into a log as one `session.import_legacy` event, is read by
transforms.copilot.legacy into the same rows (`normalise_legacy`, `on_session_import_legacy`).
"""

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from transforms import jsontext
from transforms.contract import PART_TYPES
from transforms.copilot import legacy
from transforms.copilot import tools as t
from transforms.costs import price_aggregate, session_cost
from transforms.findings import Findings
from transforms.jsontext import count_or_none, int64_or_none as _int
from transforms.jsontext import str_or_none as _str
from transforms.pricing import Buckets, in_range
from transforms.timestamps import from_iso
from transforms.tools import add_result, call_row, compact_json, orphan_row

PROVIDER = "copilot"
USD_PER_NANO_AIU = 1e-11
STREAMED = {"assistant.message_delta", "assistant.streaming_delta", "assistant.reasoning_delta",
            "assistant.tool_call_delta", "assistant.message_start", "tool.execution_partial_result",
            "tool.execution_progress", "assistant.usage"}
# persisted events that add no row (their JSON stays in the file; counted in a note)
NO_ROWS = {"session.start", "session.resume", "session.info", "session.warning", "session.error",
           "session.model_change", "session.mode_changed", "session.plan_changed", "session.truncation",
           "session.context_changed", "session.compaction_start", "session.usage_checkpoint", "session.shutdown",
           "session.workspace_file_changed", "session.handoff", "session.task_complete", "assistant.turn_start",
           "assistant.turn_end", "abort", "subagent.started", "subagent.completed", "subagent.failed",
           "subagent.selected", "subagent.deselected", "hook.start", "hook.end", "skill.invoked",
           "permission.requested", "permission.completed", "session.context_cleared",
           "session.binary_asset", "system.notification", "tool_search.activated"}
BINARY_ATTACHMENTS = {"file", "blob"}
# the events of a response in progress: a reasoning waits through them for its message
IN_RESPONSE = {"assistant.reasoning", "assistant.message"}


@dataclass
class Event:
    no: int  # 0-based line number
    type: str
    data: dict
    at: datetime | None
    raw: dict


@dataclass
class Context:
    source_id: str
    session_id: str
    project_path: str
    title: str | None = None
    workspace: dict = field(default_factory=dict)  # workspace.yaml, for extra_columns


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and v == v else None


def parse_lines(data: bytes) -> tuple[list[Event], list[tuple[int, str, str]]]:
    """Events in file order, and the (line number, text, reason) of lines that are not events."""
    objs, bad = jsontext.typed_lines(data, "a session event")
    return [Event(no, o["type"], o["data"] if isinstance(o.get("data"), dict) else {}, from_iso(o.get("timestamp")), o)
            for no, o in objs], bad


def usage_buckets(usage: dict) -> Buckets:
    inp, read, write = _int(usage.get("inputTokens")), _int(usage.get("cacheReadTokens")), \
        _int(usage.get("cacheWriteTokens"))
    uncached = None
    if not all(map(in_range, (inp, read, write))):  # kept as written, not subtracted: unpriced, nulled as it lands
        uncached = inp
    elif inp is not None:
        uncached = inp - (read or 0) - (write or 0)
        if uncached < 0:  # the writes were not inside the input after all: only the reads are
            uncached = max(inp - (read or 0), 0)
    return Buckets(input_uncached=uncached, cache_read=read, cache_write_5m=write,
                   output=_int(usage.get("outputTokens")), reasoning=_int(usage.get("reasoningTokens")))


class Walker:
    def __init__(self, events: list[Event], ctx: Context, findings: Findings):
        self.events, self.ctx, self.findings = events, ctx, findings
        self.out = {"messages": [], "parts": [], "tool_calls": [], "usage": []}
        self.model: str | None = None
        self.calls: dict[str, dict] = {}  # call id -> tool_calls row
        self.pending: dict[str | None, list[Event]] = {}  # by agent: reasoning events awaiting their message
        self.user_requested: set[str] = set()  # call ids of the tools the user ran
        self.skipped: Counter = Counter()
        self.streamed = 0
        self.high_water_nano: float | None = None
        self.meta: dict = {}

    def lineage(self, no: int, table: str) -> dict:
        return {"provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": self.ctx.project_path,
                "source_table": table, "source_rowid": no}

    def run(self) -> dict:
        for e in self.events:
            handler = getattr(self, "on_" + e.type.replace(".", "_"), None)
            if e.type in STREAMED or e.raw.get("ephemeral") is True:
                self.streamed += 1
                continue
            if e.type not in IN_RESPONSE:  # the agent's response is over: a reasoning left is one alone
                self.flush(e.raw.get("agentId"))
            if handler:
                handler(e)
            elif e.type not in NO_ROWS:
                self.skipped[e.type] += 1
            self.track(e)
        for agent in list(self.pending):
            self.flush(agent)
        if self.streamed:
            self.findings.notes.append(f"{self.ctx.session_id}: {self.streamed} streamed or ephemeral events "
                                       "skipped (the final event holds the same content)")
        if self.skipped:
            kinds = ", ".join(f"{k}={n}" for k, n in sorted(self.skipped.items()))
            self.findings.notes.append(f"{self.ctx.session_id}: unknown events kept in the file only: {kinds}")
        return self.out

    def track(self, e: Event) -> None:
        """The current model, and the cumulative nano-AIU high-water mark."""
        d = e.data
        if e.type == "session.start":
            self.model = _str(d.get("selectedModel")) or self.model
            self.meta = d
        elif e.type in ("session.resume",):
            self.model = _str(d.get("selectedModel")) or self.model
        elif e.type == "session.model_change":
            self.model = _str(d.get("newModel")) or self.model
        elif e.type == "assistant.turn_start":
            self.model = _str(d.get("model")) or self.model
        if e.type in ("session.usage_checkpoint", "session.shutdown"):
            nano = _num(d.get("totalNanoAiu"))
            if nano is not None:
                self.high_water_nano = max(self.high_water_nano or 0, nano)

    # --- messages and parts

    def message(self, e: Event, role: str, model=None, is_summary=False) -> dict:
        row = {**self.lineage(e.no, e.type), "message_id": _str(e.raw.get("id")) or f"{self.ctx.session_id}:{e.no}",
               "session_id": self.ctx.session_id, "message_index": len(self.out["messages"]), "role": role,
               "model": model, "llm_provider": None, "created_at": e.at, "updated_at": e.at,
               "is_summary": is_summary, "part_count": 0, "parts_ok": True}
        extra = {k: v for k, v in e.raw.items() if k not in ("type", "data", "id", "timestamp", "parentId")}
        if extra:  # agentId (a sub-agent's event), ...
            row["extra_columns"] = compact_json(extra)
        self.out["messages"].append(row)
        return row

    def part(self, msg: dict, e: Event, native: str, canonical: str, raw, **cols) -> dict:
        part = {**self.lineage(e.no, e.type), "message_id": msg["message_id"], "session_id": self.ctx.session_id,
                "part_index": msg["part_count"], "part_type": canonical if canonical in PART_TYPES else "other",
                "native_part_type": native, "is_known_type": True, "role": msg["role"],
                "created_at": msg["created_at"], "raw": compact_json(raw), **cols}
        msg["part_count"] += 1
        self.out["parts"].append(part)
        return part

    def on_user_message(self, e: Event) -> None:
        d = e.data
        msg = self.message(e, "user")
        injected = bool(_str(d.get("source")))
        self.part(msg, e, "user.message", "injected_context" if injected else "text",
                  {k: v for k, v in d.items() if k != "attachments"}, text=_str(d.get("content")))
        for a in d.get("attachments") or ():
            kind = _str(a.get("type")) if isinstance(a, dict) else None
            path = _str(a.get("path")) if isinstance(a, dict) else None
            self.part(msg, e, f"attachment:{kind}", "binary" if kind in BINARY_ATTACHMENTS else "other", a,
                      binary_path=path, mime_type=_str(a.get("mimeType")) if isinstance(a, dict) else None)

    def on_system_message(self, e: Event) -> None:
        msg = self.message(e, "system")
        self.part(msg, e, "system.message", "injected_context", e.data, text=_str(e.data.get("content")))

    def on_assistant_reasoning(self, e: Event) -> None:
        self.pending.setdefault(e.raw.get("agentId"), []).append(e)  # its message follows

    def flush(self, agent: str | None) -> None:
        """Reasoning events no message followed (an aborted response): a message of their own."""
        for e in self.pending.pop(agent, ()):
            msg = self.message(e, "assistant", model=self.model)
            self.part(msg, e, "assistant.reasoning", "reasoning", e.data, reasoning=_str(e.data.get("content")))

    def on_assistant_message(self, e: Event) -> None:
        d = e.data
        model = _str(d.get("model")) or self.model
        msg = self.message(e, "assistant", model=model)
        seen = set()
        for r in self.pending.pop(e.raw.get("agentId"), ()):
            seen.add(_str(r.data.get("content")))
            self.part(msg, r, "assistant.reasoning", "reasoning", r.data, reasoning=_str(r.data.get("content")))
        reasoning = _str(d.get("reasoningText"))
        if reasoning and reasoning not in seen:  # else already an assistant.reasoning part
            self.part(msg, e, "reasoningText", "reasoning", {"reasoningText": reasoning}, reasoning=reasoning)
        content = _str(d.get("content"))
        if content or not d.get("toolRequests"):
            self.part(msg, e, "assistant.message", "text", {k: v for k, v in d.items() if k != "toolRequests"},
                      text=content)
        for req in d.get("toolRequests") or ():
            if isinstance(req, dict):
                self.call(msg, e, req, "toolRequest")

    def call(self, msg: dict, e: Event, req: dict, native: str) -> None:
        call_id = _str(req.get("toolCallId")) or f"{self.ctx.session_id}:{e.no}"
        name = _str(req.get("name")) or _str(req.get("toolName"))
        mcp = _str(req.get("mcpServerName"))  # an MCP tool's name cannot say it is one: its server does
        args = req.get("arguments")
        raw, row = call_row(self.base(e), msg["message_id"], call_id, name, args, e.at, t.TOOLS,
                            category="mcp" if mcp else t.call_category(name, args))
        self.part(msg, e, native, "tool_call", req, tool_call_id=call_id, tool_name=name, tool_input=raw)
        self.out["tool_calls"].append(row)
        self.calls.setdefault(call_id, row)

    def base(self, e: Event) -> dict:
        return {**self.lineage(e.no, e.type), "session_id": self.ctx.session_id}

    def on_tool_user_requested(self, e: Event) -> None:
        call_id = _str(e.data.get("toolCallId"))
        if call_id:
            self.user_requested.add(call_id)

    def on_tool_execution_start(self, e: Event) -> None:
        call_id = _str(e.data.get("toolCallId"))
        if call_id and call_id not in self.calls:  # no toolRequest named it
            if call_id in self.user_requested:  # the user ran it
                msg = self.message(e, "user")
            else:
                msg = self.message(e, "assistant", model=_str(e.data.get("model")) or self.model)
            self.call(msg, e, e.data, "tool.execution_start")

    def on_tool_execution_complete(self, e: Event) -> None:
        d = e.data
        call_id = _str(d.get("toolCallId"))
        msg = self.message(e, "tool")
        result = d.get("result") if isinstance(d.get("result"), dict) else {}
        error = d.get("error") if isinstance(d.get("error"), dict) else {}
        text = _str(result.get("content"))
        if text is None:
            text = _str(error.get("message"))
        is_error = None if not isinstance(d.get("success"), bool) else not d["success"]
        call = self.calls.get(call_id) if call_id else None
        if call is None:  # a result whose call is missing: kept, flagged
            call = orphan_row(self.base(e), call_id, e.at)
            self.out["tool_calls"].append(call)
        self.part(msg, e, "tool.execution_complete", "tool_result", d, tool_call_id=call_id,
                  tool_name=call["tool_name"], tool_result=text, is_error=is_error,
                  tool_result_metadata=_str(result.get("detailedContent")))
        add_result(call, msg["message_id"], text, is_error, t.TOOLS.exit_code(call["tool_name"], text), e.at)

    def on_session_import_legacy(self, e: Event) -> None:
        """A session of the first format `copilot --resume` migrated (its file then deleted)."""
        session = e.data.get("legacySession")
        if isinstance(session, dict):
            self.model = _str(session.get("selectedModel")) or self.model
            legacy.read(self, session, e.type, e.no)

    def on_session_compaction_complete(self, e: Event) -> None:
        summary = _str(e.data.get("summaryContent"))
        if summary:
            msg = self.message(e, "assistant", model=self.model, is_summary=True)
            self.part(msg, e, "session.compaction_complete", "text", e.data, text=summary)

    # --- usage

    def on_session_shutdown(self, e: Event) -> None:
        metrics = e.data.get("modelMetrics")
        for model, m in sorted(metrics.items()) if isinstance(metrics, dict) else ():
            if not isinstance(m, dict):
                continue
            buckets = usage_buckets(m.get("usage") if isinstance(m.get("usage"), dict) else {})
            if not buckets.any_count:
                continue
            nano = _num(m.get("totalNanoAiu"))
            if nano:
                usd, source, note = round(nano * USD_PER_NANO_AIU, 9), "native", f"{nano:g} nano-AIU"
            else:
                priced = price_aggregate(buckets, model, None, e.at)
                usd, source, note = priced.cost_usd, priced.cost_source, priced.note
            requests = m.get("requests") if isinstance(m.get("requests"), dict) else {}
            count = count_or_none(requests.get("count"))
            self.out["usage"].append({
                **self.lineage(e.no, e.type), "session_id": self.ctx.session_id, "message_id": None,
                "request_id": None, "requested_at": e.at, "model": model, "llm_provider": None,
                "is_sidechain": False, **buckets.columns(), "cost_usd": usd, "cost_source": source,
                "pricing_note": f"{note}; {count if count is not None else 'unknown'} requests in one process "
                                "lifetime (Copilot CLI persists no per-request usage)",
            })


def session_row(events: list[Event], walker: Walker, ctx: Context, table: str = "session.start") -> dict:
    start = walker.meta
    usage = walker.out["usage"]
    answered = any(m["role"] == "assistant" for m in walker.out["messages"])
    high_water = round(walker.high_water_nano * USD_PER_NANO_AIU, 9) if walker.high_water_nano else None
    if usage:
        cost, source = session_cost([(u["cost_usd"], u["cost_source"]) for u in usage])
        if source == "native" and high_water:  # a lifetime that died before its shutdown is only in the total
            cost = max(cost, high_water)
    elif high_water:
        cost, source = high_water, "native"
    elif answered:
        cost, source = None, "unknown"  # it answered, but never shut down: no token counts on disk
    else:
        cost, source = 0.0, "estimated"
    times = [e.at for e in events if e.at is not None] + [m["created_at"] for m in walker.out["messages"]
                                                          if m["created_at"] is not None]
    priced_models = [u["model"] for u in usage if u["cost_usd"] is not None]
    totals = [u["total_tokens"] for u in usage if u["total_tokens"] is not None]
    extra = {k: v for k, v in start.items() if k not in ("sessionId", "startTime", "context", "selectedModel")}
    context = start.get("context") if isinstance(start.get("context"), dict) else {}
    extra.update({f"context.{k}": v for k, v in context.items() if k != "cwd"})
    extra.update({f"workspace.{k}": v for k, v in ctx.workspace.items() if k not in ("id", "cwd", "summary")})
    return {
        "provider": PROVIDER, "source_id": ctx.source_id, "project_path": ctx.project_path,
        "source_table": table, "source_rowid": events[0].no if events else 0,
        "session_id": ctx.session_id, "parent_session_id": None, "root_session_id": ctx.session_id,
        "is_root": True, "title": ctx.title,
        "created_at": from_iso(start.get("startTime")) or (min(times) if times else None),
        "updated_at": max(times) if times else None, "cost_usd": cost, "cost_source": source,
        "cost_includes_subagents": True,
        "model": (priced_models or [u["model"] for u in usage] or [walker.model])[-1], "llm_provider": None,
        "total_tokens": sum(totals) if totals else None, "message_count": len(walker.out["messages"]),
        "summary_message_id": next((m["message_id"] for m in reversed(walker.out["messages"]) if m["is_summary"]),
                                   None),
        "extra_columns": compact_json(extra) if extra else None,
    }


def normalise(events: list[Event], ctx: Context) -> tuple[dict[str, list[dict]], Findings]:
    findings = Findings()
    walker = Walker(events, ctx, findings)
    rows = walker.run()
    rows["sessions"] = [session_row(events, walker, ctx)]
    return rows, findings


def normalise_legacy(doc: dict, ctx: Context) -> tuple[dict[str, list[dict]], Findings]:
    """A session file of the first format (transforms.copilot.legacy): no events, no token counts."""
    findings = Findings()
    walker = Walker([], ctx, findings)
    walker.meta = {"startTime": doc.get("startTime")}
    walker.model = _str(doc.get("selectedModel"))
    legacy.read(walker, doc, "timeline")
    rows = walker.run()
    rows["sessions"] = [session_row([], walker, ctx, table="history-session-state")]
    return rows, findings


def expected_counts(events: list[Event]) -> dict[str, int]:
    """Messages, counted on the events themselves."""
    msgs, requested = 0, set()
    reasoning: Counter = Counter()  # by agent: reasoning events since its last message
    for e in events:
        d = e.data
        if e.type in STREAMED or e.raw.get("ephemeral") is True:
            continue
        agent = e.raw.get("agentId")
        if e.type == "assistant.reasoning":
            reasoning[agent] += 1
        elif e.type == "assistant.message":
            reasoning[agent] = 0
        else:
            msgs += reasoning.pop(agent, 0)  # a response that never came: each reasoning is a message
        if e.type in ("user.message", "system.message", "tool.execution_complete"):
            msgs += 1
        elif e.type == "assistant.message":
            msgs += 1
            requested.update(r.get("toolCallId") for r in d.get("toolRequests") or () if isinstance(r, dict))
        elif e.type == "tool.execution_start" and d.get("toolCallId") not in requested:
            requested.add(d.get("toolCallId"))
            msgs += 1
        elif e.type == "session.compaction_complete" and d.get("summaryContent"):
            msgs += 1
        elif e.type == "session.import_legacy":
            msgs += legacy.expected_messages(d.get("legacySession"))
    return {"sessions": 1, "messages": msgs + sum(reasoning.values())}
