"""Where things live: AGENTLAKE_HOME, the lake, its landing area, state and staging.

    <lake>/_landing/<machine>/<user>/<provider>/<source_id>/<table>.parquet   one file per table and source
    <lake>/_landing/<machine>/<user>/_runs/<run_id>-<n>.parquet              the `sources` run log, per run
    <lake>/main/<table>/year=YYYY/project=<slug>/ducklake-<uuid>.parquet  the curated tables (DuckLake)
    <home>/warehouse.ducklake                      the DuckLake catalog the readers attach (published
    <home>/warehouse.writer.ducklake               by the one writer from its own copy)
    <home>/.warehouse.writer.ducklake.spill/       what the writer's DuckDB spills (warehouse.lake.ducklake)
    <home>/landed-as.json                          the names it last landed as, per lake (warehouse.land.landed_as)
    <lake>/_state/<machine>-<user>/<provider>-<source_id>.json   what this machine last landed for a source
    <lake>/_staging/<machine>-<user>/                            files being written
    <lake>/_damaged/<machine>/<user>/<provider>/<source_id>/<table>.parquet   a merge's note: that
                                                   landing file cannot be read; its machine lands it again

Each machine writes only its own landing files, so machines never coordinate; one writer (the
local run, or the team's central deployment) merges them into the curated tables
(warehouse.catalog.merge). The lake is a directory or an `s3://bucket/prefix` URI. With object storage,
state, staging and the merged tables stay on the machine, under AGENTLAKE_HOME.
"""

import getpass
import hashlib
import os
import socket
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from transforms.sources import slugify
from warehouse.lake.pg_catalog import PostgresCatalog, data_path, is_postgres, refuse_connection_words
from warehouse.lake.storage import is_remote, lake_place, refuse_credentials, refuse_other_scheme


def default_machine(env=os.environ) -> str:
    """$AGENTLAKE_MACHINE, else the host's short name (stable across networks, unlike its FQDN)."""
    return slugify(env.get("AGENTLAKE_MACHINE") or socket.gethostname().split(".", 1)[0], "host")


def default_user(env=os.environ) -> str:
    if env.get("AGENTLAKE_USER"):
        return slugify(env["AGENTLAKE_USER"], "user")
    try:
        return slugify(getpass.getuser(), "user")
    except (KeyError, OSError):  # a uid without a passwd entry (containers)
        return "user"


def stored_name(name: str | None) -> str | None:
    """A user or machine name as an ingest stores it (`Ana.Smith` is `ana-smith`: Layout.resolve),
    so that a filter or a budget given the name as it was typed finds its rows (a trial's budget
    for `Ana.Smith` spent nothing). A name with no letter or digit is kept: said as unknown."""
    return slugify(name, name) if name else name


def stored_project(name: str | None) -> str | None:
    """A project as an ingest names it (`acme/myapp` and `Acme-MyApp` are `acme-myapp`:
    transforms.projects.project_slug), for a filter or a budget given it as typed (a trial's
    `--project acme/myapp` found nothing). A name with no letter or digit is kept: said as unknown."""
    from transforms.projects import project_slug

    return project_slug(name, name) if name else name


def stored_agent(name: str | None) -> str | None:
    """An agent as discovery names it: lower case (`Claude` is claude)."""
    return name.lower() if name else name


# each filter's or budget's name as an ingest stores it, by what it names: a filter, a budget and
# the dashboard's parameters take a name as typed (`Acme/WebShop`, `Ana.Smith`, `Claude`)
AS_STORED = {"project": stored_project, "user": stored_name, "machine": stored_name, "agent": stored_agent}


def default_home(env=os.environ) -> Path:
    if env.get("AGENTLAKE_HOME"):
        return Path(env["AGENTLAKE_HOME"]).expanduser()
    base = env.get("XDG_DATA_HOME") or os.path.join(env.get("HOME") or Path.home(), ".local", "share")
    return Path(base).expanduser() / "agentlake"


def home_flag(home: Path, env=os.environ) -> str:
    """` --home HOME` for a command printed to paste, unless HOME is the default one: pasted
    without it, a command acts on the default home (a team lead's trial)."""
    import shlex

    home = Path(home).absolute()
    return "" if home == default_home(env).absolute() else f" --home {shlex.quote(str(home))}"


class NotACatalog(ValueError):
    """The warehouse path names a folder or a file that is not a DuckLake catalog."""


class NotAHome(ValueError):
    """The home names a file: every command reads or writes a folder there."""


class HomeNotMade(RuntimeError):
    """The home folder cannot be made (a path below a file, a place without permission)."""


def make_home(home: Path) -> None:
    """The home folder, made before a command that writes into it reads any source: one that
    cannot be made, or written in, is said once, not as each source's failure and the merge's after
    every source was read (a trial's read-only home)."""
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HomeNotMade(f"cannot make the home folder {home}: {exc.strerror or exc}") from None
    if not os.access(home, os.W_OK | os.X_OK):
        try:
            read_only = bool(os.statvfs(home).f_flag & os.ST_RDONLY)
        except (OSError, AttributeError):  # (no statvfs: not POSIX)
            read_only = False
        why = "its file system is read-only" if read_only else "permission denied"
        raise HomeNotMade(f"cannot write in the home folder {home}: {why} (a command that ingests or merges writes "
                          "its lake, warehouse and cache there; name another with --home or $AGENTLAKE_HOME)")


def check_lake_writable(layout: "Layout") -> None:
    """A folder lake this machine cannot write in (a share mounted read-only, no permission) is
    said once, before any source is read: each source failed on its lock, then the run ended in
    an OSError without its summary (a team lead's trial). A reader needs no write: `merge --lake`."""
    if layout.remote:
        return
    try:
        layout.state_dir.mkdir(parents=True, exist_ok=True)
        probe = layout.state_dir / f".writable-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise HomeNotMade(f"cannot write in the lake {layout.lake}: {exc.strerror or exc} (a machine lands its "
                          f"sources there; a reader only reads it: `agentlake merge --lake {layout.lake}`)") from None


def check_home(home: Path, explicit: bool, env=os.environ) -> None:
    """A home that is a file is refused, naming where it was given, before a command reads an
    empty warehouse in it or writes below it (a new user's trial: NotADirectoryError from the
    merge, after `no warehouse ... run agentlake ingest`)."""
    if home.exists() and not home.is_dir():
        given = "--home" if explicit else "$AGENTLAKE_HOME" if env.get("AGENTLAKE_HOME") else "the default home"
        raise NotAHome(f"the home {home} ({given}) is a file, not a folder: give a folder (agentlake makes it "
                       "if it is not there)")


def check_lake_folder(lake: Path, given: str) -> None:
    """A folder lake that is a file is refused, naming where it was given, before a source is read
    (a trial's `--lake <a file>` failed each source, then the merge with NotADirectoryError, and
    left a catalog tied to the file)."""
    if lake.exists() and not lake.is_dir():
        raise NotAHome(f"the lake {lake} ({given}) is a file, not a folder: give a folder (agentlake makes it "
                       "if it is not there) or an s3:// lake")


def is_duckdb(head: bytes) -> bool:
    """A file's first 12 bytes are a DuckDB database's: its magic bytes."""
    return head[8:12] == b"DUCK"


def check_catalog(path) -> None:
    """Refuse a warehouse path that cannot be a catalog before anything opens or copies it."""
    if is_postgres(path):  # the server says what is wrong when it is attached
        return
    path = Path(path)
    if path.is_dir():
        raise NotACatalog(f"the warehouse {path} is a folder; give the DuckLake catalog's file "
                          "(by default <home>/warehouse.ducklake)")
    try:
        with path.open("rb") as f:
            head = f.read(12)
    except FileNotFoundError:
        return  # a new catalog, made on the first merge
    if not head:  # never one of agentlake's: a catalog is published whole, by a rename
        raise NotACatalog(f"the warehouse {path} is an empty file, not a DuckLake catalog (not a DuckDB database): "
                          "remove it, and `agentlake merge` makes the catalog there")
    if not is_duckdb(head):
        raise NotACatalog(f"the warehouse {path} is not a DuckLake catalog (not a DuckDB database)")


@dataclass(frozen=True)
class Layout:
    home: Path
    lake: Path | str  # a directory, or an object-storage URI (`s3://bucket/prefix`)
    warehouse: Path | PostgresCatalog  # a DuckDB file, or the team's catalog in PostgreSQL
    machine: str = "host"
    user: str = "user"
    team: bool = False  # redact secrets before any row leaves the machine (transforms.redact, docs/PRIVACY.md)
    privacy: tuple[tuple[str, str], ...] = ()  # per-column overrides: (`table.column`, action)

    @classmethod
    def resolve(cls, home=None, lake=None, warehouse=None, env=os.environ, machine=None, user=None) -> "Layout":
        explicit_home = bool(home)
        home = Path(home).expanduser() if home else default_home(env)
        check_home(home, explicit_home, env)
        lake = lake or env.get("AGENTLAKE_LAKE") or None
        if is_remote(lake):
            refuse_credentials(lake)
            lake = lake.rstrip("/")
        else:
            if lake:  # `S3://...` taken as a folder wrote an unredacted lake under the working directory
                refuse_other_scheme(os.fspath(lake))
            lake = (Path(lake).expanduser() if lake else home / "lake").absolute()
        # $AGENTLAKE_WAREHOUSE names the file unless a home or a warehouse was given explicitly
        warehouse = warehouse or (None if explicit_home else env.get("AGENTLAKE_WAREHOUSE"))
        if is_postgres(warehouse):
            warehouse = PostgresCatalog.parse(str(warehouse))
        else:  # absolute paths: views embed them, and readers run from any directory
            refuse_connection_words(os.fspath(warehouse or ""))
            warehouse = (Path(warehouse).expanduser() if warehouse else home / "warehouse.ducklake").absolute()
        return cls(home.absolute(), lake, warehouse,
                   slugify(machine, "host") if machine else default_machine(env),
                   slugify(user, "user") if user else default_user(env))

    @property
    def remote(self) -> bool:
        return is_remote(self.lake)

    @property
    def identity(self) -> str:
        return f"{self.machine}-{self.user}"

    @cached_property  # (asked for each source's state: one look at the disk per layout)
    def _local_root(self) -> Path:
        """Where this machine keeps its state and staging: beside a local lake, else in its home."""
        if not self.remote:
            return self.lake
        root = self.home / "remote" / _digest(lake_place(str(self.lake)))
        spelt = self.home / "remote" / _digest(str(self.lake))  # an older release's: by the URI as written
        if not root.exists() and spelt.is_dir():
            try:
                os.replace(spelt, root)
            except OSError:  # another process's rename came first, or none can be made: that one
                return root if root.exists() else spelt
        return root

    @property
    def state_dir(self) -> Path:
        return self._local_root / "_state" / self.identity

    @property
    def tables_path(self) -> str:
        """Where the curated tables' Parquet files are, for the readers and a compaction
        (DuckLake's DATA_PATH; a merge is given its lake: `tables_path`). A reader's home (its
        catalog made by `merge --lake` of a team's lake, no lake of its own) has them beside its
        catalog, where that merge wrote them: looked for in the home's own lake, a moved reader's
        home found none, and a copy's compaction wrote into, and `--orphans` deleted from, the
        original's."""
        path = tables_path(self.lake, self.warehouse)
        beside = _beside(Path(self.warehouse)) if not is_postgres(self.warehouse) else path
        if path != beside and own_lake(self.lake, self.warehouse) and not os.path.exists(self.lake) \
                and os.path.isdir(beside):
            return beside
        return path

    @property
    def pending_marker(self) -> Path:
        """Present while landed files wait for a merge (a run killed before it merged)."""
        return self.state_dir / "merge-pending"

    @property
    def merge_due(self) -> bool:
        """Landed files wait for a merge, or no warehouse was built yet: a run must merge even
        when every source is unchanged."""
        return self.pending_marker.exists() or not self.warehouse.exists()

    @property
    def staging_dir(self) -> Path:
        return self._local_root / "_staging" / self.identity

    def store(self):
        from warehouse.lake.storage import open_store

        return open_store(self.lake, self.staging_dir)

    @property
    def config_file(self) -> Path:
        return self.home / "config.toml"

    @property
    def cache_dir(self) -> Path:
        """Per-source caches kept between runs on this machine (read offsets of append-only logs)."""
        return self.home / "cache"

    def source_cache(self, provider: str, source_id: str) -> Path:
        """One source's cache folder under `cache_dir`."""
        return self.cache_dir / f"{provider}-{source_id}"

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster"


LANDING = "_landing"
RUNS = "_runs"


def landing_dir(machine: str, user: str, provider: str, source_id: str) -> str:
    return f"{LANDING}/{machine}/{user}/{provider}/{source_id}"


def landing_path(machine: str, user: str, provider: str, source_id: str, table: str) -> str:
    return f"{landing_dir(machine, user, provider, source_id)}/{table}.parquet"


def run_log_path(machine: str, user: str, name: str) -> str:
    return f"{runs_prefix(machine, user)}/{name}.parquet"


def runs_prefix(machine: str, user: str) -> str:
    """Where a machine and user's run log files are, in the lake."""
    return f"{LANDING}/{machine}/{user}/{RUNS}"


# A merge's note of each landing file it could not read, at the file's own path under this folder:
# the machine that landed it finds its notes in one listing, and lands those sources again.
DAMAGED = "_damaged"


def damage_note(landing_rel: str) -> str:
    return DAMAGED + landing_rel[len(LANDING):]


def damaged_file(note_rel: str) -> str:
    return LANDING + note_rel[len(DAMAGED):]


def tables_path(lake, warehouse: Path) -> str:
    """Where a catalog writes its tables' Parquet: in the lake when the lake is the catalog's own
    (the `lake` folder beside it: a home's default), else beside the catalog (`<name>-tables/`).
    A remote lake, or a folder other machines land into too, is shared by several catalogs, each
    the one writer of its own tables: in the lake, one catalog's files would be another's orphans
    (`compact --orphans`), and the lake would hold a copy of the tables per machine."""
    if is_postgres(warehouse):  # the team's catalog: its tables in the lake, which it alone writes
        return data_path(lake)
    warehouse = Path(warehouse)
    if own_lake(lake, warehouse):
        return str(Path(lake)) + "/"
    return _beside(warehouse)


def _beside(warehouse: Path) -> str:
    """A catalog's tables' folder when its lake is not its own: `<name>-tables/` beside it."""
    return str(warehouse.with_name(warehouse.stem + "-tables")) + "/"


def same_lake(a: str, b: str) -> bool:
    """Two lake names (as a catalog records them: masked) for one lake: a folder however spelt, a
    bucket's prefix with its endpoint in the URI or in the environment (storage.lake_place)."""
    if is_remote(a) and is_remote(b):
        return a == b or lake_place(a) == lake_place(b)
    return a == b or (not is_remote(a) and not is_remote(b) and os.path.realpath(a) == os.path.realpath(b))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def own_lake(lake, warehouse) -> bool:
    """The lake is the catalog's own (the `lake` folder beside it, a home's default), not one
    other machines land into too (`s3://...`, a shared folder)."""
    return not is_remote(lake) and not is_postgres(warehouse) and os.path.normpath(lake) == os.path.normpath(Path(warehouse).parent / "lake")
