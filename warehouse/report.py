"""`agentlake report`: the questions people ask, as a few tables over the marts.

Every section is one parameterised query with the same filters (dates, project, provider),
so the terminal tables, the JSON and the CSV always hold the same numbers.
"""

import json
from dataclasses import dataclass
from datetime import date

from warehouse.formatting import json_value, render

BREAKDOWNS = ("day", "project", "agent", "user", "model", "tool")


@dataclass(frozen=True)
class Filters:
    since: date | None = None
    until: date | None = None
    project: str | None = None
    provider: str | None = None

    def where(self, date_col: str = "date") -> tuple[str, list]:
        clauses, params = [], []
        if self.since:
            clauses.append(f"{date_col} >= ?")
            params.append(self.since)
        if self.until:
            clauses.append(f"{date_col} <= ?")
            params.append(self.until)
        if self.project:
            clauses.append("project = ?")
            params.append(self.project)
        if self.provider:
            clauses.append("provider = ?")
            params.append(self.provider)
        return ("WHERE " + " AND ".join(clauses)) if clauses else "", params


@dataclass
class Section:
    name: str
    title: str
    columns: list[str]
    rows: list[tuple]


_COST = "ROUND(SUM(cost_usd), 4)"

BY_SQL = {
    "day": f"SELECT date, {_COST} AS cost_usd, STRING_AGG(DISTINCT cost_source, ', ') AS cost_source "
           "FROM daily_costs {w} GROUP BY date ORDER BY date",
    "project": f"SELECT project, provider, {_COST} AS cost_usd, STRING_AGG(DISTINCT cost_source, ', ') AS cost_source "
               "FROM daily_costs {w} GROUP BY ALL ORDER BY cost_usd DESC NULLS LAST, project",
    "model": f"SELECT model, llm_provider, provider, {_COST} AS cost_usd, "
             "STRING_AGG(DISTINCT cost_source, ', ') AS cost_source FROM daily_costs {w} "
             "GROUP BY ALL ORDER BY cost_usd DESC NULLS LAST, model",
    "agent": f"SELECT provider, {_COST} AS cost_usd, SUM(sessions) AS root_session_days, "
             "STRING_AGG(DISTINCT cost_source, ', ') AS cost_source FROM daily_costs {w} "
             "GROUP BY ALL ORDER BY cost_usd DESC NULLS LAST, provider",
    "user": f"SELECT \"user\", machine, {_COST} AS cost_usd, STRING_AGG(DISTINCT provider, ', ') AS agents, "
            "STRING_AGG(DISTINCT cost_source, ', ') AS cost_source FROM daily_costs {w} "
            "GROUP BY ALL ORDER BY cost_usd DESC NULLS LAST, \"user\"",
    "tool": "SELECT tool_name, tool_category, SUM(calls) AS calls, SUM(errors) AS errors, "
            "ROUND(SUM(errors) / SUM(calls), 3) AS error_rate, SUM(nonzero_exits) AS nonzero_exits "
            "FROM tool_usage {w} GROUP BY ALL ORDER BY calls DESC, tool_name",
}


def run_query(con, sql: str, filters: Filters, date_col: str = "date", limit: int | None = None):
    where, params = filters.where(date_col)
    sql = sql.format(w=where)
    if limit:
        sql += f" LIMIT {int(limit)}"
    cur = con.execute(sql, params)
    return [d[0] for d in cur.description], cur.fetchall()


def _totals(con, filters: Filters) -> Section:
    costs = run_query(con, "SELECT ROUND(SUM(cost_usd), 4) AS cost_usd, "
                      "COUNT(*) FILTER (WHERE cost_source = 'unknown') AS rows_with_unknown_cost "
                      "FROM daily_costs {w}", filters)
    sessions = run_query(con, "SELECT COUNT(*) AS root_sessions, SUM(messages) AS messages FROM session_summary {w}",
                    filters, date_col="CAST(started_at AS DATE)")
    tools = run_query(con, "SELECT SUM(calls) AS tool_calls, SUM(errors) AS tool_errors, "
                      "SUM(nonzero_exits) AS nonzero_exits FROM tool_usage {w}", filters)
    columns = costs[0] + sessions[0] + tools[0]
    return Section("totals", "Totals", columns, [costs[1][0] + sessions[1][0] + tools[1][0]])


def build(con, filters: Filters, by: str = "project", top: int = 10) -> list[Section]:
    if by not in BREAKDOWNS:
        raise ValueError(f"--by must be one of {', '.join(BREAKDOWNS)}")
    sections = []

    def add(name, title, sql, date_col="date", limit=None):
        columns, rows = run_query(con, sql, filters, date_col, limit)
        sections.append(Section(name, title, columns, rows))

    sections.append(_totals(con, filters))
    add(f"by_{by}", f"Cost and use by {by}", BY_SQL[by], limit=None if by == "day" else top)
    if by != "project":
        add("top_projects", "Top projects", BY_SQL["project"], limit=top)
    if by != "model":
        add("models", "Models", BY_SQL["model"], limit=top)
    if by != "tool":
        add("tools", "Tools", BY_SQL["tool"], limit=top)
    add("failing_tools", "Failing tools", "SELECT tool_name, SUM(calls) AS calls, SUM(errors) AS errors, "
        "SUM(nonzero_exits) AS nonzero_exits, ROUND((SUM(errors) + SUM(nonzero_exits)) / SUM(calls), 3) AS failure_rate "
        "FROM tool_usage {w} GROUP BY ALL HAVING SUM(errors) + SUM(nonzero_exits) > 0 "
        "ORDER BY failure_rate DESC, calls DESC", limit=top)
    return sections


def render_report(sections: list[Section], fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps({s.name: [{c: json_value(v) for c, v in zip(s.columns, r)} for r in s.rows]
                           for s in sections}, indent=2, default=str)
    if fmt == "csv":  # one CSV block per section, headed by a comment line naming it
        return "\n\n".join(f"# {s.name}\n{render(s.columns, s.rows, 'csv')}" for s in sections)
    return "\n\n".join(f"{s.title}\n{render(s.columns, s.rows, 'table')}" for s in sections)
