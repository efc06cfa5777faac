"""Codex CLI behind the provider interface. A source is a root rollout with its sub-agent
rollouts (transforms.codex.discover); each rollout is one session.

Replayed history: a fork or a sub-agent rollout starts with a copy of its parent's rollout
(written in one burst right after the child's own session_meta, the parent's session_meta
first). Where the parent's rollout is found, the replay is exactly the longest run of lines
equal (type and payload) to the parent's first lines; else, when the second line is another
session's session_meta, it is that line and the lines written within one second of it (the
burst; ccusage's rule). Replayed lines give no rows (docs/FORMATS.md,
"Codex: replayed history, forks and sub-agents").

Sessions: a root's cost includes its sub-agents' (`cost_includes_subagents`); a sub-agent's
row holds its own. `cost_source` is `estimated` when every request is priced, `partial` when
some are not, `unknown` when none is (or there is no request); Codex records no cost. The
review model `codex-auto-review` is in no price table: its requests stay unknown (ccusage maps
it to a real model by date; we do not guess). A fork's `inherited_cost_usd` is the price of
the requests in its replayed history. Codex records no title (null). The session_meta fields
without a column go to `extra_columns`, except the instructions text (`instructions`,
`base_instructions`: the same 20-27 KB in every session).

Unreadable rollouts (transforms.codex.discover places them): a tree with one of its sessions'
rollouts unreadable fails whole (a SourceError: its project's bundle quarantines it, names it,
and keeps its rows in the lake as they were); an extra member is quarantined and named.
"""

from datetime import datetime, timedelta
from pathlib import Path

from transforms import jsontext
from transforms.codex import discover as codex_discover
from transforms.codex.discover import PROVIDER, parent_thread
from transforms.codex.normalise import Context, Line, Rollout, Walker
from transforms.contract import TRANSCRIPT_TABLES
from transforms.costs import summarise_costs
from transforms.findings import Findings, bad_line
from transforms.provider import AgentProvider, Extract, SourceError, read_file
from transforms.sources import Source, members
from transforms.timestamps import from_iso
from transforms.tools import compact_json

BURST = timedelta(seconds=1)
META_COLUMNS = {"id", "timestamp", "cwd", "model_provider", "forked_from_id", "instructions", "base_instructions"}


class CodexProvider(AgentProvider):
    name = PROVIDER
    discovery = codex_discover

    # `landed()`: the sessions the lake holds of the source, with their cost (warehouse.land.ingest);
    # the tree's sessions whose rollout is gone (CodexSource.gone) and are among them keep their
    # sub-agents, which are not roots counted twice, and a gone sub-agent's cost stays its root's
    takes_landed = True

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None,
                landed=None) -> Extract:
        findings = Findings()
        gone = set(getattr(source, "gone", ()))
        held = landed() if gone and landed is not None else {}
        kept_gone = {sid: held[sid].cost_usd for sid in gone if sid in held}
        rows: dict[str, list[dict]] = {t: [] for t in TRANSCRIPT_TABLES}
        # Codex only appends to a rollout: one read of each file is a consistent prefix
        extras = set(getattr(source, "extras", ()))
        rollouts, unread = [], []
        for path in members(source):
            bad = []
            try:
                rollout = read_rollout(path, source, run_at, bad)
            except SourceError as exc:  # an extra that cannot be opened is named, never fails the tree
                if path not in extras:
                    raise
                rollout, bad = None, [_quarantine(source, path, 0, str(exc), "", run_at)]
            if rollout and path in extras:  # none of the tree's sessions: written since it was found
                findings.notes.append(f"{path}: written since it was found unreadable: read on the next run")
                continue
            rows["quarantine"] += bad
            rollouts += [rollout] if rollout else []
            unread += [] if rollout else [path]
        lost = [path for path in unread if path not in extras]
        if lost and source.identity is not None:
            # a session of the tree, a parent of sub-agents read (transforms.codex.discover): read
            # without it, they would be roots whose cost the lake's row of it already holds
            where = "" if lost == [source.path] else f"{', '.join(lost)}: "  # the bundle names the root
            tree = len(members(source)) - len(extras)
            raise SourceError(f"{where}{unread_reason(lost[0])}; its session tree ({tree} rollouts, with sub-agents) "
                              "is not read until it changes: the lake keeps what it holds of it")
        read = {r.meta["id"] for r in rollouts}
        for path in getattr(source, "copies", ()):
            findings.notes.append(f"{path}: another copy of a session read from another file, of another size: "
                                  "not read (the active copy is read, else the larger)")
        for path in unread:
            findings.notes.append(f"{path}: {unread_reason(path)} ({_unread_what(path, path in extras, read)}): "
                                  "quarantined")
        kept = walk_all(rollouts, source, run_at, rows["quarantine"], findings, kept_gone)
        rows["sessions"] = session_rows([r for r, _ in kept], [s for _, s in kept], source, findings, kept_gone)
        for _, session in kept:
            for table, table_rows in session.rows.items():
                rows[table].extend(table_rows)
        expected = {"sessions": len(rollouts), "parts": sum(expected_parts(r) for r in rollouts)}
        return Extract(rows=rows, findings=findings, expected=expected)


def walk_all(rollouts: list[Rollout], source: Source, run_at, quarantine: list, findings: Findings,
             kept_gone=()) -> list:
    """(rollout, Session) for each rollout, replays found first; a rollout that cannot be
    normalised is quarantined whole (its rows counted as diverted). `kept_gone`: parents whose
    rollout is gone and whose rows the lake keeps."""
    by_id = {r.meta["id"]: r for r in rollouts}
    forks = dict(getattr(source, "fork_parents", ()))
    kept = []
    for r in rollouts:
        r.replay_end, how = replay_end(r, _replayed_parent(r, by_id, forks, source, run_at))
        if r.replay_end > 1:  # routine: one line for all alike (the bundle counts them), not one each
            findings.notes.append(f"a sub-agent's or fork's copy of its parent's lines skipped ({how})")
        try:
            kept.append((r, _walk(r, source, by_id.keys() | kept_gone, findings)))
        except Exception as exc:  # a value of a shape no Codex writes: the file is kept whole
            text = Path(r.path).read_bytes().decode("utf-8", "replace")
            quarantine.append(_quarantine(source, r.path, 0, f"{type(exc).__name__}: {exc}"[:300], text, run_at))
            findings.diverted.update(sessions=1, parts=expected_parts(r))
    return kept


def parse_lines(data: bytes) -> tuple[list[Line], list[tuple[int, str, str]]]:
    """Parsed lines, and the (line number, text, reason) of the lines that are not rollout lines."""
    objs, bad = jsontext.typed_lines(data, "a rollout line")
    return [Line(no, from_iso(o.get("timestamp")), o["type"], o.get("payload")) for no, o in objs], bad


def read_rollout(path: str, source: Source, run_at: datetime, quarantine: list[dict]) -> Rollout | None:
    data = read_file(path)
    lines, bad = parse_lines(data)
    first = lines[0] if lines else None
    if first is None or first.no != 0 or first.type != "session_meta" or not isinstance(first.payload, dict) \
            or not isinstance(first.payload.get("id"), str):
        quarantine.append(_quarantine(source, path, 0, _malformed(data), data.decode("utf-8", "replace"), run_at))
        return None
    for no, text, reason in bad:  # the rest of the file is still read
        quarantine.append(_quarantine(source, path, no, reason, text, run_at))
    return Rollout(path, lines)


def _unread_what(path: str, extra: bool, read: set) -> str:
    if not extra:
        return "its project cannot be read from it"
    sid = codex_discover.id_in_name(path)
    if sid in read:
        return f"a copy of session {sid}, read from another file"
    return "which project it was is unknown: reported with the session started before it"


def _malformed(data: bytes) -> str:
    if not data.strip():
        return "empty rollout: Codex recorded nothing in it, not even its session_meta"
    if _first_format(data):
        return ("a rollout of Codex's first format (an {id, timestamp, instructions} header, before "
                "session_meta and token counts, 2025): not read, kept whole in quarantine")
    return "malformed rollout: no session_meta on the first line"


def _first_format(data: bytes) -> bool:
    """Codex's rollouts before session_meta: a header line {"id", "timestamp", "instructions"?,
    "git"?} with no `type`, then `{"record_type": "state"}` and bare response items. They record
    no token counts, so no cost could be read from them: said as that, not as malformed."""
    try:
        head = jsontext.loads(data.split(b"\n", 1)[0].decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return False
    return isinstance(head, dict) and "type" not in head and isinstance(head.get("id"), str) \
        and "timestamp" in head


def unread_reason(path: str) -> str:
    """Why a member gave no rollout: read_rollout's reason (read again: it is only asked for the
    rare file that could not be read)."""
    try:
        return _malformed(Path(path).read_bytes())
    except OSError as exc:
        return f"cannot read it: {exc}"


def _quarantine(source: Source, path: str, no: int, error: str, raw: str, run_at: datetime) -> dict:
    return bad_line(PROVIDER, source, "rollout", path, no, error, raw, run_at)


def _replayed_parent(r: Rollout, by_id: dict, forks: dict, source: Source, run_at) -> Rollout | None:
    parent_id = parent_thread(r.meta.get("source")) or r.meta.get("forked_from_id")
    if not isinstance(parent_id, str):
        return None
    if parent_id in by_id:
        return by_id[parent_id]
    if parent_id in forks:  # a fork's parent lives in another source: read it, never keep its rows
        try:
            return read_rollout(forks[parent_id], source, run_at, [])
        except SourceError:
            return None
    return None


def _same(a: Line, b: Line) -> bool:
    return a.type == b.type and a.payload == b.payload


def _prefix(child: list[Line], parent: list[Line]) -> int:
    n = 0
    while n < len(child) and n < len(parent) and _same(child[n], parent[n]):
        n += 1
    return n


def replay_end(r: Rollout, parent: Rollout | None) -> tuple[int, str]:
    """Index in `r.lines` of the session's first own line (1: nothing replayed), and how it was found."""
    lines = r.lines
    if parent is not None:
        copied = _prefix(lines[1:], parent.lines) or _prefix(lines[1:], parent.lines[1:])
        if copied:
            return 1 + copied, "matched the parent's rollout"
    second = lines[1] if len(lines) > 1 else None
    if second is None or second.type != "session_meta" or not isinstance(second.payload, dict) \
            or second.payload.get("id") == r.meta["id"] or second.at is None:
        return 1, "no replay"
    end = 2
    while end < len(lines) and lines[end].at is not None and lines[end].at - second.at < BURST:
        end += 1
    return end, "the parent's rollout was not found: the first second's burst"


def _text(meta: dict, key: str, default: str) -> str:
    value = meta.get(key)
    return value if isinstance(value, str) and value else default


def _walk(r: Rollout, source: Source, parents, findings: Findings):
    """`parents`: the sessions a sub-agent's rows are its parent's in (read, or kept in the lake)."""
    meta = r.meta
    ctx = Context(source.source_id, meta["id"], _text(meta, "cwd", ""), _text(meta, "model_provider", "openai"),
                  is_sidechain=parent_thread(meta.get("source")) in parents,
                  price_replay=isinstance(meta.get("forked_from_id"), str))
    return Walker(r, ctx, findings).run()


def tree_costs(sid: str, costs: dict[str, list], children: dict[str, list[str]]) -> list:
    """The request costs of a session and of every sub-agent below it."""
    out, todo, seen = [], [sid], set()
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            out += costs.get(current, [])
            todo += children.get(current, [])
    return out


def session_rows(rollouts: list[Rollout], sessions: list, source: Source, findings: Findings,
                 kept_gone: dict | None = None) -> list:
    """One row per session. A sub-agent whose parent's rollout is gone is still its sub-agent when
    the lake keeps the parent's rows (`kept_gone`: id -> its row's cost), whose root cost holds its
    cost; else it is a root, said. A gone sub-agent's cost, as the lake holds it, stays in its
    root's."""
    kept_gone = kept_gone or {}
    by_id = {r.meta["id"] for r in rollouts}
    costs = {r.meta["id"]: s.costs for r, s in zip(rollouts, sessions)}
    costs.update({sid: [cost] for sid, cost in kept_gone.items() if sid not in costs})
    children: dict[str, list[str]] = {}
    for r in rollouts:
        children.setdefault(parent_thread(r.meta.get("source")), []).append(r.meta["id"])
    for sid, parent in getattr(source, "gone_parents", ()):  # a gone middle the lake holds keeps its
        if sid in kept_gone:  # sub-agents in its root's tree (else they are roots of their own)
            children.setdefault(parent, []).append(sid)
    out = []
    for r, s in zip(rollouts, sessions):
        meta = r.meta
        sid = meta["id"]
        parent = parent_thread(meta.get("source"))
        adopted = parent in kept_gone and parent not in by_id
        is_root = sid == source.identity or (parent not in by_id and not adopted)
        if is_root and parent:
            findings.notes.append(f"{sid}: sub-agent of {parent}, whose rollout was not found: kept as a root")
        if adopted:
            findings.notes.append(f"{sid}: sub-agent of {parent}, whose rollout is gone: still its sub-agent (the "
                                  f"lake keeps {parent}'s rows, and its cost in their root's)")
        cost, cost_source = summarise_costs(tree_costs(sid, costs, children) if is_root else s.costs)
        priced_inherited = [c for c in s.inherited if c is not None]
        totals = [u["total_tokens"] for u in s.rows["usage"] if u["total_tokens"] is not None]
        times = [line.at for line in r.lines if line.at is not None]
        extra = {k: v for k, v in meta.items() if k not in META_COLUMNS}
        forked = meta.get("forked_from_id") if isinstance(meta.get("forked_from_id"), str) else None
        out.append({
            "provider": PROVIDER, "source_id": source.source_id, "project_path": _text(meta, "cwd", ""),
            "source_table": "session_meta", "source_rowid": 0, "session_id": sid,
            "parent_session_id": None if is_root else parent,
            "root_session_id": sid if is_root else source.identity or sid,
            "is_root": is_root, "title": None,
            "created_at": from_iso(meta.get("timestamp")) or r.lines[0].at,
            "updated_at": max(times) if times else None, "cost_usd": cost, "cost_source": cost_source,
            "cost_includes_subagents": is_root, "forked_from_session_id": forked,
            "inherited_cost_usd": round(sum(priced_inherited), 9) if forked and priced_inherited else None,
            "model": s.model, "llm_provider": _text(meta, "model_provider", "openai"),
            "total_tokens": sum(totals) if totals else None, "message_count": len(s.rows["messages"]),
            "extra_columns": compact_json(extra) if extra else None,
        })
    return out


def expected_parts(r: Rollout) -> int:
    """Parts the rollout's own lines hold, counted on the lines themselves."""
    n = 0
    for line in r.lines[r.replay_end:]:
        p = line.payload if isinstance(line.payload, dict) else {}
        if line.type == "compacted":
            n += 1
        elif line.type == "response_item":
            content = p.get("content")
            n += len(content) if p.get("type") == "message" and isinstance(content, list) else 1
    return n

