"""Query results as a terminal table, CSV or JSON.

No format changes a value (costs are exact to the nano-dollar, 9 decimals): a DECIMAL is written
from its own digits (never through a float), a DOUBLE as the shortest text that reads back as the
same double. Only how a value is spelled differs between the formats:

- table: for people. DOUBLEs in plain notation where that stays short (`0.0000001`, not `1e-07`),
  `1` for `1.0`; a cell too wide is cut with `…`, but never a number's. Numbers are right-aligned
  and line up: each is padded with zeros to the most decimals in its column (`0.3500`, `0.1740`,
  `2.3255`), a DOUBLE only where those are at most 9 (ROUND(x, 4) gives such; a raw sum's
  `0.30000000000000004` keeps its shortest text); `places` asks for a column's number of decimals
  (the report's costs: 4).
- csv: DOUBLEs as Python's shortest round-trip text (`1e-07`, `1.0`: DuckDB writes the same).
- json: always valid JSON (see `json_text`); a DECIMAL is a JSON number with its exact digits.

In every format a BLOB is lowercase hex (DuckDB reads it back with `from_hex`), an INTERVAL is
DuckDB's own text (`1 month`, `25:00:00`, `1 day 01:00:01.5`, `-01:00:00`: what a cast to VARCHAR
gives, and what a cast to INTERVAL reads back) when its rows were fetched with `fetch_rows`, a
LIST or STRUCT in a table or CSV cell is its compact JSON text.
"""

import csv
import io
import math
import unicodedata
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal
from json.encoder import encode_basestring, encode_basestring_ascii

FORMATS = ("table", "csv", "json")


@dataclass(frozen=True)
class Interval:
    """An INTERVAL as DuckDB holds it: months, days and microseconds, each apart (`1 month` is not
    `30 days`, `25 hours` is not `1 day 01:00:00`), written as DuckDB writes it."""
    months: int
    days: int
    micros: int

    def __str__(self) -> str:
        parts = []
        years, months = int(self.months / 12), self.months - int(self.months / 12) * 12  # toward zero, as C++
        for n, unit in ((years, "year"), (months, "month"), (self.days, "day")):
            if n:
                parts.append(f"{n} {unit}{'' if n in (1, -1) else 's'}")
        if self.micros or not parts:
            sign = "-" if self.micros < 0 else ""
            seconds, micros = divmod(abs(self.micros), 1_000_000)
            clock = f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
            parts.append(clock + (f".{micros:06d}".rstrip("0") if micros else ""))
        return " ".join(parts)


def rounded(value, places: int):
    """A number rounded to `places` decimals half away from zero, as SQL's ROUND does, a DOUBLE
    from its shortest text: $0.00465 is 0.0047 wherever it is shown (formatting the double itself,
    0.004649999..., gave the dashboard 0.0046 where the report said 0.0047: a new user's trial).
    Anything else is returned as it is."""
    if isinstance(value, float) and math.isfinite(value):
        value = Decimal(repr(value))
    elif isinstance(value, int) and not isinstance(value, bool):  # `$5.0000`, as any cost is shown
        value = Decimal(value)
    if isinstance(value, Decimal) and value.is_finite():
        return value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return value


def dollars(value, places: int = 4) -> str:
    """A cost as people read it (`$1,234.5678`), rounded as `rounded`; None is `unknown`."""
    return "unknown" if value is None else f"${rounded(value, places):,}"


def fetch_batches(cur, size: int = 10_000):
    """`fetch_rows` a batch of rows at a time, so that a result is never held whole (`agentlake sql
    --format csv` of 5M rows held 1.6 GB before its first line: a trial). A result with an
    INTERVAL is fetched whole, as fetch_rows converts it (through Arrow, on the same connection)."""
    if any("INTERVAL" in str(d[1]).upper() for d in cur.description or ()):
        yield fetch_rows(cur)
        return
    while batch := cur.fetchmany(size):
        yield batch


def fetch_rows(cur) -> list[tuple]:
    """`cur.fetchall()`, but every INTERVAL (also in a LIST or STRUCT) as an `Interval`. DuckDB's
    Python client hands an INTERVAL over as a timedelta, the months counted as 30 days and the
    hours past a day carried into days, so `1 month` and `30 days` arrive alike: Arrow keeps its
    months, days and nanoseconds apart. The other columns are DuckDB's own Python values."""
    if not any("INTERVAL" in str(d[1]).upper() for d in cur.description or ()):
        return cur.fetchall()
    import pyarrow as pa

    table = cur.to_arrow_table()
    exact = [i for i, f in enumerate(table.schema) if _holds_interval(f.type, pa)]
    rest = [i for i in range(table.num_columns) if i not in exact]
    others = iter(cur.from_arrow(table.select(rest).rename_columns([f"c{i}" for i in rest])).fetchall()
                  if rest else [()] * table.num_rows)
    columns = {i: [_intervals(v, pa) for v in table.column(i).to_pylist()] for i in exact}
    rows = []
    for n, other in enumerate(others):
        values = iter(other)
        rows.append(tuple(columns[i][n] if i in columns else next(values) for i in range(table.num_columns)))
    return rows


def _holds_interval(t, pa) -> bool:
    if pa.types.is_interval(t):
        return True
    if pa.types.is_struct(t):
        return any(_holds_interval(t.field(i).type, pa) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _holds_interval(t.key_type, pa) or _holds_interval(t.item_type, pa)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or \
            getattr(pa.types, "is_list_view", lambda _: False)(t):
        return _holds_interval(t.value_type, pa)
    return False


def _intervals(value, pa):
    """An Arrow value as Python, its intervals as `Interval`s (a MAP as DuckDB's client gives it)."""
    if isinstance(value, pa.MonthDayNano):
        return Interval(value.months, value.days, value.nanoseconds // 1000)
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 and not isinstance(v, pa.MonthDayNano) for v in value):
            return {_intervals(k, pa): _intervals(v, pa) for k, v in value}  # a MAP's (key, value) pairs
        return [_intervals(v, pa) for v in value]
    if isinstance(value, dict):
        return {k: _intervals(v, pa) for k, v in value.items()}
    return value


def _cell(value) -> str:
    """A value as a table cell."""
    if isinstance(value, float):
        return float_text(value)
    return text_value(value)


# the most decimals a column of DOUBLEs is padded to: a nano-dollar's, which a rounded figure
# stays within (longer texts are raw binary fractions, which zeros would only make wider)
PADDED_DECIMALS = 9


def _aligned(texts: list[str], doubles: bool, places: int | None = None) -> list[str]:
    """A column of numbers' texts, each padded with zeros to `places` decimals, else to the most
    among them (for DOUBLEs, only where that is at most PADDED_DECIMALS); scientific notation,
    nan and inf are left as they are. Padding never rounds: a text with more decimals keeps them."""
    plain = {t for t in texts if t and t[-1].isdigit() and "e" not in t}  # a set: tested once per cell
    most = max((len(t.partition(".")[2]) for t in plain), default=0)
    if places is not None:
        most = places
    elif doubles and most > PADDED_DECIMALS:
        return texts
    if most == 0:
        return texts
    out = []
    for t in texts:
        if t in plain:
            whole, _, decimals = t.partition(".")
            t = f"{whole}.{decimals.ljust(most, '0')}"
        out.append(t)
    return out


def text_value(value) -> str:
    """A value as a CSV field (and a table cell, but for DOUBLEs): exact, never a Python repr."""
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return decimal_text(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (Interval, timedelta)):
        return str(value) if isinstance(value, Interval) else interval_text(value)
    if isinstance(value, (list, tuple, dict)):
        return json_text(value, indent=None)
    return str(value)  # float: repr, the shortest text that reads back as the same double


def decimal_text(value: Decimal) -> str:
    """A DECIMAL in plain notation without trailing zeros: 0 (never `0E-9`), 1.5, 0.000000001."""
    if not value.is_finite():
        return str(value)
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def float_text(value: float) -> str:
    """A DOUBLE for people, exactly: the shortest text that reads back as the same double
    (`0.24806485`, never rounded), in plain notation from 1e-9 (a nano-dollar) up to 1e21 and
    scientific beyond (`1e-300` stays short); `1` for 1.0."""
    text = repr(value)
    if not math.isfinite(value):
        return text  # nan, inf, -inf
    if "e" in text and -9 <= Decimal(text).adjusted() < 21:
        text = format(Decimal(text), "f")  # the same digits, placed: no rounding
    return text[:-2] if text.endswith(".0") else text


def interval_text(value: timedelta) -> str:
    """A timedelta as DuckDB writes the INTERVAL of its days and time: `3 days`, `1 day 01:00:01.5`,
    `-01:00:00`, `00:00:00`. A timedelta from DuckDB's `fetchall` has lost the INTERVAL's own
    parts (`1 month` arrives as 30 days, `25 hours` as 1 day 1 hour): rows fetched with
    `fetch_rows` hold an `Interval`, written exactly."""
    micros = value // timedelta(microseconds=1)
    sign = "-" if micros < 0 else ""
    days, micros = divmod(abs(micros), 86_400_000_000)
    seconds, micros = divmod(micros, 1_000_000)
    parts = [f"{sign}{days} day{'s' if days != 1 else ''}"] if days else []
    if seconds or micros or not days:
        clock = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        if micros:
            clock += f".{micros:06d}".rstrip("0")
        parts.append(sign + clock)
    return " ".join(parts)


def json_text(value, indent: int | None = 2, ensure_ascii: bool = False) -> str:
    """`json.dumps(value, indent=indent)`, but valid and exact for every DuckDB value:

    - DECIMAL: a JSON number written from the Decimal's own digits (`12345678901.123456789`,
      `0.000000001`), not through a float. A number, not a string, so that a cost column stays
      numeric for every consumer (jq, pandas, DuckDB's read_json sum it without a cast), and exact
      for any that keeps a number's digits (Python's `json.loads(..., parse_float=Decimal)`, jq
      1.7, DuckDB's read_json into a DECIMAL column); a float parser gets the nearest double,
      as from any JSON number.
    - NaN, Infinity, -Infinity (DOUBLE, FLOAT): null. JSON has no such numbers (`NaN` is a syntax
      error in strict parsers); null keeps the column numeric-or-null, as JavaScript's
      JSON.stringify does. The table and CSV formats still show `nan` and `inf`.
    - BLOB: a hex string; INTERVAL: DuckDB's text; DATE, TIME: ISO 8601 text; a TIMESTAMP:
      ISO 8601 text ending in `Z`. The lake's TIMESTAMPs are UTC without a zone attached (and
      every agentlake connection runs in UTC); written without one, JavaScript's `Date` and
      most other readers would take them for local times. A TIMESTAMPTZ keeps its offset.
      LIST, STRUCT, MAP: arrays and objects of the same rules; anything else (UUID): its text.
    """
    return _json(value, indent, encode_basestring_ascii if ensure_ascii else encode_basestring, 0)


def _json(value, indent: int | None, string, level: int) -> str:
    if isinstance(value, str):
        return string(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return float.__repr__(value) if math.isfinite(value) else "null"
    if isinstance(value, Decimal):
        return decimal_text(value) if value.is_finite() else "null"
    if isinstance(value, dict):
        items = [string(k if isinstance(k, str) else text_value(k)) + ": " + _json(v, indent, string, level + 1)
                 for k, v in value.items()]
        return _nested("{", "}", items, indent, level)
    if isinstance(value, (list, tuple)):
        return _nested("[", "]", [_json(v, indent, string, level + 1) for v in value], indent, level)
    if isinstance(value, datetime) and value.tzinfo is None:
        return string(value.isoformat() + "Z")  # a TIMESTAMP: UTC, said so
    # DATE, TIME, TIMESTAMPTZ as ISO 8601; BLOB as hex, INTERVAL as DuckDB's text, a UUID as its text
    return string(value.isoformat() if isinstance(value, (datetime, date, time)) else text_value(value))


def _nested(start: str, end: str, items: list[str], indent: int | None, level: int) -> str:
    if not items:
        return start + end
    if indent is None:
        return start + ", ".join(items) + end
    inner, outer = " " * (indent * (level + 1)), " " * (indent * level)
    return f"{start}\n{inner}" + f",\n{inner}".join(items) + f"\n{outer}{end}"


def render_chunks(columns: list[str], batches, fmt: str):
    """`render(columns, rows, fmt)` and its line's end, for CSV or JSON, a piece per batch of rows
    (fetch_batches): the same text, written as the rows come."""
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        for rows in batches:
            writer.writerows([[v if isinstance(v, (int, float, str)) else text_value(v) for v in row] for row in rows])
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
        yield buf.getvalue()
        return
    if fmt != "json":
        raise ValueError(f"{fmt!r} is rendered whole: render()")
    opened = False
    for rows in batches:
        for row in rows:
            yield ",\n  " if opened else "[\n  "
            opened = True
            yield _json(dict(zip(columns, row)), 2, encode_basestring, 1)
    yield "\n]\n" if opened else "[]\n"


def render(columns: list[str], rows: list[tuple], fmt: str = "table", max_width: int = 60,
           places: dict[str, int] | None = None, total: tuple | None = None) -> str:
    """`total`: a table's last row, under a rule and not counted in its rows (JSON and CSV hold
    the rows only)."""
    if fmt in ("json", "csv"):  # the streamed text, whole, without its line's end
        return "".join(render_chunks(columns, [rows], fmt)).rstrip("\n")
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    shown = rows + ([total] if total is not None and rows else [])  # aligned with the rows
    tail = [_is_path(c) for c in columns]
    cells = [[_cell(v) if _is_number(v) else _clip(_cell(v), max_width, t) for v, t in zip(row, tail)]
             for row in shown]
    numeric = [all(_is_number(r[i]) or r[i] is None for r in rows) and rows for i in range(len(columns))]
    for i in (i for i, n in enumerate(numeric) if n):
        doubles = any(isinstance(r[i], float) for r in shown)
        for r, text in zip(cells, _aligned([r[i] for r in cells], doubles, (places or {}).get(columns[i]))):
            r[i] = text
    widths = [max([display_width(c)] + [display_width(r[i]) for r in cells]) for i, c in enumerate(columns)]

    def line(values):
        return "  ".join(_padded(v, w, n) for v, w, n in zip(values, widths, numeric)).rstrip()

    rule = "  ".join("-" * w for w in widths)
    out = [line(columns), rule]
    out += [line(r) for r in cells[:len(rows)]]
    if len(cells) > len(rows):
        out += [rule, line(cells[-1])]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def _is_number(value) -> bool:
    return isinstance(value, (int, float, Decimal))


def _is_path(column: str) -> bool:
    return column == "path" or column.endswith("_path")


def display_width(text: str) -> int:
    """The columns `text` takes in a terminal: a Chinese or Japanese character (East Asian wide or
    full-width) two, a combining mark none; the table padded by characters pushed the columns after
    such text to the right (a new user's trial)."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _padded(text: str, width: int, right: bool) -> str:
    gap = " " * max(0, width - display_width(text))
    return gap + text if right else text + gap


def _clip(text: str, width: int, tail: bool = False) -> str:
    """One line of at most `width` columns (display_width); a path keeps its end (the file's
    name), not the prefix every row shares."""
    text = text.replace("\n", "\\n")
    if display_width(text) <= width:
        return text
    kept, used = [], 1  # the ellipsis' column
    for c in (reversed(text) if tail else text):
        used += display_width(c)
        if used > width:
            break
        kept.append(c)
    return "…" + "".join(reversed(kept)) if tail else "".join(kept) + "…"
