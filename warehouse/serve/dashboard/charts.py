"""The dashboard's charts: Vega-Lite specs built with altair, rendered to SVG on the server by
vl-convert (Vega's own renderer, embedded), so the page needs no script and fetches nothing.

Every breakdown is cut to the top N with the rest summed into one "others" row that says how
many it holds (`top_with_others`): nothing is dropped silently, and N colours stay distinct.
A cost that is unknown (NULL) is never drawn as $0: bars leave it out and say "unknown cost".
"""

import copy
import json
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache

import altair as alt
import vl_convert

from warehouse.serve.formatting import dollars

# Tableau 10 without its grey, which is kept for "others"; ten distinct series at most
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#17becf")
OTHERS_COLOR = "#bab0ac"
ERROR_COLOR = "#e15759"
TOP_SERIES = len(PALETTE)
# Text is laid out with metrics measured by vl-convert, which bundles Liberation Sans: naming it
# (and the fonts of the same metrics: Arimo, Arial, Helvetica) keeps measuring fast (a system font
# such as DejaVu Sans is much slower: docs/BENCHMARKS.md, "Figures behind the code's choices") and
# the browser draws the same widths wherever one of them is installed. Where none is (a bare Debian:
# DejaVu, wider), the label axes reserve fixed room (LABEL_ROOM) and the charts keep padding on the
# right.
FONT = "Liberation Sans, Arimo, Arial, Helvetica, sans-serif"
LABEL_LIMIT = 200
LABEL_ROOM = 230
PADDING = {"left": 5, "top": 5, "bottom": 5, "right": 40}
USD = "$,.2~f"  # $0.25, $2.5, $30: short tick labels that do not run into each other
# vl-convert resolves every href against its data loader's default base URL; ours are
# site-relative links, so that prefix is taken off again (tests/test_dashboard.py follows them)
_LOADER_BASE = 'xlink:href="https://vega.github.io/vega-datasets/'


def _href():
    """A mark's link: its row's `href`, or none at all. Vega-Lite writes a null field as the text
    "null", which the browser follows to /null (a 404): a mark without a page gets no anchor."""
    return alt.condition("isValid(datum.href) && datum.href !== ''", alt.Href("href:N"), alt.value(None))


@dataclass
class Cut:
    """Rows kept by a top-N cut, and what went to "others"."""
    rows: list[tuple]
    total: int  # rows before the cut
    others: tuple | None = None  # the summed row standing for the rest, if any

    @property
    def note(self) -> str:
        if self.others is None:
            return f"all {self.total} shown"
        return f"{len(self.rows)} of {self.total} shown, {self.total - len(self.rows)} in others"


def top_with_others(rows: list[tuple], n: int | None, label: str = "others") -> Cut:
    """The first `n` rows (already ranked), and one row summing the rest: (label (K), sums...).
    A sum over only unknown values stays None (unknown), never 0."""
    if not n or len(rows) <= n:
        return Cut(list(rows), len(rows))
    rest = rows[n:]
    sums = []
    for i in range(1, len(rows[0])):
        values = [r[i] for r in rest if isinstance(r[i], (int, float)) or hasattr(r[i], "as_tuple")]
        sums.append(sum(float(v) for v in values) if values else None)
    return Cut(list(rows[:n]), len(rows), (f"{label} ({len(rest)})", *sums))


def period_for(first: date, last: date) -> str:
    """Bars per day up to a quarter, per week up to two years, else per month: bars stay readable."""
    span = (last - first).days
    return "day" if span <= 92 else "week" if span <= 730 else "month"


def period_start(day: date, period: str) -> date:
    """The first day of the bar `day` falls in: itself, its week's Monday, its month's first."""
    if period == "day":
        return day
    if period == "week":
        return day - timedelta(days=day.weekday())
    return day.replace(day=1)


def period_end(start: date, period: str) -> date:
    if period == "day":
        return start + timedelta(days=1)
    if period == "week":
        return start + timedelta(days=7)
    return (start.replace(day=28) + timedelta(days=4)).replace(day=1)


def render(spec: dict) -> str:
    """A Vega-Lite spec (dict) as an SVG string; its viewBox lets the page scale it to the column's
    width. Specs come from altair once per shape (`_time_spec`, `_hbar_spec`: building them is
    slower than drawing), and the data is put in per page."""
    return _svg(json.dumps(spec, sort_keys=True, default=str))


@lru_cache(maxsize=256)
def _svg(spec_json: str) -> str:
    # the same data draws the same picture: a reload, or the way back from a drill-down, is free
    svg = vl_convert.vegalite_to_svg(spec_json)
    return svg.replace(_LOADER_BASE, 'xlink:href="')


def _iso(d: date) -> str:
    return d.isoformat()


def _with_data(template: dict, values: list[dict]) -> dict:
    spec = copy.deepcopy(template)
    spec["data"] = {"values": values}
    return spec


def period_title(period: str, zone: str) -> str:
    """The time axis' title: whose days its dates are (`day (Europe/Berlin)`)."""
    return f"week from Monday ({zone})" if period == "week" else f"{period} ({zone})"


@lru_cache(maxsize=16)
def _time_spec(period: str, series_title: str, width: int, zone: str) -> dict:
    fmt = "%b %d" if period != "month" else "%b %Y"
    axis_title = period_title(period, zone)
    chart = alt.Chart(alt.Data(values=[])).mark_bar(stroke="white", strokeWidth=0.3).encode(
        # the dates are days (UTC's, or the page's zone's): drawn as UTC dates, not in the server's
        # time zone (a dashboard started west of UTC put each day's bar on the day before)
        x=alt.X("start:T", timeUnit="utcyearmonthdate", scale=alt.Scale(type="utc"), title=axis_title,
                axis=alt.Axis(title=axis_title, format=fmt, labelOverlap=True, grid=False,
                              # months: a tick per month at most (a few months had a label per tick, all alike)
                              tickCount={"interval": "month", "step": 1} if period == "month" else 12)),
        x2=alt.X2("end:T", timeUnit="utcyearmonthdate", title="end"),
        y=alt.Y("sum(cost):Q", title="cost (USD)", axis=alt.Axis(format=USD)),
        color=alt.Color("series:N", title=series_title,
                        legend=alt.Legend(orient="right", labelLimit=LABEL_LIMIT, symbolType="square", labelFontSize=12,
                                          titleFontSize=12, symbolSize=120)),
        order=alt.Order("rank:Q", sort="ascending"),  # the largest series on the axis, others on top
        href=_href(),
        # also each bar's accessible label (aria-label): the exact figures, for screen readers and tests
        tooltip=[alt.Tooltip("start:T", timeUnit="utcyearmonthdate", title="from", format="%Y-%m-%d"),
                 alt.Tooltip("series:N", title=series_title), alt.Tooltip("cost_text:N", title="cost")],
    ).properties(width=width, height=300, padding=PADDING)
    return chart.configure(font=FONT).configure_view(strokeWidth=0).configure_axis(
        labelFontSize=12, titleFontSize=12).to_dict()


def cost_over_time(rows: list[tuple], period: str, series_title: str, order: list[str], width: int = 1150,
                   budget: "BudgetLine | None" = None, zone: str = "UTC", days: tuple | None = None) -> str:
    """Stacked bars on a real time axis: rows (period_start, series, cost, href or None). `order` is the
    series, largest first, already cut to the top N plus "others ..." (drawn grey, on top). A
    `budget` draws its monthly line (for a chart of months: the caller's to say). `days`: the
    first and last day the axis covers, when the data runs beyond the bars (days whose every cost is
    unknown have none): the trends beside it cover the same days."""
    rows = [r for r in rows if r[2] is not None]
    if not rows:
        return _empty(width, "no known cost for these filters" if days else "no data for these filters")
    order = [s for s in order if any(r[1] == s for r in rows)]
    colors = [OTHERS_COLOR if s.startswith("others (") else PALETTE[i % len(PALETTE)] for i, s in enumerate(order)]
    # the cost as every figure of the dashboard spells it (dollars: d3's format rounded the double)
    values = [{"start": _iso(r[0]), "end": _iso(period_end(r[0], period)), "series": r[1], "cost": float(r[2]),
               "cost_text": dollars(r[2]), "rank": order.index(r[1]), "href": r[3]} for r in rows]
    spec = _with_data(_time_spec(period, series_title, width, zone), values)
    if days:
        ends = (period_start(days[0], period), period_end(period_start(days[1], period), period))
        spec["encoding"]["x"]["scale"]["domain"] = [{"year": d.year, "month": d.month, "date": d.day, "utc": True}
                                                    for d in ends]
    first = period_start(days[0], period) if days else min(r[0] for r in rows)
    _ticks(spec["encoding"]["x"]["axis"], first, period_start(days[1], period) if days else max(r[0] for r in rows),
           period)
    spec["encoding"]["color"].update(sort=order, scale={"domain": order, "range": colors})
    if budget is not None:
        spec = _with_budget(spec, budget, rows, period)
    return render(spec)


BUDGET_COLORS = {"over": "#b00020", "projected over": "#c77700", "ok": "#333333"}  # red, amber, ink


@dataclass(frozen=True)
class BudgetLine:
    """A monthly budget drawn across a chart of months, and how its month stands (warehouse.serve.budgets)."""
    amount: float
    label: str  # e.g. "team budget $500.00 a month"
    status: str  # ok, projected over, over
    month: date  # the current month's first day: its bar is marked unless ok
    projected: float  # where that month ends at this pace


def _with_budget(spec: dict, budget: BudgetLine, rows: list[tuple], period: str) -> dict:
    """The bars as one layer of a layered spec, with the budget's rule and label on the same y
    scale (so the line shows even far above the bars) and, when its month is not ok, that month's
    bar outlined, its projection dashed above it, and said over or projected over."""
    color = BUDGET_COLORS.get(budget.status, BUDGET_COLORS["ok"])
    x, x2 = spec["encoding"]["x"], spec["encoding"]["x2"]
    y_at = lambda field: {"field": field, "type": "quantitative", "title": "cost (USD)",  # noqa: E731
                          "axis": {"format": USD}}
    text = {"type": "text", "baseline": "bottom", "fontSize": 12, "fontWeight": "bold"}
    halo = {"stroke": "white", "strokeWidth": 4, "strokeJoin": "round"}  # readable over the bars
    line = {"values": [{"amount": budget.amount, "label": budget.label}]}
    label = {"y": y_at("amount"), "text": {"field": "label", "type": "nominal"}}
    at = {**text, "align": "left", "x": 4, "dy": -3}
    layers = [{"mark": spec.pop("mark"), "encoding": spec.pop("encoding")},
              {"data": line, "mark": {"type": "rule", "color": color, "strokeWidth": 2, "strokeDash": [7, 4]},
               "encoding": {"y": y_at("amount"),
                            "tooltip": [{"field": "label", "type": "nominal", "title": "budget"}]}},
              {"data": line, "mark": {**at, **halo}, "encoding": label},
              {"data": line, "mark": {**at, "color": color}, "encoding": label}]
    if period == "month" and budget.status != "ok" and any(r[0] == budget.month for r in rows):
        spent = sum(r[2] for r in rows if r[0] == budget.month)  # the bar as drawn: the page's filters
        projected = f"{dollars(budget.projected, 2)} projected at this pace"
        said = f"over budget · {projected}" if budget.status == "over" else f"projected over: {projected}"
        mark = {"values": [{"start": _iso(budget.month), "end": _iso(period_end(budget.month, period)),
                            "mid": _iso(budget.month + timedelta(days=14)), "zero": 0, "spent": spent,
                            "top": max(spent, budget.projected), "said": said}]}
        box = {"type": "rect", "stroke": color, "strokeWidth": 2.5}
        tip = [{"field": "said", "type": "nominal", "title": "this month"}]
        words = {"x": {**x, "field": "mid"}, "y": y_at("top"), "text": {"field": "said", "type": "nominal"}}
        layers += [{"data": mark, "mark": {**box, "fillOpacity": 0},  # this month's bar, outlined
                    "encoding": {"x": x, "x2": x2, "y": y_at("zero"), "y2": {"field": "spent"}, "tooltip": tip}},
                   {"data": mark, "mark": {**box, "fill": color, "fillOpacity": 0.07, "strokeDash": [5, 4],
                                           "strokeWidth": 1.5},  # where it ends at this pace
                    "encoding": {"x": x, "x2": x2, "y": y_at("spent"), "y2": {"field": "top"}, "tooltip": tip}},
                   {"data": mark, "mark": {**text, "dy": -4, **halo}, "encoding": words},
                   {"data": mark, "mark": {**text, "dy": -4, "color": color}, "encoding": words}]
    spec["layer"] = layers
    return spec


@lru_cache(maxsize=16)
def _hbar_spec(unit: str, value_title: str, overlay_title: str | None, width: int) -> dict:
    y = alt.Y("label:N", sort=alt.EncodingSortField("order", op="min"), title=None,
              axis=alt.Axis(labelLimit=LABEL_LIMIT, minExtent=LABEL_ROOM, labelFontSize=12))
    base = alt.Chart(alt.Data(values=[]))
    bars = base.mark_bar().encode(
        y=y, x=alt.X("value:Q", title=value_title,
                     axis=alt.Axis(format=USD if unit == "$" else ",d", tickCount=5, labelOverlap=True)),
        color=alt.condition("datum.others", alt.value(OTHERS_COLOR), alt.value(PALETTE[0])),
        href=_href(), tooltip=[alt.Tooltip("label:N"), alt.Tooltip("text:N", title="value")])
    layers = [bars]
    if overlay_title:
        layers.append(base.mark_bar(color=ERROR_COLOR).encode(y=y, x="overlay:Q", href=_href()))
    layers.append(base.mark_text(align="left", dx=4, fontSize=11).encode(
        y=y, x=alt.X("pos:Q"), text="text:N",
        color=alt.condition("datum.unknown", alt.value("#b00020"), alt.value("#333"))))
    chart = alt.layer(*layers).properties(width=width, height=alt.Step(22), padding=PADDING)
    return chart.configure(font=FONT).configure_view(strokeWidth=0).configure_axis(titleFontSize=12).to_dict()


def hbars(rows: list[tuple], unit: str = "$", width: int = 330, value_title: str = "cost (USD)",
          overlay_title: str | None = None) -> str:
    """Horizontal bars in the given order: rows (label, value, href, overlay) where an overlay
    (errors) is drawn over the bar in red. A None value is written "unknown cost", not drawn; a
    None href draws the bar without a link."""
    if not rows:
        return _empty(width)
    values = []
    for order, (label, value, href, *overlay) in enumerate(rows):
        shown = None if value is None else float(value)
        text = "unknown cost" if shown is None else (dollars(value) if unit == "$" else f"{shown:,.0f}")
        if overlay and overlay[0]:
            text += f" ({int(overlay[0]):,} {overlay_title})"
        values.append({"label": label, "value": shown, "pos": shown or 0, "unknown": shown is None,
                       "text": text, "href": href, "order": order,
                       "overlay": float(overlay[0]) if overlay and overlay[0] is not None else None,
                       "others": str(label).startswith("others (")})
    return render(_with_data(_hbar_spec(unit, value_title, overlay_title, width), values))


def _empty(width: int, said: str = "no data for these filters") -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="30" viewBox="0 0 {width} 30">'
            f'<text x="0" y="20" font-family="sans-serif" font-size="13">{said}</text></svg>')


def warm_up() -> None:
    """The first render in a process starts vl-convert's JavaScript engine, slow enough to show in a
    page (docs/BENCHMARKS.md, "Figures behind the code's choices"): pay it at start."""
    hbars([("x", 1.0, None)])
    _svg.cache_clear()


def period_label(start: date, period: str) -> str:
    """A bar's or point's period in words: its day, `week from` its Monday, its month."""
    return {"day": start.isoformat(), "week": f"week from {start.isoformat()}"}.get(period, start.strftime("%Y-%m"))


def _datetime(d: date) -> dict:
    return {"year": d.year, "month": d.month, "date": d.day, "utc": True}


def _ticks(axis: dict, first: date, last: date, period: str, most: int = 12) -> None:
    """A tick per day or week where the span holds few: Vega's own ticks over a day or two fell
    every few hours, each labelled with its date (`Dec 07, Dec 07, Dec 08`: a dashboard trial).
    `first` and `last`: the first and last periods' starts."""
    if period not in ("day", "week"):
        return
    step = timedelta(days=1 if period == "day" else 7)
    starts = [first + step * i for i in range((last - first) // step + 1)]
    if len(starts) <= most:
        axis["values"] = [_datetime(d) for d in starts]


@lru_cache(maxsize=32)
def _trend_spec(period: str, value_title: str, axis_format: str, value_format: str, legend: bool, width: int,
                zone: str) -> dict:
    fmt = "%b %d" if period != "month" else "%b %Y"
    axis_title = period_title(period, zone)
    base = alt.Chart(alt.Data(values=[])).encode(
        x=alt.X("at:T", scale=alt.Scale(type="utc"), title=axis_title,
                # months: a tick per month at most, as the cost chart (six ticks over three months
                # wrote "Nov 2026" three times: a new user's trial)
                axis=alt.Axis(format=fmt, labelOverlap="greedy", labelSeparation=6, grid=False,
                              tickCount={"interval": "month", "step": 1} if period == "month" else 6)),
        y=alt.Y("value:Q", title=value_title, axis=alt.Axis(format=axis_format, tickCount=4)),
        color=alt.Color("series:N", title=None,
                        legend=alt.Legend(orient="top", labelFontSize=12, symbolType="stroke") if legend else None))
    # a period without a figure (value null) breaks the line: a gap, not a point drawn at 0
    line = base.mark_line(strokeWidth=2, invalid="break-paths-show-domains", aria=False)
    points = base.mark_point(filled=True, size=36, opacity=1).encode(
        # also each point's accessible label (aria-label): the exact figures, for screen readers and tests
        tooltip=[alt.Tooltip("from:N", title="from"), alt.Tooltip("series:N", title="series"),
                 alt.Tooltip("value:Q", title="value", format=value_format)])
    chart = alt.layer(line, points).properties(width=width, height=150, padding=PADDING)
    return chart.configure(font=FONT).configure_view(strokeWidth=0).configure_axis(
        labelFontSize=12, titleFontSize=12).to_dict()


def trend(rows: list[tuple], period: str, first: date, last: date, series: list[tuple[str, str]], value_title: str,
          axis_format: str, value_format: str, width: int = 400, zone: str = "UTC") -> str:
    """Lines with a point per period on a time axis of `zone`'s days from `first` to `last` (period starts):
    rows (period_start, series, value or None), `series` (name, colour) in the legend's order. A
    None is a period with nothing recorded: no point, and the line broken there (never a 0)."""
    if not any(r[2] is not None for r in rows):
        return _empty(width)
    values = [{"at": (_midpoint(r[0], period)), "from": period_label(r[0], period), "series": r[1],
               "value": None if r[2] is None else float(r[2])} for r in rows]
    spec = _with_data(_trend_spec(period, value_title, axis_format, value_format, len(series) > 1, width, zone),
                      values)
    domain = [_datetime(first), _datetime(period_end(last, period))]
    for layer in spec["layer"]:
        layer["encoding"]["x"]["scale"]["domain"] = domain
        if "axis" in layer["encoding"]["x"]:
            _ticks(layer["encoding"]["x"]["axis"], first, last, period)
        layer["encoding"]["color"]["scale"] = {"domain": [s for s, _ in series], "range": [c for _, c in series]}
    return render(spec)


def _midpoint(start: date, period: str) -> str:
    """The middle of a period, where its point stands (the cost chart's bar spans the period)."""
    begin = datetime.combine(start, time())
    return (begin + (datetime.combine(period_end(start, period), time()) - begin) / 2).isoformat() + "Z"
