"""One Codebuff chat folder -> canonical rows. Pure.

The store, from Codebuff's source (CodebuffAI/codebuff: `cli/src/utils/run-state-storage.ts`,
`cli/src/types/chat.ts`, `cli/src/hooks/helpers/send-message.ts`, `cli/src/project-files.ts`;
the older `npm-app/src/chat-storage.ts`): `~/.config/manicode[-<env>]/projects/<project dir
name>/chats/<chat id>/`, the chat id being its start time (ISO, `:` as `-`). Two layouts:
- the CLI (2025-): `chat-messages.json`, the chat as shown: ChatMessage[] (`id`, `variant`
  user/ai/agent/error, `content`, `blocks` text/tool/agent/image/plan/..., `timestamp`,
  `credits`, `metadata.runState`), and `run-state.json`, the SDK's RunState (not needed);
- the older npm-app: `messages.json`, `{id, messages, updatedAt}`, the model's messages
  (`role`, `content` text/reasoning/tool-call/tool-result parts); it records no spend at all.

The traps, and what is done about them:
- cost: the model runs on Codebuff's servers, which bill in credits; the CLI records a run's
  credits on the AI message that ends it (`credits`, set by handleRunCompletion from the run's
  actual credits). That is the agent's own charge: `native`, at Codebuff's standard price of one
  US cent per credit (credits bought in bulk can cost less: the price paid is not in the file).
  An AI message without `credits` (a run that failed or was stopped) is not a billed request.
- tokens: not recorded. The chat files hold no token counts (ChatMessageMetadata has
  `bashCwd`, `isCollapsed`, `userOpened`, `runState` only); ccusage and tokscale look for
  `metadata.usage` and provider usage inside the run state, which the CLI does not write: they
  find nothing and price nothing, or count only credits. Token buckets are NULL here, never 0.
- cumulative counters: each AI message's `metadata.runState` is the whole session state after
  that run (`mainAgentState.creditsUsed` and the message history keep growing across runs):
  never added; only the per-run `credits` are.
- sub-agents: `agent` blocks inside the AI message (spawned by `spawn_agents`), with their own
  nested blocks; their spend is inside the run's credits (never added again). They are tool
  calls of category `agent` here, their nested blocks parts of the same message.
- pruned history: the CLI keeps only the last 100 chat messages in memory and in the file
  (prepareUserMessage, `next.slice(-100)`): older messages, and their credits, leave the file;
  the lake holds what the latest read holds (a run reports how many messages the file holds).
- streamed duplicates: none: the file is rewritten whole after each run.
- message ids: the CLI numbers its messages per chat (`user-1`, `ai-2`), so they repeat across the
  chats of a project, which are one source (transforms.bundle). A message's id is
  `<chat id>:<its own id>` (`<chat id>:<position>` without one, as in the npm-app's layout), unique
  within the source as every agent's is; its own id stays in `extra_columns.id`.
"""

from dataclasses import dataclass

from transforms import jsontext
from transforms.codebuff import tools as t
from transforms.findings import Findings
from transforms.timestamps import from_iso
from transforms.tools import compact_json, decode_input

PROVIDER = "codebuff"
USD_PER_CREDIT = 0.01  # Codebuff's standard rate: 1 credit = 1 US cent
ROLES = {"user": "user", "ai": "assistant", "agent": "assistant", "error": "system"}
OTHER_BLOCKS = {"agent-list", "mode-divider", "ask-user", "gate-state", "html"}


@dataclass
class Context:
    source_id: str
    chat_id: str
    project_path: str
    chat_started: object = None  # the chat id's time, for rows with none of their own


def _str(v):
    return v if isinstance(v, str) else None


def _decoded_size(data) -> int | None:
    """Bytes held by a base64 string (what the attachment weighs), without decoding it."""
    return len(data.rstrip("=")) * 3 // 4 if isinstance(data, str) else None


def credits_of(m: dict) -> float | None:
    c = m.get("credits")
    return float(c) if isinstance(c, (int, float)) and not isinstance(c, bool) and c >= 0 else None


def exit_code_of(output) -> int | None:
    """run_terminal_command's result is JSON with an `exitCode`."""
    doc = output if isinstance(output, dict) else None
    if doc is None and isinstance(output, str) and output.lstrip().startswith("{"):
        try:
            doc = jsontext.loads(output)
        except (ValueError, RecursionError):
            doc = None
    code = doc.get("exitCode") if isinstance(doc, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


class Walker:
    def __init__(self, messages: list, ctx: Context, findings: Findings, legacy: bool):
        self.messages, self.ctx, self.findings, self.legacy = messages, ctx, findings, legacy
        self.out = {"messages": [], "parts": [], "tool_calls": [], "usage": []}
        self.calls: dict[str, dict] = {}
        self.table = "messages" if legacy else "chat-messages"
        self.ids: set[str] = set()

    def lineage(self, no: int) -> dict:
        return {"provider": PROVIDER, "source_id": self.ctx.source_id, "project_path": self.ctx.project_path,
                "source_table": self.table, "source_rowid": no}

    def run(self) -> dict:
        for no, m in enumerate(self.messages):
            if not isinstance(m, dict):
                self.findings.unknown_part_types["not an object"] += 1
                msg = self.message(no, None, None, None)
                self.add_part(msg, {"part_type": "other", "native_part_type": None, "is_known_type": False}, m)
            elif self.legacy:
                self.legacy_message(no, m)
            else:
                self.chat_message(no, m)
        return self.out

    def message_id(self, no: int, native: str | None) -> str:
        """`<chat id>:<own id>`, else `<chat id>:<position>`; an own id seen before in the chat gets
        its position too (see the module's docstring)."""
        message_id = f"{self.ctx.chat_id}:{native or no}"
        if message_id in self.ids:
            message_id = f"{self.ctx.chat_id}:{native}@{no}"
        self.ids.add(message_id)
        return message_id

    def message(self, no, native_id, role, at) -> dict:
        row = {**self.lineage(no), "message_id": self.message_id(no, native_id),
               "session_id": self.ctx.chat_id, "message_index": len(self.out["messages"]), "role": role,
               "model": None, "llm_provider": None, "created_at": at or self.ctx.chat_started,
               "updated_at": at or self.ctx.chat_started, "finished_at": None, "is_summary": False, "part_count": 0,
               "parts_ok": True}
        self.out["messages"].append(row)
        return row

    def add_part(self, msg: dict, cols: dict, raw) -> None:
        self.out["parts"].append({**self.lineage(msg["source_rowid"]), "message_id": msg["message_id"],
                                  "session_id": self.ctx.chat_id, "part_index": msg["part_count"],
                                  "role": msg["role"], "created_at": msg["created_at"], **cols,
                                  "raw": compact_json(raw)})
        msg["part_count"] += 1

    # --- the CLI's ChatMessage[]

    def chat_message(self, no: int, m: dict) -> None:
        variant = _str(m.get("variant"))
        msg = self.message(no, _str(m.get("id")), ROLES.get(variant, variant), from_iso(m.get("timestamp")))
        extra = {k: v for k, v in m.items() if k in ("id", "agent", "isCompletion", "completionTime", "userError",
                                                     "parentId", "validationErrors")}
        msg["extra_columns"] = compact_json(extra) if extra else None
        blocks = m.get("blocks")
        if isinstance(blocks, list) and blocks:
            for block in blocks:
                self.block(msg, no, block)
        elif isinstance(m.get("content"), str) and m["content"]:
            self.add_part(msg, {"part_type": "text", "native_part_type": "content", "is_known_type": True,
                                "text": m["content"]}, m["content"])
        credits = credits_of(m)
        if credits is not None and msg["role"] == "assistant":
            msg["finished_at"] = msg["created_at"]
            self.out["usage"].append({
                **self.lineage(no), "session_id": self.ctx.chat_id, "message_id": msg["message_id"],
                "request_id": None, "requested_at": msg["created_at"], "model": None, "llm_provider": "codebuff",
                "is_sidechain": False, "input_uncached_tokens": None, "cache_read_tokens": None,
                "cache_write_5m_tokens": None, "cache_write_1h_tokens": None, "output_tokens": None,
                "reasoning_tokens": None, "total_tokens": None, "cost_usd": round(credits * USD_PER_CREDIT, 9),
                "cost_source": "native", "pricing_note": f"{credits:g} Codebuff credits at $0.01 each"})

    def block(self, msg: dict, no: int, block, agent: str | None = None) -> None:
        kind = _str(block.get("type")) if isinstance(block, dict) else None
        if kind == "text":
            reasoning = block.get("textType") == "reasoning"
            self.add_part(msg, {"part_type": "reasoning" if reasoning else "text", "native_part_type": kind,
                                "is_known_type": True, ("reasoning" if reasoning else "text"): _str(block.get("content"))},
                          block)
        elif kind == "plan":
            self.add_part(msg, {"part_type": "text", "native_part_type": kind, "is_known_type": True,
                                "text": _str(block.get("content"))}, block)
        elif kind == "image":
            size = block.get("size")
            self.add_part(msg, {"part_type": "binary", "native_part_type": kind, "is_known_type": True,
                                "mime_type": _str(block.get("mediaType")),
                                "binary_path": _str(block.get("filename")),
                                "binary_size": size if isinstance(size, int) else _decoded_size(block.get("image"))},
                          block)
        elif kind == "tool":
            self.tool(msg, no, _str(block.get("toolCallId")), _str(block.get("toolName")), block.get("input"),
                      block.get("output"), "output" in block, None, block)
        elif kind == "agent":
            nested = block.get("blocks")
            status = block.get("status")
            self.tool(msg, no, _str(block.get("agentId")), f"agent:{block.get('agentType')}",
                      {"prompt": block.get("initialPrompt"), "params": block.get("params")},
                      _str(block.get("content")), status in ("complete", "failed", "cancelled"),
                      True if status == "failed" else None,
                      {k: v for k, v in block.items() if k != "blocks"}, category="agent")
            for inner in nested if isinstance(nested, list) else []:  # the sub-agent's own output
                self.block(msg, no, inner)
        else:
            known = kind in OTHER_BLOCKS
            if not known:
                self.findings.unknown_part_types[str(kind)] += 1
            self.add_part(msg, {"part_type": "other", "native_part_type": kind, "is_known_type": known}, block)

    def tool(self, msg, no, call_id, name, args, output, has_result, is_error, raw, category=None) -> None:
        call_id = call_id or f"{msg['message_id']}:{msg['part_count']}"
        raw_input = args if isinstance(args, str) else compact_json(args) if args is not None else None
        decoded = decode_input(args)
        self.add_part(msg, {"part_type": "tool_call", "native_part_type": raw.get("type"), "is_known_type": True,
                            "tool_call_id": call_id, "tool_name": name, "tool_input": raw_input}, raw)
        text = output if isinstance(output, str) or output is None else compact_json(output)
        if has_result:  # the CLI keeps the call and its output in one block, like OpenCode's `tool` part
            part = self.out["parts"][-1]
            part.update(tool_result=text, is_error=is_error)
        self.out["tool_calls"].append({
            **self.lineage(no), "session_id": self.ctx.chat_id, "message_id": msg["message_id"],
            "tool_call_id": call_id, "tool_name": name, "tool_category": category or t.TOOLS.category(name),
            "input": compact_json(decoded) if decoded is not None else None, "input_raw": raw_input,
            "is_input_valid": decoded is not None, "command": t.TOOLS.command(name, decoded),
            "file_path": t.TOOLS.file_path(name, decoded), "has_call": True, "has_result": has_result,
            "is_error": is_error if has_result else None,
            "exit_code": exit_code_of(output) if has_result and name in t.TOOLS.shell_tools else None,
            "result_message_id": msg["message_id"] if has_result else None, "result_text": text if has_result else None,
            "result_size": len((text or "").encode("utf-8", "replace")) if has_result else None,
            "called_at": msg["created_at"], "result_at": msg["created_at"] if has_result else None})

    # --- the npm-app's Message[]

    def legacy_message(self, no: int, m: dict) -> None:
        role = _str(m.get("role"))
        msg = self.message(no, None, role, None)
        content = m.get("content")
        items = [content] if isinstance(content, (str, dict)) else content if isinstance(content, list) else []
        for part in items:
            kind = "text" if isinstance(part, str) else _str(part.get("type")) if isinstance(part, dict) else None
            if kind == "text":
                self.add_part(msg, {"part_type": "text", "native_part_type": kind, "is_known_type": True,
                                    "text": part if isinstance(part, str) else _str(part.get("text"))}, part)
            elif kind == "reasoning":
                self.add_part(msg, {"part_type": "reasoning", "native_part_type": kind, "is_known_type": True,
                                    "reasoning": _str(part.get("text"))}, part)
            elif kind == "tool-call":
                self.legacy_call(msg, no, part)
            elif kind == "tool-result":
                self.legacy_result(msg, part)
            elif kind in ("image", "file"):
                self.add_part(msg, {"part_type": "binary", "native_part_type": kind, "is_known_type": True,
                                    "mime_type": _str(part.get("mediaType"))}, part)
            else:
                self.findings.unknown_part_types[str(kind)] += 1
                self.add_part(msg, {"part_type": "other", "native_part_type": kind, "is_known_type": False}, part)

    def legacy_call(self, msg, no, part) -> None:
        call_id, name, args = _str(part.get("toolCallId")), _str(part.get("toolName")), part.get("input")
        self.tool(msg, no, call_id, name, args, None, False, None, part)
        self.calls[self.out["tool_calls"][-1]["tool_call_id"]] = self.out["tool_calls"][-1]

    def legacy_result(self, msg, part) -> None:
        call_id = _str(part.get("toolCallId"))
        output = part.get("output")
        text = output if isinstance(output, str) else compact_json(output) if output is not None else None
        self.add_part(msg, {"part_type": "tool_result", "native_part_type": "tool-result", "is_known_type": True,
                            "tool_call_id": call_id, "tool_name": _str(part.get("toolName")), "tool_result": text},
                      part)
        call = self.calls.pop(call_id, None)
        if call:
            call.update(has_result=True, result_message_id=msg["message_id"], result_text=text,
                        result_size=len((text or "").encode("utf-8", "replace")), result_at=msg["created_at"])


def session_row(ctx: Context, rows: dict, legacy: bool, title: str | None) -> dict:
    usage = rows["usage"]
    times = [r["created_at"] for r in rows["messages"] if r["created_at"]]
    if legacy:  # the npm-app recorded no spend
        cost, cost_source = None, "unknown"
    else:  # Codebuff records credits: a chat without a billed run is a native 0
        cost, cost_source = round(sum(u["cost_usd"] for u in usage), 9), "native"
    return {"provider": PROVIDER, "source_id": ctx.source_id, "project_path": ctx.project_path,
            "source_table": "messages" if legacy else "chat-messages", "source_rowid": 0,
            "session_id": ctx.chat_id, "parent_session_id": None, "root_session_id": ctx.chat_id, "is_root": True,
            "title": title, "created_at": ctx.chat_started or (min(times) if times else None),
            "updated_at": max(times) if times else ctx.chat_started, "cost_usd": cost, "cost_source": cost_source,
            "cost_includes_subagents": True, "forked_from_session_id": None, "inherited_cost_usd": None,
            "model": None, "llm_provider": "codebuff", "total_tokens": None,
            "message_count": len(rows["messages"]), "summary_message_id": None, "extra_columns": None}


def normalise(messages: list, ctx: Context, findings: Findings, legacy: bool) -> dict:
    rows = Walker(messages, ctx, findings, legacy).run()
    first_prompt = next((p["text"] for p in rows["parts"] if p["role"] == "user" and p.get("text")), None)
    rows["sessions"] = [session_row(ctx, rows, legacy, (first_prompt or "").strip()[:500] or None)]
    return rows
