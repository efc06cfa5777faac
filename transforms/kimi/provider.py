"""Kimi CLI behind the provider interface. A source is one work dir's sessions folder
(transforms.kimi.discover): each session, and each of its sub-agents, is one `sessions` row.
Kimi only appends to a wire log: one read of each is a consistent prefix."""

import math
from datetime import datetime
from pathlib import Path

from transforms import jsontext
from transforms.contract import TRANSCRIPT_TABLES
from transforms.costs import summarise_costs
from transforms.findings import Findings, bad_line
from transforms.kimi import discover as kimi_discover
from transforms.kimi.discover import PROVIDER
from transforms.kimi.normalise import Context, Event, Session, expected_parts, parse_wire, usage_buckets
from transforms.pricing import price_buckets
from transforms.provider import AgentProvider, Extract, SourceError
from transforms.sources import Source, file_fingerprint
from transforms.tools import compact_json

FORK_PREFIXES = ("Fork: ", "Undo: ")


class KimiProvider(AgentProvider):
    name = PROVIDER
    discovery = kimi_discover

    def fingerprint(self, source: Source) -> str:
        files = []
        for d in map(Path, getattr(source, "sessions", ())):
            files += [d / "wire.jsonl", d / "state.json"] + sorted((d / "subagents").glob("*/wire.jsonl"))
        return file_fingerprint(*map(str, files))

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        findings = Findings()
        rows: dict[str, list[dict]] = {t: [] for t in TRANSCRIPT_TABLES}
        dirs = [Path(d) for d in getattr(source, "sessions", ())]
        wires = [_read(d / "wire.jsonl", source, run_at, rows["quarantine"]) for d in dirs]
        states = [_json(d / "state.json") for d in dirs]
        owned = own_events([w.events for w in wires], [fork_depth(state.get("custom_title")) for state in states])
        expected = {"sessions": 0, "parts": 0}
        for d, wire, state, (events, copied) in zip(dirs, wires, states, owned):
            sid = d.name
            session, children = self_and_subagents(d, sid, events, source, run_at, rows, findings, expected)
            forked = copied[0][1] if copied else None
            inherited = [_price(e) for e, _ in copied if e.type == "StatusUpdate"]
            priced = [c for c in inherited if c is not None]
            title = state.get("custom_title") if isinstance(state.get("custom_title"), str) else None
            extra = {k: v for k, v in (("protocol_version", wire.version), ("archived", state.get("archived")))
                     if v is not None}
            if copied:
                findings.notes.append(f"{sid}: {len(copied)} wire lines copied from session {dirs[forked].name} "
                                      "skipped")
            rows["sessions"].append(session_row(sid, None, session, [c for ch in children for c in ch.costs],
                                                title, events or [e for e, _ in copied], source, extra,
                                                forked=dirs[forked].name if forked is not None else None,
                                                inherited=round(sum(priced), 9) if priced else None))
        return Extract(rows=rows, findings=findings, expected=expected)


def _read(path: Path, source: Source, run_at: datetime, quarantine: list[dict]):
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc}") from None
    wire = parse_wire(str(path), text)
    for no, raw, reason in wire.bad:
        quarantine.append(bad_line(PROVIDER, source, "wire", path, no, reason, raw, run_at))
    return wire


def _json(path: Path) -> dict:
    try:
        doc = jsontext.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return doc if isinstance(doc, dict) else {}


def fork_depth(title) -> int:
    """How many times a session was forked, by the title session_fork.py gives it:
    `Fork: <source title>` (`/fork`) or `Undo: <source title>` (`/undo`)."""
    depth = 0
    while isinstance(title, str) and title.startswith(FORK_PREFIXES):
        title, depth = title.split(": ", 1)[1], depth + 1
    return depth


def own_events(sessions: list[list[Event]], depths: list[int]) -> list[tuple[list[Event], list[tuple[Event, int]]]]:
    """Each session's own events, and the (event, owning session) of the lines a fork copied.
    A line found in several sessions belongs to the least forked of them (fork_depth), then to the
    one whose unshared history starts first (a title the user renamed since)."""
    holders: dict[str, set[int]] = {}
    for i, events in enumerate(sessions):
        for e in events:
            holders.setdefault(e.line, set()).add(i)

    def own_start(i: int) -> float:
        times = [e.at.timestamp() for e in sessions[i] if len(holders[e.line]) == 1 and e.at]
        return min(times, default=math.inf)

    ranked = sorted(range(len(sessions)), key=lambda i: (depths[i], own_start(i), i))
    order = {i: rank for rank, i in enumerate(ranked)}
    out = []
    for i, events in enumerate(sessions):
        own, copied = [], []
        for e in events:
            owner = min(holders[e.line], key=order.__getitem__)
            (own.append(e) if owner == i else copied.append((e, owner)))
        out.append((own, copied))
    return out


def _price(e: Event) -> float | None:
    bucket = usage_buckets(e.payload.get("token_usage"))
    return price_buckets(bucket, None, None, e.at).cost_usd if bucket else None


def self_and_subagents(d: Path, sid: str, events: list[Event], source: Source, run_at, rows, findings,
                       expected) -> tuple[Session, list[Session]]:
    """The session's own rows and its sub-agents' (their own wire when it has events, else the
    copies wrapped in the parent's wire; never both)."""
    main = [e for e in events if e.agent is None]
    session = Session(Context(source.source_id, source.project_path, sid, None, False), findings, "wire").run(main)
    _collect(rows, session, expected, main)
    children = []
    agents = dict.fromkeys([e.agent for e in events if e.agent] + sorted(p.name for p in (d / "subagents").glob("*")
                                                                          if (p / "wire.jsonl").is_file()))
    for agent in agents:
        agent_dir = d / "subagents" / agent
        own = _read(agent_dir / "wire.jsonl", source, run_at, rows["quarantine"]).events
        sub_events = own or [e for e in events if e.agent == agent]
        meta = _json(agent_dir / "meta.json")
        spec = meta.get("launch_spec") if isinstance(meta.get("launch_spec"), dict) else {}
        model = spec.get("effective_model") if isinstance(spec.get("effective_model"), str) else None
        child_id = f"{sid}:{agent}"
        child = Session(Context(source.source_id, source.project_path, child_id, model, True), findings,
                        "subagent_wire" if own else "wire").run(sub_events)
        _collect(rows, child, expected, sub_events)
        description = meta.get("description") if isinstance(meta.get("description"), str) else None
        caller = next((e.caller for e in events if e.agent == agent and e.caller), None)
        extra = {"agent_id": agent if agent != caller else None, "parent_tool_call_id": caller,
                 "subagent_type": meta.get("subagent_type")}
        rows["sessions"].append(session_row(child_id, sid, child, [], description, sub_events, source, extra,
                                            model=model))
        children.append(child)
    return session, children


def _collect(rows: dict, session: Session, expected: dict, events: list[Event]) -> None:
    for table, table_rows in session.rows.items():
        rows[table].extend(table_rows)
    expected["sessions"] += 1
    expected["parts"] += expected_parts(events)


def session_row(sid, parent, session: Session, sub_costs, title, events, source, extra, *, model=None, forked=None,
                inherited=None) -> dict:
    cost, cost_source = summarise_costs(session.costs + sub_costs)
    totals = [u["total_tokens"] for u in session.rows["usage"] if u["total_tokens"] is not None]
    times = [e.at for e in events if e.at]
    extra = {k: v for k, v in extra.items() if v is not None}
    return {
        "provider": PROVIDER, "source_id": source.source_id, "project_path": source.project_path,
        "source_table": "wire", "source_rowid": 0, "session_id": sid, "parent_session_id": parent,
        "root_session_id": parent or sid, "is_root": parent is None, "title": title,
        "created_at": min(times, default=None), "updated_at": max(times, default=None),
        "cost_usd": cost, "cost_source": cost_source, "cost_includes_subagents": parent is None,
        "forked_from_session_id": forked, "inherited_cost_usd": inherited, "model": model, "llm_provider": None,
        "total_tokens": sum(totals) if totals else None, "message_count": len(session.rows["messages"]),
        "extra_columns": compact_json(extra) if extra else None,
    }
