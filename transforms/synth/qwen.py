"""Seeded Qwen Code chat files in the real on-disk format (chatRecordingService.ts ChatRecords),
for the tests and the demo. It counts what it writes, so tests compare the lake to the truth."""

import json
import random
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from transforms.pricing import Buckets, price_buckets


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def project_id(cwd: str) -> str:
    """storage.ts sanitizeCwd: every character that is not a letter or digit becomes '-'."""
    return re.sub(r"[^a-zA-Z0-9]", "-", cwd)


def usage(prompt, completion, cached=0, reasoning=0) -> dict:
    """`usageMetadata` as Qwen's OpenAI converter fills it: completion includes the reasoning."""
    return {"promptTokenCount": prompt, "candidatesTokenCount": completion, "totalTokenCount": prompt + completion,
            "cachedContentTokenCount": cached, "thoughtsTokenCount": reasoning}


def buckets_of(u: dict) -> Buckets:
    """Disjoint buckets, spelled out for the OpenAI-shaped record above."""
    return Buckets(input_uncached=u["promptTokenCount"] - u["cachedContentTokenCount"],
                   cache_read=u["cachedContentTokenCount"], output=u["candidatesTokenCount"],
                   reasoning=u["thoughtsTokenCount"])


class QwenChat:
    """One session file `<base>/projects/<project id>/chats/<session id>.jsonl`, record by record."""

    def __init__(self, base, session_id: str, *, cwd: str, start: datetime, step=timedelta(seconds=2)):
        self.sid, self.cwd, self.now, self.step = session_id, cwd, start, step
        self.path = Path(base) / "projects" / project_id(cwd) / "chats" / f"{session_id}.jsonl"
        self.records: list[dict] = []
        self.last: str | None = None

    def add(self, type_: str, **fields) -> dict:
        self.now += self.step
        rec = {"uuid": str(uuid.uuid4()), "parentUuid": self.last, "sessionId": self.sid, "timestamp": iso(self.now),
               "type": type_, "cwd": self.cwd, "version": "0.9.0", "gitBranch": "main", **fields}
        self.records.append(rec)
        self.last = rec["uuid"]
        return rec

    def user(self, text: str, **fields) -> dict:
        return self.add("user", message={"role": "user", "parts": [{"text": text}]}, **fields)

    def assistant(self, *, model: str, tokens: dict | None, text: str | None = None, thought: str | None = None,
                  calls=(), **fields) -> dict:
        parts = ([{"text": thought, "thought": True}] if thought else []) + ([{"text": text}] if text else [])
        parts += [{"functionCall": {"id": cid, "name": name, "args": args}} for cid, name, args in calls]
        extra = {"usageMetadata": tokens} if tokens is not None else {}
        return self.add("assistant", model=model, message={"role": "model", "parts": parts}, **extra, **fields)

    def tool_result(self, call_id: str, name: str, output: str, status="success") -> dict:
        response = {"functionResponse": {"id": call_id, "name": name, "response": {"output": output}}}
        result = {"callId": call_id, "status": status, "responseParts": [response], "resultDisplay": output,
                  "error": {"message": output} if status == "error" else None}
        return self.add("tool_result", message={"role": "user", "parts": [response]}, toolCallResult=result)

    def system(self, subtype: str, payload: dict) -> dict:
        return self.add("system", subtype=subtype, systemPayload=payload)

    def rewind_to(self, record: dict) -> None:
        """/rewind: the chain goes on from before `record`; what came after stays on a dead branch."""
        self.last = record["parentUuid"]
        self.system("rewind", {"truncatedCount": 2})

    def branch(self, new_sid: str) -> "QwenChat":
        """/branch: every record copied verbatim under a new session id, with `forkedFrom`."""
        fork = QwenChat(self.path.parent.parent.parent.parent, new_sid, cwd=self.cwd, start=self.now)
        for rec in self.records:
            fork.records.append({**rec, "sessionId": new_sid, "parentUuid": fork.last,
                                 "forkedFrom": {"sessionId": self.sid, "messageUuid": rec["uuid"]}})
            fork.last = rec["uuid"]
        return fork

    def write(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("".join(json.dumps(r) + "\n" for r in self.records))
        return self.path


@dataclass
class HomeTruth:
    sessions: int = 0
    roots: int = 0
    messages: int = 0
    requests: int = 0
    tokens: Counter = field(default_factory=Counter)
    priced_cost_usd: float = 0.0
    unpriced_requests: int = 0
    tool_calls: Counter = field(default_factory=Counter)
    tool_errors: int = 0


MODELS = ("qwen3-coder-plus", "gpt-4.1", "deepseek-chat")
_TOOLS = [("run_shell_command", {"command": "npm test"}, "Command: npm test\nOutput: ok"),
          ("read_file", {"absolute_path": "/src/app.ts"}, "export const app = 1"),
          ("edit", {"file_path": "/src/app.ts", "old_string": "1", "new_string": "2"}, "Successfully modified"),
          ("mcp__github__create_issue", {"title": "bug"}, "created #7")]


def _count(truth: HomeTruth, chat: QwenChat) -> None:
    truth.sessions += 1
    own = [r for r in chat.records if "forkedFrom" not in r]
    truth.messages += len(own)
    for rec in own:
        if rec["type"] == "assistant" and rec.get("usageMetadata"):
            b = buckets_of(rec["usageMetadata"])
            truth.requests += 1
            truth.tokens.update({k: v or 0 for k, v in b.columns().items()})
            at = datetime.fromisoformat(rec["timestamp"].replace("Z", "+00:00"))
            cost = price_buckets(b, rec["model"], None, at).cost_usd
            truth.priced_cost_usd += cost or 0.0
            truth.unpriced_requests += cost is None
        for part in (rec.get("message") or {}).get("parts", []):
            if "functionCall" in part:
                truth.tool_calls[part["functionCall"]["name"]] += 1
        truth.tool_errors += (rec.get("toolCallResult") or {}).get("status") == "error"


def generate_home(base, *, sessions=5, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 1, 6, 9, tzinfo=timezone.utc)) -> HomeTruth:
    """Write `sessions` chats under `<base>` (a `~/.qwen`): each with a title and tool calls, every
    third one rewound, the second branched into a fork."""
    rng = random.Random(seed)
    truth = HomeTruth()
    for n in range(sessions):
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        chat = QwenChat(base, sid, cwd=workspaces[n % len(workspaces)], start=start + timedelta(hours=4 * n))
        model = MODELS[n % len(MODELS)]
        chat.user("Fix the failing test")
        for step in range(rng.randint(1, 3)):
            name, args, output = rng.choice(_TOOLS)
            call_id = f"call_{n}_{step}"
            chat.assistant(model=model, tokens=usage(rng.randint(2000, 20000), rng.randint(20, 600),
                                                     cached=rng.choice([0, 1024]), reasoning=rng.randint(0, 15)),
                           thought="Check the test first", calls=[(call_id, name, args)])
            chat.tool_result(call_id, name, output, status="error" if rng.random() < 0.2 else "success")
        asked = chat.user("Also update the changelog")
        chat.assistant(model=model, tokens=usage(5000, 40, cached=1024), text="Done.")
        if n % 3 == 2:
            chat.rewind_to(asked)  # its answer stays, on a dead branch: still billed
            chat.user("Never mind")
            chat.assistant(model=model, tokens=usage(5200, 10, cached=4096), text="OK.")
        chat.system("custom_title", {"customTitle": f"Fix the failing test ({n})", "titleSource": "auto"})
        chat.write()
        _count(truth, chat)
        truth.roots += 1
        if n == 1:
            fork = chat.branch(str(uuid.UUID(int=rng.getrandbits(128), version=4)))
            fork.user("Try another way")
            fork.assistant(model=model, tokens=usage(7000, 90, cached=2048), text="Another way.")
            fork.write()
            _count(truth, fork)
            truth.roots += 1
    return truth
