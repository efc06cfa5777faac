"""Query results as a terminal table, CSV or JSON."""

import csv
import io
import json
from datetime import date, datetime
from decimal import Decimal

FORMATS = ("table", "csv", "json")


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6f}".rstrip("0").rstrip(".")  # costs carry up to 6 decimals
    if isinstance(value, Decimal):
        return decimal_text(value)
    return str(value)


def decimal_text(value: Decimal) -> str:
    """A DECIMAL in plain notation without trailing zeros: 0 (never `0E-9`), 1.5, 0.000000001."""
    if not value.is_finite():
        return str(value)
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def json_value(value):
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


def render(columns: list[str], rows: list[tuple], fmt: str = "table", max_width: int = 60) -> str:
    if fmt == "json":
        return json.dumps([{c: json_value(v) for c, v in zip(columns, row)} for row in rows],
                          indent=2, ensure_ascii=False, default=str)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([["" if v is None else decimal_text(v) if isinstance(v, Decimal) else v for v in row]
                          for row in rows])
        return buf.getvalue().rstrip("\n")
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    tail = [_is_path(c) for c in columns]
    cells = [[_clip(_cell(v), max_width, t) for v, t in zip(row, tail)] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(r[i], (int, float, Decimal)) or r[i] is None for r in rows) and rows
               for i in range(len(columns))]

    def line(values):
        return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric)).rstrip()

    out = [line(columns), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def _is_path(column: str) -> bool:
    return column == "path" or column.endswith("_path")


def _clip(text: str, width: int, tail: bool = False) -> str:
    """One line of at most `width` characters; a path keeps its end (the file's name), not the
    prefix every row shares."""
    text = text.replace("\n", "\\n")
    if len(text) <= width:
        return text
    return "…" + text[-(width - 1):] if tail else text[: width - 1] + "…"
