"""Seeded OpenCode data dirs for the tests and the demo: a real `opencode.db` (WAL mode, the
upstream table shapes of docs/FORMATS.md, "OpenCode: record shapes") and the legacy `storage/`
JSON tree. Stdlib only. It counts what it writes, so tests compare the lake to the truth."""

import json
import random
import sqlite3
import zlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from transforms.opencode.normalise import PART_TYPES

SCHEMA = """
CREATE TABLE project (id text PRIMARY KEY, worktree text NOT NULL, vcs text, name text, icon_url text,
  icon_color text, time_created integer NOT NULL, time_updated integer NOT NULL, time_initialized integer,
  sandboxes text NOT NULL, commands text, worktree_settings text);
CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL REFERENCES project(id) ON DELETE CASCADE,
  workspace_id text, parent_id text, slug text NOT NULL, directory text NOT NULL, path text, title text NOT NULL,
  version text NOT NULL, share_url text, summary_additions integer, summary_deletions integer,
  summary_files integer, summary_diffs text, cost real NOT NULL DEFAULT 0, tokens_input integer NOT NULL DEFAULT 0,
  tokens_output integer NOT NULL DEFAULT 0, tokens_reasoning integer NOT NULL DEFAULT 0,
  tokens_cache_read integer NOT NULL DEFAULT 0, tokens_cache_write integer NOT NULL DEFAULT 0, revert text,
  permission text, goal text, agent text, model text, time_created integer NOT NULL,
  time_updated integer NOT NULL, time_compacting integer, time_archived integer);
CREATE INDEX session_project_idx ON session (project_id);
CREATE INDEX session_parent_idx ON session (parent_id);
CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL REFERENCES session(id) ON DELETE CASCADE,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE INDEX message_session_time_created_id_idx ON message (session_id, time_created, id);
CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL REFERENCES message(id) ON DELETE CASCADE,
  session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE INDEX part_message_id_id_idx ON part (message_id, id);
CREATE INDEX part_session_idx ON part (session_id);
CREATE TABLE todo (session_id text NOT NULL REFERENCES session(id) ON DELETE CASCADE, content text NOT NULL,
  status text NOT NULL, priority text NOT NULL, position integer NOT NULL, time_created integer NOT NULL,
  time_updated integer NOT NULL, PRIMARY KEY (session_id, position));
"""


def create_opencode_db(path) -> sqlite3.Connection:
    """A new opencode.db; returns an open autocommit connection in WAL mode (the caller closes it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.executescript(SCHEMA)
    return conn


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def add_project(conn, project_id: str, worktree: str, at_ms: int) -> None:
    conn.execute("INSERT OR IGNORE INTO project (id, worktree, vcs, time_created, time_updated, sandboxes) "
                 "VALUES (?, ?, 'git', ?, ?, '[]')", (project_id, worktree, at_ms, at_ms))


def add_session(conn, info: dict, **columns) -> None:
    """A session row from a legacy-shaped session object; `columns` sets others (cost, tokens_*)."""
    add_project(conn, info["projectID"], info["directory"], info["time"]["created"])
    row = {"id": info["id"], "project_id": info["projectID"], "parent_id": info.get("parentID"),
           "slug": info.get("slug", info["id"][-8:]), "directory": info["directory"], "title": info["title"],
           "version": info.get("version", "1.2.10"), "time_created": info["time"]["created"],
           "time_updated": info["time"].get("updated", info["time"]["created"]), **columns}
    conn.execute(f"INSERT INTO session ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))


def add_message(conn, info: dict) -> None:
    """`data` is the message info without `id`/`sessionID`."""
    data = {k: v for k, v in info.items() if k not in ("id", "sessionID")}
    time = info["time"]
    conn.execute("INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)",
                 (info["id"], info["sessionID"], time["created"], time.get("completed", time["created"]), _dumps(data)))


def add_part(conn, part: dict, at_ms: int) -> None:
    """`data` is the part without `id`/`sessionID`/`messageID`."""
    data = {k: v for k, v in part.items() if k not in ("id", "sessionID", "messageID")}
    conn.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
                 "VALUES (?, ?, ?, ?, ?, ?)", (part["id"], part["messageID"], part["sessionID"], at_ms, at_ms, _dumps(data)))


def write_json(data_dir, kind: str, owner: str, obj: dict) -> Path:
    """A legacy `storage/<kind>/<owner>/<id>.json` file (owner: project, session or message id)."""
    path = Path(data_dir) / "storage" / kind / owner / f"{obj['id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=2))
    return path


# ---------------------------------------------------------------------------------- builders

def tokens(input=0, output=0, reasoning=0, read=0, write=0, reasoning_inside=False) -> dict:
    """A `tokens` object; `total` shows whether reasoning is inside `output` (older rows)."""
    total = input + output + read + write + (0 if reasoning_inside else reasoning)
    return {"total": total, "input": input, "output": output, "reasoning": reasoning,
            "cache": {"read": read, "write": write}}


def session_info(sid, *, directory, title, created, updated=None, parent=None, project_id="prj_4f1c",
                 version="1.1.40") -> dict:
    info = {"id": sid, "version": version, "projectID": project_id, "directory": str(directory), "title": title,
            "time": {"created": created, "updated": updated or created}}
    if parent:
        info["parentID"] = parent
    return info


def user_info(mid, sid, created, provider="anthropic", model="claude-sonnet-4-5") -> dict:
    return {"id": mid, "sessionID": sid, "role": "user", "time": {"created": created}, "agent": "build",
            "model": {"providerID": provider, "modelID": model}}


def assistant_info(mid, sid, created, *, parent_id, cost, tokens, completed=None, provider="anthropic",
                   model="claude-sonnet-4-5", directory="/home/dev/shop", summary=None, finish="stop") -> dict:
    info = {"id": mid, "sessionID": sid, "role": "assistant", "time": {"created": created}, "parentID": parent_id,
            "modelID": model, "providerID": provider, "mode": "build", "agent": "build",
            "path": {"cwd": str(directory), "root": str(directory)}, "cost": cost, "tokens": tokens}
    if completed:
        info["time"]["completed"] = completed
    if summary is not None:
        info["summary"] = summary
    if finish:
        info["finish"] = finish
    return info


def part(pid, mid, sid, type_, **fields) -> dict:
    return {"id": pid, "sessionID": sid, "messageID": mid, "type": type_, **fields}


def tool_part(pid, mid, sid, call_id, tool, *, status, input, output=None, error=None, metadata=None,
              start=None, end=None) -> dict:
    state = {"status": status, "input": input}
    if status == "completed":
        state.update(output=output, title=tool, metadata=metadata or {}, time={"start": start, "end": end})
    elif status == "error":
        state.update(error=error, time={"start": start, "end": end})
    elif status == "running":
        state["time"] = {"start": start}
    return part(pid, mid, sid, "tool", callID=call_id, tool=tool, state=state)


class Writer:
    """Writes sessions, messages and parts to a database, to legacy JSON, or to both."""

    def __init__(self, data_dir, conn: sqlite3.Connection | None):
        self.data_dir, self.conn = Path(data_dir), conn

    def session(self, info: dict, to_db=True, to_json=False, **columns) -> None:
        if to_db:
            add_session(self.conn, info, **columns)
        if to_json:
            write_json(self.data_dir, "session", info["projectID"], info)

    def message(self, info: dict, parts: list[dict], to_db=True, to_json=False) -> None:
        if to_db:
            add_message(self.conn, info)
            for p in parts:
                add_part(self.conn, p, info["time"]["created"])
        if to_json:
            write_json(self.data_dir, "message", info["sessionID"], info)
            for p in parts:
                write_json(self.data_dir, "part", info["id"], p)


# ---------------------------------------------------------------------------------- generator

@dataclass
class HomeTruth:
    sessions: int = 0  # sub-agent sessions included
    roots: int = 0
    messages: int = 0
    usage_rows: int = 0  # assistant messages that billed something
    native_cost_usd: float = 0.0  # every priced request records its cost natively
    unknown_requests: int = 0  # requests of the unpriced model (cost 0 recorded)
    tokens: Counter = field(default_factory=Counter)  # usage bucket -> tokens (disjoint, as in `usage`)
    parts_by_type: Counter = field(default_factory=Counter)
    tool_calls_by_name: Counter = field(default_factory=Counter)
    tool_errors: int = 0
    by_workspace: Counter = field(default_factory=Counter)  # native cost per directory
    legacy_only: int = 0  # sessions written only as legacy JSON
    both: int = 0  # sessions in the database and in legacy JSON (an upgrade)

    @property
    def cost_usd(self) -> float:
        """What `SUM(cost_usd) WHERE is_root` gives: the priced (native) requests; the unpriced
        model's requests make their sessions `partial` or `unknown`, adding nothing."""
        return self.native_cost_usd


MODELS = [("anthropic", "claude-sonnet-4-5", True), ("openai", "gpt-5", True), ("ollama", "qwen3-coder:30b", False)]
_TOOLS = [
    ("bash", lambda r: {"command": r.choice(["npm test", "cargo build", "git status"]), "description": "Run"}),
    ("read", lambda r: {"filePath": r.choice(["/src/main.ts", "/README.md"])}),
    ("edit", lambda r: {"filePath": "/src/login.ts", "oldString": "401", "newString": "200"}),
    ("webfetch", lambda r: {"url": "https://example.test/docs", "format": "markdown"}),
    ("todowrite", lambda r: {"todos": [{"content": "fix", "status": "pending"}]}),
    ("github_create_issue", lambda r: {"title": "bug"}),  # an MCP tool: <server>_<tool>
    ("task", lambda r: {"description": "Explore auth", "prompt": "Find the handler", "subagent_type": "explore"}),
]


def _project_id(directory: str) -> str:
    return f"prj_{zlib.crc32(directory.encode()):08x}"


class _Gen:
    def __init__(self, home, seed, start):
        self.rng, self.truth, self.n = random.Random(seed), HomeTruth(), 0
        self.conn = create_opencode_db(Path(home) / "opencode.db")
        self.writer = Writer(home, self.conn)
        self.t = int(start.timestamp() * 1000)

    def id(self, prefix: str) -> str:  # OpenCode ids sort in creation order
        self.n += 1
        return f"{prefix}_{self.n:08x}{self.rng.getrandbits(24):06x}"

    def tick(self, ms=1000) -> int:
        self.t += ms
        return self.t

    def step(self, mid, sid, provider, model, priced, parts) -> tuple[dict, float, dict]:
        rng = self.rng
        reasoning = rng.choice([0, 0, rng.randint(10, 400)])
        inside = provider == "openai" and rng.random() < 0.5  # an older OpenAI-style row
        usage = tokens(input=rng.randint(5, 3000), output=rng.randint(20, 800), reasoning=reasoning,
                       read=rng.randint(0, 20000), write=rng.randint(0, 3000), reasoning_inside=inside)
        cost = round(rng.uniform(0.001, 0.03), 6) if priced else 0
        parts.append(part(self.id("prt"), mid, sid, "step-finish", reason="stop", cost=cost, tokens=usage))
        c = usage["cache"]
        out = usage["output"] + (0 if inside else reasoning)
        buckets = {"input_uncached_tokens": usage["input"], "cache_read_tokens": c["read"],
                   "cache_write_5m_tokens": c["write"], "output_tokens": out, "reasoning_tokens": reasoning}
        return usage, cost, buckets

    def assistant(self, sid, parent_msg, directory, where, tool_names=(), summary=None) -> None:
        provider, model, priced = self.rng.choice(MODELS)
        mid, created = self.id("msg"), self.tick()
        parts, cost, spawned, last, total = [], 0.0, [], None, Counter()
        for s in range(self.rng.randint(1, 2)):  # several steps: message.tokens keeps the last only
            parts.append(part(self.id("prt"), mid, sid, "step-start", snapshot="abc"))
            for name in (tool_names if s == 0 else ()):
                args = dict(_TOOLS)[name](self.rng)
                failed = name == "edit" and (self.rng.random() < 0.5 or not self.truth.tool_errors)
                start = self.tick(200)
                parts.append(tool_part(self.id("prt"), mid, sid, f"call_{self.n}", name,
                                       status="error" if failed else "completed", input=args,
                                       output=None if failed else "ok", error="oldString not found" if failed else None,
                                       metadata={"exit": self.rng.choice([0, 1])} if name == "bash" else {},
                                       start=start, end=self.tick(300)))
                self.truth.tool_calls_by_name[name] += 1
                self.truth.tool_errors += failed
                if name == "task":
                    spawned.append(args)
            parts.append(part(self.id("prt"), mid, sid, "text", text="Done."))
            last, step_cost, buckets = self.step(mid, sid, provider, model, priced, parts)
            cost, total = cost + step_cost, total + Counter(buckets)
        info = assistant_info(mid, sid, created, completed=self.tick(), parent_id=parent_msg, cost=round(cost, 6),
                              tokens=last, provider=provider, model=model, directory=directory, summary=summary)
        self.emit(info, parts, where)
        self.truth.usage_rows += 1
        self.truth.tokens.update({k: v for k, v in total.items()})
        if priced:
            self.truth.native_cost_usd += round(cost, 6)
            self.truth.by_workspace[directory] += round(cost, 6)
        else:
            self.truth.unknown_requests += 1
        for args in spawned:  # the sub-agent runs while the task call waits
            self.child(sid, directory, where, args)

    def child(self, parent_sid, directory, where, args) -> None:
        sid = self.id("ses")
        self.session(session_info(sid, directory=directory, title=f"{args['description']} (@explore subagent)",
                                  created=self.tick(), parent=parent_sid, project_id=_project_id(directory)), where)
        user = user_info(self.id("msg"), sid, self.tick())
        self.emit(user, [part(self.id("prt"), user["id"], sid, "text", text=args["prompt"])], where)
        self.assistant(sid, user["id"], directory, where, tool_names=("read",))

    def session(self, info, where) -> None:
        self.writer.session(info, to_db=where != "json", to_json=where != "db")
        self.truth.sessions += 1

    def emit(self, info, parts, where) -> None:
        self.writer.message(info, parts, to_db=where != "json", to_json=where != "db")
        self.truth.messages += 1
        self.truth.parts_by_type.update(PART_TYPES.get(p["type"], "other") for p in parts)  # canonical names

    def root(self, n, directory) -> None:
        where = ("db", "json", "both")[n % 3]
        sid = self.id("ses")
        self.session(session_info(sid, directory=directory, title=f"Session {n}", created=self.tick(),
                                  project_id=_project_id(directory)), where)
        self.truth.roots += 1
        self.truth.legacy_only += where == "json"
        self.truth.both += where == "both"
        user = user_info(self.id("msg"), sid, self.tick())
        self.emit(user, [part(self.id("prt"), user["id"], sid, "text", text="Fix the failing test")], where)
        for turn in range(self.rng.randint(1, 3)):
            names = self.rng.sample([t for t, _ in _TOOLS], self.rng.randint(0, 2))
            for name, every in (("task", 0), ("edit", 1)):  # a sub-agent, and an edit (the first fails)
                if turn == 0 and n % 3 == every and name not in names:
                    names.append(name)
            self.assistant(sid, user["id"], directory, where, tool_names=names)
        if n % 4 == 3:  # an aborted placeholder: no usage; then a compaction and its summary
            aborted = assistant_info(self.id("msg"), sid, self.tick(), parent_id=user["id"], cost=0,
                                     tokens=tokens(), directory=directory, finish=None)
            aborted["error"] = {"name": "MessageAbortedError", "data": {"message": "aborted"}}
            self.emit(aborted, [], where)
            compact = user_info(self.id("msg"), sid, self.tick())
            self.emit(compact, [part(self.id("prt"), compact["id"], sid, "compaction", auto=True)], where)
            self.assistant(sid, compact["id"], directory, where, summary=True)


def generate_home(home, *, sessions=6, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 3, 2, 9, tzinfo=UTC)) -> HomeTruth:
    """An OpenCode data dir at `home`: `opencode.db` plus legacy JSON. Root session n goes to the
    database (n % 3 == 0), to legacy JSON only (1) or to both, as after an upgrade (2). Sessions
    use two priced models (native cost) and one unpriced local model (cost 0: unknown), call
    tools (some edits fail, some bash commands exit 1) and start sub-agent sessions (`task`)."""
    gen = _Gen(home, seed, start)
    for n in range(sessions):
        gen.root(n, workspaces[n % len(workspaces)])
        gen.tick(7 * 3600 * 1000)
    gen.conn.close()
    return gen.truth
