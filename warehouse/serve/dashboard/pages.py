"""The dashboard's pages: the overview, a project, the insights, and a table's rows as CSV (a
session's transcript: warehouse.serve.dashboard.transcript; the headline and trends:
warehouse.serve.dashboard.headline; the pieces every page is made of:
warehouse.serve.dashboard.page_parts; its request: warehouse.serve.dashboard.request).

They read the marts only (daily_costs, session_summary, tool_usage, insight_*; a failed call, by an
error or a non-zero exit, counted once). Every table is cut to the top N with an "others" row
(warehouse.serve.dashboard.charts.top_with_others) and every row links one level down.
"""

import math
import re
from decimal import Decimal

import duckdb

from warehouse.lake.ducklake import sql_string
from warehouse.lake.zones import clock
from warehouse.serve import budgets as budgeting
from warehouse.serve.dashboard import charts
from warehouse.serve.dashboard import page_parts
from warehouse.serve.dashboard.headline import empty_window, headline, trends
from warehouse.serve.dashboard.page_parts import (
    about_data, duration_text, escaped, figure, filter_form, filtered_rows, grain_links, layout, page_filters,
    sessions, sort_column, sort_rows, sortable_head, table, takeaway, usd)
from warehouse.serve.formatting import dollars
from warehouse.serve.dashboard.transcript import session_link
from warehouse.serve.dashboard.request import (
    INSIGHT_ROWS, INSIGHTS, RANKINGS, SESSION_KEYS, SORT_KEYS, TABLES, Request)
from warehouse.serve.labels import MODEL_COLUMNS, label, model_sql, models_label
from warehouse.serve.report import Filters, cost_and_sessions, curated, people_of, sorted_list

# --- the charts shared by the overview and the project page


def _time_chart(con, req: Request, series: str, series_title: str, link,
                statuses: list = ()) -> tuple[str, str, tuple | None, str]:
    """Cost over time stacked by `series` (a SQL expression), its top N plus others, its span
    (period, first day, last day; None without data) for the trends beside it, and the line
    under it on the budget drawn (`budget_line`, from this month's `statuses`). One query by day;
    the period, the ranking and the cut are worked out here (each query on the lake costs a
    catalog lookup)."""
    days = filtered_rows(con, f"SELECT date, {series} AS s, SUM(cost_usd) FROM daily_costs {{w}} GROUP BY ALL", req.filters)
    if not days:
        return charts.cost_over_time([], "day", series_title, [], zone=req.filters.zone), "", None, ""
    first, last = min(r[0] for r in days), max(r[0] for r in days)
    period = req.grain or charts.period_for(first, last)
    totals: dict[str, float | None] = {}
    for _, s, c in days:  # a series whose every cost is unknown stays unknown (None), not $0
        totals[s] = totals.get(s) if c is None else (totals.get(s) or 0.0) + float(c)
    ranked = sorted(totals.items(), key=lambda t: (t[1] is None, -(t[1] or 0.0), t[0]))
    cut = charts.top_with_others(ranked, min(req.top or charts.TOP_SERIES, charts.TOP_SERIES))
    kept = {r[0] for r in cut.rows}
    others = cut.others[0] if cut.others else None
    merged: dict[tuple, float] = {}
    for d, s, c in days:
        if c is None:
            continue
        key = (charts.period_start(d, period), s if s in kept else others)
        merged[key] = merged.get(key, 0.0) + float(c)
    drawn = [(d, s, c, link(s) if s in kept else None) for (d, s), c in sorted(merged.items())]
    note = f"{series_title}s: {cut.note}; one bar per {period}" + ("" if req.grain else " (by the span)")
    unknown = {d for d, _, _ in days} - {d for d, _, c in days if c is not None}
    if unknown:  # drawn as no bar: not $0
        note += (f"; {len(unknown):,} day{'s' if len(unknown) > 1 else ''} whose every cost is unknown "
                 f"({', '.join(str(d) for d in sorted(unknown)[:3])}{', ...' if len(unknown) > 3 else ''}): no bar, not $0")
    order = [r[0] for r in cut.rows] + ([others] if others else [])
    highest = {}
    for d, _, c, _ in drawn:
        highest[d] = highest.get(d, 0.0) + c
    line, said = budget_line(req, statuses, period, max(highest.values(), default=0.0))
    chart = charts.cost_over_time(drawn, period, series_title, order, budget=line, zone=req.filters.zone,
                                  days=(first, last))
    return chart, note, (period, first, last), said


def _ranking_chart(con, req: Request, sql: str, link, **kw) -> tuple[str, str]:
    rows = filtered_rows(con, sql, req.filters)
    cut = charts.top_with_others(rows, req.top)
    overlay = 3 if kw.get("overlay_title") else 2  # a third column is drawn over the bar; others are for links
    drawn = [(r[0], r[1], link(r), *r[2:overlay]) for r in cut.rows]
    if cut.others:
        drawn.append((cut.others[0], cut.others[1], None, *cut.others[2:overlay]))
    return charts.hbars(drawn, **kw), cut.note


def _totals(con, req: Request) -> str:
    """The report's totals (warehouse.serve.report.cost_and_sessions): the same figures, on the same days."""
    _, (cost, sessions, unknown, partial) = cost_and_sessions(con, req.filters)
    note = f" · {unknown:,} of them with unknown cost (not counted as $0)" if unknown else ""
    note += f" · {partial:,} priced in part (their unpriced requests not counted)" if partial else ""
    return (f'<p id="total">Total cost: {usd(cost)} · {_roots(sessions)} started{escaped(note)} · '
            "root sessions only, sub-agents included once</p>")


def _roots(count: int) -> str:
    """`1 root session`, `2 root sessions` (a trial read "1 root sessions")."""
    return f"{count:,} root session{'' if count == 1 else 's'}"


# --- budgets (config.toml's [[budgets]]): this month's spend, as `report --budgets` gives it

BUDGET_LABELS = ("budget", "monthly", "spent this month", "share used", "projected", "status")
BUDGET_CLASS = {budgeting.OVER: "budget-over", budgeting.PROJECTED_OVER: "budget-projected", budgeting.OK: "budget-ok"}


def this_months_budgets(con, req: Request) -> list:
    """warehouse.serve.budgets' statuses of the server's budgets, this month to today (the page's zone):
    whatever the page's filters, as the report and the Dagster check say them."""
    return budgeting.budget_statuses(con, req.budgets, page_parts.today(req.filters.zone)) if req.budgets else []


def _amount(value) -> str:
    return dollars(value, 2)


def chart_budget(req: Request, statuses: list):
    """The budget the cost chart draws: that of the one project, user or agent the page is
    filtered to when it has its own, the team's on a page of the whole team; None when neither
    applies (a budget over the bars of a part of what it covers read as that part's: a new user's
    trial drew the team's over one project)."""
    narrowed = _narrowed_by(req.filters)
    if not narrowed:
        return next((s for s in statuses if s.budget.scope == "team"), None)
    if len(narrowed) == 1:
        (scope, value), = narrowed
        return next((s for s in statuses if (s.budget.scope, budgeting.scope_name(s.budget)) == (scope, value)), None)
    return None


def _narrowed_by(f) -> list[tuple[str, str]]:
    """The (scope, name) of each filter that shows a part of the team's spend."""
    return [(scope, value) for scope, value in (("project", f.project), ("user", f.user), ("agent", f.provider),
                                                ("machine", f.machine)) if value]


# a budget line this many times above the highest bar (and the month's projection) would flatten
# every bar to the axis: it is said under the chart instead of drawn
FLATTENS = 4


def budget_line(req: Request, statuses: list, period: str, highest: float = 0.0) -> tuple:
    """(the line to draw on the cost chart or None, the HTML line under the chart saying it). A
    monthly budget means something against bars of a month only: on days or weeks it links there.
    `highest`: the chart's highest bar."""
    if not statuses:
        return None, ""
    chosen = chart_budget(req, statuses)
    if chosen is None:
        names = ", ".join(s.budget.name for s in statuses)
        team = next((s for s in statuses if s.budget.scope == "team"), None)
        if team:
            whole = req.link("/", project="", agent="", user="", machine="", grain="month")
            shows = ", ".join(f"{scope} {value}" for scope, value in _narrowed_by(req.filters))
            return None, (f'<p class="cut" id="budget-line">No budget line: this page shows '
                          f"{escaped(shows)}, which has no budget of its own; the team "
                          f"budget {_amount(team.budget.monthly_usd)} a month is drawn on the "
                          f'<a href="{escaped(whole)}">whole team\'s monthly view</a>.</p>')
        return None, (f'<p class="cut" id="budget-line">No budget line: no team budget, and the page is not '
                      f"filtered to one project, user or agent with its own (budgets: {escaped(names)}).</p>")
    b = chosen.budget
    label = f"{b.name} budget {_amount(b.monthly_usd)} a month"
    if period != "month":
        return None, (f'<p class="cut" id="budget-line">The {escaped(label)} is drawn on the '
                      f'<a href="{escaped(req.here(grain="month"))}">monthly view</a> (one bar per month).</p>')
    if float(b.monthly_usd) > FLATTENS * max(highest, float(chosen.projected_usd)):
        return None, (f'<p class="cut {BUDGET_CLASS[chosen.status]}" id="budget-line">The {escaped(label)} is far above '
                      f"every month here (the highest {_amount(highest)}): not drawn, so that the bars stay "
                      f"readable. {chosen.month:%B %Y}: {_amount(chosen.spent_usd)} spent, "
                      f"{_amount(chosen.projected_usd)} projected at this pace: <b>{escaped(chosen.status)}</b>.</p>")
    line = charts.BudgetLine(float(b.monthly_usd), label, chosen.status, chosen.month, float(chosen.projected_usd))
    return line, (f'<p class="cut {BUDGET_CLASS[chosen.status]}" id="budget-line">Dashed line: the {escaped(label)}. '
                  f"{chosen.month:%B %Y}: {_amount(chosen.spent_usd)} spent, {_amount(chosen.projected_usd)} "
                  f"projected at this pace: <b>{escaped(chosen.status)}</b>.</p>")


def budgets_section(con, req: Request, statuses: list, projects: list[str], providers: list[str]) -> str:
    """The budgets with this month's spend, share used and projection; the ones over (red) or
    projected over (amber) marked and named first; a budget for a scope the warehouse does not
    hold said. With none set, how to set one."""
    if not statuses:
        where = escaped(req.config_file or "the home's config.toml")
        return ('<p class="meta" id="budgets-none">No budgets set: add <code>[[budgets]]</code> with '
                f"<code>monthly_usd = 500</code> (and <code>project</code>, <code>user</code> or <code>agent</code> "
                f"for one of them) to {where} to see this month's spend against it here (docs/CONFIG.md, "
                "Budgets).</p>")
    known = {"project": projects, "agent": providers, "user": req.people.get("user", [])}
    everyone = {"project": "", "agent": "", "user": "", "machine": "", "grain": "month"}
    body = []
    for s in statuses:
        b = s.budget
        name = escaped(b.name)
        if b.scope == "team" or budgeting.scope_name(b) in known[b.scope]:  # its costs, a month per bar
            scope = {} if b.scope == "team" else {b.scope: budgeting.scope_name(b)}
            link = req.link("/project" if b.scope == "project" else "/", **{**everyone, **scope})
            name = f'<a href="{escaped(link)}">{name}</a>'
        cells = [usd(s.budget.monthly_usd), usd(s.spent_usd), f"{s.share_used:.2%}", usd(s.projected_usd)]
        body.append(f'<tr class="{BUDGET_CLASS[s.status]}"><td>{name}</td>'
                    + "".join(f"<td class=num>{c}</td>" for c in cells)
                    + f'<td class="status">{escaped(s.status)}</td></tr>')
    head = "".join(f'<th{" class=num" if 0 < i < 5 else ""}>{escaped(c)}</th>' for i, c in enumerate(BUDGET_LABELS))
    warn = [f"{label}: {', '.join(s.budget.name for s in statuses if s.status == status)}"
            for status, label in ((budgeting.OVER, "over budget"), (budgeting.PROJECTED_OVER,
                                                                    "projected over by the month's end"))
            if any(s.status == status for s in statuses)]
    notes = [f"{s.budget.name}: spent is a floor, {_roots(s.unknown_cost_sessions)} of unknown cost and "
             f"{s.partial_cost_sessions:,} priced in part this month" for s in statuses
             if s.unknown_cost_sessions or s.partial_cost_sessions]
    said = "".join(f'<p class="bad" id="budgets-unknown">{escaped(n)}</p>' for n in
                   budgeting.unknown_scopes(con, req.budgets))
    month, day = statuses[0].month, page_parts.today(req.filters.zone)
    return (f'<h2 id="budgets-title">Budgets, {month:%B %Y} to {day} ({escaped(req.filters.zone)})</h2>'
            + (f'<p class="bad" id="budgets-warn">{escaped("; ".join(warn))}</p>' if warn else "")
            + f'<table id="budgets"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
            + said
            + '<p class="cut">This month\'s spend whatever the filters above, as <code>agentlake report '
              "--budgets</code> gives it; projected: at the pace of the month's days so far"
            + "".join(f"; {escaped(n)}" for n in notes) + "</p>")



# --- pages


def overview(con, req: Request, projects: list[str], providers: list[str]) -> str:
    if req.filters.project:
        return project_page(con, req, projects, providers)
    project_link = lambda p: req.link("/project", project=p)  # noqa: E731
    statuses = this_months_budgets(con, req)
    time_svg, time_note, span, budget_said = _time_chart(con, req, "project", "project", project_link, statuses)
    by_project, project_note = _ranking_chart(
        con, req, "SELECT project || ' · ' || provider, SUM(cost_usd) AS c, project, provider FROM daily_costs {w} "
                  "GROUP BY ALL ORDER BY c DESC NULLS LAST, 1",
        lambda r: req.link("/project", project=r[2], agent=r[3]))
    by_model, model_note = _ranking_chart(
        con, req, f"SELECT {model_sql('model_name')} || ' · ' || provider, SUM(cost_usd) AS c "
                  "FROM daily_costs {w} GROUP BY ALL ORDER BY c DESC NULLS LAST, 1", lambda r: None)
    tools, tool_note = _tool_chart(con, req)
    body = (empty_window(con, req) + headline(con, req) + _totals(con, req)
            + budgets_section(con, req, statuses, projects, providers)
            + grain_links(req)  # beside the chart, not in it: a chart's links are its marks'
            + figure("cost-over-time", "Cost over time, by project", time_svg, time_note, wide=True,
                     more=budget_said)
            + trends(con, req, span)
            + '<div class="grid">'
            + figure("cost-by-project", "Cost by project and agent", by_project, project_note)
            + figure("cost-by-model", "Cost by model and agent", by_model, model_note)
            + "</div>"
            + figure("tool-usage", TOOL_FIGURE, tools, tool_note)
            + "<h2>Projects</h2>" + _projects_table(con, req)
            + "<h2>People</h2>" + _users_table(con, req)
            + insights_section(con, req))
    return layout("agentlake", [("overview", None)], body, req, filter_form(req, projects, providers), about_data(con))


TOOL_FIGURE = "Tool calls by category, as each agent names its tools (red: failed, by an error or a non-zero exit)"
# the tools of a category as the agents name them (`bash`, `Bash`, `Shell`), the first few of them
TOOL_NAMES_SHOWN = 4
_TOOL_NAMES = ("array_to_string(list_slice(list_sort(list_distinct(list(tool_name))), 1, {n}), ', ') || "
               "CASE WHEN COUNT(DISTINCT tool_name) > {n} "
               "THEN ' +' || (COUNT(DISTINCT tool_name) - {n}) || ' more' ELSE '' END").format(n=TOOL_NAMES_SHOWN)


def _tool_chart(con, req: Request) -> tuple[str, str]:
    """Tool calls by category (shell, read, edit, ...): one agent's `bash` and another's `Shell`
    are one bar, labelled with the names the agents gave them, as `report --by category` lists them."""
    return _ranking_chart(con, req, f"SELECT tool_category || ': ' || {_TOOL_NAMES}, SUM(calls) AS n, SUM(failed) "
                                    "FROM tool_usage {w} GROUP BY tool_category ORDER BY n DESC, 1",
                          lambda r: None, unit="", value_title="calls", overlay_title="failed", width=900)


def _projects_table(con, req: Request) -> str:
    return _ranking_table(con, req, "projects", lambda key: req.link("/project", project=key))


def _users_table(con, req: Request) -> str:
    # a user's row opens the overview of that user's sessions alone
    return _ranking_table(con, req, "users", lambda key: req.link("/", user=key))


RANKING_LABELS = ("sessions started", "their messages", "their tool calls", "their failed calls", "cost",
                  "cost sources")


def ranking_rows(con, req: Request, name: str) -> tuple[list[str], list[tuple]]:
    """(columns, every row) of a ranking by a column (RANKINGS) of cost and sessions: the sessions
    started in the window, their messages and tool calls, the cost of its days; with the distinct
    values of a column and the cost sources. Costliest first, unless `sort` says otherwise."""
    key, (_, column) = RANKINGS[name]
    rows = filtered_rows(con, f"""
        WITH c AS (SELECT {key} AS k, SUM(cost_usd) AS cost, {sorted_list(column)} AS listed,
                          {sorted_list('cost_source')} AS sources FROM daily_costs {{w}} GROUP BY 1),
             s AS (SELECT {key} AS k, COUNT(*) AS sessions, SUM(messages) AS messages, SUM(tool_calls) AS calls,
                          SUM(failed_tool_calls) AS failed, {sorted_list(column)} AS listed FROM {sessions(req.filters)} {{w}}
                   GROUP BY 1)
        SELECT k, COALESCE(c.listed, s.listed), COALESCE(sessions, 0), COALESCE(messages, 0), COALESCE(calls, 0),
               COALESCE(failed, 0), cost, sources
        FROM c FULL JOIN s USING (k) ORDER BY cost DESC NULLS LAST, k""", req.filters)
    keys = list(SORT_KEYS[name])
    return keys, sort_rows(req, name, keys, rows)


def _ranking_table(con, req: Request, name: str, link) -> str:
    keys, rows = ranking_rows(con, req, name)
    cut = charts.top_with_others([(r[0], *r[2:7]) for r in rows], req.top, "others")
    kept = rows[:len(cut.rows)]
    shown = [(r[0], r[1], r[2], r[3], r[4], r[5], usd(r[6]), r[7]) for r in kept]
    if cut.others:
        o = cut.others
        cut.others = (o[0].replace(")", f" {name})"), "", *(int(v or 0) for v in o[1:5]), usd(o[5]), "")
    # sessions and what they hold: those started in the window; cost: what was spent in it, by day
    # (`agentlake report` counts messages sent in the window: a session across midnight differs)
    numeric = {2, 3, 4, 5, 6}
    head = sortable_head(req, name, [*keys[:2], *RANKING_LABELS], keys, numeric)
    return (table(name, keys, shown, [link(r[0]) for r in kept], cut, req.link("/", top=0), numeric=numeric, head=head)
            + takeaway(req, name, len(rows)))


SESSION_LABELS = ("title", "agent", "duration", "messages", "tool calls", "failed calls", "sub-agents", "models",
                  "cost", "cost source")  # after the start, whose clock is the page's zone's


UNTITLED = "(untitled)"  # a session without a title, on the page (its CSV leaves the cell empty)


def session_labels(zone: str) -> list[str]:
    """The sessions table's column names, its times those of the page's zone."""
    return [f"started ({zone})", *SESSION_LABELS]


def session_rows(con, req: Request) -> tuple[list[str], list[tuple]]:
    """(columns, every row) of a project's sessions: most expensive first, unless `sort` says otherwise."""
    rows = filtered_rows(con, f"""SELECT started_at, title, provider, duration_s, messages,
                                  tool_calls, failed_tool_calls, subagents, models, cost_usd, cost_source,
                                  source_id, session_id, machine, "user"
                           FROM {sessions(req.filters)} {{w}} ORDER BY cost_usd DESC NULLS LAST, started_at DESC""", req.filters)
    return list(SESSION_KEYS), sort_rows(req, "sessions", list(SESSION_KEYS), rows)


def project_page(con, req: Request, projects: list[str], providers: list[str]) -> str:
    name = req.filters.project
    if not name:
        req.errors.append("no project chosen: pick one in the form")
        return overview(con, req, projects, providers)
    time_svg, time_note, span, budget_said = _time_chart(con, req, f"{model_sql('model_name')} || ' · ' || provider",
                                                         "model", lambda s: None, this_months_budgets(con, req))
    tools, tool_note = _tool_chart(con, req)
    _, rows = session_rows(con, req)
    cut = charts.top_with_others([(r[0], *r[3:8], r[9]) for r in rows], req.top or None, "others")
    kept = rows[:len(cut.rows)]
    zone = req.filters.zone
    shown = [(clock(r[0], zone).strftime("%Y-%m-%d %H:%M") if r[0] else "", r[1] or UNTITLED, r[2], duration_text(r[3]),
              r[4], r[5], r[6], r[7],
              models_label(r[8]), usd(r[9]), r[10]) for r in kept]
    if cut.others:
        o = cut.others
        cut.others = (o[0].replace(")", " sessions)"), "", "", duration_text(o[1]), *(int(v or 0) for v in o[2:6]), "",
                      usd(o[6]), "")
    links = [session_link(req, *r[11:15]) for r in kept]
    numeric = {3, 4, 5, 6, 7, 9}
    head = sortable_head(req, "sessions", session_labels(zone), list(SESSION_KEYS), numeric)
    sessions = (table("sessions", session_labels(zone), shown, links, cut, req.link("/project", top=0),
                      numeric=numeric, head=head) + takeaway(req, "sessions", len(rows)))
    body = (empty_window(con, req) + headline(con, req) + _totals(con, req)
            + grain_links(req)
            + figure("cost-over-time", f"Cost over time in {name}, by model", time_svg, time_note, wide=True,
                     more=budget_said)
            + trends(con, req, span)
            + f"<h2>Sessions{'' if 'sessions' in req.sorts else ' (most expensive first)'}</h2>" + sessions
            + figure("tool-usage", TOOL_FIGURE, tools, tool_note)
            + insights_section(con, req))
    crumbs = [("overview", req.link("/", project="")), (name, None)]
    return layout(f"project {name}", crumbs, body, req, filter_form(req, projects, providers, "/project"),
                  about_data(con))



# --- insights (marts another part of the project adds; each is shown once it exists)


def _insight_or_none(con, req: Request, name: str, limit: int | None):
    """_insight_table, or None when the mart is not in this lake (yet): the insight marts come
    and go with the code that builds them, so a missing one is skipped, not an error. Trying the
    query is cheaper than listing the catalog's tables first."""
    try:
        return _insight_table(con, req, name, limit)
    except duckdb.CatalogException as exc:
        if name not in str(exc):
            raise
        return None


def insight_sql(con, name: str, filters: Filters) -> tuple[str, str]:
    """(title, SQL with the filters as literals) giving all of an insight's findings, worst first.
    Without a curated query: every row of the mart, by its first cost-like numeric column."""
    known = curated(name)
    if known is not None:
        return known.query(con, filters)
    described = con.execute(f'DESCRIBE "{name}"').fetchall()
    columns = [r[0] for r in described]
    people, note = people_of(con, name, filters, columns)
    numeric = [r[0] for r in described if r[1].split("(")[0] in
               ("DOUBLE", "DECIMAL", "BIGINT", "INTEGER", "HUGEINT", "FLOAT", "UBIGINT", "SMALLINT")]
    preferred = [c for word in ("cost", "usd", "wasted", "tokens", "share", "ratio", "count", "calls") for c in numeric
                 if word in c.lower()]
    order = (preferred or numeric or columns)[0]
    named = (("project", filters.project), ("provider", filters.provider)) + tuple(
        (f'"{c}"', getattr(filters, c)) for c in people)
    clauses = [f"{c} = {sql_string(v)}" for c, v in named if v is not None and c.strip('"') in columns]
    where = " WHERE " + " AND ".join(clauses) if clauses else ""
    title = name.removeprefix("insight_").replace("_", " ") + note
    return title, f'SELECT * FROM "{name}"{where} ORDER BY "{order}" DESC NULLS LAST'


HIDDEN = ("source_id", "machine", "user")  # kept for the links, too wide to show


def _insight_table(con, req: Request, name: str, limit: int | None) -> tuple[str, str, str, bool]:
    """(title, HTML table of the top findings with their note, SQL giving all of them, whether cut)."""
    title, sql = insight_sql(con, name, req.filters)
    sql = insight_order(con, req, name, sql)
    # the top rows by a LIMIT (DuckDB's top-N, not a sort of 100k findings), and the count apart
    cur = con.execute(f"{sql} LIMIT {int(limit)}" if limit else sql)
    columns = [d[0] for d in cur.description]
    rows = cur.fetchall()
    found = len(rows) if not limit or len(rows) < limit else con.execute(f"SELECT COUNT(*) FROM ({sql})").fetchone()[0]
    links = []
    for row in rows:
        r = dict(zip(columns, row))
        if r.get("source_id") is not None and r.get("session_id") is not None:
            links.append(session_link(req, r["source_id"], r["session_id"], r.get("machine"), r.get("user")))
        elif r.get("session_key") is not None:
            links.append(req.link("/session", key=r["session_key"]))
        elif r.get("project") is not None:
            links.append(req.link("/project", project=r["project"]))
        else:
            links.append(None)
    keep = [i for i, c in enumerate(columns) if c not in HIDDEN] or list(range(len(columns)))
    note = f"{len(rows)} of {found} findings shown" + (" (all)" if found == len(rows) else "")
    shown = [tuple(_cell(row[i], columns[i]) for i in keep) for row in rows]
    numeric = {j for j, i in enumerate(keep) if any(_is_number(row[i]) for row in rows)}
    names = [columns[i] for i in keep]
    # a finding about a session links from its session cell, else from the first
    link_col = next((names.index(c) for c in ("session_id", "session_key") if c in names), 0)
    head = sortable_head(req, name, names, names, numeric)
    body = (table(f"{name}-table", names, shown, links, numeric=numeric, link_col=link_col, head=head)
            + f'<p class="cut">{escaped(note)}</p>' + takeaway(req, name, found))
    return title, body, sql, len(rows) < found


def insight_order(con, req: Request, name: str, sql: str) -> str:
    """The insight's query in the order `sort` asks for: by its column, a value that is none last
    either way, ties by the other columns (so the page and its CSV agree)."""
    if name not in req.sorts:
        return sql
    columns = [d[0] for d in con.execute(f"SELECT * FROM ({sql}) LIMIT 0").description]
    chosen = sort_column(req, name, columns)
    if chosen is None:
        return sql
    quoted = lambda c: '"' + c.replace('"', '""') + '"'  # noqa: E731
    ties = "".join(f", {quoted(c)}" for c in columns if c != chosen[0])
    return f"SELECT * FROM ({sql}) ORDER BY {quoted(chosen[0])} {'DESC' if chosen[1] else 'ASC'} NULLS LAST{ties}"


def check_sorts(con, req: Request) -> None:
    """An insight's sort checked before the page is drawn, so that no link carries a bad one
    (its columns are its query's; a mart not in this lake shows no table to sort)."""
    for name in [n for n in req.sorts if n in INSIGHTS]:
        try:
            insight_order(con, req, name, insight_sql(con, name, req.filters)[1])
        except duckdb.CatalogException:
            del req.sorts[name]


def insight_rows(con, req: Request, name: str) -> tuple[list[str], list[tuple]]:
    """(columns, every finding) of an insight, in the page's order, with the columns the table hides."""
    from warehouse.serve.formatting import fetch_rows

    cur = con.execute(insight_order(con, req, name, insight_sql(con, name, req.filters)[1]))
    return [d[0] for d in cur.description], fetch_rows(cur)


def _is_number(value) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


# An insight's number is written by its column's kind, as the projects and sessions tables write
# theirs: money (`_usd`) as `usd` does; counts, and tokens or bytes (a growth per request too,
# though a DOUBLE), whole with separators; any other fraction, a ratio or share, with 3 decimals
# (what the insights round them to).
# the money columns whose NULL means none, not an unknown cost (docs/MARTS.md)
NULL_NOT_UNKNOWN = frozenset({"cost_after_compaction_usd"})


def _cell(value, column: str = ""):
    if column == "session_key" and isinstance(value, str):  # machine/user/provider/source/session: the session
        return value.rsplit("/", 1)[-1]
    if column in MODEL_COLUMNS:  # a model that is none, said as the report says it
        return label(column, value)
    if value is None and column.endswith("_usd") and column not in NULL_NOT_UNKNOWN:
        return "unknown"  # as the projects table says it, never a blank (a dashboard trial)
    if _is_number(value) and math.isfinite(value):
        if column.endswith("_usd"):
            return usd(value)
        if isinstance(value, (float, Decimal)) and not _is_whole(column):
            return f"{float(value):,.3f}"
        return f"{round(value):,}"
    text = "" if value is None else str(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _is_whole(column: str) -> bool:
    """A column of whole things (tokens, bytes, a growth in tokens) that a mart may hold as a DOUBLE."""
    return any(word in column for word in ("tokens", "bytes", "growth"))


def insights_section(con, req: Request) -> str:
    out, missing = [], []
    for name in INSIGHTS:
        found = _insight_or_none(con, req, name, INSIGHT_ROWS)
        if found is None:
            missing.append(name)
            continue
        title, body, _sql, _cut = found
        out.append(f'<div class="insight" id="{name}"><h3>{escaped(title)}</h3>'
                   f'{body}<a href="{escaped(req.link("/insight", name=name))}">all findings and the SQL that '
                   "reproduces them</a></div>")
    if not out:
        return ('<h2>Insights</h2><p class="meta" id="insights">No insight marts in this lake yet '
                f"({', '.join(INSIGHTS)}).</p>")
    if missing:
        out.append(f'<p class="meta">Not in this lake yet: {escaped(", ".join(missing))}.</p>')
    return '<h2>Insights</h2><div id="insights">' + "".join(out) + "</div>"


def insight_page(con, req: Request) -> tuple[str, int]:
    name = req.params.get("name", "")
    found = _insight_or_none(con, req, name, req.top or None) if name in INSIGHTS else None
    if found is None:
        req.errors.append(f"no insight {name!r} in this lake")
        return layout("insight not found", [("overview", req.link("/"))], "", req, about=about_data(con)), 404
    title, body, sql, cut = found
    if cut:
        body += f'<p class="cut"><a href="{escaped(req.link("/insight", name=name, top=0))}">show all</a></p>'
    from warehouse.catalog.marts import mart_sql

    definition = dict(mart_sql()).get(name)
    # the filters the findings are under, said (they were only in the SQL: a dashboard trial)
    filters = page_filters(req)
    under = ("; ".join(f"{k} {v}" for k, v in filters.items()) if filters else "none: every finding")
    body = (f"<p>{escaped(title)}</p>"
            f'<p class="meta" id="insight-filters">Filters: {escaped(under)} · '
            f'<a href="{escaped(req.link("/"))}">the overview</a> changes them</p>' + body
            + "<h2>Reproduce</h2><p>Every finding (the table shows the first rows) is this query; run it with "
            f'<code>agentlake sql</code>:</p><pre id="insight-sql">{escaped(sql)}</pre>')
    if definition:
        body += f"<details><summary>how {escaped(name)} is computed</summary><pre>{escaped(definition)}</pre></details>"
    crumbs = [("overview", req.link("/", project="")), (name, None)]
    return layout(name, crumbs, body, req, about=about_data(con)), 200


# --- a table's every row as CSV


def download(con, req: Request) -> tuple[str, int, list[tuple[str, str]]]:
    """(CSV, 200, its headers) of a table's every row (`table=`), with the page's filters and
    order: figures exact, as `agentlake report --format csv` writes them. A bad table or filter
    gets a page that names it instead (a CSV of other rows than asked for would go unnoticed)."""
    from warehouse.serve.report import Section
    from warehouse.serve.report_csv import csv_text

    name = req.params.get("table", "")
    back = [("overview", req.link("/"))]
    if name not in TABLES:
        req.errors.append(f"table: {name!r} is not one of the dashboard's tables ({', '.join(TABLES)})")
        return layout("no such table", back, "", req), 404, []
    if name == "sessions" and not req.filters.project:
        req.errors.append("table sessions: a project's sessions; choose the project (project=...)")
    columns, rows = [], []
    if not req.errors:
        if name in RANKINGS:
            columns, rows = ranking_rows(con, req, name)
        elif name == "sessions":
            columns, rows = session_rows(con, req)
        else:
            try:
                columns, rows = insight_rows(con, req, name)
            except duckdb.CatalogException as exc:
                if name not in str(exc):
                    raise
                req.errors.append(f"no insight {name!r} in this lake (yet)")
                return layout("no such table", back, "", req), 404, []
    if req.errors:
        body = "<p>No CSV is written while a parameter is wrong: fix it, or follow the page's own link.</p>"
        return layout(f"CSV of {name}", back, body, req), 400, []
    return csv_text(Section(name, name, columns, rows)), 200, [
        ("Content-Type", "text/csv; charset=utf-8"),
        ("Content-Disposition", f'attachment; filename="{csv_filename(name, req.filters)}"')]


def csv_filename(name: str, filters: Filters) -> str:
    """agentlake-<table>[-<since>][-to-<until>][-<project>...].csv, safe in a header and on any disk."""
    parts = ["agentlake", name, *([str(filters.since)] if filters.since else []),
             *([f"to-{filters.until}"] if filters.until else []),
             *(v for v in (filters.project, filters.provider, filters.user, filters.machine) if v)]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(parts)) + ".csv"
