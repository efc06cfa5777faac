"""History outlives the agents: what the lake holds is never lost because a source shrank.

Agents prune their own logs (CodeWhale keeps 50 sessions, Claude Code 30 days, a user deletes a
Crush session). The policy, by session:

- a session the source still holds is rewritten from the source (its rows replace the old ones);
- a session the lake holds but the source no longer does keeps its rows, carried forward into
  the source's new files unchanged;
- a source that vanished whole is never opened again, so its files stay as they are (but
  for a bundle's sessions that moved to another project's bundle: warehouse.land.bundle_folders);
- a source this machine has no state for (a new or wiped home) finds its files in the lake by
  name first (warehouse.land.ingest), so the same rules apply.

Only rows keyed by a session are carried (the `quarantine` of a source is replaced each run).
The common case costs one read of the source's own `sessions` files.
"""

from collections import Counter
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from transforms.contract import DATA_TABLES
from warehouse.lake.storage import LakeUnreachable
from warehouse.land.landing_files import read_file

KEYED = tuple(t.name for t in DATA_TABLES if "session_id" in t.column_names)


def _files_of(store, previous: dict[str, str], table: str) -> list[str]:
    """The source's landing file of a table, if it exists (a crashed run's intent lists files
    never written)."""
    return [rel for rel, sha in previous.items() if rel.rsplit("/", 1)[-1] == f"{table}.parquet"
            and (sha or store.size(rel) is not None)]


def read_landed(store, rel: str, damaged: list | None = None):
    """A previous landing file, or None when it is gone (deleted by hand, a bucket emptied):
    nothing can be carried from it, and the source is simply read again. With `damaged`, one
    that cannot be read (cut short, bytes flipped) is None too, and said there: the source is
    landed again from the agent's store, not failed for ever on it."""
    try:
        return read_file(store, rel)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, pa.ArrowException) as exc:
        if damaged is None or isinstance(exc, (PermissionError, LakeUnreachable)):
            raise
        damaged.append(f"{store.uri(rel)} ({type(exc).__name__}: {' '.join(str(exc).split())})")
        return None


def landed_session_ids(store, rels: list[str], damaged: list | None) -> set:
    """The session ids of these landing files (`damaged`: see read_landed)."""
    ids = set()
    for rel in rels:
        data = read_landed(store, rel, damaged)
        if data is not None:
            ids.update(data.column("session_id").to_pylist())
    return ids


class Landed(NamedTuple):
    """A session as a source's landing files hold it."""

    cost_usd: float | None  # its sub-agents' included
    cost_source: str | None
    parent_session_id: str | None


def landed_sessions(store, previous: dict[str, str]) -> dict[str, Landed]:
    """The sessions a source's landing files (`previous`: its state's files) hold, with their
    cost and parent."""
    out = {}
    for rel in _files_of(store, previous, "sessions"):
        data = read_landed(store, rel, [])
        if data is not None:
            columns = [data.column(c).to_pylist() if c in data.column_names else [None] * data.num_rows
                       for c in ("cost_usd", "cost_source", "parent_session_id")]
            out.update(zip(data.column("session_id").to_pylist(), map(Landed._make, zip(*columns))))
    return out


def _session_ids_of(rows) -> set:
    if isinstance(rows, pa.Table):
        return set(rows.column("session_id").to_pylist())
    return {r.get("session_id") for r in rows}


def _append(rows, kept: pa.Table):
    """`rows` (dicts or a table) with the lake's `kept` rows after them, each with its own
    `project` (its `date` is derived again when written)."""
    kept = kept.drop_columns(["date"]) if "date" in kept.column_names else kept
    if rows is not None and not isinstance(rows, pa.Table):
        return rows + kept.to_pylist()
    # a provider's table has no `project` column, or a different one: columns are matched by name
    return kept if rows is None else pa.concat_tables([rows, kept], promote_options="permissive")


class Carried(Counter):
    """The rows carried forward by table, and the ids of the sessions they keep."""

    session_ids: frozenset = frozenset()


def carry_forward(store, previous: dict[str, str], rows: dict, moved=frozenset(),
                  damaged: list | None = None) -> Carried:
    """Add to `rows` the lake's rows of sessions the source no longer holds, but those `moved` to
    another source; returns the counts carried by table, and the sessions kept. A file that cannot
    be read is left to the caller's error handling, or, with `damaged`, named there and carried
    nothing from."""
    carried = Carried()
    present = _session_ids_of(rows.get("sessions", ()))
    gone = landed_session_ids(store, _files_of(store, previous, "sessions"), damaged) - present - set(moved)
    if not gone:
        return carried
    value_set = pa.array(sorted(gone), pa.string())
    for table in KEYED:
        for rel in _files_of(store, previous, table):
            old = read_landed(store, rel, damaged)
            if old is None:
                continue
            kept = old.filter(pc.is_in(old.column("session_id"), value_set=value_set))
            if not kept.num_rows:
                continue
            rows[table] = _append(rows.get(table), kept)
            carried[table] += kept.num_rows
            if table == "sessions":
                carried.session_ids |= set(kept.column("session_id").to_pylist())
    return carried
