"""Find Codex CLI rollouts: `$CODEX_HOME` (else `~/.codex`), `sessions/**/rollout-*.jsonl` and
`archived_sessions/rollout-*.jsonl` (docs/FORMATS.md, "Codex: location").

One source is one ROOT rollout plus its sub-agent rollouts (`session_meta.source.subagent.
thread_spawn.parent_thread_id`, followed up to the root), because the marts join sub-agents to
their root within one source. Only each file's first line (its `session_meta`) is read here.
The source's identity is the root's session id, so the same rollout under `sessions/` and
`archived_sessions/` is one source (the active copy wins), and of two copies in one of them (a
sync tool's `... (1).jsonl`, a backup home) the larger is read: a stale copy is a prefix of the
session. A copy of another size is named in the source's warnings, not read. A fork (`forked_from_id`) is a new
conversation: its own root, with the path of its parent's rollout kept for replay detection.
Only rollout files are opened: never `auth.json` or anything else in the home.

A rollout whose first line is not a session_meta (emptied, truncated, garbage) still names its
session: Codex writes `rollout-<local time>-<session id>.jsonl`. By that id it is
- an unreadable copy of a session read from another file (Codex Desktop leaves empty
  `... (1).jsonl` copies): a member of that session's tree, quarantined there and named;
- the parent of sub-agents read: a member of their tree, in its place (its own session_meta,
  cwd included, is taken from a sub-agent's replayed copy of it, else it is the tree's root
  in the sub-agent's cwd), so the tree keeps its source and its project; extract then fails
  that tree, whose rows the lake keeps (a sub-agent's cost is inside the parent's row there;
  read as roots they would be counted twice);
- else, when empty (Codex recorded nothing in it: a crash as it started), a member of the tree
  whose rollout's name comes just before its own (the session started before it, else the
  first): nothing to land, but it is named in that source's warnings and counted in its
  quarantine, and no source is made of a file that holds no session (alone in a home, it is a
  skipped source, naming it);
- else, with bytes, a source of its own, quarantined whole (its project cannot be read from it).
The last two keep the path as identity: taking the session id would make a source the lake knows
(the session's tree) look moved, and its rows dropped.

A parent whose rollout is gone from the disk (deleted, a date folder pruned) keeps its
sub-agents' tree too, named from their copy of its session_meta (`CodexSource.gone`): the source
the lake holds it in, whose rows of it stay; the extract keeps them its sub-agents when the lake
holds it, else they are roots.
"""

import bisect
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from transforms import jsontext
from transforms.projects import project_name
from transforms.sources import (
    Discovery, Source, files_under, listing_problem, named_homes, named_stores, source_id_for, user_home,
    with_folder)

PROVIDER = "codex"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ("CODEX_HOME",)


@dataclass(frozen=True)
class CodexSource(Source):
    """A root rollout (`path`) and every rollout of its tree, root first."""

    members: tuple[str, ...] = ()
    # (session id, rollout path) of the sessions that members were forked from
    fork_parents: tuple[tuple[str, str], ...] = ()
    # members that hold none of the tree's sessions (an unreadable copy of one read from another
    # member, an empty rollout reported with it): quarantined and named, never failing the tree
    # (any other member that cannot be read does)
    extras: tuple[str, ...] = ()
    # other copies of the tree's sessions, of another size than the one read: named, not read
    copies: tuple[str, ...] = ()
    # the tree's sessions whose rollout is gone from the disk (parents of sub-agents read): their
    # rows, landed before, stay in the lake, and their sub-agents stay theirs
    gone: tuple[str, ...] = ()
    # (session, its parent) of those that were sub-agents themselves: their sub-agents' cost is
    # their tree root's still
    gone_parents: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Head:
    path: str
    session_id: str | None
    parent_id: str | None  # the spawning thread, for a sub-agent
    forked_from: str | None
    cwd: str
    empty: bool = False  # no byte but blanks: Codex recorded nothing in it


def codex_home(env) -> tuple[Path | None, list[str]]:
    explicit = env.get("CODEX_HOME")
    if explicit:
        home = Path(explicit).expanduser()
        if not home.is_absolute():  # Codex resolves it against its own working directory
            return None, [f"CODEX_HOME={explicit!r} is relative: cannot tell what Codex resolved it to"]
        if not home.is_dir():  # Codex refuses to start then: nothing was recorded there
            return None, [f"CODEX_HOME={explicit!r} is not a directory"]
        return home, []
    return user_home(env) / ".codex", []


def rollouts_in(home: Path, errors: list) -> list[Path]:
    """Active rollouts first, then archived ones: the active copy of a session wins. Folders
    that cannot be listed go to `errors`."""
    found = []
    for folder in (home / "sessions", home / "archived_sessions"):
        if folder.is_dir():
            found += files_under(folder, _is_rollout, errors)
    return found


def _is_rollout(name: str) -> bool:
    return name.startswith("rollout-") and name.endswith(".jsonl")


def parent_thread(source) -> str | None:
    """`{"subagent": {"thread_spawn": {"parent_thread_id": ...}}}`, or any sub-agent kind
    that names a parent thread; None for "cli", "exec", "review" and other roots."""
    sub = source.get("subagent") if isinstance(source, dict) else None
    if isinstance(sub, dict):
        for value in sub.values():
            if isinstance(value, dict) and isinstance(value.get("parent_thread_id"), str):
                return value["parent_thread_id"]
    return None


_SESSION_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def id_in_name(path: str) -> str | None:
    """The session id in a rollout's file name (the last one: `rollout-<time>-<id> (1).jsonl`)."""
    found = _SESSION_ID.findall(Path(path).name)
    return found[-1].lower() if found else None


def _meta_head(path: str, line) -> Head | None:
    payload = line.get("payload") if isinstance(line, dict) and line.get("type") == "session_meta" else None
    if not isinstance(payload, dict) or not isinstance(payload.get("id"), str) or not payload["id"]:
        return None
    forked = payload.get("forked_from_id")
    cwd = payload.get("cwd")
    return Head(path, payload["id"], parent_thread(payload.get("source")),
                forked if isinstance(forked, str) and forked else None, cwd if isinstance(cwd, str) else "")


def _blank(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return not fh.read(4096).strip()
    except OSError:  # not readable: extract says why
        return False


def read_head(path: Path) -> Head:
    head = _meta_head(str(path), jsontext.first_line(path))
    return head or Head(str(path), None, None, None, "", empty=_blank(path))  # see group


def _second_line(path: str):
    """The decoded second line of a rollout (a sub-agent's replayed copy of its parent's
    session_meta), or None."""
    try:
        with open(path, "rb") as fh:
            fh.readline(jsontext.FIRST_LINE_CAP)
            return jsontext.loads(fh.readline(jsontext.FIRST_LINE_CAP).decode("utf-8", "replace"))
    except (OSError, ValueError, RecursionError):
        return None


def _stand_in(head: Head, sid: str, children: list[Head]) -> Head:
    """An unreadable parent rollout's head, from its sub-agents' replayed copy of its session_meta
    when one holds it, else a root in its first sub-agent's cwd."""
    children = sorted(children, key=lambda h: h.path)
    for child in children:
        copy = _meta_head(head.path, _second_line(child.path))
        if copy is not None and copy.session_id == sid:
            return copy
    return Head(head.path, sid, None, None, children[0].cwd)


def root_of(head: Head, by_id: Mapping[str, Head]) -> Head:
    seen = set()
    while head.parent_id in by_id and head.session_id not in seen:
        seen.add(head.session_id)
        head = by_id[head.parent_id]
    return head


def group(heads: list[Head], names: Mapping[str, str]) -> list[CodexSource]:
    by_id: dict[str, Head] = {}
    unreadable = []
    copies: dict[str, list[str]] = {}  # session id -> its other copies, of another size: not read
    for head in heads:
        if head.session_id is None:
            unreadable.append(head)
        elif head.session_id not in by_id:
            by_id[head.session_id] = head
        else:
            kept = by_id[head.session_id]
            if _fuller(head, kept):
                by_id[head.session_id], head = head, kept
            if _size(head.path) != _size(by_id[head.session_id].path):
                copies.setdefault(head.session_id, []).append(head.path)
    readable = frozenset(by_id)
    extras: dict[str, list[str]] = {}  # session id -> the extra members reported with it
    placed = True
    while placed:  # a stand-in parent may be the child that places its own parent
        placed = False
        for head in list(unreadable):
            sid = id_in_name(head.path)
            children = [h for h in by_id.values() if sid is not None and h.parent_id == sid]
            if sid in by_id:
                extras.setdefault(sid, []).append(head.path)
            elif children:
                by_id[sid] = _stand_in(head, sid, children)
            else:
                continue
            unreadable.remove(head)
            placed = True
    # a parent whose rollout is gone (deleted, a date folder pruned) keeps its sub-agents' tree:
    # the source the lake holds it in, named by its session's copy in theirs
    gone: dict[str, str | None] = {}  # session -> its parent, from the stand-in
    for head in list(by_id.values()):
        missing = head.parent_id
        while missing is not None and missing not in by_id:
            children = [h for h in by_id.values() if h.parent_id == missing]
            by_id[missing] = stand_in = _stand_in(Head(children[0].path, missing, None, None, ""), missing, children)
            gone[missing] = stand_in.parent_id
            missing = stand_in.parent_id
    by_name = sorted((Path(by_id[sid].path).name, sid) for sid in readable)
    for head in [h for h in unreadable if h.empty and by_name]:  # see the module's docstring
        before = bisect.bisect_left(by_name, (Path(head.path).name,))
        extras.setdefault(by_name[max(before - 1, 0)][1], []).append(head.path)
        unreadable.remove(head)
    trees: dict[str, list[Head]] = {}
    for head in by_id.values():
        trees.setdefault(root_of(head, by_id).session_id, []).append(head)
    sources = []
    for root_id, members in trees.items():
        root = by_id[root_id]
        members.sort(key=lambda h: (h is not root, h.path))
        parents = {(h.forked_from, by_id[h.forked_from].path) for h in members
                   if h.forked_from in by_id and h.forked_from in readable}
        more = tuple(path for h in members for path in extras.get(h.session_id, ()))
        missing = tuple(sorted(h.session_id for h in members if h.session_id in gone))
        above = tuple((sid, gone[sid]) for sid in missing if gone[sid] is not None)
        # a sub-agent of a gone parent was a tree of its own before (releases before this one, or
        # a parent gone before its first landing): that source's sessions move here, not stay twice
        orphans = tuple(source_id_for(PROVIDER, h.session_id) for h in members
                        if h.parent_id in gone and h.session_id not in gone)
        own = tuple(dict.fromkeys(h.path for h in members if h.session_id not in gone))  # a stand-in has no file
        sources.append(_source(root, root_id, own + more, tuple(sorted(parents)),
                               names, extras=more, gone=missing, gone_parents=above, orphans=orphans,
                               copies=tuple(path for h in members for path in copies.get(h.session_id, ()))))
    for head in unreadable:  # the path is the identity: see the module's docstring
        why = f"empty Codex rollout {head.path}: Codex recorded nothing in it, not even its session_meta; not read"
        sources.append(_source(head, None, (head.path,), (), names, skip_reason=why if head.empty else None))
    return sources


def _source(root: Head, identity, members, fork_parents, names, extras=(), copies=(), skip_reason=None,
            gone=(), gone_parents=(), orphans=()) -> CodexSource:
    # a tree keyed by its root's session id: each of its rollouts had its path as id while its
    # first line could not be read (the last case of the module's docstring), there or where
    # Codex kept it before archiving it
    formerly = tuple(source_id_for(PROVIDER, p) for path in members for p in (path, _other_place(path))
                     if p) + orphans if identity is not None else ()
    return CodexSource(provider=PROVIDER, path=root.path, project_path=root.cwd,
                       project=project_name(root.cwd, names), identity=identity, members=members,
                       fork_parents=fork_parents, extras=extras, copies=copies, skip_reason=skip_reason,
                       formerly=formerly, gone=gone, gone_parents=gone_parents)


def _other_place(path: str) -> str | None:
    """Where Codex keeps the rollout before or after archiving it: `sessions/YYYY/MM/DD/<name>`
    (its local day, as in its name) and `archived_sessions/<name>` in the same home."""
    p = Path(path)
    if p.parent.name == "archived_sessions":
        day = re.match(r"rollout-(\d{4})-(\d{2})-(\d{2})T", p.name)
        return str(p.parent.parent / "sessions" / day[1] / day[2] / day[3] / p.name) if day else None
    if len(p.parents) > 4 and p.parents[3].name == "sessions":
        return str(p.parents[4] / "archived_sessions" / p.name)
    return None


def _archived(head: Head) -> bool:
    return Path(head.path).parent.name == "archived_sessions"


def _fuller(head: Head, kept: Head) -> bool:
    """`head` is the copy to read instead of `kept`: an active copy before an archived one, then
    the larger (Codex only appends: a stale or conflict copy holds less of the session)."""
    return (not _archived(head), _size(head.path)) > (not _archived(kept), _size(kept.path))


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def discover(env=os.environ, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found = Discovery()
    homes: list[Path] = []
    if use_default:
        home, problems = codex_home(env)
        found.problems.extend(problems)
        homes += [home] if home else []
    homes += named_homes(extra_roots, found.problems, home="Codex home", holds="Codex rollouts",
                         find=lambda root: with_folder(root, "sessions", "archived_sessions"),
                         lacking="it has no sessions/ or archived_sessions/ folder")
    files: list[Path] = []
    errors: list[OSError] = []  # a folder we may not read: say so, go on with the others
    for home in homes:
        files += rollouts_in(home, errors)
    files += named_stores(extra_stores, found.problems, "Codex rollout",
                          lambda folder: files_under(folder, _is_rollout, errors))
    found.problems += list(dict.fromkeys(listing_problem(exc, "Codex rollouts") for exc in errors))  # a home named twice
    unique = list(dict.fromkeys(Path(os.path.realpath(f)) for f in files))
    found.sources = group([read_head(f) for f in unique], project_names or {})
    return found
