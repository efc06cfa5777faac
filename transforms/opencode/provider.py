"""OpenCode behind the provider interface. A source is one data dir (its `opencode*.db` files
and its legacy `storage/` JSON), or one database named on its own (`OPENCODE_DB`, a store)."""

from dataclasses import replace
from datetime import datetime
from pathlib import Path

from transforms.opencode import discover as oc_discover
from transforms.opencode.normalise import PROVIDER, Context, expected_counts, normalise
from transforms.opencode.store import read_store
from transforms.provider import DiscoverOptions, Extract
from transforms.sources import Discovery, Source


class OpenCodeProvider:
    name = PROVIDER

    def discover(self, options: DiscoverOptions) -> Discovery:
        # project names come from each session's directory at extract time, so the configured
        # mapping travels with the source
        found = oc_discover.discover(env=options.env, extra_roots=options.roots(PROVIDER),
                                     extra_stores=options.stores(PROVIDER), use_default=options.use_default)
        names = tuple(sorted(options.project_names.items()))
        found.sources = [replace(s, project_names=names) for s in found.sources]
        return found

    def fingerprint(self, source: Source) -> str:
        return oc_discover.fingerprint(source)

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        store = read_store(Path(source.path), Path(workdir))
        rows, findings = normalise(store, Context(source.source_id, source.project_path, run_at,
                                                  dict(source.project_names)))
        return Extract(rows=rows, findings=findings, expected=expected_counts(store))
