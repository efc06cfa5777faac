"""`<AGENTLAKE_HOME>/config.toml`: extra places to look for agents' stores.

    [crush]
    extra_dbs = ["/srv/old-laptop/proj/.crush/crush.db"]   # a crush.db, data dir or project dir
    extra_roots = ["/mnt/backup/crush"]                   # Crush global data dirs (projects.json)
    use_default = true                                    # also read CRUSH_GLOBAL_DATA & co.
"""

import tomllib
from dataclasses import dataclass
from pathlib import Path


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Config:
    extra_stores: tuple[str, ...] = ()
    extra_roots: tuple[str, ...] = ()
    use_default: bool = True


def load_config(path: Path) -> Config:
    if not path.exists():
        return Config()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    crush = data.get("crush", {})
    if not isinstance(crush, dict):
        raise ConfigError(f"{path}: [crush] must be a table")
    return Config(
        extra_stores=_paths(path, crush, "extra_dbs"),
        extra_roots=_paths(path, crush, "extra_roots"),
        use_default=bool(crush.get("use_default", True)),
    )


def _paths(path: Path, section: dict, key: str) -> tuple[str, ...]:
    value = section.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: crush.{key} must be a list of paths")
    return tuple(value)
