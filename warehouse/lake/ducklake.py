"""DuckLake, the lake's table format: its extension, loaded offline, and the catalog attached.

The catalog is a DuckDB file. One writer (a merge, a compaction) works on its own copy,
`<stem>.writer.ducklake`, under a lock; when it has committed, the copy is published as the
readers' file (`Layout.warehouse`, `warehouse.ducklake`) by an atomic rename. Readers attach the
published file read-only: any number at once, during a write too, each on the snapshot it
opened (a held connection keeps the file it opened until it reconnects). A SQLite catalog
would let readers share the writer's file, but committing a merge's many new files through it was
many times slower than in a DuckDB file (docs/BENCHMARKS.md, "Figures behind the code's choices").

The data is Parquet partitioned by year and project: `<data>/main/<table>/year=/project=/`.

The extension binary comes from a pinned PyPI package (`duckdb-extension-ducklake`), a third
party's repackaging of DuckDB's official builds, so it is checked against the SHA-256 recorded
here before it is installed. Nothing is downloaded: a DuckDB without the package may still have
the extension from `INSTALL ducklake` (DuckDB's own repository), and that is used instead.
"""

import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import duckdb

from transforms.atomic import replace_file
from warehouse.lake.duckdb_settings import connection_config
from warehouse.lake.layout import NotACatalog, check_catalog
from warehouse.lake.locks import held
from warehouse.lake import pg_catalog
from warehouse.lake.pg_catalog import is_postgres

CATALOG = "lake"  # the attached catalog's name in every connection
# A merge writes a file per partition at once. By default DuckDB buffers 512k rows per open file,
# 100 files at a time; flushing every 20k rows with 8 files open takes much less memory, in the same
# time and with about as many files (a landing file holds one source's rows, of one project and
# mostly one year: few partitions are open at once).
# The memory limit: 512 MB rather than 2 GB lowers a large merge's peak a lot, in the same time.
# What does not fit spills to a directory beside the catalog (DuckDB's default is `.tmp` in the
# working directory: a user's repository). Its cache of external files is off: it keeps more per
# landing file read than a small landing file holds, and a merge reads each file once.
# The figures: docs/BENCHMARKS.md, "Figures behind the code's choices".
WRITER_SETTINGS = {"memory_limit": "512MB", "partitioned_write_flush_threshold": "20000",
                   "partitioned_write_max_open_files": "8", "enable_external_file_cache": "false"}

# extension -> SHA-256 of the binary shipped for DuckDB 1.5.5 (linux x86_64); fts: the search index
# (warehouse.catalog.search_index), from `duckdb-extension-fts`, the same third party's package
PINNED = {"ducklake": "e51bf9e8d933d0e83780ae096455501b542cf962569a2ce5613532d702c08302",
          "fts": "cd7e87ea9623b8c6985a4ea05910d8a4acf6e50d474869d12f55cb4f200ebf70"}
# a catalog in PostgreSQL (warehouse.lake.pg_catalog), its tables on S3: `duckdb-extension-postgres-scanner`
# (the binary is named as DuckDB names the extension, so it loads by its path; libpq is linked in)
# and `duckdb-extension-httpfs`, the same third party's packages
PINNED.update({"postgres_scanner": "b1ced4cfc6311313e117c2afb3eac76508718778dde0716421503c7dbfb5605c",
               "httpfs": "887c392b1e49128d11667c81e3698d8b00dfdeb456771acf66d05a0f74f7b7d8"})


class ExtensionError(RuntimeError):
    pass


@lru_cache(maxsize=None)
def packaged_extension(name: str) -> Path | None:
    """The checked binary from the pinned package, or None when the package is not installed."""
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    path = root / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if not path.exists():
        raise ExtensionError(f"duckdb-extension-{name} has no build for DuckDB {duckdb.__version__} ({path})")
    digest = _digest(path)
    if name in PINNED and digest != PINNED[name] and _is_linux_x86():
        raise ExtensionError(f"{path} has SHA-256 {digest}, not the pinned {PINNED[name]}: refusing to load it")
    return path


def _digest(path: Path) -> str:
    """SHA-256 of a binary, remembered per (path, size, mtime) so a short command does not hash
    36 MB each time; a replaced file has another size or mtime and is hashed again."""
    st = path.stat()
    key = f"{path}:{st.st_size}:{st.st_mtime_ns}"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentlake" / "extension-digests.json"
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    if key not in known:
        known[key] = hashlib.sha256(path.read_bytes()).hexdigest()
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            replace_file(cache, json.dumps(known))
        except OSError:
            pass  # an unwritable cache only costs the hashing next time
    return known[key]


def _is_linux_x86() -> bool:
    import platform

    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


@lru_cache(maxsize=None)
def pinned_binary(name: str = "ducklake") -> Path | None:
    """The packaged binary when its SHA-256 is the one pinned here (on other platforms than
    linux x86_64 there is no pin: None)."""
    path = packaged_extension(name)
    return path if path is not None and name in PINNED and _digest(path) == PINNED[name] else None


# DuckDB checks an extension's signature on every LOAD by hashing its 36 MB binary, for each new
# connection (docs/BENCHMARKS.md, "Figures behind the code's choices"), and a changed source's merge
# opens three (the writer, the compaction probe, the checks). Connections that run agentlake's own
# SQL only (`ours`) load the pinned binary by its path, whose SHA-256 was checked above (once per
# file: _digest's cache), without DuckDB's second check; so do `agentlake sql` and the dashboard,
# whose SQL runs only once external access is off (warehouse.serve.read_only_sql). The notebooks
# keep it: with it off, SQL they run could LOAD any unsigned binary.
def _opened(ours: bool, settings: dict | None = None, extra: tuple[str, ...] = ()):
    """A new DuckDB connection (no progress bar) with DuckLake loaded, and the `extra` extensions;
    `settings` on top."""
    own = pinned_binary() if ours else None
    unsigned = {"allow_unsigned_extensions": "true"} if own else {}
    con = _quiet(duckdb.connect(config={**connection_config(), **unsigned, **(settings or {})}))
    try:
        # the tables' timestamps are UTC wall-clock values and their dates UTC days: in the
        # machine's own zone `current_date`, `now() - INTERVAL ...` and a cast to TIMESTAMPTZ
        # disagreed with them by its offset
        con.execute("SET TimeZone = 'UTC'")
        load_extensions(con, own)
        for name in extra:
            load_packaged(con, name, pinned_binary(name) if own else None)
    except BaseException:
        con.close()
        raise
    return con


def load_extensions(con, own: Path | None = None) -> None:
    """DuckLake from the packaged binary, or from DuckDB's own install; `own`: the pinned binary,
    loaded by its path (the connection allows unsigned extensions: _opened)."""
    load_packaged(con, "ducklake", own)


def load_packaged(con, name: str, own: Path | None = None) -> None:
    """DuckDB's extension `name` offline: `own` (its pinned binary, by its path, on a connection
    that allows unsigned extensions), else installed from its checked package, else DuckDB's own
    install of it."""
    path = packaged_extension(name)
    try:
        if own is not None:
            con.execute(f"LOAD {sql_string(own)}")
            _installed_once(con, name, own)
            return
        if path is not None:
            con.execute(f"INSTALL {sql_string(path)}")
        con.execute(f"LOAD {name}")
    except duckdb.Error as exc:
        raise ExtensionError(
            f"cannot load DuckDB's {name} extension ({exc}); install agentlake's pinned "
            f"duckdb-extension-{name}, or run `INSTALL {name}` in DuckDB once while online") from exc


_INSTALLED: set[str] = set()  # the extensions this process found installed in DuckDB's own folder


def _installed_once(con, name: str, binary: Path) -> None:
    """The pinned binary also installed where DuckDB looks for extensions (`~/.duckdb/extensions`),
    once per machine, so that any DuckDB of this version opens the catalog (docs/BI.md): loading it
    by its path installed nothing, and a plain `ATTACH 'ducklake:...'` tried to download it (a new
    user's trial). Asked once per process; a folder that cannot be written is left as it is."""
    if name in _INSTALLED:
        return
    _INSTALLED.add(name)  # tried once per process, installed or not
    try:
        [(installed,)] = con.execute("SELECT installed FROM duckdb_extensions() WHERE extension_name = ?",
                                     [name]).fetchall() or [(False,)]
        if not installed:
            con.execute(f"INSTALL {sql_string(binary)}")
    except duckdb.Error:
        pass


def interrupted(exc: BaseException) -> bool:
    """DuckDB's Ctrl-C in a query: its InterruptException, or the RuntimeError "Query interrupted"
    it raises when Python's own signal check came first (`agentlake sql` exited 1 with a
    `problem:` line for it, not 130: a trial)."""
    return type(exc).__name__ == "InterruptException" or (
        isinstance(exc, RuntimeError) and str(exc).strip() == "Query interrupted")


def sql_string(text) -> str:
    """`text` as a SQL string literal (a path may hold a quote)."""
    return "'" + str(text).replace("'", "''") + "'"


def writer_path(catalog: Path) -> Path:
    return Path(catalog).with_name(Path(catalog).stem + ".writer.ducklake")


# The catalog's DuckDB file in 16 kB blocks, not 256 kB: its thirty-odd small tables take a block
# each per column segment, so a new lake's catalog was far larger than it is now
# (docs/BENCHMARKS.md, "Figures behind the code's choices").
# The size is fixed when the file is made (an older catalog keeps its blocks).
META_BLOCK_SIZE = 16384


def _attach(con, path: Path, data_path: str | None, read_only: bool) -> None:
    options = ["READ_ONLY"] if read_only else []
    if data_path:  # this session's; the catalog keeps the path it was made with (see _relocated)
        options += [f"DATA_PATH {sql_string(data_path)}", "OVERRIDE_DATA_PATH true"]
    if not read_only and not path.exists():
        options.append(f"META_BLOCK_SIZE {META_BLOCK_SIZE}")
    opts = f" ({', '.join(options)})" if options else ""
    con.execute(f"ATTACH {sql_string('ducklake:' + str(path))} AS {CATALOG}{opts}")
    con.execute(f"USE {CATALOG}")


def _quiet(con):
    """No progress bar: DuckDB draws one on stdout for a query over 2 s, into `agentlake sql`'s
    output and a merge's (it is a setting of the connection, not of the database)."""
    con.execute("SET enable_progress_bar = false")
    return con


def _check(catalog: Path) -> None:
    """A folder, a file that is not DuckDB's, or a DuckDB database without DuckLake's tables (a
    serving file given by mistake) is refused with a clear message: before a first writer copies
    and publishes over it, after a reader's attach failed on it."""
    check_catalog(catalog)
    if not catalog.exists():
        return
    with duckdb.connect(config=connection_config()) as con:
        try:
            con.execute(f"ATTACH {sql_string(str(catalog))} AS probe (READ_ONLY)")
        except duckdb.Error as exc:
            # a catalog damaged on disk is derived from the landing files: said how to build it again
            raise NotACatalog(f"the warehouse {catalog} cannot be opened: {' '.join(str(exc).split())} (if it is "
                              "agentlake's catalog, damaged: move it away, and `agentlake merge` builds it again "
                              "from the landing files)") from exc
        if not con.execute("SELECT 1 FROM duckdb_tables() WHERE database_name = 'probe' "
                           "AND table_name = 'ducklake_metadata'").fetchall():
            raise NotACatalog(f"the warehouse {catalog} is a DuckDB database but not a DuckLake catalog "
                              "(by default the catalog is <home>/warehouse.ducklake)")


# what an empty home is told to do first: a reader of a team's lake too (who was told to ingest)
FIRST_STEP = ("run `agentlake ingest` (or `agentlake demo`) first, or `agentlake merge --lake LAKE` "
              "to read a team's lake")


def connect(catalog: Path, data_path: str | None = None, *, ours: bool = False, settings: dict | None = None):
    """A reader's connection, as every reader opens the warehouse: an in-memory DuckDB with the
    published catalog attached read-only as the default database, so `FROM sessions` and
    `FROM daily_costs` work as they are, during a merge too.
    `data_path`: where the tables' files are now (the layout's `tables_path`), if the home may
    have moved since its last write. `ours`: only agentlake's own SQL runs on it (see _opened).
    `settings`: DuckDB's, from the start (a few are taken only then: warehouse.serve.read_only_sql).
    A read-only attach changes nothing, so a file that is not a catalog is looked into only when
    the attach fails (the probe is a second connection)."""
    if is_postgres(catalog):  # the team's catalog: the published snapshot, read-only (its own data path)
        return open_catalog(catalog, None, read_only=True, ours=ours, settings=settings)
    catalog = Path(catalog)
    if not catalog.exists():
        raise FileNotFoundError(f"no warehouse at {catalog}: {FIRST_STEP}")
    check_catalog(catalog)
    con = _opened(ours, settings)
    try:
        _attach(con, catalog, None, read_only=True)
        if data_path and _moved(con, data_path):
            con.execute("USE memory")
            con.execute(f"DETACH {CATALOG}")
            _attach(con, catalog, data_path, read_only=True)
    except duckdb.Error:
        con.close()
        _check(catalog)  # what is wrong with the file, when it is the file
        raise
    return con


@contextmanager
def one_snapshot(con):
    """A read transaction on `con`: every query in the block reads the same snapshot of the
    catalog, which DuckLake loads once instead of at each query. Rolled back: it only reads."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    finally:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:  # a team catalog's server gone: its failure would hide the error that ended the block
            pass


@contextmanager
def writing(catalog: Path, data_path: str | None = None, memory_limit: str | None = None, *,
            rebuilds: bool = True, on_rebuild=None, lake: str = ""):
    """The one writer's connection, on its own copy of the catalog, under a lock (a second
    writer waits for it, said once on stderr); on a clean exit the copy is published to
    `catalog` atomically. A writer that dies publishes nothing: readers keep the last good
    catalog, and the next writer starts from its own copy. A catalog in PostgreSQL: _pg_writing.
    `rebuilds`: the writer builds every table (a merge), so a catalog whose files are not under
    `data_path` starts anew, once `on_rebuild(con)` on the old one has not raised; else (a
    compaction) that is an error. `lake`: the lake's URI, whose endpoint a catalog in PostgreSQL
    reads its tables through (data_path names none)."""
    if is_postgres(catalog):
        with _pg_writing(catalog, data_path, memory_limit, lake) as con:
            yield con
        return
    catalog = Path(catalog)
    own = writer_path(catalog)
    if not rebuilds and data_path and not os.path.isdir(data_path):
        data_path = None  # a compaction where no tables are: the catalog's own place (see _moved)
    # the catalog is copied to a first writer's own file: looked into then (the probe is a second
    # connection); a writer file of its own came from a catalog looked into before
    if own.exists():
        check_catalog(catalog)
    else:
        _check(catalog)
    catalog.parent.mkdir(parents=True, exist_ok=True)
    with held(own.with_suffix(".lock"), waiting=lambda holder: _say_waiting(catalog, holder)):
        if not own.exists() and catalog.exists():  # a home copied without its writer file
            shutil.copyfile(catalog, own)
        spill = own.with_name(f".{own.name}.spill")
        settings = {**WRITER_SETTINGS, **({"memory_limit": memory_limit} if memory_limit else {})}
        con = _writer_attached(own, catalog, data_path, {**settings, "temp_directory": str(spill)})
        try:
            if data_path and _relocated(con, data_path):
                if not rebuilds:
                    raise NotACatalog(f"the warehouse {catalog} holds tables whose files are not under "
                                      f"{data_path}: `agentlake merge` builds it from that lake first")
                con.execute("USE memory")
                con.execute(f"DETACH {CATALOG}")
                if on_rebuild:  # asked of the old catalog over its own data path: its tables readable
                    _attach(con, own, None, read_only=True)
                    try:
                        on_rebuild(con)
                    finally:
                        con.execute("USE memory")
                        con.execute(f"DETACH {CATALOG}")
                own.unlink()  # built from another lake's files: a new catalog, built again in full
                _attach(con, own, data_path, read_only=False)
            yield con
            _record_publication(con, catalog)
            con.execute("USE memory")
            con.execute(f"DETACH {CATALOG}")  # checkpointed: the file is complete on its own
        finally:
            con.close()
        publish(own, catalog)


def _say_waiting(catalog: Path, holder: str | None) -> None:
    print(f"waiting for another merge or compaction into {catalog} to end ({holder or 'its holder unknown'})",
          file=sys.stderr, flush=True)


@contextmanager
def _pg_writing(catalog: "pg_catalog.PostgresCatalog", data_path: str | None, memory_limit: str | None,
                lake: str = ""):
    """`writing` for the team's catalog in PostgreSQL: under the writer lock that lives there
    (a second center waits, then gives up), on the catalog itself (each commit is PostgreSQL's);
    on a clean exit, readers move to the last commit (pg_catalog.publish)."""
    spill = Path(tempfile.gettempdir()) / f"agentlake-writer-{os.getpid()}.spill"  # no home of its own
    settings = {**WRITER_SETTINGS, **({"memory_limit": memory_limit} if memory_limit else {}),
                "temp_directory": str(spill)}
    lock = _opened(True, extra=("postgres_scanner",))
    with pg_catalog.writer_lock(catalog, lock):
        server, place = pg_catalog.server_of(lock, catalog), lake or data_path
        if place and not pg_catalog.made(lock):  # a new catalog: refused another's lake before it names it
            pg_catalog.refuse_claimed(place, catalog)
        try:
            con = open_catalog(catalog, data_path, read_only=False, ours=True, settings=settings, lake=lake)
        except (duckdb.Error, pg_catalog.CatalogUnreachable) as exc:
            raise pg_catalog.read_only_role(catalog, exc) or exc
        try:
            try:  # the writer's first write: a reader's role is refused it
                pg_catalog.publish(con, f"__ducklake_metadata_{CATALOG}", unless_published=True)
            except duckdb.Error as exc:
                raise pg_catalog.read_only_role(catalog, exc) or exc
            # before any file is written to the lake: another catalog's lake is refused
            pg_catalog.claim_lake(con, f"__ducklake_metadata_{CATALOG}", catalog, place or stored_data_path(con),
                                  server)
            try:
                yield con
                pg_catalog.publish(con, f"__ducklake_metadata_{CATALOG}")
            except duckdb.Error as exc:
                raise pg_catalog.lost(catalog, exc, "writing it") or exc
        finally:
            pg_catalog.close(con)


# What an attach that failed may say without the file being damaged: it is left alone then.
_NOT_DAMAGE = ("Could not set lock", "Permission denied", "No space left", "Read-only file system", "Interrupt",
               "Out of Memory")


def _writer_attached(own: Path, catalog: Path, data_path: str | None, settings: dict):
    """A connection with the writer's copy attached. A copy that cannot be opened (left empty or
    cut short by a full disk or a crash mid-write) is discarded and made again from the published
    catalog, the truth (as SQLite and PostgreSQL recover from a torn write by themselves): what
    it held and the published catalog did not (a merge not yet published) is merged again from
    the landing files. Said on stderr, naming both files."""
    con = _opened(True, settings)
    try:
        _attach(con, own, data_path, read_only=False)
        return con
    except duckdb.Error as exc:
        con.close()
        if isinstance(exc, (duckdb.OutOfMemoryException, duckdb.InterruptException)) or any(
                s in str(exc) for s in _NOT_DAMAGE):
            raise
        # DuckDB's own words, without its prefix naming the file twice
        reason = re.sub(r'Failed to attach DuckLake MetaData "[^"]*" at path \+ "[^"]*"', "",
                        " ".join(str(exc).split()))
    for stale in (own, own.with_name(own.name + ".wal")):
        stale.unlink(missing_ok=True)
    if catalog.exists():
        _check(catalog)  # the published one must be sound to start again from it
        shutil.copyfile(catalog, own)
    again = "made again from the published catalog" if catalog.exists() else "started anew (nothing was published)"
    print(f"warning: the writer's copy {own} could not be opened ({reason}): discarded and {again}; what it "
          "held beyond that is merged again from the landing files", file=sys.stderr, flush=True)
    con = _opened(True, settings)
    try:
        _attach(con, own, data_path, read_only=False)
    except BaseException:
        con.close()
        raise
    return con


def _moved(con, data_path: str) -> bool:
    """The catalog's own data path is gone and the layout names another: a home moved. Only
    then does a reader take the layout's: a lake named once (`ingest --lake L`) and not since
    leaves the layout guessing a place the tables never were."""
    stored = stored_data_path(con)
    return stored is not None and stored.rstrip("/") != data_path.rstrip("/") and not os.path.isdir(stored)


def _relocated(con, data_path: str) -> bool:
    """The catalog records where its tables' files are, as an absolute path. A home moved or
    copied (lake and catalog together) finds every file under the new path: the catalog records
    that one from now on, and False. A catalog whose files are not there (its home given
    another lake) is True: it is built again from the lake it is given now."""
    stored = stored_data_path(con)
    if stored is None or stored.rstrip("/") == data_path.rstrip("/"):
        return False
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ?", [CATALOG]).fetchall()]
    # as this session resolves them (under data_path), every table's in one statement: each
    # statement pays DuckLake's catalog lookups again
    listed = " UNION ALL ".join(f"SELECT data_file, delete_file FROM ducklake_list_files('{CATALOG}', "
                                f"{sql_string(t)})" for t in tables)
    files = [f for row in (con.execute(listed).fetchall() if tables else []) for f in row if f is not None]
    if not all(Path(f).exists() for f in files):
        return True
    con.execute(f"UPDATE __ducklake_metadata_{CATALOG}.ducklake_metadata SET value = ? WHERE key = 'data_path'",
                [data_path])
    return False


def stored_data_path(con) -> str | None:
    """The data path the attached catalog records (made with, or moved to: `_relocated`), not
    this session's DATA_PATH; None for a catalog that records none."""
    stored = con.execute(f"SELECT value FROM __ducklake_metadata_{CATALOG}.ducklake_metadata "
                         "WHERE key = 'data_path'").fetchone()
    return stored[0] if stored else None


def tables_folder(data_path: str) -> str:
    """The tables' own folder under a catalog's data path (its `main` schema's: `<data>/main/`).
    In a home's own lake the data path holds every machine's landing files and state too."""
    return data_path.rstrip("/") + "/main/"


# DuckLake 1.5.5 keeps no statistics for a table that never held a row, and looks them up in the
# catalog again for each column every time a query binds the table (upstream, duckdb/ducklake#1313
# caches the miss): an empty `usage` made planning the marts that read it several times slower
# (docs/BENCHMARKS.md, "Figures behind the code's choices"). A row inserted and deleted in one
# transaction leaves statistics of 0 rows and no file: the row only ever lived inlined in the catalog.
def give_statistics(con, table: str) -> None:
    """Statistics for `table`, made empty in the caller's transaction (a table with rows has its
    own). Outside one, each statement would commit, and a snapshot would hold the row."""
    con.execute(f'INSERT INTO {table} DEFAULT VALUES')
    con.execute(f'DELETE FROM {table}')


def give_missing_statistics(con) -> None:
    """Statistics for every empty table of the attached catalog without any (one made before
    `give_statistics` was called on creation), in the caller's transaction. The catalog's own
    tables show what was committed: a table dropped in this transaction is left out."""
    meta = f"__ducklake_metadata_{CATALOG}"
    names = [r[0] for r in con.execute(
        f"SELECT t.table_name FROM {meta}.ducklake_table t WHERE t.end_snapshot IS NULL AND NOT EXISTS "
        f"(SELECT 1 FROM {meta}.ducklake_table_stats s WHERE s.table_id = t.table_id)").fetchall()]
    if not names:  # every merge but a catalog's first since an older release: duckdb_tables() costs tens of ms
        return
    here = {r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main'", [CATALOG]).fetchall()}
    for name in [n for n in names if n in here]:
        table = f'{CATALOG}.main."{name}"'
        if con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0:
            give_statistics(con, table)


def _current_files_sql() -> str:
    """Every current data and delete file of the attached catalog: (table, path, size, footer
    size), paths resolved as DuckLake resolves them (data path, schema, table, file). One query
    on the catalog's own tables: `ducklake_list_files` per table cost a call each."""
    meta = f"__ducklake_metadata_{CATALOG}"
    files = ("SELECT b.table_name, CASE WHEN f.path_is_relative THEN b.base || f.path ELSE f.path END, "
             "f.file_size_bytes, f.footer_size FROM {kind} f JOIN bases b USING (table_id) "
             "WHERE f.end_snapshot IS NULL")
    return f"""
        WITH bases AS (
            SELECT t.table_id, t.table_name,
                   CASE WHEN NOT t.path_is_relative THEN t.path
                        WHEN s.path_is_relative THEN d.value || s.path || t.path ELSE s.path || t.path END AS base
            FROM {meta}.ducklake_table t JOIN {meta}.ducklake_schema s USING (schema_id),
                 (SELECT value FROM {meta}.ducklake_metadata WHERE key = 'data_path') d
            WHERE t.end_snapshot IS NULL AND s.end_snapshot IS NULL)
        {files.format(kind=f"{meta}.ducklake_data_file")}
        UNION ALL
        {files.format(kind=f"{meta}.ducklake_delete_file")}"""


def damaged_files(con, footers: bool = False) -> dict[str, list[str]]:
    """The tables' files that are not on disk as the catalog recorded them, by table: missing,
    of another size, or not ending with the Parquet footer it recorded (its length and the magic
    bytes). A stat and an 8-byte read per file, on every merge: a lost or cut-short file is found
    before a reader meets it. `footers`: each footer is read whole too (a full merge, which reads
    everything anyway). Bytes flipped in a page are found only by reading it (a reader's error
    then names `agentlake merge --full`)."""
    found = {}
    for table, path, size, footer in con.execute(_current_files_sql()).fetchall():
        if "://" in path:  # the tables' files are local (warehouse.lake.layout.tables_path)
            continue
        what = _file_damage(path, size, footer) or (_footer_damage(path) if footers else None)
        if what:
            found.setdefault(table, []).append(f"{path} {what}")
    return found


def _file_damage(path: str, size: int | None, footer: int | None) -> str | None:
    """What is wrong with one file, said after its path; None when it is as recorded."""
    try:
        with open(path, "rb") as fh:
            actual = os.fstat(fh.fileno()).st_size
            if size is not None and actual != size:
                return f"has {actual:,} bytes, not the {size:,} recorded"
            if actual < 12:
                return "is too short for Parquet"
            fh.seek(-8, os.SEEK_END)
            tail = fh.read(8)
    except FileNotFoundError:
        return "is missing"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if tail[4:] != b"PAR1":
        return "has no Parquet footer at its end"
    if footer and int.from_bytes(tail[:4], "little") != footer:
        return "does not end with the footer recorded"
    return None


def _footer_damage(path: str) -> str | None:
    import pyarrow.parquet as pq

    try:
        pq.read_metadata(path)
    except (OSError, ValueError) as exc:
        return f"has a footer that cannot be read ({' '.join(str(exc).split())})"
    return None


# DuckDB's words for a Parquet file it cannot open or read (a table file lost or damaged), in a
# reader's query: the error then says which command builds the tables again
_FILE_DAMAGE = ("Cannot open file", "Failed to read file", "HTTP 404", "ZSTD", "magic bytes", "TProtocolException",
                "Variable-length int", "don't know what type", "Out of buffer", "Could not read enough bytes",
                "Corrupted file", "invalid TType", "Invalid string encoding found in Parquet file")


def storage_failure(exc: Exception, con=None) -> str:
    """For a reader's error that the lake's object storage caused (it did not answer, or refused
    a read): what failed, where, and what to check; empty for any other. A reader of a team's
    catalog reads the tables' files from the lake's storage with its own endpoint and keys.
    A table's file not found (404) is damage_hint's, unless the reader's connection `con` finds
    none of the catalog's other files either: then the endpoint is not the lake's storage (a
    trial's $AWS_ENDPOINT_URL named another web server, and the reader was told to rebuild)."""
    text = " ".join(str(exc).split())
    url = re.search(r"'((?:https?|s3)://[^/'\s]+)", text)
    # httpfs's words name HTTP after the error's kind
    if not url or not re.match(r"(IO|HTTP) Error: .*\bHTTP\b", text):
        return ""
    if "HTTP 404" in text and not (con is not None and _none_of_the_files_found(con, text)):
        return ""
    said = re.match(r"(?:IO|HTTP) Error: (.*?)(?: error)? for HTTP", text)  # httpfs: "<reason> error for HTTP GET to '<url>'"
    status = re.search(r"\(HTTP (\d{3})[^)]*\)", text)
    reason = said.group(1) if said else f"HTTP {status.group(1)}" if status else text.split(": ", 1)[1][:160]
    return (f"cannot read the warehouse's tables from the lake's storage at {url.group(1)}: {reason} (its files "
            "are in the lake's object storage: check $AWS_ENDPOINT_URL and this reader's credentials for it, as "
            "docs/TEAM.md gives them)")


def _none_of_the_files_found(con, error: str, tries: int = 3) -> bool:
    """After a table file's 404: a few other files of the catalog in the lake's storage, each read
    up to its footer; True when none of them is found there either (False when one is, or there is
    no other to try: the file named is missing, as damage_hint says)."""
    try:
        paths = [path for _, path, *_ in con.execute(_current_files_sql()).fetchall()
                 if "://" in path and path.rsplit("/", 1)[-1] not in error][:tries]
    except duckdb.Error:
        return False
    for path in paths:
        try:
            con.execute("SELECT COUNT(*) FROM parquet_file_metadata(?)", [path]).fetchall()
            return False
        except duckdb.Error:
            continue
    return bool(paths)


def damage_hint(exc: Exception) -> str:
    """For a reader's error that a table file caused: what repairs it (empty for any other)."""
    if not any(words in str(exc) for words in _FILE_DAMAGE):
        return ""
    return (" (a file of the warehouse's tables is missing or damaged: `agentlake merge --full` builds the tables "
            "again from the landing files; a plain `agentlake merge` does when a file is missing or cut short)")


def roomy_memory_limit() -> str:
    """Three quarters of the machine's memory (DuckDB's own default is 80%): for a write that
    cannot spill within WRITER_SETTINGS' limit."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX
        return "4GB"
    return f"{max(1024, int(total * 0.75) // 2**20)}MB"


def retried_with_more_memory(write):
    """`write(memory_limit)`, with WRITER_SETTINGS' limit (None), and once more with most of
    the machine's memory if DuckDB ran out: an operator that cannot spill (a window or a join
    over a team's history) fails the write whole, which commits nothing."""
    try:
        return write(None)
    except duckdb.Error as exc:
        # running out while its result is fetched, DuckDB says so in another exception (an
        # InvalidInputException "... from an unsuccessful query result ... Out of Memory Error")
        if not isinstance(exc, duckdb.OutOfMemoryException) and "Out of Memory Error" not in str(exc):
            raise
        return write(roomy_memory_limit())


def publish(own: Path, catalog: Path) -> None:
    for stale in catalog.parent.glob(f".{catalog.name}.*.tmp"):  # a copy a killed writer left
        stale.unlink(missing_ok=True)  # (writers hold the lock, so none is in progress)
    tmp = catalog.with_name(f".{catalog.name}.{os.getpid()}.tmp")
    shutil.copyfile(own, tmp)
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, catalog)  # readers opening now get the new file; open ones keep theirs


def open_catalog(catalog: "pg_catalog.PostgresCatalog", data_path: str | None, *, read_only: bool, ours: bool,
                 settings: dict | None = None, lake: str = ""):
    """A connection with the catalog attached as `lake` (the default database): read-only for a
    reader, which needs only SELECT on the catalog's tables; `data_path` for the writer (where a
    new catalog puts its tables; an existing one keeps its own). Nothing to copy: each commit is
    PostgreSQL's, and a reader attaching sees the snapshot the last writer published as it ended."""
    # the postgres extension looks its secrets up in DuckDB's persistent storage, and fails when that
    # is off (a reader's AT_START): a reader's CREATE SECRET is refused by its statement check anyway
    settings = {k: v for k, v in (settings or {}).items() if k != "allow_persistent_secrets"}
    con = _opened(ours, settings, extra=("postgres_scanner", "httpfs"))
    try:
        pg_catalog.use_s3_credentials(con, lake=lake)
        if read_only:
            try:
                attach_published(con, catalog)
            except duckdb.Error as exc:
                raise pg_catalog.not_granted(catalog, exc) or exc
        else:
            options = f"DATA_PATH {sql_string(data_path)}" if data_path else ""
            pg_catalog.attach(con, catalog, catalog.attach_target, CATALOG, options, lake=lake)
        con.execute(f"USE {CATALOG}")
    except BaseException:
        con.close()
        raise
    return con


# A file catalog's publications, as PostgreSQL keeps them (pg_catalog.PUBLISHED): a table beside
# DuckLake's own in the catalog's file. A writer records its last commit as pending just before
# its copy replaces the catalog (`_record_publication`); the next writer confirms it against the
# published file itself (`_confirm_publications`): a writer that died in between published nothing.
_HISTORY = f"__ducklake_metadata_{CATALOG}.{pg_catalog.PUBLISHED}"


def _record_publication(con, catalog: Path) -> None:
    """The writer's last commit, about to replace the catalog: pending, with the time now. A
    commit published again (a merge that changed nothing) keeps the time it was first published."""
    insert = (f"INSERT INTO {_HISTORY} SELECT last, now(), true FROM (SELECT max(snapshot_id) AS last FROM "
              f"__ducklake_metadata_{CATALOG}.ducklake_snapshot) WHERE last > "
              f"(SELECT coalesce(max(snapshot_id), -1) FROM {_HISTORY})")
    try:
        _confirm_publications(con, catalog)  # a writer that swept has done it: nothing pending then
        con.execute(insert)
    except duckdb.CatalogException:  # the catalog's first publication, or one made before they were kept
        con.execute(f"CREATE TABLE {_HISTORY} (snapshot_id BIGINT NOT NULL, published_at TIMESTAMPTZ NOT NULL, "
                    "pending BOOLEAN NOT NULL)")
        con.execute(insert)


def _pending(con) -> list[tuple]:
    """The publications not confirmed yet. A history made before they were confirmed (its
    publications judged by the file's time, an earlier build of this release) gains the column,
    every row of it taken as confirmed."""
    try:
        return con.execute(f"SELECT snapshot_id FROM {_HISTORY} WHERE pending").fetchall()
    except duckdb.BinderException:
        con.execute(f"ALTER TABLE {_HISTORY} ADD COLUMN pending BOOLEAN DEFAULT false")
        con.execute(f"UPDATE {_HISTORY} SET pending = false")
        return []


def _confirm_publications(con, catalog: Path) -> None:
    """The pending publications the published file holds are confirmed, dated when the file
    replaced the one before if that is later (recording came before the copy, the fsync and the
    rename); those it does not hold were never published (their writer died first) and go."""
    pending = _pending(con)
    if not pending:
        return
    published = _published_last(catalog, con)
    replaced = os.stat(catalog).st_mtime if published is not None else None
    for (snapshot,) in pending:
        if published is not None and snapshot <= published:
            con.execute(f"UPDATE {_HISTORY} SET pending = false, published_at = greatest(published_at, "
                        "to_timestamp(?)) WHERE snapshot_id = ?", [replaced, snapshot])
        else:
            con.execute(f"DELETE FROM {_HISTORY} WHERE snapshot_id = ?", [snapshot])


def _published_last(catalog: Path, con) -> int | None:
    """The published catalog file's last snapshot (None without one), read on `con`."""
    if not Path(catalog).exists():
        return None
    con.execute(f"ATTACH {sql_string(str(catalog))} AS agentlake_published_file (READ_ONLY)")
    try:
        return con.execute("SELECT max(snapshot_id) FROM agentlake_published_file.ducklake_snapshot").fetchone()[0]
    finally:
        con.execute("DETACH agentlake_published_file")


def catalog_now(con, catalog):
    """The time now on the clock the catalog's times are written by: PostgreSQL's for a catalog
    there, this machine's for a file."""
    if is_postgres(catalog):
        return pg_catalog.server_now(con, f"__ducklake_metadata_{CATALOG}")
    return con.execute("SELECT now()").fetchone()[0]


def publications(con, catalog) -> list[tuple]:
    """Each snapshot readers of `catalog` attached, with the time it became theirs (catalog_now's
    clock), oldest first: the last is the one they attach now. Asked on the writer's connection.
    A day of them is kept (and the last)."""
    if is_postgres(catalog):
        return pg_catalog.publications(con, f"__ducklake_metadata_{CATALOG}")
    try:
        _confirm_publications(con, catalog)
    except duckdb.CatalogException:
        return []  # nothing published since they are kept
    con.execute(f"DELETE FROM {_HISTORY} WHERE published_at < now() - INTERVAL 1 DAY AND snapshot_id < "
                f"(SELECT max(snapshot_id) FROM {_HISTORY})")
    return con.execute(f"SELECT snapshot_id, published_at FROM {_HISTORY} ORDER BY snapshot_id").fetchall()


def attach_team_catalog(con, setting: str) -> None:
    """The team's catalog in PostgreSQL on a connection of another tool's making (a BI engine's,
    docs/BI.md): the pinned extensions loaded, the lake's S3 credentials from the AWS_* variables,
    the catalog attached read-only as `lake` at the snapshot its last writer published, and used."""
    for name in ("ducklake", "postgres_scanner", "httpfs"):
        load_packaged(con, name)
    pg_catalog.use_s3_credentials(con)
    attach_published(con, pg_catalog.PostgresCatalog.parse(setting))
    con.execute(f"USE {CATALOG}")


def refuse_a_readers_write(catalog: "pg_catalog.PostgresCatalog") -> None:
    """A reader's role asked to write the team's catalog (a merge, a compaction) is told so first,
    not after advice about its lake that ends in the same refusal (a team lead's trial)."""
    con = _opened(True, extra=("postgres_scanner",))
    try:
        pg_catalog.attach(con, catalog, catalog.words, "agentlake_role_probe", "TYPE postgres, READ_ONLY")
        if not pg_catalog.may_write(con, "agentlake_role_probe"):
            raise pg_catalog.read_only(catalog)
    finally:
        pg_catalog.close(con)


def attach_published(con, catalog: "pg_catalog.PostgresCatalog") -> None:
    """The catalog read-only at the snapshot its last writer published: every query on `con`
    sees that one, never a merge between its commits. A snapshot expired since (a compaction
    after a writer died between its commits) leaves the last commit."""
    version = pg_catalog.published_snapshot(con, catalog)
    if version is not None:
        try:
            pinned = f"READ_ONLY, SNAPSHOT_VERSION {int(version)}"
            pg_catalog.attach(con, catalog, catalog.attach_target, CATALOG, pinned)
            return
        except duckdb.Error as exc:
            if "No snapshot found" not in str(exc):
                raise
    pg_catalog.attach(con, catalog, catalog.attach_target, CATALOG, "READ_ONLY")
