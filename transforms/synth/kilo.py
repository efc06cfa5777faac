"""Seeded Kilo Code task folders, shaped as the extension writes them (Kilo-Org/kilocode-legacy
`src/core/task/Task.ts`, `src/core/task-persistence/`), for the tests and the demo. It counts what
it writes, so tests compare the lake to the truth."""

import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from transforms.kilo.discover import EXTENSION_ID
from transforms.kilo.normalise import model_vendor
from transforms.pricing import Buckets, price_buckets

# USD per million tokens (input, output, cache read, cache write), as Kilo's model info has them
RATES = {"anthropic/claude-sonnet-4.5": (3.0, 15.0, 0.3, 3.75), "claude-sonnet-4-5": (3.0, 15.0, 0.3, 3.75)}


def ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def environment_details(cwd: str, model: str, mode="code") -> str:
    return (f"<environment_details>\n# Current Time\n2026-01-06\n\n# Current Mode\n<slug>{mode}</slug>\n"
            f"<name>Code</name>\n<model>{model}</model>\n\n# Current Workspace Directory ({cwd}) Files\n"
            f"src/\n</environment_details>")


class TaskBuilder:
    """One task folder: the API history and the UI messages, written side by side."""

    def __init__(self, task_id, *, start: datetime, cwd="/home/dev/shop", model="anthropic/claude-sonnet-4.5",
                 step=timedelta(seconds=3)):
        self.task_id, self.cwd, self.model, self.now, self.step = task_id, cwd, model, start, step
        self.api: list[dict] = []
        self.ui: list[dict] = []
        self.requests: list[tuple[Buckets, float | None, str | None, datetime]] = []  # what was billed

    def tick(self) -> int:
        self.now += self.step
        return ms(self.now)

    def task(self, text):
        """The first turn: the task as the UI shows it, and the API's user message."""
        self.ui.append({"ts": self.tick(), "type": "say", "say": "text", "text": text, "images": []})
        return self.user([{"type": "text", "text": f"<task>\n{text}\n</task>"},
                          {"type": "text", "text": environment_details(self.cwd, self.model)}])

    def user(self, content):
        self.api.append({"role": "user", "content": content, "ts": self.tick()})
        return self.api[-1]

    def request(self, tokens_in, tokens_out, reads=0, writes=0, protocol="anthropic", cost=None, total_input=True):
        """A finished api_req_started. `total_input`: tokensIn counts the cache (Kilo >= 4.119);
        `cost` None: what Kilo's price table gives, 0: a model it has no price for."""
        uncached = tokens_in - reads - writes if total_input or protocol != "anthropic" else tokens_in
        rates = RATES.get(self.model)
        if cost is None:
            cost = sum(n * r / 1e6 for n, r in zip((uncached, tokens_out, reads, writes), rates)) if rates else 0.0
        info = {"apiProtocol": protocol, "tokensIn": tokens_in, "tokensOut": tokens_out, "cacheWrites": writes,
                "cacheReads": reads, "cost": cost}
        self.ui.append({"ts": self.tick(), "type": "say", "say": "api_req_started", "text": json.dumps(info)})
        self.requests.append((Buckets(input_uncached=uncached, cache_read=reads, cache_write_5m=writes,
                                      output=tokens_out), cost, self.model, self.now))
        return info

    def placeholder(self):
        """A request that never finished (the editor closed mid-stream)."""
        self.ui.append({"ts": self.tick(), "type": "say", "say": "api_req_started",
                        "text": json.dumps({"apiProtocol": "anthropic"})})

    def assistant(self, content):
        self.api.append({"role": "assistant", "content": content, "ts": self.tick()})
        self.ui.append({"ts": ms(self.now), "type": "say", "say": "text",
                        "text": next((b.get("text") for b in content if b.get("type") == "text"), ""),
                        "partial": False})
        return self.api[-1]

    def tool(self, call_id, name, args, result, is_error=False):
        self.assistant([{"type": "text", "text": "Let me check."},
                        {"type": "tool_use", "id": call_id, "name": name, "input": args}])
        return self.user([{"type": "tool_result", "tool_use_id": call_id, "content": result, "is_error": is_error},
                          {"type": "text", "text": environment_details(self.cwd, self.model)}])

    def condense(self, cost, summary="Summary of the task so far."):
        self.ui.append({"ts": self.tick(), "type": "say", "say": "condense_context", "partial": False,
                        "contextCondense": {"cost": cost, "prevContextTokens": 90000, "newContextTokens": 9000,
                                            "summary": summary}})
        self.requests.append((Buckets(), cost, None, self.now))

    def fast_apply(self, path, tokens_in, tokens_out, cost):
        text = {"tool": "editedExistingFile", "path": path, "diff": "-a\n+b",
                "fastApplyResult": {"description": "morph", "tokensIn": tokens_in, "tokensOut": tokens_out,
                                    "cost": cost}}
        self.ui.append({"ts": self.tick(), "type": "ask", "ask": "tool", "text": json.dumps(text)})
        self.requests.append((Buckets(input_uncached=tokens_in, output=tokens_out), cost, self.model, self.now))

    def write(self, storage) -> Path:
        folder = Path(storage) / "tasks" / self.task_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "api_conversation_history.json").write_text(json.dumps(self.api))
        (folder / "ui_messages.json").write_text(json.dumps(self.ui))
        (folder / "task_metadata.json").write_text(json.dumps({"files_in_context": []}))
        return folder


def storage_in(config_home) -> Path:
    """The extension's global storage under a Linux VS Code's user dir (`$XDG_CONFIG_HOME`)."""
    return Path(config_home) / "Code" / "User" / "globalStorage" / EXTENSION_ID


def request_cost(b: Buckets, cost: float | None, model: str | None, at: datetime) -> float | None:
    if cost and cost > 0:
        return cost
    name, vendor = model_vendor(model)
    return price_buckets(b, name, vendor, at).cost_usd


@dataclass
class HomeTruth:
    sessions: int = 0
    messages: int = 0
    usage_rows: int = 0
    unpriced_rows: int = 0
    input_tokens: int = 0  # uncached
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    parts_by_type: Counter = field(default_factory=Counter)
    tool_calls_by_name: Counter = field(default_factory=Counter)
    tool_errors: int = 0
    nonzero_exits: int = 0
    by_workspace: Counter = field(default_factory=Counter)

    def count(self, b: TaskBuilder) -> None:
        for buckets, cost, model, at in b.requests:
            usd = request_cost(buckets, cost, model, at)
            self.usage_rows += 1
            self.unpriced_rows += usd is None
            self.input_tokens += buckets.input_uncached or 0
            self.cache_read += buckets.cache_read or 0
            self.cache_write += buckets.cache_write_5m or 0
            self.output_tokens += buckets.output or 0
            self.cost_usd += usd or 0.0
            self.by_workspace[b.cwd] += usd or 0.0
        self.sessions += 1
        self.messages += len(b.api)


MODELS = ("anthropic/claude-sonnet-4.5", "openai/gpt-5.1", "local/qwen3-coder")


def generate_home(storage, *, sessions=6, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 1, 6, 9, tzinfo=timezone.utc)) -> HomeTruth:
    """Write `sessions` tasks under `<storage>/tasks/` (the extension's global storage, e.g.
    `storage_in(config_home)`): models cycle through a priced one, one Kilo prices at 0
    (estimated by us) and a local one nobody prices; every third task is condensed and has a
    fast-apply edit and an unfinished request."""
    rng = random.Random(seed)
    truth = HomeTruth()
    for n in range(sessions):
        model = MODELS[n % len(MODELS)]
        b = TaskBuilder(str(uuid.UUID(int=rng.getrandbits(128), version=4)), start=start + timedelta(hours=5 * n),
                        cwd=workspaces[n % len(workspaces)], model=model)
        b.task("Fix the failing test")
        truth.parts_by_type.update(text=1, injected_context=1)
        for step in range(rng.randint(1, 3)):
            reads, writes = rng.randint(0, 20000), rng.randint(0, 2000)
            b.request(rng.randint(100, 3000) + reads + writes, rng.randint(20, 500), reads, writes,
                      cost=None if n % 3 == 0 else 0.0)
            kind = rng.choice(["execute_command", "read_file", "apply_diff", "mcp--github--create_issue"])
            args = {"execute_command": {"command": "npm test"}, "read_file": {"path": "src/a.ts"},
                    "apply_diff": {"path": "src/a.ts", "diff": "<<<"}}.get(kind, {"title": "bug"})
            code = rng.choice([0, 1]) if kind == "execute_command" else None
            error = kind == "apply_diff" and rng.random() < 0.5
            result = f"Command executed in terminal within working directory '{b.cwd}'. Exit code: {code}\nOutput:\nok" \
                if code is not None else ("Error: no match" if error else "ok")
            b.tool(f"toolu_{n}_{step}", kind, args, result, is_error=error)
            truth.tool_calls_by_name[kind] += 1
            truth.tool_errors += error
            truth.nonzero_exits += bool(code)
            truth.parts_by_type.update(text=1, tool_call=1, tool_result=1, injected_context=1)
        b.request(rng.randint(100, 3000), rng.randint(20, 200), cost=None if n % 3 == 0 else 0.0)
        b.assistant([{"type": "text", "text": "Done."}])
        truth.parts_by_type["text"] += 1
        if n % 3 == 2:
            b.condense(0.0123)
            b.fast_apply("src/a.ts", 900, 300, 0.0021)
            b.placeholder()
        b.write(storage)
        truth.count(b)
    return truth
