"""Seeded Goose session stores for the tests and the demo: a real `sessions.db` (WAL mode, the
table shapes of block/goose `session/migrations.rs` at any schema version 0-13) and legacy
`<id>.jsonl` files. Stdlib only. It counts what it writes, so tests compare the lake to it."""

import json
import random
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

BASE_SESSIONS = """CREATE TABLE sessions (id TEXT PRIMARY KEY, description TEXT NOT NULL DEFAULT '',
  working_dir TEXT NOT NULL, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, extension_data TEXT DEFAULT '{}', total_tokens INTEGER,
  input_tokens INTEGER, output_tokens INTEGER, accumulated_total_tokens INTEGER, accumulated_input_tokens INTEGER,
  accumulated_output_tokens INTEGER, schedule_id TEXT, recipe_json TEXT)"""
BASE_MESSAGES = """CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL, content_json TEXT NOT NULL,
  created_timestamp INTEGER NOT NULL, timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, tokens INTEGER)"""
# what each migration adds (block/goose session/migrations.rs)
MIGRATIONS = {
    1: ["CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)"],
    2: ["ALTER TABLE sessions ADD COLUMN user_recipe_values_json TEXT"],
    3: ["ALTER TABLE messages ADD COLUMN metadata_json TEXT"],
    4: ["ALTER TABLE sessions ADD COLUMN name TEXT DEFAULT ''",
        "ALTER TABLE sessions ADD COLUMN user_set_name BOOLEAN DEFAULT FALSE"],
    5: ["ALTER TABLE sessions ADD COLUMN session_type TEXT NOT NULL DEFAULT 'user'"],
    6: ["ALTER TABLE sessions ADD COLUMN provider_name TEXT", "ALTER TABLE sessions ADD COLUMN model_config_json TEXT"],
    7: ["ALTER TABLE messages ADD COLUMN message_id TEXT"],
    8: ["ALTER TABLE sessions ADD COLUMN goose_mode TEXT NOT NULL DEFAULT 'auto'"],
    9: [],
    10: ["ALTER TABLE sessions ADD COLUMN thread_id TEXT",
         "CREATE TABLE threads (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT 'New Chat', user_set_name BOOLEAN "
         "DEFAULT FALSE, working_dir TEXT, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP "
         "DEFAULT CURRENT_TIMESTAMP, archived_at TIMESTAMP, metadata_json TEXT DEFAULT '{}')",
         "CREATE TABLE thread_messages (id INTEGER PRIMARY KEY AUTOINCREMENT, thread_id TEXT NOT NULL REFERENCES "
         "threads(id), session_id TEXT, message_id TEXT, role TEXT NOT NULL, content_json TEXT NOT NULL, "
         "created_timestamp INTEGER NOT NULL, metadata_json TEXT DEFAULT '{}')"],
    11: [],
    12: ["ALTER TABLE sessions ADD COLUMN archived_at TIMESTAMP", "ALTER TABLE sessions ADD COLUMN project_id TEXT"],
    13: ["ALTER TABLE sessions ADD COLUMN accumulated_cost REAL"],
}


def create_goose_db(path, version: int = 13) -> sqlite3.Connection:
    """An empty `sessions.db` at schema `version`, in WAL mode like Goose's (sqlx, WAL)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(BASE_SESSIONS)
    conn.execute(BASE_MESSAGES)
    for v in range(1, version + 1):
        for sql in MIGRATIONS[v]:
            conn.execute(sql)
        if v >= 1:
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (v,))
    conn.commit()
    return conn


def columns_of(conn, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def add_session(conn, sid: str, working_dir: str, *, name="", created="2026-03-02 09:00:00", updated=None,
                model=None, provider=None, acc=None, last=None, cost=None, session_type="user", **columns) -> None:
    """A sessions row. `acc` and `last` are (input, output, total) counters: accumulated and the
    last call's; columns the schema does not have yet are left out."""
    row = {"id": sid, "description": name, "working_dir": working_dir, "created_at": created,
           "updated_at": updated or created, "name": name, "session_type": session_type,
           "provider_name": provider, "accumulated_cost": cost, **columns}
    if model is not None:
        row["model_config_json"] = json.dumps({"model_name": model, "context_limit": None, "temperature": None})
    for prefix, values in (("accumulated_", acc), ("", last)):
        if values is not None:
            row.update({f"{prefix}input_tokens": values[0], f"{prefix}output_tokens": values[1],
                        f"{prefix}total_tokens": values[2]})
    have = columns_of(conn, "sessions")
    row = {k: v for k, v in row.items() if k in have}
    conn.execute(f"INSERT INTO sessions ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values()))


def add_message(conn, sid: str, role: str, content: list, created: int, *, message_id=None, metadata=None) -> int:
    row = {"session_id": sid, "role": role, "content_json": json.dumps(content), "created_timestamp": created,
           "metadata_json": json.dumps(metadata or {"userVisible": True, "agentVisible": True}),
           "message_id": message_id}
    have = columns_of(conn, "messages")
    row = {k: v for k, v in row.items() if k in have}
    cur = conn.execute(f"INSERT INTO messages ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                       list(row.values()))
    if message_id is None and "message_id" in have:  # Goose's v7 backfill: msg_<session>_<row id>
        conn.execute("UPDATE messages SET message_id = ? WHERE id = ?", (f"msg_{sid}_{cur.lastrowid}", cur.lastrowid))
    return cur.lastrowid


# ---------------------------------------------------------------------------------- content items

def text(value: str) -> dict:
    return {"type": "text", "text": value}


def thinking(value: str) -> dict:
    return {"type": "thinking", "thinking": value, "signature": "sig"}


def tool_request(call_id: str, name: str, arguments: dict) -> dict:
    return {"type": "toolRequest", "id": call_id,
            "toolCall": {"status": "success", "value": {"name": name, "arguments": arguments}}}


def tool_response(call_id: str, output: str, *, is_error=False, legacy=False, failed=None) -> dict:
    if failed is not None:
        result = {"status": "error", "error": failed}
    elif legacy:  # older Goose: the value is the content list itself
        result = {"status": "success", "value": [{"type": "text", "text": output}]}
    else:
        result = {"status": "success", "value": {"content": [{"type": "text", "text": output}], "isError": is_error}}
    return {"type": "toolResponse", "id": call_id, "toolResult": result}


def write_jsonl(path, metadata: dict | None, messages: list[dict]) -> None:
    """A legacy session file: the metadata line, then one message per line."""
    lines = ([json.dumps(metadata)] if metadata is not None else []) + [json.dumps(m) for m in messages]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------- generator

@dataclass
class HomeTruth:
    sessions: int = 0
    messages: int = 0
    parts: int = 0
    tool_calls: int = 0
    tokens: int = 0  # sum of accumulated totals (the lake's usage.total_tokens)
    native_cost: float = 0.0
    by_session: dict = field(default_factory=dict)  # id -> (input, output, total, cost)


def generate_home(home, *, sessions=6, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 3, 2, 9, tzinfo=UTC)) -> HomeTruth:
    """A Goose data dir at `home` (`home/sessions/sessions.db`, schema v13, plus a legacy JSONL
    session and a JSONL copy of an imported one). Every third session has no recorded cost
    (priced by us), the others Goose's own `accumulated_cost`.

    Goose numbers a day's sessions (`20260302_1`), so two machines' ids repeat: what tells them
    apart is the start (warehouse.catalog.checks.copied_sessions matches agent, id and start).
    Each session starts at a minute and second drawn from a stream of its own (`clock`), apart
    from `rng`, whose draws (and so a seed's figures) stay as they were: two demos of other
    seeds landed by two machines are no copies of each other's sessions. The legacy session's id
    is its start, as an older Goose named them (`20260302_091502`)."""
    rng = random.Random(seed)
    clock = random.Random(f"goose start {seed}")
    folder = Path(home) / "sessions"
    conn = create_goose_db(folder / "sessions.db")
    truth = HomeTruth()
    started = {}  # id -> its first message's time
    for n in range(sessions):
        sid = f"{(start + timedelta(days=n)):%Y%m%d}_{n + 1}"
        at = start + timedelta(days=n, hours=rng.randint(0, 8), seconds=clock.randrange(3600))
        t = started[sid] = int(at.timestamp())
        calls = rng.randint(1, 3)
        content = [(("user", [text(f"task {n}")]))]
        for c in range(calls):
            cid = f"toolu_{n}_{c}"
            name = rng.choice(["developer__shell", "developer__text_editor", "github__create_issue"])
            args = {"command": "pytest -q"} if name.endswith("shell") else {"path": f"src/m{c}.py", "command": "view"}
            content.append(("assistant", [thinking("plan"), tool_request(cid, name, args)]))
            content.append(("user", [tool_response(cid, "ok", is_error=rng.random() < 0.2)]))
        content.append(("assistant", [text("done")]))
        for i, (role, items) in enumerate(content):
            add_message(conn, sid, role, items, t + i)
            truth.messages += 1
            truth.parts += len(items)
        inp, out = rng.randint(5_000, 50_000), rng.randint(200, 4_000)
        cost = None if n % 3 == 2 else round(inp * 3e-6 + out * 15e-6, 6)
        add_session(conn, sid, workspaces[n % len(workspaces)], name=f"session {n}",
                    created=at.strftime("%Y-%m-%d %H:%M:%S"),
                    updated=(at + timedelta(minutes=30)).strftime("%Y-%m-%d %H:%M:%S"),
                    model="claude-sonnet-4-5", provider="anthropic", acc=(inp, out, inp + out),
                    last=(inp // 3, out // 3, inp // 3 + out // 3), cost=cost)
        truth.sessions += 1
        truth.tool_calls += calls
        truth.tokens += inp + out
        truth.native_cost += cost or 0.0
        truth.by_session[sid] = (inp, out, inp + out, cost)
    conn.commit()
    conn.close()
    # the legacy file of the first session, left behind after its import: not counted again
    first = next(iter(truth.by_session))
    write_jsonl(folder / f"{first}.jsonl",
                {"description": "session 0", "message_count": 1, "working_dir": workspaces[0]},
                [{"role": "user", "created": started[first], "content": [text("task 0")]}])
    # a session only in JSONL (an older Goose, never imported): tokens but no cost
    legacy_at = start + timedelta(seconds=clock.randrange(3600))
    legacy_id = f"{legacy_at:%Y%m%d_%H%M%S}"
    msgs = [{"id": "m1", "role": "user", "created": int(legacy_at.timestamp()), "content": [text("hello")]},
            {"id": "m2", "role": "assistant", "created": int(legacy_at.timestamp()) + 5, "content": [text("hi")]}]
    write_jsonl(folder / f"{legacy_id}.jsonl",
                {"description": "legacy", "message_count": 2, "working_dir": workspaces[0],
                 "accumulated_input_tokens": 1200, "accumulated_output_tokens": 80, "accumulated_total_tokens": 1280,
                 "total_tokens": 700, "input_tokens": 650, "output_tokens": 50}, msgs)
    truth.sessions += 1
    truth.messages += 2
    truth.parts += 2
    truth.tokens += 1280
    truth.by_session[legacy_id] = (1200, 80, 1280, None)
    return truth
