"""Claude Code behind the provider interface (skeleton: being written)."""

from transforms.provider import DiscoverOptions, Extract, SourceError
from transforms.sources import Discovery, Source, file_fingerprint

PROVIDER = "claude"


class ClaudeProvider:
    name = PROVIDER

    def discover(self, options: DiscoverOptions) -> Discovery:
        return Discovery()

    def fingerprint(self, source: Source) -> str:
        return file_fingerprint(source.path)

    def extract(self, source: Source, workdir, run_at, cache_dir=None) -> Extract:
        raise SourceError("Claude Code support is not finished")
