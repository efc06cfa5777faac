"""Find Kilo Code's stores.

1. Task folders (the VS Code extension, Kilo-Org/kilocode-legacy `src/utils/storage.ts`): the
   editor's global storage for the extension `kilocode.kilo-code`, `<editor user dir>/User/
   globalStorage/kilocode.kilo-code/tasks/<task id>/`, where the editor's user dir is
   `$XDG_CONFIG_HOME` (else `~/.config`) on Linux, `~/Library/Application Support` on macOS and
   `%APPDATA%` on Windows, for VS Code, Insiders, VSCodium, Cursor and Windsurf; and the first Kilo
   CLI's `~/.kilocode/cli/global/tasks/` (packages/agent-runtime/src/utils/paths.ts). The setting
   `kilo-code.customStoragePath` moves the tasks (`<path>/tasks/`): name that folder as a home.
   One source is one task folder, identified by its task id.
2. The Kilo CLI (an OpenCode fork, Kilo-Org/kilocode `packages/opencode`): `const app = "kilo"`
   under xdg-basedir's data dir, `$XDG_DATA_HOME/kilo`, else `~/.local/share/kilo` on every OS,
   holding `kilo.db` (OpenCode's schema; `kilo-<channel>.db` for dev channels), or the database
   `$KILO_DB` names (`packages/opencode/src/storage/db.ts`). One source is one database.
Only names and stats here, plus the first 256 KiB of a task's history for its workspace. The
extension's `secrets`, VS Code's `state.vscdb` and the CLI's `auth.json` are never opened.
"""

import os
import re
from collections.abc import Mapping
from pathlib import Path

from transforms import jsontext
from transforms.projects import project_name
from transforms.sources import Discovery, Source, named_homes, names_carried, user_home

PROVIDER = "kilo"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ("APPDATA", "KILO_DB", "XDG_CONFIG_HOME", "XDG_DATA_HOME")
EXTENSION_ID = "kilocode.kilo-code"
EDITORS = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf")
TASK_FILES = ("api_conversation_history.json", "ui_messages.json")
HEAD_BYTES = 256 * 1024
_WORKSPACE = re.compile(r"# Current Workspace Directory \((.+?)\) Files")


def editor_user_dirs(env) -> list[Path]:
    """Every OS's place for the editors' user data (only those that exist are listed later)."""
    home = user_home(env)
    roots = [Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config",
             home / "Library" / "Application Support",
             Path(env["APPDATA"]) if env.get("APPDATA") else home / "AppData" / "Roaming"]
    return [root / editor for root in roots for editor in EDITORS]


def storage_dirs(env) -> list[Path]:
    """Folders that hold `tasks/`: each editor's global storage for Kilo, and the first CLI's."""
    dirs = [d / "User" / "globalStorage" / EXTENSION_ID for d in editor_user_dirs(env)]
    return dirs + [user_home(env) / ".kilocode" / "cli" / "global"]


def cli_data_dir(env) -> Path:
    if env.get("XDG_DATA_HOME"):
        return Path(env["XDG_DATA_HOME"]) / "kilo"
    return user_home(env) / ".local" / "share" / "kilo"


def task_folders(storage: Path) -> list[Path]:
    tasks = storage / "tasks"
    if not tasks.is_dir():
        return []
    return sorted(p for p in tasks.iterdir() if p.is_dir() and any((p / f).is_file() for f in TASK_FILES))


def databases(data_dir: Path) -> list[Path]:
    """`kilo.db` (latest, beta, prod), `kilo-<channel>.db`, and a dev channel's older
    `opencode-<channel>.db` that Kilo still opens (storage/db.ts); a plain `opencode.db` is OpenCode's."""
    if not data_dir.is_dir():
        return []
    return sorted(p for p in [*data_dir.glob("kilo*.db"), *data_dir.glob("opencode-*.db")] if p.is_file())


def kilo_db_env(env, data_dir: Path) -> Path | None:
    """`KILO_DB`: an absolute path, or a name inside the data dir (`:memory:` keeps nothing)."""
    value = env.get("KILO_DB")
    if not value or value == ":memory:":
        return None
    path = Path(value)
    return path if path.is_absolute() else data_dir / value


def workspace_of(task: Path) -> str:
    try:
        with open(task / TASK_FILES[0], "rb") as fh:
            head = fh.read(HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""
    found = _WORKSPACE.search(head)
    if not found:
        return ""
    try:  # the path as it sits in the JSON text: escapes undone
        return jsontext.loads(f'"{found.group(1)}"')
    except (ValueError, RecursionError):
        return found.group(1)


def task_source(task: Path, names: Mapping[str, str]) -> Source:
    workspace = workspace_of(task)
    return Source(provider=PROVIDER, path=str(task), project_path=workspace, project=project_name(workspace, names),
                  identity=f"task:{task.name}", project_names=names_carried(names))


def db_source(db: Path, names: Mapping[str, str]) -> Source:
    # a database spans projects: each row names its session's directory at extract time
    return Source(provider=PROVIDER, path=str(db), project_path=str(db.parent), project="kilo-cli",
                  project_names=names_carried(names))


def _stores_in(home: Path) -> tuple[list[Path], list[Path]] | None:
    """A home's task folders and databases; None when it holds neither."""
    tasks, dbs = task_folders(home), databases(home)
    return (tasks, dbs) if tasks or dbs else None


def discover(env=os.environ, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found = Discovery()
    names = project_names or {}
    tasks: list[Path] = []
    dbs: list[Path] = []
    if use_default:
        for storage in storage_dirs(env):
            tasks += task_folders(storage)
        dbs += databases(cli_data_dir(env))
        named = kilo_db_env(env, cli_data_dir(env))
        dbs += [named] if named and named.is_file() else []
    for here_tasks, here_dbs in named_homes(extra_roots, found.problems, home="Kilo home",
                                            holds="Kilo tasks or database", find=_stores_in,
                                            lacking="no tasks/ folder and no kilo.db"):
        tasks += here_tasks
        dbs += here_dbs
    for store in (Path(s).expanduser() for s in extra_stores):
        if store.is_file() and store.suffix == ".db":
            dbs.append(store)
        elif store.is_dir() and any((store / f).is_file() for f in TASK_FILES):
            tasks.append(store)
        else:
            found.problems.append(f"no Kilo task folder or database at {store}")
    seen: set[str] = set()
    for task in dict.fromkeys(Path(os.path.realpath(p)) for p in tasks):
        if task.name not in seen:  # the same task in two places: the first wins
            seen.add(task.name)
            found.sources.append(task_source(task, names))
    found.sources += [db_source(db, names) for db in dict.fromkeys(Path(os.path.realpath(p)) for p in dbs)]
    return found
