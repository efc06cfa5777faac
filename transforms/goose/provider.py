"""Goose behind the provider interface. A source is one sessions dir: `sessions.db` and the
legacy `<id>.jsonl` files beside it (transforms.goose.discover)."""

from datetime import datetime
from pathlib import Path

from transforms.goose import discover as goose_discover
from transforms.goose.normalise import PROVIDER, Context, expected_counts, normalise
from transforms.goose.store import read_store
from transforms.provider import AgentProvider, Extract
from transforms.sources import Source


class GooseProvider(AgentProvider):
    name = PROVIDER
    discovery = goose_discover

    def fingerprint(self, source: Source) -> str:
        return goose_discover.fingerprint(source)

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        store = read_store(Path(source.path), Path(workdir))
        rows, findings = normalise(store, Context(source.source_id, source.project_path, run_at,
                                                  dict(source.project_names)))
        return Extract(rows=rows, findings=findings, schema_version=store.schema_version,
                       expected=expected_counts(store))
