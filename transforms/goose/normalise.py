"""Goose records (transforms.goose.store) -> canonical rows. Pure: no I/O but the git config read
that names a project. Learnt from Goose's own source (block/goose `crates/goose/src/session/`,
`conversation/message/`); ccusage's reader (`adapter/goose/`) compared in tests/test_goose.py.

The traps:
- **Cumulative counters, and last-call counters beside them.** Goose keeps no per-request usage.
  A session row has `accumulated_{input,output,total}_tokens` (running totals, rewritten after
  every model call: the latest value is the session's spend, never summed) and
  `input_tokens`/`output_tokens`/`total_tokens`, "retrieved from the provider's last usage" (the
  last call's context, NOT a total: kept in `extra_columns`, never added). A session without
  accumulated counters (Goose before they existed) has unknown tokens, not its last call's
  (ccusage falls back to the last call; the test shows why that is wrong). So `usage` holds ONE
  row per session: its accumulated counters, not a request (`request_id` null), dated at the
  session's `updated_at` (a session that spans days puts its whole spend on its last day).
- **Cache not split.** Goose folds cache reads and writes into `input_tokens` (its Anthropic
  usage: input + cache_creation + cache_read "for display"), so all input is `input_uncached`
  and an estimate prices it at the full input rate (an upper bound). Output is
  `accumulated_output_tokens` plus any remainder of the total beyond input + output (Gemini's
  thinking tokens, outside its output count): that remainder is also `reasoning`.
- **Cost.** `accumulated_cost` (schema v13) is Goose's own running cost: `native`. Without it,
  priced from the counters with `model_config_json.model_name` and `provider_name`
  (`estimated`), else `unknown`. A session that never called a model costs a known 0.
- **Streamed duplicates.** Usage is per session, so no message copy can count twice; a message
  id seen twice in a session (a re-inserted copy) keeps both rows, the second id suffixed with
  its row number so that ids stay unique.
- **Forks and sub-agents.** Sub-agent sessions (`session_type = 'sub_agent'`) and copies of a
  session are sessions of their own with their own counters; Goose records no parent id, so
  each is a root (its type is in `extra_columns`) and nothing is added across sessions.
- **Archived copies and pruned history.** Legacy `.jsonl` files stay after their import into
  `sessions.db`: the database's copy counts (store.py). Archived sessions (`archived_at`, v12)
  are still in the database and are read. Compaction rewrites a session's messages
  (`replace_conversation` deletes and re-inserts them): the lake holds what the store holds now;
  a deleted session stays in the lake (warehouse retention).
"""

import math
from dataclasses import dataclass, field
from datetime import datetime

from transforms import jsontext
from transforms.findings import Findings, bad_line
from transforms.goose.store import Message, Session, Store
from transforms.goose.tools import call_of, result_of, tool_call_row
from transforms.jsontext import int64_or_none as _int
from transforms.pricing import Buckets, in_range, price_buckets
from transforms.projects import project_name
from transforms.timestamps import from_epoch, from_iso
from transforms.tools import compact_json

PROVIDER = "goose"
# Goose's content types (MessageContent, serde tag `type`) -> the canonical part type
PART_TYPES = {"text": "text", "thinking": "reasoning", "redactedThinking": "reasoning", "image": "binary",
              "toolRequest": "tool_call", "frontendToolRequest": "tool_call", "toolResponse": "tool_result",
              **{k: "other" for k in ("toolConfirmationRequest", "actionRequired", "systemNotification",
                                      "contextLengthExceeded", "summarizationRequested", "conversationCompacted")}}
SESSION_COLUMNS = ("id", "name", "description", "working_dir", "created_at", "updated_at", "accumulated_cost",
                   "accumulated_input_tokens", "accumulated_output_tokens", "accumulated_total_tokens",
                   "provider_name", "model_config_json")


@dataclass
class Context:
    source_id: str
    project_path: str  # for a session without a working_dir
    run_at: datetime
    project_names: dict = field(default_factory=dict)


def _str(v):
    return v if isinstance(v, str) and v else None


def _time(value) -> datetime | None:
    """Goose writes `created_at`/`updated_at` as UTC text (`2026-03-02 09:00:00` from SQLite's
    CURRENT_TIMESTAMP, RFC 3339 from chrono), message times as epoch seconds."""
    return from_iso(value) if isinstance(value, str) else from_epoch(value)


def session_buckets(cols: dict) -> Buckets | None:
    """The session's accumulated counters in disjoint buckets; None when not recorded."""
    inp, out = _int(cols.get("accumulated_input_tokens")), _int(cols.get("accumulated_output_tokens"))
    total = _int(cols.get("accumulated_total_tokens"))
    if not in_range(total):  # only a check on the two, as Gemini's: read as not recorded (said: bad_total)
        total = None
    if inp is None and out is None and total is None:
        return None
    if not all(map(in_range, (inp, out))):  # kept as written: unpriced, nulled as it lands
        return Buckets(input_uncached=inp, output=out)
    extra = max(0, (total or 0) - (inp or 0) - (out or 0))
    output = None if out is None and not extra else (out or 0) + extra
    return Buckets(input_uncached=inp, output=output, reasoning=extra or None)


def bad_total(cols: dict) -> bool:
    """An accumulated total out of range (negative, over 10^12), which session_buckets reads as not
    recorded: counted, and said in the source's notes."""
    return not in_range(_int(cols.get("accumulated_total_tokens")))


def model_of(cols: dict) -> str | None:
    config = cols.get("model_config_json")
    try:
        value = jsontext.loads(config) if isinstance(config, str) else None
    except (ValueError, RecursionError):
        return None
    return _str(value.get("model_name")) if isinstance(value, dict) else None


def native_cost(value) -> tuple[float | None, bool]:
    """(cost, is garbled): a finite number is Goose's cost; text where a number belongs is not."""
    if value is None:
        return None, False
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value), False
    return None, True


def part_columns(kind: str | None, item: dict) -> dict:
    if kind == "text":
        return {"text": _str(item.get("text"))}
    if kind == "thinking":
        return {"reasoning": item.get("thinking") if isinstance(item.get("thinking"), str) else None}
    if kind == "image":
        data = item.get("data")
        size = len(data) * 3 // 4 - data[-2:].count("=") if isinstance(data, str) and data else None
        return {"mime_type": _str(item.get("mimeType")), "binary_size": size}
    if kind in ("toolRequest", "frontendToolRequest"):
        name, _, stored = call_of(item)
        return {"tool_call_id": _str(item.get("id")), "tool_name": name, "tool_input": stored}
    if kind == "toolResponse":
        text, is_error = result_of(item)
        return {"tool_call_id": _str(item.get("id")), "tool_result": text, "is_error": is_error}
    if kind == "systemNotification":
        return {"text": _str(item.get("msg"))}
    return {}


class _Normaliser:
    def __init__(self, store: Store, ctx: Context):
        self.store, self.ctx = store, ctx
        self.findings = Findings(notes=list(store.notes))
        self.out = {t: [] for t in ("sessions", "messages", "parts", "tool_calls", "usage", "quarantine")}
        self.names: dict[str, str] = {}
        self.garbled = 0
        self.bad_totals = 0
        self.pending: dict[tuple[str, str], dict] = {}  # tool calls waiting for their result

    def lineage(self, session: Session, table: str, rowid: int) -> dict:
        path = _str(session.columns.get("working_dir"))
        row = {"provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": path or self.ctx.project_path,
               "source_table": table, "source_rowid": rowid}
        if path:
            if path not in self.names:
                self.names[path] = project_name(path, self.ctx.project_names)
            row["project"] = self.names[path]  # the lake writer files the row under its own project
        return row

    def quarantine(self, session: Session, table: str, rowid: int, key: str, error: str, raw: str, when) -> None:
        row = self.lineage(session, table, rowid)
        row.update(key=key, error=error, raw=raw, created_at=when or self.ctx.run_at)
        self.out["quarantine"].append(row)

    def run(self):
        for session in self.store.sessions:
            self.session(session)
        for name, no, error, text in self.store.bad_lines:
            self.out["quarantine"].append(bad_line(PROVIDER, self.ctx, name, name, no, error, text, self.ctx.run_at))
        for call in self.pending.values():  # calls that never got a result
            self.out["tool_calls"].append(tool_call_row(call, None, self._lineage_of(call)))
        if self.garbled:
            self.findings.notes.append(f"{self.garbled} session costs that are not a number: not a native cost "
                                       "(priced from the tokens where possible, else unknown)")
        if self.bad_totals:
            many = "s" if self.bad_totals > 1 else ""
            self.findings.notes.append(f"accumulated_total_tokens out of range (negative or over 10^12) in "
                                       f"{self.bad_totals} session{many}: read as not recorded, no reasoning beyond "
                                       "input and output")
        return self.out, self.findings

    def session(self, s: Session) -> None:
        cols = s.columns
        created = _time(cols.get("created_at"))
        first = next((from_epoch(m.created) for m in s.messages if from_epoch(m.created)), None)
        created = created or first or self.ctx.run_at
        updated = _time(cols.get("updated_at")) or created
        seen: set[str] = set()
        assistant = 0
        for index, m in enumerate(s.messages):
            assistant += m.role == "assistant"
            self.message(s, m, index, seen)
        model, provider = model_of(cols), _str(cols.get("provider_name"))
        buckets = session_buckets(cols)
        self.bad_totals += bad_total(cols)
        cost, garbled = native_cost(cols.get("accumulated_cost"))
        self.garbled += garbled
        if cost is not None:
            usd, source, note = cost, "native", "sessions.accumulated_cost"
        elif buckets is not None and buckets.any_count:
            priced = price_buckets(buckets, model, provider, updated)
            usd, source, note = priced.cost_usd, priced.cost_source, priced.note
        elif assistant == 0 or (buckets is not None and not garbled):
            # never called a model (or its counters say 0 tokens): a known 0
            usd, source, note = 0.0, "native" if self.store.has_cost_column and not garbled else "estimated", None
        else:
            usd, source, note = None, "unknown", "no accumulated token counters recorded"
        if buckets is not None or cost is not None:
            row = self.lineage(s, s.source_table, s.rowid)
            row.update(session_id=s.id, message_id=None, request_id=None, requested_at=updated, model=model,
                       llm_provider=provider, is_sidechain=cols.get("session_type") == "sub_agent",
                       **(buckets or Buckets()).columns(), cost_usd=usd, cost_source=source,
                       pricing_note=f"session counters (one row per session); {note}" if note else "session counters")
            self.out["usage"].append(row)
        extra = {k: v for k, v in cols.items() if k not in SESSION_COLUMNS}
        row = self.lineage(s, s.source_table, s.rowid)
        row.update(session_id=s.id, parent_session_id=None, root_session_id=s.id, is_root=True,
                   title=_str(cols.get("name")) or _str(cols.get("description")), created_at=created,
                   updated_at=updated, cost_usd=usd, cost_source=source, cost_includes_subagents=False,
                   model=model, llm_provider=provider, total_tokens=buckets.total if buckets else None,
                   message_count=len(s.messages), extra_columns=compact_json(extra) if extra else None)
        self.out["sessions"].append(row)

    def message(self, s: Session, m: Message, index: int, seen: set[str]) -> None:
        created = from_epoch(m.created) or _time(m.columns.get("timestamp")) or _time(s.columns.get("created_at"))
        mid = _str(m.message_id) or f"msg_{s.id}_{m.rowid}"
        if mid in seen:
            mid = f"{mid}#{m.rowid}"
        seen.add(mid)
        table = m.table if s.source_table in ("sessions", "messages") else s.source_table
        extra = dict(m.columns)
        if m.metadata:
            extra["metadata"] = m.metadata
        row = self.lineage(s, table, m.rowid)
        row.update(message_id=mid, session_id=s.id, message_index=index, role=_str(m.role), model=None,
                   llm_provider=None, created_at=created, updated_at=created, finished_at=None, is_summary=False,
                   part_count=len(m.content) if m.content is not None else None, parts_ok=m.error is None,
                   extra_columns=compact_json(extra) if extra else None)
        self.out["messages"].append(row)
        if m.error is not None:
            self.quarantine(s, table, m.rowid, mid, f"unreadable content: {m.error}", m.raw, created)
            return
        calls = {}
        for i, item in enumerate(m.content):
            item = item if isinstance(item, dict) else {"type": None, "value": item}
            kind = item.get("type") if isinstance(item.get("type"), str) else None
            if kind not in PART_TYPES:
                self.findings.unknown_part_types[kind] += 1
            part = self.lineage(s, table, m.rowid)
            part.update(message_id=mid, session_id=s.id, part_index=i, part_type=PART_TYPES.get(kind, "other"),
                        native_part_type=kind, is_known_type=kind in PART_TYPES, role=_str(m.role),
                        created_at=created, raw=compact_json(item), **part_columns(kind, item))
            self.out["parts"].append(part)
            if part["part_type"] in ("tool_call", "tool_result"):
                calls.setdefault(part["part_type"], []).append(part)
        for call in calls.get("tool_call", []):
            self.pending[(s.id, call["tool_call_id"])] = call
        for result in calls.get("tool_result", []):
            call = self.pending.pop((s.id, result["tool_call_id"]), None)
            if call is not None:
                result["tool_name"] = call["tool_name"]
            self.out["tool_calls"].append(tool_call_row(call, result, self._lineage_of(call or result)))

    @staticmethod
    def _lineage_of(part: dict) -> dict:
        keys = ("provider", "source_id", "project_path", "source_table", "source_rowid", "project")
        return {k: part[k] for k in keys if k in part}


def normalise(store: Store, ctx: Context) -> tuple[dict[str, list[dict]], Findings]:
    return _Normaliser(store, ctx).run()


def expected_counts(store: Store) -> dict[str, int]:
    """Counted on the records themselves, to reconcile the rows written against."""
    messages = [m for s in store.sessions for m in s.messages]
    return {"sessions": len(store.sessions), "messages": len(messages),
            "parts": sum(len(m.content) for m in messages if m.content is not None)}
