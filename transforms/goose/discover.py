"""Find Goose session stores. Goose (block/goose, `crates/goose/src/config/paths.rs`) puts its
data dir at `$GOOSE_PATH_ROOT/data` when `GOOSE_PATH_ROOT` is an absolute path; otherwise
etcetera's `choose_app_strategy` (Block/goose): XDG on Linux AND macOS (`$XDG_DATA_HOME/goose`
when absolute, else `~/.local/share/goose`), `%APPDATA%\\Block\\goose\\data` on Windows.
Sessions live in `<data>/sessions/`: `sessions.db` (SQLite, WAL) and, from before the database
(and imported into it on its creation), one `<id>.jsonl` per session.

ccusage also looks in `~/Library/Application Support/goose/sessions` and
`~/.local/share/Block/goose/sessions`; Goose's source writes neither today, but they are looked
at too (only an existing store is added), so an old install is not missed.

One source is one sessions dir: its database and its legacy JSONL files are read together, so a
session found in both is counted once. Discovery opens no file: names and stats only.
"""

import os
from pathlib import Path

from transforms.sources import Discovery, Source, file_fingerprint, names_carried, probe, slugify, unusable, user_home

PROVIDER = "goose"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ("APPDATA", "GOOSE_PATH_ROOT", "XDG_DATA_HOME")
DB_NAME = "sessions.db"


def data_dirs(env) -> list[Path]:
    """Goose's data dirs for this environment, its own first."""
    root = env.get("GOOSE_PATH_ROOT")
    if root and os.path.isabs(root):  # Goose ignores a relative root (Paths::validated_path_root)
        return [Path(root) / "data"]
    xdg = env.get("XDG_DATA_HOME")
    home = user_home(env)
    dirs = [Path(xdg) / "goose" if xdg and os.path.isabs(xdg) else home / ".local" / "share" / "goose"]
    if env.get("APPDATA"):
        dirs.append(Path(env["APPDATA"]) / "Block" / "goose" / "data")
    dirs += [home / "Library" / "Application Support" / "goose", home / ".local" / "share" / "Block" / "goose"]
    return dirs


def jsonl_files(sessions_dir: Path) -> list[Path]:
    """The legacy `<id>.jsonl` session files, regular files only, by name."""
    try:
        return sorted(Path(e.path) for e in os.scandir(sessions_dir) if e.name.endswith(".jsonl") and e.is_file())
    except OSError:
        return []


def has_store(sessions_dir: Path) -> bool:
    return probe(sessions_dir / DB_NAME) or bool(jsonl_files(sessions_dir))


def fingerprint(source: Source) -> str:
    folder = Path(source.path)
    db = folder / DB_NAME
    count = size = newest = 0
    for path in jsonl_files(folder):
        try:
            st = path.stat()
        except OSError:
            continue
        count, size, newest = count + 1, size + st.st_size, max(newest, st.st_mtime_ns)
    return f"{file_fingerprint(str(db), f'{db}-wal')}|jsonl:{count}:{size}:{newest}"


def sessions_dir_of(place: Path) -> Path | None:
    """The sessions dir a user-named place means: a `GOOSE_PATH_ROOT` (`data/sessions`), a data
    dir (`sessions`), the sessions dir itself, or a `sessions.db` / `.jsonl` file in it."""
    if probe(place) and place.is_file():
        return place.parent
    for candidate in (place / "data" / "sessions", place / "sessions", place):
        if has_store(candidate):
            return candidate
    return None


def discover(env, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found, seen = Discovery(), set()
    names = names_carried(project_names)

    def add(folder: Path) -> None:
        real = os.path.realpath(folder)
        if real not in seen:
            seen.add(real)
            # a store of many projects: each row names its own project (the session's working_dir)
            found.sources.append(Source(provider=PROVIDER, path=real, project_path=real,
                                        project=slugify("goose"), identity=real, project_names=names))

    if use_default:
        for data in data_dirs(env):
            try:
                if has_store(data / "sessions"):
                    add(data / "sessions")
            except OSError as exc:
                found.problems.append(f"cannot look at Goose data in {data}: {exc}")
    for place in (Path(p).expanduser() for p in (*extra_roots, *extra_stores)):
        why = unusable(place, "dir") and unusable(place, "file")
        folder = None if why else sessions_dir_of(place)
        if folder is None:
            found.problems.append(f"no Goose sessions (sessions.db or *.jsonl) at {place}"
                                  + (f": it {why}" if why else ""))
        else:
            add(folder)
    return found
