"""Where things live: AGENTLAKE_HOME, the lake's hive layout, state and staging.

    <lake>/<table>/date=YYYY-MM-DD/project=<slug>/<provider>-<source_id>.parquet
    <lake>/_state/<provider>-<source_id>.json     what was last written for a source
    <lake>/_staging/<pid>-<run>/                   files being written (outside every view glob)
"""

import os
from dataclasses import dataclass
from pathlib import Path


def default_home(env=os.environ) -> Path:
    if env.get("AGENTLAKE_HOME"):
        return Path(env["AGENTLAKE_HOME"]).expanduser()
    base = env.get("XDG_DATA_HOME") or os.path.join(env.get("HOME") or Path.home(), ".local", "share")
    return Path(base).expanduser() / "agentlake"


@dataclass(frozen=True)
class Layout:
    home: Path
    lake: Path
    warehouse: Path

    @classmethod
    def resolve(cls, home=None, lake=None, warehouse=None, env=os.environ) -> "Layout":
        explicit_home = bool(home)
        home = Path(home).expanduser() if home else default_home(env)
        lake = Path(lake).expanduser() if lake else home / "lake"
        # $AGENTLAKE_WAREHOUSE names the file unless a home or a warehouse was given explicitly
        warehouse = warehouse or (None if explicit_home else env.get("AGENTLAKE_WAREHOUSE"))
        warehouse = Path(warehouse).expanduser() if warehouse else home / "warehouse.duckdb"
        # absolute paths: views embed them, and readers run from any directory
        return cls(home.absolute(), lake.absolute(), warehouse.absolute())

    @property
    def state_dir(self) -> Path:
        return self.lake / "_state"

    @property
    def staging_dir(self) -> Path:
        return self.lake / "_staging"

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


def file_name(provider: str, source_id: str) -> str:
    return f"{provider}-{source_id}.parquet"


def relative_path(table: str, date: str, project: str, provider: str, source_id: str) -> str:
    return f"{table}/date={date}/project={project}/{file_name(provider, source_id)}"


def table_glob(lake: Path, table: str) -> str:
    return str(lake / table / "date=*" / "project=*" / "*.parquet")
