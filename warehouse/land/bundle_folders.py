"""Landing folders that hold a bundle's sessions besides its own (transforms.bundle).

A bundle lands one agent's sessions of one project as one source. Two kinds of folder can hold
some of them too, and would count them twice:

- a session landed as a source of its own (by a release before bundling, or alone while its
  project was unknown): the bundle takes the folder over, and its write replaces the rows (as a
  Claude Code project directory takes over its copies in other homes that were landed alone:
  any source with `replaces`);
- a bundle that is no longer discovered, because every one of its sessions still found moved to
  other projects (or to the buckets of a project that grew or shrank past a bucket count):
  nothing runs it again, so the bundles its sessions moved to take those sessions out of its
  folder, under its lock (they may be several, in parallel workers), once one of them holds
  them. What stays there are its sessions that are not found (deleted from the disk, or outside
  this run's discovery), as any vanished source's files stay (warehouse.land.retention), and
  those their new bundle could not read (until it does); when a session not found comes back,
  its bundle is discovered again and finds its own state. A folder left without a session goes,
  with its state and cache. A part landed under another id before (`Source.formerly`: a Codex
  rollout keyed by its path while its first line could not be read) is taken out the same way.
"""

import hashlib
import shutil
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from transforms.bundle import Bundle, cached_parts
from transforms.sources import Source
from warehouse.lake.layout import Layout
from warehouse.lake.locks import LockBusy
from warehouse.land.landing_files import parquet_bytes
from warehouse.land.retention import read_landed
from warehouse.land.source_state import SourceState, SourceStates


EVICT_WAIT = 60.0  # seconds a bundle waits for another run to release a folder it takes sessions out of


def taken_over(source: Source, previous: SourceState, states: SourceStates,
               lake_files: Callable[[list[str]], dict[str, str]] | None) -> tuple[dict[str, str], set[str]]:
    """The landing files of the bundle's sessions that were sources of their own, for its write
    to replace, and those sources (their states go once it is written). Found by their own
    state, and for sessions new to the bundle (not in its state) by `lake_files` too (a listing
    of the lake, for a first write: the state may be lost)."""
    known = previous.parts or {}
    new = [part for part in source.replaces if part not in known]
    files = dict(lake_files(new)) if lake_files and new else {}
    alone = states.landed_alone(source)
    for part in sorted(alone):
        files.update(states.of(source.provider, part).files)
    return files, alone | {rel.rsplit("/", 2)[-2] for rel in files}


def evict_moved(source: Bundle, layout: Layout, states: SourceStates, store,
                landed: dict[str, list[str]]) -> tuple[int, int, list[str]]:
    """Take this bundle's sessions out of the folders of bundles no longer discovered; returns
    how many sessions were taken out of another project's folders and of this project's other
    buckets (their count changed as it grew), and the folders left as they were because another
    run held them past EVICT_WAIT. `landed`: this bundle's parts and the session ids it has just
    written for each (none for a part it could not read)."""
    mine = set(source.replaces) | set(source.formerly)  # a part landed under its former id too
    # a superseded source is no bundle: evict_superseded takes this one's sessions out of it
    others = states.ids(source.provider) - source.discovered - mine - set(source.supersedes) - {source.source_id}
    evicted, buckets, held, busy = 0, 0, None, []
    for other in sorted(others):  # sorted: writers lock in one order
        state = states.of(source.provider, other)
        if state.parts is not None and not mine & set(state.parts):
            continue
        try:
            # bounded: a run whose discovery saw the old bundle holds its lock while it waits
            # for this one's (a project's bucket count changed between the two discoveries)
            with states.lock(source.provider, other, timeout=EVICT_WAIT):
                state = _named(layout, states, source.provider, other)  # again, under its lock
                if mine & set(state.parts or ()):  # else done meanwhile by another bundle
                    held = held if held is not None else _held(source, states, landed)
                    taken = _evict(source, other, state, layout, states, store, held)
                    if _project_of(state.partition_key) == _project_of(source.partition_key):
                        buckets += taken
                    else:
                        evicted += taken
        except LockBusy:
            busy.append(other)
    return evicted, buckets, busy


def _project_of(partition_key: str | None) -> str | None:
    """`<agent>-<project>` of a source's partition key (Source.partition_key: its id's head after)."""
    return partition_key.rsplit("-", 1)[0] if partition_key else None


def evict_superseded(source: Bundle, layout: Layout, states: SourceStates, store, landed: dict[str, list[str]],
                     lake_files: Callable[[list[str]], dict[str, str]] | None = None) -> tuple[int, list[str]]:
    """Take the sessions this bundle holds (`landed`: by part, as its state records them) out of
    the folders of the sources it supersedes (Source.supersedes), under each one's lock; returns
    how many were taken out, and the folders another run held past EVICT_WAIT. `lake_files` (a
    first write): such folders are looked for in the lake too, their state lost with the home's.
    What such a folder keeps are the sessions no family holds (a transcript deleted before this
    home's cache read it); one left without a session goes, with its state. Its cache stays: it
    is the project's cache of what was read, which the families read through."""
    sessions = {s for ids in landed.values() for s in ids or ()}
    known = states.ids(source.provider)
    olds = set(source.supersedes) - source.discovered - {source.source_id}
    lost = sorted(olds - known) if lake_files else []
    in_lake = lake_files(lost) if lost else {}
    evicted, busy = 0, []
    for other in sorted(olds & (known | {rel.rsplit("/", 2)[-2] for rel in in_lake})):  # writers lock in one order
        try:
            with states.lock(source.provider, other, timeout=EVICT_WAIT):
                state = states.of(source.provider, other)  # under its lock: as the last one left it
                files = state.files or {rel: sha for rel, sha in in_lake.items() if rel.rsplit("/", 2)[-2] == other}
                if not files:
                    continue
                files, left, taken = _without(store, files, sessions, quarantine=True)
                evicted += taken
                if left:
                    state.files = files
                    states.save(source.provider, other, state)
                else:
                    for rel in files:
                        store.delete(rel)
                    states.forget(source.provider, other)
        except LockBusy:
            busy.append(other)
    return evicted, busy


def _held(source: Bundle, states: SourceStates, landed: dict[str, list[str]]) -> set[str]:
    """The parts whose sessions another folder holds now: this bundle's, as just written, and
    those the other sources of this discovery recorded as landed. A part that could not be read
    where it is now (its failure cached, or a bucket not landed yet in this run) is not among
    them: the folder it left keeps its rows until its new source lands them."""
    held = {part for part, ids in landed.items() if ids}
    held |= {f for part in source.parts if part.source_id in held for f in part.formerly}
    for other in sorted(source.discovered - {source.source_id}):
        parts = states.of(source.provider, other).parts or {}
        held.update(part for part, ids in parts.items() if ids)
    return held


def _named(layout: Layout, states: SourceStates, provider: str, source_id: str) -> SourceState:
    """Under the source's lock: its state, its sessions named from its cache, once, if it was
    written before states named them (none for a source that is not a bundle)."""
    state = states.of(provider, source_id)
    if state.parts is None and state.files:
        state.parts = cached_parts(layout.source_cache(provider, source_id))
        states.save(provider, source_id, state)
    return state


def _evict(source: Bundle, other: str, state: SourceState, layout: Layout, states: SourceStates, store,
           held: set[str]) -> int:
    """Under `other`'s lock: its sessions found elsewhere in this discovery and landed there
    (this bundle's, and any other's) out of its files."""
    moved = {part for part in state.parts if part in source.found and part in held}
    if not moved:
        return 0
    sessions = {s for part in moved for s in state.parts[part]}
    files, left, _ = _without(store, state.files, sessions)
    if left:
        state.files, state.parts = files, {p: s for p, s in state.parts.items() if p not in moved}
        states.save(source.provider, other, state)
    else:
        for rel in files:
            store.delete(rel)
        states.forget(source.provider, other)
        shutil.rmtree(layout.source_cache(source.provider, other), ignore_errors=True)
    return len(sessions)


def _without(store, files: dict[str, str], sessions: set[str],
             quarantine: bool = False) -> tuple[dict[str, str], int, int]:
    """The files rewritten without the rows of `sessions` (path -> digest), how many sessions
    they still hold, and how many they lost. A file already gone is left out. `quarantine`: its
    quarantine emptied too (its rows name no session: the sources that read those files now
    quarantine their lines again)."""
    out, rewritten, left, taken = {}, {}, 0, 0
    value_set = pa.array(sorted(sessions), pa.string())
    for rel, digest in files.items():
        data = read_landed(store, rel)
        if data is None:
            continue
        if quarantine and rel.endswith("/quarantine.parquet") and data.num_rows:
            data = data.slice(0, 0)  # emptied, not deleted: the merge waits for a folder missing a table
            rewritten[rel] = parquet_bytes(data)
            digest = hashlib.sha256(rewritten[rel]).hexdigest()
        if "session_id" in data.column_names:
            kept = data.filter(pc.invert(pc.is_in(data.column("session_id"), value_set=value_set)))
            if kept.num_rows != data.num_rows:
                taken += (data.num_rows - kept.num_rows) if rel.endswith("/sessions.parquet") else 0
                rewritten[rel] = parquet_bytes(kept)
                digest, data = hashlib.sha256(rewritten[rel]).hexdigest(), kept
        if rel.endswith("/sessions.parquet"):
            left += data.num_rows
        out[rel] = digest
    store.put_all(rewritten)  # all staged first: a full disk leaves the folder as it was
    return out, left, taken
