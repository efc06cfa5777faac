"""DuckLake, the lake's table format: its extensions, loaded offline, and the catalog attached.

The catalog is a SQLite file (`Layout.warehouse`), so readers open it while a merge writes
(a DuckDB-file catalog would lock them out); the data is Parquet under the lake directory,
partitioned by (date, project): `<data>/main/<table>/date=YYYY-MM-DD/project=<slug>/*.parquet`.

The extension binaries come from pinned PyPI packages (`duckdb-extension-ducklake`,
`duckdb-extension-sqlite`), a third party's repackaging of DuckDB's official builds, so each is
checked against the SHA-256 recorded here before it is installed. Nothing is downloaded: a
DuckDB without the packages may still have the extensions from `INSTALL ducklake` (DuckDB's own
repository), and that is used instead.
"""

import hashlib
import importlib.util
import json
import os
from functools import lru_cache
from pathlib import Path

import duckdb

from warehouse.lakefs import NO_DOWNLOADS

CATALOG = "lake"  # the attached catalog's name in every connection

# extension -> SHA-256 of the binary shipped for DuckDB 1.5.5 (linux x86_64)
PINNED = {
    "ducklake": "e51bf9e8d933d0e83780ae096455501b542cf962569a2ce5613532d702c08302",
    "sqlite": "693d2bf90779df23ca5ebe0688639b9adfc11c2d55ae3466b33e28be16afaa5e",
}


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
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(known))
            os.replace(tmp, cache)
        except OSError:
            pass  # an unwritable cache only costs the hashing next time
    return known[key]


def _is_linux_x86() -> bool:
    import platform

    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def load_extensions(con) -> None:
    for name in ("ducklake", "sqlite"):
        path = packaged_extension(name)
        try:
            if path is not None:
                con.execute(f"INSTALL '{path}'")
            con.execute(f"LOAD {name}")
        except duckdb.Error as exc:
            raise ExtensionError(
                f"cannot load DuckDB's {name} extension ({exc}); install agentlake's pinned "
                f"duckdb-extension-{name}, or run `INSTALL {name}` in DuckDB once while online") from exc


def _quote(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def attach(con, catalog: Path, data_path: str | None = None, *, read_only: bool = False) -> None:
    """Attach the lake as `lake` and make it the default catalog, so `FROM sessions` works."""
    options = ["READ_ONLY"] if read_only else []
    if data_path and not read_only:
        options.append(f"DATA_PATH {_quote(data_path)}")
    opts = f" ({', '.join(options)})" if options else ""
    con.execute(f"ATTACH {_quote('ducklake:sqlite:' + str(catalog))} AS {CATALOG}{opts}")
    con.execute(f"USE {CATALOG}")


def connect(catalog: Path, data_path: str | None = None, *, read_only: bool = False):
    con = duckdb.connect(config=NO_DOWNLOADS)
    load_extensions(con)
    if not read_only:
        Path(catalog).parent.mkdir(parents=True, exist_ok=True)
    attach(con, catalog, data_path, read_only=read_only)
    return con
