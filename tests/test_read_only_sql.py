"""Issue 32 item 7: a reader cannot write. `agentlake sql` (and later an MCP server and the
dashboard) run SQL they did not write through warehouse/serve/read_only_sql.py: each statement
kind that writes is refused, each function that writes is refused in any spelling, and below
that check the connection itself reaches no file but the tables', keeps no persistent secret and
changes no setting. Checked against DuckDB and DuckLake 1.5.5 as installed."""

from pathlib import Path

import duckdb
import pytest

from tests.conftest import run_cli, scalar
from warehouse.lake.ducklake import writing
from warehouse.serve.read_only_sql import DUCKLAKE_READS, REFUSED_FUNCTIONS, NotOne, Refused, check, open_reader

# --- the check, statement by statement (parsing only: no warehouse needed) ------------------

ROWS = "INSERT, UPDATE, DELETE and MERGE change rows"
WRITES = [  # (what is refused, a statement of that kind)
    ("COPY statements", "COPY (SELECT 1) TO 'out.csv'"),
    ("COPY statements", "COPY sessions FROM 'in.csv'"),
    ("EXPORT statements", "EXPORT DATABASE 'export'"),
    ("ATTACH statements", "ATTACH 'other.duckdb' AS other"),
    ("DETACH statements", "DETACH lake"),
    ("INSTALL and LOAD statements", "INSTALL httpfs"),
    ("INSTALL and LOAD statements", "FORCE INSTALL ducklake"),
    ("INSTALL and LOAD statements", "LOAD httpfs"),
    ("UPDATE EXTENSIONS statements", "UPDATE EXTENSIONS"),
    ("UPDATE EXTENSIONS statements", "UPDATE EXTENSIONS (ducklake)"),
    ("CREATE statements", "CREATE PERSISTENT SECRET s (TYPE ducklake, METADATA_PATH 'm.ducklake')"),
    ("CREATE statements", "CREATE SECRET s (TYPE ducklake, METADATA_PATH 'm.ducklake')"),
    ("CREATE statements", "CREATE TABLE memory.t AS SELECT 1"),
    ("CREATE statements", "CREATE TEMP VIEW sessions AS SELECT 1"),
    ("CREATE statements", "CREATE TEMP MACRO m() AS TABLE SELECT 1"),
    ("DROP statements", "DROP SECRET s"),
    ("DROP statements", "DROP TABLE sessions"),
    ("ALTER statements", "ALTER TABLE sessions ADD COLUMN x INTEGER"),
    ("INSERT statements", "INSERT INTO sessions SELECT * FROM sessions"),
    ("UPDATE statements", "UPDATE sessions SET title = 'x'"),
    ("DELETE statements", "DELETE FROM sessions"),
    ("MERGE statements", "MERGE INTO sessions USING sessions AS s ON false WHEN MATCHED THEN DELETE"),
    ("SET, RESET and USE statements", "SET enable_external_access = true"),
    ("SET, RESET and USE statements", "RESET lock_configuration"),
    ("SET, RESET and USE statements", "USE memory"),
    ("SET, RESET and USE statements", "SET VARIABLE x = 1"),
    ("PRAGMA statements", "PRAGMA enable_profiling"),
    ("PRAGMA statements", "PRAGMA force_checkpoint"),
    ("Setting PRAGMA statements", "PRAGMA threads = 1"),  # DuckDB's SET: named as the PRAGMA it is
    ("CHECKPOINT statements", "CHECKPOINT"),
    ("CHECKPOINT statements", "FORCE CHECKPOINT lake"),
    ("VACUUM and ANALYZE statements", "VACUUM"),
    ("VACUUM and ANALYZE statements", "ANALYZE sessions"),
    ("BEGIN, COMMIT and ROLLBACK statements", "BEGIN TRANSACTION"),
    ("PREPARE and EXECUTE statements", "PREPARE p AS SELECT 1"),
    ("PREPARE and EXECUTE statements", "EXECUTE p"),
    # EXPLAIN ANALYZE runs what it explains
    ("COPY statements", "EXPLAIN ANALYZE COPY (SELECT 1) TO 'out.csv'"),
    ("INSERT statements", "EXPLAIN ANALYZE INSERT INTO sessions SELECT * FROM sessions"),
]

WRITING_FUNCTIONS = sorted({"ducklake_add_data_files", "ducklake_cleanup_old_files", "ducklake_commit",
                            "ducklake_delete_orphaned_files", "ducklake_expire_snapshots", "ducklake_flush_inlined_data",
                            "ducklake_merge_adjacent_files", "ducklake_rewrite_data_files",
                            "ducklake_set_commit_message", "ducklake_set_option", *REFUSED_FUNCTIONS})
SPELLINGS = [  # where a function may stand, and how it may be written
    "CALL {f}('lake')",
    "SELECT * FROM {f}('lake', cleanup_all => true)",
    'SELECT * FROM "{F}"(\'lake\')',
    "SELECT * FROM system.main.{f} /* a comment */ ('lake')",
    "WITH x AS (SELECT * FROM {f}('lake')) SELECT count(*) FROM x",
    "SELECT (SELECT count(*) FROM {f}('lake')) AS n",
    "EXPLAIN ANALYZE SELECT * FROM {f}('lake')",
]

READS = [
    "SELECT COUNT(*) FROM sessions",
    "FROM sessions LIMIT 1",
    "WITH a AS (SELECT 1 AS x) SELECT * FROM a",
    "DESCRIBE sessions",
    "SHOW TABLES",
    "SUMMARIZE tool_calls",
    "PRAGMA table_info('sessions')",
    "PRAGMA show_tables", "PRAGMA database_list", "PRAGMA version",  # the PRAGMAs that read, as CLI.md lists
    "EXPLAIN SELECT 1",
    "EXPLAIN ANALYZE SELECT COUNT(*) FROM parts",
    "CALL ducklake_snapshots('lake')",
    "FROM ducklake_table_info('lake')",
    "FROM query_table('sessions') LIMIT 1",
    "SELECT 1 AS checkpoint, 'query(' AS q",  # a name and a text, not calls
    "-- only a comment",
]


@pytest.fixture(scope="module")
def parser():
    """Any connection parses: the check never runs what it checks."""
    with duckdb.connect(config={"enable_external_access": "false"}) as con:
        yield con


@pytest.mark.parametrize("what, sql", WRITES, ids=[sql for _, sql in WRITES])
def test_a_statement_that_writes_is_refused(parser, what, sql):
    with pytest.raises(Refused) as refused:
        check(parser, sql)
    assert refused.value.what == f"{what} are refused"
    assert str(refused.value).startswith(f"{what} are refused: a reader only reads (")


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("name", WRITING_FUNCTIONS)
def test_a_function_that_writes_is_refused_however_it_is_called(parser, name, spelling):
    with pytest.raises(Refused, match=f"^the function {name} is refused: a reader only reads"):
        check(parser, spelling.format(f=name, F=name.title()))


@pytest.mark.parametrize("sql", READS)
def test_a_statement_that_reads_passes(parser, sql):
    check(parser, sql)


def test_several_statements_are_refused_together():
    with duckdb.connect() as con, pytest.raises(NotOne, match="the query holds 2 statements: give one at a time"):
        check(con, "SELECT 1; CALL ducklake_cleanup_old_files('lake')")


def test_a_pivot_without_its_values_is_said_as_such_and_one_with_them_passes():
    """DuckDB runs a PIVOT without an IN list as two statements (a type made, then the query): it
    was refused as "2 statements", which the user had not written (an agent's trial)."""
    with duckdb.connect() as con:
        con.execute("CREATE TABLE sessions (project VARCHAR, provider VARCHAR)")
        with pytest.raises(NotOne, match=r"a PIVOT without the values it spreads makes a type first.*IN \('claude'"):
            check(con, "PIVOT sessions ON provider USING count(*) GROUP BY project")
        check(con, "PIVOT sessions ON provider IN ('claude', 'codex') USING count(*) GROUP BY project")


def test_a_query_nested_too_deep_is_said_without_duckdbs_advice_to_set_a_limit():
    """DuckDB's parser advises `SET max_expression_depth`, which a reader's locked configuration refuses."""
    with duckdb.connect() as con, pytest.raises(NotOne) as said:
        check(con, "SELECT " + " + ".join(["1"] * 1500))
    assert str(said.value).startswith("the query nests expressions deeper than DuckDB's limit of 1000 ")
    assert "write it flatter" in str(said.value) and "may not SET" in str(said.value)


# --- the connection ----------------------------------------------------------------------

# Every table function DuckDB 1.5.5 and DuckLake offer a reader that reads only, reviewed one by
# one; the others are refused (REFUSED_FUNCTIONS, and every ducklake_* not in DUCKLAKE_READS).
# An upgrade that brings a new function fails the test below until it is put on one side.
REVIEWED_READS = {
    "duckdb_approx_database_count", "duckdb_columns", "duckdb_connection_count", "duckdb_constraints",
    "duckdb_coordinate_systems", "duckdb_databases", "duckdb_dependencies", "duckdb_extensions",
    "duckdb_external_file_cache", "duckdb_functions", "duckdb_indexes", "duckdb_keywords", "duckdb_log_contexts",
    "duckdb_logs", "duckdb_logs_parsed", "duckdb_memory", "duckdb_optimizers", "duckdb_prepared_statements",
    "duckdb_profiling_settings", "duckdb_schemas", "duckdb_secret_types", "duckdb_secrets", "duckdb_sequences",
    "duckdb_settings", "duckdb_table_sample", "duckdb_tables", "duckdb_temporary_files", "duckdb_types",
    "duckdb_variables", "duckdb_views", "generate_series", "glob", "histogram", "histogram_values",
    "icu_calendar_names", "json_each", "json_tree", "parquet_bloom_probe", "parquet_file_metadata",
    "parquet_full_metadata", "parquet_kv_metadata", "parquet_metadata", "parquet_scan", "parquet_schema",
    "pg_timezone_names", "pragma_collations", "pragma_database_size", "pragma_metadata_info", "pragma_platform",
    "pragma_show", "pragma_storage_info", "pragma_table_info", "pragma_user_agent", "pragma_version", "query_table",
    "range", "read_blob", "read_csv", "read_csv_auto", "read_duckdb", "read_json", "read_json_auto",
    "read_json_objects", "read_json_objects_auto", "read_ndjson", "read_ndjson_auto", "read_ndjson_objects",
    "read_parquet", "read_text", "repeat", "repeat_row", "seq_scan", "sniff_csv", "summary", "test_all_types",
    "test_vector_types", "unnest", "which_secret", *DUCKLAKE_READS,
}


def _reader(layout):
    return open_reader(layout.warehouse, layout.tables_path)


def test_the_postgres_extensions_table_functions_are_refused():
    """A reader of a team's catalog in PostgreSQL has the postgres and httpfs extensions loaded:
    their table functions run SQL on the server (postgres_query could take the center's writer
    lock), attach or connect past the catalog, or change the extension's state (a new user's trial)."""
    from warehouse.lake.ducklake import load_packaged

    with duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}) as con:
        plain = {r[0] for r in con.execute("SELECT function_name FROM duckdb_functions() "
                                           "WHERE function_type IN ('table', 'table_macro')").fetchall()}
        for name in ("postgres_scanner", "httpfs"):
            load_packaged(con, name)
        added = {r[0] for r in con.execute("SELECT function_name FROM duckdb_functions() "
                                           "WHERE function_type IN ('table', 'table_macro')").fetchall()} - plain
        assert "postgres_query" in added
        for name in added:
            with pytest.raises(Refused, match=f"^the function {name} is refused: a reader only reads .it runs SQL on"):
                check(con, f"SELECT * FROM {name}('__ducklake_metadata_lake', 'SELECT pg_advisory_xact_lock(1)')")


def test_every_table_function_is_refused_or_reviewed_as_reading(lake):
    with _reader(lake) as con:
        names = {r[0] for r in con.execute("SELECT function_name FROM duckdb_functions() "
                                           "WHERE function_type IN ('table', 'table_macro')").fetchall()}
        refused = set()
        for name in names:
            try:
                check(con, f"SELECT * FROM {name}()")
            except Refused:
                refused.add(name)
    assert names - refused == REVIEWED_READS, "a table function to review: refuse it or add it here"
    # write_log is a scalar function; the postgres extension's are loaded on a team catalog's reader only
    postgres = {n for n in WRITING_FUNCTIONS if n.startswith(("postgres_", "pg_", "read_postgres"))}
    assert refused | {"write_log"} | postgres == set(WRITING_FUNCTIONS)


def _everything(*roots) -> dict:
    """Every file under the roots, with its size and modification time: what a write would change."""
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for root in roots for p in Path(root).rglob("*") if p.is_file()}


def _dashboards_reader(layout):
    """A cursor of the dashboard's reader, as each of its requests gets one."""
    from warehouse.serve.dashboard.server import Reader

    return Reader(layout.warehouse, layout.tables_path).cursor()


@pytest.mark.parametrize("reader", [_reader, _dashboards_reader], ids=["agentlake sql", "dashboard"])
def test_the_connection_itself_reaches_no_other_file_keeps_no_secret_and_changes_no_setting(lake, tmp_path, reader):
    """Below the check: what a statement that got past it would meet. DuckDB refuses these itself.
    The dashboard runs its own SQL (with filter values quoted into its insight tables) on the same
    kind of connection."""
    tmp_path = tmp_path / "elsewhere"
    tmp_path.mkdir()
    (tmp_path / "in.csv").write_text("a\n1\n")
    duckdb_home = Path.home() / ".duckdb"
    before = _everything(lake.home, duckdb_home)
    with reader(lake) as con:
        assert con.execute("SELECT COUNT(*) FROM sessions").fetchone() == (scalar(lake, "SELECT COUNT(*) FROM sessions"),)
        for sql in (f"COPY (SELECT 1) TO '{tmp_path / 'out.csv'}'", f"SELECT * FROM read_csv('{tmp_path / 'in.csv'}')",
                    f"ATTACH '{tmp_path / 'other.duckdb'}' AS other", f"EXPORT DATABASE '{tmp_path / 'export'}'",
                    "INSTALL httpfs", "UPDATE EXTENSIONS", f"SELECT * FROM read_text('{lake.home / 'config.toml'}')"):
            with pytest.raises(duckdb.PermissionException, match="file system operations are disabled by configuration"):
                con.execute(sql)
        with pytest.raises(duckdb.InvalidInputException, match="Persistent secrets are disabled"):
            con.execute("CREATE PERSISTENT SECRET s (TYPE ducklake, METADATA_PATH 'm.ducklake')")
        for setting in ("enable_external_access = true", "allowed_directories = ['/']", "autoinstall_known_extensions = true",
                        "allow_unsigned_extensions = true", "lock_configuration = false"):
            with pytest.raises(duckdb.InvalidInputException, match="the configuration has been locked"):
                con.execute(f"SET {setting}")
    assert sorted(tmp_path.iterdir()) == [tmp_path / "in.csv"]
    assert _everything(lake.home, duckdb_home) == before
    assert not (duckdb_home / "stored_secrets").exists()


def test_the_connection_loads_no_extension_an_unsigned_one_included(lake, tmp_path):
    """The reader's connection loads agentlake's pinned DuckLake binary without DuckDB's second
    check of its signature (it allows unsigned extensions, as the writer's does): the SQL it runs
    next can load nothing at all, a copy of that binary included."""
    from warehouse.lake.ducklake import pinned_binary

    if pinned_binary() is None:
        pytest.skip("no pinned ducklake binary on this platform: the reader keeps DuckDB's check")
    unsigned = tmp_path / "copy.duckdb_extension"
    unsigned.write_bytes(pinned_binary().read_bytes())
    with _reader(lake) as con:
        assert con.execute("SELECT current_setting('allow_unsigned_extensions')").fetchone() == (True,)
        for sql in (f"LOAD '{unsigned}'", "LOAD httpfs"):  # (json and parquet are built in)
            with pytest.raises(duckdb.PermissionException, match="Loading external extensions is disabled"):
                con.execute(sql)


# --- `agentlake sql`, end to end -----------------------------------------------------------


def _sql(layout, query):
    return run_cli("sql", "--home", layout.home, query)


def _data_files(layout) -> dict:
    return _everything(Path(layout.tables_path) / "main")


def test_cleanup_after_a_compaction_deletes_no_file(lake):
    """The trial's case: after `compact --keep-seconds 60`, `CALL ducklake_cleanup_old_files('lake',
    cleanup_all => true)` exited 2 having deleted the files the compaction kept for readers."""
    assert run_cli("compact", "--home", lake.home).returncode == 0  # the inlined rows to files
    with writing(lake.warehouse, lake.tables_path, rebuilds=False) as con:  # files to merge
        for _ in range(2):
            con.execute("INSERT INTO tool_calls SELECT * FROM tool_calls")
    assert run_cli("compact", "--home", lake.home, "--keep-seconds", "60").returncode == 0
    with duckdb.connect(str(lake.warehouse), read_only=True) as catalog:
        assert catalog.execute("SELECT COUNT(*) FROM ducklake_files_scheduled_for_deletion").fetchone()[0] > 0
    before = _data_files(lake)
    ran = _sql(lake, "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
    assert ran.returncode == 2
    assert ran.stderr.startswith("error: the function ducklake_cleanup_old_files is refused: `agentlake sql` only reads")
    assert _data_files(lake) == before


@pytest.mark.parametrize("call", ["ducklake_rewrite_data_files('lake')", "ducklake_merge_adjacent_files('lake')",
                                  "ducklake_flush_inlined_data('lake')", "ducklake_delete_orphaned_files('lake')"])
def test_maintenance_leaves_no_file_behind(lake, call):
    """They wrote new files, orphans once the read-only catalog refused their commit."""
    with duckdb.connect(str(lake.warehouse), read_only=True) as catalog:  # rows to flush, small files to merge
        assert catalog.execute("SELECT COUNT(*) FROM duckdb_tables() WHERE table_name LIKE 'ducklake_inlined_data%'"
                               ).fetchone()[0] > 0
    before = _everything(lake.home)
    ran = _sql(lake, f"CALL {call}")
    assert ran.returncode == 2 and "is refused: `agentlake sql` only reads" in ran.stderr
    assert _everything(lake.home) == before


def test_secrets_and_extensions_are_left_as_they_are(lake):
    extensions = _everything(Path.home() / ".duckdb")
    ran = _sql(lake, "CREATE PERSISTENT SECRET s (TYPE ducklake, METADATA_PATH 'm.ducklake')")
    assert ran.returncode == 2 and ran.stderr.startswith("error: CREATE statements are refused")
    assert not (Path.home() / ".duckdb" / "stored_secrets").exists()
    ran = _sql(lake, "UPDATE EXTENSIONS")
    assert ran.returncode == 2 and ran.stderr.startswith("error: UPDATE EXTENSIONS statements are refused")
    assert _everything(Path.home() / ".duckdb") == extensions


def test_a_file_beside_the_lake_is_not_read(lake, tmp_path):
    """docs/CLI.md: DuckDB has one switch for files, reading and writing; the reader's is off."""
    (tmp_path / "budget.csv").write_text("project,usd\nshop,10\n")
    ran = _sql(lake, f"SELECT * FROM read_csv('{tmp_path / 'budget.csv'}')")
    assert ran.returncode == 2
    assert "Permission Error" in ran.stderr and "file system operations are disabled by configuration" in ran.stderr
    ran = run_cli("sql", "--home", lake.home, "SELECT COUNT(*) AS n FROM sessions", "--format", "csv")
    assert (ran.returncode, ran.stdout.split()) == (0, ["n", str(scalar(lake, "SELECT COUNT(*) FROM sessions"))])
    # the landing files, in the same lake as the tables (a home's own; a team's, in PostgreSQL's
    # case): not the tables' own files either (a new user's trial read every machine's). Merged
    # once, the copy's catalog names its own lake (copy_home)
    assert run_cli("merge", "--home", lake.home, "--full").returncode == 0
    [landed] = [p for p in Path(lake.lake).rglob("_landing/*/*/*/*/sessions.parquet")][:1]
    ran = _sql(lake, f"SELECT COUNT(*) FROM read_parquet('{landed}')")
    assert ran.returncode == 2 and "file system operations are disabled by configuration" in ran.stderr, ran.stderr
