import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import altair as alt
    import marimo as mo

    from warehouse.lake.config import reader_layout
    from warehouse.lake.ducklake import connect

    con = connect(reader_layout().warehouse)  # read-only; $AGENTLAKE_WAREHOUSE picks the file
    mo.md("# Tool usage and failures\n\n`errors` are tool-level failures; `nonzero_exits` are shell "
          "commands that exited non-zero, which the agent does not count as errors; `failed` counts "
          "a call that did either once. All three are among the `calls`.")
    return alt, con, mo


@app.cell
def _(con, mo):
    tools = mo.sql(
        """
        SELECT tool_name, tool_category, provider, CAST(SUM(calls) AS BIGINT) AS calls,
               CAST(SUM(errors) AS BIGINT) AS errors, CAST(SUM(nonzero_exits) AS BIGINT) AS nonzero_exits,
               CAST(SUM(failed) AS BIGINT) AS failed, CAST(SUM(calls) - SUM(failed) AS BIGINT) AS succeeded,
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
    # a bar per tool as long as its calls, split into the calls that failed and the rest (errors
    # and non-zero exits are among the calls: stacked on them, they made bars longer than the calls)
    calls_and_errors = (
        alt.Chart(tools)
        .transform_fold(["succeeded", "failed"], as_=["outcome", "count"])
        .mark_bar()
        .encode(y=alt.Y("tool_name:N", sort="-x"), x=alt.X("sum(count):Q", title="calls"),
                color=alt.Color("outcome:N", scale=alt.Scale(domain=["succeeded", "failed"],
                                                             range=["#4c78a8", "#e45756"])))
        .properties(title="Calls per tool, and how many failed (an error or a non-zero exit)", width=640)
    )
    calls_and_errors
    return (calls_and_errors,)


@app.cell
def _(con, mo):
    failing_commands = mo.sql(
        """
        SELECT first_word, command, CAST(SUM(calls) AS BIGINT) AS calls, CAST(SUM(failures) AS BIGINT) AS failures,
               SUM(failures) / SUM(calls) AS failure_rate,
               STRING_AGG(DISTINCT project, ', ' ORDER BY project) AS projects,
               STRING_AGG(DISTINCT provider, ', ' ORDER BY provider) AS agents
        FROM shell_commands
        WHERE "grouping" = 'command'
        GROUP BY first_word, command
        HAVING SUM(failures) > 0
        ORDER BY failures DESC, calls DESC, command
        LIMIT 25
        """,
        engine=con,
    )
    return (failing_commands,)


if __name__ == "__main__":
    app.run()
