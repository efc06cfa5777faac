"""Crush snapshot rows -> canonical tables (Arrow). Pure: no I/O, no Dagster.

This is where Crush's traps are handled:
- a root session's `cost` already includes its sub-agents' cost (kept, and flagged);
- `prompt_tokens`/`completion_tokens` are the last step's sizes (renamed to say so);
- a `cost` that is not a number (text in the REAL column) is `unknown`, counted in a warning;
- timestamps are seconds, but milliseconds are detected by magnitude and counted;
- `tool_call.input` and `tool_result.metadata` are JSON text inside the parts JSON.

Messages, parts and tool calls (nearly all of a store) are built column by column, without a
dict per row (transforms.crush.parts, .columns, .tool_calls). Sessions, files and read_files
are few: they keep a dict per row, and become Arrow the same way the writer did it.
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


_OUT = ("sessions", "messages", "parts", "tool_calls", "file_versions", "read_files", "quarantine")


class _Normaliser:
    def __init__(self, tables: dict[str, RawTable], ctx: SourceContext):
        self.tables = tables
        self.ctx = ctx
        self.findings = Findings()
        self._ts_cache: dict = {}
        self._ts_units: dict = {}
        self.summary_ids: set = set()
        self.rows_out = {name: [] for name in ("sessions", "file_versions", "read_files", "quarantine")}
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
        self.rows_out["quarantine"].append(row)

    def rows(self, name: str):
        table = self.tables.get(name)
        return table.dicts() if table is not None else ()

    # -- tables ---------------------------------------------------------------------------
    def sessions(self):
        extra = self.extra_cols("sessions")
        raw_rows = list(self.rows("sessions"))
        bad_costs = 0
        parents = {r.get("id"): r.get("parent_session_id") for r in raw_rows}
        self.summary_ids = {r.get("summary_message_id") for r in raw_rows if r.get("summary_message_id")}
        for r in raw_rows:
            try:
                sid = _text(r["id"])
                created = self.ts(r.get("created_at"))
                parent = _text(r.get("parent_session_id")) or None
                cost_usd, cost_source = _cost(r.get("cost"))
                row = self.lineage("sessions", r["rowid"])
                row.update(
                    session_id=sid,
                    parent_session_id=parent,
                    root_session_id=_text(_root_of(sid, parents)),  # a gone parent is named as stored
                    is_root=parent is None,
                    title=_text(r.get("title")),
                    created_at=created,
                    updated_at=self.ts(r.get("updated_at")),
                    cost_usd=cost_usd,
                    cost_source=cost_source,
                    cost_includes_subagents=True,
                    message_count=_int(r.get("message_count")),
                    last_step_prompt_tokens=_int(r.get("prompt_tokens")),
                    last_step_completion_tokens=_int(r.get("completion_tokens")),
                    summary_message_id=_text(r.get("summary_message_id")),
                    todos=_text(r.get("todos")),
                    extra_columns=_extra(r, extra),
                )
            except Exception as exc:  # one bad row never sinks the source
                self.quarantine("sessions", r.get("rowid"), r.get("id"), f"unreadable session row: {exc}", r)
                self.findings.diverted["sessions"] += 1
                continue
            self.rows_out["sessions"].append(row)
            if cost_source == "unknown" and r.get("cost") is not None:
                bad_costs += 1
        if bad_costs:
            self.findings.notes.append(f"{bad_costs} session costs that are not a number: cost unknown")

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
        extra = self.extra_cols("files")
        for r in self.rows("files"):
            try:
                content = _text(r.get("content")) or ""
                data = content.encode("utf-8", "replace")
                row = self.lineage("files", r["rowid"])
                row.update(
                    file_id=_text(r["id"]),
                    session_id=_text(r["session_id"]),
                    path=_resolve(self.ctx.project_path, _text(r.get("path"))),
                    version=_int(r.get("version")),  # a pre-release db stored it as TEXT
                    content=content,
                    size_bytes=len(data),
                    content_sha256=hashlib.sha256(data).hexdigest(),
                    created_at=self.ts(r.get("created_at")),
                    updated_at=self.ts(r.get("updated_at")),
                    extra_columns=_extra(r, extra),
                )
            except Exception as exc:
                self.quarantine("files", r.get("rowid"), r.get("id"), f"unreadable file row: {exc}", r)
                self.findings.diverted["file_versions"] += 1
                continue
            self.rows_out["file_versions"].append(row)

    def read_files(self):
        self.extra_cols("read_files")
        for r in self.rows("read_files"):
            raw = _text(r.get("path"))
            row = self.lineage("read_files", r["rowid"])
            row.update(
                session_id=_text(r.get("session_id")),
                path=_resolve(self.ctx.project_path, raw),
                path_raw=raw,
                read_at=self.ts(r.get("read_at")),
            )
            self.rows_out["read_files"].append(row)

    def run(self) -> dict[str, pa.Table]:
        self.sessions()
        self.messages()
        self.files()
        self.read_files()
        for name, rows in self.rows_out.items():  # as the writer would have made them
            self.out[name] = pa.Table.from_pylist(rows, schema=BY_NAME[name].schema)
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
