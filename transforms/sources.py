"""What every provider's discovery returns: sources, their ids, slugs and fingerprints."""

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Source:
    """One store of one agent on this machine (a crush.db, a session folder, ...)."""

    provider: str
    path: str  # the store itself, resolved
    project_path: str
    project: str  # hive key: a slug of the project's name
    skip_reason: str | None = None  # set when the store cannot be read at all (project gone)
    # what makes two paths the same source: the path itself, or an id the agent gives the
    # store (a CodeWhale session id, found under a current or a legacy home)
    identity: str | None = None
    # project names by path, remote or name (config.toml [projects]), for a store that spans
    # several projects and names them at extract time (OpenCode)
    project_names: tuple[tuple[str, str], ...] = ()

    @property
    def source_id(self) -> str:
        return source_id_for(self.provider, self.identity or self.path)

    @property
    def partition_key(self) -> str:
        return f"{self.provider}-{self.project}-{self.source_id[:8]}"


@dataclass
class Discovery:
    """Sources found, plus problems with the places we looked (never fatal)."""

    sources: list[Source] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def source_id_for(provider: str, path: str) -> str:
    return hashlib.sha256(f"{provider}:{path}".encode()).hexdigest()[:16]


_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def slugify(name: str, default: str = "unnamed") -> str:
    """`[a-z0-9-]` only: safe in hive paths, file names and Dagster partition keys."""
    slug = _NOT_SLUG.sub("-", name.lower()).strip("-")
    return slug[:60].strip("-") or default


def file_fingerprint(*paths: str) -> str:
    """Size and mtime of each file ('-' when absent). Cheap: no file is opened.

    A WAL database changes its -wal long before the main file, so callers pass both. An empty
    file counts as absent: a reader opening a WAL database creates an empty -wal, which holds
    nothing new.
    """
    parts = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            parts.append("-")
            continue
        parts.append(f"{st.st_size}:{st.st_mtime_ns}" if st.st_size else "-")
    return "|".join(parts)


def user_home(env) -> Path:
    """The user's home as the agents resolve it: HOME, then the Windows variables."""
    for value in (env.get("HOME"), env.get("USERPROFILE")):
        if value:
            return Path(value)
    if env.get("HOMEDRIVE") and env.get("HOMEPATH"):
        return Path(env["HOMEDRIVE"] + env["HOMEPATH"])
    return Path.home()


def probe(path, kind: str = "file") -> bool:
    """`is_file`/`is_dir` that answers True when it cannot tell (no permission to look).

    The read that follows then fails with the operating system's own reason, recorded for that
    source, instead of discovery crashing or quietly skipping the store.
    """
    try:
        return path.is_file() if kind == "file" else path.is_dir()
    except OSError:
        return True
