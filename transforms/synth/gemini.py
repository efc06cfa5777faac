"""Seeded Gemini CLI chat recordings in the real on-disk format (chatRecordingService.ts), for
the tests and the demo. Stdlib only, plus the pricing the truth is computed with. It counts
what it writes, so tests compare the lake to the truth.

`ChatWriter` appends records exactly as Gemini does: the metadata line, each message appended
again whenever it changes (its tokens, its tool calls), `$set` updates, `$rewindTo`, `$set.messages`
checkpoints; `write_legacy` writes the older whole-record `session-*.json`.
"""

import hashlib
import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from transforms.pricing import Buckets, price_buckets


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def project_hash(project_root: str) -> str:
    return hashlib.sha256(project_root.encode()).hexdigest()


def register_project(home, project_root: str, slug: str) -> Path:
    """`projects.json` and the `tmp/<slug>/.project_root` marker (ProjectRegistry); the folder."""
    home = Path(home)
    registry = home / "projects.json"
    data = json.loads(registry.read_text()) if registry.exists() else {"projects": {}}
    data["projects"][project_root] = slug
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_text(json.dumps(data, indent=2))
    folder = home / "tmp" / slug
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".project_root").write_text(project_root)
    return folder


def tokens(input_tokens, output, cached=0, thoughts=0, tool=0) -> dict:
    """A `TokensSummary` as recordMessageTokens writes it (total = input + output + thoughts + tool)."""
    return {"input": input_tokens, "output": output, "cached": cached, "thoughts": thoughts, "tool": tool,
            "total": input_tokens + output + thoughts + tool}


def buckets_of(t: dict) -> Buckets:
    """The disjoint buckets, spelled out independently of the normaliser."""
    return Buckets(input_uncached=t["input"] - t["cached"] + t["tool"], cache_read=t["cached"],
                   output=t["output"] + t["thoughts"], reasoning=t["thoughts"])


def tool_call(call_id, name, args, output, status="success", at: datetime | None = None) -> dict:
    """A ToolCallRecord as recordCompletedToolCalls builds it."""
    return {"id": call_id, "name": name, "args": args,
            "result": [{"functionResponse": {"id": call_id, "name": name, "response": {"output": output}}}],
            "status": status, "timestamp": iso(at or datetime(2026, 1, 1, tzinfo=timezone.utc)),
            "displayName": name, "description": "", "renderOutputAsMarkdown": False}


class ChatWriter:
    """One chat file under `<home>/tmp/<folder>/chats/`, record by record."""

    def __init__(self, home, folder: str, session_id: str, *, project_root: str, start: datetime,
                 kind: str | None = None, parent: str | None = None, step=timedelta(seconds=2)):
        self.sid, self.now, self.step = session_id, start, step
        chats = Path(home) / "tmp" / folder / "chats"
        if parent:
            chats = chats / parent
            self.path = chats / f"{session_id}.jsonl"
        else:
            self.path = chats / f"session-{start.strftime('%Y-%m-%dT%H-%M')}-{session_id[:8]}.jsonl"
        chats.mkdir(parents=True, exist_ok=True)
        self.lines: list[dict] = []
        self.messages: dict[str, dict] = {}  # the final copy of each message
        meta = {"sessionId": session_id, "projectHash": project_hash(project_root), "startTime": iso(start),
                "lastUpdated": iso(start)}
        if kind:
            meta["kind"] = kind
        self.append(meta)

    def append(self, record: dict) -> dict:
        self.lines.append(json.loads(json.dumps(record)))
        return record

    def tick(self) -> str:
        self.now += self.step
        return iso(self.now)

    def push(self, msg: dict) -> dict:
        self.messages[msg["id"]] = json.loads(json.dumps(msg))
        self.append(msg)
        self.append({"$set": {"lastUpdated": iso(self.now)}})
        return msg

    def user(self, content, mid: str | None = None) -> dict:
        return self.push({"id": mid or str(uuid.uuid4()), "timestamp": self.tick(), "type": "user", "content": content})

    def info(self, text: str, kind="info") -> dict:
        return self.push({"id": str(uuid.uuid4()), "timestamp": self.tick(), "type": kind, "content": text})

    def gemini(self, text: str, *, model: str, usage: dict | None, thoughts=(), calls=(), mid=None) -> dict:
        """A model response as recorded: the message, then again with its tokens (when they arrive
        after it), then again with its completed tool calls (streamed duplicates)."""
        at = self.tick()
        msg = {"id": mid or str(uuid.uuid4()), "timestamp": at, "type": "gemini", "content": text,
               "thoughts": [{"subject": s, "description": d, "timestamp": at} for s, d in thoughts],
               "tokens": None, "model": model}
        self.push(msg)
        if usage is not None:
            msg = {**msg, "tokens": usage}
            self.push(msg)
        if calls:
            msg = {**msg, "toolCalls": list(calls)}
            self.push(msg)
            for call in calls:  # newer releases record the responses sent back as a user message
                self.push({"id": str(uuid.uuid4()), "timestamp": self.tick(), "type": "user",
                           "content": call["result"]})
        return msg

    def rewind(self, message_id: str) -> None:
        """`/rewind`: the message and everything after it leave the conversation."""
        ids = list(self.messages)
        for gone in ids[ids.index(message_id):]:
            self.messages[gone]["_dropped"] = "rewound"
        self.append({"$rewindTo": message_id})

    def summary(self, text: str) -> None:
        self.append({"$set": {"summary": text}})

    def write(self) -> Path:
        self.path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        return self.path


def write_legacy(home, folder: str, record: dict) -> Path:
    """A pre-JSONL `session-*.json`: the whole ConversationRecord, pretty-printed."""
    start = datetime.fromisoformat(record["startTime"].replace("Z", "+00:00"))
    chats = Path(home) / "tmp" / folder / "chats"
    chats.mkdir(parents=True, exist_ok=True)
    path = chats / f"session-{start.strftime('%Y-%m-%dT%H-%M')}-{record['sessionId'][:8]}.json"
    path.write_text(json.dumps(record, indent=2))
    return path


@dataclass
class HomeTruth:
    sessions: int = 0
    roots: int = 0
    messages: int = 0
    requests: int = 0
    tokens: Counter = field(default_factory=Counter)  # usage columns summed
    cost_usd: float = 0.0
    tool_calls: Counter = field(default_factory=Counter)
    tool_errors: int = 0
    by_project: Counter = field(default_factory=Counter)  # cost per project path


MODELS = ("gemini-2.5-pro", "gemini-2.5-flash", "gemini-3-flash-preview")
_TOOLS = [
    ("run_shell_command", lambda r: {"command": r.choice(["npm test", "ls -la", "git status"])},
     lambda r: "Output: ok" if r.random() < 0.7 else "Output: FAIL\nExit Code: 1"),
    ("read_file", lambda r: {"absolute_path": "/src/login.ts"}, lambda r: "export function login() {}"),
    ("replace", lambda r: {"file_path": "/src/login.ts", "old_string": "401", "new_string": "200"},
     lambda r: "Successfully modified file"),
    ("grep_search", lambda r: {"pattern": "TODO"}, lambda r: "Found 2 matches"),
    ("mcp_github_create_issue", lambda r: {"title": "bug"}, lambda r: "created #12"),
]


def _count(truth: HomeTruth, writer: ChatWriter, project_root: str) -> None:
    truth.sessions += 1
    truth.messages += len(writer.messages)
    for msg in writer.messages.values():
        usage = msg.get("tokens")
        if msg["type"] == "gemini" and usage:
            b = buckets_of(usage)
            truth.requests += 1
            truth.tokens.update({k: v or 0 for k, v in b.columns().items()})
            at = datetime.fromisoformat(msg["timestamp"].replace("Z", "+00:00"))
            cost = price_buckets(b, msg["model"], "google", at).cost_usd
            truth.cost_usd += cost
            truth.by_project[project_root] += cost
        for call in msg.get("toolCalls") or ():
            truth.tool_calls[call["name"]] += 1
            truth.tool_errors += call["status"] == "error"


def generate_home(home, *, sessions=6, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 1, 6, 9, tzinfo=timezone.utc)) -> HomeTruth:
    """Write `sessions` chats under `<home>` (a `~/.gemini`): every third starts a sub-agent,
    every fourth rewinds its last exchange, the second is also left in its project's old hash
    folder (the slug migration's copy)."""
    rng = random.Random(seed)
    truth = HomeTruth()
    for n in range(sessions):
        root = workspaces[n % len(workspaces)]
        folder = register_project(home, root, Path(root).name.lower()).name
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        w = ChatWriter(home, folder, sid, project_root=root, start=start + timedelta(hours=5 * n))
        w.user([{"text": "Fix the failing test"}])
        for step in range(rng.randint(1, 3)):
            name, make_args, make_output = rng.choice(_TOOLS)
            output = make_output(rng)
            status = "error" if rng.random() < 0.15 else "success"
            # recorded once it completed: after the response asking for it (its tick, next), before the reply
            call = tool_call(f"{name}-{n}-{step}", name, make_args(rng), output, status, w.now + w.step * 3 / 2)
            usage = tokens(rng.randint(2000, 30000), rng.randint(20, 800), cached=rng.choice([0, 1024, 1500]),
                           thoughts=rng.randint(0, 400))
            w.gemini("", model=MODELS[n % len(MODELS)], usage=usage, thoughts=[("Planning", "Look at the test")],
                     calls=[call])
        w.gemini("Fixed it.", model=MODELS[n % len(MODELS)], usage=tokens(rng.randint(3000, 9000), 40, cached=1024))
        if n % 4 == 3:
            retry = w.user("Also update the docs")
            w.gemini("Done.", model=MODELS[n % len(MODELS)], usage=tokens(4000, 30))
            w.rewind(retry["id"])  # rewound, but its request was made: it still counts
        w.summary(f"Fix the failing test ({n})")
        w.write()
        _count(truth, w, root)
        truth.roots += 1
        if n % 3 == 2:
            sub = ChatWriter(home, folder, str(uuid.UUID(int=rng.getrandbits(128), version=4)), project_root=root,
                             start=w.now, kind="subagent", parent=sid)
            sub.user("Investigate the codebase")
            sub.gemini("Report: the handler returns 401.", model="gemini-2.5-flash",
                       usage=tokens(12000, 300, cached=4000))
            sub.write()
            _count(truth, sub, root)
        if n == 1:  # the old hash folder still holds a copy (storageMigration copies, never moves)
            old = Path(home) / "tmp" / project_hash(root) / "chats"
            old.mkdir(parents=True, exist_ok=True)
            (old / w.path.name).write_text(w.path.read_text())
    return truth
