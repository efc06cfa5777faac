"""Cursor's CLI agent behind the provider interface. A source is one `.cursor` home: its
projects' agent transcripts and its conversation summaries (transforms.cursor.discover)."""

from datetime import datetime
from pathlib import Path

from transforms.cursor import discover as cursor_discover
from transforms.cursor.normalise import PROVIDER, Context, expected_counts, normalise
from transforms.cursor.store import read_store
from transforms.provider import AgentProvider, Extract
from transforms.sources import Source


class CursorProvider(AgentProvider):
    name = PROVIDER
    discovery = cursor_discover

    def fingerprint(self, source: Source) -> str:
        return cursor_discover.fingerprint(source)

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        store = read_store(Path(source.path), Path(workdir))
        rows, findings = normalise(store, Context(source.source_id, source.path, run_at, dict(source.project_names)))
        return Extract(rows=rows, findings=findings, expected=expected_counts(store))
