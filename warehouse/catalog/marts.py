"""The marts: SQL files in sql/marts, materialised as tables of the lake's catalog, updated
incrementally, over the internal building blocks of sql/intermediate.

Each mart is `CREATE OR REPLACE VIEW <name> AS ...` over the curated tables, the building blocks
and the marts before it. A building block's name starts with `_`: a view (`_session_tree`,
`_step_costs`, ...; computed once per refresh, see _Internals) or a table macro (`_in_tree`,
`_costed_calls`: a join the marts share, expanded where it is called). Every file names what it
reads in a `-- reads:` line (tests/test_marts_lineage.py checks it against the SQL): the refresh
pins the blocks from it, a mart's hash covers what it builds on, and Dagster draws the marts'
parents from it (`depends_on`). A mart's first header line says how it refreshes:

- `-- refresh: by project`: every row has a `project`, and is computed from rows of one
  source (the joins stay within a source) that share that project (a session's messages,
  parts, calls and usage carry the session's project). A merge then recomputes only the
  projects of the sessions its changed sources had and have: no other row can have changed
  (in a small lake, WHOLE_BELOW_ROWS, every mart is computed whole into its table instead).
  `tests/test_lake.py` checks the incremental marts against a full recompute on every agent.
- `-- refresh: whole`: recomputed entirely (rows that span projects), into its own table.

The merge records the touched projects in `_agentlake_marts_pending` in the tables'
transaction (or hands them to `refresh_marts` in that transaction, for a small merge);
`refresh_marts` (in the next transaction of that writer for a large merge, or in the next merge's
when a merge ran without its marts or was cut off between the two) updates the marts and clears
the list. A mart whose SQL changed since it was
written (its hash in `_agentlake_marts`) is rebuilt whole; a merge that rebuilt the tables whole
forgets every hash (`forget`).
"""

import hashlib
import re
from functools import lru_cache
from pathlib import Path

import pyarrow as pa

from warehouse.catalog import model_names
from warehouse.lake.ducklake import CATALOG, give_statistics

SQL_DIR = Path(__file__).parent / "sql"
FOLDERS = ("intermediate", "marts")  # the blocks, then the marts; each folder's files numbered in dependency order
_DEFINES = re.compile(r"^CREATE OR REPLACE (VIEW|MACRO) (\w+)", re.MULTILINE)
PENDING = "_agentlake_marts_pending"  # projects whose mart rows must be recomputed
WRITTEN = "_agentlake_marts"  # (name, sha256 of its SQL) of every mart table written
# after a mart's hash in WRITTEN, the rows it holds when the refresh knows them (`<sha>#rows=3`): an
# older release takes the value for another SQL's and builds the mart again whole, where a column
# of its own would have failed its every merge (it inserts two values)
ROWS = "#rows="
# Past this many touched projects a whole rebuild is as cheap as the filtered one.
MAX_PROJECTS = 64
# Up to this many rows in the tables the marts read, marts all built whole read them from one
# temporary copy (a `_Cut` of every row) rather than from the lake: each scan of a DuckLake table
# looks its files and statistics up in the catalog, dozens of scans in a first merge
# (docs/BENCHMARKS.md, "Figures behind the code's choices"). Past it, the copy would hold the
# tool calls' inputs in memory: they read the lake.
SMALL_LAKE_ROWS = 20_000
# Up to this many rows, a merge that touched any project computes every mart whole from that copy:
# cheaper than refreshing the touched projects' rows, whose DELETE and INSERT per mart each pay
# DuckLake's catalog lookups (docs/BENCHMARKS.md, "Figures behind the code's choices"). Past it
# the refresh by project reads less. Such a mart whose table holds its current SQL's columns is
# emptied and filled again (`refill`), not replaced: each new table's inlined rows were a table of
# the catalog until its snapshot expired, and readers opened the grown catalog more slowly.
WHOLE_BELOW_ROWS = 10_000
# Above the writer's own 512 MB (warehouse.ducklake): a large merge's marts run after its inserts
# committed (warehouse.catalog.merge). A refresh that still runs out is run again
# with most of the machine's memory (ducklake.retried_with_more_memory); the tables stay merged.
MEMORY_LIMIT = "600MB"


@lru_cache(maxsize=1)
def mart_sql() -> tuple[tuple[str, str], ...]:
    """(name, SQL) of every building block (names starting with `_`), then of every mart, in
    dependency order. Read once per process: a refresh and `current` ask for it per mart."""
    out = []
    for folder in FOLDERS:
        for path in sorted((SQL_DIR / folder).glob("*.sql")):
            sql = path.read_text()
            out.append((_DEFINES.search(sql)[2], sql))
    return tuple(out)


def is_macro(sql: str) -> bool:
    return _DEFINES.search(sql)[1] == "MACRO"


def reads(sql: str) -> tuple[str, ...]:
    """What a file reads, from its `-- reads:` header line: curated tables, building blocks and
    marts (`-- reads: nothing` for a block of constants)."""
    found = re.search(r"^-- reads: (.+)$", sql, re.MULTILINE)
    if not found or found[1].strip() == "nothing":
        return ()
    return tuple(name.strip() for name in found[1].split(","))


@lru_cache(maxsize=None)
def _reached(name: str, through_marts: bool = False) -> frozenset[str]:
    """What a mart or block reads, directly or through the blocks it reads (and, `through_marts`,
    through the marts it reads)."""
    sql = dict(mart_sql())
    found, todo = set(), [name]
    while todo:
        for read in reads(sql[todo.pop()]):
            if read not in found:
                found.add(read)
                if read in sql and (read.startswith("_") or through_marts):
                    todo.append(read)
    return frozenset(found)


def depends_on(name: str) -> tuple[str, ...]:
    """The curated tables and the marts a mart reads, its building blocks resolved to what they
    read (they are no tables of their own): its parents in Dagster's asset graph."""
    return tuple(sorted(n for n in _reached(name) if not n.startswith("_")))


def refreshes_by_project(sql: str) -> bool:
    return sql.lstrip().startswith("-- refresh: by project")


def threads(sql: str) -> int | None:
    """The threads a mart is built with, from its `-- threads: N` header line; None: DuckDB's."""
    found = re.search(r"^-- threads: (\d+)", sql, re.MULTILINE)
    return int(found[1]) if found else None


def _build(con, sql: str, statements: list[str]) -> int:
    """A mart's statements, with the threads its header asks for (its building blocks are
    computed before, with all of them). Returns the rows the last statement wrote."""
    wanted = threads(sql)
    own = con.execute("SELECT current_setting('threads')").fetchone()[0] if wanted else None
    if wanted:
        con.execute(f"SET threads = {wanted}")
    for statement in statements:
        written = con.execute(statement).fetchone()[0]
    if wanted:
        con.execute(f"SET threads = {own}")
    return written


MARTS = tuple(name for name, _ in mart_sql() if not name.startswith("_"))


def create_mart_views(con) -> None:
    """Every mart and block as a temporary view (or macro) of this connection (they shadow the
    tables of the same name)."""
    for _, sql in mart_sql():
        con.execute(temporary(sql))


def create_block_views(con, names: list[str], edit=lambda sql: sql) -> None:
    """Internal building blocks or marts, and the blocks and marts they read, as temporary views
    of a reader's connection, computed when read (`agentlake report` counts messages by model with
    `_message_models`, as model_usage does; in a time zone other than UTC it computes its marts
    again over that zone's days, each temporary statement through `edit`: warehouse.serve.local_days)."""
    wanted = set(names) | read_by(names)
    for name, sql in mart_sql():
        if name in wanted:
            con.execute(edit(temporary(sql)))


def read_by(names) -> frozenset[str]:
    """What the named marts and blocks read, directly or through the blocks and marts they read:
    curated tables among them."""
    return frozenset().union(*(_reached(name, through_marts=True) for name in names))


def temporary(sql: str) -> str:
    """A file's statement creating a temporary view or macro of the connection, not an object
    of the catalog."""
    return _DEFINES.sub(r"CREATE OR REPLACE TEMP \1 \2", sql, count=1)


def ensure_bookkeeping(con, have: set[str] | None = None) -> None:
    """The marts' two bookkeeping tables, unless `have` (the catalog's committed tables,
    `committed_tables`) holds them: each `IF NOT EXISTS` asks DuckLake's catalog again. Without
    `have`, each is made if missing (a damaged one may have been dropped in this transaction)."""
    committed = committed_tables(con) if have is None else have
    for name, columns in ((PENDING, "project VARCHAR"), (WRITTEN, "name VARCHAR, sql_sha VARCHAR")):
        if have is None or name not in have:
            con.execute(f"CREATE TABLE IF NOT EXISTS lake.main.{name} ({columns})")
        # one not committed yet is given statistics when empty: either may stay empty for merges
        # to come, and a table without any is looked for at each merge (ducklake.give_missing_statistics)
        if name not in committed and not con.execute(f"SELECT COUNT(*) FROM lake.main.{name}").fetchone()[0]:
            give_statistics(con, f"lake.main.{name}")


def mark_pending(con, projects: set[str | None]) -> None:
    """Projects whose mart rows the next `refresh_marts` recomputes (the merge's transaction,
    which may have dropped a damaged bookkeeping table: the committed catalog still lists it)."""
    ensure_bookkeeping(con)
    if projects:
        con.register("_touched", pa.table({"project": pa.array(sorted(projects, key=str), pa.string())}))
        con.execute(f"INSERT INTO lake.main.{PENDING} SELECT project FROM _touched")
        con.unregister("_touched")


def forget(con) -> None:
    """Every mart to be rebuilt whole by the next `refresh_marts` (the tables were rebuilt whole:
    a project gone from them would keep its rows in a mart refreshed by project)."""
    ensure_bookkeeping(con)
    con.execute(f"DELETE FROM lake.main.{WRITTEN}")


def current(con) -> bool:
    """Nothing to update: no project pending, every mart written by its current SQL (a reader's
    connection will do)."""
    try:
        if con.execute(f"SELECT COUNT(*) FROM lake.main.{PENDING}").fetchone()[0]:
            return False
        written, _ = _written(con)
    except Exception:  # a catalog from before incremental marts
        return False
    return all(written.get(name) == _sha(name) for name in MARTS)


@lru_cache(maxsize=None)
def _sha(name: str) -> str:
    """A mart's SQL with that of every block and mart it builds on, directly or not: a change to
    any rebuilds it whole (refreshed by project over a mart rebuilt whole, it would keep the
    other projects' rows computed from the old one)."""
    built_on = _reached(name, through_marts=True)
    text = "".join(sql for other, sql in mart_sql() if other in built_on or other == name)
    return hashlib.sha256(text.encode()).hexdigest()


def refresh_marts(con, *, whole: bool = False, memory_limit: str | None = None, added: int = 0,
                  touched: set[str | None] = frozenset()) -> None:
    """Bring every public mart table up to date with the curated tables. `whole` rebuilds all
    of them; `memory_limit` replaces MEMORY_LIMIT (a retry's larger one). `added`: the rows the
    transaction inserted so far (DuckLake's statistics count the committed rows only).
    `touched`: projects pending besides those recorded (`mark_pending`), from the merge whose
    transaction this is: recorded, they would be deleted again in it."""
    # the marts' windows and joins over a team's history cannot all spill: under the writer's
    # 512 MB they failed on 14.6M messages, where the merge's inserts had streamed through.
    # A mart table promises no row order, and keeping it cost memory: insight_unused_reads (its
    # join holds every later call's arguments) ran out of 1 GB on those 14.6M messages; it fits
    # without the order and with one thread (its `-- threads: 1` line).
    con.execute(f"SET memory_limit = '{memory_limit or MEMORY_LIMIT}'")
    con.execute("SET preserve_insertion_order = false")
    have = committed_tables(con)
    ensure_bookkeeping(con, have)
    recorded = {r[0] for r in con.execute(f"SELECT DISTINCT project FROM lake.main.{PENDING}").fetchall()}
    pending = recorded | set(touched)
    rows = _rows_read(con) + added
    whole = whole or bool(pending) and rows <= WHOLE_BELOW_ROWS
    # the names the marts group models under, for the rows they are about to read: the pending
    # projects' (every other project's names are in it since its own refresh), or all
    scoped = not whole and len(pending) <= MAX_PROJECTS
    scope = None  # the cut-down curated tables' filter, found once
    internals, cut = _Internals(con), _Cut(con)
    # every mart built whole from a small lake: they read one copy of it (a few built whole
    # beside those refreshed by project read the lake: copying it all cost them more)
    everything = _Cut(con, prefix="_all_") if whole and rows <= SMALL_LAKE_ROWS else None
    read = None  # where model_names reads the tables' names: the cut, when the marts will use it
    if scoped and pending and model_names.NAME in have and cut.covers(model_names.READS):
        scope = _scope(con, pending)
        cut.make(scope)
        read = cut.table
    elif everything and model_names.NAME in have and everything.covers(model_names.READS):
        everything.make("TRUE")
        read = everything.table
    whole = model_names.update(con, _project_filter(pending) if scoped else None, have, read) or whole
    have.add(model_names.NAME)
    written, counted = _written(con)
    before = (dict(written), dict(counted))
    plan = [(name, sql, _how(name, sql, have, written, whole=whole or len(pending) > MAX_PROJECTS, rows=rows))
            for name, sql in mart_sql() if not name.startswith("_")]
    plan = _scoped_first(plan)
    rows_now: dict[str, int | None] = dict(counted)  # a mart refreshed by project: its count unknown
    if not everything and all(how != "scoped" for *_, how in plan) and rows <= SMALL_LAKE_ROWS:
        everything = _Cut(con, prefix="_all_")  # made whole by a model's new name or the marts' new SQL
    for at, (name, sql, how) in enumerate(plan):
        if how in ("whole", "refill"):
            if everything:
                everything.on("TRUE")
            else:
                cut.off()
            internals.pin(name, "whole")
            if how == "refill":
                rows_now[name] = _refill(con, name, sql, counted.get(name))
            else:
                rows_now[name] = _build(con, sql, [f'CREATE OR REPLACE TABLE lake.main."{name}" AS {_query(sql)}'])
                if not rows_now[name]:
                    give_statistics(con, f'lake.main."{name}"')
        elif pending:
            touched = _project_filter(pending)
            scope = scope or _scope(con, pending)
            cut.on(scope)
            internals.pin(name, "scoped")
            _build(con, sql, [f'DELETE FROM lake.main."{name}" WHERE {touched}',
                              f'INSERT INTO lake.main."{name}" SELECT * FROM ({_query(sql)}\n) WHERE {touched}'])
            rows_now[name] = None
        internals.release(later for later, _, _ in plan[at + 1:])
        written[name] = _sha(name)
    # (not in a `finally`: after an error the transaction is aborted, a DROP would fail and hide
    # the error, and the temporary objects go with the connection anyway)
    cut.drop()
    if everything:
        everything.drop()
    internals.drop()
    if recorded:
        con.execute(f"DELETE FROM lake.main.{PENDING}")
    _record_written(con, written, {name: rows_now.get(name) for name in written}, before)


def _written(con) -> tuple[dict[str, str], dict[str, int | None]]:
    """The marts written, and their SQL's hash; and the rows each holds (None: not known, after a
    refresh by project or from an older release)."""
    written, counted = {}, {}
    for name, value in con.execute(f"SELECT name, sql_sha FROM lake.main.{WRITTEN}").fetchall():
        written[name], _, rows = value.partition(ROWS)
        counted[name] = int(rows) if rows.isdigit() else None
    return written, counted


def _record_written(con, written: dict[str, str], rows: dict[str, int | None], before) -> None:
    """`_agentlake_marts` as the refresh left the marts; unchanged since `before` (`_written`
    at its start), it is not written again (a table the commit does not touch costs it nothing)."""
    if before == (written, rows):
        return
    con.execute(f"DELETE FROM lake.main.{WRITTEN}")
    values = [sha if rows[name] is None else f"{sha}{ROWS}{rows[name]}" for name, sha in written.items()]
    con.register("_written", pa.table({"name": pa.array(list(written), pa.string()),
                                       "sql_sha": pa.array(values, pa.string())}))
    con.execute(f"INSERT INTO lake.main.{WRITTEN} SELECT name, sql_sha FROM _written")
    con.unregister("_written")


def _refill(con, name: str, sql: str, held: int | None) -> int:
    """A mart computed whole into its own table; returns its rows. A mart known to be empty
    (`held`, the rows it holds) is computed first: when it is still empty its table is left
    alone, and the commit does not touch it (a lake of one agent has several marts of another
    agent's rows, empty: their DELETE and INSERT each paid DuckLake's lookups)."""
    if held != 0:
        return _build(con, sql, [f'DELETE FROM lake.main."{name}"', f'INSERT INTO lake.main."{name}" {_query(sql)}'])
    rows = _build(con, sql, [f'CREATE OR REPLACE TEMP TABLE "_mart_rows" AS {_query(sql)}'])
    if rows:
        con.execute(f'INSERT INTO lake.main."{name}" SELECT * FROM temp.main."_mart_rows"')
    con.execute('DROP TABLE temp.main."_mart_rows"')
    return rows


def _how(name: str, sql: str, have: set[str], written: dict[str, str], *, whole: bool, rows: int) -> str:
    """How a mart is brought up to date: `whole` (made again, as a new table: a new mart, or new SQL
    whose columns may differ), `refill` (computed whole into its table: a mart refreshed whole, or
    any of a small lake's), or `scoped` (its touched projects' rows). A table made again at each
    merge stayed a table of the catalog until its snapshot expired (`WHOLE_BELOW_ROWS`)."""
    if name not in have or written.get(name) != _sha(name):
        return "whole"
    if not refreshes_by_project(sql) or (whole and rows <= WHOLE_BELOW_ROWS):
        return "refill"
    return "whole" if whole else "scoped"


def committed_tables(con) -> set[str]:
    """The catalog's tables in `main` as its last commit left them, from DuckLake's own metadata
    (a mart or `model_names` is made later in the refresh's transaction, if at all):
    `duckdb_tables()` loads every table's statistics first, tens of milliseconds in a writer's
    transaction."""
    meta = f"__ducklake_metadata_{CATALOG}"
    return {r[0] for r in con.execute(
        f"SELECT t.table_name FROM {meta}.ducklake_table t JOIN {meta}.ducklake_schema s USING (schema_id) "
        "WHERE s.schema_name = 'main' AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL").fetchall()}


def _rows_read(con) -> int:
    """The rows of the curated tables the marts read, from DuckLake's statistics (which count the
    rows inlined in the catalog too)."""
    meta = f"__ducklake_metadata_{CATALOG}"
    names = ", ".join(_literal(t) for t in _read_tables())
    return con.execute(
        f"SELECT COALESCE(SUM(st.record_count), 0) FROM {meta}.ducklake_table_stats st "
        f"JOIN {meta}.ducklake_table t USING (table_id) JOIN {meta}.ducklake_schema s USING (schema_id) "
        f"WHERE s.schema_name = 'main' AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL "
        f"AND t.table_name IN ({names})").fetchone()[0]


_QUERY = re.compile(r"^CREATE OR REPLACE VIEW \w+ AS\b", re.MULTILINE)


def _query(sql: str) -> str:
    """A mart's query (its file after `CREATE OR REPLACE VIEW <name> AS`), built straight into
    its table once the blocks it reads are tables and the marts it reads are built: a temporary
    view first was bound twice, and the shared joins are macros, expanded at every bind."""
    return sql[_QUERY.search(sql).end():]


def _scoped_first(plan: list[tuple[str, str, str]], reached=_reached) -> list[tuple[str, str, str]]:
    """The marts refreshed by project first, then those built whole, each in file order: the
    blocks both read are computed once per scope, not again at each switch (one changed source
    computed `_session_tree` four times, switching at `model_usage`; twice now). File order is
    kept when a mart refreshed by project reads one built whole (it must see the new table).
    `reached(name)`: what a mart reads."""
    scoped = [m for m in plan if m[2] == "scoped"]
    whole = [m for m in plan if m[2] != "scoped"]
    if any(w[0] in reached(m[0]) for m in scoped for w in whole):
        return plan
    return scoped + whole


class _Internals:
    """The internal building blocks (`_session_tree`, `_step_costs`, ...) computed once per
    refresh as temporary tables, not again inside every mart that reads them (six insight marts
    read `_step_costs`, directly or through `_file_calls`), and dropped after the last of them.
    A block is computed for what the mart at hand sees: all the rows (`whole`) or the touched
    projects' (`scoped`, while `_Cut` is on), and again when the next mart sees the other.
    The macros are made once, in definition order among the tables: DuckDB binds a macro without
    parameters when it is made, so what it reads must be there."""

    def __init__(self, con):
        self.con = con
        self.sql = _blocks()
        self.pinned: dict[str, str] = {}  # name -> the scope its table was computed for
        self.macros: set[str] = set()

    def pin(self, mart: str, scope: str) -> None:
        for name in _blocks_read(mart):
            if is_macro(self.sql[name]):
                if name not in self.macros:
                    self.con.execute(temporary(self.sql[name]))
                    self.macros.add(name)
                continue
            if self.pinned.get(name) == scope:
                continue
            self._drop(name)
            self.con.execute(self.sql[name].replace("CREATE OR REPLACE VIEW", "CREATE TEMP TABLE", 1))
            self.pinned[name] = scope

    def release(self, later) -> None:
        """Drops the tables of the blocks no later mart reads: a whole refresh of the large
        corpus held hundreds of MB of them (their keys are long strings, uncompressed in memory:
        docs/BENCHMARKS.md, "Figures behind the code's choices")."""
        wanted = {n for mart in later for n in _blocks_read(mart)}
        for name in [n for n in self.pinned if n not in wanted]:
            self._drop(name)

    def _drop(self, name: str) -> None:
        kind = "TABLE" if name in self.pinned else "VIEW"
        self.con.execute(f'DROP {kind} IF EXISTS temp.main."{name}"')
        self.pinned.pop(name, None)

    def drop(self) -> None:
        for name in list(self.pinned):
            self._drop(name)
        for name in self.macros:
            self.con.execute(f'DROP MACRO TABLE IF EXISTS temp.main."{name}"')
        self.macros.clear()


@lru_cache(maxsize=1)
def _blocks() -> dict[str, str]:
    return {name: sql for name, sql in mart_sql() if name.startswith("_")}


@lru_cache(maxsize=None)
def _blocks_read(mart: str) -> tuple[str, ...]:
    """The blocks a mart reads, directly or through another block, in definition order."""
    return tuple(n for n in _blocks() if n in _reached(mart))


def _scope(con, projects: set[str | None]) -> str:
    """The rows the touched projects' mart rows are computed from: those of the sources with a
    session in these projects, in those sources' projects."""
    sources = [r[0] for r in con.execute(
        f"SELECT DISTINCT source_id FROM lake.main.sessions WHERE {_project_filter(projects)}").fetchall()]
    theirs = {r[0] for r in con.execute(
        f"SELECT DISTINCT project FROM lake.main.sessions WHERE {_in('source_id', sources)}").fetchall()}
    return f"{_project_filter(projects | theirs)} AND {_in('source_id', sources)}"


class _Cut:
    """The curated tables, as the by-project mart views see them, cut down to the touched
    projects' rows by temporary views of the same name, from `on` until `off` (held across
    consecutive by-project marts). The views' joins stay within a source, so the touched
    projects' rows come out the same. With `on("TRUE")` and another `prefix`, a small lake's
    every row, for the marts built whole.

    The cut is read from the lake once per refresh, into temporary tables: of the tables the
    marts read, the columns they name (not the parts, nor message texts, nor file contents).
    Every scan of a DuckLake table pays a catalog lookup (docs/BENCHMARKS.md, "Figures behind the
    code's choices"), and the fourteen by-project
    marts and their three blocks made some fifty of them for one changed source."""

    def __init__(self, con, prefix: str = "_cut_"):
        self.con = con
        self.prefix = prefix
        self.active = False
        self.made = False

    def on(self, where: str) -> None:
        if self.active:
            return
        self.make(where)
        for table in _read_tables():
            self.con.execute(f'CREATE OR REPLACE TEMP VIEW "{table}" AS SELECT * FROM temp.main."{self.prefix}{table}"')
        self.active = True

    def make(self, where: str) -> None:
        """The cut's tables, read once (`model_names` reads them too, before the marts)."""
        if self.made:
            return
        for table in _read_tables():
            cols = ", ".join(f'"{c}"' for c in _lake_columns(table) if c.lower() in _named())
            self.con.execute(f'CREATE TEMP TABLE "{self.prefix}{table}" AS '
                             f'SELECT {cols} FROM lake.main."{table}" WHERE {where}')
        self.made = True

    @staticmethod
    def covers(tables) -> bool:
        """The cut holds these tables, with the columns `model_names` reads."""
        return set(tables) <= set(_read_tables()) and {"model", "llm_provider", "project"} <= _named()

    def table(self, name: str) -> str:
        return f'temp.main."{self.prefix}{name}"'

    def off(self) -> None:
        if not self.active:
            return
        for table in _read_tables():
            self.con.execute(f'DROP VIEW IF EXISTS temp.main."{table}"')
        self.active = False

    def drop(self) -> None:
        self.off()
        for table in _read_tables():
            self.con.execute(f'DROP TABLE IF EXISTS temp.main."{self.prefix}{table}"')
        self.made = False



@lru_cache(maxsize=1)
def _named() -> frozenset[str]:
    """Every word of the marts' SQL (comments aside), lower-cased: a superset of the curated
    tables and columns they read. A mart that read columns it does not name (`t.*`, `to_json(t)`,
    a NATURAL join) would see only the named ones in an incremental refresh: tests/test_lake.py,
    which compares an incremental refresh with a full recompute on every agent, would show it."""
    return frozenset(re.findall(r"\w+", "\n".join(re.sub(r"--[^\n]*", "", sql) for _, sql in mart_sql()).lower()))


def _lake_columns(table: str) -> list[str]:
    """A curated table's columns in the lake: the hive keys, then the contract's
    (warehouse.catalog.merge.ensure_tables makes them so before any refresh)."""
    from transforms.contract import DATA_TABLES
    from warehouse.land.landing_files import HIVE

    return [f.name for f in HIVE] + next(t for t in DATA_TABLES if t.name == table).column_names


@lru_cache(maxsize=1)
def _read_tables() -> tuple[str, ...]:
    """The curated tables the marts and blocks read."""
    from transforms.contract import DATA_TABLES

    read = {name for _, sql in mart_sql() for name in reads(sql)}
    return tuple(t.name for t in DATA_TABLES if t.name in read)


def _in(column: str, values) -> str:
    if not values:
        return "FALSE"
    return f"{column} IN (" + ", ".join(_literal(v) for v in sorted(values)) + ")"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _project_filter(projects: set[str | None]) -> str:
    """A literal predicate (literals push down into the views' scans; a subquery would not)."""
    parts = [_in("project", [p for p in projects if p is not None])]
    if None in projects:
        parts.append("project IS NULL")
    return "(" + " OR ".join(parts) + ")"
