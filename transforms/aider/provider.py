"""Aider behind the provider interface. A source is one `.aider.chat.history.md`; Aider only
appends to it, so one read is a consistent prefix (a half-written last line is read next run)."""

from datetime import datetime
from pathlib import Path

from transforms.aider import discover as aider_discover
from transforms.aider.discover import PROVIDER
from transforms.aider.normalise import Context, expected_counts, normalise
from transforms.provider import DiscoverOptions, Extract, SourceError
from transforms.sources import Discovery, Source, file_fingerprint


class AiderProvider:
    name = PROVIDER

    def discover(self, options: DiscoverOptions) -> Discovery:
        return aider_discover.discover(env=options.env, extra_roots=options.roots(PROVIDER),
                                       extra_stores=options.stores(PROVIDER), use_default=options.use_default,
                                       project_names=options.project_names)

    def fingerprint(self, source: Source) -> str:
        return file_fingerprint(source.path)

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        try:
            data = Path(source.path).read_bytes()
        except OSError as exc:
            raise SourceError(f"cannot read {source.path}: {exc}") from None
        text = data.decode("utf-8", "replace")  # Aider writes with errors="ignore": odd bytes are not its own
        rows, findings = normalise(text, Context(source.source_id, source.path, source.project_path, run_at))
        return Extract(rows=rows, findings=findings, expected=expected_counts(text))
