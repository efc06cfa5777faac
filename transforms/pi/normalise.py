"""One pi session file (badlogic/pi-mono, `packages/coding-agent`) -> canonical rows. Pure.

The store, from pi's own source and docs (in badlogic/pi-mono, not here:
`packages/coding-agent/src/core/session-manager.ts`, `packages/coding-agent/docs/session.md`): one
JSONL file per session, `<agent dir>/sessions/--<cwd with / as ->--/<ISO time>_<uuid>.jsonl`. Line 1 is the
header `{"type":"session","version":3,"id","timestamp","cwd","parentSession"?}`; every other line
is an entry with `id` (8 hex), `parentId` (a tree: `/tree` branches in place), `timestamp` (ISO).
`message` entries hold an AgentMessage: `user`, `assistant` (content `text`/`thinking`/`toolCall`,
`provider`, `model`, `usage`, `stopReason`), `toolResult` (`toolCallId`, `toolName`, `isError`),
`bashExecution` (a `!` command the user ran), `custom` (an extension's injected message; `hookMessage`
before v3), and the summary roles. Other entries: `compaction`, `branch_summary`, `custom_message`,
`model_change`, `thinking_level_change`, `custom` (extension state), `label`, `session_info` (name).
Schema versions: v1 (no `version`, no `id`/`parentId`: entries get `<session>:<line>` ids here),
v2 (tree), v3 (`hookMessage` renamed `custom`). pi migrates a file when it opens it; old files
that were never reopened stay as they are, so all three are read.

The traps, and what is done about them:
- streamed duplicates: none inside pi: a message is persisted once, on `message_end`
  (agent-session.ts). But pi <= 0.55.1 could write a file's header and entries TWICE (a branch
  taken before the first reply: createBranchedSession + _persist, fixed in 2f64df1e, #1672): a
  repeated header of the same session and an entry id already seen are skipped (first copy wins).
- cumulative counters: none: `usage` is per response, already in disjoint buckets (pi-ai
  subtracts OpenAI's cached tokens from `input`; Anthropic's are disjoint). `cacheWrite` has no
  TTL: it is the 5-minute bucket. `output` may include reasoning (pi adds OpenAI-compatible
  `reasoning_tokens` to it); pi records no reasoning count of its own (null).
- cost: `usage.cost.total` is pi's own price (`calculateCost`, its model registry) and is
  `native`. pi writes 0 for a model its registry does not price (subscriptions such as
  `github-copilot`, local and custom models): those requests are priced from genai-prices
  (`estimated`), else `unknown`, never $0. A request with no tokens and no cost (an error before
  any response) is not a billed request.
- forks: `/fork` (createBranchedSession) and `--fork` (forkFrom) write a NEW file whose header
  names the old one (`parentSession`, a path) and which starts with COPIES of the old entries
  (same ids, original timestamps). ccusage and tokscale key a request by its session, so they
  count a fork's copied requests twice. Here copied entries give no rows: with the parent's file
  found, the entries whose id it holds; without it, the entries dated before the fork's header
  (pi writes the header when it forks; the copies keep older times). The fork is a root with
  `forked_from_session_id`; `inherited_cost_usd` is the copied requests' cost.
- branches: `/tree` branches inside the same file; every branch's requests were billed, so
  every entry counts, not only the current leaf's path.
- sub-agents: pi has none built in; the example `subagent` extension runs `pi --no-session`,
  so there is no transcript: its usage is only inside the tool result's `details` (not added).
- archived copies: none (pi never moves a file); a copy of a file elsewhere is the same source
  (its session id). Pruned history: pi deletes nothing on its own (the user may, `/resume`
  Ctrl+D); the lake keeps what it read.
- is_error: pi's bash tool sets `isError` for a non-zero exit ("Command exited with code N"):
  here that is `exit_code` N and not an error (a non-zero exit is not a tool failure, as for
  every agent); `isError` stays in `raw`.
"""

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from transforms.findings import Findings
from transforms.jsontext import int64_or_none
from transforms.costs import session_cost
from transforms.pi import tools as t
from transforms.pricing import Buckets, price_buckets
from transforms.timestamps import from_epoch, from_iso
from transforms.tools import add_result, call_row, compact_json

PROVIDER = "pi"
# pi's provider names -> genai-prices' (a subscription or a gateway of the same models)
PRICE_PROVIDER = {"openai-codex": "openai", "azure-openai-responses": "azure", "google-gemini-cli": "google",
                  "google-antigravity": "google", "google-vertex": "google", "amazon-bedrock": "aws",
                  "xai": "x-ai", "kimi-coding": "moonshotai"}
SUMMARY_ROLES = {"compactionSummary", "branchSummary"}
NOT_MESSAGES = {"model_change", "thinking_level_change", "custom", "label", "session_info"}
_EXIT = re.compile(r"\n\nCommand exited with code (-?\d+)\s*$")


@dataclass
class Entry:
    no: int  # 0-based line number
    obj: dict

    @property
    def type(self):
        return self.obj.get("type")


@dataclass
class Context:
    source_id: str
    session_id: str
    project_path: str
    copied: set = field(default_factory=set)  # line numbers of entries copied from the parent


def _str(v):
    return v if isinstance(v, str) else None


def _decoded_size(data) -> int | None:
    """Bytes held by a base64 string (what the attachment weighs), without decoding it."""
    return len(data.rstrip("=")) * 3 // 4 if isinstance(data, str) else None


def _count(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 62 else None


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and -math.inf < v < math.inf


def usage_buckets(usage) -> Buckets | None:
    # a negative count kept as pi wrote it (its issue 2048): the request is not priced, where read as
    # not recorded it was priced as if it had no input
    if not isinstance(usage, dict):
        return None
    b = Buckets(input_uncached=int64_or_none(usage.get("input")), cache_read=int64_or_none(usage.get("cacheRead")),
                cache_write_5m=int64_or_none(usage.get("cacheWrite")), output=int64_or_none(usage.get("output")))
    return b if b.total is not None else None


def recorded_cost(usage) -> tuple[float | None, bool]:
    """(pi's cost.total, whether it was garbled: present but not a number)."""
    cost = usage.get("cost") if isinstance(usage, dict) else None
    total = cost.get("total") if isinstance(cost, dict) else None
    if total is None:
        return None, False
    return (float(total), False) if _number(total) else (None, True)


def price_request(buckets: Buckets, usage, model, provider, at) -> tuple[float | None, str, str] | None:
    """(cost, cost_source, note) of one assistant message; None when it billed nothing."""
    cost, _ = recorded_cost(usage)
    if cost is not None and cost > 0:
        return cost, "native", "usage.cost.total"
    if not buckets or not buckets.any_count:
        return None  # no tokens, no cost: an error before any response
    priced = price_buckets(buckets, model, PRICE_PROVIDER.get(provider, provider), at)
    return priced.cost_usd, priced.cost_source, f"pi recorded no cost; {priced.note}"


class Walker:
    def __init__(self, header: dict, entries: list[Entry], ctx: Context, findings: Findings):
        self.header, self.entries, self.ctx, self.findings = header, entries, ctx, findings
        self.out = {"messages": [], "parts": [], "tool_calls": [], "usage": []}
        self.calls: dict[str, dict] = {}
        self.requests: list[tuple[float | None, str]] = []
        self.inherited: list[float | None] = []
        self.title: str | None = None
        self.skipped: Counter = Counter()
        self.bad_costs = 0

    def lineage(self, no: int) -> dict:
        return {"provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": self.ctx.project_path,
                "source_table": "entry", "source_rowid": no}

    def run(self) -> dict[str, list[dict]]:
        for e in self.entries:
            if e.no in self.ctx.copied:
                self.replayed(e)
            else:
                self.own(e)
        if self.bad_costs:
            self.findings.notes.append(f"{self.bad_costs} usage.cost.total values that are not a number: "
                                       "not a native cost, priced from the tokens")
        if self.skipped:
            kinds = ", ".join(f"{k}={n}" for k, n in sorted(self.skipped.items()))
            self.findings.notes.append(f"{self.ctx.session_id}: entries not used: {kinds}")
        return self.out

    def replayed(self, e: Entry) -> None:
        """A fork's copy of its parent's entry: no row; a copied request's cost is inherited, a
        copied name is the fork's title until it gets its own (pi shows the latest name in the file)."""
        if e.type == "session_info":
            self.title = _str(e.obj.get("name")) or self.title
        m = e.obj.get("message")
        if e.type == "message" and isinstance(m, dict) and m.get("role") == "assistant":
            at = self.when(e, m)
            priced = price_request(usage_buckets(m.get("usage")), m.get("usage"), _str(m.get("model")),
                                   _str(m.get("provider")), at)
            if priced:
                self.inherited.append(priced[0])

    def when(self, e: Entry, m: dict | None = None) -> datetime | None:
        return from_iso(e.obj.get("timestamp")) or (from_epoch(m.get("timestamp")) if m else None)

    # --- entries

    def own(self, e: Entry) -> None:
        kind = e.type
        if kind == "message" and isinstance(e.obj.get("message"), dict):
            self.agent_message(e, e.obj["message"])
        elif kind == "compaction":
            msg = self.message(e, "assistant", self.when(e), is_summary=True)
            self.add_part(msg, e, {"part_type": "text", "native_part_type": "compaction", "is_known_type": True,
                                   "text": _str(e.obj.get("summary"))}, e.obj)
        elif kind == "branch_summary":
            msg = self.message(e, "assistant", self.when(e))
            self.add_part(msg, e, {"part_type": "text", "native_part_type": "branch_summary", "is_known_type": True,
                                   "text": _str(e.obj.get("summary"))}, e.obj)
        elif kind == "custom_message":
            msg = self.message(e, "system", self.when(e))
            self.blocks(msg, e, e.obj.get("content"), "custom_message")
        elif kind == "session_info":
            self.title = _str(e.obj.get("name")) or self.title
        elif kind in NOT_MESSAGES:
            self.skipped[kind] += 1
        else:
            self.findings.unknown_part_types[str(kind)] += 1
            msg = self.message(e, None, self.when(e))
            self.add_part(msg, e, {"part_type": "other", "native_part_type": _str(kind), "is_known_type": False},
                          e.obj)

    def agent_message(self, e: Entry, m: dict) -> None:
        role = _str(m.get("role"))
        at = self.when(e, m)
        if role == "user":
            self.blocks(self.message(e, "user", at), e, m.get("content"), None)
        elif role == "assistant":
            msg = self.message(e, "assistant", at, model=_str(m.get("model")), llm_provider=_str(m.get("provider")))
            extra = {k: m[k] for k in ("api", "stopReason", "errorMessage", "responseId") if k in m}
            msg["extra_columns"] = compact_json(extra) if extra else None
            content = m.get("content")
            for block in content if isinstance(content, list) else []:
                self.assistant_block(msg, e, block)
            self.usage(e, msg, m, at)
        elif role == "toolResult":
            self.result(e, m, at)
        elif role == "bashExecution":
            msg = self.message(e, "user", at)
            self.add_part(msg, e, {"part_type": "shell_command", "native_part_type": "bashExecution",
                                   "is_known_type": True, "shell_command": _str(m.get("command")),
                                   "shell_output": _str(m.get("output")),
                                   "shell_exit_code": _count(m.get("exitCode"))}, m)
        elif role in ("custom", "hookMessage"):
            self.blocks(self.message(e, "system", at), e, m.get("content"), role)
        elif role in SUMMARY_ROLES:
            msg = self.message(e, "assistant", at, is_summary=role == "compactionSummary")
            self.add_part(msg, e, {"part_type": "text", "native_part_type": role, "is_known_type": True,
                                   "text": _str(m.get("summary"))}, m)
        else:
            self.findings.unknown_part_types[f"role {role}"] += 1
            msg = self.message(e, role, at)
            self.add_part(msg, e, {"part_type": "other", "native_part_type": role, "is_known_type": False}, m)

    def message(self, e: Entry, role, at, *, model=None, llm_provider=None, is_summary=False) -> dict:
        row = {**self.lineage(e.no), "message_id": self.entry_id(e), "session_id": self.ctx.session_id,
               "message_index": len(self.out["messages"]), "role": role, "model": model,
               "llm_provider": llm_provider, "created_at": at, "updated_at": at,
               "finished_at": at if role == "assistant" else None, "is_summary": is_summary,
               "part_count": 0, "parts_ok": True}
        self.out["messages"].append(row)
        return row

    def entry_id(self, e: Entry) -> str:
        # v1 entries have no id (pi gives them random ones when it migrates): the line number
        return _str(e.obj.get("id")) or f"{self.ctx.session_id}:{e.no}"

    def add_part(self, msg: dict, e: Entry, cols: dict, raw) -> dict:
        part = {**self.lineage(e.no), "message_id": msg["message_id"], "session_id": self.ctx.session_id,
                "part_index": msg["part_count"], "role": msg["role"], "created_at": msg["created_at"],
                **cols, "raw": compact_json(raw)}
        msg["part_count"] += 1
        self.out["parts"].append(part)
        return part

    def blocks(self, msg: dict, e: Entry, content, context_kind: str | None) -> None:
        """User-side content: a string or text/image blocks. `context_kind` set: injected by an
        extension (not a prompt), part_type `injected_context`."""
        for block in [content] if isinstance(content, str) else content if isinstance(content, list) else []:
            kind = "text" if isinstance(block, str) else _str(block.get("type")) if isinstance(block, dict) else None
            if kind == "text":
                text = block if isinstance(block, str) else _str(block.get("text"))
                cols = {"part_type": "injected_context" if context_kind else "text",
                        "native_part_type": context_kind or "text", "is_known_type": True, "text": text}
            elif kind == "image":
                cols = image_columns(block)
            else:
                self.findings.unknown_part_types[str(kind)] += 1
                cols = {"part_type": "other", "native_part_type": kind, "is_known_type": False}
            self.add_part(msg, e, cols, block)

    def assistant_block(self, msg: dict, e: Entry, block) -> None:
        kind = _str(block.get("type")) if isinstance(block, dict) else None
        if kind == "text":
            self.add_part(msg, e, {"part_type": "text", "native_part_type": kind, "is_known_type": True,
                                   "text": _str(block.get("text"))}, block)
        elif kind == "thinking":
            self.add_part(msg, e, {"part_type": "reasoning", "native_part_type": kind, "is_known_type": True,
                                   "reasoning": _str(block.get("thinking"))}, block)
        elif kind == "toolCall":
            self.call(msg, e, block)
        elif kind == "image":
            self.add_part(msg, e, image_columns(block), block)
        else:
            self.findings.unknown_part_types[str(kind)] += 1
            self.add_part(msg, e, {"part_type": "other", "native_part_type": kind, "is_known_type": False}, block)

    # --- tools

    def call(self, msg: dict, e: Entry, block: dict) -> None:
        name = _str(block.get("name"))
        call_id = _str(block.get("id")) or f"{msg['message_id']}:{msg['part_count']}"
        raw, row = call_row({**self.lineage(e.no), "session_id": self.ctx.session_id}, msg["message_id"], call_id,
                            name, block.get("arguments"), msg["created_at"], t.TOOLS)
        self.add_part(msg, e, {"part_type": "tool_call", "native_part_type": "toolCall", "is_known_type": True,
                               "tool_call_id": call_id, "tool_name": name, "tool_input": raw}, block)
        self.out["tool_calls"].append(row)
        self.calls.setdefault(call_id, row)

    def result(self, e: Entry, m: dict, at) -> None:
        msg = self.message(e, "tool", at)
        call_id = _str(m.get("toolCallId"))
        name = _str(m.get("toolName"))
        content = m.get("content")
        blocks = content if isinstance(content, list) else [content]
        texts = [b if isinstance(b, str) else b.get("text") for b in blocks
                 if isinstance(b, str) or (isinstance(b, dict) and isinstance(b.get("text"), str))]
        text = "\n".join(texts) if texts else None
        exit_code, is_error = None, m.get("isError") if isinstance(m.get("isError"), bool) else None
        if name in t.TOOLS.shell_tools:
            found = _EXIT.search(text or "")
            if found:  # pi flags a non-zero exit as an error: here it is an exit code
                exit_code, is_error = int(found.group(1)), False
            elif is_error is False:
                exit_code = 0
        details = m.get("details")
        self.add_part(msg, e, {"part_type": "tool_result", "native_part_type": "toolResult", "is_known_type": True,
                               "tool_call_id": call_id, "tool_name": name, "tool_result": text,
                               "tool_result_metadata": compact_json(details) if details is not None else None,
                               "is_error": is_error}, m)
        for block in blocks:  # images a tool returned (read of a picture)
            if isinstance(block, dict) and block.get("type") == "image":
                self.add_part(msg, e, image_columns(block), block)
        call = self.calls.pop(call_id, None) if call_id else None
        if call is None:  # a result whose call is not in this session: kept, flagged
            call = {**self.lineage(e.no), "session_id": self.ctx.session_id, "message_id": None,
                    "tool_call_id": call_id, "tool_name": name, "tool_category": t.TOOLS.category(name),
                    "has_call": False, "called_at": at}
            self.out["tool_calls"].append(call)
        add_result(call, msg["message_id"], text, is_error, exit_code, at)

    # --- usage

    def usage(self, e: Entry, msg: dict, m: dict, at) -> None:
        usage = m.get("usage")
        if recorded_cost(usage)[1]:
            self.bad_costs += 1
        buckets = usage_buckets(usage)
        priced = price_request(buckets, usage, msg["model"], msg["llm_provider"], at)
        if priced is None:
            return
        cost, source, note = priced
        self.out["usage"].append({
            **self.lineage(e.no), "session_id": self.ctx.session_id, "message_id": msg["message_id"],
            "request_id": _str(m.get("responseId")), "requested_at": at, "model": msg["model"],
            "llm_provider": msg["llm_provider"], "is_sidechain": False, **(buckets or Buckets()).columns(),
            "cost_usd": cost, "cost_source": source, "pricing_note": note})
        self.requests.append((cost, source))

    def session_row(self) -> dict:
        h = self.header
        cost, cost_source = session_cost(self.requests)  # pi records costs: none is a native 0
        usage = self.out["usage"]
        priced = [u for u in usage if u["cost_usd"] is not None]
        last = (priced or usage or [None])[-1]
        times = [r["created_at"] for r in self.out["messages"] if r["created_at"]]
        created = from_iso(h.get("timestamp")) or (min(times) if times else None)
        inherited = [c for c in self.inherited if c is not None]
        extra = {k: v for k, v in h.items() if k not in ("type", "id", "timestamp", "cwd")}
        return {**self.lineage(0), "source_table": "session", "session_id": self.ctx.session_id,
                "parent_session_id": None, "root_session_id": self.ctx.session_id, "is_root": True,
                "title": self.title, "created_at": created, "updated_at": max(times + [created]) if created else None,
                "cost_usd": cost, "cost_source": cost_source, "cost_includes_subagents": True,
                "forked_from_session_id": None, "inherited_cost_usd": round(sum(inherited), 9) if inherited else None,
                "model": last["model"] if last else None, "llm_provider": last["llm_provider"] if last else None,
                "total_tokens": sum(u["total_tokens"] or 0 for u in usage) if usage else None,
                "message_count": len(self.out["messages"]),
                "summary_message_id": next((r["message_id"] for r in reversed(self.out["messages"])
                                            if r["is_summary"]), None),
                "extra_columns": compact_json(extra) if extra else None}


def image_columns(block: dict) -> dict:
    return {"part_type": "binary", "native_part_type": "image", "is_known_type": True,
            "mime_type": _str(block.get("mimeType")), "binary_size": _decoded_size(block.get("data"))}


def normalise(header: dict, entries: list[Entry], ctx: Context, findings: Findings,
              forked_from: str | None = None) -> dict[str, list[dict]]:
    walker = Walker(header, entries, ctx, findings)
    rows = walker.run()
    session = walker.session_row()
    session["forked_from_session_id"] = forked_from
    if not forked_from:
        session["inherited_cost_usd"] = None
    rows["sessions"] = [session]
    return rows
