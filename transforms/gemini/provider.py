"""Gemini CLI behind the provider interface. A source is one main session: every copy of its
chat file and its sub-agents' chats (transforms.gemini.discover); each session id is one
`sessions` row, a sub-agent's under its root.

Files are read whole: a `.jsonl` is only appended to (one read is a consistent prefix), a
`.json` is rewritten whole. A file that is no chat recording is quarantined whole; a line that
cannot be read is quarantined alone and the rest of the file is read.
"""

from datetime import datetime
from pathlib import Path

from transforms.contract import TRANSCRIPT_TABLES
from transforms.costs import summarise_costs
from transforms.findings import Findings, bad_line
from transforms.gemini import discover as gemini_discover
from transforms.gemini.discover import PROVIDER
from transforms.gemini.normalise import (
    LLM_PROVIDER, META_KEYS, Chat, ChatFileError, Context, Session, expected_parts, merge, parse_chat,
)
from transforms.provider import AgentProvider, Extract, read_file
from transforms.sources import Source, members
from transforms.timestamps import from_iso
from transforms.tools import compact_json


class GeminiProvider(AgentProvider):
    name = PROVIDER
    discovery = gemini_discover

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        findings = Findings()
        rows: dict[str, list[dict]] = {t: [] for t in TRANSCRIPT_TABLES}
        chats = [c for c in (_read(p, source, run_at, rows["quarantine"]) for p in members(source)) if c]
        groups: dict[str, list[Chat]] = {}
        for chat in chats:
            groups.setdefault(chat.session_id, []).append(chat)
        merged = {sid: merge(copies) for sid, copies in groups.items()}
        root_id = source.identity if source.identity in merged else next(iter(merged), None)
        sessions = {}
        for sid, chat in merged.items():
            if chat.copies:
                findings.notes.append(f"{sid}: {chat.copies} repeated copies of messages read once (the last wins)")
            ctx = Context(source.source_id, source.project_path, sid, is_sidechain=sid != root_id)
            sessions[sid] = Session(chat, ctx, findings).run()
            for table, table_rows in sessions[sid].rows.items():
                rows[table].extend(table_rows)
        rows["sessions"] = [_session_row(sid, merged[sid], sessions, root_id, source) for sid in merged]
        expected = {"sessions": len(merged),
                    "parts": sum(expected_parts(r) for c in merged.values() for r, _ in c.records.values())}
        return Extract(rows=rows, findings=findings, expected=expected)


def _read(path: str, source: Source, run_at: datetime, quarantine: list[dict]) -> Chat | None:
    text = read_file(path).decode("utf-8", "replace")
    try:
        chat = parse_chat(path, text)
    except ChatFileError as exc:
        quarantine.append(_quarantine(source, path, 0, f"malformed chat file: {exc}", text, run_at))
        return None
    for no, raw, reason in chat.bad:
        quarantine.append(_quarantine(source, path, no, reason, raw, run_at))
    return chat


def _quarantine(source: Source, path: str, no: int, error: str, raw: str, run_at: datetime) -> dict:
    return bad_line(PROVIDER, source, "chat", path, no, error, raw, run_at)


def _session_row(sid: str, chat: Chat, sessions: dict[str, Session], root_id, source: Source) -> dict:
    s = sessions[sid]
    is_root = sid == root_id
    costs = [c for other in sessions.values() for c in other.costs] if is_root else s.costs
    cost, cost_source = summarise_costs(costs)
    totals = [u["total_tokens"] for u in s.rows["usage"] if u["total_tokens"] is not None]
    times = [m["created_at"] for m in s.rows["messages"] if m["created_at"] is not None]
    extra = {k: v for k, v in chat.meta.items() if k not in META_KEYS}
    return {
        "provider": PROVIDER, "source_id": source.source_id, "project_path": source.project_path,
        "source_table": "metadata", "source_rowid": 0, "session_id": sid,
        "parent_session_id": None if is_root else _parent(chat, root_id), "root_session_id": root_id,
        "is_root": is_root, "title": chat.meta.get("summary") if isinstance(chat.meta.get("summary"), str) else None,
        "created_at": from_iso(chat.meta.get("startTime")) or (min(times) if times else None),
        "updated_at": from_iso(chat.meta.get("lastUpdated")) or (max(times) if times else None),
        "cost_usd": cost, "cost_source": cost_source, "cost_includes_subagents": is_root,
        "model": s.model, "llm_provider": LLM_PROVIDER, "total_tokens": sum(totals) if totals else None,
        "message_count": len(chat.records), "extra_columns": compact_json(extra) if extra else None,
    }


def _parent(chat: Chat, root_id) -> str | None:
    folder = Path(chat.path).parent.name
    return folder if folder != "chats" else root_id

