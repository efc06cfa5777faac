"""OpenCode behind the provider interface. A source is one data dir (its `opencode*.db` files
and its legacy `storage/` JSON), or one database named on its own (`OPENCODE_DB`, a store)."""

from datetime import datetime
from pathlib import Path

from transforms.opencode import discover as oc_discover
from transforms.opencode.normalise import PROVIDER, Context, expected_counts, gone_sessions, normalise
from transforms.opencode.store import read_store
from transforms.provider import AgentProvider, Extract
from transforms.sources import Source


class OpenCodeProvider(AgentProvider):
    name = PROVIDER
    discovery = oc_discover

    def fingerprint(self, source: Source) -> str:
        return oc_discover.fingerprint(source)

    # `landed()`: the sessions the lake holds of the source, with their cost and parent
    # (warehouse.land.ingest): a sub-agent deleted from the store is kept in the lake, and its cost
    # stays in its ancestors' (their cost includes their sub-agents')
    takes_landed = True

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None,
                landed=None) -> Extract:
        store = read_store(Path(source.path), Path(workdir))
        rows, findings = normalise(store, Context(source.source_id, source.project_path, run_at,
                                                  dict(source.project_names), gone_sessions(store, landed)))
        return Extract(rows=rows, findings=findings, expected=expected_counts(store))
