"""Facts and checks over the whole lake, as the central deployment sees it.

A machine lands only its own sources; only a reader of the whole lake sees what lies between
them: a key written twice (a landing folder copied by hand, one store ingested under two user
names), children whose parent row is missing, and machines that stopped reporting. The tables'
checks in Dagster (pipelines/defs/warehouse) use the same functions, per source.

Every function takes a connection to the catalog (warehouse.lake.ducklake.connect), so the same code
runs over a directory lake and an S3 lake.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from transforms.contract import ALL_TABLES
from warehouse.lake import ducklake
from warehouse.lake.scratch_dirs import scratch

# table -> key columns that must be unique within a source
KEYS = {
    "sessions": ("session_id",),
    "messages": ("message_id",),
    "parts": ("message_id", "part_index"),
    "file_versions": ("file_id",),
    "read_files": ("session_id", "path_raw"),
}
# (child table, column) -> (parent table, column): every child must find its parent
REFERENCES = {
    ("messages", "session_id"): ("sessions", "session_id"),
    ("parts", "message_id"): ("messages", "message_id"),
    ("tool_calls", "session_id"): ("sessions", "session_id"),
    ("file_versions", "session_id"): ("sessions", "session_id"),
    ("read_files", "session_id"): ("sessions", "session_id"),
}

# A key is unique within a source, so the source is part of it. The user is not: one store
# read under two user names counts its sessions twice.
SOURCE = ("machine", "source_id")
LAKE_KEYS = {table: SOURCE + cols for table, cols in KEYS.items()}


@dataclass(frozen=True)
class LakeFacts:
    rows: dict[str, int]  # per table
    machines: list[str]
    users: list[str]
    last_runs: dict[str, datetime]  # machine -> its latest `sources.run_at` (naive UTC)


def _quoted(cols) -> str:
    return ", ".join(f'"{c}"' for c in cols)


def row_counts(con) -> dict[str, int]:
    return count_rows(con, [t.name for t in ALL_TABLES])


def count_rows(con, tables: list[str], schema: str = "") -> dict[str, int]:
    """Rows per table, in one statement: each statement pays DuckLake's catalog lookups again
    (docs/BENCHMARKS.md, "Figures behind the code's choices")."""
    prefix = f"{schema}." if schema else ""
    sql = " UNION ALL ".join(f"SELECT {i} AS i, COUNT(*) FROM {prefix}\"{name}\"" for i, name in enumerate(tables))
    counts = dict(con.execute(sql).fetchall())
    return {name: counts[i] for i, name in enumerate(tables)}


def last_runs(con) -> dict[str, datetime]:
    """Each machine's latest run, from the run log every ingestion appends to."""
    rows = con.execute('SELECT machine, MAX(run_at) FROM sources GROUP BY machine ORDER BY machine').fetchall()
    return dict(rows)


def lake_facts(con) -> LakeFacts:
    users = [u for (u,) in con.execute('SELECT DISTINCT "user" FROM sources ORDER BY 1').fetchall()]
    runs = last_runs(con)
    return LakeFacts(rows=row_counts(con), machines=sorted(runs), users=users, last_runs=runs)


def _only(source_ids, alias: str = "") -> tuple[str, list]:
    """A filter to some sources (the ones a merge just replaced), or none for the whole lake:
    keys and parents are per source, so checking the changed ones is checking what changed."""
    if source_ids is None:
        return "", []
    column = f'{alias}."source_id"' if alias else '"source_id"'
    return f" AND {column} IN (SELECT UNNEST(?::VARCHAR[]))", [sorted(source_ids)]


def duplicate_keys(con, source_ids=None) -> dict[str, int]:
    """Rows whose lake-wide key repeats, per table (0 everywhere when all is well)."""
    out = {}
    where, params = _only(source_ids)
    for table, cols in LAKE_KEYS.items():
        sql = f'SELECT COUNT(*) - COUNT(DISTINCT ({_quoted(cols)})) FROM "{table}" WHERE true{where}'
        out[table] = con.execute(sql, params).fetchone()[0]
    return out


def copied_sessions(con, source_ids=None) -> list[tuple[str, str, int]]:
    """(lander, other lander, root sessions) for root sessions that two landers (a machine and
    its user) both landed: the same agent, session id and start time, as in a store copied to a
    new laptop, or a machine or a user ingested again under a new name. Each copy counts; a
    reader should be told. A lander is named by its machine, or, when the two differ by their
    user, `user <user> on <machine>`. The start time is part of the match: an id alone repeats
    across machines for some agents (Goose's `20260302_1`)."""
    where, params = _only(source_ids, "a")
    also, more = _only(source_ids, "b")
    sql = (f'SELECT a.machine, a."user", b.machine, b."user", COUNT(*) FROM sessions a JOIN sessions b '
           f'ON a.provider = b.provider AND a.session_id = b.session_id AND a.created_at = b.created_at '
           f'AND (a.machine < b.machine OR (a.machine = b.machine AND a."user" < b."user")) '
           f'WHERE a.is_root AND b.is_root '
           f'AND ((true{where}) OR (true{also})) GROUP BY ALL ORDER BY 1, 2, 3, 4')  # either copy merged now

    def named(machine, user, same_user):
        return machine if same_user else f"user {user} on {machine}"

    return [(named(m1, u1, u1 == u2), named(m2, u2, u1 == u2), n)
            for m1, u1, m2, u2, n in con.execute(sql, params + more).fetchall()]


def orphans(con, source_ids=None) -> dict[str, int]:
    """Rows whose parent is missing from their own source, per reference (0 when all is well)."""
    out = {}
    where, params = _only(source_ids, "c")
    for (child, col), (parent, pcol) in REFERENCES.items():
        same_source = " AND ".join(f'p."{c}" = c."{c}"' for c in SOURCE)
        sql = (f'SELECT COUNT(*) FROM "{child}" c WHERE c."{col}" IS NOT NULL{where} AND NOT EXISTS '
               f'(SELECT 1 FROM "{parent}" p WHERE {same_source} AND p."{pcol}" = c."{col}")')
        out[f"{child}.{col} -> {parent}.{pcol}"] = con.execute(sql, params).fetchone()[0]
    return out


def stale_machines(runs: dict[str, datetime], now: datetime, max_age: timedelta) -> dict[str, datetime]:
    """Machines whose latest run is older than `max_age` at `now`, with that run's time.

    `run_at` is naive UTC (no ICU extension needed); an aware `now` is converted to match."""
    if now.tzinfo is not None:
        now = now.astimezone(timezone.utc).replace(tzinfo=None)
    return {machine: at for machine, at in sorted(runs.items()) if now - at > max_age}


def checked(warehouse, check):
    """`check(con)` on a reader capped at the writer's memory limit, spilling to a scratch folder;
    once more with most of the machine's memory if DuckDB ran out. For the checks of keys and
    parents over every merged source: uncapped, they took more memory than the merge
    (docs/BENCHMARKS.md, "Memory")."""
    return ducklake.retried_with_more_memory(lambda limit: _capped(warehouse, check, limit))


def _capped(warehouse, check, memory_limit: str | None):
    with scratch("merge") as spill, ducklake.connect(warehouse, ours=True) as con:
        con.execute(f"SET memory_limit = '{memory_limit or ducklake.WRITER_SETTINGS['memory_limit']}'")
        con.execute(f"SET temp_directory = {ducklake.sql_string(spill)}")
        with ducklake.one_snapshot(con):  # every check sees the same catalog
            return check(con)
