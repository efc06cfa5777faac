"""Seeded Aider chat histories for the tests and the demo, written the way Aider's `InputOutput`
writes them (`aider/io.py`: `append_chat_history` with its linebreak and blockquote rules, and
`base_coder.py`'s usage report and `format_tokens`/`format_cost`). Stdlib only. It counts what
it writes, so tests compare the lake to it."""

import math
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

HISTORY_NAME = ".aider.chat.history.md"


def format_tokens(count: int) -> str:
    if count < 1000:
        return f"{count}"
    if count < 10000:
        return f"{count / 1000:.1f}k"
    return f"{round(count / 1000)}k"


def format_cost(value: float) -> str:
    if value == 0:
        return "0.00"
    if abs(value) >= 0.01:
        return f"{value:.2f}"
    return f"{value:.{max(2, 2 - int(math.log10(abs(value))))}f}"


class History:
    """Appends to one history file as Aider does."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def _append(self, text: str, linebreak=False, blockquote=False) -> None:
        if blockquote:
            text = "> " + text.strip()
        if linebreak:
            text = text.rstrip() + "  \n"
        if not text.endswith("\n"):
            text += "\n"
        with self.path.open("a", encoding="utf-8") as f:
            f.write(text)

    def start(self, local: datetime) -> None:
        self._append(f"\n# aider chat started at {local:%Y-%m-%d %H:%M:%S}\n\n")

    def user(self, text: str) -> None:
        lines = text.splitlines() or ["<blank>"]
        self._append("\n#### " + "  \n#### ".join(lines), linebreak=True)

    def assistant(self, text: str) -> None:
        self._append("\n" + text.strip() + "\n\n")

    def tool(self, message: str) -> None:
        if "\n" in message:
            for line in message.splitlines():
                self._append(line, linebreak=True, blockquote=True)
        elif message.strip():
            self._append(message.strip(), linebreak=True, blockquote=True)

    def announce(self, model: str, edit_format="diff") -> None:
        self.tool("Aider v0.86.1")
        self.tool(f"Main model: {model} with {edit_format} edit format, prompt cache, infinite output")
        self.tool("Weak model: anthropic/claude-haiku-4-5")
        self.tool("Git repo: .git with 42 files")

    def usage(self, sent: int, received: int, *, write=0, hit=0, cost=None, session=None) -> None:
        report = f"Tokens: {format_tokens(sent)} sent"
        if write:
            report += f", {format_tokens(write)} cache write"
        if hit:
            report += f", {format_tokens(hit)} cache hit"
        report += f", {format_tokens(received)} received."
        if cost is not None:
            sep = "\n" if hit and write else " "
            report += f"{sep}Cost: ${format_cost(cost)} message, ${format_cost(session)} session."
        self.tool(report)


@dataclass
class HomeTruth:
    sessions: int = 0
    messages: int = 0
    requests: int = 0
    tool_calls: int = 0
    tokens: int = 0  # as printed (the parser's numbers)
    native_cost: float = 0.0  # the printed message costs
    files: list = field(default_factory=list)


def printed(count: int) -> int:
    text = format_tokens(count)
    return int(round(float(text[:-1]) * 1000)) if text.endswith("k") else int(text)


def generate_home(home, *, sessions=6, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 3, 2, 9)) -> HomeTruth:
    """Project dirs under `home`, one per workspace name, each with a chat history of several
    runs (sessions); the last run of each uses a model Aider cannot price (no cost printed).

    Aider names no session: the reader's id is the history file's path and the run's line, the
    same for two seeds' demos written at the same path, so the start depends on the seed: each run
    starts at a minute and second drawn from a stream of its own (`clock`), apart from `rng`,
    whose draws (and so a seed's figures) stay as they were. Two demos of other seeds landed by two
    machines are then no copies of each other's sessions (warehouse.catalog.checks.copied_sessions
    matches agent, id and start)."""
    rng = random.Random(seed)
    clock = random.Random(f"aider start {seed}")
    truth = HomeTruth()
    for w, workspace in enumerate(workspaces):
        hist = History(Path(home) / Path(workspace).name / HISTORY_NAME)
        truth.files.append(hist.path)
        runs = [n for n in range(sessions) if n % len(workspaces) == w]
        for k, n in enumerate(runs):
            hist.start(start + timedelta(days=n, hours=rng.randint(0, 6), seconds=clock.randrange(3600)))
            priced = k < len(runs) - 1 or len(runs) == 1
            hist.announce("anthropic/claude-sonnet-4-5" if priced else "ollama/qwen3-coder")
            truth.sessions += 1
            truth.messages += 1
            total = 0.0
            for turn in range(rng.randint(1, 3)):
                hist.user(f"change {n}.{turn}")
                hist.assistant(f"Edit for {n}.{turn}:\n\n> a quote in the reply\n#### not a user line\n")
                uncached, received = rng.randint(1_100, 30_000), rng.randint(50, 2_000)
                write, hit = rng.choice([(0, 0), (rng.randint(100, 5_000), 0),
                                         (rng.randint(100, 900), rng.randint(2_000, 20_000))])
                # Aider's "sent" is prompt_tokens + cache writes; with a current litellm the prompt
                # holds both cache classes (hit reports are written that way here)
                sent = uncached + write + (hit + write if hit else 0)
                cost = round(sent * 3e-6 + received * 15e-6, 4) if priced else None
                total += cost or 0
                hist.usage(sent, received, write=write, hit=hit, cost=cost, session=total)
                truth.messages += 3
                truth.requests += 1
                # as printed: total = sent - write + received (hits and writes inside sent), or
                # sent + received (writes inside sent, no hits)
                truth.tokens += printed(sent) - (printed(write) if hit else 0) + printed(received)
                truth.native_cost += float(format_cost(cost)) if cost is not None else 0
            if rng.random() < 0.7:
                hist.user("/run pytest -q")
                hist.tool("1 passed")
                truth.messages += 2
                truth.tool_calls += 1
    return truth
