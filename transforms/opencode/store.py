"""Read one OpenCode source into plain records: each database through a consistent snapshot,
then the legacy `storage/` JSON, merged by id (docs/FORMATS.md,
"OpenCode: location").

After an upgrade to >= v1.2 the JSON files stay beside the database that now holds the same
rows, so each session, message and part is kept once: a database row wins over a JSON file,
`opencode.db` over a channel database, and a readable record over an unreadable copy. A
message's parts come from the same place as the message. Unreadable records are kept (with
`error` set) for the quarantine, never dropped.
"""

import os
import sqlite3
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from transforms import jsontext
from transforms.opencode.discover import MAIN_DB, db_files, is_db_name, legacy_files
from transforms.provider import SourceError
from transforms.snapshot import SnapshotError, decode_text, open_snapshot, take_snapshot
from transforms.sources import unusable

TABLES = ("session", "message", "part")


@dataclass
class Record:
    """One session, message or part as stored, from a database row or a legacy JSON file."""

    kind: str  # session / message / part
    id: str
    owner: str | None  # a message's session, a part's message; a session's parent
    data: dict | None  # the JSON object (message info, part); None when unreadable
    raw: str  # the text as stored, for the quarantine
    source_table: str  # `message`, `opencode-dev.db:message`, `storage/part/<msg>/<id>.json`
    rowid: int
    columns: dict = field(default_factory=dict)  # the database row's other columns
    error: str | None = None
    origin: str = ""  # which database, or `storage`: a message's parts come from its origin

    def column(self, name: str):
        """A database column (`parent_id`, `time_created`, ...), or the same field of a legacy
        file's object (`parentID`, `time.created`, ...)."""
        if self.origin != "storage":
            return self.columns.get(name)
        value = self.data
        for key in _JSON_NAMES.get(name, (name,)):
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def session_extras(self) -> tuple[dict, list[str]]:
        """A session's fields that have no column of their own (the session-level cost and token
        aggregates among them: kept, never added), and the names OpenCode is not known to write."""
        if self.origin == "storage":
            data = _dict(self.data)
            return ({k: v for k, v in data.items() if k not in ("id", "parentID", "directory", "title", "time")},
                    sorted(k for k in data if k not in SESSION_KEYS))
        return ({k: v for k, v in self.columns.items()
                 if k not in ("parent_id", "directory", "title", "time_created", "time_updated")},
                sorted(k for k in self.columns if k not in SESSION_COLUMNS))

    @property
    def created_ms(self):
        """Creation time (epoch ms): the object's own `time.created`, else the row's column."""
        for value in (_dict(_dict(self.data).get("time")).get("created"), self.columns.get("time_created")):
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None

    @property
    def session_id(self) -> str | None:
        if self.kind == "session":
            return self.id
        if self.kind == "message":
            return self.owner
        return _str(self.columns.get("session_id")) or _str((self.data or {}).get("sessionID"))


@dataclass
class Store:
    sessions: dict[str, Record] = field(default_factory=dict)
    messages: dict[str, Record] = field(default_factory=dict)
    parts: dict[str, list[Record]] = field(default_factory=dict)  # by message id, ordered by part id
    superseded: list[Record] = field(default_factory=list)  # unreadable copies of records kept elsewhere
    duplicates: Counter = field(default_factory=Counter)  # readable copies dropped, by kind
    notes: list[str] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (place, why) it could not be read


# what OpenCode writes (docs/FORMATS.md, "OpenCode: record shapes"): anything else is reported as unknown
SESSION_COLUMNS = frozenset({
    "project_id", "workspace_id", "parent_id", "slug", "directory", "path", "title", "version", "share_url",
    "summary_additions", "summary_deletions", "summary_files", "summary_diffs", "cost", "tokens_input",
    "tokens_output", "tokens_reasoning", "tokens_cache_read", "tokens_cache_write", "revert", "permission",
    "goal", "agent", "model", "time_created", "time_updated", "time_compacting", "time_archived"})
SESSION_KEYS = frozenset({"id", "projectID", "workspaceID", "parentID", "slug", "directory", "path", "title",
                          "version", "share", "summary", "revert", "permission", "time"})
# legacy JSON names of the database columns we read
_JSON_NAMES = {"parent_id": ("parentID",), "time_created": ("time", "created"), "time_updated": ("time", "updated")}
# a record that holds JSON but no object: its quarantine row names the type in brackets
NOT_AN_OBJECT = "not a JSON object ({})"


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _str(value) -> str | None:
    return value if isinstance(value, str) and value else None


# ---------------------------------------------------------------------------------- databases

def read_database(db: Path, workdir: Path) -> list[Record]:
    """Every session, message and part row of one database, read from a snapshot of it (WAL
    included); the database itself is opened read-only and never written."""
    snap = Path(workdir) / f"{db.name}.snapshot"
    try:
        take_snapshot(str(db), snap)
        return _read_snapshot(snap, db.name)
    finally:
        snap.unlink(missing_ok=True)


def _read_snapshot(snap: Path, db_name: str) -> list[Record]:
    prefix = "" if db_name == MAIN_DB else f"{db_name}:"
    try:
        conn, _ = open_snapshot(snap, TABLES, "an OpenCode")
        with closing(conn):
            out = []
            for table in TABLES:
                cur = conn.execute(f'SELECT rowid, * FROM "{table}" ORDER BY rowid')
                cols = [d[0] for d in cur.description]
                out += [_db_record(table, dict(zip(cols, row)), prefix + table, db_name) for row in cur]
            return out
    except sqlite3.DatabaseError as exc:
        raise SnapshotError(f"snapshot of {db_name} unreadable: {exc}") from None


def _db_record(table: str, row: dict, source_table: str, origin: str) -> Record:
    row = {k: decode_text(v) if isinstance(v, bytes) else v for k, v in row.items()}  # a BLOB where text belongs
    rowid = row.pop("rowid")
    rid = str(row.pop("id"))
    if table == "session":
        return Record("session", rid, _str(row.get("parent_id")), row, jsontext.dumps(row), source_table,
                      rowid, row, origin=origin)
    text = row.pop("data")
    text = text if isinstance(text, str) else str(text)
    data, error = jsontext.parse_object(text, NOT_AN_OBJECT)
    owner = row.get("session_id") if table == "message" else row.get("message_id")
    return Record(table, rid, _str(owner), data, text, source_table, rowid, row, error, origin)


# ---------------------------------------------------------------------------------- legacy JSON

def read_legacy(data_dir: Path) -> list[Record]:
    """`storage/{session,message,part}/<owner>/<id>.json`. Ids come from the file paths, as
    OpenCode's own migration takes them (files may have been moved between owners)."""
    out = []
    for kind, owner, path in legacy_files(data_dir):
        rel = path.relative_to(data_dir).as_posix()
        why = unusable(path, "file")  # a folder or a pipe by a record's name is never opened
        try:
            if why:
                raise OSError(f"{path} {why}")
            text = decode_text(path.read_bytes())
        except OSError as exc:
            out.append(Record(kind, path.stem, owner, None, "", rel, 0, error=f"unreadable file: {exc}",
                              origin="storage"))
            continue
        data, error = jsontext.parse_object(text, NOT_AN_OBJECT)
        record = Record(kind, path.stem, owner, data, text, rel, 0, error=error, origin="storage")
        if kind == "session":  # sessions sit under their project; the parent is in the file
            record.owner = _str((data or {}).get("parentID"))
        out.append(record)
    return out


# ---------------------------------------------------------------------------------- merging

def read_store(path: Path, workdir: Path) -> Store:
    """A data dir (its databases and legacy JSON) or a single database.

    A data dir whose `opencode.db` cannot be read fails whole: its rows win over every other
    copy, so read without it the older copies of its sessions (the legacy JSON left by the
    migration, a channel database) would replace the lake's rows of them, and the run would
    look fine. The lake keeps the source's rows as they were, and the run fails (exit 1) naming
    the file. A channel database that cannot be read is skipped with a warning and a quarantine
    row: opencode.db's rows win over it, and the lake keeps its sessions."""
    is_dir = path.is_dir()
    main = path / MAIN_DB
    odd = unusable(main, "file") if is_dir and os.path.lexists(main) else None  # a folder or a pipe by that name
    if odd:
        raise SourceError(f"{main} {odd}; the data dir is not read without it (its sessions' "
                          "older copies would stand in for them): the lake keeps this source's rows as they were")
    databases = db_files(path) if is_dir else [path]
    store, batches = Store(), []
    if is_dir:  # a channel database's name on a folder or a pipe: said as one that cannot be read
        odd_channels = ((path / name, unusable(path / name, "file")) for name in _channel_names(path))
        store.problems += [(str(db), f"{db} {why}") for db, why in odd_channels if why]
    for db in databases:
        try:
            batches.append(read_database(db, workdir))
        except SourceError as exc:
            if is_dir and db.name == MAIN_DB:
                raise SourceError(f"{exc}; the data dir is not read without it (its sessions' older copies would "
                                  "stand in for them): the lake keeps this source's rows as they were") from exc
            store.problems.append((str(db), str(exc)))
    if is_dir:
        batches.append(read_legacy(path))
    if store.problems and len(store.problems) == len(databases) and not any(batches):
        raise SourceError("; ".join(why for _, why in store.problems))
    _merge(store, [r for batch in batches for r in batch])
    return store


def _channel_names(data_dir: Path) -> list[str]:
    try:
        return sorted(e.name for e in os.scandir(data_dir) if is_db_name(e.name) and e.name != MAIN_DB)
    except OSError:
        return []


def _merge(store: Store, records: list[Record]) -> None:
    """Records come in precedence order. Sessions and messages: the first readable copy wins,
    an unreadable one only for an id no readable copy has. Parts: those of the place the
    message was taken from (another copy's parts are that copy's)."""
    winners: dict[tuple[str, str], Record] = {}
    for record in sorted((r for r in records if r.kind != "part"), key=lambda r: r.error is not None):
        key = (record.kind, record.id)  # the sort is stable: precedence is kept among equals
        if key not in winners:
            winners[key] = record
            (store.sessions if record.kind == "session" else store.messages)[record.id] = record
        else:
            _drop(store, record)
    parts: dict[str, list[Record]] = {}
    for record in records:
        if record.kind == "part":
            parts.setdefault(record.owner or "", []).append(record)
    for message_id, group in parts.items():
        origin = store.messages[message_id].origin if message_id in store.messages else group[0].origin
        own: dict[str, Record] = {}
        for record in group:
            if record.origin == origin and record.id not in own:
                own[record.id] = record
            else:
                _drop(store, record)
        store.parts[message_id] = sorted(own.values(), key=lambda r: r.id)  # part ids sort in time
    for kind, n in sorted(store.duplicates.items()):
        store.notes.append(f"{n} {kind} record(s) found in more than one place (database, legacy JSON): "
                           "counted once")


def _drop(store: Store, record: Record) -> None:
    if record.error is not None:
        store.superseded.append(record)  # still quarantined: nothing unreadable goes unreported
    else:
        store.duplicates[record.kind] += 1
