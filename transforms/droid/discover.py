"""Find Factory Droid sessions: `~/.factory/sessions` (`%USERPROFILE%\\.factory\\sessions` on
Windows). Droid documents no variable that moves it (ccusage's `DROID_SESSIONS_DIR` is
ccusage's own); `--agent-home droid=DIR` and `[droid]` name other homes.

A session is `<uuid>.jsonl` (the transcript) with `<uuid>.settings.json` beside it (model,
provider lock, the running token totals), directly in `sessions/` (older releases) or in a
folder per working directory (`sessions/-home-dev-shop/`, the cwd with `/` as `-`). One session
is one source, identified by its uuid, so a copy in both layouts counts once (the folder layout
wins) and a session whose transcript is gone still counts its settings. Discovery reads only the
transcript's first line (`session_start` names the cwd); never `~/.factory/auth.json`.
"""

import os
from collections.abc import Mapping
from pathlib import Path

from transforms import jsontext
from transforms.projects import project_name
from transforms.sources import Discovery, Source, named_homes, named_stores, user_home, with_folder

PROVIDER = "droid"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ()
SETTINGS = ".settings.json"


def session_files(sessions: Path) -> list[tuple[str, Path]]:
    """(uuid, transcript or settings file): per-cwd folders first, then the flat layout."""
    found: list[tuple[str, Path]] = []
    try:
        entries = sorted(os.scandir(sessions), key=lambda e: e.name)
    except OSError:
        return []
    folders = [Path(e.path) for e in entries if e.is_dir()]
    for folder in folders + [sessions]:
        try:
            names = sorted(e.name for e in os.scandir(folder) if e.is_file())
        except OSError:
            continue
        stems = {n[: -len(".jsonl")] for n in names if n.endswith(".jsonl")}
        for stem in sorted(stems):
            found.append((stem, folder / f"{stem}.jsonl"))
        for n in names:  # settings without a transcript: its totals still count
            if n.endswith(SETTINGS) and n[: -len(SETTINGS)] not in stems:
                found.append((n[: -len(SETTINGS)], folder / n))
    return found


def cwd_of(path: Path) -> str:
    if path.name.endswith(SETTINGS):
        return ""
    first = jsontext.first_line(path)
    cwd = first.get("cwd") if isinstance(first, dict) and first.get("type") == "session_start" else None
    return cwd if isinstance(cwd, str) else ""


def _source(uuid: str, path: Path, names: Mapping[str, str]) -> Source:
    cwd = cwd_of(path)
    return Source(provider=PROVIDER, path=os.path.realpath(path), project_path=cwd,
                  project=project_name(cwd, names), identity=uuid)


def discover(env=os.environ, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found = Discovery()
    homes = [user_home(env) / ".factory"] if use_default else []
    homes += named_homes(extra_roots, found.problems, home="Droid home", holds="Droid sessions",
                         find=lambda root: with_folder(root, "sessions"), lacking="it has no sessions/ folder")
    files = [f for home in homes for f in session_files(home / "sessions")]
    files += [(p.name[: -len(SETTINGS)] if p.name.endswith(SETTINGS) else p.stem, p)
              for p in named_stores(extra_stores, found.problems, "Droid session file")]
    seen: set[str] = set()
    for uuid, path in files:
        if uuid not in seen:
            seen.add(uuid)
            found.sources.append(_source(uuid, path, project_names or {}))
    return found
