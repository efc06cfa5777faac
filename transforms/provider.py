"""The provider interface: what one agent's module set must offer.

A provider discovers its sources, fingerprints each one cheaply, and extracts one source into
canonical rows (transforms.contract). Adding an agent is a new folder under transforms/ that
implements this (`AgentProvider` gives what every agent does the same way), a generator for the
demo, and its name in transforms.providers and the lists docs/ARCHITECTURE.md ("Adding a
provider") names.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from transforms.findings import Findings
from transforms.sources import Discovery, Source, file_fingerprint, members, not_a_file

if TYPE_CHECKING:
    import pyarrow as pa


class SourceError(Exception):
    """A source cannot be read. The message is for the user: what is wrong, and where."""


def environmental(exc: BaseException) -> bool:
    """An OS error (permissions, a file gone, a full disk) somewhere in the chain, or SQLite's
    (`unable to open database file`, `database is locked`): the same bytes may read next time.
    A corrupt file is another error."""
    import sqlite3

    seen = exc
    while seen is not None:
        if isinstance(seen, (OSError, sqlite3.OperationalError)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@dataclass(frozen=True)
class DiscoverOptions:
    env: Mapping[str, str]
    # by provider name: explicit stores (a crush.db, a session file, ...)
    extra_stores: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # by provider name: explicit agent homes (a Crush global data dir, a CodeWhale home, ...)
    extra_roots: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    use_default: bool = True  # also look where each agent keeps its data by default
    # project names by path, remote URL, `owner/repo` or directory name (transforms.projects)
    project_names: Mapping[str, str] = field(default_factory=dict)
    # the home's per-source caches (Layout.cache_dir): where a discovery that reads its stores keeps
    # what it read (Claude Code's families); None: nothing kept, every store read again
    cache_root: Path | None = None

    def stores(self, provider: str) -> tuple[str, ...]:
        return tuple(self.extra_stores.get(provider, ()))

    def roots(self, provider: str) -> tuple[str, ...]:
        return tuple(self.extra_roots.get(provider, ()))


def merge_paths(*mappings: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """Per-provider path lists joined in order (flags first, then the config file)."""
    out: dict[str, tuple[str, ...]] = {}
    for mapping in mappings:
        for provider, paths in mapping.items():
            out[provider] = out.get(provider, ()) + tuple(paths)
    return out


@dataclass
class Extract:
    """One source's canonical rows, with what is needed to report and reconcile them."""

    # a table's rows: dicts, or a pyarrow.Table with the contract's columns (plus an optional
    # `project`); Crush returns tables
    rows: dict[str, "list[dict] | pa.Table"]
    findings: Findings
    schema_version: int | None = None
    migrations: int | None = None
    # rows each canonical table must reconcile with, counted on the snapshot itself
    expected: dict[str, int] = field(default_factory=dict)
    # sessions the source no longer holds because another source of the agent does now
    # (transforms.bundle): the lake's copy here is not kept, or they would be counted twice
    moved_sessions: frozenset = frozenset()
    # a source read in parts (transforms.bundle): each part's session ids, kept in the source's
    # state so that a source which later takes its parts over knows whose sessions are whose
    part_sessions: dict[str, list[str] | None] | None = None  # None for a part that failed


class Provider(Protocol):
    name: str

    def discover(self, options: DiscoverOptions) -> Discovery: ...

    def fingerprint(self, source: Source) -> str: ...

    def extract(self, source: Source, workdir: Path, run_at, cache_dir: Path | None = None) -> Extract:
        """`workdir` is a scratch dir removed after the call; `cache_dir`, when given, persists
        between runs of this source on this machine (for incremental reads of append-only logs).
        A provider that sets `takes_cached_notes`, `takes_full_refresh` or `takes_landed` is also
        passed, by warehouse.land.ingest, `cached_notes=True` on a first landing into a lake,
        `full_refresh=True` on `ingest --full-refresh`, and `landed`, a callable giving the
        sessions the lake holds of the source (id -> cost)."""
        ...


class AgentProvider:
    """The glue every provider needs, written once: `discover` hands the agent's own homes and
    stores (DiscoverOptions) to the `discover` function of its folder's discover module, and a
    source's fingerprint is the size and mtime of its files (`members`: its one file, or a
    session's files). A provider sets `name` and `discovery`, writes its `extract`, and overrides
    what else is its own."""

    name: str
    discovery: ModuleType  # transforms.<agent>.discover

    def discover(self, options: DiscoverOptions) -> Discovery:
        return self.discovery.discover(env=options.env, extra_roots=options.roots(self.name),
                                       extra_stores=options.stores(self.name), use_default=options.use_default,
                                       project_names=options.project_names)

    def fingerprint(self, source: Source) -> str:
        return file_fingerprint(*members(source))


def read_file(path) -> bytes:
    """A source's file, read whole; one the operating system will not read is a SourceError that
    names it (`cannot read <path>: <reason>`), with the OS error as its context. Something else
    by its name (a named pipe, whose open would wait for a writer for ever) is not opened."""
    odd = not_a_file(path)  # gone, a loop, no permission: the read below says it in the OS's words
    if odd:
        raise SourceError(f"cannot read {path}: it {odd.strerror}")
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc}") from None
