"""One Factory Droid session (`<uuid>.jsonl` + `<uuid>.settings.json`) -> sessions, messages,
parts, tool_calls, usage. Pure.

Droid (Factory) is closed source: no public repository holds the writer of its session files.
The format is learnt from the peers' readers: ccusage (`rust/crates/ccusage/src/adapter/droid/`)
and tokscale (`crates/tokscale-core/src/sessions/droid.rs`) for the settings file, and the
transcript readers of agent-sessions (`DroidSessionParser.swift`) and others for the JSONL:
`{"type":"session_start","id","title","sessionTitle","owner","version","cwd"}`, then
`{"type":"message","id","timestamp","parentId","message":{"role","content":[blocks]}}` with
Anthropic-style blocks (`text`, `thinking`, `tool_use`, `tool_result` with `tool_use_id`,
`content`, `is_error`, `image`).

The traps:
- **Cumulative counters.** `settings.json` holds ONE running total per session
  (`tokenUsage`: `inputTokens`, `outputTokens`, `cacheCreationTokens`, `cacheReadTokens`,
  `thinkingTokens`), rewritten in place as the session spends: there is no per-request usage. It
  is one `usage` row per session, replaced on every read (never a sum of snapshots). It is dated
  at the transcript's last message (when the total was last accrued): ccusage dates it at
  `providerLockTimestamp` (when the provider was chosen, often days earlier); tokscale at the
  file's mtime (which a copy or restore rewinds).
- **Buckets.** `inputTokens` is uncached input (cache reads are their own, far larger, count);
  cache creation is the 5-minute bucket (TTL not recorded). Both peers treat `thinkingTokens` as
  disjoint from `outputTokens` and add it for cost; with no source to say otherwise agentlake
  does the same: output = outputTokens + thinkingTokens, reasoning = thinkingTokens.
- **Model names.** A bring-your-own-key model is stored as `custom:<Name>-[<Provider>]-<n>`; the
  prefix, the bracketed provider and the index are dropped. Dots are kept: both peers turn them
  into dashes, which makes `gemini-2.5-pro` a model no price table knows. No cost is recorded:
  `estimated` from the tokens, else `unknown`.
- **Sub-agents** (the `Task` tool) run as sessions of their own whose title starts
  `# Task Tool Invocation`; the parent is not recorded, so each is a root whose usage is marked
  `is_sidechain`. **Streamed duplicates**: a message id written twice (a rewrite of the same
  message) is counted once, the last copy winning. **Pruned history**: a transcript deleted with
  its settings kept still gives the session and its usage; discovery keys sessions by uuid.
Text blocks wrapped in `<system-reminder>` are injected context, not prompts.
"""

import re
from dataclasses import dataclass
from datetime import datetime

from transforms import jsontext
from transforms.contract import PART_TYPES
from transforms.costs import price_aggregate
from transforms.droid import tools as t
from transforms.findings import Findings
from transforms.jsontext import int64_or_none as _int
from transforms.jsontext import str_or_none as _str
from transforms.pricing import Buckets, in_range
from transforms.timestamps import from_iso
from transforms.tools import add_result, call_row, compact_json, orphan_row

PROVIDER = "droid"
BLOCKS = {"text": "text", "thinking": "reasoning", "redacted_thinking": "reasoning", "tool_use": "tool_call",
          "tool_result": "tool_result", "image": "binary", "document": "binary"}
SUBAGENT_TITLE = "# Task Tool Invocation"
PRICED_PROVIDERS = {"anthropic", "openai", "google", "xai", "groq", "mistral", "deepseek"}
_BRACKETS = re.compile(r"\[[^\]]*\]")


@dataclass
class Event:
    no: int  # 0-based line number
    type: str
    at: datetime | None
    raw: dict


@dataclass
class Context:
    source_id: str
    session_id: str
    project_path: str
    run_at: datetime


def model_name(raw: str | None) -> str | None:
    """`custom:Claude-Opus-4.5-Thinking-[Anthropic]-0` -> `claude-opus-4.5-thinking`; ids kept."""
    if not raw:
        return None
    if not raw.startswith("custom:"):
        return raw
    name = _BRACKETS.sub("", raw[len("custom:"):]).strip().lower()
    name = re.sub(r"[\s-]+", "-", name).strip("-")
    return re.sub(r"-\d+$", "", name) or None


def parse_lines(data: bytes) -> tuple[list[Event], list[tuple[int, str, str]]]:
    """Transcript lines in file order, and the (line number, text, reason) of lines that are not."""
    objs, bad = jsontext.typed_lines(data, "a session event")
    return [Event(no, o["type"], from_iso(o.get("timestamp")), o) for no, o in objs], bad


def usage_buckets(usage: dict) -> Buckets | None:
    inp, out = _int(usage.get("inputTokens")), _int(usage.get("outputTokens"))
    write, read = _int(usage.get("cacheCreationTokens")), _int(usage.get("cacheReadTokens"))
    thinking = _int(usage.get("thinkingTokens"))
    if all(v is None for v in (inp, out, write, read, thinking)):
        return None
    if not all(map(in_range, (out, thinking))):  # kept as written, not summed: unpriced, nulled as it lands
        return Buckets(input_uncached=inp, cache_read=read, cache_write_5m=write, output=out, reasoning=thinking)
    output = None if out is None and thinking is None else (out or 0) + (thinking or 0)
    return Buckets(input_uncached=inp, cache_read=read, cache_write_5m=write, output=output, reasoning=thinking)


class Walker:
    def __init__(self, events: list[Event], ctx: Context, findings: Findings):
        self.events, self.ctx, self.findings = events, ctx, findings
        self.out = {"messages": [], "parts": [], "tool_calls": []}
        self.calls: dict[str, dict] = {}
        self.start: dict = {}

    def lineage(self, no: int) -> dict:
        return {"provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": self.ctx.project_path,
                "source_table": "jsonl", "source_rowid": no}

    def run(self) -> dict:
        latest: dict[str, Event] = {}
        order: list[str] = []
        skipped = 0
        for e in self.events:
            if e.type == "session_start" and not self.start:
                self.start = e.raw
            elif e.type == "message" and isinstance(e.raw.get("message"), dict):
                key = _str(e.raw.get("id")) or f"#{e.no}"
                if key not in latest:
                    order.append(key)
                latest[key] = e  # a message rewritten: the last copy wins
            else:
                skipped += 1
        if len(order) < sum(1 for e in self.events if e.type == "message"):
            self.findings.notes.append(f"{self.ctx.session_id}: repeated message ids counted once (last copy)")
        if skipped:
            self.findings.notes.append(f"{self.ctx.session_id}: {skipped} lines without messages kept in the file only")
        for key in order:
            self.message(latest[key])
        return self.out

    def message(self, e: Event) -> None:
        body = e.raw["message"]
        role = _str(body.get("role"))
        content = body.get("content")
        blocks = content if isinstance(content, list) else ([{"type": "text", "text": content}]
                                                             if isinstance(content, str) else [])
        extra = {k: v for k, v in e.raw.items() if k not in ("type", "id", "timestamp", "message")}
        extra.update({f"message.{k}": v for k, v in body.items() if k not in ("role", "content")})
        msg = {**self.lineage(e.no), "message_id": _str(e.raw.get("id")) or f"{self.ctx.session_id}:{e.no}",
               "session_id": self.ctx.session_id, "message_index": len(self.out["messages"]), "role": role,
               "model": None, "llm_provider": None, "created_at": e.at, "updated_at": e.at, "is_summary": False,
               "part_count": 0, "parts_ok": True, "extra_columns": compact_json(extra) if extra else None}
        self.out["messages"].append(msg)
        for block in blocks:
            self.part(msg, e, block)

    def part(self, msg: dict, e: Event, block) -> None:
        b = block if isinstance(block, dict) else {}
        kind = _str(b.get("type"))
        known = kind in BLOCKS
        if not known:
            self.findings.unknown_part_types[kind] += 1
        cols = {"part_type": BLOCKS.get(kind, "other"), "native_part_type": kind, "is_known_type": known}
        if kind == "text":
            text = _str(b.get("text"))
            cols["text"] = text
            if msg["role"] == "user" and (text or "").lstrip().startswith("<system-reminder>"):
                cols["part_type"] = "injected_context"
        elif kind in ("thinking", "redacted_thinking"):
            cols["reasoning"] = _str(b.get("thinking"))
        elif kind in ("image", "document"):
            cols["mime_type"] = _str((b.get("source") or {}).get("media_type")) if isinstance(b.get("source"), dict) \
                else None
        part = {**self.lineage(e.no), **cols, "message_id": msg["message_id"], "session_id": self.ctx.session_id,
                "part_index": msg["part_count"], "role": msg["role"], "created_at": msg["created_at"],
                "raw": compact_json(block)}
        part["part_type"] = part["part_type"] if part["part_type"] in PART_TYPES else "other"
        msg["part_count"] += 1
        self.out["parts"].append(part)
        if kind == "tool_use":
            self.call(msg, part, b, e)
        elif kind == "tool_result":
            self.result(msg, part, b, e)

    def call(self, msg: dict, part: dict, b: dict, e: Event) -> None:
        call_id, name = _str(b.get("id")), _str(b.get("name"))
        raw, row = call_row(self.base(e), msg["message_id"], call_id, name, b.get("input"), e.at, t.TOOLS)
        part.update(tool_call_id=call_id, tool_name=name, tool_input=raw)
        self.out["tool_calls"].append(row)
        if call_id:
            self.calls.setdefault(call_id, row)

    def result(self, msg: dict, part: dict, b: dict, e: Event) -> None:
        call_id = _str(b.get("tool_use_id"))
        content = b.get("content")
        if isinstance(content, list):
            texts = [c.get("text") for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)]
            text = "\n".join(texts) if texts else compact_json(content)
        else:
            text = _str(content)
        is_error = b.get("is_error") if isinstance(b.get("is_error"), bool) else None
        call = self.calls.get(call_id) if call_id else None
        if call is None:
            call = orphan_row(self.base(e), call_id, e.at)
            self.out["tool_calls"].append(call)
        part.update(tool_call_id=call_id, tool_name=call["tool_name"], tool_result=text, is_error=is_error)
        add_result(call, msg["message_id"], text, is_error, t.TOOLS.exit_code(call["tool_name"], text), e.at)

    def base(self, e: Event) -> dict:
        return {**self.lineage(e.no), "session_id": self.ctx.session_id}


def normalise(events: list[Event], settings: dict, ctx: Context) -> tuple[dict[str, list[dict]], Findings]:
    findings = Findings()
    walker = Walker(events, ctx, findings)
    rows = walker.run()
    start = walker.start
    title = _str(start.get("sessionTitle")) or _str(start.get("title"))
    is_sub = (title or "").startswith(SUBAGENT_TITLE)
    raw_model = _str(settings.get("model"))
    model = model_name(raw_model)
    lock = _str(settings.get("providerLock"))
    provider = lock.lower() if lock and lock.lower() in PRICED_PROVIDERS else None
    times = [m["created_at"] for m in rows["messages"] if m["created_at"]]
    lock_at = from_iso(settings.get("providerLockTimestamp"))
    at = max(times) if times else lock_at
    usage = settings.get("tokenUsage") if isinstance(settings.get("tokenUsage"), dict) else {}
    buckets = usage_buckets(usage)
    rows["usage"] = []
    if buckets is not None and buckets.any_count:
        priced = price_aggregate(buckets, model, provider, at)
        rows["usage"].append({
            "provider": PROVIDER, "source_id": ctx.source_id, "project_path": ctx.project_path,
            "source_table": "settings.tokenUsage", "source_rowid": 0, "session_id": ctx.session_id,
            "message_id": None, "request_id": None, "requested_at": at, "model": model, "llm_provider": provider,
            "is_sidechain": is_sub, **buckets.columns(), "cost_usd": priced.cost_usd,
            "cost_source": priced.cost_source,
            "pricing_note": f"{priced.note}; the session's running total (Droid records no per-request usage)",
        })
        cost, source = priced.cost_usd, priced.cost_source
    elif any(m["role"] == "assistant" for m in rows["messages"]):
        cost, source = None, "unknown"  # it answered, but no token totals were recorded (or they are gone)
    else:
        cost, source = 0.0, "estimated"
    extra = {k: v for k, v in settings.items() if k not in ("model", "tokenUsage")}
    extra.update({f"session_start.{k}": v for k, v in start.items() if k not in ("type", "id", "title", "cwd")})
    if raw_model and raw_model != model:
        extra["model_as_stored"] = raw_model
    rows["sessions"] = [{
        "provider": PROVIDER, "source_id": ctx.source_id, "project_path": ctx.project_path,
        "source_table": "session_start", "source_rowid": 0, "session_id": ctx.session_id,
        "parent_session_id": None, "root_session_id": ctx.session_id, "is_root": True, "title": title,
        "created_at": min(times) if times else lock_at, "updated_at": at, "cost_usd": cost, "cost_source": source,
        "cost_includes_subagents": False, "model": model, "llm_provider": provider,
        "total_tokens": buckets.total if buckets else None, "message_count": len(rows["messages"]),
        "extra_columns": compact_json(extra) if extra else None,
    }]
    return rows, findings
