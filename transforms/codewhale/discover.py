"""Find CodeWhale session files: `$CODEWHALE_HOME/sessions/*.json`, else `~/.codewhale/sessions`
then the legacy `~/.deepseek/sessions`.

One session file is one source, identified by its session id (the file name's stem), so the
same session under the current and the legacy home is one source (the current copy wins), and
a session CodeWhale prunes (it keeps 50) keeps its history in the lake.
"""

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from transforms.projects import project_name
from transforms.sources import Discovery, Source, named_homes, named_stores, regular_files, unusable, user_home, with_folder

PROVIDER = "codewhale"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ("CODEWHALE_HOME",)
# crash-recovery and bookkeeping files that sit beside the sessions
SIDE_FILES = frozenset({"latest.json", "offline_queue.json", "session_boot_owners.json"})
PREFIX_BYTES = 64 * 1024  # metadata comes first in the file: enough to find the workspace
_WORKSPACE = re.compile(rb'"workspace"\s*:\s*("(?:[^"\\]|\\.)*")')


def session_dirs(env=os.environ) -> tuple[list[Path], list[str]]:
    """Where CodeWhale keeps sessions, newest layout first; plus problems with the env."""
    explicit = env.get("CODEWHALE_HOME")
    if explicit:
        home = Path(explicit).expanduser()
        if not home.is_absolute():  # CodeWhale itself rejects a relative home
            return [], [f"CODEWHALE_HOME={explicit!r} is relative; CodeWhale requires an absolute path"]
        return [home / "sessions"], []  # an explicit home is exact: no legacy fallback
    home = user_home(env)
    return [home / ".codewhale" / "sessions", home / ".deepseek" / "sessions"], []


def session_files(directory: Path, problems: list[str] | None = None) -> list[Path]:
    """Top-level `*.json` session files; side files and per-session folders are skipped. A
    session's name on something else that is no file (a named pipe) is left out, and said in
    `problems`."""
    if not directory.is_dir():
        return []
    named = sorted(p for p in directory.iterdir()
                   if p.suffix == ".json" and p.name not in SIDE_FILES and not p.name.startswith(".") and not p.is_dir())
    return regular_files(named, problems, "CodeWhale session file")


def workspace_of(path: Path) -> str | None:
    """The session's workspace from the file's first 64 KiB, without parsing the transcript."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(PREFIX_BYTES)
    except OSError:
        return None
    m = _WORKSPACE.search(head)
    if not m:
        return None
    try:
        value = json.loads(m.group(1).decode("utf-8", "replace"))
    except ValueError:
        return None
    return value if isinstance(value, str) and value else None


def _source(path: Path, names: Mapping[str, str]) -> Source:
    workspace = workspace_of(path) or ""
    return Source(
        provider=PROVIDER,
        path=str(path),
        project_path=workspace,
        project=project_name(workspace, names),
        identity=path.stem,
    )


def discover(env=os.environ, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found = Discovery()
    dirs: list[Path] = []
    if use_default:
        dirs, problems = session_dirs(env)
        found.problems.extend(problems)
    dirs += [home / "sessions" for home in named_homes(
        extra_roots, found.problems, home="CodeWhale home", holds="CodeWhale sessions",
        find=lambda root: with_folder(root, "sessions"),
        lacking=lambda root: f"{root / 'sessions'} {unusable(root / 'sessions', 'dir')}")]
    files: list[Path] = []
    for d in dirs:
        try:
            files += session_files(d, found.problems)
        except OSError as exc:  # a home we may not read: say so, go on with the others
            found.problems.append(f"cannot list CodeWhale sessions in {d}: {exc}")
    files += named_stores(extra_stores, found.problems, "CodeWhale session",
                          lambda folder: session_files(folder, found.problems))
    seen: set[str] = set()
    for path in files:  # earlier places win: the current home before the legacy one
        if path.stem in seen:
            continue
        seen.add(path.stem)
        found.sources.append(_source(Path(os.path.realpath(path)), project_names or {}))
    return found
