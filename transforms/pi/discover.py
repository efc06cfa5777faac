"""Find pi's session files (badlogic/pi-mono `packages/coding-agent/src/config.ts`).

pi's agent dir is `$PI_CODING_AGENT_DIR` (`~` and `~/` expanded, as pi does), else
`<home>/.pi/agent` on every OS (Node's `os.homedir()`: `$HOME`, `%USERPROFILE%` on Windows).
Sessions are `<agent dir>/sessions/--<cwd>--/<ISO time>_<uuid>.jsonl`. `pi --session-dir DIR`
writes flat into DIR: name such a dir as a store (`extra_stores`), or as a home. (ccusage reads
`$PI_AGENT_DIR`, a name pi itself never reads: pi's own variable is honoured here.)

One source is one session file, identified by its session id (the header's `id`), so a copy of
the file elsewhere is the same source. Only each file's first line is read here; `auth.json`,
`settings.json` and `models.json` beside the sessions are never opened.
"""

import os
from collections.abc import Mapping
from pathlib import Path

from transforms import jsontext
from transforms.projects import project_name
from transforms.sources import Discovery, Source, named_homes, named_stores, regular_files, user_home, with_folder

PROVIDER = "pi"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ("PI_CODING_AGENT_DIR",)
ENV = "PI_CODING_AGENT_DIR"
FIRST_LINE_CAP = 1 << 16


def agent_dir(env) -> Path:
    explicit = env.get(ENV)
    if explicit:
        if explicit == "~":
            return user_home(env)
        if explicit.startswith("~/"):
            return user_home(env) / explicit[2:]
        return Path(explicit)
    return user_home(env) / ".pi" / "agent"


def session_files(folder: Path, problems: list[str] | None = None) -> list[Path]:
    """`*.jsonl` in the folder and one level below (pi's `listAll` reads the same); a session's
    name on something that is no file (a named pipe) is left out, and said in `problems`."""
    if not folder.is_dir():
        return []
    return regular_files(sorted([*folder.glob("*.jsonl"), *folder.glob("*/*.jsonl")]), problems, "pi session file")


def read_header(path: Path) -> dict | None:
    """The `session` header: the first line that is a JSON object (pi's loader skips lines it
    cannot parse), or None (extract quarantines such a file)."""
    try:
        for line in jsontext.head_lines(path, FIRST_LINE_CAP):
            try:
                obj = jsontext.loads(line.decode("utf-8", "replace"))
            except (ValueError, RecursionError):
                continue
            ok = isinstance(obj, dict) and obj.get("type") == "session" and isinstance(obj.get("id"), str) and obj["id"]
            return obj if ok else None
    except OSError:
        return None
    return None


def _source(path: Path, names: Mapping[str, str]) -> Source:
    header = read_header(path) or {}
    cwd = header.get("cwd") if isinstance(header.get("cwd"), str) else ""
    return Source(provider=PROVIDER, path=str(path), project_path=cwd, project=project_name(cwd, names),
                  identity=header.get("id"))


def _sessions_in(home: Path, problems: list[str] | None = None) -> list[Path]:
    """A named home's session files: in its sessions/ folder, else in the home itself."""
    return session_files(home / "sessions" if with_folder(home, "sessions") else home, problems)


def discover(env=os.environ, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found = Discovery()
    files: list[Path] = []
    if use_default:
        home = agent_dir(env)
        if home.is_absolute():
            files += session_files(home / "sessions", found.problems)
        else:  # pi resolves it against its own working directory, which we cannot know
            found.problems.append(f"{ENV}={env.get(ENV)!r} is relative: cannot tell what pi resolved it to")
    for here in named_homes(extra_roots, found.problems, home="pi agent dir", holds="pi sessions",
                            find=lambda home: _sessions_in(home, found.problems),
                            lacking="no sessions/ folder with *.jsonl files"):
        files += here
    files += named_stores(extra_stores, found.problems, "pi session",
                          lambda folder: session_files(folder, found.problems))
    seen: set[str] = set()
    for path in dict.fromkeys(Path(os.path.realpath(f)) for f in files):
        source = _source(path, project_names or {})
        if source.identity and source.identity in seen:
            continue  # a copy of a session already found: the first place wins
        seen.add(source.identity or str(path))
        found.sources.append(source)
    return found
