"""Find Amp threads: `threads/T-*.json` in Amp's data dir, `$XDG_DATA_HOME/amp`, else
`~/.local/share/amp` (what ccusage, tokscale and cross_agent_session_resumer read on every OS),
plus `~/Library/Application Support/amp` (macOS) and `%APPDATA%\\amp` (Windows) where they exist
(openusage's Amp provider), and the VS Code extension's older store
`<editor>/User/globalStorage/sourcegraph.amp/threads3/` (Code, Code - Insiders, VSCodium,
Cursor, Windsurf; migrated to the data dir by newer releases).

Amp is closed source: the layout is the peers' (see transforms/amp/normalise.py). One thread is
one source, identified by its thread id (`T-<uuid>`), so a thread in the data dir and in the
extension's old store is one source (the data dir wins), and a deleted thread keeps its history
in the lake. Discovery opens only each thread's head for its workspace; never `secrets.json`.
"""

import os
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote, urlparse

from transforms import jsontext
from transforms.projects import project_name
from transforms.sources import Discovery, Source, named_homes, named_stores, regular_files, user_home, with_folder

PROVIDER = "amp"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ("APPDATA", "XDG_CONFIG_HOME", "XDG_DATA_HOME")
EDITORS = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf")
THREAD = re.compile(r"^T-[0-9A-Za-z-]+\.json$")


def data_dirs(env) -> list[Path]:
    home = user_home(env)
    primary = Path(env["XDG_DATA_HOME"]) / "amp" if env.get("XDG_DATA_HOME") else home / ".local" / "share" / "amp"
    out = [primary, home / "Library" / "Application Support" / "amp"]
    if env.get("APPDATA"):
        out.append(Path(env["APPDATA"]) / "amp")
    return out


def extension_dirs(env) -> list[Path]:
    """The VS Code extension's pre-migration thread folders, under each editor's user dir."""
    home = user_home(env)
    configs = [Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config",
               home / "Library" / "Application Support"]
    if env.get("APPDATA"):
        configs.append(Path(env["APPDATA"]))
    return [c / e / "User" / "globalStorage" / "sourcegraph.amp" / "threads3" for c in configs for e in EDITORS]


def thread_files(folder: Path, problems: list[str] | None = None) -> list[Path]:
    """The thread files of `folder`; a thread's name on something that is no file (a named pipe) is
    left out, and said in `problems`."""
    try:
        names = sorted(e.path for e in os.scandir(folder) if THREAD.match(e.name))
    except OSError:
        return []
    return regular_files(names, problems, "Amp thread file")


def workspace_of(thread: dict) -> str:
    """`env.initial.cwd`, else the first workspace tree's `file://` URI as a path."""
    env = thread.get("env") if isinstance(thread.get("env"), dict) else {}
    initial = env.get("initial") if isinstance(env.get("initial"), dict) else {}
    if isinstance(initial.get("cwd"), str) and initial["cwd"]:
        return initial["cwd"]
    for tree in initial.get("trees") or ():
        uri = tree.get("uri") if isinstance(tree, dict) else None
        if isinstance(uri, dict):
            uri = uri.get("fsPath") or uri.get("path")
        if isinstance(uri, str) and uri:
            return unquote(urlparse(uri).path) if uri.startswith("file:") else uri
    return ""


def _source(path: Path, names: Mapping[str, str]) -> Source:
    try:
        thread = jsontext.loads(path.read_bytes().decode("utf-8", "replace"))
    except (OSError, ValueError, RecursionError):
        thread = {}
    cwd = workspace_of(thread) if isinstance(thread, dict) else ""
    return Source(provider=PROVIDER, path=os.path.realpath(path), project_path=cwd,
                  project=project_name(cwd, names), identity=path.stem)


def discover(env=os.environ, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found = Discovery()
    folders: list[Path] = []
    if use_default:
        folders += [d / "threads" for d in data_dirs(env)] + extension_dirs(env)
    folders += [home / "threads" for home in named_homes(
        extra_roots, found.problems, home="Amp data dir", holds="Amp threads",
        find=lambda root: with_folder(root, "threads"), lacking="it has no threads/ folder")]
    files = [f for folder in folders for f in thread_files(folder, found.problems)]
    files += named_stores(extra_stores, found.problems, "Amp thread", lambda folder: thread_files(folder, found.problems))
    seen: set[str] = set()
    for path in files:  # earlier places win: the data dir before the extension's old store
        if path.stem not in seen:
            seen.add(path.stem)
            found.sources.append(_source(path, project_names or {}))
    return found
