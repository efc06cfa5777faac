"""One ingestion run: for each source, fingerprint -> snapshot + normalise -> write -> record.

No Dagster here: the CLI and the Dagster landing asset both call `settle` (the sources with
nothing to do, answered by warehouse.land.source_state) and `ingest_many`. A source that fails
is recorded with its reason and leaves its previous lake files alone; the run goes on.
"""

import multiprocessing
import os
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache, partial
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from transforms.atomic import replace_file
from transforms.bundle import Bundle, forget_cached
from transforms.contract import DATA_TABLES, SCHEMA_VERSION, SOURCES
from transforms.provider import DiscoverOptions, Provider, SourceError, environmental
from transforms.providers import PROVIDERS
from transforms.said_once import not_said_before
from transforms.sources import Source, as_text, members
from warehouse.lake.layout import DAMAGED, Layout, damaged_file, landing_dir, run_log_path, runs_prefix
from warehouse.lake.scratch_dirs import scratch
from warehouse.land import landed_as
from warehouse.land.bundle_folders import evict_moved, evict_superseded, taken_over
from warehouse.land.landing_files import (
    RowsOutsideContract, build_files, check_rows, landed_files, read_file, write_files, write_run_log)
from warehouse.land.retention import carry_forward, landed_sessions
from warehouse.land.source_state import SourceStates, Verdict

STATUSES = ("ok", "unchanged", "skipped", "failed")
MAX_NAMED = 5  # values out of range named in a source's warning (all are in `quarantine`)


@dataclass
class SourceResult:
    source: Source
    status: str
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    # table -> (expected from the snapshot, written + quarantined in its place)
    reconcile: dict[str, tuple[int, int]] = field(default_factory=dict)
    unknown_part_types: int = 0
    retained_sessions: int = 0  # sessions the source no longer holds, kept in the lake
    schema_version: int | None = None
    migrations: int | None = None
    fingerprint: str | None = None
    files: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    log_row: dict | None = None  # this run's row of the `sources` run log

    @property
    def reconciled(self) -> bool:
        return all(exp == got for exp, got in self.reconcile.values())


@dataclass
class RunSummary:
    run_id: str
    results: list[SourceResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    landed_before: int = 0  # sources another run landed and had not merged, merged by this one
    into_new_warehouse: bool = False  # ... into a warehouse that had merged nothing before
    notes: list[str] = field(default_factory=list)  # what the merge did beyond the sources (prices applied)

    @property
    def by_status(self) -> Counter:
        counts = Counter({s: 0 for s in STATUSES})
        counts.update(r.status for r in self.results)
        return counts

    @property
    def rows(self) -> Counter:
        total = Counter({t.name: 0 for t in DATA_TABLES})
        for r in self.results:
            total.update(r.rows)
        return total

    @property
    def exit_code(self) -> int:
        """0: all good; 1: some source failed or a place to look was unreadable."""
        return 1 if self.by_status["failed"] or self.problems else 0


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:8]


@dataclass(frozen=True)
class Run:
    """One ingestion run, as every step of it needs it (and a worker process receives it)."""

    layout: Layout
    run_id: str
    full_refresh: bool = False  # read every source again, not only the new and changed ones


def discover_sources(options: DiscoverOptions, providers: dict[str, Provider] = PROVIDERS):
    """Every provider's sources, and the problems met while looking (never fatal)."""
    sources, problems = [], []
    for provider in providers.values():
        try:
            found = provider.discover(options)
        except Exception as exc:  # one agent's odd place (`~nosuchuser/...`) must not stop the others
            hint = " (a `~user` path for a user this machine does not have?)" if "home directory" in str(exc) else ""
            problems.append(f"cannot look for {provider.name}'s data: {type(exc).__name__}: {exc}{hint}")
            continue
        sources.extend(found.sources)
        problems.extend(found.problems)
    return sources, problems


def ingest_source(source: Source, run: Run, providers: dict[str, Provider] = PROVIDERS) -> SourceResult:
    started = time.monotonic()
    run_at = datetime.now(timezone.utc)
    layout = run.layout
    try:
        with SourceStates(layout).lock(source.provider, source.source_id):
            result = _ingest_locked(source, run, run_at, providers[source.provider])
    except OSError as exc:  # the lake itself is unwritable (permissions, a full or read-only disk)
        result = SourceResult(source, "failed", error=f"cannot write the lake at {layout.lake}: {exc}")
    result.duration_s = round(time.monotonic() - started, 3)
    result.log_row = _log_row(result, layout, run.run_id, run_at)
    if layout.team:  # paths, errors and warnings leave the machine too (a key in a part type's name)
        from transforms.redact import redact_log_row

        redact_log_row(result.log_row, privacy_policy(layout))
    return result


def settle(sources, run: Run, landed=None) -> tuple[list, list]:
    """The results of the sources with nothing to do (skipped, as they are in the lake, or failed
    as they are now), settled in this process with no worker; and the sources left to read.
    `landed`: one listing of an object-storage lake, else None. The CLI settles before starting
    Dagster, and the landing asset what the CLI landed before a sensor saw it."""
    take_damage_notes(run.layout)
    states = SourceStates(run.layout)
    settled, rest = [], []
    for source in sources:
        if source.skip_reason or (not run.full_refresh and _verdict(source, states, landed) is not Verdict.READ):
            settled.append(ingest_source(source, run))
        else:
            rest.append(source)
    return settled, rest


def take_damage_notes(layout: Layout) -> int:
    """The merge's notes of this machine's landing files it could not read (warehouse.catalog.merge,
    `_damaged/`), found in one listing: each of those sources is told by its state to be read
    again and to write that file whatever its digest, then the note goes. A note whose file
    changed since (landed again already) just goes. Returns the sources told."""
    store = layout.store()
    try:
        notes = store.versions(f"{DAMAGED}/{layout.machine}/{layout.user}")
    except OSError:  # nothing to find, or a lake that cannot be listed: each source says why
        return 0
    states, told = SourceStates(layout), 0
    for note in sorted(notes):
        rel = damaged_file(note)
        parts = rel.split("/")
        if len(parts) == 6:
            provider, source_id = parts[3], parts[4]
            try:
                noted = read_file(store, note).column("version")[0].as_py()
            except Exception:  # a note cut short: taken as about the file as it is
                noted = None
            folder = rel.rsplit("/", 1)[0]
            with states.lock(provider, source_id):
                state = states.of(provider, source_id)
                if rel in state.files and noted in (None, store.versions(folder).get(rel)):
                    state.fingerprint, state.files[rel] = None, ""
                    states.save(provider, source_id, state)
                    told += 1
        store.delete(note)
    return told


def _verdict(source: Source, states: SourceStates, landed) -> Verdict:
    previous = states.of(source.provider, source.source_id)
    return states.verdict(source, previous, PROVIDERS[source.provider].fingerprint(source), landed)


def _ingest_locked(source: Source, run: Run, run_at, provider) -> SourceResult:
    if source.skip_reason:
        return SourceResult(source, "skipped", error=source.skip_reason)
    layout, store, states = run.layout, run.layout.store(), SourceStates(run.layout)
    previous = states.of(source.provider, source.source_id)
    fingerprint = provider.fingerprint(source)
    # landed earlier in this run: a worker pool broke after the write, and its result (the rows,
    # the checks) is had again by reading again, the same files written (ingest_many)
    again = previous.run_id == run.run_id and previous.fingerprint is not None
    verdict = Verdict.READ if run.full_refresh or again else states.verdict(source, previous, fingerprint)
    if verdict is Verdict.UNCHANGED:
        return SourceResult(source, "unchanged", fingerprint=fingerprint, files=sorted(previous.files))
    if verdict is Verdict.FAILED_BEFORE:
        return SourceResult(source, "failed", error=f"{previous.failed} (unchanged since; not read again, "
                            "`ingest --full-refresh` retries)", fingerprint=fingerprint)
    first = not previous.files
    if first:  # no state (a new home, a wiped one): adopt what the lake holds already
        previous.files = _files_in_lake(source.provider, (source.source_id,), layout, run.run_id)
    bundle = isinstance(source, Bundle)
    # a bundle takes over the folders of its sessions landed as sources of their own, as a
    # Claude Code project does those of its copies in other homes (warehouse.land.bundle_folders): its
    # write replaces them, so their rows are not counted twice (the lake is listed on a first
    # write only: the state may have been lost)
    listing = partial(_files_in_lake, source.provider, layout=layout, run_id=run.run_id) if first else None
    taken, taken_ids = (taken_over(source, previous, states, listing) if getattr(source, "replaces", ())
                        else ({}, set()))
    previous.files.update(taken)
    cache_dir = layout.source_cache(source.provider, source.source_id)
    if run.full_refresh:  # a bundle's sessions are read again too, not taken from its cache
        forget_cached(cache_dir)
    # a first landing into this lake: the cached sessions' notes too, which went to the lake they
    # were read for (the home's cache is every lake's: a first ingest into a team lake lost them)
    options = {"cached_notes": True} if first and getattr(provider, "takes_cached_notes", False) else {}
    if run.full_refresh and getattr(provider, "takes_full_refresh", False):  # its own cache of what it read
        options["full_refresh"] = True
    read_again = bool(options)  # every line read again, its notes said again
    if getattr(provider, "takes_landed", False):  # asked only for a part whose sessions' files are gone
        options["landed"] = lru_cache(maxsize=None)(partial(landed_sessions, store, previous.files))
    try:
        with scratch("snapshot") as workdir:
            extract = provider.extract(source, workdir, run_at, cache_dir=cache_dir, **options)
    except Exception as exc:  # the reason goes to `sources`; other sources go on
        if not environmental(exc):  # a permission fixed later changes no byte: that is retried
            states.record_failure(source, previous, fingerprint, _reason(exc))
        return SourceResult(source, "failed", error=_reason(exc), fingerprint=fingerprint)
    try:  # the extractor's own rows: those carried from the lake below are the contract's already
        check_rows(list(DATA_TABLES), extract.rows, source.provider)
    except RowsOutsideContract as exc:  # an extractor's defect: this source fails, the lake is untouched
        return SourceResult(source, "failed", error=str(exc), fingerprint=fingerprint)
    redacted = _redact(extract.rows, privacy_policy(layout)) if layout.team else Counter()
    damaged = []  # its previous files that cannot be read: landed again from the store
    try:
        retained = carry_forward(store, previous.files, extract.rows, extract.moved_sessions, damaged)
    except (OSError, ValueError) as exc:  # an old file this machine may not read: keep it, and the old state
        return SourceResult(source, "failed", error=f"cannot read the lake's previous files: {exc}",
                            fingerprint=fingerprint)
    try:
        built = build_files(list(DATA_TABLES), extract.rows, provider=source.provider,
                            source_id=source.source_id, project=source.project, machine=layout.machine,
                            user=layout.user, landing_id=f"{fingerprint}:{SCHEMA_VERSION}")
    except Exception as exc:  # a value Arrow cannot hold: this source fails, the lake is untouched
        return SourceResult(source, "failed", error=f"cannot convert the rows: {type(exc).__name__}: {exc}",
                            fingerprint=fingerprint)
    intent = {**previous.files, **{rel: "" for rel in built.data if rel not in previous.files}}
    parts = _parts_landed(extract.part_sessions, previous.parts)
    try:
        states.record_intent(source, intent, previous.parts)
        # a full refresh looks at the bytes in place too: a file damaged there keeps its size and
        # the digest its state recorded
        written = write_files(store, built, previous.files, verify=run.full_refresh)
        for source_id in taken_ids:  # their state goes with them
            states.forget(source.provider, source_id)
        # after the write: a crash before the state below reads the bundle again, and this again
        evicted, rebucketed, busy = evict_moved(source, layout, states, store, parts or {}) if bundle else (0, 0, [])
        superseded = 0
        if bundle and source.supersedes:  # what its project landed as one source before
            superseded, held = evict_superseded(source, layout, states, store, parts or {}, listing)
            busy = busy + held
        # a file that could not be read this time (permissions) changes neither size nor mtime
        # when it is fixed: the source is not settled, so the next run reads it again
        # so is one whose moved sessions another run kept in their old folder: the next run takes them out
        states.record_landed(source, fingerprint if not extract.findings.unread and not busy else None,
                             written.files, parts, run.run_id)
    except OSError as exc:
        return SourceResult(source, "failed", error=f"cannot write the lake: {exc}", fingerprint=fingerprint)
    findings = extract.findings
    # said once per lake, by the run that lands the source without them (and to a lake never told)
    gone, said_gone = _said_once(states, source, "gone", findings.gone_from_disk, read_again)
    if gone:
        findings.notes.append(f"{len(gone)} transcript{'s' * (len(gone) > 1)} no longer on disk ({findings.gone_why}) "
                              "kept from the cache")
    said_gone()
    findings.null_timestamps, findings.epoch_dated = written.undated, written.epoch_dated
    findings.unfinished_lines(extract.rows.get("quarantine", []))
    reconcile = {
        table: (expected, written.rows.get(table, 0) - retained[table] + findings.diverted.get(table, 0))
        for table, expected in extract.expected.items()
    }
    nulled = built.out_of_range
    warnings = findings.warnings(written.rows.get("quarantine", 0) - len(nulled))
    if nulled:  # the source's bad values, each named with its row: nulled, and kept in `quarantine`
        more = f"; and {len(nulled) - MAX_NAMED} more" if len(nulled) > MAX_NAMED else ""
        values = f"{len(nulled)} value{'s' * (len(nulled) > 1)}"
        warnings.append(f"{values} out of range nulled (kept in quarantine): {'; '.join(nulled[:MAX_NAMED])}{more}")
    if redacted:
        secrets = sum(n for kind, n in redacted.items() if ":" not in kind)
        dropped = sum(n for kind, n in redacted.items() if kind.startswith("drop:"))
        warnings.append(f"team mode: {secrets} secrets redacted, {dropped} values dropped")
    if findings.unread:
        warnings.append(f"{findings.unread} files could not be read (quarantined); the source is read again next run")
    for file in damaged:  # what it alone held of sessions the store no longer has could not be kept
        warnings.append(f"the lake's previous file {file} could not be read: landed again from the agent's store; "
                        "rows of sessions the store no longer holds could not be carried forward from it")
    # said by the run that first keeps them (its count stays in `retained_sessions`): every later
    # rewrite of the source carried them again, and said so each time (a new user's trial)
    kept, said_kept = _said_once(states, source, "kept", sorted(retained.session_ids), read_again)
    if kept:
        more = f" ({retained['sessions']} in all)" if retained["sessions"] > len(kept) else ""
        warnings.append(f"{len(kept)} session{'s' * (len(kept) > 1)} no longer in the source "
                        f"{'were' if len(kept) > 1 else 'was'} kept in the lake{more}")
    said_kept()
    if evicted:
        warnings.append(f"{evicted} session{'s that moved here were' if evicted > 1 else ' that moved here was'} "
                        f"taken out of {'their' if evicted > 1 else 'its'} old project's files")
    if rebucketed:  # the project's bucket count changed as it grew: no session changed project
        warnings.append(f"{rebucketed} session{'s were' if rebucketed > 1 else ' was'} taken out of the bucket that "
                        f"held {'them' if rebucketed > 1 else 'it'} (the project's sessions are split in buckets, "
                        "whose count changed as it grew)")
    if superseded:
        warnings.append(f"took over {superseded} sessions from the project's source of an older release "
                        "(landed now in families of sessions): each session once")
    if busy:
        warnings.append(f"another run held {len(busy)} folder{'s' * (len(busy) > 1)} this source's moved sessions "
                        "were in: counted there and here until the next run takes them out")
    if taken_ids:  # the totals drop by what they counted twice: said, not silent
        warnings.append(f"took over {len(taken_ids)} sources landed before under other ids (sessions landed alone, "
                        "a copy in another home): their rows are replaced by this source's, each session once")
    warnings += [
        f"{table}: snapshot has {exp} rows, lake got {got}" for table, (exp, got) in reconcile.items() if exp != got
    ]
    return SourceResult(
        source, "ok", warnings=warnings, rows=written.rows, reconcile=reconcile,
        unknown_part_types=sum(findings.unknown_part_types.values()), retained_sessions=retained["sessions"],
        schema_version=extract.schema_version, migrations=extract.migrations,
        fingerprint=fingerprint, files=sorted(written.files),
    )


def _said_once(states: SourceStates, source: Source, what: str, now: list[str],
               read_again: bool) -> tuple[list[str], Callable[[], None]]:
    """Of `now` (things a note about the source counts), those not said to this lake before (all
    of them when every line was read again), and how to record `now` as said once the note is out."""
    new, remember = not_said_before(states.said_file(source.provider, source.source_id, what), now)
    return (now if read_again else new), remember


def _parts_landed(sessions: dict | None, before: dict | None) -> dict | None:
    """A bundle's parts and their session ids for its state; a part that failed this run keeps
    the sessions it had (its rows are carried forward)."""
    if sessions is None:
        return None
    return {part: ids if ids is not None else (before or {}).get(part, []) for part, ids in sessions.items()}


def _redact(rows: dict, policy) -> Counter:
    """Team mode: secrets out of every table, in place. A provider's rows are Arrow tables
    (transforms.crush), redacted in one call, or dicts. detect-secrets' rules load only when used."""
    from transforms.redact import redact_rows, redact_tables

    counts = Counter()
    tables = {name: data for name, data in rows.items() if isinstance(data, pa.Table)}
    if tables:
        done, found = redact_tables(tables, policy)
        rows.update(done)
        counts.update(found)
    counts.update(redact_rows({name: data for name, data in rows.items() if name not in tables}, policy))
    return counts


def _files_in_lake(provider: str, source_ids, layout: Layout, run_id: str) -> dict[str, str]:
    """This machine's landing files of these sources, found by path: they are carried forward and
    replaced like any previous files, so losing the state never loses history. The digest is
    unknown: each one is rewritten."""
    dirs = {landing_dir(layout.machine, layout.user, provider, source_id) for source_id in source_ids}
    if not dirs:
        return {}
    return {rel: "" for rel in _landing_listing(layout, run_id) if rel.rsplit("/", 1)[0] in dirs}


@lru_cache(maxsize=2)
def _landing_listing(layout: Layout, run_id: str) -> frozenset[str]:
    """One listing of this machine's landing files per run and process, not one per source.
    It finds folders by path, and a source's folder is created by that source alone, so a
    listing taken once stays right."""
    return frozenset(landed_files(layout))


def privacy_policy(layout: Layout):
    """Team mode's policy: the defaults, with config.toml's [privacy] on top."""
    from transforms.redact import Policy

    return Policy.from_mapping(dict(layout.privacy))


def _reason(exc: Exception) -> str:
    if isinstance(exc, SourceError):  # written for the user already
        return str(exc)
    return f"unexpected {type(exc).__name__} while reading the source: {exc}"


def _log_row(result: SourceResult, layout: Layout, run_id: str, run_at: datetime) -> dict:
    """This run's row of the `sources` run log for the source."""
    s = result.source
    ok = result.status == "ok"
    counted = ("sessions", "messages", "parts", "tool_calls", "file_versions", "read_files")
    row = {
        "project": s.project,
        "provider": s.provider, "machine": layout.machine, "user": layout.user, "source_id": s.source_id,
        "partition_key": s.partition_key, "project_path": s.project_path, "db_path": s.path, "run_id": run_id,
        "run_at": run_at, "status": result.status, "error": result.error,
        "warnings": "; ".join(result.warnings) or None,
        "schema_version": result.schema_version, "migrations": result.migrations,
        "fingerprint": result.fingerprint,
        **{name: result.rows.get(name) if ok else None for name in counted},
        "quarantined": result.rows.get("quarantine") if ok else None,
        "unknown_part_types": result.unknown_part_types if ok else None,
        "retained_sessions": result.retained_sessions if ok else None,
        "duration_s": result.duration_s,
    }
    # a path that is not UTF-8, in its own column or quoted in an error or a warning
    return {k: as_text(v) if isinstance(v, str) else v for k, v in row.items()}


def record_run(layout: Layout, run_id: str, results) -> str | None:
    """Write the run's rows of the `sources` run log as one file of its own (never rewriting
    the log); returns a problem to report when it cannot be written."""
    rows = [r.log_row for r in results if r.log_row]
    if not rows:
        return None
    rel = run_log_path(layout.machine, layout.user, f"{run_id}-{uuid.uuid4().hex[:8]}")
    if any(r.status in ("ok", "unchanged") for r in results):  # sessions landed under these names: a run
        landed_as.record(layout)  # whose every source failed (a bucket refusing a new name) landed none
    try:
        if not layout.team:  # its rows as the agents hold them: a team-mode run redacts them (`redact_earlier_runs`)
            layout.state_dir.mkdir(parents=True, exist_ok=True)
            unredacted_runs(layout).touch()
        write_run_log(layout.store(), SOURCES, rel, rows)
        if layout.team:
            redact_earlier_runs(layout)
    except (OSError, ValueError) as exc:  # the data is landed or not already; only the log entry is lost
        return f"could not record this run in `sources`: {exc}"
    return None


def unredacted_runs(layout: Layout) -> Path:
    """Present while this machine's run log holds runs written without team mode."""
    return layout.state_dir / "runs-unredacted"


def redact_earlier_runs(layout: Layout) -> int:
    """The run log files this machine wrote without team mode, their rows redacted as a team-mode
    run's are, once team mode is on: the sources landed then are landed again
    (source_state.redaction), and their paths and errors stayed in the shared lake (a team lead's
    trial). Only when such runs were recorded (`unredacted_runs`): a team's history is not read
    again at every run. Returns the files rewritten."""
    from transforms.redact import redact_log_row

    marker = unredacted_runs(layout)
    if not marker.exists():
        return 0
    store, policy, rewritten = layout.store(), privacy_policy(layout), 0
    unread = 0
    for rel in sorted(store.versions(runs_prefix(layout.machine, layout.user))):
        if not rel.endswith(".parquet"):
            continue
        try:
            rows = read_file(store, rel).to_pylist()
            if sum(sum(redact_log_row(row, policy).values()) for row in rows):
                write_run_log(store, SOURCES, rel, rows)
                rewritten += 1
        except (OSError, ValueError):  # a damaged file (the merge names it): the others are done, this one next time
            unread += 1
    if not unread:
        marker.unlink(missing_ok=True)
    return rewritten


def mark_pending(layout: Layout) -> None:
    """Landed files wait for a merge: a run killed before merging leaves this, and the next merges.
    Marked before a run writes, and again as it writes, each time with a new token (merged_since)."""
    try:
        layout.pending_marker.parent.mkdir(parents=True, exist_ok=True)
        replace_file(layout.pending_marker, uuid.uuid4().hex)
    except OSError:  # an unwritable state dir: each source fails with the reason, and nothing lands
        pass


def pending_token(layout: Layout) -> str | None:
    """The marker's token as a merge starts (None: nothing marked): merged_since compares it."""
    try:
        return layout.pending_marker.read_text()
    except OSError:
        return None


def merged_since(layout: Layout, token: str | None) -> None:
    """A merge that started when the marker held `token` merged what had landed: the marker goes,
    unless a run marked it since, having landed beside the merge (an `agentlake ingest` while
    Dagster's run lands): what it wrote waits for the next merge, and the marker says so. A token,
    not a time: a shared folder's clock or its mtimes' steps are not this machine's."""
    if pending_token(layout) == token:
        try:
            layout.pending_marker.unlink(missing_ok=True)
        except OSError:  # a lake that cannot be written: the marker stays, for the next merge
            pass


def clean_stale_staging(layout: Layout) -> int:
    """Remove staging dirs left by runs that died (their pid is gone)."""
    removed = 0
    try:
        entries = list(layout.staging_dir.iterdir())
    except OSError:  # no staging yet, or none we may look at: nothing to clean
        return 0
    for entry in entries:
        pid = entry.name.split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def default_workers() -> int:
    """One process per core: sources are independent, and each holds only its own rows."""
    return max(1, min(os.cpu_count() or 1, 8))


# Below this many bytes of stores, a run reads its sources in its own process: starting a pool's
# processes took longer than they saved (docs/BENCHMARKS.md, "Figures behind the code's choices").
POOL_FROM_BYTES = 16 * 2**20


def store_bytes(sources, enough: int = POOL_FROM_BYTES) -> int:
    """The size of the sources' files (a bundle's: its sessions'), counted up to `enough`."""
    total = 0
    for source in sources:
        parts = getattr(source, "parts", ())
        total += store_bytes(parts, enough - total) if parts else sum(_size(path) for path in members(source))
        if total >= enough:
            break
    return total


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:  # gone since discovery: its ingest says so
        return 0


def land(sources, run: Run, workers: int | None = None):
    """`ingest_many`, the merge owed marked as the sources land (`mark_pending`): before anything
    is written (a run killed before its merge leaves the marker, and the next merges), and again
    after each source written (a merge that started before keeps the marker: `merged_since`)."""
    if sources:
        mark_pending(run.layout)
    for result in ingest_many(sources, run, workers):
        if result.status == "ok":
            mark_pending(run.layout)
        yield result


def ingest_many(sources, run: Run, workers: int | None = None):
    """Ingest sources, in parallel processes when there are several and enough to read (`workers`
    unset: POOL_FROM_BYTES); yields each result as it is done. Memory grows with the number of
    workers times the largest source, never with the corpus. A worker that dies (killed, out of
    memory, crashed) fails its own source only: the sources its broken pool left undone are tried
    again, the suspects one process each."""
    if workers is None and store_bytes(sources) < POOL_FROM_BYTES:
        workers = 1
    workers = min(workers or default_workers(), len(sources))
    if workers <= 1:
        for source in sources:
            yield ingest_source(source, run)
        return
    undone, any_ran = list(sources), False
    while undone:
        broken = []
        for result in _pool_round(undone, run, workers, broken):
            any_ran = True
            yield result
        # the pool hands sources out in order (first in, first out): the ones in a worker when it
        # died are among the first undone; one missed goes on with the rest, and the next break
        # takes it (each round isolates at least one suspect, so this ends)
        suspects, undone = broken[:workers + 1], broken[workers + 1:]
        died = []
        for source in suspects:
            for result in _pool_round([source], run, 1, died):
                any_ran = True
                yield result
        if not any_ran:  # no worker ever finished a source: they cannot start at all
            for source in died + undone:
                yield SourceResult(source, "failed", error=NO_WORKER_RAN)
            return
        for source in died:
            yield SourceResult(source, "failed", error=WORKER_DIED)


WORKER_DIED = ("the worker process ingesting this source stopped abruptly, and again when it ran "
               "alone (killed, for example out of memory, or crashed); the other sources went on")
NO_WORKER_RAN = ("not ingested: no worker process finished a source, each stopped abruptly (killed, "
                 "out of memory, or unable to start). A Python script that ingests with workers > 1 "
                 "must do so under `if __name__ == '__main__':` (workers start with Python's spawn "
                 "method, which runs the script's top level again), or pass workers=1")


def _pool_round(sources, run: Run, workers: int, broken: list):
    """One process pool over `sources`: yields each result; the sources a dead worker's broken
    pool did not finish are appended to `broken`, in the order they were handed out."""
    # spawn, not fork: the caller may be a threaded process (Dagster, a web server)
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_die_with_parent,
                               initargs=(os.getpid(),))
    try:
        with _sigint_held():  # workers start with Ctrl-C held back: the parent handles it, once
            futures = {pool.submit(ingest_source, s, run): i for i, s in enumerate(sources)}
        lost = []
        for future in as_completed(futures):
            try:
                yield future.result()
            except BrokenProcessPool:
                lost.append(futures[future])
            except Exception as exc:  # the worker could not return its result (it did not pickle)
                yield SourceResult(sources[futures[future]], "failed", error=f"worker process failed: {exc!r}")
    except BaseException:  # interrupted (Ctrl-C) or abandoned: stop the workers now, wait for none
        manager = getattr(pool, "_executor_manager_thread", None)  # shutdown() forgets it
        processes = list((getattr(pool, "_processes", None) or {}).values())  # None if none started
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        # the pool's thread closes its wake-up pipe as it ends, and at exit Python writes to that
        # pipe without a lock: an exit meanwhile printed `OSError: [Errno 9] Bad file descriptor`
        # from concurrent.futures. Waited for here, with its workers terminated it ends at once.
        if manager is not None and manager.is_alive():
            manager.join(timeout=10)
        raise
    pool.shutdown(wait=True)
    broken.extend(sources[i] for i in sorted(lost))



@contextmanager
def _sigint_held():
    """SIGINT blocked, not ignored, while the pool starts its processes (milliseconds). A blocked
    signal stays pending for the parent, which gets it as soon as this ends, and the mask is
    inherited across exec: a Ctrl-C during a worker's start-up cannot print a traceback from
    inside it (the worker ignores SIGINT, then unblocks it; the parent handles Ctrl-C for all).
    The mask is this thread's only: the kernel hands a Ctrl-C to another thread (Dagster's,
    DuckDB's), and Python then runs its handler here all the same. A handler that only notes it
    stands in meanwhile, so no interrupt cuts the parent off between starting a worker and
    sending it what it runs (the worker printed `EOFError: Ran out of input`); a Ctrl-C noted is
    raised again once the workers are started, for the handler that was there."""
    import signal

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    noted = []
    handlers = {signo: signal.getsignal(signo) for signo in (signal.SIGINT, signal.SIGTERM)}
    for signo, handler in handlers.items():
        if callable(handler):  # a Python handler (not the default action, nor ignored)
            signal.signal(signo, lambda number, _frame: noted.append(number))
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        for signo, handler in handlers.items():
            if callable(handler):
                signal.signal(signo, handler)
        for signo in dict.fromkeys(noted):
            signal.raise_signal(signo)


def _die_with_parent(parent: int) -> None:
    """A worker ends with the process that started it, even when that one is killed outright
    (SIGKILL gives it no chance to stop its pool): Linux's parent-death signal."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle, once
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # held back while it started
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the pool's own shutdown is all there is
        return
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def ingest_all(sources, layout: Layout, *, full_refresh: bool = False, run_id: str | None = None, progress=None,
               problems=(), workers: int | None = None) -> RunSummary:
    """Ingest many sources in one run; `progress(i, n, result)` is called after each."""
    summary = RunSummary(run_id or new_run_id(), problems=list(problems))
    clean_stale_staging(layout)
    take_damage_notes(layout)
    if not sources:  # the merge after it is owed all the same (`land` marks it for a run with sources)
        mark_pending(layout)
    position = {s.source_id: i for i, s in enumerate(sources)}
    run = Run(layout, summary.run_id, full_refresh)
    for i, result in enumerate(land(sources, run, workers), 1):
        summary.results.append(result)
        if progress:
            progress(i, len(sources), result)
    summary.results.sort(key=lambda r: position[r.source.source_id])  # discovery order, whatever finished first
    problem = record_run(layout, summary.run_id, summary.results)
    if problem:
        summary.problems.append(problem)
    return summary
