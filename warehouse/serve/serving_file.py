"""serving.duckdb: a copy of the marts in a plain DuckDB file, for BI tools that cannot load
DuckDB's extensions (the marts are DuckLake tables in the lake), sit on another host, or hold a
lock while they are open.

It is small (aggregates only), holds no paths to the lake, and is rebuilt into a temporary file
and swapped in. Its storage format is pinned to an old version by default
so that BI drivers bundling an older DuckDB can open it.
"""

import os
import re
from pathlib import Path

import duckdb

from warehouse.catalog.marts import MARTS
from warehouse.lake.ducklake import connect
from warehouse.lake.layout import is_duckdb

DEFAULT_STORAGE_VERSION = "v1.0.0"  # readable by DuckDB 1.0 and newer
DEFAULT_NAME = "serving.duckdb"


class ServingError(ValueError):
    """A serving database that cannot be written where or as asked (a folder, a place this user
    cannot write, a storage version DuckDB does not know): the CLI's usage error."""


def check_storage_version(version: str) -> str:
    """`version` if DuckDB can write that storage format, else ServingError naming the ones it can."""
    quoted = version.replace("'", "''")
    try:
        with duckdb.connect() as con:
            con.execute(f"ATTACH ':memory:' AS probe (STORAGE_VERSION '{quoted}')")
    except duckdb.Error as exc:
        known = re.findall(r"v\d+\.\d+\.\d+|latest", str(exc).partition("valid options are:")[2])
        versions = f"{known[0]} to {known[-2]}, or latest" if len(known) > 2 and known[-1] == "latest" else (
            ", ".join(known) or str(exc))
        raise ServingError(f"--storage-version {version!r} is not a DuckDB storage version ({versions})") from None
    return version


def check_target(target: Path, own: dict[Path, str] | None = None) -> None:
    """A target that can never be a database file, or a file that is not a serving database: said
    before the warehouse is opened. The file is replaced whole: `serving <the home's catalog>`
    made it a database of marts and broke the home, `serving README.md` turned the text into one
    (a trial). `own`: the home's files (its catalog, its search index), each with what it is."""
    if target.is_dir():
        raise ServingError(f"{target} is a folder: give the serving database's file, "
                           f"e.g. {target / 'serving.duckdb'}")
    what = next((what for path, what in (own or {}).items() if target.resolve() == Path(path).resolve()), None)
    if what:
        raise ServingError(f"{target} is this home's {what}, not a serving database: give another file, "
                           f"e.g. {target.with_name('serving.duckdb')}")
    held = _other_tables(target)
    if held is not None:
        raise ServingError(f"{target} is not a serving database ({held}): it is left as it is; give another "
                           f"file, e.g. {target.with_name('serving.duckdb')}")


def _other_tables(target: Path) -> str | None:
    """What makes the file at `target` something other than a serving database, or None: no file,
    an empty one, or a DuckDB database holding marts only (one this command wrote, which it
    replaces). A database another process holds locked is taken as the serving one a BI tool has
    open, if it has the default name (the home's own files are refused by name before)."""
    try:
        with target.open("rb") as fh:
            head = fh.read(12)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"it cannot be read: {exc.strerror or exc}"
    if not head:
        return None
    if not is_duckdb(head):
        return "not a DuckDB database"
    try:
        with duckdb.connect(str(target), read_only=True) as con:
            tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
            views = con.execute("SELECT COUNT(*) FROM duckdb_views() WHERE NOT internal").fetchone()[0]
    except duckdb.Error as exc:
        if "lock" in str(exc).lower():  # what it holds cannot be read: only the default name is taken for one
            return None if target.name == DEFAULT_NAME else (
                "a DuckDB database another program holds open for writing: close it, or give another file")
        return f"a DuckDB database this DuckDB cannot open: {str(exc).splitlines()[0]}"
    others = sorted(tables - set(MARTS))
    if others or views:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        return f"a DuckDB database with other tables: {shown}" if others else "a DuckDB database with views"
    return None


def build_serving(warehouse: Path, target: Path, storage_version: str = DEFAULT_STORAGE_VERSION,
                  data_path: str | None = None) -> dict[str, int]:
    """Copy the marts' tables from the lake's catalog into `target`; returns rows per table.
    `data_path`: the layout's, for a home moved or copied since its last write (warehouse.lake.ducklake.connect).
    A target that cannot be written (a folder, a place this user cannot write) or a storage
    version DuckDB does not know raise ServingError before anything is written."""
    check_storage_version(storage_version)
    check_target(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.unlink(missing_ok=True)
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL))  # can this folder take a file?
        tmp.unlink()
    except OSError as exc:
        why = "a file is in the way of its folder" if isinstance(exc, (FileExistsError, NotADirectoryError)) else (
            exc.strerror or exc)
        raise ServingError(f"cannot write the serving database {target}: {why}") from None
    counts = {}
    try:
        with connect(warehouse, data_path, ours=True) as con:
            quoted = str(tmp).replace("'", "''")
            con.execute(f"ATTACH '{quoted}' AS serving (STORAGE_VERSION '{storage_version}')")
            for mart in MARTS:
                con.execute(f'CREATE TABLE serving."{mart}" AS SELECT * FROM lake.main."{mart}"')
                counts[mart] = con.execute(f'SELECT COUNT(*) FROM serving."{mart}"').fetchone()[0]
            con.execute("DETACH serving")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
        Path(str(tmp) + ".wal").unlink(missing_ok=True)
    return counts
