"""OpenCode records (transforms.opencode.store) -> canonical rows. Pure: no I/O but the git
config read that names a project.

The traps (docs/FORMATS.md, "OpenCode: token usage" and "OpenCode: traps"):
- one store spans many projects: every row names its session's project (its `directory`);
- `tokens.input` is uncached input; cache reads and writes are buckets of their own; the cache
  write TTL is not recorded, so writes go to the 5-minute bucket;
- `tokens.reasoning` is disjoint from `tokens.output` in current data and is added to it,
  unless `tokens.total` shows it inside (older OpenAI-style rows);
- `message.tokens` holds the LAST step only: a message's usage is the sum of its step-finish
  parts (`message.tokens` only when it has none), its cost `message.cost` (the sum of its
  steps), priced by us only when 0 or not a number (text: counted in a warning). Session
  aggregates (`session.cost`, `tokens_*`) are never added: they stay in `extra_columns`;
- sub-agents are child sessions: a session's cost is its own plus its descendants'.
Usage is one row per assistant message (not per step): its native cost is per message.
"""

import math
from dataclasses import astuple, dataclass, field
from datetime import datetime
from functools import cached_property, reduce
from pathlib import Path

from transforms.costs import session_cost
from transforms.findings import Findings
from transforms.opencode.store import Record, Store
from transforms.opencode.tools import tool_call_row, tool_part_columns
from transforms.pricing import Buckets, price_buckets
from transforms.projects import project_name
from transforms.timestamps import from_epoch
from transforms.tools import compact_json

PROVIDER = "opencode"
# OpenCode's part type -> the canonical part type (contract.PART_TYPES); an unknown one is `other`.
# A `tool` part holds the call and its result: one `tool_call` row with the result columns filled.
PART_TYPES = {"text": "text", "reasoning": "reasoning", "file": "binary", "tool": "tool_call",
              "step-finish": "finish", **{k: "other" for k in ("step-start", "snapshot", "patch", "agent", "retry",
                                                                "compaction", "subtask")}}
MAPPED_MESSAGE_KEYS = ("id", "sessionID", "role", "time", "modelID", "providerID", "model", "summary",
                       "tokens", "cost")


@dataclass
class Context:
    source_id: str
    project_path: str  # for rows of a session whose directory is unknown
    run_at: datetime
    project_names: dict = field(default_factory=dict)  # config.toml [projects]
    # sessions the lake holds and the store no longer does (warehouse.land.retention.Landed by id)
    gone: dict = field(default_factory=dict)


def _int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v):
    return v if isinstance(v, str) else None


def _dict(v) -> dict:
    return v if isinstance(v, dict) else {}


# ---------------------------------------------------------------------------------- tokens

def step_buckets(tokens) -> Buckets | None:
    """One `tokens` object in disjoint buckets; reasoning is added to output unless `total`
    shows it is already inside."""
    if not isinstance(tokens, dict):
        return None
    cache = _dict(tokens.get("cache"))
    inp, out, reasoning = _int(tokens.get("input")), _int(tokens.get("output")), _int(tokens.get("reasoning"))
    read, write, total = _int(cache.get("read")), _int(cache.get("write")), _int(tokens.get("total"))
    inside = bool(reasoning) and total == sum(v or 0 for v in (inp, out, read, write))
    output = out if inside or reasoning is None else (out or 0) + reasoning
    return Buckets(input_uncached=inp, cache_read=read, cache_write_5m=write, output=output, reasoning=reasoning)


def add_buckets(a: Buckets | None, b: Buckets | None) -> Buckets | None:
    if a is None or b is None:
        return a or b
    return Buckets(*(None if x is None and y is None else (x or 0) + (y or 0) for x, y in zip(astuple(a), astuple(b))))


def message_buckets(info: dict, parts: list[dict]) -> Buckets | None:
    steps = [step_buckets(p.get("tokens")) for p in parts if p.get("type") == "step-finish"]
    return reduce(add_buckets, steps, None) if steps else step_buckets(info.get("tokens"))


# ---------------------------------------------------------------------------------- rows

class _Normaliser:
    def __init__(self, store: Store, ctx: Context):
        self.store, self.ctx = store, ctx
        self.findings = Findings(notes=list(store.notes))
        self.out = {t: [] for t in ("sessions", "messages", "parts", "tool_calls", "usage", "quarantine")}
        self.places: dict[str, tuple[str, str | None]] = {}  # session id -> (directory, project)
        self.requests: dict[str, list] = {}  # session id -> [(cost, cost_source, model, provider, at)]
        self.tokens: dict[str, int] = {}
        self.children: dict[str, list[str]] | None = None
        self.bad_costs = 0  # stored `message.cost` values that are not a number

    def lineage(self, record: Record, session_id: str | None) -> dict:
        path, project = self.places.get(session_id or "", (self.ctx.project_path, None))
        row = {"provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": path,
               "source_table": record.source_table, "source_rowid": record.rowid}
        if project:
            row["project"] = project  # the lake writer files the row under its own project
        return row

    def quarantine(self, record: Record, session_id, table: str | None, created=None) -> None:
        row = self.lineage(record, session_id)
        row.update(key=record.id, error=f"unreadable {record.kind}: {record.error}", raw=record.raw,
                   created_at=created or self.ctx.run_at)
        self.out["quarantine"].append(row)
        if table:
            self.findings.diverted[table] += 1

    def guarded(self, record: Record, sid, table: str, fn, *args) -> None:
        """A record of a shape no OpenCode writes goes to the quarantine whole, not the source."""
        sizes = {name: len(rows) for name, rows in self.out.items()}
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001  (one odd record never sinks the source)
            for name, n in sizes.items():
                del self.out[name][n:]
            record.error = f"{type(exc).__name__}: {exc}"[:300]
            self.quarantine(record, sid, table)

    def run(self):
        by_session: dict[str, list[Record]] = {}
        for m in self.store.messages.values():
            by_session.setdefault(m.owner or "", []).append(m)
        self.resolve_places(by_session)
        for sid, messages in by_session.items():
            messages.sort(key=lambda m: (m.created_ms or 0, m.id))
            for index, m in enumerate(messages):
                self.guarded(m, sid, "messages", self.message, m, sid, index)
        for message_id, parts in self.store.parts.items():
            if message_id not in self.store.messages:  # parts of a message that is gone
                self.parts(parts, None, parts[0].session_id, None, None)
        for sid, record in self.store.sessions.items():
            self.guarded(record, sid, "sessions", self.session, record, by_session.get(sid, []))
        if self.bad_costs:
            self.findings.notes.append(f"{self.bad_costs} message costs that are not a number: not a native "
                                       "cost (priced from the tokens where possible, else unknown)")
        for record in self.store.superseded:  # an unreadable copy of a record kept from elsewhere
            self.quarantine(record, record.session_id, None)
        for place, why in self.store.problems:  # a database that cannot be read; the others are
            self.findings.notes.append(f"{place} skipped: {why}")
            self.out["quarantine"].append({
                "provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": self.ctx.project_path,
                "source_table": Path(place).name, "source_rowid": 0, "key": place, "error": why, "raw": None,
                "created_at": self.ctx.run_at})
        return self.out, self.findings

    # -- projects ------------------------------------------------------------------------------
    def resolve_places(self, by_session: dict[str, list[Record]]) -> None:
        names: dict[str, str] = {}
        for sid in set(self.store.sessions) | set(by_session):
            directory = _str(self.store.sessions[sid].column("directory")) if sid in self.store.sessions else None
            if not directory:  # no session row: the assistant messages say where they ran
                paths = [_dict(_dict(m.data).get("path")) for m in by_session.get(sid, [])]
                directory = next((d for p in paths for d in (_str(p.get("root")), _str(p.get("cwd"))) if d), None)
            if directory:
                if directory not in names:
                    names[directory] = project_name(directory, self.ctx.project_names)
                self.places[sid] = (directory, names[directory])

    # -- messages and parts --------------------------------------------------------------------
    def message(self, m: Record, sid: str, index: int) -> None:
        created = from_epoch(m.created_ms)
        parts = self.store.parts.get(m.id, [])
        if m.error is not None:
            self.quarantine(m, sid, "messages", created)
            self.parts(parts, m.id, sid, None, created)
            return
        info = m.data
        role, times = _str(info.get("role")), _dict(info.get("time"))
        user_model = _dict(info.get("model"))
        model = _str(info.get("modelID")) or _str(user_model.get("modelID"))
        llm_provider = _str(info.get("providerID")) or _str(user_model.get("providerID"))
        extra = {k: v for k, v in info.items() if k not in MAPPED_MESSAGE_KEYS}
        row = self.lineage(m, sid)
        row.update(message_id=m.id, session_id=sid, message_index=index, role=role, model=model,
                   llm_provider=llm_provider, created_at=created,
                   updated_at=from_epoch(m.columns.get("time_updated")) or from_epoch(times.get("completed")) or created,
                   finished_at=from_epoch(times.get("completed")), is_summary=info.get("summary") is True,
                   part_count=len(parts), parts_ok=all(p.error is None for p in parts),
                   extra_columns=compact_json(extra) if extra else None)
        self.out["messages"].append(row)
        good = self.parts(parts, m.id, sid, role, created)
        if role == "assistant":
            self.usage(m, sid, info, good, model, llm_provider, created)

    def parts(self, parts: list[Record], message_id, sid, role, created) -> list[dict]:
        good = []
        for index, p in enumerate(parts):
            sid = sid or p.session_id
            when = created or from_epoch(p.columns.get("time_created"))
            if p.error is not None:
                self.quarantine(p, sid, "parts", when)
                continue
            kind = _str(p.data.get("type"))
            if kind not in PART_TYPES:
                self.findings.unknown_part_types[kind] += 1
            row = self.lineage(p, sid)
            row.update(message_id=message_id or p.owner, session_id=sid, part_index=index,
                       part_type=PART_TYPES.get(kind, "other"), native_part_type=kind, is_known_type=kind in PART_TYPES, role=role, created_at=when, raw=compact_json(p.data),
                       **part_columns(kind, p.data))
            self.out["parts"].append(row)
            if kind == "tool":
                self.out["tool_calls"].append(tool_call_row(p.data, row))
            good.append(p.data)
        return good

    def usage(self, m: Record, sid: str, info: dict, parts: list[dict], model, llm_provider, created) -> None:
        buckets = message_buckets(info, parts)
        cost = info.get("cost")
        number = isinstance(cost, (int, float)) and not isinstance(cost, bool) and -math.inf < cost < math.inf
        if cost is not None and not number:
            self.bad_costs += 1  # text where a number belongs: no native cost; priced from the tokens
        native = number and cost > 0
        if not native and not (buckets and buckets.any_count):
            return  # an aborted or still-streaming placeholder: nothing was billed (a bad count is no placeholder)
        buckets = buckets or Buckets()
        at = from_epoch(_dict(info.get("time")).get("completed")) or created
        steps = sum(1 for p in parts if p.get("type") == "step-finish")
        if native:
            usd, source, note = float(cost), "native", f"message.cost (sum of {steps or 1} step(s))"
        else:
            priced = price_buckets(buckets, model, llm_provider, at)
            usd, source, note = priced.cost_usd, priced.cost_source, priced.note
        row = self.lineage(m, sid)
        row.update(session_id=sid, message_id=m.id, request_id=None, requested_at=at, model=model,
                   llm_provider=llm_provider, is_sidechain=self.parent_of(sid) is not None,
                   **buckets.columns(), cost_usd=usd, cost_source=source, pricing_note=note)
        self.out["usage"].append(row)
        self.requests.setdefault(sid, []).append((usd, source, model, llm_provider, at))
        self.tokens[sid] = self.tokens.get(sid, 0) + (buckets.total or 0)

    # -- sessions ------------------------------------------------------------------------------
    def session(self, record: Record, messages: list[Record]) -> None:
        if record.error is not None:
            self.quarantine(record, record.id, "sessions")
            return
        parent = _str(record.column("parent_id")) or None
        tree = self.subtree(record.id)
        cost, cost_source = session_cost([(r[0], r[1]) for s in tree for r in self.requests.get(s, [])]
                                         + [r for s in tree for r in self.gone_costs.get(s, [])])
        own = sorted(self.requests.get(record.id, []), key=lambda r: (r[4] is not None, r[4]))
        last = next((r for r in reversed(own) if r[0] is not None), own[-1] if own else None)
        summaries = [m.id for m in messages if _dict(m.data).get("summary") is True]
        extra, unknown = record.session_extras()
        if unknown:
            seen = self.findings.unknown_columns.setdefault("sessions", [])
            seen.extend(k for k in unknown if k not in seen)
        created = from_epoch(record.created_ms)
        row = self.lineage(record, record.id)
        row.update(session_id=record.id, parent_session_id=parent, root_session_id=self.root_of(record.id),
                   is_root=parent is None, title=_str(record.column("title")), created_at=created,
                   updated_at=from_epoch(record.column("time_updated")) or created, cost_usd=cost, cost_source=cost_source,
                   cost_includes_subagents=True, model=last[2] if last else None,
                   llm_provider=last[3] if last else None,
                   total_tokens=self.tokens.get(record.id) if own else None, message_count=len(messages),
                   summary_message_id=summaries[-1] if summaries else None,
                   extra_columns=compact_json(extra) if extra else None)
        self.out["sessions"].append(row)

    def parent_of(self, sid: str) -> str | None:
        record = self.store.sessions.get(sid)
        return (_str(record.column("parent_id")) or None) if record else None

    def root_of(self, sid: str) -> str:
        seen, current = {sid}, sid
        while (parent := self.parent_of(current)) and parent not in seen:
            if parent not in self.store.sessions:
                return parent  # the parent is gone: the chain stops at it
            seen.add(parent)
            current = parent
        return current

    @cached_property
    def gone_costs(self) -> dict[str, list[tuple[float | None, str]]]:
        """Per session of the store, the cost of its sub-agents deleted from it and kept in the
        lake, as (cost_usd, cost_source) pairs a request gives `session_cost` (a cost priced in
        part is a priced and an unpriced one). A gone sub-agent's own gone sub-agents are in its
        cost already; a sub-agent still stored under a gone one is not in its ancestors' tree."""
        out = {}
        for landed in self.ctx.gone.values():
            if landed.parent_session_id in self.store.sessions:
                if landed.cost_source == "partial":
                    pairs = [(landed.cost_usd, "native"), (None, "unknown")]
                else:
                    pairs = [(landed.cost_usd, landed.cost_source or "unknown")]
                out.setdefault(landed.parent_session_id, []).extend(pairs)
        return out

    def subtree(self, sid: str) -> set[str]:
        if self.children is None:
            self.children = {}
            for child in self.store.sessions:
                if self.parent_of(child):
                    self.children.setdefault(self.parent_of(child), []).append(child)
        out, stack = set(), [sid]
        while stack:
            current = stack.pop()
            if current not in out:  # a cycle never loops
                out.add(current)
                stack.extend(self.children.get(current, []))
        return out


def part_columns(kind: str | None, part: dict) -> dict:
    """The typed `parts` columns of one part; everything else stays in `raw`."""
    times = _dict(part.get("time"))
    if kind == "text":
        return {"text": _str(part.get("text"))}
    if kind == "reasoning":
        return {"reasoning": _str(part.get("text")), "reasoning_started_at": from_epoch(times.get("start")),
                "reasoning_finished_at": from_epoch(times.get("end"))}
    if kind == "tool":
        return tool_part_columns(part)
    if kind == "step-finish":
        return {"finish_reason": _str(part.get("reason"))}
    if kind == "file":
        return {"mime_type": _str(part.get("mime")), "url": _str(part.get("url")),
                "binary_path": _str(part.get("filename"))}
    if kind == "subtask":
        return {"text": _str(part.get("prompt"))}
    return {}


def gone_sessions(store: Store, landed) -> dict:
    """Of the sessions the lake holds of the source (`landed()`, or None: not asked), those the
    store no longer holds (Context.gone)."""
    held = landed() if landed is not None else {}
    return {sid: s for sid, s in held.items() if sid not in store.sessions}


def normalise(store: Store, ctx: Context) -> tuple[dict[str, list[dict]], Findings]:
    return _Normaliser(store, ctx).run()


def expected_counts(store: Store) -> dict[str, int]:
    """Counted on the records themselves, to reconcile the rows written against."""
    parts = [p for group in store.parts.values() for p in group]
    return {"sessions": len(store.sessions), "messages": len(store.messages), "parts": len(parts),
            "tool_calls": sum(1 for p in parts if p.data is not None and p.data.get("type") == "tool")}
