"""Seeded Amp threads in their on-disk format (`threads/T-<uuid>.json`, as the peers' readers
describe it: transforms/amp/normalise.py), for the tests and the demo. The builder counts what it
writes, so tests compare the lake to the truth."""

import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

MODELS = ("claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001", "claude-opus-4-5-20251101")


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def usage(model, inp, out, read=0, write=0, at: datetime | None = None, credits=None) -> dict:
    u = {"model": model, "inputTokens": inp, "outputTokens": out, "cacheCreationInputTokens": write,
         "cacheReadInputTokens": read, "totalInputTokens": inp + write + read}
    if at is not None:
        u["timestamp"] = iso(at)
    if credits is not None:
        u["credits"] = credits
    return u


class ThreadBuilder:
    """One thread; the clock moves `step` per message; `messageId`s count from 0."""

    def __init__(self, tid: str, *, start: datetime, cwd="/home/dev/shop", title=None,
                 step=timedelta(seconds=2)):
        self.now, self.step = start, step
        self.thread = {"v": 0, "id": tid, "created": ms(start), "messages": [],
                       "env": {"initial": {"trees": [{"uri": f"file://{cwd}", "displayName": Path(cwd).name}],
                                           "platform": {"os": "linux"}}}}
        if title:
            self.thread["title"] = title

    @property
    def messages(self) -> list:
        return self.thread["messages"]

    def add(self, role: str, content: list, **extra) -> dict:
        self.now += self.step
        m = {"role": role, "messageId": len(self.messages), "content": content, "meta": {"sentAt": ms(self.now)},
             **extra}
        self.messages.append(m)
        return m

    def prompt(self, text: str):
        return self.add("user", [{"type": "text", "text": text}])

    def answer(self, blocks: list, use: dict | None = None):
        return self.add("assistant", blocks, **({"usage": use} if use else {}), state={"type": "complete"})

    def tool_results(self, *results):
        """(call id, status, result) each; results come back in a user message, as Anthropic's do."""
        return self.add("user", [{"type": "tool_result", "toolUseID": cid, "run": {"status": status, "result": res}}
                                 for cid, status, res in results])

    def ledger(self, to_message: int, model: str, inp: int, out: int, credits=None, **extra) -> dict:
        event = {"id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.thread['id']}/{to_message}/{len(extra)}")),
                 "timestamp": iso(self.now), "model": model, "tokens": {"input": inp, "output": out},
                 "operationType": "inference", "fromMessageId": max(to_message - 1, 0), "toMessageId": to_message,
                 **extra}
        if credits is not None:
            event["credits"] = credits
        self.thread.setdefault("usageLedger", {"events": []})["events"].append(event)
        return event

    def write(self, data_dir) -> Path:
        folder = Path(data_dir) / "threads"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.thread['id']}.json"
        path.write_text(json.dumps(self.thread, indent=2))
        return path


def tool_use(call_id: str, name: str, args: dict) -> dict:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


@dataclass
class HomeTruth:
    sessions: int = 0
    messages: int = 0
    parts: int = 0
    tool_calls: int = 0
    requests: int = 0
    tokens: Counter = field(default_factory=Counter)
    native_usd: float = 0.0


def generate_home(data_dir, *, sessions=6, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 1, 8, 9, tzinfo=timezone.utc)) -> HomeTruth:
    """`sessions` threads under `<data_dir>/threads/`: a prompt, a Bash call, its result and an
    answer; even threads carry a usage ledger with credits (a native cost), odd ones do not
    (priced from the tokens)."""
    rng = random.Random(seed)
    truth = HomeTruth()
    for n in range(sessions):
        tid = f"T-{uuid.UUID(int=rng.getrandbits(128), version=4)}"
        b = ThreadBuilder(tid, start=start + timedelta(hours=6 * n), cwd=workspaces[n % len(workspaces)],
                          title=f"Fix the build #{n}")
        model = MODELS[n % len(MODELS)]
        b.prompt("Fix the build")
        for step in range(2):
            inp, out = rng.randint(5, 400), rng.randint(20, 600)
            read, write = rng.randint(0, 20000), rng.randint(0, 900)
            blocks = ([{"type": "thinking", "thinking": "Check the build first.", "signature": "sig"},
                       tool_use(f"toolu_{n}", "Bash", {"cmd": "make build"})] if step == 0
                      else [{"type": "text", "text": "The build passes now."}])
            m = b.answer(blocks, usage(model, inp, out, read, write, at=b.now + b.step))
            truth.tokens.update(input_uncached=inp, output=out, cache_read=read, cache_write=write)
            truth.requests += 1
            if n % 2 == 0:
                credits = round((inp + out) * 1e-5, 6)
                b.ledger(m["messageId"], model, inp, out, credits=credits)
                truth.native_usd += credits
            truth.parts += len(blocks)
            if step == 0:
                b.tool_results((f"toolu_{n}", "done", {"output": "ok", "exitCode": rng.choice((0, 2))}))
                truth.parts += 1
                truth.tool_calls += 1
        truth.messages += 4
        truth.parts += 1  # the prompt
        b.write(data_dir)
        truth.sessions += 1
    return truth
