"""One source per agent and project, for the agents that keep a file per session.

Claude Code, Codex, Gemini CLI, Qwen Code, Copilot CLI, Amp, Droid, Kilo Code, Codebuff, pi and
CodeWhale keep a file (or a small tree of them) per session, and their discoveries return a source
per session (Claude Code's: per family of transcripts that share sessions, lines or requests).
Landed as such, each session paid a fixed cost whatever its size: eight landing files with an fsync
each, two state writes, and eight reads in the merge (docs/BENCHMARKS.md, "Figures behind the code's
choices"). `ByProject` wraps such a provider: its sessions of one project directory on this machine
are one `Bundle` source, landed as one set of files. A project of more than BUCKET_SESSIONS
sessions is split into buckets (a power of two of them, a session's bucket from a hash of its id),
each a bundle of its own, so a new session rewrites its bucket's files and the merge replaces its
bucket's rows, not the whole project's. When the count doubles, every session moves to its new
bucket once, as a session whose project changed moves (below).

A bundle is read part by part (the agent's own source: a session with its sub-agents), and each
part's rows are cached under the bundle's cache dir, keyed by the part's fingerprint, the part
itself and agentlake's code, so a new session in a project of 1,000 reads one file. A part that
cannot be read does not fail its project: it becomes a quarantine row and a warning, and its
sessions already in the lake are kept (warehouse.land.retention). The failure is cached like rows, so
the same bytes are not read again; an error of the environment (a permission) is not cached, and
leaves the bundle unsettled so the next run tries again. A part that moved to another bundle
(its project changed) is not kept by the one it left. Each part's session ids go with the
extract (`part_sessions`) into the bundle's state: warehouse.land.bundle_folders takes the sessions that
moved out of a bundle that is not discovered any more (every part found moved).
"""

import hashlib
import os
import pickle
import shutil
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pyarrow as pa

from transforms.atomic import replace_file
from transforms.contract import BY_NAME, SCHEMA_VERSION
from transforms.findings import Findings, errors_of
from transforms.jsontext import UNFINISHED
from transforms.provider import DiscoverOptions, Extract, Provider, SourceError, environmental
from transforms.sources import Discovery, Source, source_id_for

CACHE_VERSION = 1
# A project's sessions land as bundles of about this many at most: a new or grown session
# rewrites the landing files of its bucket, and the merge replaces its rows, not the project's
# (docs/BENCHMARKS.md, "One new session in a large project").
BUCKET_SESSIONS = 64
PARTS = "parts"  # the cache dir's folder of per-session extracts
MEMO_BUNDLES = 512  # bundles whose parts' fingerprints a provider keeps (about a run's)


@dataclass(frozen=True)
class Bundle(Source):
    """The sources (`parts`) of one agent in one project directory."""

    parts: tuple[Source, ...] = ()
    # every source id of this agent in the same discovery: a part that left this bundle and is
    # among them moved (its project changed, or it could not be told); else it is gone from disk
    found: frozenset[str] = frozenset()
    # every source id the agent's discovery returned (bundles and lone sources): a bundle whose id
    # is not among them lost every session found to other projects (warehouse.land.bundle_folders)
    discovered: frozenset[str] = frozenset()

    @property
    def replaces(self) -> tuple[str, ...]:
        """The parts' own source ids: a lake written before bundling landed each part by it."""
        return tuple(p.source_id for p in self.parts)


def bundles(sources: list[Source]) -> list[Source]:
    """The sources grouped by project directory, a large project's in buckets (bucket_count);
    one that cannot be read at all stays alone."""
    groups: dict[tuple[str, str], list[Source]] = {}
    out: list[Source] = []
    for s in sources:
        if s.skip_reason:
            out.append(s)
        else:
            groups.setdefault((s.provider, s.project_path), []).append(s)
    # with the ids its stores had before (Source.formerly): a part landed under one is not gone
    found = frozenset(s.source_id for s in sources) | {f for s in sources for f in s.formerly}
    made = []
    for (provider, project_path), parts in groups.items():
        count = bucket_count(len(parts))
        buckets: dict[int, list[Source]] = {}
        for part in parts:
            buckets.setdefault(bucket_of(part.source_id, count), []).append(part)
        for bucket, members in sorted(buckets.items()):
            members.sort(key=lambda p: p.source_id)
            paths = [p.folder for p in members]
            common = os.path.commonpath(paths) if len({os.path.splitdrive(p)[0] for p in paths}) == 1 else paths[0]
            # the id names the project directory, not its slug: renaming a project in config.toml
            # keeps its source (and lands it again: warehouse.land.source_state.same_names), as do
            # the names its parts carry to their extract (Kilo's names each session's project)
            identity = f"project:{project_path}" if count == 1 else f"project:{project_path}#{bucket + 1}/{count}"
            made.append(dict(provider=provider, path=common, project_path=project_path, project=members[0].project,
                             identity=identity, parts=tuple(members), found=found,
                             formerly=tuple(f for p in members for f in p.formerly),
                             supersedes=tuple(sorted({i for p in members for i in p.supersedes})),
                             project_names=members[0].project_names))
    discovered = frozenset(s.source_id for s in out) | {source_id_for(kw["provider"], kw["identity"]) for kw in made}
    return out + [Bundle(**kw, discovered=discovered) for kw in made]


def bucket_count(sessions: int) -> int:
    """How many bundles a project's sessions are split into: one up to BUCKET_SESSIONS, then
    doubled each time the average bucket would pass it."""
    count = 1
    while sessions > count * BUCKET_SESSIONS:
        count *= 2
    return count


def bucket_of(part_id: str, count: int) -> int:
    """A part's bucket: from its own id alone, so it stays put while the count does."""
    return int(hashlib.sha256(part_id.encode()).hexdigest()[:8], 16) % count


@lru_cache(maxsize=1)
def code_version() -> str:
    """What a cached part's rows depend on besides its bytes: the contract, every normaliser's
    code, and the price tables."""
    from importlib.metadata import PackageNotFoundError, version

    digest = hashlib.sha256(SCHEMA_VERSION.encode())
    root = Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] == "synth":  # the demo's generators read nothing
            continue
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    try:
        digest.update(version("genai-prices").encode())
    except PackageNotFoundError:
        pass
    return digest.hexdigest()[:16]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class _Part:
    """One part's extract, as cached: its rows as the agent gave them (dicts, which pickle and load
    far quicker than an Arrow table each: docs/BENCHMARKS.md, "Figures behind the code's choices"),
    or its failure."""

    key: str
    rows: dict
    findings: Findings
    expected: dict[str, int]
    error: str | None = None
    retry: bool = False  # an error of the environment: not cached, read again next run
    schema_version: int | None = None


def _load(path: Path, key: str | None) -> _Part | None:
    """The cached part, if it was cached under `key` (None: whatever its key)."""
    try:
        with open(path, "rb") as fh:
            cached = pickle.load(fh)
    except Exception:  # none, damaged, or written by another version: the part is read again
        return None
    return cached if isinstance(cached, _Part) and key in (None, cached.key) else None


def _save(path: Path, part: _Part) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError:
        pass  # no cache this time: the part is read again next run


def _as_table(name: str, rows) -> pa.Table:
    """The contract's columns, and `project` where a row names its own (a store that spans several
    projects, as Kilo's CLI database does: warehouse.land.landing_files files such rows under it)."""
    if isinstance(rows, pa.Table):
        return rows
    schema = BY_NAME[name].schema
    if any("project" in row for row in rows):
        schema = schema.append(pa.field("project", pa.string()))
    return pa.Table.from_pylist(rows, schema=schema)


def _with_source_id(rows, source_id: str):
    """The rows filed under the bundle: every row's `source_id` is the bundle's."""
    if not isinstance(rows, pa.Table):
        for row in rows:
            row["source_id"] = source_id
        return rows
    if "source_id" not in rows.column_names:
        return rows
    i = rows.column_names.index("source_id")
    return rows.set_column(i, "source_id", pa.array([source_id] * rows.num_rows, pa.string()))


def _concat(name: str, chunks: list):
    """One table's rows from every part: one list when all are dicts (converted once, by the
    writer), else one Arrow table."""
    if all(isinstance(c, list) for c in chunks):
        return [row for chunk in chunks for row in chunk]
    return pa.concat_tables([_as_table(name, c) for c in chunks], promote_options="permissive")


class ByProject:
    """A provider whose per-session sources are landed as one source per project directory."""

    takes_cached_notes = True  # extract's `cached_notes`: warehouse.land.ingest passes it on a first landing

    def __init__(self, inner: Provider):
        self.inner = inner
        self.name = inner.name
        # an agent's own cache of what it read (Claude Code's offsets), bypassed by a full refresh
        self.takes_full_refresh = getattr(inner, "takes_full_refresh", False)
        # the sessions the lake holds of the bundle (warehouse.land.ingest), for a part whose
        # sessions' files are gone (Codex's parents: CodexSource.gone)
        self.takes_landed = getattr(inner, "takes_landed", False)
        # the bundles fingerprinted, with their parts': a run fingerprints a source to settle it,
        # again to land it, then extracts that same object, whose parts' cache keys need them
        # (a stat each): by the object's id, the object kept with them (so the id is not reused)
        self._prints: dict[int, tuple[Bundle, dict[str, str]]] = {}

    def discover(self, options: DiscoverOptions) -> Discovery:
        found = self.inner.discover(options)
        found.sources = bundles(found.sources)
        return found

    def fingerprint(self, source: Source) -> str:
        if not isinstance(source, Bundle):
            return self.inner.fingerprint(source)
        prints = self._part_fingerprints(source)
        digest = hashlib.sha256()
        for part_id, fingerprint in prints.items():
            digest.update(f"{part_id}={fingerprint}\n".encode())
        return f"{len(source.parts)} sessions:{digest.hexdigest()[:32]}"

    def _part_fingerprints(self, source: Bundle) -> dict[str, str]:
        known = self._prints.get(id(source))
        if known is not None and known[0] is source:  # the very object: its files were stat'ed then
            return known[1]
        if len(self._prints) >= MEMO_BUNDLES:  # a long-lived process (Dagster's): each run's own
            self._prints.clear()
        prints = {part.source_id: self.inner.fingerprint(part) for part in source.parts}
        self._prints[id(source)] = (source, prints)
        return prints

    def extract(self, source: Source, workdir: Path, run_at, cache_dir: Path | None = None,
                cached_notes: bool = False, full_refresh: bool = False, landed=None) -> Extract:
        """`cached_notes`: the cached sessions' notes too (a first landing into a lake: the home's
        cache is the same for every lake, and their notes went to the lake they were read for).
        `full_refresh`: passed on to an agent that takes it. `landed()`: the sessions the lake holds
        of the bundle (id -> its cost and parent: warehouse.land.retention.Landed), passed on to a
        part whose sessions' files are gone."""
        more = {"full_refresh": True} if full_refresh and self.takes_full_refresh else {}
        if not isinstance(source, Bundle):
            return self.inner.extract(source, workdir, run_at, cache_dir, **more)
        parts = []
        prints = self._part_fingerprints(source)
        # an agent that knows which of its lines were said (Claude Code) reads a first landing's
        # parts again, saying every line's notes: a cached part's are those of its last read only
        if cached_notes and getattr(self.inner, "takes_cached_notes", False):
            more = {**more, "cached_notes": True}
        for part in source.parts:
            # the part itself too: what it reads besides its files (a fork's parent, project names)
            key = f"{CACHE_VERSION}:{code_version()}:{prints[part.source_id]}:{_digest(repr(part))}"
            told = more
            if landed is not None and getattr(part, "gone", ()):  # what its rows depend on, in its key
                told, key = {**more, "landed": landed}, f"{key}:{sorted(set(part.gone) & landed().keys())}"
            cache = cache_dir / PARTS / f"{part.source_id}.pkl" if cache_dir else None
            cached = _load(cache, key) if cache and "cached_notes" not in more else None
            fresh = cached is None
            if fresh:  # the workdir is the bundle's: removed with it, after every part
                cached, keep = self._read(part, key, workdir, run_at, told)
                if cache and keep:
                    _save(cache, cached)
            parts.append((part, cached, fresh))
        moved = _left(cache_dir / PARTS, source) if cache_dir else frozenset()
        extract = _combined(source, parts, run_at, cached_notes)
        extract.moved_sessions = moved
        return extract

    def _read(self, part: Source, key: str, workdir: Path, run_at, more: dict) -> tuple[_Part, bool]:
        """The part's extract, and whether it may be cached."""
        try:
            extract = self.inner.extract(part, workdir, run_at, **more)
        except Exception as exc:  # one bad session must not fail its project
            reason = str(exc) if isinstance(exc, SourceError) else f"unexpected {type(exc).__name__}: {exc}"
            retry = environmental(exc)
            return _Part(key, {}, Findings(), {}, error=reason[:500], retry=retry), not retry
        # cached whole: a part whose files could not all be read is read again next run
        return (_Part(key, extract.rows, extract.findings, dict(extract.expected),
                      schema_version=extract.schema_version), not extract.findings.unread)


def cached_parts(cache_dir: Path) -> dict[str, list[str]]:
    """The session ids of each part cached in a bundle's cache dir (part id -> session ids)."""
    try:
        names = os.listdir(cache_dir / PARTS)
    except OSError:
        return {}
    parts = {}
    for name in names:
        cached = _load(cache_dir / PARTS / name, None) if name.endswith(".pkl") else None
        if cached is not None:
            parts[name[:-4]] = _session_ids(cached)
    return parts


def forget_cached(cache_dir: Path) -> None:
    """A full refresh: every session of a bundle is read again, failures included."""
    shutil.rmtree(cache_dir / PARTS, ignore_errors=True)


def _left(folder: Path, source: Bundle) -> frozenset[str]:
    """The session ids of the parts that left this bundle for another source of the agent: that
    source lands them now, so this one must not keep them (warehouse.land.retention). The cache files
    of parts gone from the disk are removed: their rows stay in the lake all the same."""
    try:
        names = os.listdir(folder)
    except OSError:
        return frozenset()
    own = {p.source_id for p in source.parts}
    moved: set[str] = set()
    for name in names:
        part_id = name[:-4]
        if not name.endswith(".pkl") or part_id in own:
            continue
        if part_id not in source.found:
            Path(folder, name).unlink(missing_ok=True)
            continue
        cached = _load(Path(folder, name), None)  # kept while it is elsewhere: it may come back
        moved.update(_session_ids(cached) if cached else ())
    return frozenset(moved)


def _combined(source: Bundle, parts: list[tuple[Source, _Part, bool]], run_at, cached_notes: bool = False) -> Extract:
    """Every part's rows under the bundle. The warnings are those of the parts read this run: a
    cached part's were reported when it was read (one new session in a project of 1,000 must not
    repeat the others' notes), unless `cached_notes`."""
    findings = Findings()
    expected: Counter = Counter()
    tables: dict[str, list] = {}
    failed = []
    for part, p, fresh in parts:
        said = fresh or cached_notes  # else the run that read it said its warnings
        if p.error is not None:
            failed.append((part, p.error, said))
            continue
        for name, rows in p.rows.items():
            tables.setdefault(name, []).append(_with_source_id(rows, source.source_id))
        expected.update(p.expected)
        findings.add(p.findings, notes=said)
        if not said:
            errors = errors_of(p.rows.get("quarantine", ()))
            findings.reported += len(errors)
            findings.reported_unfinished += errors.count(UNFINISHED)
    quarantine = [{"provider": source.provider, "source_id": source.source_id, "project_path": source.project_path,
                   "source_table": "session", "source_rowid": 0, "key": part.path, "error": error, "raw": None,
                   "created_at": run_at} for part, error, _ in failed]
    if quarantine:
        tables.setdefault("quarantine", []).append(quarantine)
    now = [(part, error) for part, error, said in failed if said]
    if now:
        findings.notes.append(f"{len(now)} of {len(parts)} sessions could not be read (quarantined): "
                              + "; ".join(f"{part.path}: {error}" for part, error in now[:3])
                              + ("; ..." if len(now) > 3 else ""))
        findings.explained += len(now)  # their rows: said by this note, not as unparseable rows too
    findings.reported += len(failed) - len(now)
    findings.unread += sum(p.retry for _, p, _ in parts)
    findings.notes = _each_once(findings.notes)
    rows = {name: _concat(name, chunks) for name, chunks in tables.items()}
    versions = [p.schema_version for _, p, _ in parts if p.schema_version is not None]
    # the oldest format among the sessions: the one a reader of `sources` should know about
    return Extract(rows=rows, findings=findings, expected=dict(expected), schema_version=min(versions, default=None),
                   # a failed part: None, its sessions in the lake are the bundle's state's
                   part_sessions={part.source_id: None if p.error is not None else _session_ids(p)
                                  for part, p, _ in parts})


def _each_once(notes: list[str]) -> list[str]:
    """The parts' notes, a note several parts gave said once, with how many gave it (a cold
    landing of a project's Claude Code families said the same line for each of 64 of them)."""
    counts = Counter(notes)
    return [note if counts[note] == 1 else f"{note} (the same in {counts[note]} sessions)"
            for note in dict.fromkeys(notes)]


def _session_ids(part: _Part) -> list[str]:
    sessions = part.rows.get("sessions", [])
    rows = sessions.to_pylist() if isinstance(sessions, pa.Table) else sessions
    return sorted({r["session_id"] for r in rows if r.get("session_id") is not None})

