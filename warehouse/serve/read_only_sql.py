"""SQL that a reader did not write, run so that it can change nothing: `agentlake sql`, the
dashboard's readers (their connection; their SQL is the dashboard's own), an MCP server later.

Two walls, as SQLite's `mode=ro` or a PostgreSQL read-only transaction refuse every write:

- The connection (`open_reader`): the catalog attached read-only, no file reachable but the
  tables' own (DuckDB's `enable_external_access` off, their folder allowed: COPY, EXPORT, ATTACH,
  INSTALL and UPDATE EXTENSIONS, and `read_csv` of any other file, are refused by DuckDB itself),
  no persistent secrets (DuckDB would write them under `~/.duckdb/stored_secrets/`), no extension
  downloads, and the configuration locked, so that no statement turns any of these back on.
- The statement (`check`): DuckDB has no read-only mode for files, and a read-only DuckLake
  catalog does not stop DuckLake's maintenance: `ducklake_cleanup_old_files` deletes the files a
  compaction kept for readers, and `ducklake_rewrite_data_files` writes new ones, before the
  catalog refuses their commit. So a reader runs one statement at a time, of a kind that reads
  (SELECT, and EXPLAIN or CALL of one), calling no function that writes, changes the connection,
  or runs SQL given as text (which this check would not see).

Checked against DuckDB and DuckLake 1.5.5 (tests/test_read_only_sql.py lists every table
function they offer, each refused here or reviewed as reading only).
"""

import re
from pathlib import Path

import duckdb

from warehouse.lake.ducklake import CATALOG, connect, sql_string, tables_folder

# Settings DuckDB takes only when the database starts (a connection's first statement is too late).
AT_START = {"allow_persistent_secrets": "false"}

STATEMENTS_THAT_READ = ("SELECT", "EXPLAIN", "CALL")

# A refused statement's kind, by DuckDB's statement type: what it is called, and what it would do.
_FILES = "COPY and EXPORT write files"
_DEFINES = "CREATE, DROP and ALTER make, change or drop tables, views, macros and secrets"
_ROWS = "INSERT, UPDATE, DELETE and MERGE change rows"
_KINDS = {
    "COPY": ("COPY", _FILES), "COPY_DATABASE": ("COPY", _FILES), "EXPORT": ("EXPORT", _FILES),
    "ATTACH": ("ATTACH", "ATTACH opens or makes a database"),
    "DETACH": ("DETACH", "DETACH closes the warehouse"),
    "LOAD": ("INSTALL and LOAD", "INSTALL and LOAD fetch and load extensions"),
    "CREATE": ("CREATE", _DEFINES), "CREATE_FUNC": ("CREATE", _DEFINES), "DROP": ("DROP", _DEFINES),
    "ALTER": ("ALTER", _DEFINES),
    "INSERT": ("INSERT", _ROWS), "UPDATE": ("UPDATE", _ROWS), "DELETE": ("DELETE", _ROWS),
    "MERGE_INTO": ("MERGE", _ROWS),
    "SET": ("SET, RESET and USE", "they change the connection's settings, variables or default database"),
    "VARIABLE_SET": ("SET, RESET and USE", "they change the connection's settings, variables or default database"),
    "PRAGMA": ("PRAGMA", "pragmas change the connection's settings or run other statements"),
    "VACUUM": ("VACUUM and ANALYZE", "they write a database's statistics"),
    "TRANSACTION": ("BEGIN, COMMIT and ROLLBACK", "each statement is a transaction of its own"),
    "PREPARE": ("PREPARE and EXECUTE", "a prepared statement runs later, unchecked"),
    "EXECUTE": ("PREPARE and EXECUTE", "a prepared statement runs later, unchecked"),
}
# by the statement's first words, where DuckDB's type says too little: CHECKPOINT is a CALL, and
# the Python client has no name for UPDATE EXTENSIONS' type
_BY_WORDS = {
    ("CHECKPOINT",): ("CHECKPOINT", "it writes a database: DuckLake's inlined rows go to new files"),
    ("FORCE", "CHECKPOINT"): ("CHECKPOINT", "it writes a database: DuckLake's inlined rows go to new files"),
    ("UPDATE", "EXTENSIONS"): ("UPDATE EXTENSIONS", "it downloads and replaces installed extensions"),
}

# DuckLake's functions that only read; every other `ducklake_*` writes the catalog or the files.
DUCKLAKE_READS = frozenset({
    "ducklake_current_snapshot", "ducklake_last_committed_snapshot", "ducklake_list_files", "ducklake_options",
    "ducklake_scan", "ducklake_settings", "ducklake_snapshots", "ducklake_table_changes",
    "ducklake_table_deletions", "ducklake_table_info", "ducklake_table_insertions",
})
_DUCKLAKE_WRITES = "DuckLake's maintenance and writes delete or write the tables' files before the catalog refuses them"
_LOGS = "it changes the connection's logging or profiling, and enable_logging writes files"
_TEXT = "it runs SQL given as text, which is not checked"
_POINTERS = "the Python client's own: it reads memory by address"
# the postgres extension's (a team catalog in PostgreSQL): SQL run by the server, another database
# attached or read through its own connection string, the extension's pool and caches changed
_POSTGRES = "it runs SQL on a PostgreSQL server or opens a connection of its own to one, past the catalog"
# the other functions that may not be called, and why
REFUSED_FUNCTIONS = {
    "checkpoint": _BY_WORDS[("CHECKPOINT",)][1], "force_checkpoint": _BY_WORDS[("CHECKPOINT",)][1],
    "enable_logging": _LOGS, "disable_logging": _LOGS, "truncate_duckdb_logs": _LOGS, "write_log": _LOGS,
    "enable_profiling": _LOGS, "disable_profiling": _LOGS,
    "query": _TEXT, "json_execute_serialized_sql": _TEXT,
    "arrow_scan": _POINTERS, "arrow_scan_dumb": _POINTERS, "pandas_scan": _POINTERS, "python_map_function": _POINTERS,
    **dict.fromkeys(("postgres_query", "postgres_execute", "postgres_attach", "postgres_scan", "postgres_scan_pushdown",
                     "postgres_configure_pool", "pg_clear_cache", "read_postgres_binary"), _POSTGRES),
}


class Refused(ValueError):
    """A statement a reader may not run. `what` says what is refused ("COPY statements are
    refused"), `why` what it would change."""

    def __init__(self, what: str, why: str):
        super().__init__(f"{what}: a reader only reads ({why})")
        self.what, self.why = what, why


class NotOne(ValueError):
    """Not one statement to run: several (DuckDB would run them all and show the last one's rows
    only), or one nested deeper than DuckDB parses."""


def open_reader(catalog: Path, data_path: str | None = None):
    """A connection to the warehouse that can change nothing (see the module's docstring);
    `connect`'s arguments."""
    # the pinned DuckLake binary is loaded by its path, without DuckDB's second check of it: the
    # user's SQL runs only after external access is off and the configuration locked, where DuckDB
    # refuses every LOAD and INSTALL, an unsigned binary's included
    con = connect(catalog, data_path, settings=AT_START, ours=True)
    try:
        data = con.execute(f"SELECT data_path FROM ducklake_settings({sql_string(CATALOG)})").fetchone()[0]
        # the tables' own folder (its `main` schema's), not the data path: in a lake that is the
        # catalog's own, that holds every machine's landing files too (a new user's trial read them)
        con.execute(f"SET allowed_directories = [{sql_string(tables_folder(data))}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def check(con, sql: str) -> None:
    """Refused, or NotOne, unless `sql` is one statement a reader may run. Parsed on `con`, a
    reader's connection: parsing IMPORT DATABASE already reads the files it names."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.ParserException as exc:
        depth = re.search(r"Max expression depth limit of (\d+) exceeded", str(exc))
        if depth is None:
            raise
        # DuckDB's own advice is a SET, which a reader's locked configuration refuses
        raise NotOne(f"the query nests expressions deeper than DuckDB's limit of {depth.group(1)} "
                     "(max_expression_depth, which a reader may not SET): write it flatter, as an IN list or "
                     "a VALUES table instead of a long chain of OR, AND or +") from None
    if len(statements) > 1 and re.match(r"\s*(FROM\s+\S+\s+)?PIVOT\b", sql, re.IGNORECASE):
        # DuckDB runs a PIVOT without an IN list as two statements, the first making a type: a write
        raise NotOne("a PIVOT without the values it spreads makes a type first, which a reader may not: name "
                     "them, `PIVOT sessions ON provider IN ('claude', 'codex') USING count(*) GROUP BY project`")
    if len(statements) > 1:
        raise NotOne(f"the query holds {len(statements)} statements: give one at a time")
    if statements:
        _check_kind(con, statements[0].type.name, statements[0].query)
        _check_functions(statements[0].query)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(text, kind) of each token, comments left out (DuckDB's own tokenizer)."""
    spans = duckdb.tokenize(text)
    out = []
    for i, (start, kind) in enumerate(spans):
        end = spans[i + 1][0] if i + 1 < len(spans) else len(text)
        word = _WORD.match(text, start)
        out.append((word.group() if word else text[start:end].strip(), kind.name))
    return out


_WORD = re.compile(r'"(?:[^"]|"")*"|[A-Za-z_][A-Za-z0-9_$]*')


def _check_kind(con, kind: str, text: str) -> None:
    words = tuple(word.upper() for word, token in _tokens(text)[:2] if token == "keyword")
    named = _BY_WORDS.get(words[:1]) or _BY_WORDS.get(words)
    if kind in ("SET", "VARIABLE_SET") and words[:1] == ("PRAGMA",):  # `PRAGMA threads = 1` is DuckDB's SET
        named = ("Setting PRAGMA", "they change the connection's settings")
    if named or kind not in STATEMENTS_THAT_READ or (kind == "CALL" and words[:1] != ("CALL",)):
        what, why = named or _KINDS.get(kind) or (
            " ".join(words) or kind, "only SELECT, and EXPLAIN or CALL of one, read")
        raise Refused(f"{what} statements are refused", why)
    if kind == "EXPLAIN":  # EXPLAIN ANALYZE runs what it explains
        for inner in con.extract_statements(_explained(text))[:1]:
            _check_kind(con, inner.type.name, inner.query)


def _explained(text: str) -> str:
    """The statement an EXPLAIN explains: after `EXPLAIN`, `ANALYZE` and `(options)`."""
    depth = 0
    for start, _ in duckdb.tokenize(text)[1:]:
        token = text[start]
        if depth == 0 and token != "(" and not re.match(r"(?i)analy[sz]e\b", text[start:]):
            return text[start:]
        depth += (token == "(") - (token == ")")
    return ""


def _check_functions(text: str) -> None:
    """No call of a refused function, wherever it stands (a subquery, a CTE, EXPLAIN ANALYZE), in
    any spelling (`"DuckLake_Cleanup_Old_Files"`, `main.checkpoint`)."""
    tokens = _tokens(text)
    for (word, kind), (after, _) in zip(tokens, tokens[1:]):
        if kind not in ("identifier", "keyword") or not after.startswith("("):
            continue
        name = word.strip('"').replace('""', '"').lower()
        if name.startswith("ducklake_") and name not in DUCKLAKE_READS:
            raise Refused(f"the function {name} is refused", _DUCKLAKE_WRITES)
        if name in REFUSED_FUNCTIONS:
            raise Refused(f"the function {name} is refused", REFUSED_FUNCTIONS[name])
