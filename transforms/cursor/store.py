"""Read one `.cursor` home into plain records: every transcript (text or JSONL) and the
`conversation_summaries` rows of `ai-tracking/ai-code-tracking.db`, through a snapshot (the
database is never written). Formats as the peers read them (see discover.py): Cursor is closed
source.

Text transcripts (codeburn, agentsview): a line `user:` (codeburn also takes text after it) or
`assistant:` / `A:` opens a message; the user's words are inside `<user_query>` tags; in an
assistant message `[Thinking] ...`, `[Tool call] <name>` and `[Tool result] ...` open blocks
whose body is the indented (or blank) lines after them. JSONL transcripts: one
`{"role": ..., "message": {"content": <string or Anthropic blocks>}}` per line.
"""

import re
import sqlite3
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from transforms import jsontext
from transforms.cursor.discover import SUMMARY_DB, transcript_dirs, transcript_files
from transforms.snapshot import SnapshotError, decode_text, open_snapshot, take_snapshot

USER_LINE = re.compile(r"^\s*user:\s*(.*)$", re.IGNORECASE)
ASSISTANT_LINE = re.compile(r"^\s*(?:assistant|A):\s*(.*)$")
BLOCK = re.compile(r"^\s*\[(Thinking|Tool call|Tool result)\]\s?(.*)$")


@dataclass
class Message:
    role: str
    line: int  # 0-based line of the message in its file
    blocks: list  # content blocks: Anthropic-style dicts (JSONL) or the text format's, as dicts
    raw: str


@dataclass
class Transcript:
    path: Path
    session_id: str
    parent_id: str | None
    project_id: str | None
    kind: str  # "jsonl" or "txt"
    mtime_ns: int
    messages: list[Message] = field(default_factory=list)
    bad_lines: list[tuple[int, str, str]] = field(default_factory=list)  # (line, error, text)


@dataclass
class Store:
    transcripts: list[Transcript] = field(default_factory=list)
    summaries: dict[str, dict] = field(default_factory=dict)  # conversationId -> row
    notes: list[str] = field(default_factory=list)


def parse_jsonl(text: str, t: Transcript) -> None:
    for no, line, obj, error in jsontext.json_lines(text):
        if error:
            t.bad_lines.append((no, error, line))
            continue
        role = obj.get("role") if isinstance(obj, dict) else None
        message = obj.get("message") if isinstance(obj, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(role, str) or content is None:
            t.bad_lines.append((no, "not a transcript line (role and message.content)", line))
            continue
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        t.messages.append(Message(role, no, blocks if isinstance(blocks, list) else [blocks], line))


def _body_ends(line: str) -> bool:
    """agentsview's rule: a block body is its indented or blank lines."""
    return bool(line.strip()) and not line[:1].isspace()


def parse_txt(text: str, t: Transcript) -> None:
    lines = text.split("\n")
    current: Message | None = None
    block: dict | None = None
    for no, line in enumerate(lines):
        user, assistant = USER_LINE.match(line), ASSISTANT_LINE.match(line)
        if user or assistant:
            current = Message("user" if user else "assistant", no, [], "")
            t.messages.append(current)
            block = {"type": "text", "text": (user or assistant).group(1)}
            current.blocks.append(block)
            continue
        if current is None:
            if line.strip():
                t.bad_lines.append((no, "text before the first `user:` line", line))
            continue
        marker = BLOCK.match(line) if current.role == "assistant" else None
        if marker:
            block = {"type": f"[{marker.group(1)}]", "head": marker.group(2).strip(), "body": []}
            current.blocks.append(block)
        elif block is not None and block["type"] != "text" and not _body_ends(line):
            block["body"].append(line)
        else:
            if block is None or block["type"] != "text":
                block = {"type": "text", "text": ""}
                current.blocks.append(block)
            block["text"] = f"{block['text']}\n{line}" if block["text"] else line
    ends = [m.line for m in t.messages[1:]] + [len(lines)]
    for m, end in zip(t.messages, ends):
        m.blocks = [b for b in m.blocks if b["type"] != "text" or b["text"].strip()]
        m.raw = "\n".join(lines[m.line:end])


def read_summaries(home: Path, workdir: Path, store: Store) -> None:
    db = home / SUMMARY_DB
    if not db.is_file():
        return
    snap = Path(workdir) / "cursor-ai-tracking.snapshot"
    try:
        take_snapshot(str(db), snap)
        conn, _ = open_snapshot(snap, ("conversation_summaries",), "a Cursor ai-code-tracking")
        with closing(conn):
            cur = conn.execute("SELECT * FROM conversation_summaries")
            names = [d[0] for d in cur.description]
            for row in cur:
                data = dict(zip(names, row))
                if data.get("conversationId"):
                    store.summaries[str(data["conversationId"])] = data
    except (SnapshotError, sqlite3.DatabaseError) as exc:  # the transcripts are still read
        store.notes.append(f"{db} skipped: {exc}")
    finally:
        snap.unlink(missing_ok=True)


def read_store(home: Path, workdir: Path) -> Store:
    store = Store()
    read_summaries(home, workdir, store)
    for project_id, folder in transcript_dirs(home):
        files = transcript_files(folder)
        jsonl = {(p.parent, p.stem) for p, _ in files if p.suffix == ".jsonl"}
        for path, parent in files:
            if path.suffix == ".txt" and (path.parent, path.stem) in jsonl:
                store.notes.append(f"{path.name}: a text copy of {path.stem}.jsonl, not counted again")
                continue
            try:
                data = path.read_bytes()
                mtime = path.stat().st_mtime_ns
            except OSError as exc:
                store.notes.append(f"cannot read {path}: {exc}")
                continue
            t = Transcript(path, path.stem, parent, project_id, path.suffix[1:], mtime)
            (parse_jsonl if t.kind == "jsonl" else parse_txt)(decode_text(data), t)
            store.transcripts.append(t)
    return store
