"""A dashboard page's request: its query string validated into filters, sorts and a grain,
each bad value named in `errors` (shown on the page, never swallowed)."""

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlencode

from warehouse.lake.layout import AS_STORED
from warehouse.lake.zones import UTC, BadZone, check_zone
from warehouse.serve.report import Filters, close_names
from warehouse.serve.report_options import parse_day

DEFAULT_TOP = 15
INSIGHTS = ("insight_duplicate_reads", "insight_unused_reads", "insight_read_edit_ratio", "insight_idle_cost",
            "insight_retry_loops", "insight_context_growth", "insight_cache_efficiency", "insight_subagent_share",
            "insight_usage_blocks")
INSIGHT_ROWS = 5  # findings per insight on the overview; its own page shows more


# a ranking's key (a column) and the distinct values of a column listed beside it (its title, its column)
RANKINGS = {"projects": ("project", ("agents", "provider")), "users": ('"user"', ("machines", "machine"))}
RANKING_KEYS = ("sessions_started", "messages", "tool_calls", "failed_calls", "cost_usd", "cost_sources")
# the columns of the tables whose columns are known before a query (an insight's are its query's)
SORT_KEYS = {name: (RANKINGS[name][0].strip('"'), RANKINGS[name][1][0], *RANKING_KEYS) for name in RANKINGS}
SORT_KEYS["sessions"] = SESSION_KEYS = (
    "started_at", "title", "agent", "duration_s", "messages", "tool_calls", "failed_calls", "subagents", "models",
    "cost_usd", "cost_source", "source_id", "session_id", "machine", "user")  # the CSV's: the table's, then the session's names


@dataclass
class Request:
    """A page's parameters after validation; `errors` are shown on the page, never swallowed."""
    filters: Filters
    top: int = DEFAULT_TOP
    params: dict = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    people: dict = field(default_factory=dict)  # the lake's users and machines, for the form
    grain: str | None = None  # the time chart's bars: day, week or month; None: by the span
    sorts: dict = field(default_factory=dict)  # table -> (column, descending); a column checked when drawn
    path: str = "/"
    budgets: tuple = ()  # config.toml's [[budgets]] (warehouse.lake.config.Budget), given to the server
    config_file: str | None = None  # where they are set, for the line saying how to set one
    tz: str | None = None  # the zone the page names (`tz=`), kept by its links; filters.zone: the one used
    notes: list[str] = field(default_factory=list)  # what the filters meet, said as the report says it (not errors)

    def link(self, path: str, **extra) -> str:
        """A link to `path` that keeps the valid filters (and `top`, the grain and the sorts), with `extra` on top."""
        f = self.filters
        keep = {"since": f.since, "until": f.until, "project": f.project, "agent": f.provider, "user": f.user,
                "machine": f.machine, "top": None if self.top == DEFAULT_TOP else self.top, "grain": self.grain,
                "sort": sort_values(self.sorts), "tz": self.tz}
        keep.update(extra)
        query = urlencode({k: v for k, v in keep.items() if v is not None and v != "" and v != []}, doseq=True)
        return path + (f"?{query}" if query else "")

    def here(self, **extra) -> str:
        """`link` to this page (an insight's page keeps its name), with `extra` on top."""
        own = {k: self.params[k] for k in PAGE_PARAMS.get(self.path, ()) if self.params.get(k)}
        return self.link(self.path, **{**own, **extra})

    def sorted_by(self, table: str, column: str | None, descending: bool = False) -> str:
        """This page with `table` sorted by `column` (None: its own order), the other tables' sorts kept."""
        sorts = {t: s for t, s in self.sorts.items() if t != table}
        if column is not None:
            sorts[table] = (column, descending)
        return self.here(sort=sort_values(sorts))


def sort_values(sorts: dict) -> list[str]:
    return [f"{t}:{c}:{'desc' if d else 'asc'}" for t, (c, d) in sorts.items()]


GRAINS = ("day", "week", "month")
# the tables that can be sorted and downloaded: the overview's rankings, a project's sessions, the insights
TABLES = ("projects", "users", "sessions") + INSIGHTS


# the form's fields
FILTERS = ("since", "until", "project", "agent", "top", "user", "machine", "grain", "tz")
# what else a page reads: `provider` is the agent filter's older name (links and bookmarks made
# before it was `agent`); `sort` a table's order (a column header's link); `token` is the dashboard's own (warehouse.serve.dashboard.server). On a
# session's page `machine` is the session's own (a store ingested on two machines), not a filter;
# `session_user` its user (one store landed under two user names), beside the user filter it keeps.
PAGE_PARAMS = {"/session": ("source", "id", "key", "session_user"), "/insight": ("name",), "/csv": ("table",),
               "/search": ("q", "role", "tool", "kind")}
OTHER_PARAMS = ("provider", "token", "sort")


def parse_request(query: str, projects: list[str], providers: list[str], path: str = "/",
                  users: list[str] = (), machines: list[str] = (), zone: str = UTC) -> Request:
    """The query string, validated: a bad date, an unknown project, agent, user or machine, a bad
    `top`, a bad time zone (`tz`; else `zone`, the server's) or a parameter the page does not read
    is left out of the filters and named in `errors`."""
    given = parse_qs(query, keep_blank_values=True)
    params = {k: v[-1].strip() for k, v in given.items()}
    errors, days = [], {}
    for key, values in given.items():  # one value each (the sort excepted): the last is the one used
        if key != "sort" and len(dict.fromkeys(v.strip() for v in values)) > 1:
            errors.append(f"{key} given {len(values)} times ({', '.join(repr(v.strip()) for v in values)}): "
                          f"one value each; {params[key]!r} used")
    tz = params.get("tz") or None
    if tz is not None:
        try:
            zone = check_zone(tz, "tz")
        except BadZone as exc:
            errors.append(f"{exc}; {zone} days used")
            tz = None
    known = FILTERS + PAGE_PARAMS.get(path, ()) + OTHER_PARAMS
    for key in params:
        if key not in known:
            # the page's own parameters and the sort named too, not the token (a trial: sort left out)
            takes = FILTERS + PAGE_PARAMS.get(path, ()) + ("sort",)
            errors.append(f"unknown parameter {key!r}: this page takes {', '.join(takes)}; ignored")
    for key in ("since", "until"):
        text = params.get(key, "")
        if text:
            try:
                days[key] = parse_day(text)
            except ValueError:
                errors.append(f"{key}: {text!r} is not a date (YYYY-MM-DD); ignored")
    if days.get("since") and days.get("until") and days["since"] > days["until"]:
        errors.append(f"since {days['since']} is after until {days['until']}: no day can match; both ignored")
        days = {}
    agent, old = params.get("agent", ""), params.get("provider", "")
    if agent and old and agent.lower() != old.lower():
        errors.append(f"agent {agent!r} and provider {old!r} name different agents (provider is agent's older "
                      f"name); agent used")
    params["agent"] = agent or old
    chosen = {}
    choices = [("project", projects), ("agent", providers), ("user", users)]
    choices += [("machine", machines)] if path != "/session" else []
    for key, known_values in choices:
        typed = params.get(key, "")
        # a name as typed, as the report and MCP take it: `Acme/WebShop` is acme-webshop, `Ana.Smith` ana-smith
        value = AS_STORED[key](typed) if typed and key in AS_STORED and typed not in known_values else typed
        if value and value not in known_values:
            close = ", ".join(close_names(value, known_values, 5))  # the stored form: Ana.Smyth is near ana-smith
            errors.append(f"unknown {key} {typed!r} (not in this lake{'; close ones: ' + close if close else ''}); "
                          "ignored")
        elif value:
            chosen[key] = value
    top = DEFAULT_TOP
    text = params.get("top", "")
    if text != "":
        number = int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else None
        if number is None:
            errors.append(f"top: {text!r} is not a whole number (0 shows all); {DEFAULT_TOP} used")
        elif number < 0:
            errors.append(f"top: {text!r} is negative: rows per ranking must be 0 (all) or more; {DEFAULT_TOP} used")
        else:
            top = number
    grain = (params.get("grain", "") or "").lower() or None  # in any case, as the other filters
    if grain is not None and grain not in GRAINS:
        errors.append(f"grain: {grain!r} is not one of {', '.join(GRAINS)}; the bars follow the span")
        grain = None
    filters = Filters(days.get("since"), days.get("until"), chosen.get("project"), chosen.get("agent"),
                      chosen.get("user"), chosen.get("machine"), zone)
    return Request(filters, top, params, errors, {"user": list(users), "machine": list(machines)}, grain,
                   parse_sorts(parse_qs(query, keep_blank_values=True).get("sort", []), errors), path, tz=tz)


def parse_sorts(values: list[str], errors: list[str]) -> dict:
    """`sort=<table>:<column>[:asc|desc]` (asc when not said), one per table, the last one given
    winning; the column is checked when the table is drawn (an insight's columns are its query's)."""
    sorts = {}
    for value in values:
        parts = value.strip().split(":")
        table, column, direction = (parts + ["asc"] if len(parts) == 2 else parts + ["", "", ""])[:3]
        if len(parts) not in (2, 3) or not table or not column:
            errors.append(f"sort: {value!r} is not <table>:<column>[:asc|desc]; ignored")
        elif table not in TABLES:
            errors.append(f"sort: unknown table {table!r} (the tables: {', '.join(TABLES)}); ignored")
        elif direction not in ("asc", "desc"):
            errors.append(f"sort: {direction!r} in {value!r} is neither asc nor desc; ignored")
        elif table in SORT_KEYS and column not in SORT_KEYS[table]:  # an insight's: checked when drawn
            errors.append(f"sort: {table} has no column {column!r} (its columns: {', '.join(SORT_KEYS[table])}); "
                          "its own order kept")
        else:
            sorts[table] = (column, direction == "desc")
    return sorts
