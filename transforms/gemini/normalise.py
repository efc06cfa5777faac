"""Gemini CLI chat recordings -> canonical rows. Pure.

Learnt from the agent's source (google-gemini/gemini-cli, packages/core/src/services/
chatRecordingService.ts and chatRecordingTypes.ts), read against ccusage (rust/crates/ccusage/
src/adapter/gemini) and tokscale (packages/core/src/sessions/gemini.rs).

Two schema versions, one reader (`parse_chat`):
- legacy `session-*.json`: one ConversationRecord `{sessionId, projectHash, startTime,
  lastUpdated, messages[], summary?, kind?, directories?}`, rewritten whole on every update;
- `session-*.jsonl` (and sub-agents' `<id>.jsonl`): a metadata line, then appended records:
  a message (`{id, timestamp, type, content, ...}`), `{"$set": {...}}` metadata updates, and
  `{"$rewindTo": id}`. `loadConversationRecord` is what Gemini itself reads back.

The traps, and what is done about them:
- streamed duplicates: a message is appended again each time it changes (`pushMessage`: its
  tokens arrive, its tool calls complete, a checkpoint rewrites it). The LAST copy of an id wins,
  at the place of its first copy (a JS Map), as Gemini and ccusage read it; counting each line
  would count a response's tokens two or three times.
- tokens: `tokens` is one API response's `usageMetadata` (`recordMessageTokens`), not a running
  total: there are no cumulative counters to difference. `input` (promptTokenCount) INCLUDES
  `cached` (cachedContentTokenCount); `output` (candidatesTokenCount) EXCLUDES `thoughts`; `tool`
  (toolUsePromptTokenCount) is input outside `input`: `total = input + output + thoughts + tool`.
  So uncached input = input - cached + tool, output = output + thoughts (reasoning = thoughts).
  tokscale adds `input` and `cached` as if disjoint (cached counted twice); ccusage agrees with us.
- cost: Gemini CLI records none; every request is priced from genai-prices (`google`),
  `estimated`; a model the table does not know is `unknown`, never $0. (A Code Assist login
  is not billed per token: the estimate is the API list price.)
- pruned history: `$rewindTo` drops a message and everything after it; a `$set.messages`
  checkpoint (chat compression, masking) replaces the whole list. The dropped messages' requests
  WERE made and billed: they stay, in `messages` and `usage`, with `extra_columns.dropped`
  (`rewound` or `replaced`). ccusage counts them too; Gemini's resume view does not show them.
  Sessions older than 30 days are deleted by Gemini (`general.sessionRetention.maxAge`): the lake
  keeps what it read before.
- archived copies: the slug migration copies `tmp/<hash>/` to `tmp/<slug>/`, and resuming a
  `.json` chat writes a `.jsonl` beside it. Every copy of a session is read together; each
  message counts once (the copy last updated wins). ccusage and tokscale count every copy.
- sub-agents: a sub-agent's chat is its own file (`chats/<parent id>/<agent id>.jsonl`, a whole
  `.json` record in 0.37-0.38, `kind: "subagent"`), with its own requests: its own session,
  whose cost the root's includes. The folder names the parent (since 0.39 the parent's tool call
  also holds the sub-agent's `agentId`). The parent's tool call holds only the sub-agent's answer,
  no tokens. A skill extraction (`chats/skill-extraction-<id>/`) has no parent: it is a root.
- forks: Gemini CLI has none (`/chat save` checkpoints and `logs.json` hold no usage: not read).
- tool calls live in the model message's `toolCalls[]` (call and result in one record, like an
  OpenCode `tool` part: one `tool_call` part with its result columns filled). Newer releases also
  record the `functionResponse` parts sent back as a `user` message: those are `tool_result`
  parts, not more tool calls. `status` `error` is the error flag.
"""

from dataclasses import dataclass, field
from datetime import datetime, timezone

from transforms import jsontext
from transforms.contract import PART_TYPES
from transforms.findings import Findings
from transforms.gemini import tools as t
from transforms.gemini.genai import content_parts, part_columns, result_text, shell_exit_code, usage_buckets
from transforms.jsontext import json_lines, str_or_none
from transforms.pricing import price_buckets
from transforms.timestamps import from_iso
from transforms.tools import compact_json

PROVIDER = "gemini"
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
LLM_PROVIDER = "google"
ROLES = {"user": "user", "gemini": "assistant", "info": "system", "error": "system", "warning": "system"}
MESSAGE_KEYS = {"id", "timestamp", "type", "content", "thoughts", "tokens", "model", "toolCalls"}
META_KEYS = {"sessionId", "startTime", "lastUpdated", "summary", "messages"}


class ChatFileError(ValueError):
    """The file is not a Gemini chat recording: it is quarantined whole."""


@dataclass
class Chat:
    """One file's reading: the final copy of each message, in first-seen order."""

    path: str
    meta: dict = field(default_factory=dict)
    records: dict[str, tuple[dict, int]] = field(default_factory=dict)  # id -> (record, line no)
    live: dict[str, None] = field(default_factory=dict)  # ids still in the conversation, in order
    dropped: dict[str, str] = field(default_factory=dict)  # id -> "rewound" or "replaced"
    bad: list[tuple[int, str, str]] = field(default_factory=list)  # (line no, text, reason)
    copies: int = 0  # message lines that repeated an id already seen

    @property
    def session_id(self) -> str:
        return self.meta["sessionId"]

    @property
    def updated(self) -> datetime | None:
        return from_iso(self.meta.get("lastUpdated"))

    def add(self, record: dict, no: int) -> None:
        rid = record["id"]
        self.copies += rid in self.records
        self.records[rid] = (record, no)
        self.live[rid] = None
        self.dropped.pop(rid, None)

    def rewind(self, rid: str) -> None:
        ids = list(self.live)
        cut = ids.index(rid) if rid in self.live else 0  # an unknown id clears all (as Gemini does)
        for gone in ids[cut:]:
            del self.live[gone]
            self.dropped[gone] = "rewound"

    def checkpoint(self, messages: list, no: int) -> None:
        before = list(self.live)
        self.live = {}
        for m in messages:
            if isinstance(m, dict) and isinstance(m.get("id"), str):
                self.add(m, no)
        for gone in before:
            if gone not in self.live:
                self.dropped[gone] = "replaced"


def parse_chat(path: str, text: str) -> Chat:
    """A legacy record or a JSONL log, read as `loadConversationRecord` reads it."""
    chat = Chat(path)
    whole_error = None
    try:
        whole = jsontext.loads(text)
        lines = [(0, text, whole)] if isinstance(whole, dict) else None
    except (ValueError, RecursionError) as exc:
        lines, whole_error = None, exc
    if lines is None:
        lines = []
        for no, raw, value, error in json_lines(text):
            (chat.bad.append((no, raw, error)) if error else lines.append((no, raw, value)))
    for no, raw, rec in lines:
        if not isinstance(rec, dict):
            chat.bad.append((no, raw, "not a chat record (a JSON object)"))
        elif isinstance(rec.get("$rewindTo"), str):
            chat.rewind(rec["$rewindTo"])
        elif isinstance(rec.get("id"), str):
            chat.add(rec, no)
        elif isinstance(rec.get("$set"), dict):
            update = rec["$set"]
            if isinstance(update.get("messages"), list):
                chat.checkpoint(update["messages"], no)
            chat.meta.update({k: v for k, v in update.items() if k != "messages"})
        elif isinstance(rec.get("sessionId"), str) and isinstance(rec.get("projectHash"), str):
            chat.meta.update({k: v for k, v in rec.items() if k != "messages"})
            for m in rec.get("messages") if isinstance(rec.get("messages"), list) else ():
                if isinstance(m, dict) and isinstance(m.get("id"), str):
                    chat.add(m, no)
        else:
            chat.bad.append((no, raw, "not a chat record: no id, $set, $rewindTo or sessionId"))
    if not isinstance(chat.meta.get("sessionId"), str) or not chat.meta["sessionId"]:
        if whole_error is not None and path.endswith(".json") and not any(isinstance(v, dict) and v
                                                                            for _, _, v in lines):
            # a whole record (pretty-printed: a line is no record, though one may be a list's
            # last string or an empty object) cut short or damaged: said as such, not as a file of
            # another kind, nor by its last line as one being written
            raise ChatFileError(f"not valid JSON, a whole chat record cut short or damaged: {whole_error}"[:300])
        raise ChatFileError("no metadata with a sessionId: not a Gemini CLI chat recording")
    return chat


def merge(chats: list[Chat]) -> Chat:
    """Copies of one session: each message once, from the copy updated last (a `.jsonl` after
    the `.json` it was migrated from); dropped as the newest copy holding it says."""
    ordered = sorted(chats, key=lambda c: (c.updated or EPOCH, c.path.endswith(".jsonl")))
    out = Chat(ordered[-1].path)
    for chat in ordered:
        out.meta.update(chat.meta)
        out.copies += chat.copies
        for rid, (record, no) in chat.records.items():
            out.records[rid] = (record, no)
            if rid in chat.dropped:
                out.dropped[rid] = chat.dropped[rid]
            else:
                out.dropped.pop(rid, None)
    out.path = ordered[-1].path
    return out


@dataclass
class Context:
    source_id: str
    project_path: str
    session_id: str
    is_sidechain: bool


def buckets(tokens):
    """A `TokensSummary` (see the module's docstring) in disjoint buckets; None when empty."""
    if not isinstance(tokens, dict):
        return None
    return usage_buckets(tokens.get("input"), tokens.get("cached"), tokens.get("output"), tokens.get("thoughts"),
                         tokens.get("tool"), tokens.get("total"))


def expected_parts(record: dict) -> int:
    """Parts a message record holds, counted on the record itself."""
    n = len(content_parts(record.get("content")))
    for key in ("thoughts", "toolCalls"):
        if isinstance(record.get(key), list):
            n += len(record[key])
    return n


class Session:
    """One session's (already merged) messages -> messages, parts, tool_calls, usage."""

    def __init__(self, chat: Chat, ctx: Context, findings: Findings):
        self.chat, self.ctx, self.findings = chat, ctx, findings
        self.rows = {"messages": [], "parts": [], "tool_calls": [], "usage": []}
        self.costs: list[float | None] = []
        self.model: str | None = None

    def lineage(self, no: int) -> dict:
        return {"provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": self.ctx.project_path,
                "source_table": "chat", "source_rowid": no}

    def run(self) -> "Session":
        for rid, (record, no) in self.chat.records.items():
            self.message(rid, record, no)
        priced = [u for u in self.rows["usage"] if u["cost_usd"] is not None]
        self.model = (priced or self.rows["usage"] or [{"model": None}])[-1]["model"]
        return self

    def message(self, rid: str, rec: dict, no: int) -> None:
        role = ROLES.get(rec.get("type"))
        if role is None:
            self.findings.notes.append(f"{self.ctx.session_id}: message {rid} of unknown type {rec.get('type')!r}")
        at = from_iso(rec.get("timestamp"))
        extra = {k: v for k, v in rec.items() if k not in MESSAGE_KEYS}
        if rid in self.chat.dropped:
            extra["dropped"] = self.chat.dropped[rid]
        msg = {**self.lineage(no), "message_id": rid, "session_id": self.ctx.session_id,
               "message_index": len(self.rows["messages"]), "role": role or str_or_none(rec.get("type")),
               "model": str_or_none(rec.get("model")) if role == "assistant" else None,
               "llm_provider": LLM_PROVIDER if role == "assistant" else None, "created_at": at, "updated_at": at,
               "is_summary": False, "part_count": 0, "parts_ok": True,
               "extra_columns": compact_json(extra) if extra else None}
        self.rows["messages"].append(msg)
        for thought in rec.get("thoughts") if isinstance(rec.get("thoughts"), list) else ():
            self.thought(msg, no, thought)
        for part in content_parts(rec.get("content")):
            cols = part_columns(part)
            if not cols["is_known_type"]:
                self.findings.unknown_part_types[cols["native_part_type"]] += 1
            self.add_part(msg, no, cols, part)
        for call in rec.get("toolCalls") if isinstance(rec.get("toolCalls"), list) else ():
            self.tool_call(msg, no, call)
        if role == "assistant":
            self.request(msg, no, rec)

    def add_part(self, msg: dict, no: int, cols: dict, raw) -> None:
        if cols["part_type"] not in PART_TYPES:
            cols["part_type"] = "other"
        self.rows["parts"].append({
            **self.lineage(no), **cols, "message_id": msg["message_id"],
            "session_id": self.ctx.session_id, "part_index": msg["part_count"], "role": msg["role"],
            "created_at": msg["created_at"], "raw": compact_json(raw)})
        msg["part_count"] += 1

    def thought(self, msg: dict, no: int, thought) -> None:
        if isinstance(thought, dict):
            said = (str_or_none(thought.get("subject")), str_or_none(thought.get("description")))
            text = "\n\n".join(s for s in said if s)
            cols = {"part_type": "reasoning", "native_part_type": "thought", "is_known_type": True,
                    "reasoning": text or None, "reasoning_started_at": from_iso(thought.get("timestamp"))}
        else:
            cols = {"part_type": "reasoning", "native_part_type": "thought", "is_known_type": False}
        self.add_part(msg, no, cols, thought)

    def tool_call(self, msg: dict, no: int, call) -> None:
        call = call if isinstance(call, dict) else {}
        name, args, status = str_or_none(call.get("name")), call.get("args"), str_or_none(call.get("status"))
        call_id = str_or_none(call.get("id")) or f"{msg['message_id']}:{msg['part_count']}"
        text = result_text(call.get("result"))
        has_result = call.get("result") is not None or status in ("success", "error", "cancelled")
        is_error = (status == "error") if has_result else None
        display = call.get("resultDisplay")
        raw_args = compact_json(args) if args is not None else None
        self.add_part(msg, no, {
            "part_type": "tool_call", "native_part_type": "toolCall", "is_known_type": True,
            "tool_call_id": call_id, "tool_name": name, "tool_input": raw_args, "tool_result": text,
            "tool_result_metadata": compact_json(display) if display is not None else None,
            "is_error": is_error}, call)
        decoded = args if isinstance(args, dict) else None
        self.rows["tool_calls"].append({
            **self.lineage(no), "session_id": self.ctx.session_id,
            "message_id": msg["message_id"], "result_message_id": msg["message_id"] if has_result else None,
            "tool_call_id": call_id, "tool_name": name, "tool_category": t.TOOLS.category(name),
            "input": raw_args if decoded is not None else None, "input_raw": raw_args,
            "is_input_valid": decoded is not None, "command": t.TOOLS.command(name, decoded),
            "file_path": t.TOOLS.file_path(name, decoded), "has_call": True, "has_result": has_result,
            "is_error": is_error,
            "exit_code": shell_exit_code(status, text) if has_result and name in t.TOOLS.shell_tools else None,
            "result_text": text, "result_size": len(text.encode("utf-8", "replace")) if text is not None else None,
            "called_at": msg["created_at"], "result_at": from_iso(call.get("timestamp")) if has_result else None})

    def request(self, msg: dict, no: int, rec: dict) -> None:
        bucket = buckets(rec.get("tokens"))
        if bucket is None:
            return
        model = str_or_none(rec.get("model"))
        priced = price_buckets(bucket, model, LLM_PROVIDER, msg["created_at"])
        self.rows["usage"].append({
            **self.lineage(no), "session_id": self.ctx.session_id,
            "message_id": msg["message_id"], "request_id": None, "requested_at": msg["created_at"],
            "model": model, "llm_provider": LLM_PROVIDER, "is_sidechain": self.ctx.is_sidechain,
            **bucket.columns(), "cost_usd": priced.cost_usd, "cost_source": priced.cost_source,
            "pricing_note": priced.note})
        self.costs.append(priced.cost_usd)
