"""Seeded pi session files, shaped as pi writes them (pi's own
packages/coding-agent/src/core/session-manager.ts and packages/coding-agent/docs/session.md, in
badlogic/pi-mono), for the tests and the demo. It counts what it writes, so
tests compare the lake to the truth: the native cost is what pi's `calculateCost` would record
(per-million rates times each bucket), a cost of 0 is priced offline (transforms.pricing)."""

import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from transforms.pi.normalise import PRICE_PROVIDER
from transforms.pricing import Buckets, price_buckets

# USD per million tokens (input, output, cache read, cache write), as pi's model registry has them
RATES = {"claude-sonnet-4-5": (3.0, 15.0, 0.3, 3.75), "gpt-5.1-codex": (1.25, 10.0, 0.125, 0.0)}


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def usage(input_tokens, output, cache_read=0, cache_write=0, model=None, priced=True) -> dict:
    """pi-ai's Usage: disjoint buckets, `cost` from the registry's rates (0 when unpriced)."""
    rates = RATES.get(model) if priced else None
    parts = [n * r / 1e6 for n, r in zip((input_tokens, output, cache_read, cache_write), rates)] if rates else [0.0] * 4
    return {"input": input_tokens, "output": output, "cacheRead": cache_read, "cacheWrite": cache_write,
            "totalTokens": input_tokens + output + cache_read + cache_write,
            "cost": {"input": parts[0], "output": parts[1], "cacheRead": parts[2], "cacheWrite": parts[3],
                     "total": sum(parts)}}


class SessionBuilder:
    """One session file, entry by entry; the clock moves `step` per entry."""

    def __init__(self, sid, *, start: datetime, cwd="/home/dev/shop", version: int | None = 3, parent_session=None,
                 step=timedelta(seconds=2), rng: random.Random | None = None):
        self.sid, self.cwd, self.now, self.step = sid, cwd, start, step
        self.rng = rng or random.Random(sid)
        self.version = version
        header = {"type": "session", "id": sid, "timestamp": iso(start), "cwd": cwd}
        if version is not None:
            header = {"type": "session", "version": version, **{k: v for k, v in header.items() if k != "type"}}
        if parent_session:
            header["parentSession"] = str(parent_session)
        self.lines: list[dict] = [header]
        self.leaf: str | None = None
        self.requests: list[tuple[Buckets, float, str, str, datetime]] = []  # own assistant messages

    def entry(self, type_, **fields) -> dict:
        self.now += self.step
        line = {"type": type_}
        if self.version is not None and self.version >= 2:
            line.update(id=f"{self.rng.getrandbits(32):08x}", parentId=self.leaf)
        line.update(timestamp=iso(self.now), **fields)
        self.lines.append(line)
        self.leaf = line.get("id")
        return line

    def message(self, **message) -> dict:
        return self.entry("message", message={**message, "timestamp": int(self.now.timestamp() * 1000) + 2000})

    def prompt(self, text):
        return self.message(role="user", content=[{"type": "text", "text": text}])

    def assistant(self, content, model="claude-sonnet-4-5", provider="anthropic", tokens=(1000, 100, 0, 0),
                  priced=True, stop="stop"):
        u = usage(*tokens, model=model, priced=priced)
        line = self.message(role="assistant", content=content, api="anthropic-messages", provider=provider,
                            model=model, usage=u, stopReason=stop)
        b = Buckets(input_uncached=tokens[0], cache_read=tokens[2], cache_write_5m=tokens[3], output=tokens[1])
        self.requests.append((b, u["cost"]["total"], model, provider, self.now))
        return line

    def tool_result(self, call_id, name, text, is_error=False):
        return self.message(role="toolResult", toolCallId=call_id, toolName=name,
                            content=[{"type": "text", "text": text}], isError=is_error)

    def branch(self, entry_id):
        """`/tree`: the next entry continues from an earlier one, in the same file."""
        self.leaf = entry_id

    def fork(self, sid, *, at: datetime | None = None) -> "SessionBuilder":
        """`/fork` or `--fork`: a new file whose header names this one and which starts with
        copies of its entries (same ids and times)."""
        child = SessionBuilder(sid, start=at or self.now + timedelta(minutes=1), cwd=self.cwd,
                               parent_session=self.path_in("<home>"), rng=self.rng)
        child.lines += [json.loads(json.dumps(line)) for line in self.lines[1:]]
        child.leaf = self.leaf
        return child

    def path_in(self, home) -> Path:
        folder = "--" + self.cwd.lstrip("/").replace("/", "-").replace(":", "-") + "--"
        name = self.lines[0]["timestamp"].replace(":", "-").replace(".", "-") + f"_{self.sid}.jsonl"
        return Path(home) / "sessions" / folder / name

    def write(self, home) -> Path:
        header = self.lines[0]
        if "parentSession" in header and header["parentSession"].startswith("<home>"):
            header["parentSession"] = str(Path(home) / Path(header["parentSession"]).relative_to("<home>"))
        path = self.path_in(home)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        return path


def request_cost(b: Buckets, native: float, model: str, provider: str, at: datetime) -> float | None:
    """What a request should cost: pi's own when above 0, else the offline price."""
    if native > 0:
        return native
    return price_buckets(b, model, PRICE_PROVIDER.get(provider, provider), at).cost_usd


@dataclass
class HomeTruth:
    sessions: int = 0
    messages: int = 0
    prompts: int = 0
    usage_rows: int = 0
    native_rows: int = 0
    unpriced_rows: int = 0
    input_tokens: int = 0  # uncached
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0  # sum of the priced requests
    parts_by_type: Counter = field(default_factory=Counter)
    tool_calls_by_name: Counter = field(default_factory=Counter)
    tool_errors: int = 0
    nonzero_exits: int = 0
    by_workspace: Counter = field(default_factory=Counter)

    def count(self, b: SessionBuilder, workspace: str) -> None:
        for buckets, native, model, provider, at in b.requests:
            cost = request_cost(buckets, native, model, provider, at)
            self.usage_rows += 1
            self.native_rows += native > 0
            self.unpriced_rows += cost is None
            self.input_tokens += buckets.input_uncached
            self.cache_read += buckets.cache_read
            self.cache_write += buckets.cache_write_5m
            self.output_tokens += buckets.output
            self.cost_usd += cost or 0.0
            self.by_workspace[workspace] += cost or 0.0
        self.sessions += 1


# (model, provider, priced by pi): a native cost, a subscription pi prices at 0, a local model
MODELS = (("claude-sonnet-4-5", "anthropic", True), ("gpt-5.1-codex", "openai-codex", False),
          ("qwen3-coder:30b", "ollama", False))


def _turn(b: SessionBuilder, rng: random.Random, truth: HomeTruth, model, provider, priced, tag) -> None:
    b.prompt("Fix the failing test")
    truth.messages += 1
    truth.prompts += 1
    truth.parts_by_type["text"] += 1
    for step in range(rng.randint(1, 3)):
        call_id = f"toolu_{tag}_{step}"
        kind = rng.choice(["bash", "bash", "edit", "read", "mcp__github__create_issue"])
        args = {"bash": {"command": rng.choice(["npm test", "ls -la"])}, "edit": {"path": "src/a.ts", "oldText": "a",
                "newText": "b"}, "read": {"path": "src/a.ts"}}.get(kind, {"title": "bug"})
        tokens = (rng.randint(50, 3000), rng.randint(20, 400), rng.randint(0, 20000), rng.randint(0, 3000))
        b.assistant([{"type": "thinking", "thinking": "Let me look."},
                     {"type": "toolCall", "id": call_id, "name": kind, "arguments": args}],
                    model=model, provider=provider, tokens=tokens, priced=priced, stop="toolUse")
        if kind == "bash" and rng.random() < 0.4:
            b.tool_result(call_id, kind, "FAIL\n\nCommand exited with code 1", is_error=True)
            truth.nonzero_exits += 1
        elif kind == "edit" and rng.random() < 0.5:
            b.tool_result(call_id, kind, "Could not find the exact text in src/a.ts.", is_error=True)
            truth.tool_errors += 1
        else:
            b.tool_result(call_id, kind, "ok")
        truth.tool_calls_by_name[kind] += 1
        truth.messages += 2
        truth.parts_by_type.update(reasoning=1, tool_call=1, tool_result=1)
    b.assistant([{"type": "text", "text": "Done."}], model=model, provider=provider,
                tokens=(rng.randint(50, 3000), rng.randint(10, 200), rng.randint(0, 20000), 0), priced=priced)
    truth.messages += 1
    truth.parts_by_type["text"] += 1


def generate_home(home, *, sessions=6, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 1, 6, 9, tzinfo=timezone.utc)) -> HomeTruth:
    """Write `sessions` sessions under `<home>/sessions/`: models cycle through a natively priced
    one, a subscription pi prices at 0 and a local model no table prices; every third session
    gets a `/tree` branch, a `/fork` of it and a session name."""
    rng = random.Random(seed)
    truth = HomeTruth()
    for n in range(sessions):
        workspace = workspaces[n % len(workspaces)]
        model, provider, priced = MODELS[n % len(MODELS)]
        b = SessionBuilder(str(uuid.UUID(int=rng.getrandbits(128), version=4)), start=start + timedelta(hours=7 * n),
                           cwd=workspace, rng=random.Random(rng.getrandbits(32)))
        b.entry("model_change", provider=provider, modelId=model)
        _turn(b, rng, truth, model, provider, priced, f"{n}")
        if n % 3 == 2:
            first = next(line["id"] for line in b.lines[1:] if line.get("message", {}).get("role") == "user")
            b.entry("session_info", name=f"session {n}")
            b.branch(first)  # the abandoned branch's requests were billed: they stay
            _turn(b, rng, truth, model, provider, priced, f"{n}b")
            fork = b.fork(str(uuid.UUID(int=rng.getrandbits(128), version=4)))
            _turn(fork, rng, truth, model, provider, priced, f"{n}f")
            fork.write(home)
            truth.count(fork, workspace)
        b.write(home)
        truth.count(b, workspace)
    return truth
