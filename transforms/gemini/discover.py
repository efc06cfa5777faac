"""Find Gemini CLI chat recordings (packages/core/src/services/chatRecordingService.ts).

Where: `$GEMINI_CLI_HOME/.gemini` when set (Gemini's `homedir()` in utils/paths.ts replaces the
user's home with it), else `~/.gemini` (HOME, then USERPROFILE on Windows: the same on Linux,
macOS and Windows). Chats are under `tmp/<project>/chats/`:
- `session-<YYYY-MM-DDTHH-MM>-<first 8 of the session id>.jsonl` (current), `.json` (before the
  JSONL recorder: one whole ConversationRecord, rewritten on every update);
- `<parent session id>/<agent id>.jsonl` (`.json`, a whole record, in 0.37-0.38): a sub-agent's
  chat (`kind: "subagent"`; before 0.37 a sub-agent wrote a `session-*.json` like a main chat);
- `skill-extraction-<8 hex>/<agent id>.json(l)` (0.38+): the background memory service's skill
  extraction, a sub-agent whose folder is named after the service's prompt id, not a session:
  no parent, so it is a root of its own (`group`: a sub-agent chat without its parent's).
`<project>` is a slug from `projects.json` (ProjectRegistry, with a `.project_root` marker file
holding the project's path) or, before the registry, the SHA-256 of the project root. The
migration to slugs COPIES the hash folder (storageMigration.ts, `fs.cp`), and resuming a `.json`
chat writes a new `.jsonl` beside it: the same session may sit in several files. A source is one
session id (`Source.identity`) with every file that holds it and its sub-agents' chats, so
copies are read together and counted once.

Only each file's head is read here. Never opened: `oauth_creds.json`, `google_accounts.json`,
`mcp-oauth-tokens.json`, `settings.json` and anything else outside `tmp/*/chats/`, except
`projects.json` and `.project_root` (project paths).
"""

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from transforms import jsontext
from transforms.projects import project_name
from transforms.sources import Discovery, Source, named_homes, named_stores, regular_files, unusable, user_home

PROVIDER = "gemini"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ("GEMINI_CLI_HOME",)
HEAD_CAP = 1 << 16  # the metadata line (or the legacy record's first keys) is far smaller
_KEY = {k: re.compile(rf'"{k}"\s*:\s*"((?:[^"\\]|\\.)*)"') for k in ("sessionId", "projectHash", "kind")}


@dataclass(frozen=True)
class GeminiSource(Source):
    """A session's files (`members`: copies of the main chat first, then sub-agent chats)."""

    members: tuple[str, ...] = ()


@dataclass(frozen=True)
class Head:
    path: str
    session_id: str | None
    parent_id: str | None  # a sub-agent chat: its folder's name
    project_dir: str  # the `tmp/<project>` folder


def gemini_home(env) -> Path:
    explicit = env.get("GEMINI_CLI_HOME")
    return (Path(explicit).expanduser() if explicit else user_home(env)) / ".gemini"


def home_dir(root: Path) -> Path | None:
    """A Gemini home given as `~/.gemini` (with `tmp/`) or as a `GEMINI_CLI_HOME` (with `.gemini/tmp/`)."""
    for candidate in (root, root / ".gemini"):
        if not unusable(candidate / "tmp", "dir"):
            return candidate
    return None


def chat_files(home: Path, problems: list[str] | None = None) -> list[tuple[Path, str | None]]:
    """(file, parent session id for a sub-agent chat) under `tmp/*/chats/`; no temp or backup
    files. A chat's name on something that is not a file (a symlink loop, a named pipe) is left
    out and said in `problems`: a trial's session went missing without a word."""
    found = []
    for chats in sorted((home / "tmp").glob("*/chats")):
        for entry in sorted(chats.iterdir()):
            if entry.name.startswith("session-") and entry.suffix in (".json", ".jsonl") and not entry.is_dir():
                found += _a_file(entry, None, problems)
            elif entry.is_dir():  # a sub-agent's chat: `.json` in 0.37-0.38, `.jsonl` since
                for f in sorted(entry.iterdir()):
                    if f.suffix in (".json", ".jsonl") and not f.is_dir():
                        found += _a_file(f, entry.name, problems)
    return found


def _a_file(path: Path, parent: str | None, problems: list[str] | None) -> list[tuple[Path, str | None]]:
    return [(f, parent) for f in regular_files([path], problems, "Gemini CLI chat file")]


def read_head(path: Path, parent_id: str | None) -> Head:
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEAD_CAP).decode("utf-8", "replace")
    except OSError:
        head = ""
    first = head.split("\n", 1)[0]
    try:
        doc = jsontext.loads(first)
        sid = doc.get("sessionId") if isinstance(doc, dict) else None
    except (ValueError, RecursionError):  # a pretty-printed legacy record: its first keys
        m = _KEY["sessionId"].search(head)
        sid = m.group(1) if m else None
    project_dir = path.parent.parent if parent_id is None else path.parent.parent.parent
    return Head(str(path), sid if isinstance(sid, str) and sid else None, parent_id, str(project_dir))


def project_paths(home: Path) -> dict[str, str]:
    """Project folder name (slug or hash) -> the project's path, from `.project_root` markers and
    `projects.json`; a hash folder is matched by hashing each known path as Gemini did."""
    paths: dict[str, str] = {}
    try:
        registry = jsontext.loads((home / "projects.json").read_text(encoding="utf-8"))
        projects = registry.get("projects") if isinstance(registry, dict) else None
        for path, slug in (projects or {}).items():
            if isinstance(path, str) and isinstance(slug, str):
                paths[slug] = path
    except (OSError, ValueError, RecursionError, AttributeError):
        pass
    for marker in (home / "tmp").glob("*/.project_root"):
        try:
            paths[marker.parent.name] = marker.read_text(encoding="utf-8").strip()
        except OSError:
            continue
    for path in list(paths.values()):
        paths.setdefault(hashlib.sha256(path.encode()).hexdigest(), path)
    return paths


def group(heads: list[Head], projects: dict[str, str], names) -> list[GeminiSource]:
    """One source per main session id: all its copies, then its sub-agents' chats (any copy)."""
    mains: dict[str, list[Head]] = {}
    subs: dict[str, list[Head]] = {}
    unreadable = []
    for h in heads:
        if h.session_id is None:
            unreadable.append(h)
        elif h.parent_id is None:
            mains.setdefault(h.session_id, []).append(h)
        else:
            subs.setdefault(h.parent_id, []).append(h)
    sources = []
    for sid, copies in mains.items():
        members = [h.path for h in copies] + [h.path for h in subs.pop(sid, [])]
        sources.append(_source(copies, sid, members, projects, names))
    for parent, orphans in subs.items():  # the parent's chat is gone (deleted): each stands alone
        for sid in dict.fromkeys(h.session_id for h in orphans):
            copies = [h for h in orphans if h.session_id == sid]
            sources.append(_source(copies, sid, [h.path for h in copies], projects, names))
    sources += [_source([h], None, [h.path], projects, names) for h in unreadable]
    return sources


def _source(copies: list[Head], identity, members, projects, names) -> GeminiSource:
    folders = [Path(h.project_dir).name for h in copies]
    project_path = next((projects[f] for f in folders if f in projects), "")
    return GeminiSource(provider=PROVIDER, path=copies[0].path, project_path=project_path,
                        project=project_name(project_path, names), identity=identity,
                        members=tuple(dict.fromkeys(members)))


def discover(env=os.environ, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found = Discovery()
    homes: list[Path] = []
    if use_default:
        home = home_dir(gemini_home(env))
        homes += [home] if home else []
    homes += named_homes(extra_roots, found.problems, home="Gemini CLI home", holds="Gemini CLI chats",
                         find=home_dir, lacking="it has no tmp/ (nor .gemini/tmp/) folder")
    files: list[tuple[Path, str | None]] = []
    projects: dict[str, str] = {}
    for home in dict.fromkeys(homes):
        try:
            files += chat_files(home, found.problems)
            projects.update(project_paths(home))
        except OSError as exc:  # a home we may not read: say so, go on with the others
            found.problems.append(f"cannot list Gemini CLI chats in {home}: {exc}")
    files += [(p, p.parent.name if not p.name.startswith("session-") else None)
              for p in named_stores(extra_stores, found.problems, "Gemini CLI chat file")]
    unique = {os.path.realpath(f): parent for f, parent in files}
    heads = [read_head(Path(f), parent) for f, parent in unique.items()]
    found.sources = group(heads, projects, project_names or {})
    return found
