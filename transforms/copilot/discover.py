"""Find GitHub Copilot CLI sessions: `$COPILOT_HOME` (exact), else `~/.copilot` on every OS
(`%USERPROFILE%\\.copilot` on Windows), plus the homes of older releases that followed
`$XDG_STATE_HOME/.copilot` and `$XDG_CONFIG_HOME/.copilot` (current releases migrate those to
`~/.copilot` at startup and ignore XDG: github/copilot-cli#1750, #1954; microsoft/vscode#314917).

A session is `session-state/<id>/events.jsonl` (with `workspace.yaml` beside it) or, before the
per-session folders, `session-state/<id>.jsonl` (copilot-cli 0.0.342 changelog), or, before
0.0.342, `history-session-state/session_<id>_<start ms>.json` (transforms.copilot.legacy). One
session is one source, identified by its session id, so the same session in two homes or layouts
is one source (the current home and the folder layout win; a log wins over a file of the first
format, which `copilot --resume` migrated into it and then deleted) and a session the user deletes
(`/session delete`) keeps its history in the lake. Only the first line of a log is read here (its
`session.start` names the cwd; the first format names none); never `config.json` (it may hold a
token) or anything else in the home.
"""

import os
from collections.abc import Mapping
from pathlib import Path

from transforms import jsontext
from transforms.copilot.legacy import LEGACY_NAME
from transforms.projects import project_name
from transforms.sources import Discovery, Source, named_homes, user_home, with_folder

PROVIDER = "copilot"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ("COPILOT_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME")
EVENTS = "events.jsonl"


def copilot_homes(env) -> tuple[list[Path], list[str]]:
    """The homes to look in, the current one first; and problems with the environment."""
    explicit = env.get("COPILOT_HOME")
    if explicit:
        home = Path(explicit).expanduser()
        if not home.is_absolute():  # resolved against the CLI's own working directory: unknowable
            return [], [f"COPILOT_HOME={explicit!r} is relative: cannot tell what Copilot CLI resolved it to"]
        return [home], []  # exact: the CLI looks nowhere else
    homes = [user_home(env) / ".copilot"]
    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME"):  # older releases, not yet migrated
        if env.get(var):
            homes.append(Path(env[var]) / ".copilot")
    return homes, []


def session_logs(home: Path) -> list[tuple[str, Path]]:
    """(session id, log) in a home: the folder layout first, then the older flat files."""
    state = home / "session-state"
    found: list[tuple[str, Path]] = []
    try:
        entries = sorted(os.scandir(state), key=lambda e: e.name)
    except OSError:
        return []
    for entry in entries:
        if entry.is_dir() and (Path(entry.path) / EVENTS).is_file():
            found.append((entry.name, Path(entry.path) / EVENTS))
    for entry in entries:
        if entry.name.endswith(".jsonl") and entry.is_file():
            found.append((entry.name[: -len(".jsonl")], Path(entry.path)))
    return found


def legacy_sessions(home: Path) -> list[tuple[str, Path]]:
    """(session id, file) of the sessions of the first format in a home."""
    try:
        entries = sorted(os.scandir(home / "history-session-state"), key=lambda e: e.name)
    except OSError:
        return []
    return [(m.group(1), Path(e.path)) for e in entries if (m := LEGACY_NAME.match(e.name)) and e.is_file()]


def cwd_of(log: Path) -> str:
    """The working directory the session started in (`session.start` -> `context.cwd`)."""
    event = jsontext.first_line(log)
    data = event.get("data") if isinstance(event, dict) else None
    context = data.get("context") if isinstance(data, dict) else None
    cwd = context.get("cwd") if isinstance(context, dict) else None
    return cwd if isinstance(cwd, str) else ""


def _source(session_id: str, log: Path, names: Mapping[str, str]) -> Source:
    cwd = "" if LEGACY_NAME.match(log.name) else cwd_of(log)
    return Source(provider=PROVIDER, path=os.path.realpath(log), project_path=cwd,
                  project=project_name(cwd, names), identity=session_id)


def discover(env=os.environ, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found = Discovery()
    homes: list[Path] = []
    if use_default:
        homes, problems = copilot_homes(env)
        found.problems.extend(problems)
    homes += named_homes(extra_roots, found.problems, home="Copilot CLI home", holds="Copilot CLI sessions",
                         find=lambda root: with_folder(root, "session-state", "history-session-state"),
                         lacking="it has no session-state/ (nor history-session-state/) folder")
    logs: list[tuple[str, Path]] = []
    for home in homes:
        logs += session_logs(home)
    for home in homes:  # after every log: a migrated session's log holds its first-format history
        logs += legacy_sessions(home)
    for store in extra_stores:
        p = Path(store).expanduser()
        if p.is_dir() and (p / EVENTS).is_file():
            logs.append((p.name, p / EVENTS))
        elif p.is_file():
            legacy = LEGACY_NAME.match(p.name)
            logs.append((legacy.group(1) if legacy else p.parent.name if p.name == EVENTS else p.stem, p))
        else:
            found.problems.append(f"no Copilot CLI session log at {p}")
    seen: set[str] = set()
    for session_id, log in logs:  # earlier places win
        if session_id not in seen:
            seen.add(session_id)
            found.sources.append(_source(session_id, log, project_names or {}))
    return found
