import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import marimo as mo

    from warehouse.lake.config import reader_layout
    from warehouse.lake.ducklake import connect

    con = connect(reader_layout().warehouse)  # read-only; $AGENTLAKE_WAREHOUSE picks the file
    mo.md("# Session explorer\n\nPick a root session: its messages, parts and tool calls, in order "
          "(sub-agent sessions included).")
    return con, mo


@app.cell
def _(con, mo):
    # A session id is unique only within its source (two agents, or two stores of one agent, can
    # use the same id), and a source's id only on its machine and user (a team lake holds the same
    # store from several machines, or one machine's under two user names after a rename): a
    # session is (provider, machine, user, source_id, session_id) everywhere below, as docs/BI.md
    # joins it, and a message that key and message_id.
    sessions = mo.sql(
        """
        SELECT provider, machine, "user", source_id, session_id, project, title, started_at, messages, tool_calls,
               cost_usd
        FROM session_summary
        ORDER BY started_at DESC, provider, machine, "user", source_id, session_id
        """,
        engine=con,
    )
    return (sessions,)


@app.cell
def _(mo, sessions):
    def _label(row, full=False):
        source = row["source_id"] if full else row["source_id"][:8]
        title = (row["title"] or "(untitled)")[:60]
        return (f"{title} · {row['provider']} · {row['project']} · {row['machine']} · {row['user']} · "
                f"{row['session_id']} · {source}")

    _rows = list(sessions.iter_rows(named=True))
    _short = [_label(r) for r in _rows]
    # labels are the dropdown's option names, so they must be unique: the full source id if not
    _options = {
        (_label(r, full=True) if _short.count(s) > 1 else s): (r["provider"], r["machine"], r["user"],
                                                               r["source_id"], r["session_id"])
        for r, s in zip(_rows, _short)
    }
    _labels = list(_options)
    _busy = [k for k, r in zip(_labels, _rows) if r["messages"] > 0]  # the newest with messages first
    choice = mo.ui.dropdown(_options, value=(_busy or _labels or [None])[0], label="Session")
    choice
    return (choice,)


@app.cell
def _(choice, con, mo):
    def _sql_text(_value):
        return "'" + str(_value).replace("'", "''") + "'"

    _provider, _machine, _user, _source_id, _root_id = choice.value or (None,) * 5
    transcript = mo.sql(
        f"""
        SELECT m.provider, m.machine, m."user", m.source_id, m.session_id, m.message_index, m.role, m.created_at,
               p.part_index, p.part_type,
               COALESCE(p.text, p.reasoning, p.tool_name, p.finish_reason, p.part_type) AS summary,
               c.command, c.file_path, c.is_error, c.exit_code
        FROM messages AS m
        JOIN sessions AS s USING (provider, machine, "user", source_id, session_id)
        LEFT JOIN parts AS p USING (provider, machine, "user", source_id, session_id, message_id)
        LEFT JOIN tool_calls AS c ON c.provider = p.provider AND c.machine = p.machine AND c."user" = p."user"
                                  AND c.source_id = p.source_id AND c.session_id = p.session_id
                                  AND c.message_id = p.message_id AND c.tool_call_id = p.tool_call_id
                                  AND p.part_type = 'tool_call'
        WHERE s.provider = {_sql_text(_provider)} AND s.machine = {_sql_text(_machine)}
          AND s."user" = {_sql_text(_user)} AND s.source_id = {_sql_text(_source_id)}
          AND s.root_session_id = {_sql_text(_root_id)}
        ORDER BY m.created_at, m.session_id, m.message_index, p.part_index
        """,
        engine=con,
    )
    return (transcript,)


if __name__ == "__main__":
    app.run()
