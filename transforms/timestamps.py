"""Epoch numbers to UTC datetimes.

Crush writes Unix seconds everywhere, but other tools' fixtures (and a buggy writer) use
milliseconds. A seconds value above 1e11 would be past the year 5000, so magnitude tells the
unit apart safely.
"""

from datetime import datetime, timedelta, timezone

_MS_ABOVE = 10**11
_US_ABOVE = 10**14
_NS_ABOVE = 10**17


def epoch_unit(value: float) -> str:
    """'s', 'ms', 'us' or 'ns', judged by magnitude."""
    v = abs(value)
    if v >= _NS_ABOVE:
        return "ns"
    if v >= _US_ABOVE:
        return "us"
    if v >= _MS_ABOVE:
        return "ms"
    return "s"


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_DIVISOR = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


def from_epoch(value, counter: dict | None = None) -> datetime | None:
    """A UTC datetime from an epoch number in any unit; None for null, non-numbers, 0 and below
    (before 1970: no agent ran then, a writer's fault), which the run counts as unusable.

    When `counter` is given, values not in seconds are counted under their unit, so that the
    run can report them.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if not isinstance(value, (int, float)) or value != value or value in (float("inf"), float("-inf")):
        return None
    if value <= 0:
        return None
    unit = epoch_unit(value)
    if unit != "s" and counter is not None:
        counter[unit] = counter.get(unit, 0) + 1
    try:
        if isinstance(value, int):
            # integer arithmetic keeps microseconds exact
            micros = value * 10**6 // _DIVISOR[unit]
            return _EPOCH + timedelta(microseconds=micros)
        return datetime.fromtimestamp(value / _DIVISOR[unit], timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def from_iso(value) -> datetime | None:
    """A UTC datetime from an RFC 3339 string (any fraction length, `Z` or an offset)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:  # no offset written: agents write UTC
        return parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)
