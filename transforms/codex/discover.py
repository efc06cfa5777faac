"""Find Codex CLI rollouts: `$CODEX_HOME` (else `~/.codex`), `sessions/**/rollout-*.jsonl` and
`archived_sessions/rollout-*.jsonl` (providers.md §3.1).

One source is one ROOT rollout plus its sub-agent rollouts (`session_meta.source.subagent.
thread_spawn.parent_thread_id`, followed up to the root), because the marts join sub-agents to
their root within one source. Only each file's first line (its `session_meta`) is read here.
The source's identity is the root's session id, so the same rollout under `sessions/` and
`archived_sessions/` is one source (the active copy wins). A fork (`forked_from_id`) is a new
conversation: its own root, with the path of its parent's rollout kept for replay detection.
Only rollout files are opened: never `auth.json` or anything else in the home.
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from transforms import jsontext
from transforms.projects import project_name
from transforms.sources import Discovery, Source, unusable, user_home

PROVIDER = "codex"


@dataclass(frozen=True)
class CodexSource(Source):
    """A root rollout (`path`) and every rollout of its tree, root first."""

    members: tuple[str, ...] = ()
    # (session id, rollout path) of the sessions that members were forked from
    fork_parents: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Head:
    path: str
    session_id: str | None
    parent_id: str | None  # the spawning thread, for a sub-agent
    forked_from: str | None
    cwd: str


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


def rollouts_in(home: Path) -> list[Path]:
    """Active rollouts first, then archived ones: the active copy of a session wins."""
    found = []
    for folder in (home / "sessions", home / "archived_sessions"):
        if folder.is_dir():
            found += sorted(p for p in folder.rglob("rollout-*.jsonl") if p.is_file())
    return found


def parent_thread(source) -> str | None:
    """`{"subagent": {"thread_spawn": {"parent_thread_id": ...}}}`, or any sub-agent kind
    that names a parent thread; None for "cli", "exec", "review" and other roots."""
    sub = source.get("subagent") if isinstance(source, dict) else None
    if isinstance(sub, dict):
        for value in sub.values():
            if isinstance(value, dict) and isinstance(value.get("parent_thread_id"), str):
                return value["parent_thread_id"]
    return None


def read_head(path: Path) -> Head:
    line = jsontext.first_line(path)
    payload = line.get("payload") if isinstance(line, dict) and line.get("type") == "session_meta" else None
    if not isinstance(payload, dict) or not isinstance(payload.get("id"), str) or not payload["id"]:
        return Head(str(path), None, None, None, "")  # extract quarantines it
    forked = payload.get("forked_from_id")
    cwd = payload.get("cwd")
    return Head(str(path), payload["id"], parent_thread(payload.get("source")),
                forked if isinstance(forked, str) and forked else None, cwd if isinstance(cwd, str) else "")


def root_of(head: Head, by_id: Mapping[str, Head]) -> Head:
    seen = set()
    while head.parent_id in by_id and head.session_id not in seen:
        seen.add(head.session_id)
        head = by_id[head.parent_id]
    return head


def group(heads: list[Head], names: Mapping[str, str]) -> list[CodexSource]:
    by_id: dict[str, Head] = {}
    unreadable = []
    for head in heads:
        if head.session_id is None:
            unreadable.append(head)
        else:
            by_id.setdefault(head.session_id, head)  # the first (active) copy wins
    trees: dict[str, list[Head]] = {}
    for head in by_id.values():
        trees.setdefault(root_of(head, by_id).session_id, []).append(head)
    sources = []
    for root_id, members in trees.items():
        root = by_id[root_id]
        members.sort(key=lambda h: (h is not root, h.path))
        parents = {(h.forked_from, by_id[h.forked_from].path) for h in members if h.forked_from in by_id}
        sources.append(_source(root, root_id, tuple(h.path for h in members), tuple(sorted(parents)), names))
    sources += [_source(h, None, (h.path,), (), names) for h in unreadable]
    return sources


def _source(root: Head, identity, members, fork_parents, names) -> CodexSource:
    return CodexSource(provider=PROVIDER, path=root.path, project_path=root.cwd,
                       project=project_name(root.cwd, names), identity=identity, members=members,
                       fork_parents=fork_parents)


def discover(env=os.environ, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found = Discovery()
    homes: list[Path] = []
    if use_default:
        home, problems = codex_home(env)
        found.problems.extend(problems)
        homes += [home] if home else []
    for root in (Path(r).expanduser() for r in extra_roots):  # named explicitly: missing is a problem
        why = unusable(root, "dir")
        if why:
            found.problems.append(f"Codex home {root} {why}")
        elif all(unusable(root / f, "dir") for f in ("sessions", "archived_sessions")):
            found.problems.append(f"no Codex rollouts in {root}: it has no sessions/ or archived_sessions/ folder")
        else:
            homes.append(root)
    files: list[Path] = []
    for home in homes:
        try:
            files += rollouts_in(home)
        except OSError as exc:  # a home we may not read: say so, go on with the others
            found.problems.append(f"cannot list Codex rollouts in {home}: {exc}")
    for store in extra_stores:
        p = Path(store).expanduser()
        if p.is_dir():
            files += sorted(p.rglob("rollout-*.jsonl"))
        elif p.is_file():
            files.append(p)
        else:
            found.problems.append(f"no Codex rollout at {p}")
    unique = list(dict.fromkeys(Path(os.path.realpath(f)) for f in files))
    found.sources = group([read_head(f) for f in unique], project_names or {})
    return found
