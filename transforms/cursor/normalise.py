"""Cursor agent records (transforms.cursor.store) -> canonical rows. Pure but for the directory
checks that decode a project id and the git config read that names a project.

Cursor's CLI agent is CLOSED SOURCE: no public repository holds the writer of its transcripts.
Everything here is learnt from the peers that read them, codeburn (`src/providers/cursor-agent.ts`)
and agentsview (`internal/parser/cursor.go`); ccusage and tokscale do not read these files
(tokscale's Cursor support downloads the usage CSV from Cursor's API, which is not local data).

The traps:
- **No tokens, no cost.** The transcripts record neither, nor does the summaries database. codeburn
  invents tokens from the character count (4 chars a token) and prices them at Sonnet 4.5;
  agentlake does not guess: there are no `usage` rows and a session's cost is `unknown` (NULL),
  or a known 0 when the session has no assistant message (no request was made).
- **Two formats, and copies.** Older transcripts are plain text (`user:`/`A:` markers, `[Thinking]`,
  `[Tool call]`, `[Tool result]` blocks), newer ones JSONL (Anthropic-style content blocks). A
  conversation dir may hold both `<id>.jsonl` and `<id>.txt`: the JSONL counts, the text copy is
  noted and skipped (codeburn's rule).
- **Sub-agents.** `<id>/subagents/*.jsonl` are child sessions of `<id>` (`is_root` false).
- **Times.** Transcripts carry none: a session's time is its `conversation_summaries.updatedAt`
  (epoch ms or ISO), else the file's mtime; every message gets it.
- **Projects.** The project dir name encodes the workspace path with `/` and `.` turned into `-`
  (lossy): it is decoded against the directories that exist, else read as `/`-separated.
- **User text.** What the user typed is inside `<user_query>` tags; the rest of a user message is
  context Cursor added: `text` holds the query, `raw` the whole block.
- **Pruned history.** Cursor may delete transcripts; the lake keeps what it read (retention).
"""

import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from transforms.cursor.store import Store, Transcript
from transforms.cursor.tools import TOOLS
from transforms.findings import Findings
from transforms.jsontext import str_or_none as _str
from transforms.projects import project_name
from transforms.timestamps import from_epoch, from_iso
from transforms.tools import compact_json, decode_input

PROVIDER = "cursor"
PART_TYPES = {"text": "text", "thinking": "reasoning", "redacted_thinking": "reasoning", "tool_use": "tool_call",
              "tool_result": "tool_result", "image": "binary",
              "[Thinking]": "reasoning", "[Tool call]": "tool_call", "[Tool result]": "tool_result"}
QUERY = re.compile(r"<user_query>(.*?)(?:</user_query>|$)", re.DOTALL)


@dataclass
class Context:
    source_id: str
    home: str
    run_at: datetime
    project_names: dict


def decode_project(project_id: str | None) -> str | None:
    """`home-dev-my-app` -> `/home/dev/my-app` when that dir exists (each `-` may have been a
    `/`, a `-` or a `.`), else the `/`-separated guess; None for a workspace-less chat."""
    if not project_id or project_id.isdigit():
        return None
    # an empty piece is a name that started with `.` (`/.local` -> `--local`)
    parts = project_id.strip("-").split("-")
    if len(parts) > 1 and len(parts[0]) == 1 and parts[1] == "Users":  # Windows: C-Users-...
        root, parts = Path(f"{parts[0]}:/"), parts[1:]
    else:
        root = Path("/")
    found = _existing_dir(root, "-".join(parts))
    if found is not None:
        return str(found)
    guess = "/".join(parts).replace("//", "/.")  # the `/`-separated guess, dot-directories kept
    return str(root / guess)


def _existing_dir(base: Path, rest: str) -> Path | None:
    """The directory under `base` whose path, encoded as Cursor encodes it, is `rest`. Each
    level's entries are listed and matched as a prefix (a deep workspace, 27 pieces under a
    test's temporary folder, was past a guess-and-check search's bounds and read as its last piece)."""
    if not rest:
        return base
    try:
        names = sorted(entry.name for entry in os.scandir(base) if entry.is_dir())
    except OSError:
        return None
    for name in names:
        encoded = name.replace(".", "-")
        if rest == encoded or rest.startswith(encoded + "-"):
            found = _existing_dir(base / name, rest[len(encoded) + 1:])
            if found is not None:
                return found
    return None


def session_time(summary: dict | None, mtime_ns: int) -> datetime | None:
    value = (summary or {}).get("updatedAt")
    return (from_iso(value) if isinstance(value, str) and not value.isdigit() else from_epoch(
        int(value) if isinstance(value, str) else value)) or from_epoch(mtime_ns)


def block_columns(kind: str | None, block: dict, role: str) -> dict:
    if kind == "text":
        text = _str(block.get("text"))
        query = QUERY.findall(text) if role == "user" and text else []
        return {"text": "\n".join(q.strip() for q in query) if query else text}
    if kind in ("thinking", "redacted_thinking"):
        return {"reasoning": _str(block.get("thinking"))}
    if kind == "[Thinking]":
        return {"reasoning": "\n".join([block["head"], *[line.strip() for line in block["body"]]]).strip()}
    if kind == "tool_use":
        args = block.get("input")
        return {"tool_call_id": _str(block.get("id")), "tool_name": _str(block.get("name")),
                "tool_input": compact_json(args) if args is not None else None}
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            content = "\n".join(c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text")
        flag = block.get("is_error")
        return {"tool_call_id": _str(block.get("tool_use_id")), "tool_result": _str(content),
                "is_error": flag if isinstance(flag, bool) else None}
    if kind == "[Tool call]":
        body = "\n".join(line.strip() for line in block["body"]).strip()
        return {"tool_name": block["head"] or None, "tool_input": body or None}
    if kind == "[Tool result]":
        return {"tool_result": "\n".join(line.strip() for line in block["body"]).strip() or block["head"] or None}
    if kind == "image":
        source = block.get("source")
        return {"mime_type": _str(source.get("media_type")) if isinstance(source, dict) else None}
    return {}


class _Normaliser:
    def __init__(self, store: Store, ctx: Context):
        self.store, self.ctx = store, ctx
        self.findings = Findings(notes=list(store.notes))
        self.out = {t: [] for t in ("sessions", "messages", "parts", "tool_calls", "usage", "quarantine")}
        self.places: dict[str | None, tuple[str, str | None]] = {}

    def place(self, project_id: str | None) -> tuple[str, str | None]:
        if project_id not in self.places:
            path = decode_project(project_id)
            self.places[project_id] = (path, project_name(path, self.ctx.project_names)) if path else (
                self.ctx.home, None)
        return self.places[project_id]

    def lineage(self, t: Transcript, line: int) -> dict:
        path, project = self.place(t.project_id)
        row = {"provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": path,
               "source_table": t.path.name, "source_rowid": line}
        if project:
            row["project"] = project
        return row

    def run(self):
        for t in self.store.transcripts:
            self.transcript(t)
        return self.out, self.findings

    def transcript(self, t: Transcript) -> None:
        summary = self.store.summaries.get(t.session_id)
        when = session_time(summary, t.mtime_ns)
        calls: dict[str, dict] = {}
        last_call: dict | None = None
        for index, m in enumerate(t.messages):
            mid = f"{t.session_id}:{m.line + 1}"
            row = self.lineage(t, m.line)
            row.update(message_id=mid, session_id=t.session_id, message_index=index, role=m.role,
                       model=None, llm_provider=None, created_at=when, updated_at=when, finished_at=None,
                       is_summary=False, part_count=len(m.blocks), parts_ok=True, extra_columns=None)
            self.out["messages"].append(row)
            for i, block in enumerate(m.blocks):
                block = block if isinstance(block, dict) else {"type": None, "value": block}
                kind = _str(block.get("type"))
                if kind not in PART_TYPES:
                    self.findings.unknown_part_types[kind] += 1
                part = self.lineage(t, m.line)
                part.update(message_id=mid, session_id=t.session_id, part_index=i,
                            part_type=PART_TYPES.get(kind, "other"), native_part_type=kind,
                            is_known_type=kind in PART_TYPES, role=m.role, created_at=when,
                            raw=compact_json(block), **block_columns(kind, block, m.role))
                if kind == "[Tool call]":  # the text format has no call ids: the line names the call
                    part["tool_call_id"] = f"{t.session_id}:{m.line + 1}:{i}"
                if kind == "[Tool result]" and last_call is not None:  # the result follows its call
                    part.update(tool_call_id=last_call["tool_call_id"], tool_name=last_call["tool_name"])
                self.out["parts"].append(part)
                if part["part_type"] == "tool_call":
                    calls[part["tool_call_id"] or f"{mid}:{i}"] = self.call_row(part)
                    last_call = part
                elif part["part_type"] == "tool_result":
                    self.result(calls, part)
                    last_call = None
        for bad_line, error, text in t.bad_lines:
            q = self.lineage(t, bad_line)
            q.update(key=f"{t.path.name}:{bad_line + 1}", error=error, raw=text, created_at=when or self.ctx.run_at)
            self.out["quarantine"].append(q)
        assistant = any(m.role == "assistant" for m in t.messages)
        row = self.lineage(t, 0)
        row.update(session_id=t.session_id, parent_session_id=t.parent_id, root_session_id=t.parent_id or t.session_id,
                   is_root=t.parent_id is None, title=_str((summary or {}).get("title")), created_at=when,
                   updated_at=when, cost_usd=None if assistant else 0.0,
                   cost_source="unknown" if assistant else "estimated", cost_includes_subagents=False,
                   model=_str((summary or {}).get("model")), llm_provider=None, total_tokens=None,
                   message_count=len(t.messages),
                   extra_columns=compact_json({k: v for k, v in summary.items()
                                               if k not in ("conversationId", "title", "model", "updatedAt")})
                   if summary else None)
        self.out["sessions"].append(row)

    def call_row(self, part: dict) -> dict:
        args = decode_input(part.get("tool_input"))
        name = part.get("tool_name")
        row = {k: part[k] for k in ("provider", "source_id", "project_path", "source_table", "source_rowid")}
        if "project" in part:
            row["project"] = part["project"]
        row.update(session_id=part["session_id"], message_id=part["message_id"], result_message_id=None,
                   tool_call_id=part.get("tool_call_id"), tool_name=name, tool_category=TOOLS.category(name),
                   input=compact_json(args) if args is not None else None, input_raw=part.get("tool_input"),
                   is_input_valid=args is not None,
                   command=TOOLS.command(name, args),
                   file_path=TOOLS.file_path(name, args), has_call=True, has_result=False, is_error=None,
                   exit_code=None, result_text=None, result_size=None, called_at=part["created_at"], result_at=None)
        self.out["tool_calls"].append(row)
        return row

    def result(self, calls: dict, part: dict) -> None:
        call = calls.get(part.get("tool_call_id") or "")
        text = part.get("tool_result")
        if call is None:  # a result whose call is not in this transcript: kept, `has_call` false
            call = self.call_row({**part, "tool_input": None})
            call.update(message_id=None, has_call=False, is_input_valid=False)
        call.update(result_message_id=part["message_id"], has_result=True, is_error=part.get("is_error"),
                    result_text=text, result_size=len(text.encode("utf-8", "replace")) if text is not None else None,
                    result_at=part["created_at"])


def normalise(store: Store, ctx: Context) -> tuple[dict[str, list[dict]], Findings]:
    return _Normaliser(store, ctx).run()


def expected_counts(store: Store) -> dict[str, int]:
    messages = [m for t in store.transcripts for m in t.messages]
    return {"sessions": len(store.transcripts), "messages": len(messages),
            "parts": sum(len(m.blocks) for m in messages)}
