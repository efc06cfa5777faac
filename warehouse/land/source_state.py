"""The one owner of a source's state: what this machine landed for it, and whether it must be
read again.

A state file records the fingerprint last landed, the project names its rows were filed under,
and the files written for it. It lets a rerun settle an unchanged source without opening it,
and lets a changed source remove the files it no longer needs. It is written last, so a crash
before it only means the next run reads the source again.

Everything else asks here: the CLI and the Dagster landing asset (`verdict`, through
warehouse.land.ingest.settle), the ingest of one source (`verdict`, then the `record_*` writes
in their order), the bundle folders (warehouse.land.bundle_folders) and the demo's home.
"""

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from functools import lru_cache
from pathlib import Path

from transforms.atomic import replace_file
from transforms.contract import SCHEMA_VERSION
from transforms.sources import Source
from warehouse.lake.layout import Layout
from warehouse.lake.locks import held
from warehouse.land.landing_files import landed_files
from warehouse.land.retention import landed_session_ids


@dataclass
class SourceState:
    fingerprint: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    partition_key: str | None = None
    path: str | None = None
    schema: str | None = None  # contract.SCHEMA_VERSION the files were written with
    # the source as it was when it could not be read, and why: the same bytes fail the same way,
    # so a rerun reports it without reading it again (a full refresh retries)
    failed_fingerprint: str | None = None
    failed: str | None = None
    # a source read in parts (transforms.bundle): each part's session ids as last landed
    parts: dict[str, list[str]] | None = None
    # a digest of the configured project names a store that names its sessions' projects itself
    # was landed with (names_digest); the project of a source of one project is in its partition_key
    names: str | None = None
    # the run that landed the files: within that run the source is read again, not called
    # unchanged (a worker pool that broke after the write lost its result: warehouse.land.ingest)
    run_id: str | None = None
    # team mode's redaction the files were written with (`redaction`); None: as the agent holds
    # them; UNRECORDED: by a release that did not say (taken as landed in the mode of its time)
    redacted: str | None = None


_FIELDS = {f.name for f in fields(SourceState)}
UNRECORDED = "unrecorded"  # SourceState.redacted of a state written before it was kept


class Verdict(Enum):
    UNCHANGED = "unchanged"  # the lake holds the source as it is now
    FAILED_BEFORE = "failed"  # it could not be read, and neither it nor agentlake changed since
    READ = "read"  # it must be read


class SourceStates:
    """The states of one machine's sources, in its layout's state folder (or, to look at another
    machine's or user's in the same lake, in `state_dir`)."""

    def __init__(self, layout: Layout, state_dir: Path | None = None):
        self.layout = layout
        self.dir = Path(state_dir or layout.state_dir)

    def file(self, provider: str, source_id: str) -> Path:
        return self.dir / f"{provider}-{source_id}.json"

    def of(self, provider: str, source_id: str) -> SourceState:
        try:
            data = json.loads(self.file(provider, source_id).read_text())
            # a key a newer release added is ignored, not a reason to read the source again; an
            # older release's state says nothing of its redaction: not every team's source landed again
            return SourceState(**{"redacted": UNRECORDED, **{k: v for k, v in data.items() if k in _FIELDS}})
        except (OSError, ValueError, TypeError):
            return SourceState()  # no usable state: the source is simply ingested again

    def save(self, provider: str, source_id: str, state: SourceState) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        replace_file(self.file(provider, source_id), json.dumps(self._as_written(state), indent=1, sort_keys=True))

    def _as_written(self, state: SourceState) -> dict:
        """The state as its file holds it. In team mode a local lake is a shared folder, and the
        states are in it: their path and error lose their secrets as the run log's `db_path` and
        `error` do (a token in a folder's name was found there). On object storage the states
        stay in the home, as private as the agents' own files."""
        data = asdict(state)
        if self.layout.team and not self.layout.remote and (state.path or state.failed):
            from transforms.redact import Policy, redact_log_row

            row = {"db_path": state.path, "error": state.failed}
            redact_log_row(row, Policy.from_mapping(dict(self.layout.privacy)))
            data["path"], data["failed"] = row["db_path"], row["error"]
        return data

    def partitions(self, providers) -> set[str]:
        """The Dagster partitions (agent and project) of every source of `providers` with a state
        here, found or not: a source's partition_key is its partition's, `-`, then 8 characters
        of its id."""
        keys = {self.of(provider, source_id).partition_key for provider, source_id in self._listed()
                if provider in providers}
        return {key[:-9] for key in keys if key}

    def said_file(self, provider: str, source_id: str, what: str) -> Path:
        """Where a note about the source is recorded as said in this lake (transforms.said_once)."""
        return self.dir / f"{provider}-{source_id}.{what}-said.json"

    def forget(self, provider: str, source_id: str) -> None:
        """A source that is no more (a session now landed with its project: transforms.bundle)."""
        self.file(provider, source_id).unlink(missing_ok=True)
        for said in self.dir.glob(f"{provider}-{source_id}.*-said.json"):
            said.unlink(missing_ok=True)

    def ids(self, provider: str) -> set[str]:
        """Every source of the agent with a state here, found or not this run."""
        return {source_id for agent, source_id in self._listed() if agent == provider}

    def _listed(self) -> list[tuple[str, str]]:
        """(provider, source_id) of every state file here, in one listing: `<provider>-<id>.json`
        (not the notes recorded as said, `<provider>-<id>.<what>-said.json`). A provider's name
        has no dash."""
        try:
            names = os.listdir(self.dir)
        except OSError:
            return []
        listed = []
        for name in names:
            provider, dash, source_id = name.removesuffix(".json").partition("-")
            if name.endswith(".json") and dash and source_id and "." not in source_id:
                listed.append((provider, source_id))
        return listed

    def not_found(self, found: set[tuple[str, str]], providers) -> dict[str, list[str]]:
        """By agent, the paths of the sources with a state here, of `providers`, that a run which
        looked everywhere it is told to did not find (`found`: (provider, source_id)): stores
        deleted or moved, or an agent's home set elsewhere. One listing of the state folder."""
        missing: dict[str, list[str]] = {}
        for provider, source_id in self._listed():
            if provider not in providers or (provider, source_id) in found:
                continue
            state = self.of(provider, source_id)
            if state.parts == {}:  # a bundle left holding only sessions gone from disk: its project's found
                continue
            missing.setdefault(provider, []).append(state.path or source_id)
        return missing

    def lock(self, provider: str, source_id: str, timeout: float | None = None):
        """One writer per source at a time (the sensor's run and a manual ingest, say);
        `timeout`: at most that many seconds of waiting, then locks.LockBusy."""
        self.dir.mkdir(parents=True, exist_ok=True)
        return held(self.dir / f"{provider}-{source_id}.lock", timeout=timeout)

    # --- must it be read?

    def verdict(self, source: Source, previous: SourceState, fingerprint: str, landed=None) -> Verdict:
        """Whether `source`, whose state is `previous` and whose bytes are `fingerprint` now, must
        be read. Nothing is opened but the state files; `landed` is the set of landing files from
        one listing of the lake, needed for object storage (locally a stat each)."""
        if self._unchanged(source, previous, fingerprint, landed):
            return Verdict.UNCHANGED
        if previous.failed_fingerprint is not None and previous.failed_fingerprint == attempt(fingerprint):
            return Verdict.FAILED_BEFORE
        return Verdict.READ

    def _unchanged(self, source: Source, previous: SourceState, fingerprint: str, landed) -> bool:
        """The lake already holds this source as it is now: same fingerprint, same contract, the
        same project names (a rename in config.toml's [projects] changes no byte of the store),
        none of a bundle's sessions landed alone beside it (warehouse.land.bundle_folders), no
        source it supersedes landed beside it (an older release run on this home), and
        every file it landed still in place (a file deleted by hand, or an emptied bucket, makes
        the source be read again)."""
        if previous.fingerprint != fingerprint or previous.schema != SCHEMA_VERSION or not previous.files:
            return False
        if not same_names(previous, source):
            return False
        if self.layout.team and previous.redacted not in (redaction(self.layout), UNRECORDED):
            # landed before team mode was on (or under other [privacy] rules): its secrets are in
            # the lake until it is landed again, and a rerun called it unchanged (a team lead's trial)
            return False
        if getattr(source, "replaces", ()) and self.landed_alone(source):
            return False
        if source.supersedes and self.superseded_landed(source, previous):
            return False
        if landed is not None:
            return all(rel in landed for rel in previous.files)
        if self.layout.remote:
            landed = landed_files(self.layout)
            return all(rel in landed for rel in previous.files)
        return all((self.layout.lake / rel).exists() for rel in previous.files)

    def superseded_landed(self, source: Source, previous: SourceState) -> set[str]:
        """The sources `source` supersedes (Source.supersedes) whose files hold some of the
        sessions it landed (`previous.parts`): an older release run on this home since it took
        them out (bundle_folders.evict_superseded). One listing of the state folder; the
        sessions file of each such source still there (what no family holds, if not that)."""
        others = self.ids(source.provider) & set(source.supersedes)
        mine = {s for ids in (previous.parts or {}).values() for s in ids or ()}
        if not others or not mine:
            return set()
        store = self.layout.store()
        return {other for other in others
                if mine & landed_session_ids(store, [rel for rel in self.of(source.provider, other).files
                                                     if rel.endswith("/sessions.parquet")], [])}

    def landed_alone(self, source: Source) -> set[str]:
        """A bundle's sessions with a state of their own: landed alone before bundling, or again
        since, by an older release run on this home (their rows would count twice: the bundle is
        then not unchanged, and its next write takes them over). One listing of the state folder."""
        return self.ids(source.provider) & set(source.replaces)

    # --- what an ingest records, in its order

    def record_failure(self, source: Source, previous: SourceState, fingerprint: str, reason: str) -> None:
        """The source could not be read: the same bytes are not read again until they or
        agentlake change (`ingest --full-refresh` retries). Its landed files stay recorded."""
        previous.failed_fingerprint, previous.failed = attempt(fingerprint), reason
        previous.partition_key = previous.partition_key or source.partition_key  # its partition, landed or not
        self.save(source.provider, source.source_id, previous)

    def record_intent(self, source: Source, files: dict[str, str], parts) -> None:
        """Before a write: every file it may leave behind, so that a crash or a full disk half-way
        never orphans one (the next run reads the source again and removes what is stale)."""
        self.save(source.provider, source.source_id,
                  SourceState(None, files, source.partition_key, source.path, parts=parts))

    def record_landed(self, source: Source, fingerprint: str | None, files: dict[str, str], parts,
                      run_id: str | None = None) -> None:
        """After a write by run `run_id`: `fingerprint` settles the source (None: read it again next run)."""
        self.save(source.provider, source.source_id,
                  SourceState(fingerprint, files, source.partition_key, source.path, SCHEMA_VERSION,
                              parts=parts, names=names_digest(source), run_id=run_id,
                              redacted=redaction(self.layout) if self.layout.team else None))


def same_names(previous: SourceState, source: Source) -> bool:
    """The source's rows would be filed under the project names they were landed with. Its
    project is in its partition key, which every state records; a store that names its sessions'
    projects itself (OpenCode, Cursor, Kilo, ...) is landed again when the configured names change
    at all, since which of its sessions they rename is known only by reading it."""
    return previous.partition_key == source.partition_key and previous.names == names_digest(source)


def redaction(layout: Layout) -> str:
    """Team mode's redaction as a digest of its [privacy] rules (config.toml): a source landed
    without it, or under other rules, is landed again."""
    return hashlib.sha256(repr(("team", tuple(layout.privacy))).encode()).hexdigest()[:16]


def names_digest(source: Source) -> str | None:
    """The configured project names a source carries to its extract, as a digest; None for none."""
    if not source.project_names:
        return None
    return hashlib.sha256(repr(tuple(source.project_names)).encode()).hexdigest()[:16]


def attempt(fingerprint: str) -> str:
    """What a failure depends on: the source's bytes, and the code that read them."""
    return f"{fingerprint}:{SCHEMA_VERSION}:{_agentlake_version()}"


@lru_cache(maxsize=1)
def _agentlake_version() -> str:
    try:
        from importlib.metadata import version

        return version("agentlake")
    except Exception:  # an install whose metadata cannot be read: the contract alone decides
        return "unknown"
