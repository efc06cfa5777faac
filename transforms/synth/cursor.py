"""Seeded Cursor agent homes for the tests and the demo: `projects/<id>/agent-transcripts/` with
text transcripts and Composer-2 JSONL ones (sub-agents included), and the
`ai-tracking/ai-code-tracking.db` summaries, in the shapes the peers read (Cursor is closed
source: see transforms/cursor/discover.py). Stdlib only; it counts what it writes."""

import json
import os
import random
import sqlite3
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path


def encode_project(path: str) -> str:
    """Cursor's project dir name: the workspace path with `/` and `.` as `-`."""
    return path.strip("/").replace("/", "-").replace(".", "-")


def transcripts_dir(home, workspace: str | None) -> Path:
    folder = Path(home) / "projects" / (encode_project(workspace) if workspace else "") / "agent-transcripts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def text_transcript(turns: list[tuple[str, list]]) -> str:
    """The older plain text: `user:` then `<user_query>`; `A:` then lines and blocks
    (`("thinking", text)`, `("call", name, body lines)`, `("result", body lines)`, plain strings)."""
    out = []
    for query, answer in turns:
        out += ["user:", f"<user_query>\n{query}\n</user_query>", "", "A:"]
        for item in answer:
            if isinstance(item, str):
                out.append(item)
            elif item[0] == "thinking":
                out.append(f"[Thinking] {item[1]}")
            elif item[0] == "call":
                out += [f"[Tool call] {item[1]}", *[f"  {line}" for line in item[2]]]
            else:
                out += ["[Tool result]", *[f"  {line}" for line in item[1]]]
        out.append("")
    return "\n".join(out)


def jsonl_line(role: str, content) -> str:
    return json.dumps({"role": role, "message": {"content": content}})


def write_summaries(home, rows: list[dict]) -> None:
    db = Path(home) / "ai-tracking" / "ai-code-tracking.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS conversation_summaries (conversationId TEXT, title TEXT, tldr TEXT, "
                     "model TEXT, mode TEXT, updatedAt INTEGER)")
        conn.executemany("INSERT INTO conversation_summaries VALUES (:conversationId, :title, :tldr, :model, :mode, "
                         ":updatedAt)", [{"tldr": None, "mode": "agent", **r} for r in rows])
    conn.close()


@dataclass
class HomeTruth:
    sessions: int = 0
    messages: int = 0
    parts: int = 0
    tool_calls: int = 0
    subagents: int = 0


def generate_home(home, *, sessions=6, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 3, 2, 9, tzinfo=UTC)) -> HomeTruth:
    """A `.cursor` home at `home`: even sessions as JSONL (every third with a sub-agent), odd ones
    as text; every session has a summary row (model, title, time). The ids (uuids, as Cursor's)
    come from a stream of their own (`ids`), apart from `rng`, whose draws (and so a seed's
    figures) stay as they were: two demos of other seeds landed by two machines share no session
    (warehouse.catalog.checks.copied_sessions)."""
    rng = random.Random(seed)
    ids = random.Random(f"cursor ids {seed}")
    truth, summaries = HomeTruth(), []
    subagent = None
    for n in range(sessions):
        sid = str(uuid.UUID(int=ids.getrandbits(128), version=4))
        folder = transcripts_dir(home, workspaces[n % len(workspaces)])
        calls = rng.randint(1, 3)
        if n % 2 == 0:
            lines = [jsonl_line("user", [{"type": "text", "text": f"<user_query>\ntask {n}\n</user_query>"}])]
            for c in range(calls):
                cid = f"toolu_{n}_{c}"
                lines.append(jsonl_line("assistant", [{"type": "text", "text": "Running it."},
                                                      {"type": "tool_use", "id": cid, "name": "Shell",
                                                       "input": {"command": "npm test"}}]))
                lines.append(jsonl_line("user", [{"type": "tool_result", "tool_use_id": cid, "content": "ok"}]))
            lines.append(jsonl_line("assistant", "Done."))
            (folder / sid).mkdir(exist_ok=True)
            (folder / sid / f"{sid}.jsonl").write_text("\n".join(lines) + "\n")
            truth.messages += 2 + 2 * calls
            truth.parts += 2 + 3 * calls
            if n % 3 == 0:
                (folder / sid / "subagents").mkdir(exist_ok=True)
                subagent = folder / sid / "subagents" / f"{uuid.UUID(int=ids.getrandbits(128), version=4)}.jsonl"
                subagent.write_text(
                    jsonl_line("user", "look around") + "\n" + jsonl_line("assistant", "found it") + "\n")
                truth.sessions += 1
                truth.subagents += 1
                truth.messages += 2
                truth.parts += 2
        else:
            answer = [("thinking", "plan it")]
            for c in range(calls):
                answer += [("call", "StrReplace", [f'{{"path": "src/m{c}.ts"}}']), ("result", ["edited"])]
            answer.append("All done.")
            (folder / f"{sid}.txt").write_text(text_transcript([(f"task {n}", answer)]))
            truth.messages += 2
            truth.parts += 1 + 1 + 2 * calls + 1
        truth.sessions += 1
        truth.tool_calls += calls
        when = start + timedelta(days=n, hours=rng.randint(0, 8))
        if subagent:  # a sub-agent has no summary row: it is dated by its file's time, set to its parent's
            os.utime(subagent, (when.timestamp(), when.timestamp()))
            subagent = None
        summaries.append({"conversationId": sid, "title": f"task {n}", "model": "claude-4.5-sonnet-thinking",
                          "updatedAt": int(when.timestamp() * 1000)})
    write_summaries(home, summaries)
    return truth
