"""Seeded generator of realistic Crush stores (``projects.json`` + per-project ``crush.db``).

Serves the tests, ``agentlake demo`` and the benchmark. Stdlib only. The format is
docs/FORMATS.md, "Crush" (schema and migrations, units, parts JSON, cost and token semantics,
file history).
The ground truth (:class:`DbTruth`) is counted while rows are generated, never read back.

Two write paths:
- the public row writers (``add_session`` ...) insert one row each, for hand-made fixtures;
- :func:`generate_store` buffers rows and writes each db with ``executemany`` in one
  transaction (two when ``checkpoint=False``).
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from transforms.synth.crush_parts import (  # noqa: F401  (part builders are re-exported: the public API is this module)
    GOOSE_DDL, MIGRATIONS, STAGES, DbSim, bash_output, binary_part, encode_parts, finish_part, go_json,
    image_url_part, reasoning_part, shell_command_part, text_part, tool_call_part, tool_result_part,
)

UTC = timezone.utc

__all__ = [
    "STAGES", "create_crush_db", "close_keeping_wal",
    "text_part", "reasoning_part", "tool_call_part", "tool_result_part", "finish_part", "binary_part",
    "image_url_part", "shell_command_part", "bash_output", "encode_parts", "go_json",
    "add_session", "add_message", "add_file", "add_read_file", "write_registry", "rfc3339_nano",
    "DbTruth", "StoreTruth", "generate_store", "project_name",
]

# ---------------------------------------------------------------------------
# schema
# ---------------------------------------------------------------------------


def create_crush_db(path, stage: int = 7) -> sqlite3.Connection:
    """Create a new crush.db the way goose + Crush do, with migrations 001..stage applied.

    Returns an open autocommit connection (WAL, foreign_keys=ON); the caller closes it.
    """
    path = Path(path)
    if path.exists():
        raise FileExistsError(path)
    if not 1 <= stage <= len(MIGRATIONS):
        raise ValueError(f"stage must be 1..{len(MIGRATIONS)}, got {stage}")
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")  # docs/FORMATS.md, "Crush: connection pragmas"
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA synchronous=NORMAL")
    # goose: version table + row 0 in one transaction, then each migration with its version row
    row = "INSERT INTO goose_db_version (version_id, is_applied) VALUES ({}, 1);"
    conn.executescript(f"BEGIN;\n{GOOSE_DDL}\n{row.format(0)}\nCOMMIT;")
    for version, _name, sql in MIGRATIONS[:stage]:
        conn.executescript(f"BEGIN;\n{sql}\n{row.format(version)}\nCOMMIT;")
    return conn


def _columns(conn, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def _insert_sql(table: str, cols) -> str:
    return f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"


# column orders used by both write paths; later stages append columns (docs/FORMATS.md, "Crush: schema and migrations")
_SESSION_COLS = ("id", "parent_session_id", "title", "message_count", "prompt_tokens", "completion_tokens",
                 "cost", "updated_at", "created_at", "summary_message_id", "todos")
_MESSAGE_COLS = ("id", "session_id", "role", "parts", "model", "created_at", "updated_at", "finished_at",
                 "provider", "is_summary_message")
_FILE_COLS = ("id", "session_id", "path", "content", "version", "created_at", "updated_at")
_READ_SQL = ("INSERT INTO read_files (session_id, path, read_at) VALUES (?, ?, ?) "
             "ON CONFLICT(path, session_id) DO UPDATE SET read_at = excluded.read_at")  # RecordFileRead upsert


def _present(conn, table, cols):
    have = set(_columns(conn, table))
    return [c for c in cols if c in have]


# ---------------------------------------------------------------------------
# row writers (one row per call; for hand-made fixtures)
# ---------------------------------------------------------------------------


def add_session(conn, id, *, title, created_at, parent=None, cost=0.0, prompt_tokens=0, completion_tokens=0,
                summary_message_id=None, todos=None, updated_at=None, message_count=0):
    """Insert a sessions row. Columns the stage lacks (summary_message_id <2, todos <6) are skipped.

    Note: an add_message *after* this fires Crush's triggers: message_count +1, and that UPDATE
    sets updated_at to the wall clock (as in real Crush). To keep synthetic timestamps, insert the
    messages first with ``PRAGMA foreign_keys=OFF`` and pass ``message_count`` (what
    generate_store does).
    """
    if todos is not None and not isinstance(todos, str):
        todos = go_json(todos)
    values = dict(zip(_SESSION_COLS, (id, parent, title, message_count, prompt_tokens, completion_tokens, cost,
                                      created_at if updated_at is None else updated_at, created_at,
                                      summary_message_id, todos)))
    cols = _present(conn, "sessions", _SESSION_COLS)
    conn.execute(_insert_sql("sessions", cols), [values[c] for c in cols])


def add_message(conn, id, session_id, role, parts, *, created_at, updated_at=None, finished_at=None, model="",
                provider=None, is_summary=False):
    """Insert a messages row. ``parts`` list -> encode_parts; str -> verbatim (corrupt fixtures)."""
    if not isinstance(parts, str):
        parts = encode_parts(parts)
    values = dict(zip(_MESSAGE_COLS, (id, session_id, role, parts, model, created_at,
                                      created_at if updated_at is None else updated_at, finished_at, provider,
                                      int(is_summary))))
    cols = _present(conn, "messages", _MESSAGE_COLS)
    conn.execute(_insert_sql("messages", cols), [values[c] for c in cols])


def add_file(conn, id, session_id, path, content, version, *, created_at):
    # rows are never updated by Crush, so updated_at == created_at
    conn.execute(_insert_sql("files", _FILE_COLS), (id, session_id, path, content, version, created_at, created_at))


def add_read_file(conn, session_id, path, *, read_at) -> bool:
    """Upsert a read_files row; returns False (and writes nothing) before stage 7."""
    if not _columns(conn, "read_files"):
        return False
    conn.execute(_READ_SQL, (session_id, path, read_at))
    return True


# ---------------------------------------------------------------------------
# projects.json
# ---------------------------------------------------------------------------


def rfc3339_nano(dt: datetime, nanos: int | None = None) -> str:
    """Go's time.Time JSON form in UTC: RFC 3339 with nanoseconds, trailing zeros trimmed."""
    dt = dt.astimezone(UTC)
    ns = dt.microsecond * 1000 if nanos is None else nanos
    frac = f".{ns:09d}".rstrip("0") if ns else ""
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"


def write_registry(global_dir, entries: list[dict], shape: str = "object") -> Path:
    """Write ``<global_dir>/projects.json``. Entries are written in the given order.

    shape "object" is what Crush writes; "array" and "keyed" are shapes some third-party readers
    assume (never written by upstream), useful as negative fixtures.
    """
    rows = []
    for e in entries:
        la = e["last_accessed"]
        rows.append({"path": str(e["path"]), "data_dir": str(e["data_dir"]),
                     "last_accessed": rfc3339_nano(la) if isinstance(la, datetime) else la})
    if shape == "object":
        doc = {"projects": rows}
    elif shape == "array":
        doc = rows
    elif shape == "keyed":
        doc = {e.get("id") or hashlib.sha256(r["path"].encode()).hexdigest()[:16]: r for e, r in zip(entries, rows)}
    else:
        raise ValueError(f"unknown registry shape {shape!r}")
    path = Path(global_dir) / "projects.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    # json.MarshalIndent(..., "", "  "): 2-space indent, no trailing newline
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(ch, esc)
    path.write_text(text)
    path.chmod(0o600)
    return path


# ---------------------------------------------------------------------------
# ground truth
# ---------------------------------------------------------------------------


@dataclass
class DbTruth:
    path: Path  # crush.db
    project_path: Path
    stage: int
    data_dir: Path = None
    sessions: int = 0
    root_sessions: int = 0
    root_cost: float = 0.0  # SUM(cost) WHERE parent_session_id IS NULL (children already included)
    messages: int = 0
    parts_by_type: Counter = field(default_factory=Counter)
    tool_calls_by_name: Counter = field(default_factory=Counter)
    tool_errors: int = 0  # tool_result parts with is_error true
    file_versions: int = 0  # rows in files
    read_files: int = 0  # rows in read_files


@dataclass
class StoreTruth:
    global_dir: Path
    registry_path: Path
    dbs: list[DbTruth]

    @property
    def root_cost(self) -> float:
        return sum(d.root_cost for d in self.dbs)

    @property
    def messages(self) -> int:
        return sum(d.messages for d in self.dbs)

    @property
    def sessions(self) -> int:
        return sum(d.sessions for d in self.dbs)

    @property
    def tool_errors(self) -> int:
        return sum(d.tool_errors for d in self.dbs)

    @property
    def parts_by_type(self) -> Counter:
        return sum((d.parts_by_type for d in self.dbs), Counter())

    @property
    def tool_calls_by_name(self) -> Counter:
        return sum((d.tool_calls_by_name for d in self.dbs), Counter())


# ---------------------------------------------------------------------------
# generate_store
# ---------------------------------------------------------------------------

PROJECT_NAMES = ["webshop", "infra-tools", "ml-pipeline", "docs-site", "mobile-app", "billing-api", "data-etl",
                 "auth-service", "cli-utils", "game-engine", "chat-bot", "search-index"]


def project_name(i: int) -> str:
    base = PROJECT_NAMES[i % len(PROJECT_NAMES)]
    return base if i < len(PROJECT_NAMES) else f"{base}-{i // len(PROJECT_NAMES) + 1}"


def generate_store(global_dir, *, projects=3, sessions_per_project=4, seed=0, stages=(4, 5, 6, 7),
                   start=datetime(2026, 1, 5, tzinfo=UTC), days=3, checkpoint=True, workers=1,
                   long_tail=False) -> StoreTruth:
    """Write a whole Crush store under ``global_dir`` and return what was written.

    Project i gets migration stage ``stages[i % len(stages)]`` and its own RNG stream drawn from
    ``seed``, so the output is identical for any ``workers`` (>1 uses processes, for benchmarks).
    ``checkpoint=False``: the newest ~third of each db's root sessions (with their sub-agents) is
    committed but left only in ``crush.db-wal`` (see :func:`close_keeping_wal`).
    ``long_tail``: projects get unequal shares, as real use does (a few busy projects, many
    quiet ones: ``sessions_per_project * 3 / (1 + i % 10)``, at least 2), their sessions spread
    over ``days`` days.
    """
    global_dir = Path(global_dir)
    master = random.Random(seed)
    def share(i: int) -> int:
        return max(2, round(sessions_per_project * 3 / (1 + i % 10))) if long_tail else sessions_per_project

    jobs = [(global_dir, i, stages[i % len(stages)], master.getrandbits(64), share(i), start, days,
             checkpoint) for i in range(projects)]
    if workers > 1 and projects > 1:
        from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415

        with ProcessPoolExecutor(workers) as pool:
            done = list(pool.map(_make_project, *zip(*jobs)))
    else:
        done = [_make_project(*job) for job in jobs]
    registry = sorted((entry for _t, entry in done), key=lambda e: e["last_accessed"], reverse=True)  # newest first
    reg_path = write_registry(global_dir, registry)
    return StoreTruth(global_dir=global_dir, registry_path=reg_path, dbs=[t for t, _e in done])


def _make_project(global_dir, i, stage, seed, n_sessions, start, days, checkpoint):
    project = global_dir / "projects" / project_name(i)
    data_dir = project / ".crush"
    rng = random.Random(seed)
    truth = DbTruth(path=data_dir / "crush.db", project_path=project, stage=stage, data_dir=data_dir)
    sim = DbSim(rng, stage, str(project), truth)
    last = sim.run(n_sessions, start, days)
    _write_db(truth.path, stage, sim, checkpoint)
    (data_dir / ".gitignore").write_text("*\n")  # Crush drops this into every data dir
    # a relative data_dir is what pre-v0.68 Crush wrote; readers resolve it against path
    entry = {"path": str(project), "data_dir": ".crush" if i % 3 == 2 else str(data_dir),
             "last_accessed": rfc3339_nano(datetime.fromtimestamp(last + rng.randint(5, 3600), UTC),
                                           rng.randrange(1, 10**9))}
    return truth, entry


def _write_db(path: Path, stage: int, sim, checkpoint: bool) -> None:
    conn = create_crush_db(path, stage)
    try:
        if checkpoint:
            _write_rows(conn, sim, 0, len(sim.sessions))
            conn.close()
            return
        conn.execute("PRAGMA wal_autocheckpoint=0")
        cut = sim.split_point()
        _write_rows(conn, sim, 0, cut)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # older history lives in the main file
        _write_rows(conn, sim, cut, len(sim.sessions))
        close_keeping_wal(conn, path)
    except BaseException:
        conn.close()
        raise


def _write_rows(conn, sim, lo: int, hi: int) -> None:
    """Bulk-insert sessions[lo:hi] and everything belonging to them, in one transaction.

    Messages go in *before* their session rows (with foreign keys off): otherwise the
    message_count trigger UPDATEs sessions, which fires update_sessions_updated_at and stamps
    wall-clock "now" into updated_at. Counts are written directly instead (same values).
    """
    if lo >= hi:
        return
    m_lo, f_lo, r_lo = sim.marks[lo]
    end = (len(sim.messages), len(sim.files), len(sim.reads))
    m_hi, f_hi, r_hi = sim.marks[hi] if hi < len(sim.sessions) else end
    s_cols = _present(conn, "sessions", _SESSION_COLS)
    m_cols = _present(conn, "messages", _MESSAGE_COLS)
    n_s, n_m = len(s_cols), len(m_cols)
    conn.execute("PRAGMA foreign_keys=OFF")
    conn.execute("BEGIN")
    conn.executemany(_insert_sql("messages", m_cols), (r[:n_m] for r in sim.messages[m_lo:m_hi]))
    conn.executemany(_insert_sql("files", _FILE_COLS), sim.files[f_lo:f_hi])
    if sim.stage >= 7:
        conn.executemany(_READ_SQL, sim.reads[r_lo:r_hi])
    conn.executemany(_insert_sql("sessions", s_cols), (s.row()[:n_s] for s in sim.sessions[lo:hi]))
    conn.execute("COMMIT")
    conn.execute("PRAGMA foreign_keys=ON")


def close_keeping_wal(conn: sqlite3.Connection, path) -> None:
    """Close ``conn`` but leave its committed-yet-uncheckpointed frames in ``<path>-wal``.

    SQLite checkpoints and deletes the WAL when the last connection closes, whatever
    wal_autocheckpoint says (Python 3.11 cannot set SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE). So we
    snapshot the main file and the WAL while the connection is open (both are consistent then),
    close, and put the snapshots back. The next opener recovers the WAL like after a crash.
    """
    path = Path(path)
    wal = Path(f"{path}-wal")
    db_bytes, wal_bytes = path.read_bytes(), wal.read_bytes() if wal.exists() else b""
    conn.close()
    path.write_bytes(db_bytes)
    wal.write_bytes(wal_bytes)
    Path(f"{path}-shm").unlink(missing_ok=True)  # stale index; rebuilt from the WAL on open
