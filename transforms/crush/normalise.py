"""Crush snapshot rows -> canonical tables (Arrow). Pure: no I/O, no Dagster.

This is where Crush's traps are handled:
- a root session's `cost` already includes its sub-agents' cost (kept, and flagged);
- `prompt_tokens`/`completion_tokens` are the last step's sizes (renamed to say so);
- a `cost` that is not a number (text in the REAL column) is `unknown`, counted in a warning;
- timestamps are seconds, but milliseconds are detected by magnitude and counted;
- `tool_call.input` and `tool_result.metadata` are JSON text inside the parts JSON.

Every table is built column by column, without a dict per row (transforms.crush.parts,
.columns, .tool_calls). Python touches a value alone only where the value is computed from it
(a part's JSON, a file's hash, a session's root) or when a column holds what it should not.
Quarantined rows, which are rare, are dicts.
"""

import base64
import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from transforms.contract import BY_NAME
from transforms.crush.columns import as_text, assemble, empty_as_null, epochs, strings, typed
from transforms.crush.parts import PartColumns, PartsError, parse_parts
from transforms.crush.tool_calls import tool_calls
from transforms.findings import Findings
from transforms.timestamps import from_epoch
from transforms.tools import compact_json

PROVIDER = "crush"

KNOWN_COLUMNS = {
    "sessions": (
        "id", "parent_session_id", "title", "message_count", "prompt_tokens", "completion_tokens",
        "cost", "updated_at", "created_at", "summary_message_id", "todos",
    ),
    "messages": (
        "id", "session_id", "role", "parts", "model", "created_at", "updated_at", "finished_at",
        "provider", "is_summary_message",
    ),
    "files": ("id", "session_id", "path", "content", "version", "created_at", "updated_at"),
    "read_files": ("session_id", "path", "read_at"),
}


@dataclass
class RawTable:
    """Rows of one source table as read from the snapshot; `rowid` is the first column."""

    columns: list[str]
    rows: list[tuple]

    def dicts(self):
        cols = ["rowid", *self.columns]
        for row in self.rows:
            yield dict(zip(cols, row))


class _Columns:
    """A source table's rows transposed into its columns (a missing column reads as nulls), with
    the JSON of the columns agentlake does not know."""

    def __init__(self, table: RawTable, extra: list[str]):
        self.table = table
        self.names = ["rowid", *table.columns]
        self.n = len(table.rows)
        self.extra = extra
        self.by_name = dict(zip(self.names, zip(*table.rows))) if table.rows else {}

    def get(self, name: str) -> list:
        values = self.by_name.get(name)
        return list(values) if values is not None else [None] * self.n

    def extra_json(self) -> pa.Array | None:
        if not self.extra:
            return None
        return pa.array([_extra(row, self.extra) for row in self.table.dicts()], pa.string())


@dataclass
class SourceContext:
    source_id: str
    project_path: str
    run_at: datetime


def _json_default(value):
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode()}
    return str(value)


def _extra(row: dict, extra_cols: list[str]) -> str | None:
    if not extra_cols:
        return None
    return json.dumps({c: row[c] for c in extra_cols}, default=_json_default, ensure_ascii=False)


_INT64 = range(-(2**63), 2**63)


def _int(value) -> int | None:
    """An int64, or None: SQLite's loose typing can hand us REALs, TEXT or huge numbers."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number in _INT64 else None


def _cost(value) -> tuple[float | None, str]:
    """(cost_usd, cost_source) of a stored session cost: only a real number is a native cost;
    anything else (text, a BLOB, NULL) is `unknown`, never a null labelled `native`."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value \
            and abs(value) != float("inf"):
        return float(value), "native"
    return None, "unknown"


def _float(value) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


_text = as_text


def _resolve(project_path: str, path: str | None) -> str | None:
    if not path:
        return path
    if os.path.isabs(path) or not project_path:
        return os.path.normpath(path)
    return os.path.normpath(os.path.join(project_path, path))


def _raw(part) -> str:
    """A part's `raw`: transforms.jsontext.dumps, with its orjson fast path inlined (it runs
    once per part). Text, not orjson's bytes: each bytes object keeps a 4 KiB buffer."""
    try:
        return orjson.dumps(part).decode()
    except TypeError:  # an integer beyond 64 bits: the standard library writes it
        return compact_json(part)


# parts held as Python objects before they become Arrow columns: bounds the memory a huge session takes
BATCH_PARTS = 50_000


class _Batch:
    """Messages read since the last batch became Arrow: the rows, and what was computed of them."""

    def __init__(self):
        self.rows: list[tuple] = []
        self.ids: list = []
        self.sessions: list = []
        self.indices: list[int] = []
        self.counts: list = []  # part count, None when the parts JSON is unreadable
        self.parts = PartColumns()


_ROW_OF = {"sessions": ("session", "sessions"), "files": ("file", "file_versions")}  # a row's name, its table
_OUT = ("sessions", "messages", "parts", "tool_calls", "file_versions", "read_files", "quarantine")


class _Normaliser:
    def __init__(self, tables: dict[str, RawTable], ctx: SourceContext):
        self.tables = tables
        self.ctx = ctx
        self.findings = Findings()
        self._ts_cache: dict = {}
        self._ts_units: dict = {}
        self.summary_ids: set = set()
        self.quarantined: list[dict] = []  # rare: kept a dict per row
        self.out: dict[str, pa.Table] = {}

    # -- shared helpers -------------------------------------------------------------------
    def lineage(self, table: str, rowid) -> dict:
        return {
            "provider": PROVIDER,
            "source_id": self.ctx.source_id,
            "project_path": self.ctx.project_path,
            "source_table": table,
            "source_rowid": rowid,
        }

    def constant_lineage(self) -> dict:
        """The lineage columns every row of the source shares."""
        return {"provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": self.ctx.project_path}

    def ts(self, value):
        # the same few timestamps recur on every row: convert each once
        try:
            hit = self._ts_cache[value]
        except KeyError:
            hit = self._ts_cache[value] = (from_epoch(value, self._ts_units), dict(self._ts_units))
            self._ts_units.clear()
        except TypeError:  # unhashable: not a timestamp anyway
            return None
        for unit, n in hit[1].items():  # count every occurrence, cached or not
            self.findings.non_second_timestamps[unit] = self.findings.non_second_timestamps.get(unit, 0) + n
        return hit[0]

    def extra_cols(self, name: str) -> list[str]:
        table = self.tables.get(name)
        if table is None:
            return []
        extra = [c for c in table.columns if c not in KNOWN_COLUMNS[name]]
        if extra:
            self.findings.unknown_columns[name] = extra
        return extra

    def quarantine(self, table: str, rowid, key, error: str, raw, created_at=None):
        row = self.lineage(table, rowid)
        if not isinstance(raw, str):
            raw = json.dumps(raw, default=_json_default, ensure_ascii=False)
        row.update(key=_text(key), error=error, raw=raw, created_at=created_at or self.ctx.run_at)
        self.quarantined.append(row)

    # -- tables ---------------------------------------------------------------------------
    def columns_of(self, name: str) -> "_Columns":
        table = self.tables.get(name) or RawTable(list(KNOWN_COLUMNS[name]), [])
        return _Columns(table, self.extra_cols(name))

    def unreadable(self, name: str, columns: "_Columns", required: tuple[str, ...]) -> bool:
        """A column every row needs is missing: each row goes to quarantine, as a row that cannot
        be read goes, and the table is empty."""
        missing = next((c for c in required if c not in columns.names), None)
        if missing is None:
            return False
        what, out = _ROW_OF[name]
        for r in columns.table.dicts():
            self.quarantine(name, r.get("rowid"), r.get("id"), f"unreadable {what} row: {KeyError(missing)}", r)
        self.findings.diverted[out] += columns.n
        self.out[out] = assemble(BY_NAME[out], 0, {})
        return True

    def lineage_columns(self, name: str, columns: "_Columns") -> dict:
        return {**self.constant_lineage(), "source_table": name,
                "source_rowid": pa.array(columns.get("rowid"), pa.int64())}

    def sessions(self):
        columns = self.columns_of("sessions")
        self.summary_ids = {v for v in columns.get("summary_message_id") if v}
        if self.unreadable("sessions", columns, ("id",)):
            return
        ids = [_text(v) for v in columns.get("id")]
        parent = [_text(p) or None for p in columns.get("parent_session_id")]
        parents = dict(zip(ids, parent))  # as text: an id stored as a number still finds its parent
        costs = [_cost(v) for v in columns.get("cost")]
        bad_costs = sum(source == "unknown" and v is not None for (_, source), v in zip(costs, columns.get("cost")))
        if bad_costs:
            self.findings.notes.append(f"{bad_costs} session costs that are not a number: cost unknown")
        counter = self.findings.non_second_timestamps
        created = epochs(columns.get("created_at"), counter)  # read before updated_at, as rows were
        self.out["sessions"] = assemble(BY_NAME["sessions"], columns.n, {
            **self.lineage_columns("sessions", columns),
            "session_id": pa.array(ids, pa.string()),
            "parent_session_id": pa.array(parent, pa.string()),
            # a gone parent is named as stored
            "root_session_id": pa.array([_root_of(sid, parents) for sid in ids], pa.string()),
            "is_root": pa.array([p is None for p in parent], pa.bool_()),
            "title": strings(columns.get("title"), _text),
            "created_at": created,
            "updated_at": epochs(columns.get("updated_at"), counter),
            "cost_usd": pa.array([cost for cost, _ in costs], pa.float64()),
            "cost_source": pa.array([source for _, source in costs], pa.string()),
            "cost_includes_subagents": True,
            **{column: typed(columns.get(source), int, pa.int64(), _int) for column, source in (
                ("message_count", "message_count"), ("last_step_prompt_tokens", "prompt_tokens"),
                ("last_step_completion_tokens", "completion_tokens"))},
            "summary_message_id": strings(columns.get("summary_message_id"), _text),
            "todos": strings(columns.get("todos"), _text),
            "extra_columns": columns.extra_json(),
        })

    def messages(self):
        """messages, parts and tool_calls: one pass over the messages in session order, each
        message's values appended to its columns, its parts to theirs (PartColumns)."""
        extra = self.extra_cols("messages")
        table = self.tables.get("messages") or RawTable(list(KNOWN_COLUMNS["messages"]), [])
        names = ["rowid", *table.columns]
        at = {c: i for i, c in enumerate(names)}

        def get(name):
            i = at.get(name)
            return (lambda r: r[i]) if i is not None else (lambda r: None)

        g_id, g_session, g_created, g_parts = get("id"), get("session_id"), get("created_at"), get("parts")
        # order within a session: created_at has one-second resolution, rowid breaks ties
        rows = sorted(table.rows, key=lambda r: (str(g_session(r)), _float(g_created(r)) or 0.0, r[0]))
        missing = next((c for c in ("id", "session_id") if c not in at), None)
        if missing:  # every row is unreadable: kept in quarantine, as any unreadable row
            for r in rows:
                self.message_failed(r, names, KeyError(missing), read_times=False)
            rows = []
        index = Counter()
        batch = _Batch()
        messages, parts = [], []
        for r in rows:
            mid, sid = _text(g_id(r)), _text(g_session(r))
            try:
                found = parse_parts(g_parts(r))
                raws = [_raw(part) for part in found]
            except PartsError as exc:
                found, error = None, str(exc)
            except Exception as exc:  # one bad row never sinks the source
                self.message_failed(r, names, exc, read_times=True)
                continue
            position = len(batch.rows)
            batch.rows.append(r)
            batch.ids.append(mid)
            batch.sessions.append(sid)
            batch.indices.append(index[sid])
            index[sid] += 1
            if found is None:
                batch.counts.append(None)
                self.quarantine("messages", r[0], mid, error, _text(g_parts(r)), from_epoch(g_created(r)))
                continue
            batch.counts.append(len(found))
            batch.parts.add(position, found, raws)
            if len(batch.parts) >= BATCH_PARTS:
                self.message_batch(batch, names, extra, messages, parts)
                batch = _Batch()
        self.message_batch(batch, names, extra, messages, parts)
        self.out["messages"] = pa.concat_tables(messages)
        self.out["parts"] = pa.concat_tables(parts)
        self.out["tool_calls"] = tool_calls(self.out["parts"], self.constant_lineage())

    def message_failed(self, r: tuple, names: list[str], exc: Exception, read_times: bool):
        row = dict(zip(names, r))
        for name in ("created_at", "updated_at", "finished_at") if read_times else ():
            self.ts(row.get(name))  # read (and counted) before it failed, as any message's
        self.quarantine("messages", row.get("rowid"), row.get("id"), f"unreadable message row: {exc}", row)
        self.findings.diverted["messages"] += 1

    def is_summary(self, flags: list, ids: pa.Array) -> pa.Array:
        """`is_summary_message` set, or named by its session as the summary (sessions read first)."""
        flags = typed(flags, int, pa.int64(), _int)
        flagged = pc.fill_null(pc.not_equal(flags, 0), False)
        named = pa.array([v for v in self.summary_ids if isinstance(v, str)], pa.string())
        return pc.or_(flagged, pc.fill_null(pc.is_in(ids, value_set=named), False))

    def message_batch(self, batch: "_Batch", names: list[str], extra: list[str], messages: list, parts: list):
        """A batch of messages and their parts as Arrow tables, appended to `messages` and `parts`."""
        counter = self.findings.non_second_timestamps
        kept = batch.rows
        # the source's own columns, transposed at once: only the computed ones were built row by row
        source = dict(zip(names, zip(*kept))) if kept else {}

        def column(name):
            return source.get(name) or [None] * len(kept)

        message_ids = strings(batch.ids, _text)
        columns = {
            "source_rowid": pa.array(column("rowid"), pa.int64()),
            "message_id": message_ids,
            "session_id": strings(batch.sessions, _text),
            "message_index": pa.array(batch.indices, pa.int64()),
            "role": strings(column("role"), _text),
            "model": empty_as_null(strings(column("model"), _text)),
            "llm_provider": empty_as_null(strings(column("provider"), _text)),
            **{name: epochs(column(name), counter) for name in ("created_at", "updated_at", "finished_at")},
            "is_summary": self.is_summary(column("is_summary_message"), message_ids),
            "part_count": pa.array(batch.counts, pa.int64()),
            "parts_ok": pa.array([count is not None for count in batch.counts], pa.bool_()),
            "extra_columns": pa.array([_extra(dict(zip(names, r)), extra) for r in kept], pa.string())
            if extra else None,
        }
        lineage = {**self.constant_lineage(), "source_table": "messages"}
        messages.append(assemble(BY_NAME["messages"], len(kept), {**lineage, **columns}))
        owner = pa.array(batch.parts.message, pa.int64())
        owned = {name: columns[name].take(owner)
                 for name in ("source_rowid", "message_id", "session_id", "role", "created_at")}
        parts.append(assemble(BY_NAME["parts"], len(batch.parts),
                              {**lineage, **owned, **batch.parts.columns(counter)}))
        self.findings.unknown_part_types.update(batch.parts.unknown_types())

    def files(self):
        columns = self.columns_of("files")
        if self.unreadable("files", columns, ("id", "session_id")):
            return
        contents = [_text(c) or "" for c in columns.get("content")]
        data = [c.encode("utf-8", "replace") for c in contents]
        counter = self.findings.non_second_timestamps
        self.out["file_versions"] = assemble(BY_NAME["file_versions"], columns.n, {
            **self.lineage_columns("files", columns),
            "file_id": strings(columns.get("id"), _text),
            "session_id": strings(columns.get("session_id"), _text),
            "path": pa.array([_resolve(self.ctx.project_path, _text(p)) for p in columns.get("path")], pa.string()),
            "version": typed(columns.get("version"), int, pa.int64(), _int),  # a pre-release db stored TEXT
            "content": pa.array(contents, pa.string()),
            "size_bytes": pa.array([len(d) for d in data], pa.int64()),
            "content_sha256": pa.array([hashlib.sha256(d).hexdigest() for d in data], pa.string()),
            "created_at": epochs(columns.get("created_at"), counter),
            "updated_at": epochs(columns.get("updated_at"), counter),
            "extra_columns": columns.extra_json(),
        })

    def read_files(self):
        columns = self.columns_of("read_files")
        raw = [_text(p) for p in columns.get("path")]
        self.out["read_files"] = assemble(BY_NAME["read_files"], columns.n, {
            **self.lineage_columns("read_files", columns),
            "session_id": strings(columns.get("session_id"), _text),
            "path": pa.array([_resolve(self.ctx.project_path, p) for p in raw], pa.string()),
            "path_raw": pa.array(raw, pa.string()),
            "read_at": epochs(columns.get("read_at"), self.findings.non_second_timestamps),
        })

    def run(self) -> dict[str, pa.Table]:
        self.sessions()
        self.messages()
        self.files()
        self.read_files()
        self.out["quarantine"] = pa.Table.from_pylist(self.quarantined, schema=BY_NAME["quarantine"].schema)
        return {name: self.out[name] for name in _OUT}


def _root_of(sid, parents: dict) -> str:
    seen = {sid}
    current = sid
    while True:
        parent = parents.get(current)
        if not parent or parent in seen:
            return current
        if parent not in parents:  # the parent row is gone: the chain stops at it
            return parent
        seen.add(parent)
        current = parent


def normalise_tables(tables: dict[str, RawTable], ctx: SourceContext) -> tuple[dict[str, pa.Table], Findings]:
    """All canonical tables of one Crush store, plus the findings to report."""
    n = _Normaliser(tables, ctx)
    out = n.run()
    return out, n.findings


def normalise(tables: dict[str, RawTable], ctx: SourceContext) -> tuple[dict[str, list[dict]], Findings]:
    """The same, as rows (dicts): for reading a few rows in tests, not for ingesting."""
    out, findings = normalise_tables(tables, ctx)
    return {name: data.to_pylist() for name, data in out.items()}, findings
