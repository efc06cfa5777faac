"""Crush snapshot rows -> canonical rows. Pure: no I/O, no Dagster.

This is where Crush's traps are handled:
- a root session's `cost` already includes its sub-agents' cost (kept, and flagged);
- `prompt_tokens`/`completion_tokens` are the last step's sizes (renamed to say so);
- a `cost` that is not a number (text in the REAL column) is `unknown`, counted in a warning;
- timestamps are seconds, but milliseconds are detected by magnitude and counted;
- `tool_call.input` and `tool_result.metadata` are JSON text inside the parts JSON.
"""

import base64
import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from transforms.findings import Findings
from transforms.crush.parts import PartsError, parse_parts, part_columns
from transforms.timestamps import from_epoch
from transforms.crush.tools import bash_exit_code, split_cwd, tool_category
from transforms.tools import compact_json, decode_input

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


def _text(value) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _resolve(project_path: str, path: str | None) -> str | None:
    if not path:
        return path
    if os.path.isabs(path) or not project_path:
        return os.path.normpath(path)
    return os.path.normpath(os.path.join(project_path, path))


class _Normaliser:
    def __init__(self, tables: dict[str, RawTable], ctx: SourceContext):
        self.tables = tables
        self.ctx = ctx
        self.findings = Findings()
        self._ts_cache: dict = {}
        self._ts_units: dict = {}
        self.out = {name: [] for name in ("sessions", "messages", "parts", "tool_calls", "file_versions", "read_files", "quarantine")}

    # -- shared helpers -------------------------------------------------------------------
    def lineage(self, table: str, rowid) -> dict:
        return {
            "provider": PROVIDER,
            "source_id": self.ctx.source_id,
            "project_path": self.ctx.project_path,
            "source_table": table,
            "source_rowid": rowid,
        }

    def ts(self, value):
        # the same few timestamps recur on every message and part: convert each once
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
        self.out["quarantine"].append(row)

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
                    root_session_id=_root_of(sid, parents),
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
            self.out["sessions"].append(row)
            if cost_source == "unknown" and r.get("cost") is not None:
                bad_costs += 1
        if bad_costs:
            self.findings.notes.append(f"{bad_costs} session costs that are not a number: cost unknown")

    def messages(self):
        extra = self.extra_cols("messages")
        raw_rows = list(self.rows("messages"))
        # order within a session: created_at has one-second resolution, rowid breaks ties
        raw_rows.sort(key=lambda r: (str(r.get("session_id")), _float(r.get("created_at")) or 0.0, r["rowid"]))
        index = Counter()
        self.calls = []
        self.open_calls = {}
        for r in raw_rows:
            try:
                self.message(r, extra, index)
            except Exception as exc:
                self.quarantine("messages", r.get("rowid"), r.get("id"), f"unreadable message row: {exc}", r)
                self.findings.diverted["messages"] += 1

    def message(self, r: dict, extra: list[str], index: Counter):
        mid, sid = _text(r["id"]), _text(r["session_id"])
        created = self.ts(r.get("created_at"))
        role = _text(r.get("role"))
        row = self.lineage("messages", r["rowid"])
        row.update(
            message_id=mid,
            session_id=sid,
            message_index=index[sid],
            role=role,
            model=_text(r.get("model")) or None,
            llm_provider=_text(r.get("provider")) or None,
            created_at=created,
            updated_at=self.ts(r.get("updated_at")),
            finished_at=self.ts(r.get("finished_at")),
            is_summary=bool(_int(r.get("is_summary_message"))) or mid in self.summary_ids,
            extra_columns=_extra(r, extra),
        )
        try:
            parts = parse_parts(r.get("parts"))
        except PartsError as exc:
            index[sid] += 1
            row.update(part_count=None, parts_ok=False)
            self.out["messages"].append(row)
            self.quarantine("messages", r["rowid"], mid, str(exc), _text(r.get("parts")), created)
            return
        # build every part before keeping anything, so a failure leaves no half message behind
        part_rows = []
        for i, part in enumerate(parts):
            prow = self.lineage("messages", r["rowid"])
            prow.update(message_id=mid, session_id=sid, part_index=i, role=role, created_at=created)
            prow.update(part_columns(part, self.findings.non_second_timestamps))
            prow["raw"] = compact_json(part)
            part_rows.append(prow)
        index[sid] += 1
        row.update(part_count=len(parts), parts_ok=True)
        self.out["messages"].append(row)
        self.out["parts"].extend(part_rows)
        for prow in part_rows:
            if not prow["is_known_type"]:
                self.findings.unknown_part_types[prow["native_part_type"]] += 1
            elif prow["part_type"] == "tool_call":
                self.add_call(prow, r["rowid"])
            elif prow["part_type"] == "tool_result":
                self.add_result(prow, r["rowid"])

    def add_call(self, part: dict, rowid):
        name = part.get("tool_name")
        decoded = decode_input(part.get("tool_input"))
        row = self.lineage("messages", rowid)
        row.update(
            session_id=part["session_id"],
            message_id=part["message_id"],
            result_message_id=None,
            tool_call_id=part.get("tool_call_id"),
            tool_name=name,
            tool_category=tool_category(name),
            input=compact_json(decoded) if decoded is not None else None,
            input_raw=part.get("tool_input"),
            is_input_valid=decoded is not None,
            command=_text(decoded.get("command")) if decoded and name == "bash" else None,
            file_path=_text(decoded.get("file_path")) if decoded else None,
            has_call=True,
            has_result=False,
            called_at=part["created_at"],
        )
        self.calls.append(row)
        self.open_calls.setdefault((row["session_id"], row["tool_call_id"]), []).append(row)

    def add_result(self, part: dict, rowid):
        waiting = self.open_calls.get((part["session_id"], part.get("tool_call_id")))
        if waiting:
            row = waiting.pop(0)
        else:  # a result whose call is missing: keep it, flagged
            name = part.get("tool_name")
            row = self.lineage("messages", rowid)
            row.update(
                session_id=part["session_id"], message_id=None, tool_call_id=part.get("tool_call_id"),
                tool_name=name, tool_category=tool_category(name), has_call=False,
                called_at=part["created_at"],
            )
            self.calls.append(row)
        content = part.get("tool_result") or ""
        text, cwd = split_cwd(content)
        is_error = part.get("is_error")
        row.update(
            result_message_id=part["message_id"],
            has_result=True,
            is_error=is_error,
            exit_code=bash_exit_code(text, is_error) if row.get("tool_name") == "bash" else None,
            result_text=text,
            result_cwd=cwd,
            result_size=len(text.encode("utf-8", "replace")),
            result_at=part["created_at"],
        )

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
            self.out["file_versions"].append(row)

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
            self.out["read_files"].append(row)

    def run(self) -> dict[str, list[dict]]:
        self.sessions()
        self.messages()
        self.out["tool_calls"] = self.calls
        self.files()
        self.read_files()
        return self.out


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


def normalise(tables: dict[str, RawTable], ctx: SourceContext) -> tuple[dict[str, list[dict]], Findings]:
    """All canonical rows of one Crush store, plus the findings to report."""
    n = _Normaliser(tables, ctx)
    out = n.run()
    return out, n.findings
