"""Aider behind the provider interface. A source is one `.aider.chat.history.md`; Aider only
appends to it, so one read is a consistent prefix (a half-written last line is read next run)."""

from datetime import datetime
from pathlib import Path

from transforms.aider import discover as aider_discover
from transforms.aider.discover import PROVIDER
from transforms.aider.normalise import Context, expected_counts, normalise
from transforms.provider import AgentProvider, Extract, read_file
from transforms.sources import Source


class AiderProvider(AgentProvider):
    name = PROVIDER
    discovery = aider_discover

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        # Aider writes with errors="ignore": odd bytes are not its own
        text = read_file(source.path).decode("utf-8", "replace")
        rows, findings = normalise(text, Context(source.source_id, source.path, source.project_path, run_at))
        return Extract(rows=rows, findings=findings, expected=expected_counts(text))
