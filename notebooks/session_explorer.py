import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import marimo as mo

    from warehouse.layout import Layout
    from warehouse.views import connect

    con = connect(Layout.resolve().warehouse)  # read-only; $AGENTLAKE_WAREHOUSE picks the file
    mo.md("# Session explorer\n\nPick a root session: its messages, parts and tool calls, in order "
          "(sub-agent sessions included).")
    return con, mo


@app.cell
def _(con, mo):
    sessions = mo.sql(
        """
        SELECT session_id, provider, project, title, started_at, messages, tool_calls, cost_usd
        FROM session_summary
        ORDER BY started_at DESC
        """,
        engine=con,
    )
    return (sessions,)


@app.cell
def _(mo, sessions):
    ids = sessions["session_id"].to_list()
    busy = sessions.filter(sessions["messages"] > 0)["session_id"].to_list()  # newest with messages
    choice = mo.ui.dropdown(ids, value=(busy or ids or [None])[0], label="Session")
    choice
    return (choice,)


@app.cell
def _(choice, con, mo):
    transcript = mo.sql(
        f"""
        SELECT m.session_id, m.message_index, m.role, m.created_at, p.part_index, p.part_type,
               COALESCE(p.text, p.reasoning, p.tool_name, p.finish_reason, p.part_type) AS summary,
               c.command, c.file_path, c.is_error, c.exit_code
        FROM messages AS m
        JOIN sessions AS s ON s.source_id = m.source_id AND s.session_id = m.session_id
        LEFT JOIN parts AS p ON p.source_id = m.source_id AND p.message_id = m.message_id
        LEFT JOIN tool_calls AS c ON c.source_id = p.source_id AND c.message_id = p.message_id
                                  AND c.tool_call_id = p.tool_call_id AND p.part_type = 'tool_call'
        WHERE s.root_session_id = '{(choice.value or "").replace("'", "''")}'
        ORDER BY m.created_at, m.session_id, m.message_index, p.part_index
        """,
        engine=con,
    )
    return (transcript,)


if __name__ == "__main__":
    app.run()
