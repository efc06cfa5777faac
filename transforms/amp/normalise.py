"""One Amp thread (`threads/T-<uuid>.json`) -> sessions, messages, parts, tool_calls, usage. Pure.

Amp (Sourcegraph) is closed source: no public repository holds the writer of its thread files.
The format is learnt from the peers' readers: ccusage (`rust/crates/ccusage/src/adapter/amp/`),
tokscale (`crates/tokscale-core/src/sessions/amp.rs`), cross_agent_session_resumer
(`src/providers/amp.rs`) and openusage's Amp provider notes. A thread is
`{v, id, created (ms), title, env.initial.{cwd,trees}, messages[], usageLedger.events[]}`;
a message is `{role: user|assistant|info, messageId, content[] (Anthropic-style blocks),
meta.sentAt (ms), usage?}`.

The traps:
- **One request, two records.** An assistant message's `usage` and a `usageLedger` event with
  `toMessageId` = its `messageId` are the same request: one `usage` row. The message gives the
  token split (`inputTokens` is uncached: `totalInputTokens` = input + cache creation + cache
  read), the ledger event the `credits` and the time. The peers disagree on the rest: ccusage
  reads ONLY the ledger when there is one (a message with usage but no ledger event is dropped);
  tokscale keeps both. A message that has usage was billed whether or not the ledger (newer than
  message usage) lists it, so agentlake keeps the union: a message without an event, and an
  event without a message (work billed to the thread outside its messages), each count once.
- **Credits are dollars.** Amp shows credit balances in dollars (`Individual credits: $N`): a
  numeric `credits` is the `native` cost (tokscale does the same; ccusage shows credits beside a
  LiteLLM estimate). A recorded 0 is a real 0 (Amp Free); no credits at all is priced from the
  tokens (`estimated`, Anthropic multipliers), else `unknown`.
- **Forks copy history.** A thread with a `relationships` entry of type `fork` naming its parent
  starts with the parent's messages; the leading messages equal to the parent's are replayed:
  no rows, their cost is `inherited_cost_usd`. Handoffs start fresh (a summary) and copy nothing.
- **Sub-agents** (`Task`, `oracle`, ...) run inside a tool call: only their result is in the
  thread; their spend, when billed to the thread, is a ledger event without a message.
- **Streaming**: the thread is rewritten whole; a message still `streaming` (`state.type`) is
  read as it stands and replaced on the next read. **Archived copies** (the VS Code extension's
  `threads3/`) and **pruned history** (`amp threads delete`) are discovery's: one source per id.
"""

from dataclasses import dataclass
from datetime import datetime

from transforms.amp import tools as t
from transforms.contract import PART_TYPES
from transforms.costs import session_cost
from transforms.findings import Findings
from transforms.jsontext import int64_or_none as _int
from transforms.jsontext import str_or_none as _str
from transforms.pricing import Buckets, price_buckets
from transforms.timestamps import from_epoch, from_iso
from transforms.tools import add_result, call_row, compact_json, orphan_row

PROVIDER = "amp"
BLOCKS = {"text": "text", "thinking": "reasoning", "redacted_thinking": "reasoning", "tool_use": "tool_call",
          "server_tool_use": "tool_call", "tool_result": "tool_result", "image": "binary", "document": "binary",
          "summary": "text"}
ROLES = {"user": "user", "assistant": "assistant", "info": "system"}
THREAD_COLUMNS = {"id", "created", "title", "messages", "usageLedger", "env", "v"}


@dataclass
class Context:
    source_id: str
    project_path: str
    run_at: datetime


def _dict(v) -> dict:
    return v if isinstance(v, dict) else {}


def _credits(v):
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and v == v and v != float("inf")
    return float(v) if ok else None


def message_buckets(usage: dict) -> Buckets | None:
    inp, out = _int(usage.get("inputTokens")), _int(usage.get("outputTokens"))
    write, read = _int(usage.get("cacheCreationInputTokens")), _int(usage.get("cacheReadInputTokens"))
    if inp is None and out is None and write is None and read is None:
        total = _int(usage.get("totalTokens"))  # only a total: kept whole as input (peers put it in output)
        return Buckets(input_uncached=total) if total else None
    return Buckets(input_uncached=inp, cache_read=read, cache_write_5m=write, output=out)


def ledger_buckets(tokens: dict) -> Buckets | None:
    return message_buckets({"inputTokens": tokens.get("input"), "outputTokens": tokens.get("output"),
                            "cacheReadInputTokens": tokens.get("cacheReadInputTokens"),
                            "cacheCreationInputTokens": tokens.get("cacheCreationInputTokens"),
                            "totalTokens": tokens.get("total")})


def replayed_count(messages: list, parent: dict | None) -> int:
    """How many leading messages of a fork are its parent's (equal JSON, in order)."""
    theirs = parent.get("messages") if isinstance(parent, dict) else None
    if not isinstance(theirs, list):
        return 0
    n = 0
    while n < len(messages) and n < len(theirs) and messages[n] == theirs[n]:
        n += 1
    return n


def fork_parent(thread: dict) -> str | None:
    for rel in thread.get("relationships") or ():
        if isinstance(rel, dict) and rel.get("type") == "fork" and rel.get("role") == "parent":
            return _str(rel.get("threadID")) or _str(rel.get("threadId"))
    return None


class Normaliser:
    def __init__(self, thread: dict, ctx: Context, findings: Findings, parent: dict | None):
        self.thread, self.ctx, self.findings = thread, ctx, findings
        self.sid = thread["id"]
        self.out = {"messages": [], "parts": [], "tool_calls": [], "usage": []}
        self.calls: dict[str, dict] = {}
        self.created = from_epoch(thread.get("created"))
        messages = thread.get("messages") if isinstance(thread.get("messages"), list) else []
        self.replayed = replayed_count(messages, parent) if fork_parent(thread) else 0
        self.messages = messages
        self.inherited: list[float | None] = []

    def lineage(self, table: str, rowid: int) -> dict:
        return {"provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": self.ctx.project_path,
                "source_table": table, "source_rowid": rowid}

    def run(self) -> dict:
        events = _dict(self.thread.get("usageLedger")).get("events")
        events = [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []
        by_message = {}
        for e in events:
            to = e.get("toMessageId")
            if isinstance(to, int) and not isinstance(to, bool):
                by_message.setdefault(to, e)
        matched: set[int] = set()
        replayed_ids = {m.get("messageId") for m in self.messages[: self.replayed] if isinstance(m, dict)}
        for index, m in enumerate(self.messages):
            if not isinstance(m, dict):
                self.findings.unknown_part_types["non-object message"] += 1
                continue
            event = by_message.get(m.get("messageId")) if m.get("role") == "assistant" else None
            if event is not None:
                matched.add(id(event))
            if index < self.replayed:  # the parent's history, copied by the fork
                self.inherited.append(self.request(m, event, None, index, priced_only=True))
                continue
            msg = self.message(m, index)
            if m.get("role") == "assistant":
                self.request(m, event, msg, index)
        for i, e in enumerate(events):
            if id(e) not in matched and e.get("toMessageId") not in replayed_ids:
                self.request({}, e, None, i)
        if self.replayed:
            self.findings.notes.append(f"{self.sid}: {self.replayed} messages copied from the forked thread skipped")
        return self.out

    # --- messages and parts

    def message(self, m: dict, index: int) -> dict:
        meta = _dict(m.get("meta"))
        usage = _dict(m.get("usage"))
        at = from_epoch(meta.get("sentAt")) or from_iso(usage.get("timestamp")) or self.created
        role = ROLES.get(m.get("role"), _str(m.get("role")))
        blocks = m.get("content") if isinstance(m.get("content"), list) else \
            ([{"type": "text", "text": m["content"]}] if isinstance(m.get("content"), str) else [])
        extra = {k: v for k, v in m.items() if k not in ("role", "content", "messageId", "meta", "usage")}
        row = {**self.lineage("messages", index), "message_id": self.message_id(m, index), "session_id": self.sid,
               "message_index": len(self.out["messages"]), "role": role,
               "model": _str(usage.get("model")) if role == "assistant" else None,
               "llm_provider": None, "created_at": at, "updated_at": at,
               "is_summary": any(isinstance(b, dict) and b.get("type") == "summary" for b in blocks),
               "part_count": 0, "parts_ok": True, "extra_columns": compact_json(extra) if extra else None}
        self.out["messages"].append(row)
        for block in blocks:
            self.part(row, block, index)
        return row

    def message_id(self, m: dict, index: int) -> str:
        mid = m.get("messageId")
        return f"{self.sid}:{mid if isinstance(mid, (int, str)) and not isinstance(mid, bool) else f'#{index}'}"

    def part(self, msg: dict, block, index: int) -> None:
        kind = _str(block.get("type")) if isinstance(block, dict) else None
        b = block if isinstance(block, dict) else {}
        known = kind in BLOCKS
        if not known:
            self.findings.unknown_part_types[kind] += 1
        cols = {"part_type": BLOCKS.get(kind, "other"), "native_part_type": kind, "is_known_type": known}
        if kind == "text":
            cols["text"] = _str(b.get("text"))
        elif kind == "summary":
            summary = _dict(b.get("summary"))
            cols["text"] = _str(summary.get("summary")) or _str(b.get("text"))
        elif kind in ("thinking", "redacted_thinking"):
            cols["reasoning"] = _str(b.get("thinking"))
        elif kind in ("image", "document"):
            source = _dict(b.get("source"))
            cols.update(mime_type=_str(source.get("media_type")), binary_path=_str(b.get("path")))
        part = {**self.lineage("messages", index), **cols, "message_id": msg["message_id"], "session_id": self.sid,
                "part_index": msg["part_count"], "role": msg["role"], "created_at": msg["created_at"],
                "raw": compact_json(block)}
        part["part_type"] = part["part_type"] if part["part_type"] in PART_TYPES else "other"
        msg["part_count"] += 1
        self.out["parts"].append(part)
        if kind in ("tool_use", "server_tool_use"):
            self.call(msg, part, b, index)
        elif kind == "tool_result":
            self.result(msg, part, b, index)

    def call(self, msg: dict, part: dict, b: dict, index: int) -> None:
        call_id, name = _str(b.get("id")), _str(b.get("name"))
        raw, row = call_row(self.base(index), msg["message_id"], call_id, name, b.get("input"), msg["created_at"],
                            t.TOOLS)
        part.update(tool_call_id=call_id, tool_name=name, tool_input=raw)
        self.out["tool_calls"].append(row)
        if call_id:
            self.calls.setdefault(call_id, row)

    def result(self, msg: dict, part: dict, b: dict, index: int) -> None:
        call_id = _str(b.get("toolUseID")) or _str(b.get("tool_use_id"))
        run = _dict(b.get("run"))
        status = _str(run.get("status"))
        text = t.result_text(run)
        is_error = None if status is None else status in t.ERROR_STATUSES
        call = self.calls.get(call_id) if call_id else None
        if call is None:  # a result whose call is missing (or in the fork's copied history)
            call = orphan_row(self.base(index), call_id, msg["created_at"])
            self.out["tool_calls"].append(call)
        part.update(tool_call_id=call_id, tool_name=call["tool_name"], tool_result=text, is_error=is_error,
                    finish_reason=status)
        add_result(call, msg["message_id"], text, is_error,
                   t.exit_code_of(run) if call["tool_name"] in t.TOOLS.shell_tools else None, msg["created_at"])

    def base(self, index: int) -> dict:
        return {**self.lineage("messages", index), "session_id": self.sid}

    # --- usage

    def request(self, m: dict, event: dict | None, msg: dict | None, index: int, priced_only=False):
        """One billed request: a message's usage and its ledger event, or either alone."""
        usage, event = _dict(m.get("usage")), event or {}
        buckets = message_buckets(usage) if usage else None
        if buckets is None and event:
            buckets = ledger_buckets(_dict(event.get("tokens")))
        credits = _credits(event.get("credits")) if "credits" in event else _credits(usage.get("credits"))
        if buckets is None and credits is None:
            return None
        buckets = buckets or Buckets()
        model = _str(usage.get("model")) or _str(event.get("model"))
        at = from_iso(event.get("timestamp")) or from_iso(usage.get("timestamp")) or \
            (msg["created_at"] if msg else self.created)
        if credits is not None:
            cost, source, note = credits, "native", "Amp credits (USD)"
        else:
            priced = price_buckets(buckets, model, None, at)
            cost, source, note = priced.cost_usd, priced.cost_source, priced.note
        if priced_only:
            return cost
        where = "message usage + ledger event" if usage and event else ("ledger event" if event else "message usage")
        op = _str(event.get("operationType"))
        self.out["usage"].append({
            **self.lineage("usageLedger.events" if not usage else "messages", index), "session_id": self.sid,
            "message_id": msg["message_id"] if msg else None, "request_id": _str(event.get("id")),
            "requested_at": at, "model": model, "llm_provider": None, "is_sidechain": False,
            **buckets.columns(), "cost_usd": cost, "cost_source": source,
            "pricing_note": f"{note}; from the {where}" + (f" ({op})" if op else ""),
        })
        return cost


def session_row(thread: dict, n: Normaliser, ctx: Context) -> dict:
    usage = n.out["usage"]
    if usage:
        cost, source = session_cost([(u["cost_usd"], u["cost_source"]) for u in usage])
    else:
        cost, source = 0.0, "estimated"  # nothing billed: a known $0
    times = [m["created_at"] for m in n.out["messages"] if m["created_at"]]
    totals = [u["total_tokens"] for u in usage if u["total_tokens"] is not None]
    models = [u["model"] for u in usage if u["cost_usd"] is not None] or [u["model"] for u in usage]
    inherited = [c for c in n.inherited if c is not None]
    extra = {k: v for k, v in thread.items() if k not in THREAD_COLUMNS}
    return {
        "provider": PROVIDER, "source_id": ctx.source_id, "project_path": ctx.project_path,
        "source_table": "thread", "source_rowid": 0, "session_id": n.sid, "parent_session_id": None,
        "root_session_id": n.sid, "is_root": True, "title": _str(thread.get("title")),
        "created_at": n.created or (min(times) if times else None), "updated_at": max(times) if times else n.created,
        "cost_usd": cost, "cost_source": source, "cost_includes_subagents": True,
        "forked_from_session_id": fork_parent(thread),
        "inherited_cost_usd": round(sum(inherited), 9) if n.replayed and inherited else None,
        "model": models[-1] if models else None, "llm_provider": None,
        "total_tokens": sum(totals) if totals else None, "message_count": len(n.out["messages"]),
        "summary_message_id": next((m["message_id"] for m in reversed(n.out["messages"]) if m["is_summary"]), None),
        "extra_columns": compact_json(extra) if extra else None,
    }


def normalise(thread: dict, ctx: Context, parent: dict | None = None) -> tuple[dict[str, list[dict]], Findings]:
    findings = Findings()
    n = Normaliser(thread, ctx, findings, parent)
    rows = n.run()
    rows["sessions"] = [session_row(thread, n, ctx)]
    return rows, findings


def expected_counts(thread: dict, parent: dict | None = None) -> dict[str, int]:
    """Messages and parts the thread's own messages hold, counted on the JSON itself."""
    messages = thread.get("messages") if isinstance(thread.get("messages"), list) else []
    own = [m for m in messages[replayed_count(messages, parent) if fork_parent(thread) else 0:] if isinstance(m, dict)]
    parts = sum(len(m["content"]) if isinstance(m.get("content"), list) else (1 if isinstance(m.get("content"), str)
                                                                               else 0) for m in own)
    return {"sessions": 1, "messages": len(own), "parts": parts}
