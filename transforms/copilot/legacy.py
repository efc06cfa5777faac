"""GitHub Copilot CLI's first session format (before 0.0.342) -> rows of a session. Pure.

`history-session-state/session_<session id>_<start ms>.json` in the home (`$XDG_STATE_HOME/.copilot`,
else `~/.copilot`): one session, `JSON.stringify(session, null, 2)`, rewritten whole on each change.
Learnt from the zod schema and the session manager in @github/copilot 0.0.340's bundle (the CLI is
closed source; its npm package shipped readable JavaScript), read against the peers that parse it.
`copilot --resume` (0.0.342+) migrated a session into a log of the later format, as one
`session.import_legacy` event holding it whole, and deleted the file: both are read here.

`{sessionId, startTime, chatMessages, timeline, selectedModel?}` holds one conversation twice:
- `timeline`, what the CLI showed, each entry `{id, timestamp, type, ...}`: `user` (the prompt as
  typed), `copilot` (the model's text), `tool_call_requested` (`callId`, `name`, `toolTitle`,
  `intentionSummary`, `arguments`), rewritten in place as `tool_call_completed` with `result:
  {type: success|failure|rejected|denied, log}` when it ends, `info` and `error` lines;
- `chatMessages`, the model's context, OpenAI chat messages: the prompt wrapped in
  `<current_datetime>` and reminders, each response (`content`, `tool_calls[{id, function:
  {name, arguments}}]`), each result as the model got it (`role: tool`, `tool_call_id`).
The timeline is read (ids, times, prompts as typed). The chat says which of its entries one model
response made (one assistant message: the response's text and calls) and what each tool returned
to the model (the result text; the timeline's log is its metadata when it differs).
Not rows: the chat's wrapped prompts; its synthetic turn reading the files a prompt @-mentions
(no model call, no timeline entry); `info`/`error` lines (as `session.info`/`session.error` in the
later format: counted in a note).

No token counts nor cost are recorded: no `usage` rows, the session's tokens NULL and its cost
`unknown` once it answered (never $0). Assumed, not documented anywhere: a tool entry no chat
response names is a `!` command the user ran (a `user` message: the CLI records those in the
timeline only); a result other than `success` is an error (a command that ran and exited non-zero
is `success` with `<exited with exit code N>`, the later format's rule); results record no time
of their own (`result_at` NULL, the tool message dated at its call).
"""

import re
from dataclasses import dataclass

from transforms import jsontext
from transforms.copilot import tools as t
from transforms.jsontext import str_or_none as _str
from transforms.timestamps import from_iso
from transforms.tools import add_result, call_row

LEGACY_NAME = re.compile(r"^session_(.+)_(\d+)\.json$")
TOOL_ENTRIES = ("tool_call_requested", "tool_call_completed")
NOTICES = ("info", "error")


class LegacyFileError(ValueError):
    """Not a session of the first format: the file is quarantined whole."""


@dataclass
class Entry:
    """A timeline entry as the walker's rows want an event: lineage (`no`, `type`), id, time."""

    no: int
    type: str
    data: dict
    at: object
    raw: dict


def parse(data: bytes) -> dict:
    try:
        doc = jsontext.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError) as exc:
        raise LegacyFileError(f"not JSON ({exc}); a file of the first format is rewritten whole, "
                              "maybe while it was read") from None
    if not isinstance(doc, dict) or not any(isinstance(doc.get(k), list) for k in ("timeline", "chatMessages")):
        raise LegacyFileError("no timeline nor chatMessages: not a Copilot CLI session of the format before 0.0.342")
    return doc


def _text(content) -> str | None:
    """A chat message's content: a string, or a list of parts of which the texts count."""
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return content.strip() if isinstance(content, str) else None


class Chat:
    """What the chat says of the timeline: each response's calls and text, each call's result."""

    def __init__(self, messages):
        self.response_of: dict[str, int] = {}  # tool call id -> its response
        self.texts: list[tuple[int, str]] = []  # (response, text) in order
        self.returned: dict[str, str] = {}  # tool call id -> what the model got back
        self.next_text = 0
        for i, m in enumerate(messages if isinstance(messages, list) else ()):
            if not isinstance(m, dict):
                continue
            if m.get("role") == "assistant":
                for call in m.get("tool_calls") or ():
                    if isinstance(call, dict) and isinstance(call.get("id"), str):
                        self.response_of[call["id"]] = i
                if _text(m.get("content")):
                    self.texts.append((i, _text(m.get("content"))))
            elif m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str):
                self.returned[m["tool_call_id"]] = _text(m.get("content"))

    def key(self, i: int, entry: dict) -> tuple:
        """The message a `copilot` or tool entry belongs to: its response, else its own."""
        if entry.get("type") in TOOL_ENTRIES:
            response = self.response_of.get(entry.get("callId"))
            return ("response", response) if response is not None else ("user", i)
        text = _text(entry.get("text"))
        for k in range(self.next_text, len(self.texts)):  # responses in order: the next with this text
            if self.texts[k][1] == text:
                self.next_text = k + 1
                return ("response", self.texts[k][0])
        return ("entry", i)


def timeline(doc) -> list[dict]:
    return [e for e in doc.get("timeline") or () if isinstance(e, dict)] if isinstance(doc, dict) else []


def read(w, doc: dict, table: str, no: int | None = None) -> None:
    """The session's timeline as `w`'s rows (a transforms.copilot.normalise.Walker); lineage
    `(table, no)`, `no` each entry's place when None."""
    chat = Chat(doc.get("chatMessages"))
    model = _str(doc.get("selectedModel")) or w.model
    open_: dict[tuple, dict] = {}  # message key -> its message
    notices = 0
    for i, entry in enumerate(timeline(doc)):
        kind = entry.get("type")
        at = from_iso(entry.get("timestamp"))
        e = Entry(i if no is None else no, table, entry, at, {"id": _str(entry.get("id"))})
        if kind == "user":
            msg = w.message(e, "user")
            w.part(msg, e, "user", "text", entry, text=_str(entry.get("text")))
        elif kind == "copilot" or kind in TOOL_ENTRIES:
            key = chat.key(i, entry)
            if key not in open_:
                open_[key] = w.message(e, "user" if key[0] == "user" else "assistant",
                                       model=None if key[0] == "user" else model)
            if kind == "copilot":
                w.part(open_[key], e, "copilot", "text", entry, text=_str(entry.get("text")))
            else:
                _tool(w, open_[key], e, chat)
        elif kind in NOTICES:
            notices += 1
        else:
            w.skipped[f"timeline:{kind}"] += 1
    if notices:
        w.findings.notes.append(f"{w.ctx.session_id}: {notices} info and error lines of the first format kept "
                                "in the file only")


def _tool(w, msg: dict, e: Entry, chat: Chat) -> None:
    entry = e.data
    call_id, name, args = _str(entry.get("callId")), _str(entry.get("name")), entry.get("arguments")
    raw, row = call_row(w.base(e), msg["message_id"], call_id, name, args, e.at, t.TOOLS,
                        category=t.call_category(name, args))
    w.part(msg, e, e.data.get("type"), "tool_call", {k: v for k, v in entry.items() if k != "result"},
           tool_call_id=call_id, tool_name=name, tool_input=raw)
    w.out["tool_calls"].append(row)
    w.calls.setdefault(call_id, row)
    result = entry.get("result")
    if entry.get("type") != "tool_call_completed" or not isinstance(result, dict):
        return  # still running when the file was last written
    log = _str(result.get("log"))
    text = chat.returned.get(call_id) if call_id in chat.returned else log
    kind = _str(result.get("type"))
    is_error = None if kind is None else kind != "success"
    done = Entry(e.no, e.type, entry, e.at, {"id": f"{e.raw['id']}:result" if e.raw["id"] else None})
    out = w.message(done, "tool")
    w.part(out, done, "result", "tool_result", result, tool_call_id=call_id, tool_name=name, tool_result=text,
           is_error=is_error, tool_result_metadata=log if log != text else None)
    add_result(row, out["message_id"], text, is_error, t.TOOLS.exit_code(name, text), None)


def expected_messages(doc) -> int:
    """Messages the timeline makes, counted on it: prompts, one per response (or lone entry), results."""
    chat = Chat(doc.get("chatMessages") if isinstance(doc, dict) else None)
    entries = timeline(doc)
    shown = {chat.key(i, e) for i, e in enumerate(entries) if e.get("type") in ("copilot", *TOOL_ENTRIES)}
    done = sum(e.get("type") == "tool_call_completed" and isinstance(e.get("result"), dict) for e in entries)
    return sum(e.get("type") == "user" for e in entries) + len(shown) + done
