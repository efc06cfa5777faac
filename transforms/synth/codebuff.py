"""Seeded Codebuff chat folders, shaped as the CLI writes them (CodebuffAI/codebuff
`cli/src/utils/run-state-storage.ts`, `cli/src/types/chat.ts`), for the tests and the demo. It
counts what it writes, so tests compare the lake to the truth."""

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def chat_id(dt: datetime) -> str:
    return iso(dt).replace(":", "-")


class ChatBuilder:
    """One chat: ChatMessage[] plus the run state; `creditsUsed` in the run state accumulates."""

    def __init__(self, *, start: datetime, project_root="/home/dev/shop", step=timedelta(seconds=5)):
        self.start, self.now, self.step, self.project_root = start, start, step, project_root
        self.messages: list[dict] = []
        self.credits: list[float] = []  # per billed run
        self.total_credits = 0.0
        self.n = 0

    def _id(self, kind):
        self.n += 1
        return f"{kind}-{self.n}"

    def user(self, text):
        self.now += self.step
        self.messages.append({"id": self._id("user"), "variant": "user", "content": text, "timestamp": iso(self.now)})

    def ai(self, blocks, credits: float | None):
        """An AI message ending a run; `credits` None: the run failed or was stopped."""
        self.now += self.step
        m = {"id": self._id("ai"), "variant": "ai", "content": "", "blocks": blocks, "timestamp": iso(self.now),
             "isComplete": True}
        if credits is not None:
            self.total_credits += credits
            self.credits.append(credits)
            m["credits"] = credits
            m["metadata"] = {"runState": {"sessionState": {
                "fileContext": {"projectRoot": self.project_root},
                "mainAgentState": {"creditsUsed": self.total_credits, "directCreditsUsed": self.total_credits,
                                   "messageHistory": []}}}}
        else:
            m["userError"] = "Run failed"
        self.messages.append(m)
        return m

    def write(self, config_root, project="shop") -> Path:
        folder = Path(config_root) / "projects" / project / "chats" / chat_id(self.start)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "chat-messages.json").write_text(json.dumps(self.messages, indent=2))
        run_state = {"sessionState": {"fileContext": {"projectRoot": self.project_root, "cwd": self.project_root},
                                      "mainAgentState": {"creditsUsed": self.total_credits}}, "output": None}
        (folder / "run-state.json").write_text(json.dumps(run_state, indent=2))
        return folder


def text(content, reasoning=False) -> dict:
    block = {"type": "text", "content": content}
    if reasoning:
        block["textType"] = "reasoning"
    return block


def tool(call_id, name, args, output=None) -> dict:
    block = {"type": "tool", "toolCallId": call_id, "toolName": name, "input": args}
    if output is not None:
        block["output"] = output
    return block


def agent(agent_id, agent_type, blocks, status="complete") -> dict:
    return {"type": "agent", "agentId": agent_id, "agentName": agent_type.title(), "agentType": agent_type,
            "content": "done", "status": status, "blocks": blocks, "initialPrompt": "look around"}


@dataclass
class HomeTruth:
    sessions: int = 0
    messages: int = 0
    usage_rows: int = 0
    cost_usd: float = 0.0
    parts_by_type: Counter = field(default_factory=Counter)
    tool_calls_by_name: Counter = field(default_factory=Counter)
    nonzero_exits: int = 0
    failed_agents: int = 0
    by_workspace: Counter = field(default_factory=Counter)


def generate_home(home, *, sessions=6, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 1, 6, 9, tzinfo=timezone.utc)) -> HomeTruth:
    """Write `sessions` chats under the channel root `home` (`~/.config/manicode`): runs with
    tool calls and spawned sub-agents; every third chat has a failed run (no credits).

    A chat's id is its start time (`chat_id`), so the start depends on the seed: each chat
    starts at a minute, second and millisecond drawn from a stream of its own (`clock`), apart
    from `rng`, whose draws (and so a seed's figures) stay as they were. Two demos of other
    seeds landed by two machines are then no copies of each other's sessions
    (warehouse.catalog.checks.copied_sessions matches agent, id and start)."""
    rng = random.Random(seed)
    clock = random.Random(f"codebuff start {seed}")
    truth = HomeTruth()
    root = Path(home)
    for n in range(sessions):
        workspace = workspaces[n % len(workspaces)]
        at = start + timedelta(hours=5 * n, seconds=clock.randrange(3600), milliseconds=clock.randrange(1000))
        b = ChatBuilder(start=at, project_root=workspace)
        for turn in range(rng.randint(1, 3)):
            b.user("Fix the failing test")
            code = rng.choice([0, 0, 1])
            blocks = [text("Looking.", reasoning=True),
                      tool(f"t{n}-{turn}", "run_terminal_command", {"command": "npm test"},
                           json.dumps({"command": "npm test", "stdout": "ok", "exitCode": code})),
                      agent(f"a{n}-{turn}", "file-picker", [tool(f"f{n}-{turn}", "find_files", {"prompt": "tests"},
                                                                 "src/a.test.ts"), text("Found it.")],
                            status=rng.choice(["complete", "complete", "failed"])),
                      text("Done.")]
            credits = None if n % 3 == 2 and turn == 0 else round(rng.uniform(1, 40), 2)
            m = b.ai(blocks, credits)
            truth.nonzero_exits += code != 0
            truth.failed_agents += m["blocks"][2]["status"] == "failed"
            truth.tool_calls_by_name.update({"run_terminal_command": 1, "agent:file-picker": 1, "find_files": 1})
            truth.parts_by_type.update(text=3, reasoning=1, tool_call=3)
            truth.messages += 2
        b.write(root, project=Path(workspace).name)
        truth.sessions += 1
        truth.usage_rows += len(b.credits)
        truth.cost_usd += sum(b.credits) / 100
        truth.by_workspace[workspace] += sum(b.credits) / 100
    return truth
