import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import altair as alt
    import marimo as mo

    from warehouse.lake.config import reader_layout
    from warehouse.lake.ducklake import connect
    from warehouse.serve.labels import model_sql

    warehouse_path = reader_layout().warehouse  # $AGENTLAKE_WAREHOUSE, the home's, else the quickstart demo's
    con = connect(warehouse_path)  # read-only
    # a model as the report and the dashboard say it: `no model recorded` where daily_costs holds NULL
    model_label = model_sql("model_name")
    mo.md(f"# Cost overview\n\nWarehouse: `{warehouse_path}` (read-only). Costs count root sessions "
          "only: a root's cost already includes its sub-agents'. Models are grouped by `model_name`, "
          "the name they group under, and named as `agentlake report` names them.")
    return alt, con, mo, model_label


@app.cell
def _(mo):
    split = mo.ui.dropdown({"project": "project", "model": "model_name", "provider": "provider"}, value="project",
                           label="Split cost by")
    split
    return (split,)


@app.cell
def _(con, mo, model_label):
    daily = mo.sql(
        f"""
        SELECT date, provider, project, {model_label} AS model_name, cost_source,
               CAST(SUM(cost_usd) AS DOUBLE) AS cost_usd
        FROM daily_costs
        GROUP BY ALL
        ORDER BY date
        """,
        engine=con,
    )
    return (daily,)


@app.cell
def _(alt, daily, split):
    cost_over_time = (
        alt.Chart(daily)
        .mark_bar()
        # UTC days, drawn in UTC: in the viewer's time zone a day west of UTC showed as the one before
        .encode(x=alt.X("date:T", timeUnit="utcyearmonthdate", scale=alt.Scale(type="utc"), title="day (UTC)"),
                y=alt.Y("sum(cost_usd):Q", title="cost (USD)"), color=f"{split.value}:N",
                tooltip=[alt.Tooltip("date:T", timeUnit="utcyearmonthdate", title="day (UTC)"),
                         f"{split.value}:N", "sum(cost_usd):Q"])
        .properties(title=f"Cost per day by {split.value}", width=640)
    )
    cost_over_time
    return (cost_over_time,)


@app.cell
def _(con, mo, model_label):
    by_project_model = mo.sql(
        f"""
        SELECT project, provider, {model_label} AS model_name,
               CAST(SUM(cost_usd) AS DOUBLE) AS cost_usd,
               STRING_AGG(DISTINCT cost_source, ', ' ORDER BY cost_source) AS cost_source
        FROM daily_costs
        GROUP BY ALL
        ORDER BY cost_usd DESC NULLS LAST
        """,
        engine=con,
    )
    return (by_project_model,)


@app.cell
def _(alt, by_project_model):
    cost_by_model = (
        alt.Chart(by_project_model)
        .mark_bar()
        .encode(y=alt.Y("model_name:N", sort="-x", title="model"), x=alt.X("sum(cost_usd):Q", title="cost (USD)"),
                color="project:N")
        .properties(title="Cost by model and project", width=640)
    )
    cost_by_model
    return (cost_by_model,)


if __name__ == "__main__":
    app.run()
