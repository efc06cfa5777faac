"""`<AGENTLAKE_HOME>/config.toml`: extra places to look for agents' stores.

    use_default = true                     # also read each agent's default location

    [crush]
    extra_stores = ["/srv/old-laptop/proj/.crush/crush.db"]   # crush.db files, data dirs or project dirs
    extra_roots = ["/mnt/backup/crush"]                       # Crush global data dirs (with projects.json)

    [codewhale]
    extra_stores = ["/mnt/backup/sessions/0f8b9c1e.json"]     # session files or sessions dirs
    extra_roots = ["/mnt/backup/.codewhale"]                  # CodeWhale homes (with sessions/)

    [projects]                                                # project names, by path, remote or name
    "/home/me/src/api" = "billing-api"
    "acme/webshop" = "shop"
"""

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from transforms.providers import PROVIDERS


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Config:
    extra_stores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    extra_roots: dict[str, tuple[str, ...]] = field(default_factory=dict)
    use_default: bool = True
    project_names: dict[str, str] = field(default_factory=dict)


def load_config(path: Path, providers=tuple(PROVIDERS)) -> Config:
    if not path.exists():
        return Config()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    unknown = sorted(k for k, v in data.items() if isinstance(v, dict) and k not in (*providers, "projects"))
    if unknown:
        raise ConfigError(f"{path}: unknown section [{unknown[0]}]; known: {', '.join(providers)}, projects")
    names = data.get("projects", {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
        raise ConfigError(f"{path}: [projects] maps a path, remote or name to a project name (strings)")
    stores, roots = {}, {}
    for provider in providers:
        section = data.get(provider, {})
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: [{provider}] must be a table")
        stores[provider] = _paths(path, provider, section, "extra_stores")
        roots[provider] = _paths(path, provider, section, "extra_roots")
    return Config(stores, roots, bool(data.get("use_default", True)), dict(names))


def _paths(path: Path, provider: str, section: dict, key: str) -> tuple[str, ...]:
    value = section.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: {provider}.{key} must be a list of paths")
    return tuple(value)
