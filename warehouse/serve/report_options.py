"""What the report's options mean, importable without DuckDB (`--help` loads nothing more): its
breakdowns, and its relative windows (`--today`, `--yesterday`, `--week`, `--month`, `--last 7d`)
as the first and last day they include, today included. Days are UTC, as the lake's `date`
columns are, unless `--tz` names a zone (warehouse.lake.zones): then "today" is today there."""

import re
from datetime import date, timedelta

BREAKDOWNS = ("day", "week", "month", "project", "agent", "user", "model", "tool", "category")
# the breakdowns over time: every period is shown, in order (never cut by --top)
PERIODS = ("day", "week", "month")

RELATIVE = ("today", "yesterday", "week", "month")
_LAST = re.compile(r"\s*([0-9]+)\s*([dwm])\s*")


class BadWindow(ValueError):
    pass


_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def parse_day(text: str) -> date:
    """A day as YYYY-MM-DD, and only so: date.fromisoformat (Python 3.11) also takes 20261201 and
    the ISO week 2026-W49, which meant its Monday without a word. ValueError otherwise."""
    if not _DAY.fullmatch(text.strip()):
        raise ValueError(f"not a date (YYYY-MM-DD): {text!r}")
    return date.fromisoformat(text.strip())


def relative_days(name: str, today: date) -> tuple[date, date]:
    """`today` and `yesterday` one day each; `week` the last 7 days (tokscale's `--week`);
    `month` this calendar month so far."""
    if name == "today":
        return today, today
    if name == "yesterday":
        return today - timedelta(days=1), today - timedelta(days=1)
    if name == "week":
        return today - timedelta(days=6), today
    if name == "month":
        return today.replace(day=1), today
    raise BadWindow(f"unknown window {name!r}: one of {', '.join(RELATIVE)}")


def last_days(text: str, today: date) -> tuple[date, date]:
    """`--last N{d,w,m}`: the last N days, weeks (7 days each) or months, ending today. `1m` on
    4 December is 5 November to 4 December (a month back, the day after)."""
    m = _LAST.fullmatch(text)
    if not m:
        raise BadWindow(f"--last wants a number and d, w or m (7d, 2w, 3m): {text!r}")
    if len(m[1].lstrip("0")) > 9:  # a billion days is before year 1 whatever the unit (and int() of
        raise BadWindow(f"--last {text.strip()} reaches before year 1")  # thousands of digits refuses)
    n, unit = int(m[1]), m[2]
    if n == 0:  # the form is right: the number is not
        raise BadWindow(f"--last counts from 1 (1d is today): {text!r}")
    try:
        if unit == "d":
            return today - timedelta(days=n - 1), today
        if unit == "w":
            return today - timedelta(days=7 * n - 1), today
    except OverflowError:  # past the calendar's first day, or past what a timedelta holds
        raise BadWindow(f"--last {n}{unit} reaches before year 1") from None
    return _months_back(today, n) + timedelta(days=1), today


def _months_back(day: date, n: int) -> date:
    """The same day n months earlier, or that month's last day when it is shorter (31 March -> 28
    or 29 February)."""
    month0 = day.year * 12 + day.month - 1 - n
    year, month = divmod(month0, 12)
    if year < 1:
        raise BadWindow(f"--last {n}m reaches before year 1")
    following = date(year + (month == 11), (month + 1) % 12 + 1, 1)
    return date(year, month + 1, min(day.day, (following - timedelta(days=1)).day))
