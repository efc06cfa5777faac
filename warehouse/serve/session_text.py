"""A session's transcript as plain text, bounded, for an agent to read (`agentlake mcp`'s
open_session): its facts as the dashboard's session page gives them (transcript.find_session), then
its messages in order, each with its text, reasoning, tool calls and results, and its cost."""

from dataclasses import dataclass

from warehouse.serve.dashboard.transcript import answers, find_session, readable_result, session_rows
from warehouse.lake.ducklake import sql_string
from warehouse.serve.formatting import dollars
from warehouse.serve.labels import model_label, models_label

PARTS = ("part_type, text, reasoning, tool_call_id, tool_name, tool_input, tool_result, is_error, "
         "shell_command, shell_output, shell_exit_code, part_index")


def _money(value) -> str:
    return dollars(value)


def _when(at) -> str:
    """A time to the second, as every agent's reads (a Codex session's read `10:00:00.100000`, a
    Claude Code one's `10:00:00`: a trial)."""
    return str(at.replace(microsecond=0)) if hasattr(at, "replace") else str(at)


def _facts(key: str, found, clip) -> list[str]:
    (provider, project, _source, _sid, title, started, ended, cost, cost_source, models, subagents, root,
     duration, messages, calls, errors, exits, machine, _user) = found
    sub_agent = bool(root and root != found.session_id)
    # the tree's figures (session_summary) are a root session's: a sub-agent's cost is its own
    lines = [f"session {key}", f"title: {clip(title) if title else '(none)'}",
             f"agent: {provider}; project: {project or '(no project)'}; machine: {machine}",
             f"started {_when(started)} UTC; last activity {_when(ended)} UTC"
             + (f"; duration {duration} s" if duration is not None else ""),
             f"cost {_money(cost)} ({cost_source}; {'its own requests' if sub_agent else 'with its sub-agents'}); "
             f"models: {models_label(models)}"]
    if not sub_agent:
        lines.append(f"with its sub-agents: messages {messages}, tool calls {calls}, tool errors {errors}, "
                     f"non-zero exits {exits}; sub-agents {subagents}")
    else:
        lines.append(f"a sub-agent of the session {root} (same machine, user, agent and source)")
    return lines


def _part(row, clip, message_id: str, calls: "_Calls") -> str | None:
    kind, text, reasoning, call_id, tool, tool_input, result, is_error, shell, shell_out, shell_exit, _ = row
    if kind == "text" and text:
        return clip(text)
    if kind == "reasoning" and reasoning:
        return "(reasoning) " + clip(reasoning)
    if kind == "tool_call":
        return f"-> {tool} call {call_id}: {clip(tool_input or '')}"
    if kind == "tool_result":
        shown = readable_result(result, calls.answers.get((call_id, message_id))) or ""
        name = tool or calls.names.get(call_id) or "a tool"  # an answer without its call names none
        return f"<- {name} {'error' if is_error else 'result'} {call_id}: {clip(shown)}"
    if kind == "shell_command":
        return f"$ {shell} (exit {shell_exit})\n{clip(shell_out or '')}"
    return None


@dataclass
class _Calls:
    names: dict  # a call's tool, by its id
    answers: dict  # an answer's text, by its call id and its message (transcript.answers)


def _first_parts(head: str, shown: list[tuple[int, str]], room: int, found, message_id: str) -> str:
    """A message too long for the answer: its head and the parts that fit whole (the first one cut if
    none does), then the query that reads the rest of its parts (run_sql), not a silent cut."""
    machine, user, source, sid = (sql_string(v) for v in (found.machine, found.user, found.source_id, found.session_id))

    def rest_sql(part: int) -> str:
        return ("SELECT part_index, part_type, text, reasoning, tool_name, tool_input, tool_result, shell_command, "
                f"shell_output FROM parts WHERE machine = {machine} AND \"user\" = {user} AND source_id = {source} "
                f"AND session_id = {sid} AND message_id = {sql_string(message_id)} AND part_index >= {part} "
                "ORDER BY part_index")

    lines, left = [head], room - len(head) - 600  # the note below
    for at, (part, text) in enumerate(shown):
        if len(text) + 1 > left:
            if at == 0:  # not even one part whole: the beginning of the first
                lines.append(text[:max(left, 0)] + "…")
            return "\n".join(lines + [f"[the answer is full: this message's parts from part {part} on are not all "
                                       f"shown; run_sql reads them: {rest_sql(part)}]"])
        lines.append(text)
        left -= len(text) + 1
    return "\n".join(lines)


class NoMessageThere(LookupError):
    """An offset past a session's last message."""


def transcript(cur, key: str, offset: int, limits) -> str:
    """The session of `key` (a session_key) from message index `offset` on, within `limits`
    (warehouse.serve.mcp_tools.Limits): messages stop where the characters run out, and the first
    line says which were shown and how to read on."""
    found = find_session(cur, None, None, key)
    where, args = session_rows(found)
    total, from_offset, last_index = cur.execute(
        f"SELECT COUNT(*), COUNT(*) FILTER (WHERE message_index >= ?), MAX(message_index) FROM messages {where}",
        [offset] + args).fetchone()
    if total and not from_offset:  # `showing messages none to none: 0 of 7` read as an empty session (a trial)
        raise NoMessageThere(f"no message at offset {offset} or after: the session's {total:,} messages are "
                              f"#0 to #{last_index}")
    messages = cur.execute(f"SELECT message_id, message_index, role, model, created_at FROM messages {where} "
                           f"AND message_index >= ? ORDER BY message_index LIMIT {int(limits.max_rows)}",
                           args + [offset]).fetchall()
    ids = [m[0] for m in messages]
    parts: dict[str, list] = {}
    for row in cur.execute(f"SELECT message_id, {PARTS} FROM parts {where} AND list_contains(?, message_id) "
                           "ORDER BY message_id, part_index", args + [ids]).fetchall():
        parts.setdefault(row[0], []).append(row[1:])
    costs = dict(cur.execute(f"SELECT message_id, SUM(cost_usd) FROM usage {where} GROUP BY 1", args).fetchall())
    calls = cur.execute(f"SELECT tool_call_id, tool_name, has_call, result_text, result_message_id FROM tool_calls "
                        f"{where} AND tool_call_id IS NOT NULL", args).fetchall()
    known = _Calls({r[0]: r[1] for r in calls if r[2]}, answers(calls))

    def clip(text: str) -> str:
        cut = len(text) - limits.cell_chars
        return text if cut <= 0 else text[:limits.cell_chars] + f"… [{cut:,} more characters]"

    facts = "\n".join(_facts(key, found, clip))
    room = max(limits.chars - len(facts) - 300, 0)  # the first line and the facts
    blocks = []
    for message_id, index, role, model, created in messages:
        head = f"[#{index} {role} {_when(created)}" + (f" {model_label(model)}" if model else "") + (
            f" cost {_money(costs[message_id])}" if costs.get(message_id) is not None else "") + "]"
        shown = [(p[-1], t) for p in parts.get(message_id, []) if (t := _part(p, clip, message_id, known))]
        block = "\n".join([head] + [t for _, t in shown])
        if blocks and len(block) + 1 > room:
            break
        if len(block) > room:  # a first message larger than the answer: its parts that fit, and where the rest is
            blocks.append(_first_parts(head, shown, room, found, message_id))
            break  # the answer ends where that message is cut: the next one is the next offset's
        blocks.append(block)
        room -= len(block) + 1
    first = f"#{messages[0][1]}" if messages else "none"
    last = f"#{messages[len(blocks) - 1][1]}" if blocks else "none"
    line = (f"showing messages {first} to {last}: {len(blocks):,} of {total:,}, from offset {offset}; "
            f"a value over {limits.cell_chars:,} characters is cut there, the answer at {limits.chars:,}")
    if len(blocks) < from_offset:
        after = messages[len(blocks)][1] if len(blocks) < len(messages) else messages[-1][1] + 1
        line += f"; more: open_session with offset {after}"
    return "\n".join([line, facts, ""] + blocks)
