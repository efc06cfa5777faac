"""One Qwen Code chat (a JSONL file of ChatRecords) -> canonical rows. Pure.

Learnt from the agent's source (QwenLM/qwen-code, packages/core/src/services/chatRecordingService.ts,
core/openaiContentGenerator/converter.ts), read against ccusage (rust/crates/ccusage/src/adapter/
qwen). tokscale has no Qwen reader. Qwen Code is a Gemini CLI fork, but its recorder is its own:
one self-contained record per line `{uuid, parentUuid, sessionId, timestamp, type: user |
assistant | tool_result | system, subtype?, cwd, version, message: Content{role, parts},
usageMetadata?, model?, toolCallResult?, systemPayload?, ...}`, appended once, never rewritten.
Only the Part and usage shapes are Gemini's (transforms.gemini.genai).

Schema versions: the first recorder stored `usageMetadata` as Gemini CLI's summary `{input, output,
cached, thoughts?, tool?, total}`; later ones store the API's own `{promptTokenCount,
candidatesTokenCount, cachedContentTokenCount, thoughtsTokenCount, totalTokenCount}`. Both are read.
ccusage reads only the second (the first one's usage is lost there).

The traps, and what is done about them:
- tokens: `promptTokenCount` INCLUDES the cached input; through Qwen's OpenAI converter (DashScope,
  OpenRouter, ...) `candidatesTokenCount` is `completion_tokens`, which INCLUDES the reasoning
  (`thoughtsTokenCount` is then informational), unlike Google's API: the recorded total tells
  which (transforms.gemini.genai.usage_buckets). ccusage adds `cachedContentTokenCount` to the
  whole prompt count: cached input counted twice. When a provider sends only a total, the
  converter invents a 70/30 input/output split: it cannot be told apart and is kept as recorded.
- no streamed duplicates or cumulative counters: one assistant record per model response, its
  usage that response's. Metadata records (`custom_title`, `session_source`, `session_model`)
  are re-appended near the end of the file to stay in Qwen's 64 KB tail window: the last wins.
- cost: none recorded. Priced from genai-prices by model name (`estimated`); Qwen's own models
  (`qwen3-coder-plus`, the OAuth `coder-model`) are in no price table: `unknown`, never $0
  (ccusage reports $0 for them).
- forks: `/branch` copies every record verbatim into a new session (new `sessionId`, same
  `uuid`, `forkedFrom: {sessionId, messageUuid}`). The copies are the parent's: they give no
  rows; their priced usage is the fork's `inherited_cost_usd`. ccusage counts them again.
- rewinds: `/rewind` re-roots the `parentUuid` chain; the records after the target stay in the
  file on a dead branch. Their requests were made: they count, flagged `extra_columns.dropped
  = "rewound"` (the chain from the file's last record is the live one).
- sub-agents: a sub-session names its spawner in a `parent_session` system record (its own file:
  a child session of the same source); records with `isSidechain` (a background sub-agent's) are
  `is_sidechain` requests.
- pruned history: chat compression writes a `chat_compression` system record and rewrites nothing;
  Qwen deletes a project's folder only when every recorded cwd was a vanished temp dir
  (storage.ts cleanOrphanProjectDirs): the lake keeps what it read.
- injected context: `notification`, `cron` and `goal_runtime` user records and system-provenance
  records are not prompts: their text parts are `injected_context`. System records (telemetry,
  titles, checkpoints, ...) are `system` messages with one `other` part holding the record.
"""

from dataclasses import dataclass, field

from transforms.contract import PART_TYPES
from transforms.findings import Findings
from transforms.gemini.genai import content_parts, part_columns, result_text, shell_exit_code, usage_buckets
from transforms.jsontext import json_lines, str_or_none
from transforms.pricing import price_buckets
from transforms.qwen import tools as t
from transforms.timestamps import from_iso
from transforms.tools import compact_json

PROVIDER = "qwen"
ROLES = {"user": "user", "assistant": "assistant", "tool_result": "tool", "system": "system"}
RECORD_KEYS = {"uuid", "parentUuid", "sessionId", "timestamp", "type", "message", "usageMetadata", "model",
               "toolCallResult", "cwd"}
INJECTED_SUBTYPES = {"notification", "cron", "goal_runtime", "background_task_completed"}


@dataclass
class Record:
    no: int  # 0-based line number
    rec: dict

    @property
    def uuid(self) -> str | None:
        return str_or_none(self.rec.get("uuid"))

    @property
    def is_copy(self) -> bool:
        """A record `/branch` copied from the parent session."""
        return isinstance(self.rec.get("forkedFrom"), dict)


@dataclass
class Chat:
    path: str
    records: list[Record] = field(default_factory=list)
    bad: list[tuple[int, str, str]] = field(default_factory=list)

    @property
    def session_id(self) -> str | None:
        return next((str_or_none(r.rec.get("sessionId")) for r in self.records if r.rec.get("sessionId")), None)

    def system(self, subtype: str) -> list[dict]:
        return [r.rec for r in self.records if r.rec.get("type") == "system" and r.rec.get("subtype") == subtype]

    def payload(self, subtype: str, key: str) -> str | None:
        """The last-wins value of a metadata record (titles are re-appended to stay in Qwen's tail window)."""
        values = [p.get(key) for p in (r.get("systemPayload") for r in self.system(subtype)) if isinstance(p, dict)]
        return next((v for v in reversed(values) if isinstance(v, str) and v), None)

    @property
    def forked_from(self) -> str | None:
        return next((str_or_none(r.rec["forkedFrom"].get("sessionId")) for r in self.records if r.is_copy), None)


def parse_chat(path: str, text: str) -> Chat:
    chat = Chat(path)
    for no, raw, rec, error in json_lines(text):
        if error:
            chat.bad.append((no, raw, error))
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("uuid"), str) or rec.get("type") not in ROLES:
            chat.bad.append((no, raw, "not a chat record: no uuid or no known type"))
            continue
        chat.records.append(Record(no, rec))
    return chat


def live_chain(records: list[Record]) -> set[str]:
    """The uuids on the `parentUuid` chain that ends at the file's last record."""
    parents = {r.uuid: str_or_none(r.rec.get("parentUuid")) for r in records}
    live, at = set(), records[-1].uuid if records else None
    while at is not None and at not in live:
        live.add(at)
        at = parents.get(at)
    return live


def usage_of(usage) -> object:
    """Buckets from either `usageMetadata` shape (see the module's docstring); None when empty."""
    if not isinstance(usage, dict):
        return None
    if any(k.endswith("TokenCount") for k in usage):
        return usage_buckets(usage.get("promptTokenCount"), usage.get("cachedContentTokenCount"),
                             usage.get("candidatesTokenCount"), usage.get("thoughtsTokenCount"),
                             usage.get("toolUsePromptTokenCount"), usage.get("totalTokenCount"))
    return usage_buckets(usage.get("input"), usage.get("cached"), usage.get("output"), usage.get("thoughts"),
                         usage.get("tool"), usage.get("total"))


def record_parts(rec: dict) -> list:
    message = rec.get("message")
    return content_parts(message.get("parts")) if isinstance(message, dict) else []


def expected_parts(chat: Chat) -> int:
    """Parts the session's own records hold, counted on the records."""
    own = [r.rec for r in chat.records if not r.is_copy]
    return sum(len(record_parts(rec)) or (rec.get("type") == "system") for rec in own)


@dataclass
class Context:
    source_id: str
    project_path: str
    session_id: str


class Session:
    def __init__(self, chat: Chat, ctx: Context, findings: Findings):
        self.chat, self.ctx, self.findings = chat, ctx, findings
        self.rows = {"messages": [], "parts": [], "tool_calls": [], "usage": []}
        self.costs: list[float | None] = []
        self.inherited: list[float | None] = []
        self.calls: dict[str, dict] = {}
        self.model: str | None = None

    def lineage(self, no: int) -> dict:
        return {"provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": self.ctx.project_path,
                "source_table": "chat", "source_rowid": no}

    def run(self) -> "Session":
        live = live_chain(self.chat.records)
        copies = 0
        for r in self.chat.records:
            if r.is_copy:  # the parent's record: priced only, as the fork's inherited cost
                copies += 1
                bucket = usage_of(r.rec.get("usageMetadata")) if r.rec.get("type") == "assistant" else None
                if bucket:
                    self.inherited.append(price_buckets(bucket, str_or_none(r.rec.get("model")), None,
                                                        from_iso(r.rec.get("timestamp"))).cost_usd)
                continue
            self.message(r, dropped=r.rec.get("type") != "system" and r.uuid not in live)
        if copies:
            self.findings.notes.append(f"{self.ctx.session_id}: {copies} records copied from the forked session "
                                       "skipped")
        priced = [u for u in self.rows["usage"] if u["cost_usd"] is not None]
        self.model = (priced or self.rows["usage"] or [{"model": None}])[-1]["model"]
        return self

    def message(self, r: Record, dropped: bool) -> None:
        rec = r.rec
        kind, subtype = rec["type"], str_or_none(rec.get("subtype"))
        at = from_iso(rec.get("timestamp"))
        extra = {k: v for k, v in rec.items() if k not in RECORD_KEYS}
        if dropped:
            extra["dropped"] = "rewound"
        msg = {**self.lineage(r.no), "message_id": r.uuid, "session_id": self.ctx.session_id,
               "message_index": len(self.rows["messages"]), "role": ROLES[kind],
               "model": str_or_none(rec.get("model")) if kind == "assistant" else None, "llm_provider": None,
               "created_at": at, "updated_at": at, "is_summary": subtype == "chat_compression", "part_count": 0,
               "parts_ok": True, "extra_columns": compact_json(extra) if extra else None}
        self.rows["messages"].append(msg)
        injected = subtype in INJECTED_SUBTYPES or rec.get("provenance") in ("system", "goal_runtime")
        parts = record_parts(rec)
        if not parts and kind == "system":
            self.add_part(msg, r.no, {"part_type": "other", "native_part_type": subtype or kind,
                                      "is_known_type": True}, rec)
        for part in parts:
            cols = part_columns(part)
            if not cols["is_known_type"]:
                self.findings.unknown_part_types[cols["native_part_type"]] += 1
            if injected and cols["part_type"] == "text":
                cols["part_type"] = "injected_context"
            self.add_part(msg, r.no, cols, part)
            if cols["part_type"] == "tool_call":
                self.call(msg, r, part["functionCall"])
        if kind == "tool_result":
            self.results(msg, r, parts)
        if kind == "assistant":
            self.request(msg, r)

    def add_part(self, msg: dict, no: int, cols: dict, raw) -> None:
        if cols["part_type"] not in PART_TYPES:
            cols["part_type"] = "other"
        self.rows["parts"].append({
            **self.lineage(no), **cols, "message_id": msg["message_id"], "session_id": self.ctx.session_id,
            "part_index": msg["part_count"], "role": msg["role"], "created_at": msg["created_at"],
            "raw": compact_json(raw)})
        msg["part_count"] += 1

    def call(self, msg: dict, r: Record, call: dict) -> None:
        name, args = str_or_none(call.get("name")), call.get("args")
        call_id = str_or_none(call.get("id")) or f"{msg['message_id']}:{msg['part_count'] - 1}"
        raw = compact_json(args) if args is not None else None
        decoded = args if isinstance(args, dict) else None
        row = {**self.lineage(r.no), "session_id": self.ctx.session_id, "message_id": msg["message_id"],
               "tool_call_id": call_id, "tool_name": name, "tool_category": t.TOOLS.category(name),
               "input": raw if decoded is not None else None, "input_raw": raw, "is_input_valid": decoded is not None,
               "command": t.TOOLS.command(name, decoded), "file_path": t.TOOLS.file_path(name, decoded),
               "has_call": True, "has_result": False, "called_at": msg["created_at"]}
        self.rows["tool_calls"].append(row)
        self.calls.setdefault(call_id, row)

    def results(self, msg: dict, r: Record, parts: list) -> None:
        """A tool_result record: its functionResponse parts, and `toolCallResult` (status, error)."""
        meta = r.rec.get("toolCallResult") if isinstance(r.rec.get("toolCallResult"), dict) else {}
        responses = [p["functionResponse"] for p in parts if isinstance(p, dict)
                     and isinstance(p.get("functionResponse"), dict)]
        for response in responses or [{"id": meta.get("callId")}]:
            call_id = str_or_none(response.get("id")) or str_or_none(meta.get("callId"))
            text = result_text([{"functionResponse": response}]) if responses else None
            status = str_or_none(meta.get("status"))
            is_error = status == "error" or bool(meta.get("error")) if meta else None
            call = self.calls.pop(call_id, None) if call_id else None
            if call is None:  # a result whose call is not in this session: kept, flagged
                call = {**self.lineage(r.no), "session_id": self.ctx.session_id, "message_id": None,
                        "tool_call_id": call_id, "tool_name": str_or_none(response.get("name")),
                        "tool_category": t.TOOLS.category(str_or_none(response.get("name"))), "has_call": False,
                        "called_at": msg["created_at"]}
                self.rows["tool_calls"].append(call)
            shell = call["tool_name"] in t.TOOLS.shell_tools
            call.update(result_message_id=msg["message_id"], has_result=True, is_error=is_error,
                        exit_code=shell_exit_code(status, text) if shell else None, result_text=text,
                        result_size=len(text.encode("utf-8", "replace")) if text is not None else None,
                        result_at=msg["created_at"])
            for part in self.rows["parts"][len(self.rows["parts"]) - msg["part_count"]:]:
                if part.get("tool_call_id") == call_id:
                    part["is_error"] = is_error

    def request(self, msg: dict, r: Record) -> None:
        bucket = usage_of(r.rec.get("usageMetadata"))
        if bucket is None:
            return
        model = str_or_none(r.rec.get("model"))
        priced = price_buckets(bucket, model, None, msg["created_at"])
        self.rows["usage"].append({
            **self.lineage(r.no), "session_id": self.ctx.session_id, "message_id": msg["message_id"],
            "request_id": None, "requested_at": msg["created_at"], "model": model, "llm_provider": None,
            "is_sidechain": r.rec.get("isSidechain") is True, **bucket.columns(), "cost_usd": priced.cost_usd,
            "cost_source": priced.cost_source, "pricing_note": priced.note})
        self.costs.append(priced.cost_usd)

