"""Claude Code transcript lines (one project directory) -> canonical rows. Pure.

The traps (docs/FORMATS.md, "Claude Code: usage and tokens" and "Claude Code: traps"):
- one streamed response is several lines (one content block each) repeating `usage`: one
  message and one request per (message.id, requestId), dated by its first line; a copy in
  another file (a resumed session's replay, a sidechain copy, a side question's replay) is
  counted once, in the non-sidechain, earliest file;
- the request's NUMBERS come from its final copy, looked for across ALL files of the project:
  the copy with a non-null `stop_reason`, else the one with the largest `output_tokens`, ties
  to the last seen (a main transcript may keep an early streamed copy, `stop_reason` null and
  a partial output, while a side file holds the final one);
- a line belongs to the session that owns it: a side file (`subagents/agent-*.jsonl`, e.g.
  `agent-aside_question-*`) that replays its parent's lines adds only its own lines. A replayed
  line is one whose uuid a main (non-`agent-`) transcript holds, or one that is not a sidechain
  line (`isSidechain: false`): it keeps its own `sessionId`;
- `input_tokens` excludes the cache: reads and 5m/1h writes are their own buckets;
- sub-agent transcripts are sessions of their own under the calling session, whose cost
  includes theirs; an Agent/Task result's token totals are never added;
- `<synthetic>` API-error lines are not billed; advisor iterations are extra requests with
  their own model; an old line's `costUSD` is the native cost;
- a session without a billed request costs a known $0, `estimated` (Claude Code records no
  cost of its own), never `unknown`.
"""

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import PurePosixPath

from transforms.claude.reader import FileRead
from transforms.claude.tools import join_tool_calls, message_rows, strip_private
from transforms.findings import Findings
from transforms.jsontext import int64_or_none
from transforms.pricing import Buckets, price_buckets
from transforms.timestamps import from_iso
from transforms.tools import compact_json

PROVIDER = "claude"
SYNTHETIC = "<synthetic>"
TITLE_ORDER = ("custom-title", "ai-title", "summary", "meta")  # the user's own title first
_LAST = datetime.max.replace(tzinfo=timezone.utc)  # sorts lines without a time last
# Bedrock `us.anthropic.claude-sonnet-4-5-20250929-v1:0` -> `claude-sonnet-4-5-20250929`
_BEDROCK = re.compile(r"^(?:[a-z]{2,7}\.)?anthropic\.(claude-.+?)(?:-v\d+(?::\d+)?)?$")


@dataclass
class Context:
    source_id: str
    project_path: str
    run_at: datetime


@dataclass(slots=True)
class Line:
    rel: str
    rank: int  # the file's order: earliest first
    lineno: int
    rec: dict
    ts: datetime | None
    session: str
    parent: str | None
    sidechain: bool
    # the time it is ordered by: its own, else the last one before it in its file (a line without
    # a timestamp stays where the file has it, not after every dated line)
    at: datetime | None = None
    said: bool = False  # read by an earlier run, which gave its notes: counted, not said again

    @property
    def order(self):
        return (self.at or _LAST, self.rank, self.lineno)


@dataclass
class Session:
    session_id: str
    parent: str | None
    first: Line
    last_ts: datetime | None = None
    first_ts: datetime | None = None  # its earliest time (its first line may have none)
    titles: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    messages: int = 0
    summary_id: str | None = None


def _str(v):
    return v if isinstance(v, str) else None


_int = int64_or_none  # a token count that fits the lake's int64 columns


@lru_cache(maxsize=4096)
def _path(rel: str) -> PurePosixPath:
    """A file's path, parsed once: every line of a file asks (parsed per line, it showed in an
    extract's profile: docs/BENCHMARKS.md, "Figures behind the code's choices")."""
    return PurePosixPath(rel)


def is_agent_file(rel: str) -> bool:
    return _path(rel).name.startswith("agent-")


def session_of(rel: str, rec: dict) -> tuple[str, str | None, bool]:
    """(session, calling session, is sidechain) of one line."""
    path = _path(rel)
    sid, agent = _str(rec.get("sessionId")), _str(rec.get("agentId"))
    if is_agent_file(rel) and rec.get("isSidechain") is False and sid:
        return sid, None, False  # the parent's own line, replayed in a side file (a side question)
    if path.name.startswith("agent-"):  # a sub-agent's own transcript, nested or flat (older)
        parent = sid or (path.parts[0] if len(path.parts) > 1 else None)
        return f"agent-{agent or path.stem[len('agent-'):]}", parent, True
    sid = sid or path.stem
    if rec.get("isSidechain") is True:  # sidechain lines inside the parent's own file
        return (f"agent-{agent}", sid, True) if agent else (sid, None, True)
    return sid, None, False


def to_lines(files: list[FileRead], said_before: bool = True, seen: dict | None = None) -> list[Line]:
    """Every record as a Line, files ranked by (first time, last time, path): the original
    transcript comes before a resumed copy that replays it. `seen`: each file's place in the
    order the files were first found (families.py), ranked before those: a copy is found after
    its original, which keeps its lines however long it goes on after (its last time then
    passes the copy's). `said_before`: the lines an earlier run read (FileRead.lines_before) are
    marked `said`."""
    per_file = []
    for f in files:
        upto = f.lines_before if said_before else 0
        lines = [Line(f.rel, 0, n, rec, from_iso(rec.get("timestamp")), *session_of(f.rel, rec), said=n <= upto)
                 for n, rec in f.records]
        times = [ln.ts for ln in lines if ln.ts]
        at = times[0] if times else None
        for line in lines:
            line.at = at = line.ts or at
        per_file.append((((seen or {}).get(f.rel, 0), min(times, default=_LAST), max(times, default=_LAST), f.rel),
                         lines))
    out = []
    for rank, (_, lines) in enumerate(sorted(per_file, key=lambda p: p[0])):
        for line in lines:
            line.rank = rank
            out.append(line)
    return out


def is_message(line: Line) -> bool:
    return line.rec.get("type") in ("user", "assistant") and isinstance(line.rec.get("message"), dict)


def response_key(line: Line):
    """(message.id, requestId) of an assistant line; None for user lines and id-less responses."""
    mid = _str(line.rec["message"].get("id")) if line.rec["type"] == "assistant" else None
    return (mid, _str(line.rec.get("requestId"))) if mid else None


def dedupe(lines: list[Line], findings: Findings) -> list[Line]:
    """Message lines counted once. A response belongs to its non-sidechain, earliest copy's file;
    a line with a uuid belongs to the first copy in (non-sidechain, main transcript before an
    `agent-` file, earliest file, line) order: every other copy is a replay."""
    messages = [ln for ln in lines if is_message(ln)]
    precedence = sorted(messages, key=lambda ln: (ln.sidechain, is_agent_file(ln.rel), ln.rank, ln.ts or _LAST,
                                                  ln.lineno))
    owner: dict = {}
    uuid_owner: dict = {}
    for ln in precedence:
        owner.setdefault(response_key(ln), ln.rel)
        uuid = _str(ln.rec.get("uuid"))
        if uuid:
            uuid_owner.setdefault(uuid, ln)
    kept, replays = [], 0
    for ln in messages:
        key, uuid = response_key(ln), _str(ln.rec.get("uuid"))
        if (key and owner[key] != ln.rel) or (uuid and uuid_owner[uuid] is not ln):
            replays += not ln.said
            continue
        kept.append(ln)
    if replays:
        findings.notes.append(f"{replays} replayed lines (resumed sessions, sidechain copies) counted once")
    return kept


def final_copies(lines: list[Line]) -> dict:
    """Per response key, the line that holds the request's final numbers, across all files:
    a non-null `stop_reason` first, then the largest output count, then the last seen."""
    best: dict = {}
    for ln in lines:
        if not is_message(ln) or not isinstance(ln.rec["message"].get("usage"), dict):
            continue
        key = response_key(ln)
        if key is None:
            continue
        msg = ln.rec["message"]
        rank = (msg.get("stop_reason") is not None, _int(msg["usage"].get("output_tokens")) or -1, ln.order)
        if key not in best or rank > best[key][0]:
            best[key] = (rank, ln)
    return {key: ln for key, (_, ln) in best.items()}


def lineage(ctx: Context, line: Line) -> dict:
    return {"provider": PROVIDER, "source_id": ctx.source_id, "project_path": ctx.project_path,
            "source_table": line.rel, "source_rowid": line.lineno}


def build_messages(kept: list[Line], ctx: Context, findings: Findings):
    """Messages (a streamed response reassembled from its lines) and their parts."""
    groups: dict[tuple, list[Line]] = {}
    for ln in kept:
        groups.setdefault((ln.session, response_key(ln) or (ln.rel, ln.lineno)), []).append(ln)
    unknown: set[str] = set()
    said = Findings()  # what the messages of lines read by an earlier run hold: counted, not said again
    messages, parts, index = [], [], Counter()
    for group in sorted(groups.values(), key=lambda g: g[0].order):
        old = all(ln.said for ln in group)
        message, message_parts = message_rows(group, lambda ln: lineage(ctx, ln), said if old else findings,
                                              set() if old else unknown)
        message["message_index"] = index[message["session_id"]]
        index[message["session_id"]] += 1
        messages.append(message)
        parts += message_parts
    if unknown:
        findings.unknown_columns["messages"] = sorted(unknown)
    findings.unknown_part_types.update(said.unknown_part_types)
    findings.reported_part_types.update(said.unknown_part_types)
    return messages, parts


def price_model(model: str) -> str:
    """The price table's id for a Bedrock (`us.anthropic.claude-...-v1:0`, an ARN) or Vertex
    (`claude-...@20250929`) model id."""
    bare = model.rsplit("/", 1)[-1]
    m = _BEDROCK.match(bare)
    return (m.group(1) if m else bare).replace("@", "-")


def llm_provider(model: str | None) -> str | None:
    """Claude models are Anthropic's; another model behind Claude Code names its own provider."""
    return "anthropic" if model and "claude" in model.lower() else None


def buckets(u: dict) -> Buckets:
    """Disjoint buckets: `input_tokens` is uncached input; the cache write is split by TTL
    where `cache_creation` says so, else all of it is a 5-minute write."""
    write = _int(u.get("cache_creation_input_tokens"))
    split = u.get("cache_creation") if isinstance(u.get("cache_creation"), dict) else {}
    write_1h = _int(split.get("ephemeral_1h_input_tokens"))
    write_5m = _int(split.get("ephemeral_5m_input_tokens")) if write is None else max(write - (write_1h or 0), 0)
    return Buckets(_int(u.get("input_tokens")), _int(u.get("cache_read_input_tokens")), write_5m, write_1h,
                   _int(u.get("output_tokens")))


def _web_searches(u: dict) -> int:
    """Server-side web searches are billed per request ($10 per 1,000 for Claude), on top of tokens."""
    tools = u.get("server_tool_use") if isinstance(u.get("server_tool_use"), dict) else {}
    return _int(tools.get("web_search_requests")) or 0


def _request(base: dict, model: str | None, u: dict, native) -> dict:
    b = buckets(u)
    if isinstance(native, (int, float)) and not isinstance(native, bool):
        cost, source, note = float(native), "native", "costUSD recorded by Claude Code"
    else:
        priced_as = price_model(model) if model else None
        context = {"speed": "fast"} if u.get("speed") == "fast" else None
        priced = price_buckets(b, priced_as, llm_provider(priced_as), base["requested_at"], context,
                               web_searches=_web_searches(u))
        cost, source = priced.cost_usd, priced.cost_source
        note = priced.note if priced_as == model else f"{priced.note} (id {model} priced as {priced_as})"
    return {**base, "model": model, "llm_provider": llm_provider(model), **b.columns(),
            "cost_usd": cost, "cost_source": source, "pricing_note": note}


def usage_rows(kept: list[Line], ctx: Context, findings: Findings, final: dict | None = None) -> list[dict]:
    """One row per billed request in the session of its kept copy, dated by its first line, with
    the numbers of its final copy (`final_copies`: any file); plus advisor iterations."""
    groups: dict = {}
    for ln in kept:
        if isinstance(ln.rec["message"].get("usage"), dict):
            groups.setdefault(response_key(ln) or (ln.rel, ln.lineno), []).append(ln)
    rows, synthetic, replaced = [], 0, 0
    for key, group in groups.items():
        best = (final or {}).get(key) or max(
            group, key=lambda ln: (_int(ln.rec["message"]["usage"].get("output_tokens")) or -1, ln.lineno))
        if best.rel != group[0].rel:  # a copy elsewhere with the same numbers: the row keeps its own line
            best = max((ln for ln in group if _same_numbers(ln, best)), key=lambda ln: ln.lineno, default=best)
        replaced += best.rel != group[0].rel and not all(ln.said for ln in group)
        first = min(group, key=lambda ln: ln.order)
        msg, u = best.rec["message"], best.rec["message"]["usage"]
        model = _str(msg.get("model"))
        if model == SYNTHETIC or best.rec.get("isApiErrorMessage") is True:
            synthetic += not all(ln.said for ln in group)
            continue
        base = {**lineage(ctx, best), "session_id": first.session, "message_id": _str(msg.get("id")),
                "request_id": _str(best.rec.get("requestId")), "is_sidechain": first.sidechain,
                "requested_at": min((ln.ts for ln in group if ln.ts), default=None)}
        rows.append(_request(base, model, u, best.rec.get("costUSD")))
        for it in u.get("iterations") if isinstance(u.get("iterations"), list) else ():
            if isinstance(it, dict) and it.get("type") == "advisor_message":
                rows.append(_request(base, _str(it.get("model")), it, None))
    if synthetic:
        findings.notes.append(f"{synthetic} {SYNTHETIC} API-error responses not billed")
    if replaced:
        findings.notes.append(f"{replaced} requests counted from their final copy in another file")
    return rows


def _same_numbers(line: Line, other: Line) -> bool:
    """Two copies of a response whose usage and stop reason are equal (a replay copies them whole)."""
    a, b = line.rec["message"], other.rec["message"]
    return a.get("usage") == b.get("usage") and a.get("stop_reason") == b.get("stop_reason")


def build_sessions(lines: list[Line], kept: list[Line], messages: list[dict], metas: dict) -> dict[str, Session]:
    """Sessions that hold messages, with their times, titles and sub-agent metadata."""
    sessions: dict[str, Session] = {}
    for ln in kept:
        s = sessions.setdefault(ln.session, Session(ln.session, ln.parent, ln))
        s.parent = s.parent or ln.parent
        s.last_ts = max(filter(None, (s.last_ts, ln.ts)), default=None)
        s.first_ts = min(filter(None, (s.first_ts, ln.ts)), default=None)
        s.first = min(s.first, ln, key=lambda x: x.order)
        s.extra.update({k: ln.rec[k] for k in ("version", "gitBranch") if isinstance(ln.rec.get(k), str)})
    titles = {"custom-title": "customTitle", "ai-title": "aiTitle", "summary": "summary"}
    for ln in lines:  # titles have line types of their own
        kind = ln.rec.get("type")
        if kind in titles and ln.session in sessions and isinstance(ln.rec.get(titles[kind]), str):
            sessions[ln.session].titles[kind] = ln.rec[titles[kind]]
    for m in messages:
        s = sessions[m["session_id"]]
        s.messages += 1
        s.summary_id = m["message_id"] if m["is_summary"] else s.summary_id
    for sid, meta in metas.items():  # `agent-<id>.meta.json`: agentType, description, toolUseId
        if sid in sessions:
            sessions[sid].extra.update(meta)
            if isinstance(meta.get("description"), str):
                sessions[sid].titles["meta"] = meta["description"]
    return sessions


def root_of(sid: str, sessions: dict[str, Session]) -> str:
    seen = {sid}
    while sessions[sid].parent in sessions and sessions[sid].parent not in seen:
        sid = sessions[sid].parent
        seen.add(sid)
    return sid


def cost_of(requests: list[dict]) -> tuple[float | None, str]:
    if not requests:  # no billed request (a probe, a <synthetic> reply, an aborted turn): a known $0
        return 0.0, "estimated"
    priced = [r["cost_usd"] for r in requests if r["cost_source"] != "unknown"]
    if not priced:
        return None, "unknown"
    if len(priced) < len(requests):
        return round(sum(priced), 9), "partial"
    native = all(r["cost_source"] == "native" for r in requests)
    return round(sum(priced), 9), "native" if native else "estimated"


def session_rows(sessions: dict[str, Session], usage: list[dict], ctx: Context, findings: Findings,
                 read_now: set[str] | None = None) -> list[dict]:
    """`read_now`: the sessions with lines this run read (None: all); a root made for the others
    was said by the run that read them."""
    for parent in sorted({s.parent for s in sessions.values() if s.parent and s.parent not in sessions}):
        children = [s for s in sessions.values() if s.parent == parent]
        child = min(children, key=lambda s: s.first.order)
        sessions[parent] = Session(parent, None, child.first, child.last_ts)  # a root to hold their cost
        if read_now is None or any(s.session_id in read_now for s in children):
            findings.notes.append(f"session {parent}: only its sub-agents' transcripts exist; a root row holds them")
    own: dict[str, list] = {sid: [] for sid in sessions}
    tree: dict[str, list] = {sid: [] for sid in sessions}
    for r in usage:
        own[r["session_id"]].append(r)
        tree[root_of(r["session_id"], sessions)].append(r)
    rows = []
    for sid, s in sessions.items():
        is_root = s.parent is None
        cost, cost_source = cost_of(tree[sid] if is_root else own[sid])
        mine = sorted(own[sid], key=lambda r: r["requested_at"] or _LAST)
        last = next((r for r in reversed(mine) if r["cost_source"] != "unknown"), mine[-1] if mine else {})
        totals = [r["total_tokens"] for r in mine if r["total_tokens"] is not None]
        rows.append({
            **lineage(ctx, s.first), "session_id": sid, "parent_session_id": s.parent,
            "root_session_id": root_of(sid, sessions), "is_root": is_root,
            "title": next((s.titles[k] for k in TITLE_ORDER if k in s.titles), None),
            "created_at": s.first_ts, "updated_at": s.last_ts, "cost_usd": cost, "cost_source": cost_source,
            "cost_includes_subagents": True, "model": last.get("model"), "llm_provider": last.get("llm_provider"),
            "total_tokens": sum(totals) if totals else None, "message_count": s.messages,
            "summary_message_id": s.summary_id, "extra_columns": compact_json(s.extra) if s.extra else None,
        })
    return rows


def normalise(files: list[FileRead], metas: dict, ctx: Context,
              cached_notes: bool = False, seen: dict | None = None) -> tuple[dict[str, list[dict]], Findings, list]:
    """Rows for every canonical table, the findings, and the message lines kept (to count).
    The notes are those of the lines this run read (an earlier run said the others'), unless
    `cached_notes` (a first landing into a lake: every line's). `seen`: see to_lines."""
    findings = Findings()
    lines = to_lines(files, said_before=not cached_notes, seen=seen)
    skipped = Counter(str(ln.rec.get("type")) for ln in lines if not is_message(ln) and not ln.said)
    if skipped:
        kinds = ", ".join(f"{k}={n}" for k, n in sorted(skipped.items()))
        findings.notes.append(f"non-message lines not stored as messages: {kinds}")
    kept = dedupe(lines, findings)
    messages, parts = build_messages(kept, ctx, findings)
    tool_calls = join_tool_calls(parts)
    strip_private(parts)
    usage = usage_rows(kept, ctx, findings, final_copies(lines))
    sessions = build_sessions(lines, kept, messages, metas)
    read_now = {ln.session for ln in lines if not ln.said}
    rows = {"sessions": session_rows(sessions, usage, ctx, findings, read_now), "messages": messages, "parts": parts,
            "tool_calls": tool_calls, "usage": usage}
    return rows, findings, kept

