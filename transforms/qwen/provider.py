"""Qwen Code behind the provider interface. A source is one root session file with its
sub-sessions' files (transforms.qwen.discover); each file is one session. Qwen only appends to
a chat file: one read of each file is a consistent prefix."""

from datetime import datetime
from pathlib import Path

from transforms.contract import TRANSCRIPT_TABLES
from transforms.costs import summarise_costs
from transforms.findings import Findings, bad_line
from transforms.provider import AgentProvider, Extract, read_file
from transforms.qwen import discover as qwen_discover
from transforms.qwen.discover import PROVIDER
from transforms.qwen.normalise import Chat, Context, Session, expected_parts, parse_chat
from transforms.sources import Source, members
from transforms.timestamps import from_iso
from transforms.tools import compact_json


class QwenProvider(AgentProvider):
    name = PROVIDER
    discovery = qwen_discover

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        findings = Findings()
        rows: dict[str, list[dict]] = {t: [] for t in TRANSCRIPT_TABLES}
        chats = {}
        for path in members(source):
            chat = _read(path, source, run_at, rows["quarantine"])
            sid = chat.session_id or Path(path).stem
            if sid in chats:
                findings.notes.append(f"{path}: a second file of session {sid}, not read")
            elif chat.records:
                chats[sid] = chat
        root_id = source.identity if source.identity in chats else next(iter(chats), None)
        sessions = {}
        for sid, chat in chats.items():
            sessions[sid] = Session(chat, Context(source.source_id, source.project_path, sid), findings).run()
            for table, table_rows in sessions[sid].rows.items():
                rows[table].extend(table_rows)
        rows["sessions"] = [_session_row(sid, chats[sid], sessions, root_id, source) for sid in chats]
        expected = {"sessions": len(chats), "parts": sum(expected_parts(c) for c in chats.values())}
        return Extract(rows=rows, findings=findings, expected=expected)


def _read(path: str, source: Source, run_at: datetime, quarantine: list[dict]) -> Chat:
    text = read_file(path).decode("utf-8", "replace")
    chat = parse_chat(path, text)
    for no, raw, reason in chat.bad:
        quarantine.append(bad_line(PROVIDER, source, "chat", path, no, reason, raw, run_at))
    return chat


def _session_row(sid: str, chat: Chat, sessions: dict[str, Session], root_id, source: Source) -> dict:
    s = sessions[sid]
    is_root = sid == root_id
    cost, cost_source = summarise_costs([c for o in sessions.values() for c in o.costs] if is_root else s.costs)
    totals = [u["total_tokens"] for u in s.rows["usage"] if u["total_tokens"] is not None]
    parent = chat.payload("parent_session", "parentSessionId")
    forked = chat.forked_from
    priced_inherited = [c for c in s.inherited if c is not None]
    first = chat.records[0].rec
    stamps = [at for at in (from_iso(r.rec.get("timestamp")) for r in chat.records) if at]
    extra = {k: first[k] for k in ("version", "gitBranch") if k in first}
    return {
        "provider": PROVIDER, "source_id": source.source_id,
        "project_path": source.project_path,
        "source_table": "chat", "source_rowid": chat.records[0].no, "session_id": sid,
        "parent_session_id": None if is_root else (parent or root_id), "root_session_id": root_id,
        "is_root": is_root, "title": chat.payload("custom_title", "customTitle"),
        "created_at": min(stamps, default=None),
        "updated_at": max(stamps, default=None),
        "cost_usd": cost, "cost_source": cost_source, "cost_includes_subagents": is_root,
        "forked_from_session_id": forked,
        "inherited_cost_usd": round(sum(priced_inherited), 9) if forked and priced_inherited else None,
        "model": s.model, "llm_provider": None, "total_tokens": sum(totals) if totals else None,
        "message_count": len(s.rows["messages"]), "extra_columns": compact_json(extra) if extra else None,
    }
