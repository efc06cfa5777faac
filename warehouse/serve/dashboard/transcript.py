"""One session's transcript: its messages, parts and tool calls in order, each request's
cost, its sub-agents linked; read for one session only, filtered by its project, days and ids
so that DuckLake prunes to a few files."""

from datetime import timedelta
from typing import NamedTuple

from warehouse.lake.zones import UTC, clock
from warehouse.serve.dashboard.page_parts import about_data, duration_text, escaped, layout, table, usd
from warehouse.serve.dashboard.request import Request
from warehouse.serve.labels import model_label, models_label
from warehouse.serve.report import session_key
from warehouse.serve.search import message_anchor

TEXT_LIMIT = 4000  # characters of one part shown in a transcript; the rest is counted, not shown
PARTS_LIMIT = 2000  # parts of one transcript page


# --- one session's transcript


class Found(NamedTuple):
    """A session as find_session finds it: its own row, with its tree's figures (session_summary)."""

    provider: str
    project: str | None
    source_id: str
    session_id: str
    title: str | None
    started: object
    ended: object
    cost: float | None
    cost_source: str | None
    models: object
    subagents: int | None
    root_session_id: str | None
    duration: float | None
    messages: int | None
    calls: int | None
    errors: int | None
    exits: int | None
    machine: str
    user: str


def find_session(con, source: str | None, session_id: str | None, key: str | None, machine: str | None = None,
                 user: str | None = None) -> Found | None:
    """A session, root or sub-agent (Found); None when not found. `key` is an insight's lake-wide `session_key`: machine/user/provider/source_id/session_id.
    `machine` tells apart the same store (so source id) ingested on two machines of a team lake,
    `user` the same store landed under two user names on one machine (a user renamed): without
    either, the first machine's and user's copy is shown."""
    cols = ("SELECT s.provider, s.project, s.source_id, s.session_id, s.title, s.created_at, "
            "COALESCE(ss.ended_at, s.updated_at), COALESCE(ss.cost_usd, s.cost_usd), "
            "COALESCE(ss.cost_source, s.cost_source), COALESCE(ss.models, s.model), ss.subagents, s.root_session_id, "
            "ss.duration_s, ss.messages, ss.tool_calls, ss.tool_errors, ss.nonzero_exits, s.machine, s.\"user\" "
            "FROM sessions s LEFT JOIN session_summary ss USING (machine, \"user\", source_id, session_id) ")
    if key is not None:
        rows = con.execute(cols + f"WHERE {session_key('s', 's.session_id')} = ? LIMIT 1", [key]).fetchall()
        return Found(*rows[0]) if rows else None
    on_machine = (" AND s.machine = ?" if machine else "") + (' AND s."user" = ?' if user else "")
    rows = con.execute(cols + "WHERE s.source_id = ? AND s.session_id = ?" + on_machine + " ORDER BY s.machine, s.\"user\" LIMIT 1",
                       [source, session_id, *([machine] if machine else []), *([user] if user else [])]).fetchall()
    return Found(*rows[0]) if rows else None


def session_link(req, source: str, session_id: str, machine: str | None, user: str | None) -> str:
    """The link to a session's page, by its own keys (`session_user`: one store landed under two
    user names holds it twice; not the user filter, which the link keeps)."""
    return req.link("/session", source=source, id=session_id, machine=machine, session_user=user)


def session_rows(found: Found, zone_days: bool = False) -> tuple[str, list]:
    """The WHERE clause and its values picking the rows of the session `found` (find_session's row):
    machine and user too (a team lake may hold the same store, so source id, from several machines,
    or under two user names), and the days it spans, which bound what DuckLake reads (partitions by
    year and project, min/max `date`). `zone_days`: the tables' dates are a zone's, a day either side."""
    started, ended = found.started, found.ended
    first, last = (started.date() if started else None), (ended.date() if ended else None)
    if first and last and zone_days:
        first, last = first - timedelta(days=1), last + timedelta(days=1)
    span = " AND date BETWEEN ? AND ?" if first and last and first <= last else ""
    return ("WHERE project IS NOT DISTINCT FROM ? AND machine = ? AND \"user\" = ? AND source_id = ? AND session_id = ?"
            + span, [found.project, found.machine, found.user, found.source_id, found.session_id]
            + ([first, last] if span else []))


def session_page(con, req: Request) -> tuple[str, int]:
    p = req.params
    found = find_session(con, p.get("source"), p.get("id"), p.get("key"), p.get("machine"), p.get("session_user"))
    if found is None:
        given = ([f"key {p['key']!r}"] if p.get("key") else
                 [f"{name} {p[name]!r}" for name in ("source", "id") if p.get(name)])
        missing = "" if p.get("key") or (p.get("source") and p.get("id")) else (
            " (a session is named by key=, or by source= and id=)")
        req.errors.append("no such session in this lake: " + (", ".join(given) or "none named") + missing)
        return layout("session not found", [("overview", req.link("/"))], "", req, about=about_data(con)), 404
    (provider, project, source, sid, title, started, ended, cost, cost_source, models, subagents, root,
     duration, messages, calls, errors, exits, machine, user) = found
    where, args = session_rows(found, zone_days=req.filters.zone != UTC)
    msgs = con.execute(f"SELECT message_id, message_index, role, model, created_at FROM messages {where} "
                       "ORDER BY message_index", args).fetchall()
    parts = con.execute(f"SELECT message_id, part_index, part_type, text, reasoning, tool_call_id, tool_name, "
                        f"tool_result, is_error, finish_reason, shell_command, shell_output FROM parts {where} "
                        f"ORDER BY message_id, part_index LIMIT {PARTS_LIMIT + 1}", args).fetchall()
    # the call's own row last, so that it names the call: an answer without its call (Claude Code's
    # second answer to one) has a row of its own with the same id, its name and input none
    call_rows = con.execute(  # not `calls`: that is the summary's count, shown in the facts below
        f"SELECT tool_call_id, tool_name, command, file_path, input, has_result, is_error, exit_code, result_size, "
        f"result_text, result_message_id FROM tool_calls {where} ORDER BY has_call, called_at", args).fetchall()
    calls_by_id, results = {r[0]: r[1:10] for r in call_rows}, answers(call_rows)
    costs = dict(con.execute(f"SELECT message_id, SUM(cost_usd) FROM usage {where} GROUP BY 1", args).fetchall())
    children = con.execute("SELECT session_id, title, created_at, cost_usd FROM sessions WHERE machine = ? AND "
                           "\"user\" = ? AND source_id = ? AND parent_session_id = ? ORDER BY created_at",
                           [machine, user, source, sid]).fetchall()
    by_message: dict[str, list] = {}
    for part in parts[:PARTS_LIMIT]:
        by_message.setdefault(part[0], []).append(part)
    zone = req.filters.zone
    facts = [("agent", provider), ("project", project), (f"started ({zone})", clock(started, zone)),
             (f"last activity ({zone})", clock(ended, zone)),
             ("duration", None if duration is None else duration_text(duration)), ("cost", f"{usd(cost)} ({cost_source})"),
             ("models", models_label(models)),
             ("messages (with sub-agents)", messages), ("tool calls (with sub-agents)", calls),
             ("tool errors", errors), ("non-zero exits", exits), ("sub-agents", subagents)]
    if root and root != sid:
        facts.append(("sub-agent of", f'<a href="{escaped(session_link(req, source, root, machine, user))}">'
                      f'{escaped(root)}</a>'))
    header = "<table id=\"session-facts\">" + "".join(
        f"<tr><th>{escaped(k)}</th><td>{v if k == 'sub-agent of' else escaped(v)}</td></tr>" for k, v in facts
        if v is not None) + "</table>"
    if children:
        header += "<h2>Sub-agents</h2>" + table(
            "subagents", ["session", "title", f"started ({zone})", "cost"],
            [(c[0], c[1], clock(c[2], zone), usd(c[3])) for c in children],
            [session_link(req, source, c[0], machine, user) for c in children])
    if not costs:
        header += (f'<p class="meta">{escaped(provider)} records no per-request usage here: the cost above is the '
                   "session's own, not split per message.</p>")
    # a sub-agent's session id names the call that started it (Crush: `<message>$$<call>`, or the call id)
    spawned = {c[0].rsplit("$$", 1)[-1]: session_link(req, source, c[0], machine, user) for c in children}
    out = [_message((*m[:4], clock(m[4], zone)), by_message.get(m[0], []), calls_by_id, results, costs.get(m[0]),
                    spawned)
           for m in msgs]
    if len(parts) > PARTS_LIMIT:
        out.append(f'<p class="cut">the first {PARTS_LIMIT} parts are shown; the rest: agentlake sql '
                   f'"SELECT * FROM parts WHERE session_id = \'{escaped(sid)}\'"</p>')
    body = header + f'<h2>Transcript ({len(msgs)} messages)</h2><div id="transcript">{"".join(out)}</div>'
    crumbs = [("overview", req.link("/", project="")), (project or "(no project)", req.link("/project", project=project)),
              (title or sid, None)]
    return layout(f"session {title or sid}", crumbs, body, req, about=about_data(con)), 200


def _clip(text: str | None) -> str:
    if text is None:
        return ""
    if len(text) <= TEXT_LIMIT:
        return escaped(text)
    return escaped(text[:TEXT_LIMIT]) + f'\n<span class="meta">… {len(text) - TEXT_LIMIT:,} more characters</span>'


def _message(m, parts, calls_by_id, results, cost, spawned) -> str:
    message_id, index, role, model, created = m
    meta = f"#{index} · {escaped(role)} · {escaped(created)}" + (f" · {escaped(model_label(model))}" if model else "")
    if cost is not None:
        meta += f" · cost {usd(cost)}"
    inner = []
    for (_mid, _pi, ptype, text, reasoning, call_id, tool_name, result, is_error, finish, shell, shell_out) in parts:
        if ptype == "text" and text:
            inner.append(f"<pre>{_clip(text)}</pre>")
        elif ptype == "reasoning" and reasoning:
            inner.append(f"<details><summary>reasoning</summary><pre>{_clip(reasoning)}</pre></details>")
        elif ptype == "tool_call":
            inner.append(_tool_call(call_id, tool_name, calls_by_id.get(call_id), spawned.get(call_id)))
        elif ptype == "tool_result":
            status = '<span class="bad">error</span>' if is_error else "result"
            name = tool_name or (calls_by_id.get(call_id) or (None,))[0]
            inner.append(f'<details class="result"><summary>{status} of {escaped(name)} ({escaped(call_id)})</summary>'
                         f"<pre>{_clip(readable_result(result, results.get((call_id, message_id))))}</pre></details>")
        elif ptype == "shell_command":
            inner.append(f'<div class="call">$ {escaped(shell)}</div><pre>{_clip(shell_out)}</pre>')
        elif ptype == "finish" and finish and role == "assistant":
            inner.append(f'<span class="meta">finish: {escaped(finish)}</span>')
    # wrapped in the message's anchor (a search hit links to it); the message keeps its index's id
    return (f'<div class="anchor" id="{escaped(message_anchor(message_id))}"><div class="msg {escaped(role)}" id="m{escaped(index)}">'
            f'<div class="meta">{meta}</div>{"".join(inner)}</div></div>')


def answers(rows) -> dict:
    """Each answer's text (`result_text`) by its call id and the message that holds it
    (`result_message_id`), from rows whose first column is the call id and last two those: a call
    answered twice has a row per answer (Claude Code's), each read where it was written."""
    return {(r[0], r[-1]): r[-2] for r in rows if r[-1] is not None}


def readable_result(stored: str | None, text: str | None) -> str | None:
    """A tool result as people read it: its text (`tool_calls.result_text`), where the part keeps
    the agent's content as it was, a list of blocks as JSON (every Claude Code sub-agent's result
    read `[{"type":"text","text":...}]`: a new user's trial); the stored value where the text has
    nothing (an image alone)."""
    return text if text else stored


def _tool_call(call_id, tool_name, call, subagent_link: str | None) -> str:
    if call is None:
        return f'<div class="call tool-call">{escaped(tool_name)} ({escaped(call_id)})</div>'
    name, command, path, args, has_result, is_error, exit_code, size, result = call
    what = command or path or args or ""
    if not has_result:
        status = '<span class="bad">no result (interrupted)</span>'
    elif is_error:
        status = '<span class="bad">tool error</span>'
    elif exit_code not in (None, 0):
        status = f'<span class="bad">exit code {exit_code}</span>'
    else:
        status = '<span class="ok">ok</span>' + (" · exit code 0" if exit_code == 0 else "")
    size_text = f" · {size:,} bytes" if size is not None else ""
    if subagent_link:
        size_text += f' · <a class="subagent" href="{escaped(subagent_link)}">its sub-agent session</a>'
    return (f'<div class="call tool-call"><b>{escaped(name)}</b> <code>{escaped(what[:300])}</code> · {status}{size_text}'
            f'<details><summary>result</summary><pre>{_clip(result)}</pre></details></div>')
