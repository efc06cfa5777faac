"""Where things live: AGENTLAKE_HOME, the lake's hive layout, state and staging.

    <lake>/<table>/date=YYYY-MM-DD/project=<slug>/<provider>-<machine>-<user>-<source_id>.parquet
    <lake>/_state/<machine>-<user>/<provider>-<source_id>.json   what this machine last wrote for a source
    <lake>/_staging/<machine>-<user>/<pid>-<run>/                files being written (outside every view glob)

The lake is a directory (local, or shared by several machines) or an `s3://bucket/prefix` URI.
With object storage, state and staging stay on the machine, under AGENTLAKE_HOME. Machine and
user are in every file name, so two machines never write the same file, even for one project.
"""

import getpass
import hashlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from transforms.sources import slugify
from warehouse.store import is_remote


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


def default_home(env=os.environ) -> Path:
    if env.get("AGENTLAKE_HOME"):
        return Path(env["AGENTLAKE_HOME"]).expanduser()
    base = env.get("XDG_DATA_HOME") or os.path.join(env.get("HOME") or Path.home(), ".local", "share")
    return Path(base).expanduser() / "agentlake"


@dataclass(frozen=True)
class Layout:
    home: Path
    lake: Path | str  # a directory, or an object-storage URI (`s3://bucket/prefix`)
    warehouse: Path
    machine: str = "host"
    user: str = "user"
    team: bool = False  # redact secrets before any row leaves the machine (warehouse.privacy)
    privacy: tuple[tuple[str, str], ...] = ()  # per-column overrides: (`table.column`, action)

    @classmethod
    def resolve(cls, home=None, lake=None, warehouse=None, env=os.environ, machine=None, user=None) -> "Layout":
        explicit_home = bool(home)
        home = Path(home).expanduser() if home else default_home(env)
        lake = lake or env.get("AGENTLAKE_LAKE") or None
        if is_remote(lake):
            lake = lake.rstrip("/")
        else:
            lake = (Path(lake).expanduser() if lake else home / "lake").absolute()
        # $AGENTLAKE_WAREHOUSE names the file unless a home or a warehouse was given explicitly
        warehouse = warehouse or (None if explicit_home else env.get("AGENTLAKE_WAREHOUSE"))
        warehouse = Path(warehouse).expanduser() if warehouse else home / "warehouse.duckdb"
        # absolute paths: views embed them, and readers run from any directory
        return cls(home.absolute(), lake, warehouse.absolute(),
                   slugify(machine, "host") if machine else default_machine(env),
                   slugify(user, "user") if user else default_user(env))

    @property
    def remote(self) -> bool:
        return is_remote(self.lake)

    @property
    def identity(self) -> str:
        return f"{self.machine}-{self.user}"

    @property
    def _local_root(self) -> Path:
        """Where this machine keeps its state and staging: beside a local lake, else in its home."""
        if self.remote:
            return self.home / "remote" / hashlib.sha256(str(self.lake).encode()).hexdigest()[:12]
        return self.lake

    @property
    def state_dir(self) -> Path:
        return self._local_root / "_state" / self.identity

    @property
    def staging_dir(self) -> Path:
        return self._local_root / "_staging" / self.identity

    def store(self):
        from warehouse.store import open_store

        return open_store(self.lake, self.staging_dir)

    @property
    def config_file(self) -> Path:
        return self.home / "config.toml"

    @property
    def cache_dir(self) -> Path:
        """Per-source caches kept between runs on this machine (read offsets of append-only logs)."""
        return self.home / "cache"

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster"


def file_name(provider: str, source_id: str, identity: str) -> str:
    return f"{provider}-{identity}-{source_id}.parquet"


def relative_path(table: str, date: str, project: str, provider: str, source_id: str, identity: str) -> str:
    return f"{table}/date={date}/project={project}/{file_name(provider, source_id, identity)}"


def table_glob(lake, table: str) -> str:
    if is_remote(lake):
        return f"{lake.split('?', 1)[0]}/{table}/date=*/project=*/*.parquet"
    return str(Path(lake) / table / "date=*" / "project=*" / "*.parquet")
