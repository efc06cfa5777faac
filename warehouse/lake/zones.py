"""Time zones, by IANA name: whose days `agentlake report` counts (`--tz`, $AGENTLAKE_TZ, `tz` in
config.toml). The lake itself keeps UTC. Importable without DuckDB (`--help` loads nothing more)."""

from datetime import date, datetime, timezone
from difflib import get_close_matches
from zoneinfo import ZoneInfo, available_timezones

UTC = "UTC"  # the lake's own days: the report reads them as stored
TZ_VARIABLE = "AGENTLAKE_TZ"


class BadZone(ValueError):
    pass


def check_zone(name: str, where: str = "--tz") -> str:
    """`name` if it is an IANA time zone (`Europe/Berlin`, `Asia/Kolkata`, `UTC`), else BadZone
    naming it and the close names. Checked against the names Python knows: DuckDB's (ICU's)
    are the same database."""
    if name == UTC:
        return name
    known = available_timezones()
    spelt = {k.lower(): k for k in known} | {UTC.lower(): UTC}
    if name not in known and name.lower() in spelt:  # `utc`, `europe/berlin`: the zone's own spelling
        return spelt[name.lower()]
    if name not in known:
        # a city alone (`berlin`, `new york`): the zones it ends, else the names spelt closest
        city = name.strip().lower().replace(" ", "_")
        close = (sorted(k for k in known if k.lower().rsplit("/", 1)[-1] == city)[:3]
                 or get_close_matches(name, sorted(known), 3, 0.6))
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise BadZone(f"{where} {name!r} is not a time zone{hint}: give an IANA name such as Europe/Berlin, "
                      "America/New_York, Asia/Kolkata or UTC")
    return name


def today_in(zone: str) -> date:
    return datetime.now(ZoneInfo(zone)).date()


def clock(at: datetime | None, zone: str) -> datetime | None:
    """A time the tables keep in UTC (naive) on the clock of `zone`, naive too."""
    if at is None or zone == UTC:
        return at
    return at.replace(tzinfo=timezone.utc).astimezone(ZoneInfo(zone)).replace(tzinfo=None)
