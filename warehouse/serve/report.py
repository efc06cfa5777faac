"""`agentlake report`: the questions people ask, as a few tables over the marts.

Every section is one parameterised query with the same filters (dates, project, provider),
so the terminal tables, the JSON and the CSV always hold the same numbers (the JSON and CSV
exactly; the table rounds costs to DISPLAY_DECIMALS places for reading).
"""

import difflib
from dataclasses import dataclass
from datetime import date

from warehouse.serve.formatting import fetch_rows, json_text, render, rounded
from warehouse.lake.ducklake import sql_string
from warehouse.serve.labels import NEVER_BILLED, label
from warehouse.catalog.marts import create_block_views
from warehouse.serve.local_days import local_date
from warehouse.lake.layout import stored_agent, stored_name, stored_project
from warehouse.lake.zones import UTC, today_in
from warehouse.serve.report_options import BREAKDOWNS, PERIODS


@dataclass(frozen=True)
class Filters:
    since: date | None = None
    until: date | None = None
    project: str | None = None
    provider: str | None = None
    user: str | None = None  # who and where the rows were ingested (the dashboard's filters)
    machine: str | None = None
    zone: str = UTC  # whose days since and until are (the insights' SQL; the report's tables: local_days)

    def __post_init__(self):
        for name in ("user", "machine"):  # as an ingest stored them: `--user Ana.Smith` is ana-smith
            object.__setattr__(self, name, stored_name(getattr(self, name)))
        object.__setattr__(self, "project", stored_project(self.project))  # acme/myapp is acme-myapp
        object.__setattr__(self, "provider", stored_agent(self.provider))  # Claude is claude

    def where(self, date_col: str = "date") -> tuple[str, list]:
        clauses, params = [], []
        if self.since:
            clauses.append(f"{date_col} >= ?")
            params.append(self.since)
        if self.until:
            clauses.append(f"{date_col} <= ?")
            params.append(self.until)
        for column, value in self._scope():
            clauses.append(f"{column} = ?")
            params.append(value)
        return ("WHERE " + " AND ".join(clauses)) if clauses else "", params

    def _scope(self, scoped: bool = True, people: tuple[str, ...] = ("user", "machine")) -> list[tuple[str, str]]:
        """(SQL column, value) of the set filters on names the table has: project and provider
        when `scoped`, and those of user and machine that `people` names."""
        named = (("project", self.project if scoped else None), ("provider", self.provider if scoped else None),
                 ('"user"', self.user if "user" in people else None),
                 ("machine", self.machine if "machine" in people else None))
        return [(column, value) for column, value in named if value]

    def literal_where(self, date_col: str | None, scoped: bool = True,
                      people: tuple[str, ...] = ("user", "machine")) -> str:
        """The same filters as SQL literals, for a query shown to the user to paste into
        `agentlake sql`. Only those the table can take: a date column (SESSION_DATE: the date of
        the session a row is about, by its `session_key`), project and provider (`scoped`), user
        and machine (those `people` names)."""
        clauses = []
        if date_col == SESSION_DATE:  # sessions.date: from created_at, never NULL
            day = "date" if self.zone == UTC else f"COALESCE({local_date('created_at', self.zone)}, date)"
            days = self._literal_days(day)
            if days:
                clauses.append(f"session_key IN (SELECT {session_key()} FROM sessions WHERE "
                               + " AND ".join(days) + ")")
        elif date_col:
            clauses += self._literal_days(local_date(date_col, self.zone))
        for column, value in self._scope(scoped, people):
            clauses.append(f"{column} = '" + value.replace("'", "''") + "'")
        return (" WHERE " + " AND ".join(clauses)) if clauses else ""

    def _literal_days(self, day: str) -> list[str]:
        return ([f"{day} >= DATE '{self.since.isoformat()}'"] if self.since else []) + (
            [f"{day} <= DATE '{self.until.isoformat()}'"] if self.until else [])


def session_key(alias: str = "", session: str = "session_id") -> str:
    """SQL for a session's lake-wide key, as the marts name it (`session_key`, `root_session_key`:
    the session tree's SQL under warehouse/catalog/sql/); `session` the column (or expression) of its id."""
    p = f"{alias}." if alias else ""
    return f"concat_ws('/', {p}machine, {p}\"user\", {p}provider, {p}source_id, {session})"


# Insight.date_col for the marts whose rows are about a session: --since/--until pick the rows
# by that session's date (the day it started), which every session has, and never by a time of
# the row's own that may be NULL (a session without a compaction has no first_compaction_at)
SESSION_DATE = "session"


@dataclass
class Section:
    name: str
    title: str
    columns: list[str]
    rows: list[tuple]
    more: int = 0  # rows past the --top cut, not shown
    sql: str | None = None  # the query that reproduces the rows (insights)
    total: tuple | None = None  # a --by breakdown's total over all its rows, the cut ones too


# Costs are summed exactly (DECIMAL(38,9), nano-dollars), never rounded in SQL: the JSON and CSV
# carry them to the last digit, so rows add up to their total. Only the table rounds, for display
# (DISPLAY_DECIMALS).
_COST = "SUM(cost_usd)"  # daily_costs.cost_usd is DECIMAL(38,9): an exact sum
DISPLAY_DECIMALS = 4


def sorted_list(column: str) -> str:
    """The distinct values of a column, comma-separated in a stable (sorted) order."""
    return f"STRING_AGG(DISTINCT {column}, ', ' ORDER BY {column})"


# what "Cost and use by ..." counts next to the cost, each from the table that records it, with
# the same filters; a breakdown only gets the measures that can be split by its key
_USE = {
    "root_sessions": "SELECT {k}, COUNT(*) AS root_sessions FROM (SELECT * FROM sessions WHERE is_root) {w} GROUP BY ALL",
    "messages": "SELECT {k}, COUNT(*) AS messages FROM messages {w} GROUP BY ALL",
    # under the model model_usage counts them under (a request's, else their own, else their session's)
    "assistant_messages": "SELECT {k}, SUM(messages) AS assistant_messages FROM _message_models {w} GROUP BY ALL",
    "tool_calls": "SELECT {k}, COUNT(*) AS tool_calls FROM (SELECT * FROM tool_calls WHERE has_call) {w} GROUP BY ALL",
    "tokens": "SELECT {k}, SUM(total_tokens) AS tokens FROM token_usage {w} GROUP BY ALL",
}


def _cost_and_use(keys: list[str], use: list[str], order: str, listed: tuple[tuple[str, str], ...] = (),
                  never_billed: str | None = None, days: bool = False) -> str:
    """One row per key: the cost (daily_costs) and each measure of `use`, summed per key over
    one union of per-table aggregates (a key with use but no cost row still shows, its cost NULL:
    unknown, unless `never_billed`, a condition on the keys, says it is a known 0, or the keys
    are `days`: see BY_SQL). `listed`: (column, name) of the values of a column each row gathers,
    listed (`sorted_list`)."""
    k = ", ".join(keys + [column for column, _ in listed if column not in keys])
    branches = [f"SELECT {k}, cost_usd, cost_source, TRUE AS costed FROM daily_costs {{w}}"]
    branches += [_USE[m].format(k=k, w="{w}") for m in use]
    out = ", ".join(key.rsplit(" AS ", 1)[-1] for key in keys)  # a key computed in the branches: its name
    # a count that found none is 0, as in Totals; tokens no row recorded stay NULL (Crush records none)
    measures = "".join(f", SUM({m}) AS {m}" if m == "tokens" else f", COALESCE(SUM({m}), 0) AS {m}" for m in use)
    # a key with use but no cost row (a model whose requests are all inside sessions priced in
    # part) is unknown, said as that: an empty cell read as nothing to report
    if days:
        cost = f"CASE WHEN COUNT(costed) = 0 THEN 0::DECIMAL(38, 9) ELSE {_COST} END"
    elif never_billed is not None:
        cost = f"COALESCE({_COST}, CASE WHEN bool_and({never_billed}) THEN 0::DECIMAL(38, 9) END)"
    else:
        cost = _COST
    return (f"SELECT {out}, {cost} AS cost_usd{measures}"
            + "".join(f", {sorted_list(column)} AS {name}" for column, name in listed)
            + f", COALESCE({sorted_list('cost_source')}, CASE WHEN {cost} IS NULL THEN 'unknown' END) AS cost_source "
            + "FROM (" + " UNION ALL BY NAME ".join(f"({b})" for b in branches) + ") "
            + f"GROUP BY ALL ORDER BY {order}")


_COUNTS = ["root_sessions", "messages", "tool_calls", "tokens"]

# the decimals the rates and ratios (RATES) are rounded to by their SQL; the table writes all of
# them, in every section (a tool's error rate of 1 showed `1` in one, `1.0` in another)
RATE_DECIMALS = 3
# A day, week or month without a cost row had no cost (`days`): daily_costs puts every root
# session's cost, known or not, on the days of its steps (its creation day when it has none), so a
# day with use but none of them (a session begun just before midnight, its steps after) cost a
# known 0 (a trial: its row said `unknown`)
BY_SQL = {
    "day": _cost_and_use(["date"], _COUNTS, "date", days=True),
    # ISO weeks (Monday first) and calendar months, each named by its first day
    "week": _cost_and_use(["CAST(date_trunc('week', date) AS DATE) AS week"], _COUNTS, "week", days=True),
    "month": _cost_and_use(["CAST(date_trunc('month', date) AS DATE) AS month"], _COUNTS, "month",
                           days=True),
    "project": _cost_and_use(["project", "provider"], _COUNTS, "cost_usd DESC NULLS LAST, project, provider"),
    # one row per name a model groups under (model_names), whatever each agent recorded: the
    # recorded names listed; Claude Code's `<synthetic>` replies made no request: a known 0, as
    # model_usage has it
    "model": _cost_and_use(["model_name"], ["assistant_messages", "tokens"], "cost_usd DESC NULLS LAST, model_name",
                           listed=(("model", "models"), ("provider", "agents")),
                           never_billed=f"model_name IN ({', '.join(map(sql_string, NEVER_BILLED))})"),
    "agent": _cost_and_use(["provider"], _COUNTS, "cost_usd DESC NULLS LAST, provider"),
    "user": _cost_and_use(['"user"', "machine"], _COUNTS, 'cost_usd DESC NULLS LAST, "user", machine',
                           listed=(("provider", "agents"),)),
    "tool": "SELECT tool_name, tool_category, SUM(calls) AS calls, SUM(errors) AS errors, "
            f"ROUND(SUM(errors) / SUM(calls), {RATE_DECIMALS}) AS error_rate, SUM(nonzero_exits) AS nonzero_exits "
            "FROM tool_usage {w} GROUP BY tool_name, tool_category ORDER BY calls DESC, tool_name",
    # one row per kind of tool, whatever each agent calls it (bash, Bash, Shell, exec_command: shell)
    "category": f"SELECT tool_category, {sorted_list('tool_name')} AS tool_names, SUM(calls) AS calls, "
                f"SUM(errors) AS errors, ROUND(SUM(errors) / SUM(calls), {RATE_DECIMALS}) AS error_rate, "
                "SUM(nonzero_exits) AS nonzero_exits, SUM(failed) AS failed, "
                f"ROUND(SUM(failed) / SUM(calls), {RATE_DECIMALS}) AS failure_rate "
                "FROM tool_usage {w} GROUP BY tool_category ORDER BY calls DESC, tool_category",
}


def run_query(con, sql: str, filters: Filters, date_col: str = "date", limit: int | None = None):
    """`sql` with `{w}` each table's WHERE of the filters."""
    where, params = filters.where(date_col)
    params = params * sql.count("{w}")  # the same filters on every table the query reads
    sql = sql.format(w=where)
    if limit:
        sql += f" LIMIT {int(limit)}"
    cur = con.execute(sql, params)
    return [d[0] for d in cur.description], fetch_rows(cur)


# Totals' cost: the exact sum of the known costs, $0 when nothing is in the filters (no session
# costs nothing: a known total), NULL (unknown) when every cost in them is unknown.
_TOTAL_COST = f"CASE WHEN COUNT(*) = 0 THEN CAST(0 AS DECIMAL(38, 9)) ELSE {_COST} END"


def cost_and_sessions(con, filters: Filters) -> tuple[list[str], tuple]:
    """The totals' cost and root sessions (the dashboard shows the same): the cost of the days in
    the window, the root sessions started in it and, of those, the ones whose cost is unknown (not
    in cost_usd, never counted as $0) and the ones priced in part (only their priced requests are
    in cost_usd: the total is a floor while there are any)."""
    costs = run_query(con, f"SELECT {_TOTAL_COST} AS cost_usd FROM daily_costs {{w}}", filters)
    sessions = run_query(con, "SELECT COUNT(*) AS root_sessions, COUNT(*) FILTER (WHERE cost_source = 'unknown') "
                              "AS root_sessions_with_unknown_cost, COUNT(*) FILTER (WHERE cost_source = 'partial') "
                              "AS root_sessions_with_partial_cost FROM (SELECT * FROM sessions WHERE is_root) {w}",
                         filters)
    return costs[0] + sessions[0], costs[1][0] + sessions[1][0]


def _totals(con, filters: Filters) -> Section:
    # counted as the breakdowns count them (_USE), so that their rows add up to these: the root
    # sessions started in the window, the messages sent in it (a session's later ones are not)
    parts = [cost_and_sessions(con, filters)]
    for sql in ("SELECT COUNT(*) AS messages FROM messages {w}",
                "SELECT COALESCE(SUM(calls), 0) AS tool_calls, COALESCE(SUM(errors), 0) AS tool_errors, "
                "COALESCE(SUM(nonzero_exits), 0) AS nonzero_exits FROM tool_usage {w}"):
        columns, rows = run_query(con, sql, filters)
        parts.append((columns, rows[0]))
    return Section("totals", "Totals", [c for p in parts for c in p[0]], [sum((p[1] for p in parts), ())])


def build(con, filters: Filters, by: str = "project", top: int = 10) -> list[Section]:
    if by not in BREAKDOWNS:
        raise ValueError(f"--by must be one of {', '.join(BREAKDOWNS)}")
    sections = []

    if top < 0:
        raise ValueError("--top must be 0 (no limit) or more")

    def add(name, title, sql, date_col="date", limit=None, total=False):
        columns, rows = run_query(con, sql, filters, date_col)
        cut = rows[:limit] if limit else rows
        sections.append(Section(name, title, columns, cut, len(rows) - len(cut),
                                total=total_row(columns, rows) if total else None))

    create_block_views(con, ["_message_models"])
    sections.append(_totals(con, filters))
    add(f"by_{by}", f"Cost and use by {by}", BY_SQL[by], limit=None if by in PERIODS else top, total=True)
    if by != "project":
        add("top_projects", "Top projects", BY_SQL["project"], limit=top)
    if by != "model":
        add("models", "Models", BY_SQL["model"], limit=top)
    if by != "tool":
        add("tools", "Tools", BY_SQL["tool"], limit=top)
    add("failing_tools", "Failing tools",
        "SELECT tool_name, SUM(calls) AS calls, SUM(errors) AS errors, SUM(nonzero_exits) AS nonzero_exits, "
        f"SUM(failed) AS failed, ROUND(SUM(failed) / SUM(calls), {RATE_DECIMALS}) AS failure_rate FROM tool_usage {{w}} "
        "GROUP BY ALL HAVING SUM(failed) > 0 ORDER BY failure_rate DESC, calls DESC, tool_name", limit=top)
    return sections


# what a breakdown's total row adds up; a rate is taken again from the totals, and a column that
# is a list or a name (cost_source, agents, llm_provider) is left empty
_SUMMED = {"cost_usd", "root_sessions", "messages", "assistant_messages", "tool_calls", "tokens", "calls", "errors",
           "failed",
           "nonzero_exits"}


def total_row(columns: list[str], rows: list[tuple]) -> tuple:
    """The total of a --by breakdown, over every row (those --top cut too): its first column says
    `total`. A sum whose every value is NULL (tokens Crush never records, costs all unknown) stays
    NULL, as in Totals."""
    out = []
    for i, column in enumerate(columns):
        values = [r[i] for r in rows if r[i] is not None]
        out.append("total" if i == 0 else sum(values) if column in _SUMMED and values else None)
    named = dict(zip(columns, out))
    for rate, part in (("error_rate", "errors"), ("failure_rate", "failed")):
        if rate in named and named.get("calls"):
            out[columns.index(rate)] = round(named[part] / named["calls"], RATE_DECIMALS)
    return tuple(out)


@dataclass(frozen=True)
class Insight:
    mart: str
    title: str
    sql: str  # over the mart; {w} takes the filters
    date_col: str | None = None  # what --since/--until filter on: SESSION_DATE, or a column of the mart
    scoped: bool = True  # has project and provider columns

    def query(self, con, filters: Filters) -> tuple[str, str]:
        """(title, SQL with the filters as literals) giving all of its findings, worst first: the
        report's section and the dashboard's insight page ask the same."""
        people, note = people_of(con, self.mart, filters)
        return self.title + note, self.sql.format(w=filters.literal_where(self.date_col, self.scoped, people))


def _exact_sum(column: str, double: bool = False) -> str:
    """A sum of costs to the nano-dollar. A DECIMAL(38,9) cost sums exactly as it is; a session's
    cost is cast all the same, as it was a DOUBLE in the marts of a lake an older release merged
    (until its next merge builds them again): taken at the 9 decimals costs carry and summed as
    a DECIMAL, without a float's drift."""
    return f"SUM(CAST({column} AS DECIMAL(38, 9)))" if double else f"SUM({column})"


def _known_sum(column: str, double: bool = False) -> str:
    """A sum of costs that is NULL when one of them is unknown: never a partial figure."""
    return f"CASE WHEN COUNT(*) = COUNT({column}) THEN {_exact_sum(column, double)} END"


# The top findings of each insight mart (docs/MARTS.md), worst first, money where it is known.
# Models by the name they group under (model_name), as the report's other sections group them.
INSIGHTS = (
    Insight("insight_duplicate_reads", "Duplicate reads: a file read again with no change in between",
            "SELECT project, path, COUNT(DISTINCT session_key) AS sessions, SUM(duplicate_reads) AS duplicate_reads, "
            f"SUM(duplicate_result_bytes) AS bytes, {_known_sum('duplicate_cost_usd')} AS cost_usd "
            "FROM insight_duplicate_reads{w} GROUP BY ALL "
            "ORDER BY cost_usd DESC NULLS LAST, duplicate_reads DESC, project, path", date_col=SESSION_DATE),
    Insight("insight_unused_reads", "Unused reads: files read and never changed or named again, by project",
            "SELECT project, COUNT(DISTINCT session_key) AS sessions, COUNT(*) AS files, SUM(reads) AS reads, "
            f"{_known_sum('read_cost_usd')} AS cost_usd FROM insight_unused_reads{{w}} GROUP BY ALL "
            "ORDER BY cost_usd DESC NULLS LAST, files DESC, project", date_col=SESSION_DATE),
    Insight("insight_read_edit_ratio", "Reads per edit, by model (low: editing without looking)",
            "SELECT model_name, COUNT(DISTINCT session_key) AS sessions, SUM(reads) AS reads, SUM(changes) AS changes, "
            f"ROUND(SUM(reads) / NULLIF(SUM(changes), 0), {RATE_DECIMALS}) AS read_edit_ratio FROM insight_read_edit_ratio{{w}} "
            "GROUP BY ALL ORDER BY read_edit_ratio NULLS LAST, changes DESC, model_name", date_col=SESSION_DATE),
    Insight("insight_idle_cost", "Idle cost: sessions that cost money and changed no file, by project and models",
            "SELECT project, model_names AS models, COUNT(*) AS sessions, "
            f"{_exact_sum('cost_usd', double=True)} AS cost_usd FROM insight_idle_cost{{w}} GROUP BY ALL "
            "ORDER BY cost_usd DESC, project, models", date_col=SESSION_DATE),
    Insight("insight_retry_loops", "Retry loops: the same command or tool failing 3+ times running",
            "SELECT kind, tool_name, command, COUNT(*) AS loops, SUM(failures) AS failures, "
            f"{_known_sum('cost_usd')} AS cost_usd FROM insight_retry_loops{{w}} GROUP BY ALL "
            "ORDER BY cost_usd DESC NULLS LAST, failures DESC, tool_name, command", date_col=SESSION_DATE),
    # a session without per-request usage (Crush, CodeWhale, ...) has no growth to rank by: last,
    # even if it spent more after a compaction (it led the list with 0 requests and a blank growth)
    Insight("insight_context_growth", "Context growth: the most spent after a compaction, then the fastest "
            "growth (sessions without per-request usage, so no growth measured, last)",
            "SELECT project, provider, session_key, requests, ROUND(growth_per_request) AS growth_per_request, "
            "max_context_tokens, compactions, cost_usd, cost_after_compaction_usd FROM insight_context_growth{w} "
            "ORDER BY growth_per_request IS NULL, cost_after_compaction_usd DESC NULLS LAST, "
            "growth_per_request DESC NULLS LAST, session_key", date_col=SESSION_DATE),
    Insight("insight_cache_efficiency", "Cache: read share and writes never read back, by project and model",
            "SELECT project, model_name, SUM(requests) AS requests, "
            f"ROUND(SUM(cache_read_tokens) / NULLIF(SUM(input_tokens), 0), {RATE_DECIMALS}) AS cache_read_share, "
            "SUM(unread_write_tokens) AS unread_write_tokens FROM insight_cache_efficiency{w} GROUP BY ALL "
            "ORDER BY unread_write_tokens DESC, project, model_name", date_col=SESSION_DATE),
    Insight("insight_subagent_share", "Sub-agents: their part of their root sessions' cost, by kind",
            "SELECT agent_kind, COUNT(DISTINCT session_key) AS root_sessions, SUM(subagents) AS subagents, "
            f"{_known_sum('subagent_cost_usd', double=True)} AS subagent_cost_usd, ROUND(AVG(share), {RATE_DECIMALS}) AS mean_share "
            "FROM insight_subagent_share{w} GROUP BY ALL ORDER BY subagent_cost_usd DESC NULLS LAST, agent_kind",
            date_col=SESSION_DATE),
    Insight("insight_usage_blocks", "Claude Code 5-hour usage blocks, costliest first (all projects)",
            'SELECT "user", block_start, block_end, requests, sessions, total_tokens, cost_usd, '
            "unpriced_requests FROM insight_usage_blocks{w} ORDER BY cost_usd DESC NULLS LAST, block_start",
            date_col="block_start", scoped=False),
)


PEOPLE = ("user", "machine")


def curated(mart: str) -> Insight | None:
    """The insight's curated query, if it has one: the dashboard shows the same findings, worst
    first, with the same SQL behind them."""
    return next((i for i in INSIGHTS if i.mart == mart), None)


def people_of(con, name: str, filters: Filters, columns: list[str] | None = None) -> tuple[tuple[str, ...], str]:
    """(of user and machine, the columns the mart has, a note for the filters it cannot take).
    Looked up only when a filter names one of them."""
    wanted = [c for c in PEOPLE if getattr(filters, c)]
    if not wanted:
        return PEOPLE, ""
    if columns is None:
        columns = [r[0] for r in con.execute("SELECT column_name FROM information_schema.columns WHERE "
                                             "table_name = ?", [name]).fetchall()]
    has = tuple(c for c in PEOPLE if c in columns)
    missing = [c for c in wanted if c not in has]
    return has, f" · every {' and '.join(missing)}: this insight has none" if missing else ""


def build_insights(con, filters: Filters, top: int = 3) -> list[Section]:
    """One section per insight: its top rows and the SQL (filters as literals) that gives them all.
    A user or machine filter applies where the mart has that column; elsewhere the title says so
    (`report --insights --machine` failed on the usage blocks, which have no machine)."""
    if top < 0:
        raise ValueError("--top must be 0 (no limit) or more")
    sections = []
    for i in INSIGHTS:
        title, sql = i.query(con, filters)
        cur = con.execute(sql)
        columns, rows = [d[0] for d in cur.description], fetch_rows(cur)
        cut = rows[:top] if top else rows
        sections.append(Section(i.mart, title, columns, cut, len(rows) - len(cut), sql))
    return sections


def _not_shown(s: Section) -> str:
    return f"{s.more} more not shown (--top {len(s.rows) + s.more} or --top 0 shows them)"


def _is_cost(column: str) -> bool:
    return column.endswith("_usd")


def _for_display(value):
    """A cost as the table shows it, with DISPLAY_DECIMALS decimals (`0.3500`, so that a column
    lines up): rounded half away from zero, as SQL's ROUND does, a DOUBLE from its shortest text;
    the JSON and CSV carry the exact figure."""
    return rounded(value, DISPLAY_DECIMALS)


def _display_rows(s: Section, labelled: bool = True) -> list[tuple]:
    """The rows as the table shows them: costs rounded, a model that is none said in words
    (warehouse.serve.labels, as the dashboard says it), unless not `labelled`."""
    costs = [_is_cost(c) for c in s.columns]
    return [tuple(_for_display(v) if cost else label(c, v) if labelled else v for v, c, cost in zip(r, s.columns, costs))
            for r in s.rows]


def _display_total(s: Section) -> tuple | None:
    """The total row as the table shows it: costs rounded; a column it does not sum stays empty
    (not "no model recorded" under the models of every row)."""
    return None if s.total is None else _display_rows(Section(s.name, s.title, s.columns, [s.total]), labelled=False)[0]


# the decimals a budget's share used is kept to (warehouse.serve.budgets): written with all of them,
# whatever its rows (a column of 0.18 and 0.45 showed two, of 0.1894 four)
SHARE_DECIMALS = 4
RATES = ("error_rate", "failure_rate", "read_edit_ratio", "cache_read_share", "mean_share")


def _places(s: Section) -> dict[str, int]:
    """Every cost column of the table with DISPLAY_DECIMALS decimals, a budget's share used with
    SHARE_DECIMALS and a rate with RATE_DECIMALS, so that each lines up the same on every run."""
    return {c: DISPLAY_DECIMALS for c in s.columns if _is_cost(c)} | (
        {"share_used": SHARE_DECIMALS} if "share_used" in s.columns else {}) | {
        c: RATE_DECIMALS for c in RATES if c in s.columns}


def render_report(sections: list[Section], fmt: str = "table") -> str:
    """A report as a table or JSON (CSV: warehouse.serve.report_csv, a file per section). JSON
    holds every cost exactly (DECIMAL digits, rows add up to the total) and every value as the
    warehouse holds it; the table rounds costs to DISPLAY_DECIMALS places and names
    what is not a model (warehouse.serve.labels) for reading."""
    if fmt == "json":  # "not_shown" only when a ranking was cut: rows left out, by section
        data = {s.name: [dict(zip(s.columns, r)) for r in s.rows] for s in sections}
        cut = {s.name: s.more for s in sections if s.more}
        sql = {s.name: s.sql for s in sections if s.sql}  # insights: the query behind each
        return json_text(data | ({"not_shown": cut} if cut else {}) | ({"sql": sql} if sql else {}),
                         ensure_ascii=True)
    return "\n\n".join(f"{s.title}\n{render(s.columns, _display_rows(s), 'table', places=_places(s), total=_display_total(s))}"
                       + (f"\n{_not_shown(s)}" if s.more else "") + (f"\nSQL: {s.sql}" if s.sql else "")
                       for s in sections)


def unknown_filters(con, filters: Filters, limit: int = 8) -> list[str]:
    """What a --project, --agent, --user or --machine filter names that the warehouse does not
    hold, with the closest names it does hold (a typo would otherwise print empty tables without a word)."""
    said = (unknown_name(con, what, value, column, limit) for what, value, column in
            (("project", filters.project, "project"), ("agent", filters.provider, "provider"),
             ("user", filters.user, '"user"'), ("machine", filters.machine, "machine")) if value is not None)
    return [s for s in said if s]


def close_names(value: str, known, limit: int = 8) -> list[str]:
    """The names of `known` that hold `value` or are held in it, then those spelt like it."""
    close = [k for k in known if k and (value.lower() in k.lower() or k.lower() in value.lower())]
    close += [k for k in difflib.get_close_matches(value, known, n=limit, cutoff=0.5) if k not in close]
    return close[:limit]


def unknown_name(con, what: str, value: str, column: str, limit: int = 8, table: str = "sessions") -> str | None:
    """`value` of `<table>.<column>` (a project, agent or user) if the warehouse does not hold
    it, said with the close names it holds, else None."""
    known = [r[0] for r in con.execute(f"SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL "
                                       f"ORDER BY 1").fetchall()]
    if value in known:
        return None
    close = close_names(value, known, limit)
    if close:
        hint = f"close ones: {', '.join(close[:limit])}"
    elif known:
        hint = f"it holds {len(known)}: {', '.join(known[:limit])}" + (", ..." if len(known) > limit else "")
    else:
        hint = "it holds none yet"
    return f"no {what} {value!r} in the warehouse; {hint}"


def pair_without_sessions(user: str | None, machine: str | None, theirs) -> str | None:
    """What a --user and --machine that name no session together say: the user's machines
    (`theirs`, the machines they have sessions on). The CLI's report and the dashboard say it."""
    theirs = sorted(theirs)
    if user is None or machine is None or not theirs or machine in theirs:
        return None
    return f"user {user!r} has no session on machine {machine!r}; theirs are on {', '.join(theirs)}"


def empty_window(con, filters, flags: bool = True) -> str | None:
    """A window with no session, nor a message or request of one, where the warehouse holds some
    elsewhere: the days it does hold (a demo's January looked like an empty warehouse to `report
    --week` in December), and, with `flags`, the --since and --until that show them. None when the
    window holds some, or there is none. The CLI's report and MCP's usage_report say it."""
    if filters.since is None and filters.until is None:
        return None
    from dataclasses import replace

    scope, params = replace(filters, since=None, until=None).where()  # the project and agent filters
    window = [filters.since or date.min, filters.until or date.max]

    def day(when: str) -> str:
        # the zone's day whether or not the table is shadowed with it (the insights read UTC tables)
        return '"date"' if filters.zone == UTC else f'COALESCE({local_date(when, filters.zone)}, "date")'

    first, last, inside = con.execute(
        f"SELECT MIN({day('created_at')}), MAX({day('created_at')}), COUNT(*) FILTER (WHERE {day('created_at')} "
        f"BETWEEN ? AND ?) FROM sessions {scope}", [*window, *params]).fetchone()
    # a session started before the window may spend in it (the report counts its cost there): its
    # messages' and requests' days count too, looked at only when no session started inside
    active = (("messages", day("created_at")), ("usage", day("requested_at")))
    if first is not None and not inside:
        and_ = " AND " if scope else " WHERE "
        if any(con.execute(f"SELECT 1 FROM {table} {scope}{and_}{d} BETWEEN ? AND ? LIMIT 1",
                           [*params, *window]).fetchone() for table, d in active):
            return None
        for table, d in active:  # the days they hold, for the note's range
            since, to = con.execute(f"SELECT MIN({d}), MAX({d}) FROM {table} {scope}", params).fetchone()
            first, last = min(first, since or first), max(last, to or last)
        to, today = filters.until or "today", today_in(filters.zone)
        if filters.until is None and filters.since is not None and filters.since > today:
            to = f"today ({today}: --since is in the future)"
        return (f"no session from {filters.since or 'the first day'} to {to}; "
                f"the sessions{' of these filters' if scope else ''} are from {first} to {last}"
                + (f" (--since {first} --until {last})" if flags else ""))
    return None
