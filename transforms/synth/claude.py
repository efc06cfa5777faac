"""Seeded Claude Code homes (`<home>/projects/<slug>/*.jsonl`, shaped as docs/FORMATS.md,
"Claude Code: record shapes" says), for the tests, the demo and the benchmarks. It counts what it
writes, so tests compare the lake to the truth. Streamed responses are written as Claude Code writes them: one line per content
block, each repeating the usage with the output count growing."""

import json
import random
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from transforms.pricing import Buckets, price_buckets
from transforms.claude.tools import PART_TYPES

VERSION = "2.0.14"


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def project_slug(cwd: str) -> str:
    """Claude Code's folder name for a project: every non-alphanumeric character becomes `-`."""
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def base(kind: str, session_id: str, at: datetime, cwd: str, *, line_uuid=None, parent=None, **fields) -> dict:
    return {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": cwd, "sessionId": session_id,
            "version": VERSION, "gitBranch": "main", "type": kind, "uuid": line_uuid or str(uuid.uuid4()),
            "timestamp": iso(at), **fields}


def user_line(session_id, at, cwd, content, **fields) -> dict:
    return base("user", session_id, at, cwd, message={"role": "user", "content": content}, **fields)


def usage(input_tokens, output_tokens, cache_read=0, write_5m=0, write_1h=0) -> dict:
    return {"input_tokens": input_tokens, "cache_creation_input_tokens": write_5m + write_1h,
            "cache_read_input_tokens": cache_read,
            "cache_creation": {"ephemeral_5m_input_tokens": write_5m, "ephemeral_1h_input_tokens": write_1h},
            "output_tokens": output_tokens, "service_tier": "standard"}


def assistant_lines(session_id, at, cwd, *, message_id, request_id, model, blocks, final_usage, stop_reason,
                    **fields) -> list[dict]:
    """One line per content block, as streamed: earlier lines carry a partial output count."""
    lines = []
    for i, block in enumerate(blocks):
        last = i == len(blocks) - 1
        u = dict(final_usage, output_tokens=final_usage["output_tokens"] if last else 1 + i)
        message = {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": [block],
                   "stop_reason": stop_reason if last else None, "stop_sequence": None, "usage": u}
        lines.append(base("assistant", session_id, at + timedelta(milliseconds=300 * i), cwd,
                          requestId=request_id, message=message, **fields))
    return lines


def tool_use(call_id, name, args) -> dict:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def tool_result(call_id, content, is_error=False) -> dict:
    block = {"tool_use_id": call_id, "type": "tool_result", "content": content}
    return {**block, "is_error": True} if is_error else block


def write_jsonl(path: Path, lines: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:  # Claude Code appends, one line per record
        for line in lines:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    return path


@dataclass
class HomeTruth:
    sessions: int = 0  # root sessions
    subagents: int = 0  # sub-agent sessions
    messages: int = 0
    prompts: int = 0  # user messages that are typed prompts
    requests: int = 0  # billed requests (usage rows)
    unpriced_requests: int = 0
    tokens: Counter = field(default_factory=Counter)  # bucket -> tokens
    cost_usd: float = 0.0  # over the priced requests
    parts_by_type: Counter = field(default_factory=Counter)
    tool_calls_by_name: Counter = field(default_factory=Counter)
    tool_errors: int = 0
    by_workspace: Counter = field(default_factory=Counter)  # cost per workspace
    models: Counter = field(default_factory=Counter)  # billed requests per model


_TOOLS = [
    ("Bash", lambda r: {"command": r.choice(["npm test", "cargo build", "ls -la", "git status"])}),
    ("Read", lambda r: {"file_path": r.choice(["/src/main.rs", "/README.md", "/src/login.ts"])}),
    ("Edit", lambda r: {"file_path": "/src/login.ts", "old_string": "401", "new_string": "200"}),
    ("Grep", lambda r: {"pattern": r.choice(["TODO", "fn main", "login"])}),
    ("WebFetch", lambda r: {"url": "https://example.test/docs", "prompt": "summarise"}),
    ("mcp__github__create_issue", lambda r: {"title": "bug"}),
]
MODELS = ("claude-sonnet-4-5-20250929", "claude-opus-4-6", "glm-4.6")  # the last one is not in the price table
SUBAGENT_MODEL = "claude-haiku-4-5-20251001"


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _chain(lines: list[dict], rng: random.Random) -> list[dict]:
    """Seeded uuids, each line's parent the line before it: the same seed writes the same bytes."""
    parent = None
    for line in lines:
        if "uuid" in line:
            line.update(uuid=_uid(rng), parentUuid=parent)
            parent = line["uuid"]
    return lines


class _Writer:
    """Writes one transcript and counts it into the truth."""

    def __init__(self, truth: HomeTruth, rng: random.Random, workspace: str):
        self.truth, self.rng, self.workspace, self.lines = truth, rng, workspace, []

    def prompt(self, sid, at, text, **fields):
        self.lines.append(user_line(sid, at, self.workspace, text, **fields))
        self.truth.messages += 1
        self.truth.prompts += 1
        self.truth.parts_by_type["text"] += 1

    def response(self, sid, at, model, blocks, stop_reason, **fields):
        r = self.rng
        u = usage(r.randint(1, 40), r.randint(20, 900), r.randint(0, 30_000), r.randint(0, 3000), r.choice([0, 0, 800]))
        self.lines += assistant_lines(sid, at, self.workspace, message_id=f"msg_{r.getrandbits(64):016x}",
                                      request_id=f"req_{r.getrandbits(64):016x}", model=model, blocks=blocks,
                                      final_usage=u, stop_reason=stop_reason, **fields)
        self.truth.messages += 1
        self.truth.parts_by_type.update(PART_TYPES.get(b["type"], "other") for b in blocks)  # canonical names
        b = Buckets(u["input_tokens"], u["cache_read_input_tokens"], u["cache_creation"]["ephemeral_5m_input_tokens"],
                    u["cache_creation"]["ephemeral_1h_input_tokens"], u["output_tokens"])
        priced = price_buckets(b, model, "anthropic" if "claude" in model else None, at)
        self.truth.requests += 1
        self.truth.models[model] += 1
        self.truth.tokens.update({k: v for k, v in b.columns().items() if v and k != "total_tokens"})
        if priced.cost_usd is None:
            self.truth.unpriced_requests += 1
        else:
            self.truth.cost_usd += priced.cost_usd
            self.truth.by_workspace[self.workspace] += priced.cost_usd

    def result(self, sid, at, call_id, content, is_error, tool_use_result, **fields):
        self.lines.append(user_line(sid, at, self.workspace, [tool_result(call_id, content, is_error)],
                                    toolUseResult=tool_use_result, **fields))
        self.truth.messages += 1
        self.truth.parts_by_type["tool_result"] += 1
        self.truth.tool_errors += is_error

    def steps(self, sid, at, model, steps, tag, **fields) -> datetime:
        for step in range(steps):
            name, make_args = self.rng.choice(_TOOLS)
            call_id = f"toolu_{tag}_{step}"
            is_error = self.rng.random() < 0.25
            self.response(sid, at, model, [{"type": "thinking", "thinking": "Let me check.", "signature": "x"},
                                           tool_use(call_id, name, make_args(self.rng))], "tool_use", **fields)
            self.result(sid, at + timedelta(seconds=2), call_id, "Exit code 1\nFAIL" if is_error else "ok", is_error,
                        {"stdout": "ok", "stderr": "", "interrupted": False}, **fields)
            self.truth.tool_calls_by_name[name] += 1
            at += timedelta(seconds=5)
        return at


def _subagent(project: Path, truth: HomeTruth, rng: random.Random, workspace: str, sid: str, at: datetime,
              agent_id: str) -> None:
    w = _Writer(truth, rng, workspace)
    fields = {"isSidechain": True, "agentId": agent_id}
    w.prompt(sid, at, "Find where the login handler lives", **fields)
    at = w.steps(sid, at + timedelta(seconds=1), SUBAGENT_MODEL, rng.randint(1, 2), f"{agent_id}", **fields)
    w.response(sid, at, SUBAGENT_MODEL, [{"type": "text", "text": "It is in src/login.ts."}], "end_turn", **fields)
    folder = project / sid / "subagents"
    write_jsonl(folder / f"agent-{agent_id}.jsonl", _chain(w.lines, rng))
    (folder / f"agent-{agent_id}.meta.json").write_text(json.dumps({"agentType": "Explore",
                                                                    "description": "Find the login handler"}))
    truth.subagents += 1


def generate_home(home, *, sessions=6, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 1, 6, 9, tzinfo=timezone.utc)) -> HomeTruth:
    """Write `sessions` main transcripts under `<home>/projects/<slug>/`: streamed responses, tool
    calls (some failing), a sub-agent in every other session, a `<synthetic>` API error in every
    third, and every fourth session on a model no price table knows."""
    rng = random.Random(seed)
    truth = HomeTruth()
    for n in range(sessions):
        sid = _uid(rng)
        workspace = workspaces[n % len(workspaces)]
        project = Path(home) / "projects" / project_slug(workspace)
        model = MODELS[2] if n % 4 == 3 else MODELS[n % 2]
        at = start + timedelta(hours=7 * n)
        w = _Writer(truth, rng, workspace)
        w.lines.append({"type": "file-history-snapshot", "messageId": _uid(rng), "snapshot": {}})
        w.prompt(sid, at, "Fix the failing test")
        at = w.steps(sid, at + timedelta(seconds=3), model, rng.randint(1, 4), f"{n:02d}")
        if n % 2 == 0:  # a sub-agent: its usage is in its own transcript, never in the Task result
            agent_id = f"a{rng.getrandbits(32):08x}"
            w.response(sid, at, model, [tool_use(f"toolu_{n:02d}_task", "Task", {"subagent_type": "Explore",
                                                                                 "prompt": "Find it"})], "tool_use")
            _subagent(project, truth, rng, workspace, sid, at + timedelta(seconds=1), agent_id)
            w.result(sid, at + timedelta(seconds=30), f"toolu_{n:02d}_task", [{"type": "text", "text": "Found."}],
                     False, {"agentId": agent_id, "totalTokens": 999_999, "usage": usage(1, 999_999)})
            truth.tool_calls_by_name["Task"] += 1
            at += timedelta(seconds=31)
        if n % 3 == 0:  # an API error: a message, never a billed request
            w.lines.append(base("assistant", sid, at, workspace, isApiErrorMessage=True, message={
                "id": _uid(rng), "type": "message", "role": "assistant", "model": "<synthetic>",
                "content": [{"type": "text", "text": "API Error: 529 overloaded"}],
                "usage": {"input_tokens": 0, "output_tokens": 0}}))
            truth.messages += 1
            truth.parts_by_type["text"] += 1
        w.response(sid, at + timedelta(seconds=1), model, [{"type": "text", "text": "Done."}], "end_turn")
        write_jsonl(project / f"{sid}.jsonl", _chain(w.lines, rng))
        truth.sessions += 1
    return truth
