import os

import dagster as dg

from transforms.provider import DiscoverOptions, merge_paths
from transforms.sources import Source
from warehouse.lake.config import ConfigError, load_config, load_layout
from warehouse.land.ingest import discover_sources
from warehouse.lake.layout import Layout


class ConfigProblem(dg.Failure):
    """config.toml cannot be read: a step fails with its one-line reason, a sensor skips saying it
    (a typo showed a step's traceback, and a sensor's every 30 s)."""


def _said(call):
    try:
        return call()
    except ConfigError as exc:
        raise ConfigProblem(description=str(exc)) from None


class AgentlakeResource(dg.ConfigurableResource):
    """Where the lake lives and where to look for agents' stores.

    Unset fields fall back to the environment (AGENTLAKE_HOME, CRUSH_GLOBAL_DATA, ...) and to
    `<home>/config.toml`, exactly as the CLI does.
    """

    home: str | None = None
    lake: str | None = None
    warehouse: str | None = None
    extra_stores: dict[str, list[str]] = {}  # by provider: explicit stores
    extra_roots: dict[str, list[str]] = {}  # by provider: explicit agent homes
    use_default: bool = True
    machine: str | None = None
    user: str | None = None
    team: bool | None = None

    def layout(self) -> Layout:
        """ConfigProblem for a config.toml that cannot be read, as options() and discover()."""
        return _said(lambda: load_layout(self.home, self.lake, self.warehouse, machine=self.machine,
                                         user=self.user, team=self.team))

    def options(self) -> DiscoverOptions:
        layout = self.layout()
        config = _said(lambda: load_config(layout.config_file))
        return DiscoverOptions(
            env=dict(os.environ),
            extra_stores=merge_paths(self.extra_stores, config.extra_stores),
            extra_roots=merge_paths(self.extra_roots, config.extra_roots),
            use_default=self.use_default and config.use_default,
            project_names=config.project_names,
            cache_root=layout.cache_dir,
        )

    def discover(self) -> tuple[dict[str, Source], list[str]]:
        sources, problems = discover_sources(self.options())
        return {s.partition_key: s for s in sources}, problems
