"""Find every crush.db: the registry (projects.json) in Crush's global data dir, plus extras.

Discovery never opens a database, and never reads Crush's global crush.json (it can hold
credentials): only projects.json.
"""

import json
import os
from collections.abc import Mapping
from pathlib import Path

from transforms.projects import project_name
from transforms.sources import Discovery, Source, probe, unusable

PROVIDER = "crush"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ("CRUSH_GLOBAL_DATA", "LOCALAPPDATA", "USERPROFILE", "XDG_DATA_HOME")
DB_NAME = "crush.db"


def global_data_dir(env=os.environ, platform: str = os.name) -> Path:
    """Crush's global data dir, resolved exactly as Crush does
    (docs/FORMATS.md, "Crush: the registry resolution")."""
    if env.get("CRUSH_GLOBAL_DATA"):
        return Path(env["CRUSH_GLOBAL_DATA"])
    if env.get("XDG_DATA_HOME"):
        return Path(env["XDG_DATA_HOME"]) / "crush"
    if platform == "nt":
        if env.get("LOCALAPPDATA"):
            return Path(env["LOCALAPPDATA"]) / "crush"
        return Path(env.get("USERPROFILE", "~")).expanduser() / "AppData" / "Local" / "crush"
    return Path(env.get("HOME") or Path.home()) / ".local" / "share" / "crush"


class RegistryError(ValueError):
    pass


def read_registry(path: Path) -> list[dict]:
    """Entries of projects.json. Accepts the real `{"projects": [...]}` shape, a bare array,
    and an object keyed by project id."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryError(f"cannot read Crush registry {path}: {exc}") from None
    except ValueError as exc:
        raise RegistryError(f"Crush registry {path} is not valid JSON: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("projects"), list):
        entries = data["projects"]
    elif isinstance(data, list):
        entries = data
    elif isinstance(data, dict):
        entries = list(data.values())
    else:
        raise RegistryError(f"Crush registry {path} has an unknown shape ({type(data).__name__})")
    return entries


def _source(db: Path, project_path: Path, skip_reason: str | None = None, names: Mapping[str, str] | None = None) -> Source:
    return Source(
        provider=PROVIDER,
        path=str(db),
        project_path=str(project_path),
        project=project_name(str(project_path), names or {}),
        skip_reason=skip_reason,
    )


def from_registry(global_dir: Path, seen: set, found: Discovery, names: Mapping[str, str] | None = None,
                  explicit: bool = False) -> None:
    """The stores a global data dir's projects.json lists. A place that cannot be read is a
    problem, named with its path: a registry that is a directory, a device, a symlink loop; and,
    for a dir named explicitly (--crush-root, extra_roots), one that is missing or has no
    registry. Crush's own default dir is only looked at when it exists."""
    registry = global_dir / "projects.json"
    why = unusable(global_dir, "dir")
    if why:
        if explicit or why != "does not exist":
            found.problems.append(f"Crush global data dir {global_dir} {why}")
        return
    why = unusable(registry, "file")
    if why == "does not exist":
        if explicit:
            found.problems.append(f"no Crush registry (projects.json) in {global_dir}")
        return
    if why:  # never read: a link to /dev/zero or a FIFO would never end
        found.problems.append(f"Crush registry {registry} {why}")
        return
    try:
        entries = read_registry(registry)
    except RegistryError as exc:
        found.problems.append(str(exc))
        return
    by_data_dir: dict[str, list[tuple[Path, Path]]] = {}
    for i, entry in enumerate(entries):
        try:
            project, data_dir = entry_paths(entry)
        except (ValueError, TypeError, RuntimeError) as exc:  # one bad entry never hides the others
            found.problems.append(f"Crush registry {registry}: entry {i} ignored: {exc}")
            continue
        # several projects can share one data dir (Crush searches upward for .crush)
        by_data_dir.setdefault(os.path.realpath(data_dir), []).append((project, data_dir))
    for key, candidates in by_data_dir.items():
        if key in seen:
            continue
        seen.add(key)
        db = Path(key) / DB_NAME
        project = project_of(Path(key), candidates)
        refused = symlink_escape(candidates[0][1] / DB_NAME, candidates[0][0])
        if refused:
            found.sources.append(_source(db, project, refused, names))
        elif probe(db):
            found.sources.append(_source(db, project, None, names))
        elif not probe(project, "dir"):
            found.sources.append(_source(db, project, "project directory is gone", names))
        else:  # nothing there, or something that is not a file (a folder named crush.db)
            there = candidates[0][1] / DB_NAME
            why = f"{there} {unusable(there, 'file')}" if os.path.lexists(there) else f"no {DB_NAME} in {candidates[0][1]}"
            found.sources.append(_source(db, project, why, names))


def symlink_escape(db: Path, project: Path) -> str | None:
    """Why a store must be refused: it sits inside its project by name, but a symlink takes it
    outside (a planted link could make us read any SQLite file on the machine)."""
    lexical, real = os.path.abspath(db), os.path.realpath(db)
    if lexical == real:
        return None
    project_lexical, project_real = os.path.abspath(project), os.path.realpath(project)
    inside_by_name = os.path.commonpath([lexical, project_lexical]) == project_lexical
    inside_really = os.path.commonpath([real, project_real]) == project_real
    if inside_by_name and not inside_really:
        return f"refused: {lexical} is a symlink to {real}, outside its project {project_lexical}"
    return None


def entry_paths(entry) -> tuple[Path, Path]:
    """(project dir, data dir) of one registry entry; ValueError says what is wrong with it."""
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or not entry["path"]:
        raise ValueError("no path")
    data_dir = entry.get("data_dir") or ".crush"
    if not isinstance(data_dir, str):
        raise ValueError(f"data_dir is a {type(data_dir).__name__}, not a path")
    project, data = Path(entry["path"]).expanduser(), Path(data_dir).expanduser()
    if not data.is_absolute():  # before Crush v0.68 it could be relative to the project
        if not project.is_absolute():
            raise ValueError(f"path {entry['path']!r} and data_dir {data_dir!r} are both relative")
        data = project / data
    if not project.is_absolute():  # Crush records --cwd as given; the data dir says where it was
        project = data.parent if data.name == ".crush" else data
    return project, data


def project_of(data_dir: Path, candidates: list[tuple[Path, Path]]) -> Path:
    """The project a data dir belongs to, stable whichever registry entry was used last.

    A `.crush` dir belongs to the directory holding it (the repository root, when Crush found
    it by searching upward); a custom data dir to the newest entry whose directory exists.
    """
    if data_dir.name == ".crush":
        return data_dir.parent
    return next((p for p, _ in candidates if probe(p, "dir")), candidates[0][0])


def from_path(path: Path, seen: set, found: Discovery, names: Mapping[str, str] | None = None) -> None:
    """An explicitly named crush.db, data dir, or project dir (holding .crush/crush.db)."""
    path = Path(os.path.abspath(Path(path).expanduser()))
    if probe(path, "dir") and not probe(path):
        db = path / DB_NAME if probe(path / DB_NAME) else path / ".crush" / DB_NAME
    else:
        db = path
    if not probe(db):
        found.problems.append(f"no Crush database at {path}")
        return
    data_dir = db.parent
    key = os.path.realpath(data_dir)
    if key in seen:
        return
    seen.add(key)
    project = data_dir.parent if data_dir.name == ".crush" else data_dir
    # the resolved path keeps source_id stable however the store is reached (symlinks)
    found.sources.append(_source(Path(key) / db.name, project, symlink_escape(db, project), names))


def discover(env=os.environ, extra_roots=(), extra_dbs=(), use_default=True, project_names=None) -> Discovery:
    found = Discovery()
    seen: set = set()
    roots = [(global_data_dir(env), False)] if use_default else []
    roots += [(Path(r).expanduser(), True) for r in extra_roots]
    for root, explicit in roots:
        from_registry(root, seen, found, project_names or {}, explicit)
    for db in extra_dbs:
        from_path(Path(db), seen, found, project_names or {})
    return found
