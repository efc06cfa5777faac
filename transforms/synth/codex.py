"""Seeded Codex CLI rollouts, shaped as docs/FORMATS.md, "Codex: record shapes" describes them,
for the tests and the demo. It counts what it writes, so tests compare the lake to the truth. The truth's costs are
the offline price of each request's token delta (transforms.pricing.price_buckets)."""

import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from transforms.codex.usage import buckets
from transforms.pricing import price_buckets

ZERO = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0, "reasoning_output_tokens": 0,
        "total_tokens": 0}


def rfc3339(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def tokens(input_tokens, cached, output, reasoning=0, cache_write=None) -> dict:
    usage = {"input_tokens": input_tokens, "cached_input_tokens": cached, "output_tokens": output,
             "reasoning_output_tokens": reasoning, "total_tokens": input_tokens + output}
    if cache_write is not None:
        usage["cache_write_input_tokens"] = cache_write
    return usage


class RolloutBuilder:
    """One rollout, line by line. The clock moves `step` per line; token counts are cumulative."""

    def __init__(self, sid, *, start: datetime, cwd="/home/dev/shop", source="cli", provider="openai",
                 forked_from=None, step=timedelta(milliseconds=700), **meta):
        self.sid, self.cwd, self.now, self.step = sid, cwd, start, step
        self.lines: list[dict] = []
        self.total = dict(ZERO)
        self.requests: list[tuple[dict, str | None, datetime]] = []  # (delta, model, at) counted
        self.model: str | None = None
        payload = {"id": sid, "timestamp": rfc3339(start), "cwd": cwd, "originator": "codex_cli_rs",
                   "cli_version": "0.120.0", "instructions": None, "source": source, "model_provider": provider,
                   **meta}
        if forked_from:
            payload["forked_from_id"] = forked_from
        self.add("session_meta", payload, advance=False)

    def add(self, type_, payload, advance=True, at: datetime | None = None) -> dict:
        if advance:
            self.now += self.step
        line = {"timestamp": rfc3339(at or self.now), "type": type_, "payload": payload}
        self.lines.append(line)
        return line

    def item(self, **payload):
        return self.add("response_item", payload)

    def event(self, **payload):
        return self.add("event_msg", payload)

    def turn(self, model):
        self.model = model
        return self.add("turn_context", {"cwd": self.cwd, "approval_policy": "on-request", "model": model,
                                         "sandbox_policy": {"type": "workspace-write"}, "effort": "medium"})

    def injected(self):
        text = f"<environment_context>\n  <cwd>{self.cwd}</cwd>\n</environment_context>"
        return self.item(type="message", role="user", content=[{"type": "input_text", "text": text}])

    def prompt(self, text):
        self.item(type="message", role="user", content=[{"type": "input_text", "text": text}])
        return self.event(type="user_message", message=text, images=[])

    def reasoning(self, text):
        self.item(type="reasoning", summary=[{"type": "summary_text", "text": text}], content=None,
                  encrypted_content="gAAAAB")
        return self.event(type="agent_reasoning", text=text)

    def call(self, name, args: dict, call_id):
        return self.item(type="function_call", name=name, arguments=json.dumps(args), call_id=call_id)

    def output(self, call_id, text):
        return self.item(type="function_call_output", call_id=call_id, output=text)

    def patch(self, call_id, path):
        return self.item(type="custom_tool_call", status="completed", call_id=call_id, name="apply_patch",
                         input=f"*** Begin Patch\n*** Update File: {path}\n@@\n-a\n+b\n*** End Patch")

    def patch_output(self, call_id, path, ok=True):
        text = f"Success. Updated the following files:\nM {path}" if ok else \
            f"apply_patch verification failed: Failed to find expected lines in {path}"
        return self.item(type="custom_tool_call_output", call_id=call_id, output=text)

    def say(self, text):
        self.item(type="message", role="assistant", content=[{"type": "output_text", "text": text}])
        return self.event(type="agent_message", message=text)

    def tokens(self, input_tokens, cached, output, reasoning=0, repeats=0, cache_write=None):
        """A response's token_count (cumulative), re-emitted `repeats` times unchanged."""
        last = tokens(input_tokens, cached, output, reasoning, cache_write)
        for key, value in last.items():
            self.total[key] = self.total.get(key, 0) + value
        self.requests.append((last, self.model, self.now + self.step))
        for _ in range(1 + repeats):
            self.event(type="token_count", info={"total_token_usage": dict(self.total), "last_token_usage": last,
                                                 "model_context_window": 272000},
                       rate_limits={"primary": {"used_percent": 4.0, "window_minutes": 300}, "secondary": None})

    def replay(self, parent: "RolloutBuilder", gap=timedelta(seconds=2)):
        """Copy the parent's lines, as Codex does when it forks or spawns: one burst, fresh
        timestamps; the session's cumulative totals go on from the parent's. The session's own
        lines follow `gap` later."""
        at = self.now + timedelta(milliseconds=5)
        for line in parent.lines:
            self.add(line["type"], json.loads(json.dumps(line["payload"])), advance=False, at=at)
        self.total = dict(parent.total)
        self.model = parent.model
        self.now += gap

    def write(self, home, archived=False, local_day: str | None = None) -> Path:
        """`sessions/YYYY/MM/DD/rollout-<local time>-<id>.jsonl` (Codex names it in local time),
        or flat under `archived_sessions/`."""
        day = local_day or self.lines[0]["timestamp"][:10]
        name = f"rollout-{day}T{self.lines[0]['timestamp'][11:19].replace(':', '-')}-{self.sid}.jsonl"
        folder = Path(home) / ("archived_sessions" if archived else Path("sessions", *day.split("-")))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        return path


def spawn_source(parent_id: str, depth: int = 1) -> dict:
    return {"subagent": {"thread_spawn": {"parent_thread_id": parent_id, "depth": depth,
                                          "agent_nickname": "helper", "agent_role": "worker"}}}


@dataclass
class HomeTruth:
    sessions: int = 0  # session rows (sub-agents included; archived duplicates once)
    roots: int = 0
    messages: int = 0
    prompts: int = 0
    usage_rows: int = 0
    unpriced_requests: int = 0
    input_tokens: int = 0  # uncached + cached
    cached_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0  # sum of the priced requests
    parts_by_type: Counter = field(default_factory=Counter)
    tool_calls_by_name: Counter = field(default_factory=Counter)
    tool_errors: int = 0  # tools that could not run
    nonzero_exits: int = 0
    by_workspace: Counter = field(default_factory=Counter)  # cost per workspace


MODELS = ("gpt-5.3-codex", "gpt-5.1-codex-mini")
UNPRICED = "codex-auto-review"


def _steps(b: RolloutBuilder, rng: random.Random, truth: HomeTruth, tag: str) -> None:
    for step in range(rng.randint(1, 3)):
        call_id = f"call_{tag}_{step}"
        b.reasoning("Let me check.")
        kind = rng.choice(["exec", "exec", "patch", "plan", "mcp"])
        if kind == "exec":
            code = rng.choice([0, 0, 1])
            b.call("exec_command", {"cmd": rng.choice(["npm test", "cargo build", "ls -la"])}, call_id)
            truth.nonzero_exits += code != 0
            result = f"Chunk ID: 1\nWall time: 0.4 seconds\nProcess exited with code {code}\nOutput:\nok"
        elif kind == "plan":
            b.call("update_plan", {"plan": [{"step": "fix", "status": "in_progress"}]}, call_id)
            result = "Plan updated"
        elif kind == "mcp":
            b.call("mcp__github__create_issue", {"title": "bug"}, call_id)
            result = "failed to parse function arguments: missing field `body`" if rng.random() < 0.5 else "{}"
            truth.tool_errors += result.startswith("failed")
        else:
            b.patch(call_id, "src/login.ts")
        b.tokens(rng.randint(2_000, 20_000), rng.randint(0, 1_500), rng.randint(50, 600),
                 rng.randint(0, 40), repeats=rng.choice([0, 0, 1]))
        if kind == "patch":
            ok = rng.random() < 0.7
            b.patch_output(call_id, "src/login.ts", ok)
            truth.tool_errors += not ok
        else:
            b.output(call_id, result)
        name = {"exec": "exec_command", "plan": "update_plan", "mcp": "mcp__github__create_issue"}.get(kind, "apply_patch")
        truth.tool_calls_by_name[name] += 1
        truth.messages += 2  # the assistant message with the call, the tool output
        truth.parts_by_type.update(reasoning=1, tool_call=1, tool_result=1)
    b.say("Done.")
    truth.parts_by_type["text"] += 1
    b.tokens(rng.randint(2_000, 20_000), rng.randint(0, 1_500), rng.randint(20, 200), repeats=rng.choice([0, 1]))
    truth.messages += 1


def _count(b: RolloutBuilder, truth: HomeTruth, workspace: str) -> float:
    cost = 0.0
    for delta, model, at in b.requests:
        priced = price_buckets(buckets(delta), model, "openai", at)
        truth.usage_rows += 1
        truth.input_tokens += delta["input_tokens"]
        truth.cached_tokens += delta["cached_input_tokens"]
        truth.output_tokens += delta["output_tokens"]
        if priced.cost_usd is None:
            truth.unpriced_requests += 1
        else:
            cost += priced.cost_usd
    truth.cost_usd += cost
    truth.by_workspace[workspace] += cost
    return cost


def generate_home(home, *, sessions=6, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 1, 6, 9, tzinfo=timezone.utc)) -> HomeTruth:
    """Write `sessions` root rollouts under `<home>`: every third spawns a sub-agent that
    replays its history; every fourth is a review session on an unpriced model; the second is
    also copied under `archived_sessions/` (one session), every fifth only lives there."""
    rng = random.Random(seed)
    truth = HomeTruth()
    for n in range(sessions):
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        workspace = workspaces[n % len(workspaces)]
        review = n % 4 == 3
        b = RolloutBuilder(sid, start=start + timedelta(hours=7 * n), cwd=workspace,
                           source={"subagent": "review"} if review else "cli")
        b.turn(UNPRICED if review else MODELS[n % len(MODELS)])
        b.injected()
        b.prompt("Fix the failing test")
        truth.messages += 2
        truth.prompts += 1
        truth.parts_by_type.update(injected_context=1, text=1)
        _steps(b, rng, truth, f"{n}")
        if n % 3 == 2:
            child = RolloutBuilder(str(uuid.UUID(int=rng.getrandbits(128), version=4)), start=b.now, cwd=workspace,
                                   source=spawn_source(sid))
            child.replay(b)
            child.turn(MODELS[(n + 1) % len(MODELS)])
            child.prompt("Run the linter")
            truth.messages += 1
            truth.prompts += 1
            truth.parts_by_type["text"] += 1
            _steps(child, rng, truth, f"{n}s")
            child.write(home)
            _count(child, truth, workspace)
            truth.sessions += 1
        b.write(home, archived=n % 5 == 4)
        if n == 1:
            b.write(home, archived=True)
        _count(b, truth, workspace)
        truth.sessions += 1
        truth.roots += 1
    return truth
