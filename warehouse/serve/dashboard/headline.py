"""The overview's headline (this window against the one before: cost, sessions, failed tool
calls, cache share) and its trends beside cost (tokens, the failure rate and the cache share
per period)."""

from dataclasses import dataclass, replace
from datetime import date, timedelta
from decimal import Decimal

from warehouse.serve.dashboard import charts
from warehouse.serve.dashboard.page_parts import escaped, figure, filtered_rows, sessions, usd
from warehouse.serve.dashboard.request import Request
from warehouse.serve.report import Filters
from warehouse.lake.zones import today_in

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
# requests that record a cache (an agent that records none has no share, never 0%). Counted per
# request by token_usage: a group of a day and model holds requests with and without a cache (an
# analyst's trial found the uncached ones counted, a share of 49.6% for 52.3%)
INPUT_TOKENS = ("COALESCE(input_uncached_tokens, 0) + COALESCE(cache_read_tokens, 0) "
                "+ COALESCE(cache_write_5m_tokens, 0) + COALESCE(cache_write_1h_tokens, 0)")
CACHE_SHARE = ("SUM(COALESCE(cache_read_tokens, 0)) AS cache_read, SUM(cache_input_tokens) AS input, "
               "SUM(cache_requests) AS requests FROM token_usage")
# a warehouse merged by an older release has neither count until its next merge rebuilds the mart:
# its groups that hold a cache, as that release took them (a reader is not refused its page)
CACHE_SHARE_BEFORE = (f"SUM(COALESCE(cache_read_tokens, 0)) AS cache_read, SUM({INPUT_TOKENS}) AS input, "
                      "SUM(requests) AS requests FROM (SELECT * FROM token_usage WHERE cache_read_tokens IS NOT NULL "
                      "OR cache_write_5m_tokens IS NOT NULL OR cache_write_1h_tokens IS NOT NULL)")


def _cache_share(sql: str, con) -> str:
    """`sql` with the cache share's query as this warehouse's token_usage can answer it."""
    # the lake's mart, or the temporary one a zone's page computes by the current SQL
    has_counts = con.execute("SELECT COUNT(*) FROM duckdb_columns() WHERE database_name IN (current_database(), "
                             "'temp') AND table_name = 'token_usage' AND column_name = 'cache_input_tokens'"
                             ).fetchone()[0]
    return sql.replace("{cache_share}", CACHE_SHARE if has_counts else CACHE_SHARE_BEFORE)


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
      (SELECT date >= {start} AS recent, {{cache_share}} {{w}} GROUP BY 1))
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
    sql = _cache_share(_HEADLINE.format(start=f"DATE '{window.first.isoformat()}'"), con)
    found = {}
    for (recent, cost_rows, cost, unknown_rows, partial_rows, sessions, unknown, partial, calls, failed, cache_read,
         input_, requests) in filtered_rows(con, sql, span):
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
        return f'<div class="change">no change from {escaped(text(then))}</div>'
    up = delta > 0
    mood = "" if worse_up is None else " worse" if up == worse_up else " better"
    part = f" ({float(delta) / float(then):+.0%})" if then and step is None else ""
    return (f'<div class="change{mood}">{"▲" if up else "▼"} {escaped((step or text)(abs(delta)))}{part} '
            f"from {escaped(text(then))}</div>")


def _tile(tile_id: str, title: str, value: str, detail: str, change: str) -> str:
    return (f'<div class="tile" id="{tile_id}"><div class="tile-title">{escaped(title)}</div>'
            f'<div class="tile-value">{escaped(value)}</div><div class="meta">{escaped(detail)}</div>{change}</div>')


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
        # the reason, as it is: an empty window is no agent's doing (a trial blamed Crush for it)
        why = ("no request in the window" if now.empty else
               "no request in the window records its input tokens by cache (Crush, CodeWhale, Cursor and "
               "Codebuff record no per-request tokens)")
        tiles.append(_tile("tile-cache", "Cache share", "no tokens recorded", why, ""))
    else:
        share = lambda v: f"{v:.1%}"  # noqa: E731
        requests = f"{now.requests:,} request{'' if now.requests == 1 else 's'}"
        tiles.append(_tile("tile-cache", "Cache share", share(now.share),
                           f"cache reads of {now.input:,} input tokens ({requests})",
                           _change(round(now.share, 3), None if then.share is None else round(then.share, 3),
                                   share, False, lambda v: f"{v * 100:.1f} points")))
    return (f'<div id="headline"><p class="meta" id="headline-window">Headline: {escaped(said)}</p>'
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
      UNION ALL BY NAME (SELECT date, {cache_share} {w} GROUP BY 1))
GROUP BY 1"""
TREND_FIGURES = ("all_input", "output", "calls", "failed", "cache_read", "input")


def _plus(a, b):
    """A sum in which nothing recorded (None) stays None, never 0."""
    return a if b is None else b if a is None else a + b


def trend_periods(con, req: Request, span: tuple | None) -> tuple[str, date, date, dict]:
    """(period, first period, last period, figures by period start) of the trends: the cost
    chart's period (`span`: its period and days), over its days and the trends' own."""
    days = filtered_rows(con, _cache_share(_TRENDS, con), req.filters)
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


def empty_window(con, req: Request) -> str:
    """A line saying so when the dates hold no data for the other filters (a preset is relative
    to today; the lake's data, the demo's, may lie in the past), with links to where data is."""
    f = req.filters
    if not f.since and not f.until:
        return ""
    inside = " AND ".join(([f"d >= DATE '{f.since.isoformat()}'"] if f.since else [])
                          + ([f"d <= DATE '{f.until.isoformat()}'"] if f.until else []))
    first, last, held = filtered_rows(con, f"SELECT MIN(d), MAX(d), COUNT(*) FILTER (WHERE {inside}) FROM "
                                    f"(SELECT date AS d FROM daily_costs {{w}} UNION ALL "
                                    f"SELECT date AS d FROM {sessions(f)} {{w}})", replace(f, since=None, until=None))[0]
    if held:
        return ""
    window = f"{f.since or 'the first day'} – {f.until or 'the last day'}"
    today = today_in(f.zone)
    future = [f"{name} {day} is after today, {today}" for name, day in (("since", f.since), ("until", f.until))
              if day and day > today][:1]  # said, as the report says it (a dashboard trial)
    window += f" ({future[0]})" if future else ""
    if first is None:
        said = f"No data in {window}, nor on any other day, for these filters."
    else:
        recent = req.here(since=last - timedelta(days=HEADLINE_DAYS - 1), until=last)
        said = (f"No data in {escaped(window)} ({escaped(f.zone)} days) for these filters: their data runs from {first} to {last}. "
                f'Show <a href="{escaped(recent)}">the {HEADLINE_DAYS} days to {last}</a> · '
                f'<a href="{escaped(req.here(since="", until=""))}">all days</a>.')
    return f'<p class="empty" id="empty-window">{said}</p>'
