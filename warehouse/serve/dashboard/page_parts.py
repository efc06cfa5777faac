"""The pieces every dashboard page is made of: escaping and figures, the line saying what data
the page shows and when it was merged, tables that sort by a column, figures, the window's
presets, the filter form and the page's frame (`layout`)."""

import html
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from urllib.parse import parse_qs

from warehouse.lake.ducklake import CATALOG, sql_string
from warehouse.lake.zones import UTC, BadZone, check_zone, today_in
from warehouse.land.demo_home import is_demos
from warehouse.serve.dashboard import charts
from warehouse.serve.dashboard.request import GRAINS, Request, sort_values
from warehouse.serve.formatting import dollars
from warehouse.serve.local_days import local_date
from warehouse.serve.report import Filters

def sessions(filters: Filters) -> str:
    """session_summary read as if it had a `date` column (the day it started, in the filters'
    zone), so the same Filters apply to every table."""
    return f"(SELECT *, {local_date('started_at', filters.zone)} AS date FROM session_summary)"


def escaped(value) -> str:
    return html.escape("" if value is None else str(value))


def usd(value) -> str:
    return dollars(value)


def filtered_rows(con, sql: str, filters: Filters, *extra) -> list[tuple]:
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
            said.append(f"{escaped(machine)} {escaped(_utc(at, False))}{late}")
        runs = f'<span id="machine-runs">last run per machine: {", ".join(said)}</span>'
    if fresh.demo and fresh.demo == fresh.stores:
        what = ("<b>Demo data</b>: every session here was generated by agentlake demo (the quickstart's "
                "demo, when it found no agent data), none is your agents'")
    elif fresh.demo:
        what = (f"<b>Partly demo data</b>: {fresh.demo} of the {fresh.stores} stores read here were generated by "
                "agentlake demo")
    else:
        what = ""
    text = " · ".join(t for t in (what, escaped(when), runs) if t)
    cls = "about demo" if fresh.demo else "about"
    return f'<p class="{cls}" id="about-data">{text}</p>' if text else ""



# --- pieces of a page


def table(table_id: str, columns: list[str], rows: list[tuple], links: list[str | None], cut: charts.Cut | None = None,
          all_link: str | None = None, numeric: set[int] = frozenset(), link_col: int = 0, head: str = "") -> str:
    """An HTML table whose rows link one level down (from cell `link_col`), with the others row
    last and a caption saying how many rows are shown. `head`: its header cells (`sortable_head`)."""
    head = head or "".join(f'<th{" class=num" if i in numeric else ""}>{escaped(c)}</th>' for i, c in enumerate(columns))
    body = []
    for row, link in zip(rows, links):
        cells = []
        for i, value in enumerate(row):
            text = escaped(f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value)
            if i == link_col and link:
                text = f'<a href="{escaped(link)}">{text}</a>'
            cells.append(f'<td{" class=num" if i in numeric else ""}>{text}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    if cut is not None and cut.others is not None:
        body.append('<tr class="others">' + "".join(
            f'<td{" class=num" if i in numeric else ""}>{escaped(f"{v:,}" if isinstance(v, int) else v)}</td>'
            for i, v in enumerate(cut.others)) + "</tr>")
    if not rows:
        body.append(f'<tr><td colspan="{len(columns)}">no rows for these filters</td></tr>')
    note = ""
    if cut is not None:
        more = f' · <a href="{escaped(all_link)}">show all</a>' if cut.others is not None and all_link else ""
        note = f'<p class="cut">{escaped(cut.note)}{more}</p>'
    return (f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>{note}')


def figure(fig_id: str, title: str, svg: str, note: str = "", wide: bool = False, more: str = "") -> str:
    """A chart with its caption and note; `more`: HTML under the note (a line with a link)."""
    note = f'<p class="cut">{escaped(note)}</p>' if note else ""
    cls = ' class="wide"' if wide else ""
    return f'<figure id="{fig_id}"{cls}><figcaption>{escaped(title)}</figcaption>{svg}{note}{more}</figure>'


def sort_rows(req: Request, name: str, keys: list[str], rows: list[tuple]) -> list[tuple]:
    """`rows` (in the table's own order) as `sort` orders table `name`: by a column of `keys`,
    a value that is none last either way, ties in the table's own order. An unknown column is
    named on the page and the table keeps its own order."""
    chosen = sort_column(req, name, keys)
    if chosen is None:
        return rows
    i, descending = keys.index(chosen[0]), chosen[1]
    # text from A in any case (`legacy` beside `Session 4`), as a reader reads it (a trial)
    known = sorted((r for r in rows if r[i] is not None), reverse=descending,
                   key=lambda r: r[i].casefold() if isinstance(r[i], str) else r[i])
    return known + [r for r in rows if r[i] is None]


def sort_column(req: Request, name: str, keys: list[str]) -> tuple[str, bool] | None:
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
                     f'{escaped(req.sorted_by(name, key, descending))}">{escaped(label)}{arrow}</a></th>')
    return "".join(cells)


def takeaway(req: Request, name: str, rows: int) -> str:
    """The line under a sortable table: its order, and its every row as CSV (the same filters and order)."""
    chosen = req.sorts.get(name)
    order = ""
    if chosen is not None:
        order = (f'sorted by {escaped(chosen[0])}, {"descending" if chosen[1] else "ascending"} · '
                 f'<a href="{escaped(req.sorted_by(name, None))}">its own order</a> · ')
    csv_link = req.link("/csv", table=name, top=None, grain=None)
    # its times are the lake's, as `report --format csv` writes them: said where the page's are not (a trial)
    utc = f" (times in UTC, not {escaped(req.filters.zone)})" if req.filters.zone != UTC else ""
    return (f'<p class="cut takeaway" id="{escaped(name)}-takeaway">{order}<a class="csv" href="{escaped(csv_link)}">'
            f"CSV of all {rows:,} row{'s' if rows != 1 else ''}</a>{utc}</p>")


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
            out.append(f'<b aria-current="true">{escaped(label)}</b>')
        else:
            out.append(f'<a href="{escaped(req.here(since=since or "", until=until or ""))}">{escaped(label)}</a>')
    return (f'<p class="presets" id="presets">Window ({escaped(req.filters.zone)} days, today is {now}): '
            f'{" · ".join(out)}</p>')


def grain_links(req: Request) -> str:
    """Links that set the time chart's bars to a day, a week or a month each (or by the span)."""
    out = []
    for grain, label in ((None, "by the span"), *((g, g) for g in GRAINS)):
        if grain == req.grain:
            out.append(f'<b aria-current="true">{escaped(label)}</b>')
        else:
            out.append(f'<a href="{escaped(req.here(grain=grain or ""))}">{escaped(label)}</a>')
    return f'<p class="toggle" id="grain">Cost and trends over time, one bar or point per: {" · ".join(out)}</p>'


def select_options(values: list, selected: str | None) -> str:
    out = ['<option value="">(all)</option>']
    out += [f'<option value="{escaped(v)}"{" selected" if v == selected else ""}>{escaped(v)}</option>' for v in values]
    return "".join(out)


STYLE = """
body { font-family: system-ui, sans-serif; margin: 16px 24px; color: #222; }
h1 { font-size: 22px; margin: 4px 0 8px; } h2 { font-size: 17px; margin: 22px 0 8px; }
nav { font-size: 13px; color: #555; } nav a { color: #1f5fa8; }
form { display: flex; gap: 12px; align-items: end; flex-wrap: wrap; margin: 10px 0; }
label { display: flex; flex-direction: column; font-size: 12px; }
.errors { background: #fde8e8; border: 1px solid #e15759; padding: 8px 12px; border-radius: 4px; }
.errors li { margin: 2px 0; }
.note { background: #fff6dd; border: 1px solid #e8c15a; padding: 6px 12px; border-radius: 4px; }
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
    nav = " › ".join(f'<a href="{escaped(h)}">{escaped(t)}</a>' if h else escaped(t) for t, h in crumbs)
    errors = ""
    if req is not None and req.errors:
        errors = ('<div class="errors" id="filter-errors"><b>Filter problems:</b><ul>'
                  + "".join(f"<li>{escaped(e)}</li>" for e in req.errors) + "</ul></div>")
    if req is not None and req.notes:
        errors += '<p class="note" id="filter-notes">' + " · ".join(escaped(n) for n in req.notes) + "</p>"
    box = "" if req is not None and req.path == "/search" else search_box(req)  # the search page has its own
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{escaped(title if title == "agentlake" else f"{title} · agentlake")}</title>'
            f'<style>{STYLE}</style></head><body><header><nav>{nav}</nav>{box}</header><h1>{escaped(title)}</h1>'
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
    kept = "".join(f'<input type="hidden" name="{k}" value="{escaped(v)}">' for k, v in page_filters(req).items())
    return ('<form class="search-box" role="search" method="get" action="/search">'
            '<input type="search" name="q" placeholder="search messages and tool calls" aria-label="search" '
            f'required>{kept}<button type="submit">search</button></form>')


def filter_fields(req: Request, projects: list[str], providers: list[str]) -> str:
    """The fields of the filters every page takes: the days, project, agent, user and machine."""
    f = req.filters
    return f"""<label>since <input type="date" name="since" value="{_shown(req, 'since', f.since)}"></label>
  <label>until <input type="date" name="until" value="{_shown(req, 'until', f.until)}"></label>
  <label>project <select name="project">{select_options(projects, f.project)}</select></label>
  <label>agent <select name="agent">{select_options(providers, f.provider)}</select></label>
  <label>user <select name="user">{select_options(req.people.get("user", []), f.user)}</select></label>
  <label>machine <select name="machine">{select_options(req.people.get("machine", []), f.machine)}</select></label>"""


def zone_field(req: Request) -> str:
    return (f'<label>time zone <input type="text" name="tz" value="{_shown(req, "tz", req.tz)}" '
            f'placeholder="{escaped(req.filters.zone)}" style="width:10em"></label>')


def _shown(req: Request, key: str, value) -> str:
    """A field's value: the valid one, else what was given (named in the page's errors)."""
    return escaped(value if value is not None else req.params.get(key, ""))


def filter_form(req: Request, projects: list[str], providers: list[str], action: str = "/") -> str:
    sorts = "".join(f'<input type="hidden" name="sort" value="{escaped(v)}">' for v in sort_values(req.sorts))
    return presets(req) + f"""<form method="get" action="{escaped(action)}">
  {filter_fields(req, projects, providers)}
  <label>rows per ranking <input type="number" name="top" min="0" value="{req.top}" style="width:6em"></label>
  <label>bars per <select name="grain">{select_options(list(GRAINS), req.grain).replace("(all)", "(by the span)")}</select></label>
  {zone_field(req)}
  {sorts}<button type="submit">apply</button>
</form>"""



def duration_text(seconds) -> str:
    if seconds is None:
        return ""
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
