"""Find OpenCode data dirs: `$XDG_DATA_HOME/opencode`, else `~/.local/share/opencode` on every
OS (docs/FORMATS.md, "OpenCode: location"). A data dir holds `opencode.db` (release channels),
`opencode-<channel>.db` (dev builds) and, after an upgrade from <= v1.1, the legacy `storage/` JSON tree; before that
(the oldest releases), `project/<id>/storage/session/{info,message,part}/` (read like the legacy tree).

One data dir is one source: its databases and its legacy JSON are read together, so that a
message found in both is counted once. `OPENCODE_DB` naming a database outside the data dir
makes that database a source of its own. Discovery opens no file: names and stats only (the
data dir also holds `auth.json`, which holds credentials).
"""

import os
from pathlib import Path

from transforms.sources import (
    Discovery,
    Source,
    file_fingerprint,
    named_homes,
    names_carried,
    probe,
    slugify,
    user_home,
)

PROVIDER = "opencode"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ("OPENCODE_DB", "XDG_DATA_HOME")
MAIN_DB = "opencode.db"
LEGACY_KINDS = ("session", "message", "part")  # what we read under storage/; the rest is not usage


def default_data_dir(env) -> Path:
    """`xdg-basedir`'s data dir: no `~/Library`, no `%APPDATA%`."""
    if env.get("XDG_DATA_HOME"):
        return Path(env["XDG_DATA_HOME"]) / "opencode"
    return user_home(env) / ".local" / "share" / "opencode"


def is_db_name(name: str) -> bool:
    return name == MAIN_DB or (name.startswith("opencode-") and name.endswith(".db"))


def db_files(data_dir: Path) -> list[Path]:
    """`opencode.db` first (its rows win a duplicate), then the channel databases by name."""
    try:
        names = sorted(e.name for e in os.scandir(data_dir) if is_db_name(e.name) and e.is_file())
    except OSError:
        return []
    return sorted((data_dir / n for n in names), key=lambda p: (p.name != MAIN_DB, p.name))


def storage_dir(data_dir: Path) -> Path:
    return data_dir / "storage"


def has_store(data_dir: Path) -> bool:
    return (bool(db_files(data_dir)) or any(probe(storage_dir(data_dir) / k, "dir") for k in LEGACY_KINDS)
            or any(True for _ in oldest_files(data_dir)))


def oldest_files(data_dir: Path):
    """The oldest layout (the first releases): `project/<id>/storage/session/info/<session>.json`,
    `.../session/message/<session>/<message>.json`, `.../session/part/<session>/<message>/<part>.json`,
    as (kind, owner dir name, file), like `legacy_files`."""
    try:
        projects = sorted((e for e in os.scandir(data_dir / "project") if e.is_dir()), key=lambda e: e.name)
    except OSError:
        return
    for project in projects:
        top = Path(project.path) / "storage" / "session"
        for kind, sub, depth in (("session", "info", 0), ("message", "message", 1), ("part", "part", 2)):
            dirs = [top / sub]
            for _ in range(depth):  # part files sit one level deeper: part/<session>/<message>/
                dirs = [Path(e.path) for d in dirs for e in _scan(d) if e.is_dir()]
            for folder in dirs:
                for entry in _scan(folder):
                    if entry.name.endswith(".json"):
                        yield kind, (folder.name if depth else None), Path(entry.path)


def _scan(folder: Path) -> list:
    try:
        return sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return []


def legacy_files(data_dir: Path):
    """(kind, owner dir name, file) of every legacy JSON file, in a stable order: whatever bears a
    record's name, a folder or a named pipe too, which the reader names without opening it
    (transforms.opencode.store.read_legacy): a trial's session went missing without a word."""
    for kind in LEGACY_KINDS:
        top = storage_dir(data_dir) / kind
        try:
            owners = sorted(os.scandir(top), key=lambda e: e.name)
        except OSError:
            continue
        for owner in owners:
            if not owner.is_dir():
                continue
            try:
                files = sorted((e for e in os.scandir(owner.path) if e.name.endswith(".json")), key=lambda e: e.name)
            except OSError:
                continue
            for entry in files:
                yield kind, owner.name, Path(entry.path)
    yield from oldest_files(data_dir)  # after the newer layout: its copy of a record wins


def storage_fingerprint(data_dir: Path) -> str:
    """Count, total size and newest mtime of the legacy files: stats only, no file opened."""
    count = size = newest = 0
    for _, _, path in legacy_files(data_dir):
        try:
            st = path.stat()
        except OSError:
            continue
        count, size, newest = count + 1, size + st.st_size, max(newest, st.st_mtime_ns)
    return f"storage:{count}:{size}:{newest}" if count else "storage:-"


def fingerprint(source: Source) -> str:
    path = Path(source.path)
    if not path.is_dir():  # a single database
        return file_fingerprint(str(path), f"{path}-wal")
    parts = [f"{db.name}={file_fingerprint(str(db), f'{db}-wal')}" for db in db_files(path)]
    return "|".join(parts + [storage_fingerprint(path)])


def _source(path: Path, identity: str, names: tuple[tuple[str, str], ...]) -> Source:
    # a store of many projects: each row names its own project (the session's directory)
    return Source(provider=PROVIDER, path=str(path), project_path=str(path),
                  project=slugify(path.name if path.is_dir() else path.stem, "opencode"), identity=identity,
                  project_names=names)


def _opencode_db_env(env, data_dir: Path) -> Path | None:
    value = env.get("OPENCODE_DB")
    if not value or value == ":memory:":
        return None
    path = Path(value).expanduser()
    return path if path.is_absolute() else data_dir / path


class _Found:
    def __init__(self, names: tuple[tuple[str, str], ...]):
        self.discovery = Discovery()
        self.names = names
        self.dirs: set[str] = set()
        self.dbs: set[str] = set()

    def add_dir(self, data_dir: Path) -> None:
        real = os.path.realpath(data_dir)
        if real in self.dirs:
            return
        self.dirs.add(real)
        self.dbs.update(os.path.realpath(db) for db in db_files(Path(real)))
        self.discovery.sources.append(_source(Path(real), real, self.names))

    def add_db(self, db: Path) -> None:
        real = os.path.realpath(db)
        if real in self.dbs:  # already read with its data dir
            return
        self.dbs.add(real)
        self.discovery.sources.append(_source(Path(real), real, self.names))


def discover(env, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found = _Found(names_carried(project_names))
    if use_default:
        default = default_data_dir(env)
        _looked(default, found, complain=False)
        env_db = _opencode_db_env(env, default)  # the agent's own override
        if env_db:
            _add_store(env_db, found)
    for root in named_homes(extra_roots, found.discovery.problems, home="OpenCode data dir"):
        _looked(root, found, complain=True)
    for store in extra_stores:
        _add_store(Path(store).expanduser(), found)
    return found.discovery


def _looked(data_dir: Path, found: _Found, complain: bool) -> None:
    """Add the data dir if it holds OpenCode data; an empty default is no problem."""
    try:
        if has_store(data_dir):
            found.add_dir(data_dir)
        elif complain:
            found.discovery.problems.append(f"no OpenCode data (opencode*.db or storage/) in {data_dir}")
    except OSError as exc:
        found.discovery.problems.append(f"cannot look at OpenCode data in {data_dir}: {exc}")


def _add_store(store: Path, found: _Found) -> None:
    """An explicit data dir, or one database (`OPENCODE_DB`, or a store given by the user)."""
    if probe(store, "dir") and not probe(store):
        _looked(store, found, complain=True)
    elif probe(store):
        found.add_db(store)
    else:
        found.discovery.problems.append(f"no OpenCode database at {store}")
