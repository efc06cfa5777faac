"""Read one Goose sessions dir into plain records: `sessions.db` through a consistent snapshot
(WAL included, never written), then the legacy `<id>.jsonl` files of sessions the database does
not hold. Goose imports every JSONL session into the new database when it creates it
(`SessionStorage::import_legacy`) and leaves the files in place: a session in both is the
database's (counted once, the copy noted).

The database (block/goose `session/migrations.rs`, schema versions 0-13): `sessions` (one row per
session: `working_dir`, `name`/`description`, `session_type`, `created_at`/`updated_at` as UTC
text, token counters, `provider_name` and `model_config_json` from v6, `archived_at` and
`project_id` from v12, `accumulated_cost` from v13), `messages` (`session_id`, `role`,
`content_json` = the message's content list, `created_timestamp` in epoch seconds,
`metadata_json` from v3, `message_id` from v7) and `schema_version`.
A JSONL file: a first line of session metadata (`description`, `message_count`, the token
counters, `working_dir`), then one message per line (`{"id", "role", "created", "content"}`).
"""

import sqlite3
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from transforms import jsontext
from transforms.goose.discover import DB_NAME, jsonl_files
from transforms.snapshot import SnapshotError, decode_text, open_snapshot, take_snapshot


@dataclass
class Message:
    rowid: int  # the messages row, or the JSONL line number
    message_id: str | None
    role: str | None
    created: object  # epoch seconds as stored
    content: list | None  # the content items; None when unreadable
    raw: str  # content text (database) or the whole line (JSONL), for the quarantine
    metadata: dict | None = None
    columns: dict = field(default_factory=dict)  # other columns or keys, kept in extra_columns
    error: str | None = None
    table: str = "messages"  # `messages`, `thread_messages`, or the JSONL file name


@dataclass
class Session:
    id: str
    columns: dict  # the sessions row, or the JSONL metadata line
    source_table: str  # `sessions` or the JSONL file name
    rowid: int
    messages: list[Message] = field(default_factory=list)


@dataclass
class Store:
    sessions: list[Session] = field(default_factory=list)
    schema_version: int | None = None
    has_cost_column: bool = False  # `accumulated_cost` (v13): this Goose records costs
    bad_lines: list[tuple[str, int, str, str]] = field(default_factory=list)  # (file, line, error, text)
    notes: list[str] = field(default_factory=list)


def parse_list(text) -> tuple[list | None, str | None]:
    try:
        value = jsontext.loads(text if isinstance(text, str) else decode_text(bytes(text)))
    except (ValueError, RecursionError, TypeError) as exc:
        return None, f"not valid JSON: {exc}"[:300]
    return (value, None) if isinstance(value, list) else (None, f"not a JSON list ({type(value).__name__})")


def _object(text) -> dict | None:
    try:
        value = jsontext.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


# ---------------------------------------------------------------------------------- database

MESSAGE_COLUMNS = ("id", "session_id", "role", "content_json", "created_timestamp", "metadata_json", "message_id")


def read_database(db: Path, workdir: Path, store: Store) -> None:
    snap = Path(workdir) / "goose-sessions.snapshot"
    try:
        take_snapshot(str(db), snap)
        conn, tables = open_snapshot(snap, ("sessions", "messages"), "a Goose sessions")
        with closing(conn):
            _read_snapshot(conn, tables, store)
    except sqlite3.DatabaseError as exc:
        raise SnapshotError(f"snapshot of {db} unreadable: {exc}") from None
    finally:
        snap.unlink(missing_ok=True)


def _rows(conn, sql: str) -> list[dict]:
    cur = conn.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur]


def _read_snapshot(conn, tables: set[str], store: Store) -> None:
    if "schema_version" in tables:
        store.schema_version = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
    store.has_cost_column = any(r[1] == "accumulated_cost" for r in conn.execute("PRAGMA table_info(sessions)"))
    by_id: dict[str, Session] = {}
    for row in _rows(conn, "SELECT rowid AS _rowid, * FROM sessions ORDER BY rowid"):
        rowid = row.pop("_rowid")
        session = Session(str(row["id"]), row, "sessions", rowid)
        by_id[session.id] = session
        store.sessions.append(session)
    # Goose reads a conversation back in insertion order (ORDER BY timestamp, then id)
    for row in _rows(conn, "SELECT rowid AS _rowid, * FROM messages ORDER BY session_id, rowid"):
        _owner(by_id, row, store).messages.append(_db_message(row, "messages"))
    if "thread_messages" in tables:
        _read_thread_messages(conn, by_id, store)


def _db_message(row: dict, table: str) -> Message:
    rowid = row.pop("_rowid")
    text = row.get("content_json")
    content, error = parse_list(text)
    raw = text if isinstance(text, str) else decode_text(bytes(text or b""))
    return Message(rowid, row.get("message_id"), row.get("role"), row.get("created_timestamp"), content, raw,
                   _object(row.get("metadata_json")),
                   {k: v for k, v in row.items() if k not in MESSAGE_COLUMNS}, error, table)


def _owner(by_id: dict[str, Session], row: dict, store: Store) -> Session:
    sid = str(row.get("session_id"))
    if sid not in by_id:  # a message whose session row is gone: kept under a stand-in session
        by_id[sid] = Session(sid, {}, "messages", 0)
        store.sessions.append(by_id[sid])
        store.notes.append(f"messages of session {sid} have no sessions row")
    return by_id[sid]


def _read_thread_messages(conn, by_id: dict[str, Session], store: Store) -> None:
    """Schema v10 added `threads` and `thread_messages` (a thread spans sessions). A thread message
    that is a copy of a session's message (same session and `message_id`) is counted once (the
    `messages` row); one that is not is kept, under its session."""
    known = {(s.id, m.message_id) for s in by_id.values() for m in s.messages if m.message_id}
    copies = 0
    for row in _rows(conn, "SELECT rowid AS _rowid, * FROM thread_messages ORDER BY rowid"):
        if row.get("session_id") is None:
            row["session_id"] = f"thread:{row.get('thread_id')}"
        if (str(row["session_id"]), row.get("message_id")) in known:
            copies += 1
            continue
        _owner(by_id, row, store).messages.append(_db_message(row, "thread_messages"))
    if copies:
        store.notes.append(f"{copies} thread_messages rows copy a session's message: counted once")


# ---------------------------------------------------------------------------------- legacy JSONL

def is_metadata(obj) -> bool:
    """Goose's own test (`SessionMetadata` deserialises): `description` and `message_count`."""
    return isinstance(obj, dict) and "description" in obj and "message_count" in obj and "role" not in obj


def read_jsonl(path: Path, store: Store) -> Session | None:
    try:
        data = path.read_bytes()
    except OSError as exc:
        store.bad_lines.append((path.name, 0, f"unreadable file: {exc}", ""))
        return None
    session = Session(path.stem, {}, path.name, 0)
    for no, text, value, _ in jsontext.json_lines(data):
        obj = value if isinstance(value, dict) else None  # not JSON, or not an object: the same to Goose
        if no == 0 and is_metadata(obj):
            session.columns = obj
            continue
        if obj is None:
            store.bad_lines.append((path.name, no, "not a JSON object", text))
            continue
        content = obj.get("content")
        session.messages.append(Message(
            no, obj.get("id") if isinstance(obj.get("id"), str) else None, obj.get("role"), obj.get("created"),
            content if isinstance(content, list) else None, text,
            obj.get("metadata") if isinstance(obj.get("metadata"), dict) else None,
            {k: v for k, v in obj.items() if k not in ("id", "role", "created", "content", "metadata")},
            None if isinstance(content, list) else "no content list", path.name))
    return session


def read_store(folder: Path, workdir: Path) -> Store:
    store = Store()
    db = folder / DB_NAME
    if db.exists():
        read_database(db, workdir, store)
    in_db = {s.id for s in store.sessions}
    copies = 0
    for path in jsonl_files(folder):
        if path.stem in in_db:
            copies += 1  # imported into the database when it was created: the database's copy counts
            continue
        session = read_jsonl(path, store)
        if session is not None:
            store.sessions.append(session)
    if copies:
        store.notes.append(f"{copies} legacy .jsonl session(s) also in sessions.db: counted once (the database's)")
    return store
