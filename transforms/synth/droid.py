"""Seeded Factory Droid sessions in their on-disk format (`sessions/<cwd slug>/<uuid>.jsonl` and
`<uuid>.settings.json`, as the peers' readers describe them: transforms/droid/normalise.py), for
the tests and the demo. The builder counts what it writes, so tests compare the lake to the truth."""

import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

MODELS = ("claude-sonnet-4-5-20250929", "gpt-5-codex", "claude-opus-4-5-20251101")


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def token_usage(inp, out, read=0, write=0, thinking=0) -> dict:
    return {"inputTokens": inp, "outputTokens": out, "cacheCreationTokens": write, "cacheReadTokens": read,
            "thinkingTokens": thinking}


class SessionBuilder:
    """One session's transcript lines; the clock moves `step` per message."""

    def __init__(self, sid: str, *, start: datetime, cwd="/home/dev/shop", title="Fix the build",
                 step=timedelta(seconds=3)):
        self.sid, self.cwd, self.now, self.step = sid, cwd, start, step
        self.lines: list[dict] = [{"type": "session_start", "id": sid, "title": title, "sessionTitle": title,
                                   "owner": "dev", "version": 2, "cwd": cwd}]
        self.settings: dict = {}

    def message(self, role: str, content: list, mid: str | None = None) -> dict:
        self.now += self.step
        line = {"type": "message", "id": mid or str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.sid}/{len(self.lines)}")),
                "timestamp": iso(self.now), "message": {"role": role, "content": content}}
        if len(self.lines) > 1:
            line["parentId"] = self.lines[-1].get("id")
        self.lines.append(line)
        return line

    def prompt(self, text: str, reminder: str | None = None):
        blocks = ([{"type": "text", "text": f"<system-reminder>{reminder}</system-reminder>"}] if reminder else []) + \
            [{"type": "text", "text": text}]
        return self.message("user", blocks)

    def call(self, call_id: str, name: str, args: dict, text: str | None = None):
        blocks = ([{"type": "text", "text": text}] if text else []) + \
            [{"type": "tool_use", "id": call_id, "name": name, "input": args}]
        return self.message("assistant", blocks)

    def result(self, call_id: str, content: str, is_error=False):
        return self.message("user", [{"type": "tool_result", "tool_use_id": call_id, "content": content,
                                      "is_error": is_error}])

    def answer(self, text: str):
        return self.message("assistant", [{"type": "text", "text": text}])

    def settle(self, model: str, usage: dict, provider="anthropic", lock_at: datetime | None = None):
        self.settings = {"model": model, "providerLock": provider, "reasoningEffort": "none",
                         "providerLockTimestamp": iso(lock_at or self.now), "autonomyMode": "auto-low",
                         "tokenUsage": usage}

    def write(self, home, flat=False) -> Path:
        folder = Path(home) / "sessions" / ("" if flat else self.cwd.replace("/", "-"))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{self.sid}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in self.lines))
        if self.settings:
            (folder / f"{self.sid}.settings.json").write_text(json.dumps(self.settings, indent=2))
        return folder / f"{self.sid}.jsonl"


@dataclass
class HomeTruth:
    sessions: int = 0
    messages: int = 0
    parts: int = 0
    tool_calls: int = 0
    tokens: Counter = field(default_factory=Counter)  # buckets as agentlake counts them


def generate_home(home, *, sessions=6, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 1, 9, 9, tzinfo=timezone.utc)) -> HomeTruth:
    """`sessions` sessions under `<home>/sessions/<cwd slug>/`: a prompt (with its system
    reminder), an Execute call, its result, an answer, and the settings with the running total."""
    rng = random.Random(seed)
    truth = HomeTruth()
    for n in range(sessions):
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        b = SessionBuilder(sid, start=start + timedelta(hours=4 * n), cwd=workspaces[n % len(workspaces)],
                           title=f"Fix the build #{n}")
        b.prompt("Fix the build", reminder="cwd and git status")
        b.call(f"call_{n}", "Execute", {"command": "make build", "riskLevel": "low"}, text="Building.")
        b.result(f"call_{n}", f"Exit code: {rng.choice((0, 2))}\nok")
        b.answer("Fixed.")
        inp, out, read, write, thinking = (rng.randint(100, 3000), rng.randint(50, 900), rng.randint(0, 90000),
                                           rng.randint(0, 4000), rng.randint(0, 300))
        b.settle(MODELS[n % len(MODELS)], token_usage(inp, out, read, write, thinking),
                 provider="openai" if "gpt" in MODELS[n % len(MODELS)] else "anthropic")
        b.write(home)
        truth.sessions += 1
        truth.messages += 4
        truth.parts += 2 + 2 + 1 + 1
        truth.tool_calls += 1
        truth.tokens.update(input_uncached=inp, output=out + thinking, cache_read=read, cache_write=write,
                            reasoning=thinking)
    return truth
