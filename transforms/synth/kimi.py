"""Seeded Kimi CLI sessions in the real on-disk format (wire.jsonl records, state.json, kimi.json,
subagents/<id>/), for the tests and the demo. It counts what it writes, so tests compare the lake
to the truth."""

import hashlib
import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path


def token_usage(input_other, output, cache_read=0, cache_creation=0) -> dict:
    """kosong TokenUsage: disjoint input buckets, output with the thinking."""
    return {"input_other": input_other, "output": output, "input_cache_read": cache_read,
            "input_cache_creation": cache_creation}


def session_dir(share, work_dir: str, session_id: str) -> Path:
    """WorkDirMeta.sessions_dir: md5 of the work dir path (a local KAOS)."""
    return Path(share) / "sessions" / hashlib.md5(work_dir.encode("utf-8")).hexdigest() / session_id


def register_work_dir(share, work_dir: str) -> None:
    path = Path(share) / "kimi.json"
    meta = json.loads(path.read_text()) if path.exists() else {"work_dirs": []}
    if all(wd["path"] != work_dir for wd in meta["work_dirs"]):
        meta["work_dirs"].append({"path": work_dir, "kaos": "local", "last_session_id": None})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(meta))


class WireWriter:
    """One wire.jsonl, event by event, as WireFile.append_message writes them."""

    def __init__(self, path: Path, start: datetime, step=timedelta(milliseconds=400), version="1.10"):
        self.path, self.now, self.tick = path, start, step
        self.lines: list[str] = [json.dumps({"type": "metadata", "protocol_version": version})] if version else []
        self.usages: list[dict] = []  # token_usage of each StatusUpdate written

    def event(self, type_: str, payload: dict, wrap: dict | None = None) -> str:
        self.now += self.tick
        message = {"type": type_, "payload": payload}
        if wrap:  # SubagentEvent: the sub-agent's event, as the parent's wire carries it
            message = {"type": "SubagentEvent", "payload": {**wrap, "event": message}}
        line = json.dumps({"timestamp": self.now.timestamp(), "message": message}, ensure_ascii=False)
        self.lines.append(line)
        return line

    def turn(self, prompt, wrap=None) -> None:
        self.event("TurnBegin", {"user_input": prompt}, wrap)

    def step(self, n: int, *, text: str | None = None, think: str | None = None, call=None, usage=None,
             fragments=3, wrap=None) -> None:
        """A model call: thinking and text streamed in `fragments` pieces, a tool call whose
        arguments arrive as deltas, then the step's StatusUpdate."""
        self.event("StepBegin", {"n": n}, wrap)
        for kind, value in (("think", think), ("text", text)):
            if value:
                size = max(1, len(value) // fragments + 1)
                for i in range(0, len(value), size):
                    self.event("ContentPart", {"type": kind, kind: value[i:i + size]}, wrap)
        if call:
            call_id, name, args = call
            raw = json.dumps(args)
            self.event("ToolCall", {"type": "function", "id": call_id, "function": {"name": name,
                                                                                  "arguments": raw[:5]}}, wrap)
            self.event("ToolCallPart", {"arguments_part": raw[5:]}, wrap)
        if usage is not None:
            self.event("StatusUpdate", {"context_usage": 0.1, "token_usage": usage,
                                        "message_id": f"chatcmpl-{uuid.uuid4().hex[:12]}"}, wrap)
            self.usages.append(usage)

    def result(self, call_id: str, output: str, *, is_error=False, message="", wrap=None) -> None:
        self.event("ToolResult", {"tool_call_id": call_id, "return_value": {
            "is_error": is_error, "output": output, "message": message, "display": []}}, wrap)

    def end(self, wrap=None) -> None:
        self.event("TurnEnd", {}, wrap)

    def write(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("".join(line + "\n" for line in self.lines), encoding="utf-8")
        return self.path


def write_state(directory: Path, title: str | None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "state.json").write_text(json.dumps({"version": 1, "custom_title": title, "archived": False}))


@dataclass
class HomeTruth:
    sessions: int = 0
    roots: int = 0
    requests: int = 0
    tokens: Counter = field(default_factory=Counter)
    priced_requests: int = 0
    tool_calls: Counter = field(default_factory=Counter)
    nonzero_exits: int = 0


def generate_home(share, *, sessions=4, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 1, 6, 9, tzinfo=timezone.utc)) -> HomeTruth:
    """Write `sessions` sessions under `<share>` (a `~/.kimi`): each with streamed text and tool
    calls; every second one runs a sub-agent (its own wire plus the wrapped copies); the first is
    forked after its first turn."""
    rng = random.Random(seed)
    truth = HomeTruth()
    for n in range(sessions):
        work = workspaces[n % len(workspaces)]
        register_work_dir(share, work)
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        d = session_dir(share, work, sid)
        w = WireWriter(d / "wire.jsonl", start + timedelta(hours=3 * n))
        w.turn("Fix the failing test")
        step = 0
        for i in range(rng.randint(1, 3)):
            step += 1
            code = rng.choice([0, 0, 1])
            w.step(step, think="Run the tests first.", call=(f"tool_{n}_{i}", "Shell", {"command": "npm test"}),
                   usage=token_usage(rng.randint(500, 4000), rng.randint(20, 300), cache_read=rng.choice([0, 2048])))
            w.result(f"tool_{n}_{i}", "FAIL" if code else "ok", is_error=bool(code),
                     message=f"Command failed with exit code: {code}." if code else "Command executed successfully.")
            truth.tool_calls["Shell"] += 1
            truth.nonzero_exits += code != 0
        step += 1
        w.step(step, text="Fixed the test.", usage=token_usage(1200, 40, cache_read=4096))
        w.end()
        fork_point = len(w.lines)
        if n % 2 == 1:
            agent = f"a{n:02d}"
            wrap = {"parent_tool_call_id": f"agent_{n}", "agent_id": agent, "subagent_type": "coder"}
            sub = WireWriter(d / "subagents" / agent / "wire.jsonl", w.now)
            for target, wrapped in ((sub, None), (w, wrap)):
                target.turn("Review the diff", wrap=wrapped)
                target.step(1, text="Looks fine.", usage=token_usage(900, 25), wrap=wrapped)
            w.usages.pop()  # the wrapped copy is not a request of its own
            sub.write()
            (d / "subagents" / agent / "meta.json").write_text(json.dumps({
                "agent_id": agent, "subagent_type": "coder", "status": "completed", "description": "Review",
                "launch_spec": {"agent_id": agent, "subagent_type": "coder", "model_override": None,
                                "effective_model": "kimi-k2-turbo-preview", "created_at": 0}}))
            _count(truth, sub.usages, priced=True)
            truth.sessions += 1
        w.write()
        write_state(d, f"Fix the failing test ({n})")
        _count(truth, w.usages, priced=False)
        truth.sessions += 1
        truth.roots += 1
        if n == 0:  # /fork after the first turn: the lines copied verbatim, then its own
            fid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            f = WireWriter(session_dir(share, work, fid) / "wire.jsonl", w.now + timedelta(minutes=5), version=None)
            f.lines = w.lines[:fork_point]
            f.turn("Try another fix")
            f.step(1, text="Another fix.", usage=token_usage(2000, 60))
            f.write()
            write_state(f.path.parent, f"Fork: Fix the failing test ({n})")
            _count(truth, f.usages, priced=False)
            truth.sessions += 1
            truth.roots += 1
    return truth


def _count(truth: HomeTruth, usages: list[dict], priced: bool) -> None:
    for u in usages:
        truth.requests += 1
        truth.priced_requests += priced
        truth.tokens.update(input_uncached_tokens=u["input_other"], cache_read_tokens=u["input_cache_read"],
                            cache_write_5m_tokens=u["input_cache_creation"], output_tokens=u["output"],
                            total_tokens=u["input_other"] + u["input_cache_read"] + u["input_cache_creation"]
                            + u["output"])
