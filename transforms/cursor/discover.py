"""Find Cursor's CLI agent (`cursor-agent`) transcripts. Cursor is closed source: the layout is
learnt from the peers' readers (codeburn `src/providers/cursor-agent.ts`, agentsview
`internal/parser/cursor.go`), not from the writer. Both read `~/.cursor` (no env var is known;
codeburn notes the Windows path is unverified: `%USERPROFILE%\\.cursor` is looked at):

- `projects/<project id>/agent-transcripts/`: `<id>.txt` transcripts (the older plain text), and
  `<uuid>/<uuid>.jsonl` (Composer 2, Anthropic-style messages) with `<uuid>/subagents/*.jsonl`;
  a workspace-less chat sits in `projects/agent-transcripts/` directly;
- `ai-tracking/ai-code-tracking.db`: SQLite, `conversation_summaries` (conversationId, title,
  model, updatedAt) — codeburn's only source of a model and a time.

One source is one `.cursor` home (all its projects: each row names its own project), so the
summaries database is read once. Discovery opens no file: names and stats only.
"""

import os
from pathlib import Path

from transforms.sources import Discovery, Source, file_fingerprint, names_carried, probe, slugify, unusable, user_home

PROVIDER = "cursor"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ()
SUMMARY_DB = Path("ai-tracking") / "ai-code-tracking.db"


def transcript_dirs(home: Path) -> list[tuple[str | None, Path]]:
    """(project id, agent-transcripts dir) of every project; None for workspace-less chats."""
    projects = home / "projects"
    out = []
    if (projects / "agent-transcripts").is_dir():
        out.append((None, projects / "agent-transcripts"))
    try:
        entries = sorted(os.scandir(projects), key=lambda e: e.name)
    except OSError:
        return out
    for entry in entries:
        if entry.is_dir() and entry.name != "agent-transcripts":
            folder = Path(entry.path) / "agent-transcripts"
            if probe(folder, "dir") and folder.exists():
                out.append((entry.name, folder))
    return out


def transcript_files(folder: Path) -> list[tuple[Path, str | None]]:
    """(file, parent conversation id) of every transcript in an agent-transcripts dir: flat
    `.txt`/`.jsonl`, `<uuid>/<stem>.jsonl|.txt` and `<uuid>/subagents/*` (parent: the uuid)."""
    out = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return out
    for entry in entries:
        if entry.is_file() and entry.name.endswith((".txt", ".jsonl")):
            out.append((Path(entry.path), None))
        elif entry.is_dir():
            try:
                inner = sorted(os.scandir(entry.path), key=lambda e: e.name)
            except OSError:
                continue
            for sub in inner:
                if sub.is_file() and sub.name.endswith((".txt", ".jsonl")):
                    out.append((Path(sub.path), None))
                elif sub.is_dir() and sub.name == "subagents":
                    try:
                        agents = sorted(os.scandir(sub.path), key=lambda e: e.name)
                    except OSError:
                        continue
                    out += [(Path(a.path), entry.name) for a in agents
                            if a.is_file() and a.name.endswith((".txt", ".jsonl"))]
    return out


def has_store(home: Path) -> bool:
    return bool(transcript_dirs(home))


def fingerprint(source: Source) -> str:
    home = Path(source.path)
    count = size = newest = 0
    for _, folder in transcript_dirs(home):
        for path, _ in transcript_files(folder):
            try:
                st = path.stat()
            except OSError:
                continue
            count, size, newest = count + 1, size + st.st_size, max(newest, st.st_mtime_ns)
    db = home / SUMMARY_DB
    return f"transcripts:{count}:{size}:{newest}|{file_fingerprint(str(db), f'{db}-wal')}"


def home_of(place: Path) -> Path | None:
    """A `.cursor` home, its `projects` dir, or one project's dir: the home it belongs to."""
    for candidate in (place, place.parent, place.parent.parent):
        if (candidate / "projects").is_dir() and has_store(candidate):
            return candidate
    return None


def discover(env, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found, seen = Discovery(), set()
    names = names_carried(project_names)

    def add(home: Path) -> None:
        real = os.path.realpath(home)
        if real not in seen:
            seen.add(real)
            found.sources.append(Source(provider=PROVIDER, path=real, project_path=real,
                                        project=slugify("cursor"), identity=real, project_names=names))

    if use_default:
        home = user_home(env) / ".cursor"
        try:
            if has_store(home):
                add(home)
        except OSError as exc:
            found.problems.append(f"cannot look at Cursor data in {home}: {exc}")
    for place in (Path(p).expanduser() for p in (*extra_roots, *extra_stores)):
        why = unusable(place, "dir")
        home = None if why else home_of(place)
        if home is None:
            found.problems.append(f"no Cursor agent transcripts (projects/*/agent-transcripts) at {place}"
                                  + (f": it {why}" if why else ""))
        else:
            add(home)
    return found
