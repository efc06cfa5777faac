"""An Aider chat history (`.aider.chat.history.md`) -> canonical rows. Pure. Learnt from Aider's
own source (Aider-AI/aider `aider/io.py`, `aider/coders/base_coder.py`); ccusage and tokscale do
not read Aider.

The file (io.py `append_chat_history`): `# aider chat started at YYYY-MM-DD HH:MM:SS` opens each
run (a session); each user line is `#### <text>  `; Aider's own output (announcements, prompts,
lint output, the usage report) is a blockquote line `> <text>  `; the model's reply is written
raw, once, after streaming ends (`ai_output`). A session is named by the line its header is on
(the file is only appended to, so the name is stable).

The traps:
- **Markdown in the reply.** A reply may itself contain `> quote` or `#### heading` lines. Aider
  ends every line it writes for the user or for itself with two spaces (`linebreak=True`), the
  reply's lines carry none: only a marker line ending in two spaces is a user or Aider line.
- **Local time.** The header is the machine's local time with no offset (`datetime.now()`): it
  is read as the ingesting machine's local time (the history lives on the machine that wrote
  it). Nothing else in the file has a time: every message gets its session's start time. A time
  in a daylight-saving change (an hour that repeats, or one that is skipped) has two readings an
  hour apart: the earlier is taken, and counted in the run's warnings.
- **Cumulative counters.** The usage report `Tokens: 2.3k sent, 1.2k cache write, 15k cache hit,
  340 received. Cost: $0.02 message, $0.37 session.` has the message's cost and the RUNNING
  session total (which carries over into the editor coder in architect mode): the message cost
  is the request's `native` cost; the session figure is never added.
- **Rounded numbers.** Tokens are printed rounded (`format_tokens`: exact below 1,000, one
  decimal of k below 10,000, whole k above) and costs to two decimals (more below $0.01): the
  lake holds the numbers as printed, and says so in `pricing_note`.
- **Buckets.** `sent = prompt_tokens + cache write` (calculate_and_show_tokens_and_cost), and what
  `prompt_tokens` holds depends on the litellm Aider ran with. Aider's own comment (and older
  litellm): Anthropic's prompt excludes both cache classes, so uncached = sent - write and hits
  are extra. Newer litellm puts both classes inside `prompt_tokens` (as DeepSeek always put its
  hits): then sent = uncached + hit + 2 x write. The file does not say which; a report whose
  `sent` is at least its hits plus its writes is read the newer way (uncached = sent - hit -
  2 x write: an older-litellm prompt that large would be uncached input bigger than the cached
  prefix, which prompt caching exists to avoid), and a `deepseek` model always is.
- **No cost printed** (a model Aider has no price for): priced from the tokens with the model of
  the latest `Model:`/`Main model:` announcement (`estimated`), else `unknown`.
- **Forks and sub-agents.** Architect mode's editor coder writes to the same file, each with its
  own usage report: both are requests of the session. `/run`, `!` and `/test` commands are the
  session's tool calls (`shell`), their output the blockquote that follows.
- **Pruned history.** Aider never rewrites the file; a user may delete it: the lake keeps what it
  read (warehouse retention).
"""

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from transforms.aider.tools import command_of, tool_category
from transforms.costs import session_cost
from transforms.findings import Findings
from transforms.pricing import Buckets, price_buckets
from transforms.tools import compact_json

PROVIDER = "aider"
HEADER = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$")
USER = re.compile(r"^####(?: (.*))?  $")
TOOL = re.compile(r"^>(?: (.*))?  $")
TOKENS = re.compile(r"^Tokens: (?P<sent>[\d.]+k?) sent(?:, (?P<write>[\d.]+k?) cache write)?"
                    r"(?:, (?P<hit>[\d.]+k?) cache hit)?, (?P<received>[\d.]+k?) received\.(?P<rest>.*)$")
COST = re.compile(r"Cost: \$(?P<message>[\d.]+) message, \$(?P<session>[\d.]+) session\.")
MODEL = re.compile(r"^(?:Main model|Model): (\S+) with ")
# Aider's own names for what it writes (it has no part types): -> the canonical part type
PART_TYPES = {"user_input": "text", "ai_output": "text", "command": "shell_command", "tool_output": "other",
              "usage_report": "other"}


@dataclass
class Block:
    kind: str  # user_input, ai_output or tool_output
    line: int  # first line (0-based)
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines).strip("\n") if self.kind != "ai_output" else "\n".join(self.lines).strip()


@dataclass
class Chat:
    line: int  # the header's line; -1 for text before any header
    started: datetime | None
    blocks: list[Block] = field(default_factory=list)
    clock_change: bool = False  # its local start time has two readings (in_a_clock_change)


@dataclass
class Context:
    source_id: str
    path: str  # the history file
    project_path: str
    run_at: datetime


def local_to_utc(text: str) -> datetime | None:
    """A naive local `YYYY-MM-DD HH:MM:SS` as UTC, in this machine's time zone (in a
    daylight-saving change, the earlier of its two readings: `fold=0`)."""
    try:
        return datetime.fromisoformat(text).astimezone(timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None


def in_a_clock_change(text: str) -> bool:
    """The local time is in an hour that repeats or is skipped here: it has two readings."""
    try:
        local = datetime.fromisoformat(text)
        return local.replace(fold=0).astimezone(timezone.utc) != local.replace(fold=1).astimezone(timezone.utc)
    except (ValueError, OverflowError, OSError):
        return False


def parse(text: str) -> list[Chat]:
    chats: list[Chat] = []
    current: Chat | None = None
    block: Block | None = None
    for no, line in enumerate(text.replace("\r\n", "\n").split("\n")):
        header = HEADER.match(line)
        if header:
            local = header.group(1)
            current, block = Chat(no, local_to_utc(local), clock_change=in_a_clock_change(local)), None
            chats.append(current)
            continue
        user, tool = USER.match(line), TOOL.match(line)
        kind = "user_input" if user else "tool_output" if tool else "ai_output"
        if kind == "ai_output" and not line.strip() and (block is None or block.kind != "ai_output"):
            if block is not None and block.kind == "user_input":
                block = None  # each prompt starts with a blank line: the next `####` is another prompt
            continue  # the blank lines Aider writes around its own entries
        if current is None:
            current = Chat(-1, None)
            chats.append(current)
        if block is None or block.kind != kind:
            block = Block(kind, no)
            current.blocks.append(block)
        block.lines.append((user or tool).group(1) or "" if kind != "ai_output" else line)
    for chat in chats:
        chat.blocks = [b for b in chat.blocks if b.kind != "ai_output" or b.text]
    return chats


def tokens(value: str | None) -> int | None:
    """`340` -> 340, `2.3k` -> 2300, `15k` -> 15000 (as printed; Aider rounds)."""
    if value is None:
        return None
    if value.endswith("k"):
        return int(round(float(value[:-1]) * 1000))
    return int(value)


def report_buckets(m: re.Match, model: str | None) -> Buckets:
    sent, write, hit, received = (tokens(m.group(k)) for k in ("sent", "write", "hit", "received"))
    deepseek = model is not None and "deepseek" in model.lower()
    hits_inside = deepseek or (bool(hit) and sent >= (hit or 0) + (write or 0))
    uncached = sent - (hit or 0) - 2 * (write or 0) if hits_inside else sent - (write or 0)
    return Buckets(input_uncached=max(uncached, 0), cache_read=hit, cache_write_5m=write, output=received)


def split_model(name: str | None) -> tuple[str | None, str | None]:
    """`anthropic/claude-sonnet-4-5` -> (`claude-sonnet-4-5`, `anthropic`): litellm's prefix."""
    if not name:
        return None, None
    provider, _, model = name.rpartition("/")
    return model, provider or None


def session_id(ctx: Context, chat: Chat) -> str:
    digest = hashlib.sha256(ctx.path.encode()).hexdigest()[:8]
    return f"aider-{digest}-{chat.line + 1}"


class _Normaliser:
    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.findings = Findings()
        self.out = {t: [] for t in ("sessions", "messages", "parts", "tool_calls", "usage", "quarantine")}
        self.model: str | None = None  # the latest announced main model, across sessions of the file

    def lineage(self, line: int) -> dict:
        return {"provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": self.ctx.project_path,
                "source_table": "chat_history", "source_rowid": line}

    def chat(self, chat: Chat) -> None:
        sid = session_id(self.ctx, chat)
        when = chat.started or self.ctx.run_at
        if chat.started is None:
            self.findings.null_timestamps += 1
        requests: list[tuple] = []
        pending_call: dict | None = None
        for index, block in enumerate(chat.blocks):
            mid = f"{sid}-{block.line + 1}"
            role = {"user_input": "user", "ai_output": "assistant", "tool_output": "system"}[block.kind]
            parts = self.parts(block, mid, sid, role, when)
            row = self.lineage(block.line)
            row.update(message_id=mid, session_id=sid, message_index=index, role=role, model=None,
                       llm_provider=None, created_at=when, updated_at=when, finished_at=None, is_summary=False,
                       part_count=len(parts), parts_ok=True, extra_columns=None)
            self.out["messages"].append(row)
            if pending_call is not None:  # a command's output is the blockquote right after it
                if block.kind == "tool_output":
                    out_text = "\n".join(p["text"] for p in parts if p["native_part_type"] == "tool_output")
                    pending_call.update(result_message_id=mid, has_result=True, result_text=out_text,
                                        result_size=len(out_text.encode()), result_at=when)
                pending_call = None
            for part in parts:  # in line order: a `/model` announcement applies to the reports after it
                if part["native_part_type"] == "tool_output":
                    for line in part["text"].split("\n"):
                        announced = MODEL.match(line)
                        self.model = announced.group(1) if announced else self.model
                elif part["native_part_type"] == "command":
                    pending_call = self.tool_call(part, when)
                elif part["native_part_type"] == "usage_report":
                    requests.append(self.usage(part, mid, sid, when))
            self.out["parts"].extend({k: v for k, v in p.items() if k != "raw_text"} for p in parts)
        cost, source = session_cost([(c, s) for c, s, _ in requests])
        totals = [t for _, _, t in requests if t is not None]
        model, provider = split_model(self.model)
        row = self.lineage(max(chat.line, 0))
        row.update(session_id=sid, parent_session_id=None, root_session_id=sid, is_root=True, title=None,
                   created_at=when, updated_at=when, cost_usd=cost, cost_source=source,
                   cost_includes_subagents=True, model=model, llm_provider=provider,
                   total_tokens=sum(totals) if totals else None, message_count=len(chat.blocks),
                   extra_columns=None)
        self.out["sessions"].append(row)

    def parts(self, block: Block, mid: str, sid: str, role: str, when) -> list[dict]:
        """A user block is one part (a command or text); Aider's output one part per entry, the
        usage report its own; the reply one text part."""
        if block.kind == "tool_output":
            items, plain = [], []
            for line in block.lines:
                if TOKENS.match(line) or (COST.search(line) and items and items[-1][0] == "usage_report"):
                    if plain:
                        items.append(("tool_output", "\n".join(plain)))
                        plain = []
                    if TOKENS.match(line):
                        items.append(("usage_report", line))
                    else:
                        items[-1] = ("usage_report", items[-1][1] + "\n" + line)
                else:
                    plain.append(line)
            if plain:
                items.append(("tool_output", "\n".join(plain)))
        elif block.kind == "user_input":
            items = [("command" if command_of(block.text) else "user_input", block.text)]
        else:
            items = [("ai_output", block.text)]
        out = []
        for i, (native, text) in enumerate(items):
            row = self.lineage(block.line)
            row.update(message_id=mid, session_id=sid, part_index=i, part_type=PART_TYPES[native],
                       native_part_type=native, is_known_type=True, role=role, created_at=when,
                       raw=compact_json({"type": native, "text": text}))
            if native == "command":
                name, argument = command_of(text)
                shell = tool_category(name) == "shell"
                row.update(part_type="shell_command" if shell else "other", tool_call_id=mid, tool_name=name,
                           tool_input=argument, shell_command=argument if shell else None, text=None if shell else text)
            else:
                row["text"] = text
            out.append((row, text))
        for row, text in out:
            row["raw_text"] = text  # dropped before the rows leave (not a column)
        return [r for r, _ in out]

    def tool_call(self, part: dict, when) -> dict:
        name, argument = command_of(part["raw_text"])
        row = {k: part[k] for k in ("provider", "source_id", "project_path", "source_table", "source_rowid")}
        row.update(session_id=part["session_id"], message_id=part["message_id"], result_message_id=None,
                   tool_call_id=part["tool_call_id"], tool_name=name, tool_category=tool_category(name),
                   input=compact_json({"command" if name != "web" else "url": argument}), input_raw=argument,
                   is_input_valid=True, command=argument if tool_category(name) == "shell" else None,
                   file_path=None, has_call=True, has_result=False, is_error=None, exit_code=None,
                   result_text=None, result_size=None, called_at=when, result_at=None)
        self.out["tool_calls"].append(row)
        return row

    def usage(self, part: dict, mid: str, sid: str, when) -> tuple:
        text = part["text"]
        m = TOKENS.match(text.split("\n")[0])
        model, provider = split_model(self.model)
        buckets = report_buckets(m, model)
        cost = COST.search(text)
        if cost:
            usd, source, note = float(cost.group("message")), "native", "Cost: $ message, as printed (rounded)"
        else:
            priced = price_buckets(buckets, model, provider, when)
            usd, source, note = priced.cost_usd, priced.cost_source, priced.note
        row = {k: part[k] for k in ("provider", "source_id", "project_path", "source_table", "source_rowid")}
        row.update(session_id=sid, message_id=mid, request_id=None, requested_at=when, model=model,
                   llm_provider=provider, is_sidechain=False, **buckets.columns(), cost_usd=usd,
                   cost_source=source, pricing_note=f"tokens as printed (rounded); {note}")
        self.out["usage"].append(row)
        return usd, source, buckets.total


def normalise(text: str, ctx: Context) -> tuple[dict[str, list[dict]], Findings]:
    n = _Normaliser(ctx)
    chats = parse(text)
    for chat in chats:
        n.chat(chat)
    changes = sum(chat.clock_change for chat in chats)
    if changes:
        n.findings.notes.append(
            f"{changes} chat start time{'s' if changes > 1 else ''} in a daylight-saving change of this "
            "machine's time zone (an hour that repeats or is skipped): read as the earlier of their two "
            "readings, an hour apart")
    return n.out, n.findings


def expected_counts(text: str) -> dict[str, int]:
    """Sessions and messages counted by the file's own markers, independently of the parser:
    headers, and runs of same-kind lines (user, Aider, other non-blank)."""
    lines = text.replace("\r\n", "\n").split("\n")
    sessions = sum(1 for line in lines if HEADER.match(line))
    return {"sessions": sessions}
