"""The dashboard's pages: overview -> project -> session transcript, and the insights.

Overview and project pages read the marts only (daily_costs, session_summary, tool_usage,
insight_*; a failed call, by an error or a non-zero exit, counted once); the transcript reads
messages, parts, tool_calls and usage for one session, filtered by its project, days and ids so
that DuckLake prunes to a few files. Every table is cut to the
top N with an "others" row (warehouse.serve.dashboard.charts.top_with_others) and every row links one level down.
"""

import html
import math
import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from urllib.parse import parse_qs, urlencode

import duckdb

from warehouse.lake.ducklake import CATALOG, sql_string
from warehouse.lake.zones import UTC, BadZone, check_zone, clock, today_in
from warehouse.land.demo_home import is_demos
from warehouse.serve import budgets as budgeting
from warehouse.serve.dashboard import charts
from warehouse.serve.labels import MODEL_COLUMNS, label, model_label, model_sql, models_label
from warehouse.serve.local_days import local_date
from warehouse.serve.report import Filters, close_names, cost_and_sessions, people_of, session_key, sorted_list
from warehouse.serve.report_options import parse_day
from warehouse.serve.search import message_anchor

DEFAULT_TOP = 15
INSIGHTS = ("insight_duplicate_reads", "insight_unused_reads", "insight_read_edit_ratio", "insight_idle_cost",
            "insight_retry_loops", "insight_context_growth", "insight_cache_efficiency", "insight_subagent_share",
            "insight_usage_blocks")
INSIGHT_ROWS = 5  # findings per insight on the overview; its own page shows more
TEXT_LIMIT = 4000  # characters of one part shown in a transcript; the rest is counted, not shown
PARTS_LIMIT = 2000  # parts of one transcript page


def sessions(filters: Filters) -> str:
    """session_summary read as if it had a `date` column (the day it started, in the filters'
    zone), so the same Filters apply to every table."""
    return f"(SELECT *, {local_date('started_at', filters.zone)} AS date FROM session_summary)"

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
# session's page `machine` is the session's own (a store ingested on two machines), not a filter.
PAGE_PARAMS = {"/session": ("source", "id", "key"), "/insight": ("name",), "/csv": ("table",),
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
            errors.append(f"unknown parameter {key!r}: the filters are {', '.join(FILTERS)}; ignored")
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
    if agent and old and agent != old:
        errors.append(f"agent {agent!r} and provider {old!r} name different agents (provider is agent's older "
                      f"name); agent used")
    params["agent"] = agent or old
    chosen = {}
    choices = [("project", projects), ("agent", providers), ("user", users)]
    choices += [("machine", machines)] if path != "/session" else []
    for key, known_values in choices:
        value = params.get(key, "")
        if value and value not in known_values:
            close = ", ".join(close_names(value, known_values, 5))
            errors.append(f"unknown {key} {value!r} (not in this lake{'; close ones: ' + close if close else ''}); ignored")
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
    grain = params.get("grain", "") or None
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


def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def usd(value) -> str:
    return "unknown" if value is None else f"${float(value):,.4f}"


def _query(con, sql: str, filters: Filters, *extra) -> list[tuple]:
    where, params = filters.where()
    count = sql.count("{w}")
    return con.execute(sql.format(w=where), params * count + list(extra)).fetchall()


# --- what data a page shows: the demo's or not, and merged when

# the kinds of change a compaction makes (DuckLake's `ducklake_snapshots`): files reorganised,
# no row changed; every other snapshot of the catalog is a merge's
COMPACTION = ("compacted_table", "merge_adjacent", "rewrite_delete", "flushed_inlined", "inline_flush")


STALE = timedelta(hours=72)  # the central deployment's default (pipelines.central): a weekend is not yet late


# One query for the whole line (each query on the lake costs a catalog lookup): the last merge as
# DuckLake's snapshots say it, each machine's last run as warehouse.catalog.checks.last_runs takes
# it from the run log (`sources`), and the stores read, to tell the demo's.
_FRESHNESS = """
WITH snapshots AS (SELECT snapshot_time, changes FROM ducklake_snapshots({catalog})),
     merged AS (SELECT (SELECT MAX(snapshot_time) FROM snapshots
                        WHERE len(list_filter(map_keys(changes), k -> k NOT IN ({kinds}))) > 0) AS merged,
                       (SELECT MIN(snapshot_time) FROM snapshots) AS first_kept),
     runs AS (SELECT machine, MAX(run_at) AS last_run, LIST(DISTINCT db_path) FILTER (WHERE status = 'ok') AS paths
              FROM sources GROUP BY machine)
SELECT merged, first_kept, machine, last_run, paths FROM merged LEFT JOIN runs ON true ORDER BY machine"""


@dataclass
class Freshness:
    """When the warehouse was last merged, each machine's last run, and how many of the stores
    read into it are the demo's."""
    merged: datetime | None = None  # None: a catalog with no snapshot
    exactly: bool = False  # False: a compaction expired the merge's snapshot; `merged` is the first one kept
    runs: dict = field(default_factory=dict)  # machine -> its last run (naive UTC)
    demo: int = 0
    stores: int = 0


def freshness(con) -> Freshness:
    """The last merge: the time of the catalog's last snapshot that is not a compaction's. A
    compaction expires older snapshots: where no merge's is left, the first one kept, which came
    after the last merge (`exactly` False). A store `agentlake demo` generated is one under a
    `demo-data` folder (warehouse.land.demo_home)."""
    kinds = ", ".join(sql_string(k) for k in COMPACTION)
    rows = con.execute(_FRESHNESS.format(catalog=sql_string(CATALOG), kinds=kinds)).fetchall()
    merged, first_kept = rows[0][:2]
    paths = {p for r in rows for p in (r[4] or ())}
    return Freshness(merged if merged is not None else first_kept, merged is not None,
                     {r[2]: r[3] for r in rows if r[2] is not None}, sum(is_demos(p) for p in paths), len(paths))


def _utc(at: datetime, seconds: bool = True) -> str:
    at = at.astimezone(timezone.utc) if at.tzinfo else at  # run_at is naive UTC already
    return at.strftime("%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC")


def about_data(con) -> str:
    """The line under every page's title: whether its sessions are the demo's, when the warehouse
    was last merged and each machine's last run, a machine more than STALE behind the newest run
    marked (behind the lake's own newest run, not today: the page is kept until the next merge)."""
    from warehouse.catalog.checks import stale_machines

    fresh = freshness(con)
    when = ""
    if fresh.merged is not None:
        at = _utc(fresh.merged)
        when = f"last merged {at}" if fresh.exactly else f"last merged before {at} (compacted since)"
    runs = ""
    if fresh.runs:
        newest = max(fresh.runs.values())
        behind = stale_machines(fresh.runs, newest, STALE)
        said = []
        for machine, at in sorted(fresh.runs.items()):
            late = (f' <b class="bad">{(newest - at).days} days behind the newest run</b>'
                    if machine in behind else "")
            said.append(f"{_e(machine)} {_e(_utc(at, False))}{late}")
        runs = f'<span id="machine-runs">last run per machine: {", ".join(said)}</span>'
    if fresh.demo and fresh.demo == fresh.stores:
        what = ("<b>Demo data</b>: every session here was generated by agentlake demo (the quickstart's "
                "demo, when it found no agent data), none is your agents'")
    elif fresh.demo:
        what = (f"<b>Partly demo data</b>: {fresh.demo} of the {fresh.stores} stores read here were generated by "
                "agentlake demo")
    else:
        what = ""
    text = " · ".join(t for t in (what, _e(when), runs) if t)
    cls = "about demo" if fresh.demo else "about"
    return f'<p class="{cls}" id="about-data">{text}</p>' if text else ""


# --- pieces of a page


def table(table_id: str, columns: list[str], rows: list[tuple], links: list[str | None], cut: charts.Cut | None = None,
          all_link: str | None = None, numeric: set[int] = frozenset(), link_col: int = 0, head: str = "") -> str:
    """An HTML table whose rows link one level down (from cell `link_col`), with the others row
    last and a caption saying how many rows are shown. `head`: its header cells (`sortable_head`)."""
    head = head or "".join(f'<th{" class=num" if i in numeric else ""}>{_e(c)}</th>' for i, c in enumerate(columns))
    body = []
    for row, link in zip(rows, links):
        cells = []
        for i, value in enumerate(row):
            text = _e(f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value)
            if i == link_col and link:
                text = f'<a href="{_e(link)}">{text}</a>'
            cells.append(f'<td{" class=num" if i in numeric else ""}>{text}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    if cut is not None and cut.others is not None:
        body.append('<tr class="others">' + "".join(
            f'<td{" class=num" if i in numeric else ""}>{_e(f"{v:,}" if isinstance(v, int) else v)}</td>'
            for i, v in enumerate(cut.others)) + "</tr>")
    if not rows:
        body.append(f'<tr><td colspan="{len(columns)}">no rows for these filters</td></tr>')
    note = ""
    if cut is not None:
        more = f' · <a href="{_e(all_link)}">show all</a>' if cut.others is not None and all_link else ""
        note = f'<p class="cut">{_e(cut.note)}{more}</p>'
    return (f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>{note}')


def figure(fig_id: str, title: str, svg: str, note: str = "", wide: bool = False, more: str = "") -> str:
    """A chart with its caption and note; `more`: HTML under the note (a line with a link)."""
    note = f'<p class="cut">{_e(note)}</p>' if note else ""
    cls = ' class="wide"' if wide else ""
    return f'<figure id="{fig_id}"{cls}><figcaption>{_e(title)}</figcaption>{svg}{note}{more}</figure>'


def sort_rows(req: Request, name: str, keys: list[str], rows: list[tuple]) -> list[tuple]:
    """`rows` (in the table's own order) as `sort` orders table `name`: by a column of `keys`,
    a value that is none last either way, ties in the table's own order. An unknown column is
    named on the page and the table keeps its own order."""
    chosen = _sort_column(req, name, keys)
    if chosen is None:
        return rows
    i, descending = keys.index(chosen[0]), chosen[1]
    known = sorted((r for r in rows if r[i] is not None), key=lambda r: r[i], reverse=descending)
    return known + [r for r in rows if r[i] is None]


def _sort_column(req: Request, name: str, keys: list[str]) -> tuple[str, bool] | None:
    chosen = req.sorts.get(name)
    if chosen is not None and chosen[0] not in keys:
        req.errors.append(f"sort: {name} has no column {chosen[0]!r} (its columns: {', '.join(keys)}); "
                          "its own order kept")
        del req.sorts[name]  # the page's links leave it out
        return None
    return chosen


def sortable_head(req: Request, name: str, labels: list[str], keys: list[str], numeric: set[int]) -> str:
    """Header cells that each link to the table sorted by its column: numbers largest first, text
    from A, and the column it is sorted by the other way round."""
    current = req.sorts.get(name)
    cells = []
    for i, (label, key) in enumerate(zip(labels, keys)):
        on = current is not None and current[0] == key
        descending = not current[1] if on else i in numeric
        arrow = (" ▼" if current[1] else " ▲") if on else ""
        aria = f' aria-sort="{"descending" if current[1] else "ascending"}"' if on else ""
        cells.append(f'<th{" class=num" if i in numeric else ""}{aria}><a class="sort" href="'
                     f'{_e(req.sorted_by(name, key, descending))}">{_e(label)}{arrow}</a></th>')
    return "".join(cells)


def takeaway(req: Request, name: str, rows: int) -> str:
    """The line under a sortable table: its order, and its every row as CSV (the same filters and order)."""
    chosen = req.sorts.get(name)
    order = ""
    if chosen is not None:
        order = (f'sorted by {_e(chosen[0])}, {"descending" if chosen[1] else "ascending"} · '
                 f'<a href="{_e(req.sorted_by(name, None))}">its own order</a> · ')
    csv_link = req.link("/csv", table=name, top=None, grain=None)
    return (f'<p class="cut takeaway" id="{_e(name)}-takeaway">{order}<a class="csv" href="{_e(csv_link)}">'
            f"CSV of all {rows:,} row{'s' if rows != 1 else ''}</a></p>")


def today(zone: str = UTC) -> date:
    """Today's date in `zone`: the presets' windows end on it."""
    return today_in(zone)


def page_zone(query: str, zone: str) -> str:
    """The zone a page's query names (`tz=`) when it is one, else `zone`: whose today it is."""
    named = (parse_qs(query).get("tz") or [""])[-1].strip()
    try:
        return check_zone(named) if named else zone
    except BadZone:
        return zone


def presets(req: Request) -> str:
    """Links that set since and until to a window ending today (in the page's zone), the one shown marked."""
    now = today(req.filters.zone)
    windows = [(f"last {n} days", now - timedelta(days=n - 1), now) for n in (7, 30, 90)]
    windows += [("this month", now.replace(day=1), now), ("all days", None, None)]
    out = []
    for label, since, until in windows:
        if (req.filters.since, req.filters.until) == (since, until):
            out.append(f'<b aria-current="true">{_e(label)}</b>')
        else:
            out.append(f'<a href="{_e(req.here(since=since or "", until=until or ""))}">{_e(label)}</a>')
    return (f'<p class="presets" id="presets">Window ({_e(req.filters.zone)} days, today is {now}): '
            f'{" · ".join(out)}</p>')


def grain_links(req: Request) -> str:
    """Links that set the time chart's bars to a day, a week or a month each (or by the span)."""
    out = []
    for grain, label in ((None, "by the span"), *((g, g) for g in GRAINS)):
        if grain == req.grain:
            out.append(f'<b aria-current="true">{_e(label)}</b>')
        else:
            out.append(f'<a href="{_e(req.here(grain=grain or ""))}">{_e(label)}</a>')
    return f'<p class="toggle" id="grain">Cost and trends over time, one bar or point per: {" · ".join(out)}</p>'


def empty_window(con, req: Request) -> str:
    """A line saying so when the dates hold no data for the other filters (a preset is relative
    to today; the lake's data, the demo's, may lie in the past), with links to where data is."""
    f = req.filters
    if not f.since and not f.until:
        return ""
    inside = " AND ".join(([f"d >= DATE '{f.since.isoformat()}'"] if f.since else [])
                          + ([f"d <= DATE '{f.until.isoformat()}'"] if f.until else []))
    first, last, held = _query(con, f"SELECT MIN(d), MAX(d), COUNT(*) FILTER (WHERE {inside}) FROM "
                                    f"(SELECT date AS d FROM daily_costs {{w}} UNION ALL "
                                    f"SELECT date AS d FROM {sessions(f)} {{w}})", replace(f, since=None, until=None))[0]
    if held:
        return ""
    window = f"{f.since or 'the first day'} – {f.until or 'the last day'}"
    if first is None:
        said = f"No data in {window}, nor on any other day, for these filters."
    else:
        recent = req.here(since=last - timedelta(days=HEADLINE_DAYS - 1), until=last)
        said = (f"No data in {_e(window)} ({_e(f.zone)} days) for these filters: their data runs from {first} to {last}. "
                f'Show <a href="{_e(recent)}">the {HEADLINE_DAYS} days to {last}</a> · '
                f'<a href="{_e(req.here(since="", until=""))}">all days</a>.')
    return f'<p class="empty" id="empty-window">{said}</p>'


def _options(values: list, selected: str | None) -> str:
    out = ['<option value="">(all)</option>']
    out += [f'<option value="{_e(v)}"{" selected" if v == selected else ""}>{_e(v)}</option>' for v in values]
    return "".join(out)


STYLE = """
body { font-family: system-ui, sans-serif; margin: 16px 24px; color: #222; }
h1 { font-size: 22px; margin: 4px 0 8px; } h2 { font-size: 17px; margin: 22px 0 8px; }
nav { font-size: 13px; color: #555; } nav a { color: #1f5fa8; }
form { display: flex; gap: 12px; align-items: end; flex-wrap: wrap; margin: 10px 0; }
label { display: flex; flex-direction: column; font-size: 12px; }
.errors { background: #fde8e8; border: 1px solid #e15759; padding: 8px 12px; border-radius: 4px; }
.errors li { margin: 2px 0; }
figure { margin: 12px 0; } figcaption { font-weight: 600; margin-bottom: 6px; }
figure svg { max-width: 100%; height: auto; } figure.wide svg { width: 100%; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(480px, 1fr)); gap: 24px; }
.trends { display: grid; grid-template-columns: repeat(auto-fit, minmax(360px, 1fr)); gap: 18px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #e4e4e4; vertical-align: top; }
th { background: #f4f4f4; position: sticky; top: 0; } .num { text-align: right; font-variant-numeric: tabular-nums; }
tr.others td { color: #666; font-style: italic; background: #fafafa; }
.cut { font-size: 12px; color: #555; margin: 4px 0 12px; }
.msg { border-left: 3px solid #ccc; margin: 10px 0; padding: 4px 10px; }
.anchor:target > .msg { background: #fff8d6; }
.msg.user { border-color: #4e79a7; } .msg.assistant { border-color: #59a14f; } .msg.tool { border-color: #edc948; }
.meta { font-size: 12px; color: #666; }
pre { white-space: pre-wrap; word-break: break-word; background: #f7f7f7; padding: 6px 8px; margin: 4px 0;
      font-size: 12px; max-height: 420px; overflow: auto; }
.call { background: #f1f5fb; padding: 4px 8px; margin: 4px 0; font-size: 13px; }
.bad { color: #b00020; font-weight: 600; } .ok { color: #2e7d32; }
.insight { margin-bottom: 18px; } h3 { font-size: 15px; margin: 14px 0 6px; }
.about { font-size: 13px; color: #555; margin: 0 0 8px; }
.about.demo { color: #222; background: #fff4d6; border: 1px solid #edc948; padding: 6px 10px; border-radius: 4px; }
#session-facts { width: auto; } summary { font-size: 13px; cursor: pointer; }
.tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(220px, 1fr)); gap: 12px; margin: 6px 0 12px; }
.tile { border: 1px solid #e4e4e4; border-radius: 6px; padding: 10px 14px; background: #fbfbfb; }
.tile-title { font-size: 13px; color: #555; } .tile-value { font-size: 26px; font-weight: 600; margin: 2px 0; }
.change { font-size: 13px; margin-top: 4px; color: #555; } .change.worse { color: #b00020; }
.change.better { color: #2e7d32; }
.presets, .toggle { font-size: 13px; margin: 6px 0; } .presets b, .toggle b { color: #222; }
.empty { background: #fff4d6; border: 1px solid #edc948; padding: 8px 12px; border-radius: 4px; }
th a.sort { color: inherit; text-decoration: none; } th a.sort:hover { text-decoration: underline; }
a.csv { font-weight: 600; }
#budgets { width: auto; } #budgets td.status { font-weight: 600; }
tr.budget-over td, .budget-over b { color: #b00020; } tr.budget-over { background: #fde8e8; }
tr.budget-projected td, .budget-projected b { color: #8a5300; } tr.budget-projected { background: #fff4d6; }
header { display: flex; justify-content: space-between; align-items: center; gap: 12px; flex-wrap: wrap; }
form.search-box { margin: 0; gap: 6px; align-items: center; } form.search-box input { width: 22em; }
#search-results { padding-left: 24px; } .hit { margin: 10px 0 14px; } .hit-head { font-size: 13px; color: #555; }
.hit-head a { font-size: 15px; font-weight: 600; color: #1f5fa8; }
.snippet { margin: 4px 0 0; font-size: 13px; line-height: 1.45; } mark { background: #ffe066; padding: 0 1px; }
"""


def layout(title: str, crumbs: list[tuple[str, str | None]], body: str, req: Request | None = None,
           form: str = "", about: str = "") -> str:
    nav = " › ".join(f'<a href="{_e(h)}">{_e(t)}</a>' if h else _e(t) for t, h in crumbs)
    errors = ""
    if req is not None and req.errors:
        errors = ('<div class="errors" id="filter-errors"><b>Filter problems:</b><ul>'
                  + "".join(f"<li>{_e(e)}</li>" for e in req.errors) + "</ul></div>")
    box = "" if req is not None and req.path == "/search" else search_box(req)  # the search page has its own
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title if title == "agentlake" else f"{title} · agentlake")}</title>'
            f'<style>{STYLE}</style></head><body><header><nav>{nav}</nav>{box}</header><h1>{_e(title)}</h1>'
            f"{about}{errors}{form}{body}</body></html>")


def page_filters(req: Request | None) -> dict:
    """The filters a page was drawn with, as the query names them (a search from it keeps them)."""
    if req is None:
        return {}
    f = req.filters
    named = {"since": f.since, "until": f.until, "project": f.project, "agent": f.provider, "user": f.user,
             "machine": f.machine, "tz": req.tz}
    return {k: str(v) for k, v in named.items() if v}


def search_box(req: Request | None) -> str:
    """The header's search form on every page, the page's filters kept: a search from a
    project's page searches that project (its page says so, and links to all of them)."""
    kept = "".join(f'<input type="hidden" name="{k}" value="{_e(v)}">' for k, v in page_filters(req).items())
    return ('<form class="search-box" role="search" method="get" action="/search">'
            '<input type="search" name="q" placeholder="search messages and tool calls" aria-label="search" '
            f'required>{kept}<button type="submit">search</button></form>')


def filter_fields(req: Request, projects: list[str], providers: list[str]) -> str:
    """The fields of the filters every page takes: the days, project, agent, user and machine."""
    f = req.filters
    return f"""<label>since <input type="date" name="since" value="{_shown(req, 'since', f.since)}"></label>
  <label>until <input type="date" name="until" value="{_shown(req, 'until', f.until)}"></label>
  <label>project <select name="project">{_options(projects, f.project)}</select></label>
  <label>agent <select name="agent">{_options(providers, f.provider)}</select></label>
  <label>user <select name="user">{_options(req.people.get("user", []), f.user)}</select></label>
  <label>machine <select name="machine">{_options(req.people.get("machine", []), f.machine)}</select></label>"""


def zone_field(req: Request) -> str:
    return (f'<label>time zone <input type="text" name="tz" value="{_shown(req, "tz", req.tz)}" '
            f'placeholder="{_e(req.filters.zone)}" style="width:10em"></label>')


def _shown(req: Request, key: str, value) -> str:
    """A field's value: the valid one, else what was given (named in the page's errors)."""
    return _e(value if value is not None else req.params.get(key, ""))


def filter_form(req: Request, projects: list[str], providers: list[str], action: str = "/") -> str:
    sorts = "".join(f'<input type="hidden" name="sort" value="{_e(v)}">' for v in sort_values(req.sorts))
    return presets(req) + f"""<form method="get" action="{_e(action)}">
  {filter_fields(req, projects, providers)}
  <label>rows per ranking <input type="number" name="top" min="0" value="{req.top}" style="width:6em"></label>
  <label>bars per <select name="grain">{_options(list(GRAINS), req.grain).replace("(all)", "(by the span)")}</select></label>
  {zone_field(req)}
  {sorts}<button type="submit">apply</button>
</form>"""


# --- the charts shared by the overview and the project page


def _time_chart(con, req: Request, series: str, series_title: str, link,
                statuses: list = ()) -> tuple[str, str, tuple | None, str]:
    """Cost over time stacked by `series` (a SQL expression), its top N plus others, its span
    (period, first day, last day; None without data) for the trends beside it, and the line
    under it on the budget drawn (`budget_line`, from this month's `statuses`). One query by day;
    the period, the ranking and the cut are worked out here (each query on the lake costs a
    catalog lookup)."""
    days = _query(con, f"SELECT date, {series} AS s, SUM(cost_usd) FROM daily_costs {{w}} GROUP BY ALL", req.filters)
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
    rows = _query(con, sql, req.filters)
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
    return (f'<p id="total">Total cost: {usd(cost)} · {sessions:,} root sessions started{_e(note)} · '
            "root sessions only, sub-agents included once</p>")


# --- budgets (config.toml's [[budgets]]): this month's spend, as `report --budgets` gives it

BUDGET_LABELS = ("budget", "monthly", "spent this month", "share used", "projected", "status")
BUDGET_CLASS = {budgeting.OVER: "budget-over", budgeting.PROJECTED_OVER: "budget-projected", budgeting.OK: "budget-ok"}


def this_months_budgets(con, req: Request) -> list:
    """warehouse.serve.budgets' statuses of the server's budgets, this month to today (the page's zone):
    whatever the page's filters, as the report and the Dagster check say them."""
    return budgeting.budget_statuses(con, req.budgets, today(req.filters.zone)) if req.budgets else []


def _amount(value) -> str:
    return f"${float(value):,.2f}"


def chart_budget(req: Request, statuses: list):
    """The budget the cost chart draws: that of the project, user or agent the page is filtered
    to when it has its own (in that order), else the team's; None when neither is set."""
    f = req.filters
    for scope, value in (("project", f.project), ("user", f.user), ("agent", f.provider)):
        own = [s for s in statuses if value and (s.budget.scope, s.budget.value) == (scope, value)]
        if own:
            return own[0]
    return next((s for s in statuses if s.budget.scope == "team"), None)


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
        return None, (f'<p class="cut" id="budget-line">No budget line: no team budget, and the page is not '
                      f"filtered to a project, user or agent with its own (budgets: {_e(names)}).</p>")
    b = chosen.budget
    label = f"{b.name} budget {_amount(b.monthly_usd)} a month"
    if period != "month":
        return None, (f'<p class="cut" id="budget-line">The {_e(label)} is drawn on the '
                      f'<a href="{_e(req.here(grain="month"))}">monthly view</a> (one bar per month).</p>')
    if float(b.monthly_usd) > FLATTENS * max(highest, float(chosen.projected_usd)):
        return None, (f'<p class="cut {BUDGET_CLASS[chosen.status]}" id="budget-line">The {_e(label)} is far above '
                      f"every month here (the highest {_amount(highest)}): not drawn, so that the bars stay "
                      f"readable. {chosen.month:%B %Y}: {_amount(chosen.spent_usd)} spent, "
                      f"{_amount(chosen.projected_usd)} projected at this pace: <b>{_e(chosen.status)}</b>.</p>")
    line = charts.BudgetLine(float(b.monthly_usd), label, chosen.status, chosen.month, float(chosen.projected_usd))
    return line, (f'<p class="cut {BUDGET_CLASS[chosen.status]}" id="budget-line">Dashed line: the {_e(label)}. '
                  f"{chosen.month:%B %Y}: {_amount(chosen.spent_usd)} spent, {_amount(chosen.projected_usd)} "
                  f"projected at this pace: <b>{_e(chosen.status)}</b>.</p>")


def budgets_section(con, req: Request, statuses: list, projects: list[str], providers: list[str]) -> str:
    """The budgets with this month's spend, share used and projection; the ones over (red) or
    projected over (amber) marked and named first; a budget for a scope the warehouse does not
    hold said. With none set, how to set one."""
    if not statuses:
        where = _e(req.config_file or "the home's config.toml")
        return ('<p class="meta" id="budgets-none">No budgets set: add <code>[[budgets]]</code> with '
                f"<code>monthly_usd = 500</code> (and <code>project</code>, <code>user</code> or <code>agent</code> "
                f"for one of them) to {where} to see this month's spend against it here (docs/CONFIG.md, "
                "Budgets).</p>")
    known = {"project": projects, "agent": providers, "user": req.people.get("user", [])}
    everyone = {"project": "", "agent": "", "user": "", "machine": "", "grain": "month"}
    body = []
    for s in statuses:
        b = s.budget
        name = _e(b.name)
        if b.scope == "team" or b.value in known[b.scope]:  # its costs, a month per bar
            scope = {} if b.scope == "team" else {b.scope: b.value}
            link = req.link("/project" if b.scope == "project" else "/", **{**everyone, **scope})
            name = f'<a href="{_e(link)}">{name}</a>'
        cells = [usd(s.budget.monthly_usd), usd(s.spent_usd), f"{s.share_used:.2%}", usd(s.projected_usd)]
        body.append(f'<tr class="{BUDGET_CLASS[s.status]}"><td>{name}</td>'
                    + "".join(f"<td class=num>{c}</td>" for c in cells)
                    + f'<td class="status">{_e(s.status)}</td></tr>')
    head = "".join(f'<th{" class=num" if 0 < i < 5 else ""}>{_e(c)}</th>' for i, c in enumerate(BUDGET_LABELS))
    warn = [f"{label}: {', '.join(s.budget.name for s in statuses if s.status == status)}"
            for status, label in ((budgeting.OVER, "over budget"), (budgeting.PROJECTED_OVER,
                                                                    "projected over by the month's end"))
            if any(s.status == status for s in statuses)]
    notes = [f"{s.budget.name}: spent is a floor, {s.unknown_cost_sessions:,} root sessions of unknown cost and "
             f"{s.partial_cost_sessions:,} priced in part this month" for s in statuses
             if s.unknown_cost_sessions or s.partial_cost_sessions]
    said = "".join(f'<p class="bad" id="budgets-unknown">{_e(n)}</p>' for n in
                   budgeting.unknown_scopes(con, req.budgets))
    month, day = statuses[0].month, today(req.filters.zone)
    return (f'<h2 id="budgets-title">Budgets, {month:%B %Y} to {day} ({_e(req.filters.zone)})</h2>'
            + (f'<p class="bad" id="budgets-warn">{_e("; ".join(warn))}</p>' if warn else "")
            + f'<table id="budgets"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
            + said
            + f'<p class="cut">This month\'s spend whatever the filters above, as <code>agentlake report '
              f"--budgets</code> gives it; projected: at the pace of the month's days so far"
            + "".join(f"; {_e(n)}" for n in notes) + "</p>")


# --- the headline: this window against the one before


HEADLINE_DAYS = 30  # the window when none is given: the 30 days to the last day with data

# "the last day with data": the last day holding what the headline counts, a root session started
# or money spent. Not any row's: a sub-agent dated after its root (Cursor's, by its file's time)
# holds neither, and a window anchored on it showed no root session and no known cost.
LAST_DAY_WITH_DATA = "a root session started or money spent"
_LAST_DAY = ("SELECT GREATEST((SELECT MAX(date) FROM daily_costs WHERE cost_usd > 0), "
             "(SELECT MAX(date) FROM sessions WHERE is_root))")


def _back(day: date, days: int) -> date:
    """`days` before `day`, or the first day a date can have (a page asked for year 1)."""
    return day - timedelta(days=days) if (day - date.min).days >= days else date.min


@dataclass(frozen=True)
class Window:
    first: date
    last: date
    said: str  # how it was chosen, when not exactly the page's dates

    @property
    def days(self) -> int:
        return (self.last - self.first).days + 1

    def before(self) -> "Window":
        """The window of the same length just before, cut at the first day a date can have
        (`since=0001-01-01` has none before it: an empty one, first after last)."""
        return Window(_back(self.first, self.days), _back(self.first, 1), "") if self.first > date.min else \
            Window(date.min + timedelta(days=1), date.min, "")

    def __str__(self) -> str:
        return f"{self.first} – {self.last} ({self.days} day{'s' if self.days != 1 else ''})"


def headline_window(con, filters: Filters) -> Window | None:
    """The headline's window: the page's dates; an end not given is the last day with data, the
    last day with a root session started or money spent (_LAST_DAY; any project or person: every
    filter compares the same days), a start not given is HEADLINE_DAYS before the end. None for a
    lake without data."""
    if filters.since and filters.until:
        return Window(filters.since, filters.until, "")
    last = filters.until or con.execute(_LAST_DAY).fetchone()[0]
    if last is None:
        return None
    first = filters.since or _back(last, HEADLINE_DAYS - 1)
    if filters.since:
        said = (f"from since to {last}, the last day with data ({LAST_DAY_WITH_DATA})" if last >= first
                else f"no data ({LAST_DAY_WITH_DATA}) on or after since")
        last = max(last, first)
    elif filters.until:
        said = f"the {HEADLINE_DAYS} days to until (the page below: every day to {filters.until})"
    else:
        said = (f"the {HEADLINE_DAYS} days to {last}, the last day with data ({LAST_DAY_WITH_DATA}; "
                "the page below: every day)")
    return Window(first, last, said)


# the cache share as insight_cache_efficiency takes it: cache reads of all input tokens, of the
# requests that record a cache (an agent that records none has no share, never 0%)
INPUT_TOKENS = ("COALESCE(input_uncached_tokens, 0) + COALESCE(cache_read_tokens, 0) "
                "+ COALESCE(cache_write_5m_tokens, 0) + COALESCE(cache_write_1h_tokens, 0)")
CACHE_SHARE = (f"SUM(COALESCE(cache_read_tokens, 0)) AS cache_read, SUM({INPUT_TOKENS}) AS input, "
               "SUM(requests) AS requests FROM (SELECT * FROM token_usage WHERE cache_read_tokens IS NOT NULL "
               "OR cache_write_5m_tokens IS NOT NULL OR cache_write_1h_tokens IS NOT NULL)")
# failed tool calls as the tool chart counts them
FAILED_CALLS = "SUM(calls) AS calls, SUM(failed) AS failed FROM tool_usage"

# both windows in one query (each query on the lake costs a catalog lookup): the totals as
# warehouse.serve.report.cost_and_sessions counts them, failed tool calls and the cache share
_HEADLINE = """
SELECT recent, SUM(cost_rows) AS cost_rows, SUM(cost) AS cost, SUM(unknown_rows) AS unknown_rows,
       SUM(partial_rows) AS partial_rows, SUM(sessions) AS sessions, SUM(unknown) AS unknown, SUM(partial) AS partial,
       SUM(calls) AS calls, SUM(failed) AS failed, SUM(cache_read) AS cache_read, SUM(input) AS input,
       SUM(requests) AS requests
FROM ((SELECT date >= {start} AS recent, COUNT(*) AS cost_rows, SUM(cost_usd) AS cost,
              COUNT(*) FILTER (WHERE cost_usd IS NULL) AS unknown_rows,
              COUNT(*) FILTER (WHERE cost_source = 'partial') AS partial_rows FROM daily_costs {{w}} GROUP BY 1)
      UNION ALL BY NAME
      (SELECT date >= {start} AS recent, COUNT(*) AS sessions,
              COUNT(*) FILTER (WHERE cost_source = 'unknown') AS unknown,
              COUNT(*) FILTER (WHERE cost_source = 'partial') AS partial
       FROM (SELECT * FROM sessions WHERE is_root) {{w}} GROUP BY 1)
      UNION ALL BY NAME
      (SELECT date >= {start} AS recent, """ + FAILED_CALLS + """ {{w}} GROUP BY 1)
      UNION ALL BY NAME
      (SELECT date >= {start} AS recent, """ + CACHE_SHARE + """ {{w}} GROUP BY 1))
GROUP BY 1"""


@dataclass
class Figures:
    """One window's headline figures; `cost` None when every cost in it is unknown. The cost is its
    days' (daily_costs: `cost_rows`, `unknown_rows`, `partial_rows`), the sessions the root sessions
    started in it (with `unknown` and `partial`): a root's cost falls on its sub-agents' days too."""
    cost: Decimal | None = Decimal(0)
    sessions: int = 0
    unknown: int = 0
    calls: int = 0
    failed: int = 0
    cache_read: int = 0
    input: int = 0
    requests: int = 0
    empty: bool = True
    cost_rows: int = 0
    unknown_rows: int = 0
    partial_rows: int = 0
    partial: int = 0

    @property
    def share(self) -> float | None:
        return self.cache_read / self.input if self.input else None


def headline_figures(con, filters: Filters, window: Window) -> tuple[Figures, Figures]:
    """(this window's figures, the previous window's), within the other filters."""
    before = window.before()
    span = replace(filters, since=min(before.first, window.first), until=window.last)
    sql = _HEADLINE.format(start=f"DATE '{window.first.isoformat()}'")
    found = {}
    for (recent, cost_rows, cost, unknown_rows, partial_rows, sessions, unknown, partial, calls, failed, cache_read,
         input_, requests) in _query(con, sql, span):
        # no cost row is $0 (nothing spent), as in the totals; rows whose costs are all unknown: unknown
        found[recent] = Figures(cost if cost_rows else Decimal(0), int(sessions or 0), int(unknown or 0),
                                int(calls or 0), int(failed or 0), int(cache_read or 0), int(input_ or 0),
                                int(requests or 0), False, cost_rows=int(cost_rows or 0),
                                unknown_rows=int(unknown_rows or 0), partial_rows=int(partial_rows or 0),
                                partial=int(partial or 0))
    return found.get(True, Figures()), found.get(False, Figures())


def _change(now, then, text, worse_up: bool | None, step=None) -> str:
    """`now` against `then` (None: no figure to compare with): up or down by how much (`step`
    writes it, else `text`; and by what part of `then` when `step` is not given), coloured by
    whether up is worse (None: neither)."""
    if now is None:
        return '<div class="change">nothing to compare</div>'
    if then is None:
        return '<div class="change">no previous figure to compare with</div>'
    delta = now - then
    if not delta:
        return f'<div class="change">no change from {_e(text(then))}</div>'
    up = delta > 0
    mood = "" if worse_up is None else " worse" if up == worse_up else " better"
    part = f" ({float(delta) / float(then):+.0%})" if then and step is None else ""
    return (f'<div class="change{mood}">{"▲" if up else "▼"} {_e((step or text)(abs(delta)))}{part} '
            f"from {_e(text(then))}</div>")


def _tile(tile_id: str, title: str, value: str, detail: str, change: str) -> str:
    return (f'<div class="tile" id="{tile_id}"><div class="tile-title">{_e(title)}</div>'
            f'<div class="tile-value">{_e(value)}</div><div class="meta">{_e(detail)}</div>{change}</div>')


def cost_detail(now: Figures) -> str:
    """The line under the cost: the window's days' costs, which the tile sums (an older root's
    unknown cost can fall on them, by a sub-agent's day), then the root sessions started in the
    window as the sessions tile counts them; never "known" beside an unknown or a floor."""
    if not now.cost_rows:
        days = "no root session's cost on these days"
    elif now.cost is None:
        days = "every cost on these days unknown"
    elif now.unknown_rows:
        days = "a floor: some costs on these days unknown, not counted"
    elif now.partial_rows:
        days = "a floor: some requests on these days unpriced, not counted"
    else:
        days = "every cost on these days known"
    started = ([f"{now.unknown:,} of unknown cost"] if now.unknown else []) + (
        [f"{now.partial:,} priced in part"] if now.partial else [])
    return days + (f" · root sessions started in the window: {', '.join(started)}" if started else "")


def headline(con, req: Request) -> str:
    """Tiles for cost, root sessions, failed tool calls and cache share over the window, each
    against the previous window of the same length."""
    window = headline_window(con, req.filters)
    if window is None:
        return '<div id="headline"><p class="meta">No data in this lake yet: no headline.</p></div>'
    now, then = headline_figures(con, req.filters, window)
    before = window.before()
    against = (f"no data in the previous window, {before}, to compare with" if then.empty
               else f"against the previous window, {before}")
    said = " · ".join(t for t in (str(window), window.said, against) if t)
    prior = None if then.empty else then  # nothing to compare with: said once, and on each tile
    count = lambda v: f"{v:,}"  # noqa: E731
    calls = (f"of {now.calls:,} tool calls ({now.failed / now.calls:.1%}): an error or a non-zero exit"
             if now.calls else "no tool calls in the window")
    tiles = [_tile("tile-cost", "Cost", usd(now.cost), cost_detail(now),
                   _change(now.cost, prior and prior.cost, usd, True)),
             _tile("tile-sessions", "Root sessions", count(now.sessions), "started in the window",
                   _change(now.sessions, prior and prior.sessions, count, None)),
             _tile("tile-failed", "Failed tool calls", count(now.failed), calls,
                   _change(now.failed, prior and prior.failed, count, True))]
    if now.share is None:  # never 0%: nothing recorded is not a share
        tiles.append(_tile("tile-cache", "Cache share", "no tokens recorded",
                           "no request in the window records its input tokens by cache (Crush and CodeWhale "
                           "record no per-request tokens)", ""))
    else:
        share = lambda v: f"{v:.1%}"  # noqa: E731
        tiles.append(_tile("tile-cache", "Cache share", share(now.share),
                           f"cache reads of {now.input:,} input tokens ({now.requests:,} requests)",
                           _change(round(now.share, 3), None if then.share is None else round(then.share, 3),
                                   share, False, lambda v: f"{v * 100:.1f} points")))
    return (f'<div id="headline"><p class="meta" id="headline-window">Headline: {_e(said)}</p>'
            f'<div class="tiles">{"".join(tiles)}</div></div>')


# --- trends beside cost: tokens, the tool-call failure rate and the cache share, per period

# per day, in one query: tokens (input with cache reads and writes; a day whose requests record
# none stays NULL, a gap), failed tool calls as the headline counts them, and its cache share
_TRENDS = """
SELECT date, SUM(all_input) AS all_input, SUM(output) AS output, SUM(calls) AS calls, SUM(failed) AS failed,
       SUM(cache_read) AS cache_read, SUM(input) AS input
FROM ((SELECT date, SUM(CASE WHEN COALESCE(input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens,
                                           cache_write_1h_tokens) IS NOT NULL THEN """ + INPUT_TOKENS + """ END) AS all_input,
              SUM(output_tokens) AS output FROM token_usage {w} GROUP BY 1)
      UNION ALL BY NAME (SELECT date, """ + FAILED_CALLS + """ {w} GROUP BY 1)
      UNION ALL BY NAME (SELECT date, """ + CACHE_SHARE + """ {w} GROUP BY 1))
GROUP BY 1"""
TREND_FIGURES = ("all_input", "output", "calls", "failed", "cache_read", "input")


def _plus(a, b):
    """A sum in which nothing recorded (None) stays None, never 0."""
    return a if b is None else b if a is None else a + b


def trend_periods(con, req: Request, span: tuple | None) -> tuple[str, date, date, dict]:
    """(period, first period, last period, figures by period start) of the trends: the cost
    chart's period (`span`: its period and days), over its days and the trends' own."""
    days = _query(con, _TRENDS, req.filters)
    ends = [r[0] for r in days] + (list(span[1:]) if span else [])
    if not ends:
        return req.grain or "day", None, None, {}
    period = span[0] if span else req.grain or charts.period_for(min(ends), max(ends))
    figures: dict[date, dict] = {}
    for day, *values in days:
        bucket = figures.setdefault(charts.period_start(day, period), {})
        for name, value in zip(TREND_FIGURES, values):
            bucket[name] = _plus(bucket.get(name), value)
    first, last = charts.period_start(min(ends), period), charts.period_start(max(ends), period)
    return period, first, last, figures


def _every(first: date, last: date, period: str) -> list[date]:
    starts = [first]
    while starts[-1] < last:
        starts.append(charts.period_end(starts[-1], period))
    return starts


def _ratio(part, whole):
    return float(part) / float(whole) if whole else None


def _gaps(starts: list[date], missing: list[date], period: str, what: str) -> str:
    """A chart's note on the periods it has no figure for (shown as gaps)."""
    if not missing:
        return ""
    named = ", ".join(charts.period_label(d, period) for d in missing[:4]) + (", ..." if len(missing) > 4 else "")
    return f"; {what} in {len(missing)} of {len(starts)} {period}s ({named}): a gap, not 0"


def trends(con, req: Request, span: tuple | None) -> str:
    """Tokens, the tool-call failure rate and the cache share over time, one point per period of
    the cost chart, every filter applied; a period with nothing recorded is a gap."""
    period, first, last, figures = trend_periods(con, req, span)
    if first is None:
        return ""
    starts = _every(first, last, period)
    got = lambda d, name: figures.get(d, {}).get(name)  # noqa: E731
    tokens = [(d, s, got(d, name)) for d in starts for s, name in (("input (with cache)", "all_input"),
                                                                  ("output", "output"))]
    rates = [(d, "failed", _ratio(got(d, "failed"), got(d, "calls"))) for d in starts]
    shares = [(d, "cache share", _ratio(got(d, "cache_read"), got(d, "input"))) for d in starts]
    total = lambda name: sum(v.get(name) or 0 for v in figures.values())  # noqa: E731
    no_tokens = [d for d in starts if got(d, "all_input") is None and got(d, "output") is None]
    token_note = (f"{total('all_input'):,} input tokens (uncached, cache reads and writes) and "
                  f"{total('output'):,} output in all" + _gaps(starts, no_tokens, period, "no tokens recorded"))
    calls, failed = total("calls"), total("failed")
    rate_note = ((f"{failed:,} of {calls:,} tool calls failed ({failed / calls:.1%}), by an error or a non-zero exit"
                  if calls else "no tool calls")
                 + _gaps(starts, [d for d in starts if not got(d, "calls")], period, "no tool calls"))
    share = _ratio(total("cache_read"), total("input"))
    share_note = (("no request records its cache" if share is None else
                   f"{share:.1%} of {total('input'):,} input tokens read from cache, of the requests that record one")
                  + _gaps(starts, [d for d in starts if not got(d, "input")], period, "no cache recorded"))
    draw = lambda rows, series, title, axis, value: charts.trend(rows, period, first, last, series, title,  # noqa: E731
                                                                  axis, value, zone=req.filters.zone)
    return ('<div class="trends" id="trends">'
            + figure("tokens-over-time", "Tokens", draw(tokens, [("input (with cache)", charts.PALETTE[0]),
                                                               ("output", charts.PALETTE[1])], "tokens", "~s", ",d"),
                     token_note)
            + figure("failure-rate-over-time", "Tool-call failure rate",
                     draw(rates, [("failed", charts.ERROR_COLOR)], "failed of calls", ".0%", ".1%"), rate_note)
            + figure("cache-share-over-time", "Cache share of input tokens",
                     draw(shares, [("cache share", charts.PALETTE[3])], "cache reads of input", ".0%", ".1%"),
                     share_note)
            + "</div>")


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


# a ranking's key (a column) and the distinct values of a column listed beside it (its title, its column)
RANKINGS = {"projects": ("project", ("agents", "provider")), "users": ('"user"', ("machines", "machine"))}
RANKING_LABELS = ("sessions started", "their messages", "their tool calls", "their failed calls", "cost",
                  "cost sources")
RANKING_KEYS = ("sessions_started", "messages", "tool_calls", "failed_calls", "cost_usd", "cost_sources")


def ranking_rows(con, req: Request, name: str) -> tuple[list[str], list[tuple]]:
    """(columns, every row) of a ranking by a column (RANKINGS) of cost and sessions: the sessions
    started in the window, their messages and tool calls, the cost of its days; with the distinct
    values of a column and the cost sources. Costliest first, unless `sort` says otherwise."""
    key, (_, column) = RANKINGS[name]
    rows = _query(con, f"""
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


# the columns of the tables whose columns are known before a query (an insight's are its query's)
SORT_KEYS = {name: (RANKINGS[name][0].strip('"'), RANKINGS[name][1][0], *RANKING_KEYS) for name in RANKINGS}
SORT_KEYS["sessions"] = SESSION_KEYS = (
    "started_at", "title", "agent", "duration_s", "messages", "tool_calls", "failed_calls", "subagents", "models",
    "cost_usd", "cost_source", "source_id", "session_id", "machine")  # the CSV's: the table's, then the session's names
SESSION_LABELS = ("title", "agent", "duration", "messages", "tool calls", "failed calls", "sub-agents", "models",
                  "cost", "cost source")  # after the start, whose clock is the page's zone's


def session_labels(zone: str) -> list[str]:
    """The sessions table's column names, its times those of the page's zone."""
    return [f"started ({zone})", *SESSION_LABELS]


def session_rows(con, req: Request) -> tuple[list[str], list[tuple]]:
    """(columns, every row) of a project's sessions: most expensive first, unless `sort` says otherwise."""
    rows = _query(con, f"""SELECT started_at, COALESCE(title, '(untitled)'), provider, duration_s, messages,
                                  tool_calls, failed_tool_calls, subagents, models, cost_usd, cost_source,
                                  source_id, session_id, machine
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
    shown = [(clock(r[0], zone).strftime("%Y-%m-%d %H:%M") if r[0] else "", r[1], r[2], _duration(r[3]), r[4], r[5], r[6], r[7],
              models_label(r[8]), usd(r[9]), r[10]) for r in kept]
    if cut.others:
        o = cut.others
        cut.others = (o[0].replace(")", " sessions)"), "", "", _duration(o[1]), *(int(v or 0) for v in o[2:6]), "",
                      usd(o[6]), "")
    links = [req.link("/session", source=r[11], id=r[12], machine=r[13]) for r in kept]
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


def _duration(seconds) -> str:
    if seconds is None:
        return ""
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


# --- one session's transcript


def find_session(con, source: str | None, session_id: str | None, key: str | None, machine: str | None = None):
    """(provider, project, source_id, session_id, title, started, ended, cost, cost_source, models,
    subagents, root_session_id) of a session, root or sub-agent; None when not found. `key` is an
    insight's lake-wide `session_key`: machine/user/provider/source_id/session_id. `machine` tells
    apart the same store (so source id) ingested on two machines of a team lake."""
    cols = ("SELECT s.provider, s.project, s.source_id, s.session_id, s.title, s.created_at, "
            "COALESCE(ss.ended_at, s.updated_at), COALESCE(ss.cost_usd, s.cost_usd), "
            "COALESCE(ss.cost_source, s.cost_source), COALESCE(ss.models, s.model), ss.subagents, s.root_session_id, "
            "ss.duration_s, ss.messages, ss.tool_calls, ss.tool_errors, ss.nonzero_exits, s.machine "
            "FROM sessions s LEFT JOIN session_summary ss USING (machine, source_id, session_id) ")
    if key is not None:
        rows = con.execute(cols + f"WHERE {session_key('s', 's.session_id')} = ? LIMIT 1", [key]).fetchall()
        return rows[0] if rows else None
    on_machine = " AND s.machine = ?" if machine else ""
    rows = con.execute(cols + "WHERE s.source_id = ? AND s.session_id = ?" + on_machine,
                       [source, session_id, *([machine] if machine else [])]).fetchall()
    return rows[0] if rows else None


def session_page(con, req: Request) -> tuple[str, int]:
    p = req.params
    found = find_session(con, p.get("source"), p.get("id"), p.get("key"), p.get("machine"))
    if found is None:
        req.errors.append("no such session in this lake: " + (f"key {p['key']!r}" if p.get("key")
                                                               else f"source {p.get('source')!r}, id {p.get('id')!r}"))
        return layout("session not found", [("overview", req.link("/"))], "", req, about=about_data(con)), 404
    (provider, project, source, sid, title, started, ended, cost, cost_source, models, subagents, root,
     duration, messages, calls, errors, exits, machine) = found
    # the messages' days bound what DuckLake reads (partitions by year and project, min/max `date`)
    first = started.date() if started else None
    last = ended.date() if ended else None
    if first and last and req.filters.zone != UTC:  # the tables' dates are the zone's: a day either side
        first, last = first - timedelta(days=1), last + timedelta(days=1)
    span = "AND date BETWEEN ? AND ? " if first and last and first <= last else ""
    bounds = [first, last] if span else []
    # machine too: a team lake may hold the same store path (so source id) from several machines
    where = f"WHERE project IS NOT DISTINCT FROM ? AND machine = ? AND source_id = ? AND session_id = ? {span}"
    args = [project, machine, source, sid, *bounds]
    msgs = con.execute(f"SELECT message_id, message_index, role, model, created_at FROM messages {where} "
                       "ORDER BY message_index", args).fetchall()
    parts = con.execute(f"SELECT message_id, part_index, part_type, text, reasoning, tool_call_id, tool_name, "
                        f"tool_result, is_error, finish_reason, shell_command, shell_output FROM parts {where} "
                        f"ORDER BY message_id, part_index LIMIT {PARTS_LIMIT + 1}", args).fetchall()
    calls_by_id = {r[0]: r[1:] for r in con.execute(
        f"SELECT tool_call_id, tool_name, command, file_path, input, has_result, is_error, exit_code, result_size, "
        f"result_text FROM tool_calls {where}", args).fetchall()}
    costs = dict(con.execute(f"SELECT message_id, SUM(cost_usd) FROM usage {where} GROUP BY 1", args).fetchall())
    children = con.execute("SELECT session_id, title, created_at, cost_usd FROM sessions WHERE machine = ? AND "
                           "source_id = ? AND parent_session_id = ? ORDER BY created_at", [machine, source, sid]).fetchall()
    by_message: dict[str, list] = {}
    for part in parts[:PARTS_LIMIT]:
        by_message.setdefault(part[0], []).append(part)
    zone = req.filters.zone
    facts = [("agent", provider), ("project", project), (f"started ({zone})", clock(started, zone)),
             (f"last activity ({zone})", clock(ended, zone)),
             ("duration", _duration(duration)), ("cost", f"{usd(cost)} ({cost_source})"),
             ("models", models_label(models)),
             ("messages (with sub-agents)", messages), ("tool calls (with sub-agents)", calls),
             ("tool errors", errors), ("non-zero exits", exits), ("sub-agents", subagents)]
    if root and root != sid:
        facts.append(("sub-agent of", f'<a href="{_e(req.link("/session", source=source, id=root, machine=machine))}">'
                      f'{_e(root)}</a>'))
    header = "<table id=\"session-facts\">" + "".join(
        f"<tr><th>{_e(k)}</th><td>{v if k == 'sub-agent of' else _e(v)}</td></tr>" for k, v in facts
        if v is not None) + "</table>"
    if children:
        header += "<h2>Sub-agents</h2>" + table(
            "subagents", ["session", "title", f"started ({zone})", "cost"],
            [(c[0], c[1], clock(c[2], zone), usd(c[3])) for c in children],
            [req.link("/session", source=source, id=c[0], machine=machine) for c in children])
    if not costs:
        header += (f'<p class="meta">{_e(provider)} records no per-request usage here: the cost above is the '
                   "session's own, not split per message.</p>")
    # a sub-agent's session id names the call that started it (Crush: `<message>$$<call>`, or the call id)
    spawned = {c[0].rsplit("$$", 1)[-1]: req.link("/session", source=source, id=c[0], machine=machine) for c in children}
    out = [_message((*m[:4], clock(m[4], zone)), by_message.get(m[0], []), calls_by_id, costs.get(m[0]), spawned)
           for m in msgs]
    if len(parts) > PARTS_LIMIT:
        out.append(f'<p class="cut">the first {PARTS_LIMIT} parts are shown; the rest: agentlake sql '
                   f'"SELECT * FROM parts WHERE session_id = \'{_e(sid)}\'"</p>')
    body = header + f'<h2>Transcript ({len(msgs)} messages)</h2><div id="transcript">{"".join(out)}</div>'
    crumbs = [("overview", req.link("/", project="")), (project or "(no project)", req.link("/project", project=project)),
              (title or sid, None)]
    return layout(f"session {title or sid}", crumbs, body, req, about=about_data(con)), 200


def _clip(text: str | None) -> str:
    if text is None:
        return ""
    if len(text) <= TEXT_LIMIT:
        return _e(text)
    return _e(text[:TEXT_LIMIT]) + f'\n<span class="meta">… {len(text) - TEXT_LIMIT:,} more characters</span>'


def _message(m, parts, calls_by_id, cost, spawned) -> str:
    message_id, index, role, model, created = m
    meta = f"#{index} · {_e(role)} · {_e(created)}" + (f" · {_e(model_label(model))}" if model else "")
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
            inner.append(f'<details class="result"><summary>{status} of {_e(tool_name)} ({_e(call_id)})</summary>'
                         f"<pre>{_clip(result)}</pre></details>")
        elif ptype == "shell_command":
            inner.append(f'<div class="call">$ {_e(shell)}</div><pre>{_clip(shell_out)}</pre>')
        elif ptype == "finish" and finish and role == "assistant":
            inner.append(f'<span class="meta">finish: {_e(finish)}</span>')
    # wrapped in the message's anchor (a search hit links to it); the message keeps its index's id
    return (f'<div class="anchor" id="{_e(message_anchor(message_id))}"><div class="msg {_e(role)}" id="m{_e(index)}">'
            f'<div class="meta">{meta}</div>{"".join(inner)}</div></div>')


def _tool_call(call_id, tool_name, call, subagent_link: str | None) -> str:
    if call is None:
        return f'<div class="call tool-call">{_e(tool_name)} ({_e(call_id)})</div>'
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
        size_text += f' · <a class="subagent" href="{_e(subagent_link)}">its sub-agent session</a>'
    return (f'<div class="call tool-call"><b>{_e(name)}</b> <code>{_e(what[:300])}</code> · {status}{size_text}'
            f'<details><summary>result</summary><pre>{_clip(result)}</pre></details></div>')


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


def curated(name: str):
    """`agentlake report --insights`' query for this insight (warehouse.serve.report.INSIGHTS), if any:
    the dashboard shows the same findings, worst first, with the same SQL behind them."""
    from warehouse.serve import report

    if not hasattr(Filters, "literal_where"):
        return None
    return next((i for i in getattr(report, "INSIGHTS", ()) if i.mart == name), None)


def insight_sql(con, name: str, filters: Filters) -> tuple[str, str]:
    """(title, SQL with the filters as literals) giving all of an insight's findings, worst first.
    Without a curated query: every row of the mart, by its first cost-like numeric column."""
    known = curated(name)
    if known is not None:
        people, note = people_of(con, name, filters)
        return known.title + note, known.sql.format(w=filters.literal_where(known.date_col, known.scoped, people))
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
            links.append(req.link("/session", source=r["source_id"], id=r["session_id"], machine=r.get("machine")))
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
            + f'<p class="cut">{_e(note)}</p>' + takeaway(req, name, found))
    return title, body, sql, len(rows) < found


def insight_order(con, req: Request, name: str, sql: str) -> str:
    """The insight's query in the order `sort` asks for: by its column, a value that is none last
    either way, ties by the other columns (so the page and its CSV agree)."""
    if name not in req.sorts:
        return sql
    columns = [d[0] for d in con.execute(f"SELECT * FROM ({sql}) LIMIT 0").description]
    chosen = _sort_column(req, name, columns)
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
def _cell(value, column: str = ""):
    if column == "session_key" and isinstance(value, str):  # machine/user/provider/source/session: the session
        return value.rsplit("/", 1)[-1]
    if column in MODEL_COLUMNS:  # a model that is none, said as the report says it
        return label(column, value)
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
        out.append(f'<div class="insight" id="{name}"><h3>{_e(title)}</h3>'
                   f'{body}<a href="{_e(req.link("/insight", name=name))}">all findings and the SQL that '
                   "reproduces them</a></div>")
    if not out:
        return ('<h2>Insights</h2><p class="meta" id="insights">No insight marts in this lake yet '
                f"({', '.join(INSIGHTS)}).</p>")
    if missing:
        out.append(f'<p class="meta">Not in this lake yet: {_e(", ".join(missing))}.</p>')
    return '<h2>Insights</h2><div id="insights">' + "".join(out) + "</div>"


def insight_page(con, req: Request) -> tuple[str, int]:
    name = req.params.get("name", "")
    found = _insight_or_none(con, req, name, req.top or None) if name in INSIGHTS else None
    if found is None:
        req.errors.append(f"no insight {name!r} in this lake")
        return layout("insight not found", [("overview", req.link("/"))], "", req, about=about_data(con)), 404
    title, body, sql, cut = found
    if cut:
        body += f'<p class="cut"><a href="{_e(req.link("/insight", name=name, top=0))}">show all</a></p>'
    from warehouse.catalog.marts import mart_sql

    definition = dict(mart_sql()).get(name)
    body = (f"<p>{_e(title)}</p>" + body
            + "<h2>Reproduce</h2><p>Every finding (the table shows the first rows) is this query; run it with "
            f'<code>agentlake sql</code>:</p><pre id="insight-sql">{_e(sql)}</pre>')
    if definition:
        body += f"<details><summary>how {_e(name)} is computed</summary><pre>{_e(definition)}</pre></details>"
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
