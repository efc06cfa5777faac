"""One Kilo Code task folder -> canonical rows. Pure.

The store, from Kilo's source (Kilo-Org/kilocode-legacy: `src/core/task-persistence/`,
`src/core/task/Task.ts`, `packages/types/src/message.ts`, `packages/core/src/message-utils/`):
the VS Code extension (and the first Kilo CLI, `~/.kilocode/cli/global`) keeps one folder per
task, `<globalStorage>/tasks/<task id>/`, with
- `api_conversation_history.json`: the conversation as sent to the model: Anthropic-style
  messages (`role`, `content` string or blocks `text`/`image`/`tool_use`/`tool_result`/
  `thinking`), each with `ts` (ms), plus OpenAI `type: "reasoning"` items; the model and the
  workspace are only named inside the `<environment_details>` text Kilo appends to user turns;
- `ui_messages.json`: what the chat shows (`ts`, `type` ask/say, `say`, `text`, `partial`); each
  model request is a `say: "api_req_started"` whose `text` is JSON `{apiProtocol, tokensIn,
  tokensOut, cacheWrites, cacheReads, cost, cancelReason, usageMissing, inferenceProvider}`.

The traps, and what is done about them:
- costs: `api_req_started.cost` is Kilo's own (`native`); two more costs live elsewhere and are
  added by Kilo's own total (consolidateTokenUsage): a context condensation
  (`say: "condense_context"`, `contextCondense.cost`) and a fast-apply edit (`ask: "tool"`,
  `text.fastApplyResult.{tokensIn,tokensOut,cost}`). Each is a usage row here; ccusage and
  tokscale read `api_req_started` only and miss them. A cost of 0 (a model Kilo has no price
  for) is priced from genai-prices (`estimated`), else `unknown`.
- streamed duplicates: none in the files: Kilo rewrites the whole array, updating a streamed
  message in place. But a request starts as a placeholder `{"apiProtocol": ...}` that gets its
  numbers when the stream ends: a placeholder with no tokens and no cost is not a billed request
  (a crash mid-stream leaves one). Very old tasks split a request in `api_req_started` +
  `api_req_finished` (Kilo's combineApiRequests): the finished one's numbers join the started.
- what `tokensIn` means changed: since Kilo v4.119.0 (2025-11-12, "Fix cost and token tracking
  between provider styles", Roo #8954) it is the TOTAL input (cache reads and writes inside) for
  both protocols; before, for `apiProtocol: "anthropic"` it was the uncached input only. The
  files hold no version: an Anthropic-protocol request before that date, or one whose tokensIn
  is smaller than its cache reads and writes, is read as uncached; otherwise the cache buckets
  are taken out of tokensIn. (tokscale adds the cache buckets to tokensIn always: it counts the
  cache twice on current files.) The cache-write TTL is not recorded: 5-minute bucket.
- model: not in ui_messages: the latest `<model>` of an `<environment_details>` sent at or
  before the request (tokscale uses the last one of the whole task for every request).
- sub-agents: `new_task` starts a child task in its own folder; the link (`parentTaskId`) is
  only in VS Code's global state, which is not read: every task is a root, and a child's cost
  is never inside its parent's (nothing counts twice).
- pruned history: the user can delete messages: their requests are gone from the files (Kilo's
  `cumulativeTotalCost` in the global state keeps them; not read). The lake keeps what it read.
- tool calls: native tool calling (`tool_use` blocks) only; older tasks called tools as XML in
  the assistant's text, kept as text. `execute_command` results carry `Exit code: N`.
"""

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone

from transforms import jsontext
from transforms.findings import Findings
from transforms.kilo import tools as t
from transforms.costs import session_cost
from transforms.pricing import Buckets, in_range, price_buckets
from transforms.timestamps import from_epoch
from transforms.tools import add_result, call_row, compact_json, orphan_row

PROVIDER = "kilo"
# Kilo v4.119.0: tokensIn became the total input for the Anthropic protocol too
TOTAL_INPUT_SINCE = datetime(2025, 11, 12, 18, 3, 51, tzinfo=timezone.utc)
_MODEL = re.compile(r"<model>\s*([^<]+?)\s*</model>")
_WORKSPACE = re.compile(r"# Current Workspace Directory \((.+?)\) Files")
# the LLM provider genai-prices knows for a model id's vendor prefix (`anthropic/claude-...`)
_VENDORS = {"anthropic", "openai", "google", "x-ai", "deepseek", "mistral", "moonshotai", "zai"}


@dataclass
class Context:
    source_id: str
    task_id: str
    project_path: str


def _str(v):
    return v if isinstance(v, str) else None


def _decoded_size(data) -> int | None:
    """Bytes held by a base64 string (what the attachment weighs), without decoding it."""
    return len(data.rstrip("=")) * 3 // 4 if isinstance(data, str) else None


def _count(v) -> int | None:
    """A token count as Kilo wrote it (a JSON number, whole or not), a negative one too: kept, to be
    said and nulled as it lands, not read as not recorded (its request was priced without it)."""
    return jsontext.int64_or_none(int(v) if isinstance(v, float) and math.isfinite(v) else v)


def _cost(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and -math.inf < v < math.inf else None


def _json(text) -> dict:
    """The JSON object inside a ui message's `text`; {} for anything else."""
    try:
        value = jsontext.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def request_buckets(info: dict, at: datetime | None) -> Buckets | None:
    tin, out = _count(info.get("tokensIn")), _count(info.get("tokensOut"))
    reads, writes = _count(info.get("cacheReads")), _count(info.get("cacheWrites"))
    if all(v is None for v in (tin, out, reads, writes)):
        return None
    if not all(map(in_range, (tin, reads, writes))):  # kept as written, not subtracted: unpriced
        return Buckets(input_uncached=tin, cache_read=reads, cache_write_5m=writes, output=out)
    cached = (reads or 0) + (writes or 0)
    old = info.get("apiProtocol") == "anthropic" and (at is None or at < TOTAL_INPUT_SINCE)
    uncached = tin if tin is None or old or tin < cached else tin - cached
    return Buckets(input_uncached=uncached, cache_read=reads, cache_write_5m=writes, output=out)


def model_vendor(model: str | None) -> tuple[str | None, str | None]:
    """(model id, provider) for pricing: `anthropic/claude-sonnet-4` is claude-sonnet-4 at anthropic."""
    if model and "/" in model:
        vendor, name = model.split("/", 1)
        if vendor in _VENDORS:
            return name, vendor
    return model, None


class Walker:
    def __init__(self, api: list, ui: list, ctx: Context, findings: Findings):
        self.api, self.ui, self.ctx, self.findings = api, ui, ctx, findings
        self.out = {"messages": [], "parts": [], "tool_calls": [], "usage": []}
        self.calls: dict[str, dict] = {}
        self.models: list[tuple[datetime | None, str]] = []  # (ts, model) from environment_details

    def lineage(self, table: str, no: int) -> dict:
        return {"provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": self.ctx.project_path,
                "source_table": table, "source_rowid": no}

    def run(self) -> dict[str, list[dict]]:
        for no, item in enumerate(self.api):
            self.api_message(no, item)
        for no, info, at, kind in self.requests():
            self.usage(no, info, at, kind)
        return self.out

    # --- the conversation

    def api_message(self, no: int, item) -> None:
        if not isinstance(item, dict):
            self.findings.unknown_part_types["not an object"] += 1
            msg = self.message(no, None, None)
            self.add_part(msg, {"part_type": "other", "native_part_type": None, "is_known_type": False}, item)
            return
        at = from_epoch(item.get("ts"))
        if item.get("type") == "reasoning":  # an OpenAI reasoning item kept in the history
            msg = self.message(no, "assistant", at)
            summary = item.get("summary")
            texts = [s.get("text") for s in summary if isinstance(s, dict) and isinstance(s.get("text"), str)] \
                if isinstance(summary, list) else []
            self.add_part(msg, {"part_type": "reasoning", "native_part_type": "reasoning", "is_known_type": True,
                                "reasoning": "\n\n".join(texts) or _str(item.get("text"))}, item)
            return
        role = _str(item.get("role"))
        msg = self.message(no, role, at, is_summary=item.get("isSummary") is True)
        extra = {k: v for k, v in item.items() if k not in ("role", "content", "ts", "isSummary")}
        msg["extra_columns"] = compact_json(extra) if extra else None
        content = item.get("content")
        if isinstance(item.get("reasoning_content"), str):  # DeepSeek-style thinking kept beside the content
            self.add_part(msg, {"part_type": "reasoning", "native_part_type": "reasoning_content",
                                "is_known_type": True, "reasoning": item["reasoning_content"]},
                          item["reasoning_content"])
        for block in [content] if isinstance(content, str) else content if isinstance(content, list) else []:
            self.block(msg, no, block, at)

    def message(self, no: int, role, at, is_summary=False) -> dict:
        row = {**self.lineage("api_conversation_history", no), "message_id": f"{self.ctx.task_id}:{no}",
               "session_id": self.ctx.task_id, "message_index": len(self.out["messages"]), "role": role,
               "model": None, "llm_provider": None, "created_at": at, "updated_at": at, "finished_at": None,
               "is_summary": is_summary, "part_count": 0, "parts_ok": True}
        self.out["messages"].append(row)
        return row

    def add_part(self, msg: dict, cols: dict, raw) -> dict:
        part = {**self.lineage("api_conversation_history", msg["source_rowid"]), "message_id": msg["message_id"],
                "session_id": self.ctx.task_id, "part_index": msg["part_count"], "role": msg["role"],
                "created_at": msg["created_at"], **cols, "raw": compact_json(raw)}
        msg["part_count"] += 1
        self.out["parts"].append(part)
        return part

    def block(self, msg: dict, no: int, block, at) -> None:
        kind = "text" if isinstance(block, str) else _str(block.get("type")) if isinstance(block, dict) else None
        if kind == "text":
            text = block if isinstance(block, str) else _str(block.get("text"))
            injected = msg["role"] == "user" and (text or "").lstrip().startswith("<environment_details>")
            for model in _MODEL.findall(text or "") if msg["role"] == "user" else ():
                self.models.append((at, model))
            self.add_part(msg, {"part_type": "injected_context" if injected else "text", "native_part_type": "text",
                                "is_known_type": True, "text": text}, block)
        elif kind in ("thinking", "redacted_thinking"):
            self.add_part(msg, {"part_type": "reasoning", "native_part_type": kind, "is_known_type": True,
                                "reasoning": _str(block.get("thinking"))}, block)
        elif kind == "image":
            source = block.get("source") if isinstance(block.get("source"), dict) else {}
            self.add_part(msg, {"part_type": "binary", "native_part_type": kind, "is_known_type": True,
                                "mime_type": _str(source.get("media_type")),
                                "binary_size": _decoded_size(source.get("data"))}, block)
        elif kind == "tool_use":
            self.call(msg, no, block)
        elif kind == "tool_result":
            self.result(msg, no, block)
        else:
            self.findings.unknown_part_types[str(kind)] += 1
            self.add_part(msg, {"part_type": "other", "native_part_type": kind, "is_known_type": False}, block)

    def call_base(self, no: int) -> dict:
        return {**self.lineage("api_conversation_history", no), "session_id": self.ctx.task_id}

    def call(self, msg: dict, no: int, block: dict) -> None:
        name = _str(block.get("name"))
        call_id = _str(block.get("id")) or f"{msg['message_id']}:{msg['part_count']}"
        raw, row = call_row(self.call_base(no), msg["message_id"], call_id, name, block.get("input"),
                            msg["created_at"], t.TOOLS)
        self.add_part(msg, {"part_type": "tool_call", "native_part_type": "tool_use", "is_known_type": True,
                            "tool_call_id": call_id, "tool_name": name, "tool_input": raw}, block)
        self.out["tool_calls"].append(row)
        self.calls.setdefault(call_id, row)

    def result(self, msg: dict, no: int, block: dict) -> None:
        call_id = _str(block.get("tool_use_id"))
        content = block.get("content")
        items = [content] if isinstance(content, str) else content if isinstance(content, list) else []
        texts = [b if isinstance(b, str) else b.get("text") for b in items
                 if isinstance(b, str) or (isinstance(b, dict) and isinstance(b.get("text"), str))]
        text = "\n".join(texts) if texts else None
        is_error = block.get("is_error") if isinstance(block.get("is_error"), bool) else None
        call = self.calls.pop(call_id, None) if call_id else None
        name = call["tool_name"] if call else None
        self.add_part(msg, {"part_type": "tool_result", "native_part_type": "tool_result", "is_known_type": True,
                            "tool_call_id": call_id, "tool_name": name, "tool_result": text, "is_error": is_error},
                      block)
        if call is None:  # a result whose call is not in the task: kept, flagged
            call = orphan_row(self.call_base(no), call_id, msg["created_at"])
            self.out["tool_calls"].append(call)
        add_result(call, msg["message_id"], text, is_error, t.TOOLS.exit_code(name, text), msg["created_at"])

    # --- usage, from ui_messages

    def requests(self):
        """(index, numbers, time, kind) of every billed request: api_req_started (with a legacy
        api_req_finished's numbers joined), condense_context and fast-apply edits."""
        pending = None
        for no, m in enumerate(self.ui):
            if not isinstance(m, dict):
                continue
            at = from_epoch(m.get("ts"))
            say, ask = m.get("say"), m.get("ask")
            if say == "api_req_started":
                if pending:
                    yield pending
                pending = (no, _json(m.get("text")), at, "api_req_started")
            elif say == "api_req_finished" and pending:
                pending = (pending[0], {**pending[1], **_json(m.get("text"))}, pending[2], pending[3])
            elif say == "condense_context" and isinstance(m.get("contextCondense"), dict):
                yield no, {"cost": m["contextCondense"].get("cost")}, at, "condense_context"
            elif ask == "tool" and isinstance(_json(m.get("text")).get("fastApplyResult"), dict):
                yield no, _json(m.get("text"))["fastApplyResult"], at, "fastApplyResult"
        if pending:
            yield pending

    def model_at(self, at) -> str | None:
        model = None
        for when, name in self.models:
            if at is None or when is None or when <= at:
                model = name
        return model

    def usage(self, no: int, info: dict, at, kind: str) -> None:
        buckets = request_buckets(info, at)
        cost = _cost(info.get("cost"))
        if not (cost and cost > 0) and not (buckets and buckets.any_count):
            return  # a placeholder: the request never finished, nothing was billed
        recorded = self.model_at(at) if kind != "condense_context" else None
        if cost and cost > 0:
            usd, source, note = cost, "native", f"{kind}.cost"
        else:
            name, vendor = model_vendor(recorded)
            priced = price_buckets(buckets, name, vendor, at)
            usd, source, note = priced.cost_usd, priced.cost_source, f"Kilo recorded no cost; {priced.note}"
        self.out["usage"].append({
            **self.lineage("ui_messages", no), "session_id": self.ctx.task_id, "message_id": None,
            "request_id": None, "requested_at": at, "model": recorded,
            "llm_provider": _str(info.get("inferenceProvider")) or model_vendor(recorded)[1], "is_sidechain": False,
            **(buckets or Buckets()).columns(), "cost_usd": usd, "cost_source": source, "pricing_note": note})


def session_row(ctx: Context, ui: list, rows: dict, extra: dict | None) -> dict:
    usage = rows["usage"]
    # Kilo records costs: a task without a billed request is a native 0
    cost, cost_source = session_cost([(u["cost_usd"], u["cost_source"]) for u in usage])
    times = [from_epoch(m.get("ts")) for m in ui if isinstance(m, dict)]
    times = [x for x in times if x] + [r["created_at"] for r in rows["messages"] if r["created_at"]]
    first = next((m for m in ui if isinstance(m, dict)), {})
    last = ([u for u in usage if u["model"]] or [None])[-1]
    return {"provider": PROVIDER, "source_id": ctx.source_id, "project_path": ctx.project_path,
            "source_table": "ui_messages", "source_rowid": 0, "session_id": ctx.task_id, "parent_session_id": None,
            "root_session_id": ctx.task_id, "is_root": True,
            "title": (_str(first.get("text")) or "").strip()[:500] or None,
            "created_at": min(times) if times else None, "updated_at": max(times) if times else None,
            "cost_usd": cost, "cost_source": cost_source, "cost_includes_subagents": True,
            "forked_from_session_id": None, "inherited_cost_usd": None,
            "model": last["model"] if last else None, "llm_provider": last["llm_provider"] if last else None,
            "total_tokens": sum(u["total_tokens"] or 0 for u in usage) if usage else None,
            "message_count": len(rows["messages"]),
            "summary_message_id": next((r["message_id"] for r in reversed(rows["messages"]) if r["is_summary"]), None),
            "extra_columns": compact_json(extra) if extra else None}


def workspace_of(api: list) -> str | None:
    """The task's workspace, from the first `<environment_details>` that names it."""
    for item in api:
        content = item.get("content") if isinstance(item, dict) else None
        for block in content if isinstance(content, list) else [content]:
            text = block.get("text") if isinstance(block, dict) else block if isinstance(block, str) else None
            found = _WORKSPACE.search(text or "")
            if found:
                return found.group(1)
    return None


def normalise(api: list, ui: list, ctx: Context, findings: Findings, metadata: dict | None = None) -> dict:
    rows = Walker(api, ui, ctx, findings).run()
    rows["sessions"] = [session_row(ctx, ui, rows, metadata)]
    return rows
