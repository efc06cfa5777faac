"""Find Antigravity's stores (closed source: the places come from the peers' readers, see
transforms.antigravity.normalise).

The CLI (`agy`): one SQLite database per conversation, `<home>/.gemini/antigravity-cli/
conversations/<uuid>.db` (home: `$HOME`, `%USERPROFILE%` on Windows). One source is one database,
identified by the conversation's uuid. Its project is the workspace the database names (the one
`trajectory_metadata_blob` row), read here, read-only, as Codex, Amp or Kilo read a session's
working directory: the source is named after the project its rows land in (a database that names
none, or cannot be opened, is `unknown`; its extract says why). The IDE's
`<home>/.gemini/antigravity/conversations/*.pb` are not readable (no peer decodes them from disk):
discovery reports them, never opens them.
"""

import os
import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

from transforms.antigravity.normalise import session_meta
from transforms.projects import project_name
from transforms.sources import Discovery, Source, named_homes, named_stores, names_carried, user_home

PROVIDER = "antigravity"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ()


def cli_dir(env) -> Path:
    return user_home(env) / ".gemini" / "antigravity-cli" / "conversations"


def ide_dir(env) -> Path:
    return user_home(env) / ".gemini" / "antigravity" / "conversations"


def databases(folder: Path) -> list[Path]:
    if (folder / "conversations").is_dir():
        folder = folder / "conversations"
    return sorted(p for p in folder.glob("*.db") if p.is_file()) if folder.is_dir() else []


def workspace_of(db: Path) -> str:
    """The workspace the conversation database names, "" when none can be read. One row, read
    only, never waiting long on a lock: discovery reads every database each run. A database with
    no `-wal` or `-shm` beside it (its agent not writing it) is opened `immutable`: SQLite would
    make those two files in the agent's folder for a `mode=ro` reader."""
    quiet = not any(Path(f"{db}{suffix}").exists() for suffix in ("-wal", "-shm"))
    mode = "immutable=1" if quiet else "mode=ro"
    try:
        with closing(sqlite3.connect(f"file:{quote(str(db))}?{mode}", uri=True, timeout=1.0)) as conn:
            row = conn.execute("SELECT data FROM trajectory_metadata_blob LIMIT 1").fetchone()
    except sqlite3.Error:  # not Antigravity's, locked, unreadable: the extract reports it
        return ""
    return session_meta(row[0] if row and isinstance(row[0], bytes) else None)[1] or ""


def discover(env=os.environ, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found = Discovery()
    dbs: list[Path] = []
    if use_default:
        dbs += databases(cli_dir(env))
        ide = ide_dir(env)
        pb = sorted(ide.glob("*.pb")) if ide.is_dir() else []
        if pb:
            found.problems.append(f"{len(pb)} Antigravity IDE conversations in {ide} are not readable: their "
                                  "files are not a format any reader decodes (only the running IDE serves them)")
    for here in named_homes(extra_roots, found.problems, holds="Antigravity CLI conversations", find=databases,
                            lacking="no *.db file"):
        dbs += here
    dbs += named_stores(extra_stores, found.problems, "Antigravity CLI conversation")
    seen: set[str] = set()
    for db in dict.fromkeys(Path(os.path.realpath(p)) for p in dbs):
        if db.stem not in seen:
            seen.add(db.stem)
            workspace = workspace_of(db)
            # the names carried too: the extract names the rows' project from the database again
            found.sources.append(Source(provider=PROVIDER, path=str(db), project_path=workspace,
                                        project=project_name(workspace, project_names or {}), identity=db.stem,
                                        project_names=names_carried(project_names)))
    return found
