import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import altair as alt
    import marimo as mo

    from warehouse.config import reader_layout
    from warehouse.views import connect

    con = connect(reader_layout().warehouse)  # read-only; $AGENTLAKE_WAREHOUSE picks the file
    mo.md("# Tool usage and failures\n\n`errors` are tool-level failures; `nonzero_exits` are shell "
          "commands that exited non-zero, which the agent does not count as errors.")
    return alt, con, mo


@app.cell
def _(con, mo):
    tools = mo.sql(
        """
        SELECT tool_name, tool_category, provider, CAST(SUM(calls) AS BIGINT) AS calls,
               CAST(SUM(errors) AS BIGINT) AS errors, CAST(SUM(nonzero_exits) AS BIGINT) AS nonzero_exits,
               CAST(SUM(errors) AS DOUBLE) / SUM(calls) AS error_rate
        FROM tool_usage
        GROUP BY ALL
        ORDER BY calls DESC
        """,
        engine=con,
    )
    return (tools,)


@app.cell
def _(alt, tools):
    calls_and_errors = (
        alt.Chart(tools)
        .transform_fold(["calls", "errors", "nonzero_exits"], as_=["what", "count"])
        .mark_bar()
        .encode(y=alt.Y("tool_name:N", sort="-x"), x="sum(count):Q", color="what:N")
        .properties(title="Calls, errors and non-zero exits per tool", width=640)
    )
    calls_and_errors
    return (calls_and_errors,)


@app.cell
def _(con, mo):
    failing_commands = mo.sql(
        """
        SELECT first_word, command, calls, failures, failure_rate
        FROM shell_commands
        WHERE "grouping" = 'command' AND failures > 0
        ORDER BY failures DESC, calls DESC
        LIMIT 25
        """,
        engine=con,
    )
    return (failing_commands,)


if __name__ == "__main__":
    app.run()
