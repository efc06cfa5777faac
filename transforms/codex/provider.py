"""Codex CLI behind the provider interface (skeleton: being written)."""

from transforms.provider import DiscoverOptions, Extract, SourceError
from transforms.sources import Discovery, Source, file_fingerprint

PROVIDER = "codex"


class CodexProvider:
    name = PROVIDER

    def discover(self, options: DiscoverOptions) -> Discovery:
        return Discovery()

    def fingerprint(self, source: Source) -> str:
        return file_fingerprint(source.path)

    def extract(self, source: Source, workdir, run_at, cache_dir=None) -> Extract:
        raise SourceError("Codex CLI support is not finished")
