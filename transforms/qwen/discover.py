"""Find Qwen Code chat recordings (QwenLM/qwen-code, packages/core/src/config/storage.ts and
services/chatRecordingService.ts).

Where: the runtime base dir `$QWEN_RUNTIME_DIR`, else the Qwen home `$QWEN_HOME`, else `~/.qwen`
(HOME, then USERPROFILE on Windows); `~` is expanded as Qwen does, a relative value (resolved by
Qwen against its own working directory) is reported, not guessed. Both the runtime dir and the
home are searched when they differ (older releases wrote under the home only). A `runtimeOutputDir`
set in settings.json is not followed: settings.json may hold API keys and is never opened (name it
with `--agent-home qwen=DIR`). Chats: `projects/<cwd with every non-alphanumeric as '-'>/chats/
<session id>.jsonl`, one record per line.

A source is one root session with its sub-sessions (a `parent_session` system record names the
spawning session; it is written near the start, so only each file's head is read here), keyed by
the root's session id. A `/branch` fork is its own root.
"""

import os
import re
from dataclasses import dataclass
from pathlib import Path

from transforms import jsontext
from transforms.projects import project_name
from transforms.sources import Discovery, Source, named_homes, named_stores, user_home, with_folder

PROVIDER = "qwen"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ("QWEN_HOME", "QWEN_RUNTIME_DIR")
HEAD_CAP = 1 << 16
_PARENT = re.compile(r'"parentSessionId"\s*:\s*"([^"\\]+)"')


@dataclass(frozen=True)
class QwenSource(Source):
    members: tuple[str, ...] = ()  # the root's file first, then its sub-sessions'


@dataclass(frozen=True)
class Head:
    path: str
    session_id: str | None
    parent_id: str | None
    cwd: str


def _resolved(value: str, env) -> tuple[Path | None, str | None]:
    if value == "~" or value.startswith(("~/", "~\\")):
        return user_home(env).joinpath(*[p for p in re.split(r"[/\\]+", value[2:]) if p]), None
    path = Path(value)
    if path.is_absolute():
        return path, None
    return None, f"{value!r} is relative: cannot tell what Qwen resolved it to"


def qwen_dirs(env) -> tuple[list[Path], list[str]]:
    """The runtime base dir, then the Qwen home, as Qwen resolves them (duplicates removed)."""
    dirs, problems = [], []
    for var in ("QWEN_RUNTIME_DIR", "QWEN_HOME"):
        if env.get(var):
            path, why = _resolved(env[var], env)
            dirs += [path] if path else []
            problems += [f"{var}={why}"] if why else []
    if not env.get("QWEN_HOME"):
        dirs.append(user_home(env) / ".qwen")
    return list(dict.fromkeys(dirs)), problems


def chat_files(base: Path) -> list[Path]:
    projects = base / "projects"
    return sorted(p for p in projects.glob("*/chats/*.jsonl") if p.is_file()) if projects.is_dir() else []


def read_head(path: Path) -> Head:
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEAD_CAP).decode("utf-8", "replace")
    except OSError:
        head = ""
    sid, cwd = None, ""
    for no, _, rec, _ in jsontext.json_lines(head):
        if no >= 50:
            break
        if isinstance(rec, dict) and isinstance(rec.get("sessionId"), str):
            sid = sid or rec["sessionId"]
            cwd = cwd or (rec.get("cwd") if isinstance(rec.get("cwd"), str) else "")
    parent = _PARENT.search(head) if '"parent_session"' in head else None
    return Head(str(path), sid or path.stem or None, parent.group(1) if parent else None, cwd)


def group(heads: list[Head], names) -> list[QwenSource]:
    by_id: dict[str, Head] = {}
    for h in heads:
        by_id.setdefault(h.session_id, h)  # the first base dir's copy wins

    def root_of(h: Head) -> Head:
        seen = set()
        while h.parent_id in by_id and h.session_id not in seen:
            seen.add(h.session_id)
            h = by_id[h.parent_id]
        return h

    trees: dict[str, list[Head]] = {}
    for h in by_id.values():
        trees.setdefault(root_of(h).session_id, []).append(h)
    sources = []
    for root_id, members in trees.items():
        root = by_id[root_id]
        members.sort(key=lambda h: (h is not root, h.path))
        sources.append(QwenSource(provider=PROVIDER, path=root.path, project_path=root.cwd,
                                  project=project_name(root.cwd, names), identity=root_id,
                                  members=tuple(h.path for h in members)))
    return sources


def discover(env=os.environ, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found = Discovery()
    bases: list[Path] = []
    if use_default:
        dirs, problems = qwen_dirs(env)
        found.problems.extend(problems)
        bases += dirs
    bases += named_homes(extra_roots, found.problems, home="Qwen Code dir", holds="Qwen Code chats",
                         find=lambda root: with_folder(root, "projects"), lacking="it has no projects/ folder")
    files: list[Path] = []
    for base in dict.fromkeys(bases):
        try:
            files += chat_files(base)
        except OSError as exc:
            found.problems.append(f"cannot list Qwen Code chats in {base}: {exc}")
    files += named_stores(extra_stores, found.problems, "Qwen Code chat file")
    unique = list(dict.fromkeys(Path(os.path.realpath(f)) for f in files))
    found.sources = group([read_head(f) for f in unique], project_names or {})
    return found
