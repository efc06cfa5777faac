"""Seeded GitHub Copilot CLI sessions in their on-disk format (`session-state/<id>/events.jsonl`
and `workspace.yaml`; events as github/copilot-sdk's generated schema describes them), for the
tests and the demo. The builder counts what it writes, so tests compare the lake to the truth."""

import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

MODELS = ("claude-sonnet-4.5", "gpt-5.1-codex", "claude-haiku-4.5")


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def metric(input_tokens, output, read=0, write=0, reasoning=0, requests=1, nano_aiu=None) -> dict:
    """One `modelMetrics` entry; `input_tokens` includes the cache reads and writes."""
    out = {"requests": {"count": requests, "cost": requests},
           "usage": {"inputTokens": input_tokens, "outputTokens": output, "cacheReadTokens": read,
                     "cacheWriteTokens": write, "reasoningTokens": reasoning}}
    if nano_aiu is not None:
        out["totalNanoAiu"] = nano_aiu
    return out


class SessionBuilder:
    """One session's events, in order, chained by `parentId`; the clock moves `step` per event."""

    def __init__(self, sid: str, *, start: datetime, cwd="/home/dev/shop", model="claude-sonnet-4.5",
                 step=timedelta(milliseconds=900), version=1):
        self.sid, self.cwd, self.now, self.step, self.model = sid, cwd, start, step, model
        self.events: list[dict] = []
        self.counter = 0
        self.add("session.start", {"sessionId": sid, "version": version, "producer": "copilot-agent",
                                   "copilotVersion": "1.0.40", "startTime": iso(start), "selectedModel": model,
                                   "context": {"cwd": cwd, "gitRoot": cwd, "branch": "main",
                                               "repository": "dev/shop"}}, advance=False)

    def add(self, type_: str, data: dict, advance=True, **top) -> dict:
        if advance:
            self.now += self.step
        self.counter += 1
        event = {"type": type_, "data": data, "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.sid}/{self.counter}")),
                 "timestamp": iso(self.now), "parentId": self.events[-1]["id"] if self.events else None, **top}
        self.events.append(event)
        return event

    def prompt(self, text: str, **extra):
        return self.add("user.message", {"content": text, "transformedContent": f"<ts/>{text}", **extra})

    def turn(self, n: int):
        return self.add("assistant.turn_start", {"turnId": str(n), "model": self.model})

    def answer(self, text: str, requests=(), reasoning=None, output_tokens=50, **top):
        data = {"messageId": str(uuid.uuid4()), "content": text, "model": self.model, "outputTokens": output_tokens,
                "toolRequests": [{"toolCallId": r[0], "name": r[1], "arguments": r[2], "type": "function",
                                  **(r[3] if len(r) > 3 else {})} for r in requests]}
        if reasoning:
            data["reasoningText"] = reasoning
        return self.add("assistant.message", data, **top)

    def tool(self, call_id: str, name: str, args: dict, result: str, success=True, **top):
        self.add("tool.execution_start", {"toolCallId": call_id, "toolName": name, "arguments": args}, **top)
        data = {"toolCallId": call_id, "success": success, "model": self.model}
        if success:
            data["result"] = {"content": result, "detailedContent": result}
        else:
            data["error"] = {"message": result, "code": "failure"}
        return self.add("tool.execution_complete", data, **top)

    def checkpoint(self, nano_aiu: float):
        return self.add("session.usage_checkpoint", {"totalNanoAiu": nano_aiu, "totalPremiumRequests": 1})

    def shutdown(self, metrics: dict, total_nano_aiu=None, agent_metrics=None):
        data = {"shutdownType": "routine", "sessionStartTime": 1, "totalApiDurationMs": 1200,
                "codeChanges": {"filesModified": [], "linesAdded": 0, "linesRemoved": 0},
                "modelMetrics": metrics, "currentModel": self.model}
        if total_nano_aiu is not None:
            data["totalNanoAiu"] = total_nano_aiu
        if agent_metrics is not None:
            data["agentMetrics"] = agent_metrics
        return self.add("session.shutdown", data)

    def resume(self):
        return self.add("session.resume", {"resumeTime": iso(self.now), "eventCount": len(self.events),
                                           "selectedModel": self.model, "context": {"cwd": self.cwd}})

    def text(self) -> str:
        return "".join(json.dumps(e) + "\n" for e in self.events)

    def write(self, home: Path, title: str | None = None, flat=False) -> Path:
        state = Path(home) / "session-state"
        if flat:  # the layout of copilot-cli 0.0.342 to the per-session folders
            state.mkdir(parents=True, exist_ok=True)
            path = state / f"{self.sid}.jsonl"
        else:
            (state / self.sid).mkdir(parents=True, exist_ok=True)
            path = state / self.sid / "events.jsonl"
            lines = [f"id: {self.sid}", f"cwd: {self.cwd}", f"created_at: {self.events[0]['timestamp']}"]
            if title:
                lines.append(f"summary: {json.dumps(title)}")
            (path.parent / "workspace.yaml").write_text("\n".join(lines) + "\n")
        path.write_text(self.text())
        return path


@dataclass
class HomeTruth:
    sessions: int = 0
    messages: int = 0
    tool_calls: int = 0
    tokens: Counter = field(default_factory=Counter)  # bucket -> sum over usage rows
    native_usd: float = 0.0  # sum of the sessions' cumulative nano-AIU high-water marks, in USD
    usage_rows: int = 0


def generate_home(home, *, sessions=6, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 1, 7, 10, tzinfo=timezone.utc)) -> HomeTruth:
    """`sessions` sessions under `<home>/session-state/`: each a prompt, a shell call and an
    answer, shut down with its metrics; odd ones record nano-AIU (a native cost), every third is
    resumed (a second lifetime and a cumulative nano-AIU total)."""
    rng = random.Random(seed)
    truth = HomeTruth()
    for n in range(sessions):
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        b = SessionBuilder(sid, start=start + timedelta(hours=5 * n), cwd=workspaces[n % len(workspaces)],
                           model=MODELS[n % len(MODELS)])
        lifetimes = 2 if n % 3 == 2 else 1
        cumulative = 0
        for life in range(lifetimes):
            if life:
                b.resume()
            b.prompt("Run the tests and fix what fails")
            b.turn(life)
            cid = f"toolu_{n}_{life}"
            b.answer("", requests=[(cid, "bash", {"command": "npm test", "description": "Run tests"})])
            code = rng.choice((0, 1))
            b.tool(cid, "bash", {"command": "npm test"}, f"ok\n<exited with exit code {code}>")
            b.answer("Done.")
            read, write, out = rng.randint(1000, 9000), rng.randint(0, 800), rng.randint(50, 900)
            uncached = rng.randint(100, 2000)
            nano = (uncached + out) * 300_000 if n % 2 else None
            cumulative += nano or 0
            b.shutdown({b.model: metric(uncached + read + write, out, read, write, requests=2, nano_aiu=nano)},
                       total_nano_aiu=cumulative if nano else None)
            truth.messages += 4
            truth.tool_calls += 1
            truth.usage_rows += 1
            truth.tokens.update(input_uncached=uncached, cache_read=read, cache_write=write, output=out)
        truth.native_usd += cumulative / 1e11
        b.write(home, title=f"Fix the tests #{n}")
        truth.sessions += 1
    return truth
