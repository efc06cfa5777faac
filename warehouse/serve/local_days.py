"""A reader's days in a time zone other than UTC (`agentlake report --tz`, `agentlake dashboard
--tz`: warehouse.serve.dashboard.zoned). Nothing stored changes: the lake's `date` columns stay
UTC days. The reader's connection gets temporary objects of the same names that shadow them: a view of each curated table the report reads, its `date` the local
day of the row's own timestamp, and the marts over them computed again from their own SQL (once:
temporary tables), so that daily_costs splits each root session's cost over the zone's days in
whole nano-dollars, as the merge splits it over UTC days.

A row without a timestamp took its session's UTC date at ingest (docs/TABLES.md, `date`): here it
takes its session's local day, and keeps its stored date when the session has no timestamp either."""

import re

from transforms.contract import DATA_TABLES
from warehouse.catalog.marts import create_block_views, read_by
from warehouse.lake.ducklake import CATALOG
from warehouse.lake.zones import UTC

# the tables agentlake report reads beside its marts (warehouse.serve.report), and the blocks it
# makes views of itself (over these tables, so over the zone's days too)
REPORT_TABLES = ("sessions", "messages", "tool_calls", "usage")
REPORT_MARTS = ("daily_costs", "token_usage", "tool_usage")
_SESSION = ("machine", "source_id", "session_id")  # a session's key in every table that has one
# a UTC day a mart takes from a timestamp itself (daily_costs: a session without requests, on
# the day it was created), not from a `date` column
_UTC_DAY = re.compile(r"CAST\((\w+\.\w+) AS DATE\)")


def local_date(column: str, zone: str) -> str:
    """SQL for the day, in `zone`, of a UTC timestamp column (the connection's TimeZone is UTC)."""
    if zone == UTC:
        return f"CAST({column} AS DATE)"
    return f"CAST(timezone('{zone}', {column}::TIMESTAMPTZ) AS DATE)"


def use_zone(con, zone: str, marts=REPORT_MARTS) -> None:
    """Shadows, on `con`, the tables that `marts` and the report read, and the marts themselves,
    with their rows on the days of `zone`."""
    use_local_tables(con, zone, marts)
    create_block_views(con, list(marts), edit=lambda sql: _local_table(sql, zone))


def use_local_tables(con, zone: str, marts=REPORT_MARTS) -> None:
    """Only the tables of `use_zone`: views, cheap to make on each connection (the dashboard's
    cursors, which share marts computed once: warehouse.serve.dashboard.zoned)."""
    read = set(REPORT_TABLES) | read_by(marts)
    for table in DATA_TABLES:
        if table.name in read:
            con.execute(f'CREATE OR REPLACE TEMP VIEW "{table.name}" AS {_local_rows(table, zone)}')


def _local_table(statement: str, zone: str) -> str:
    """A mart's or block's temporary view as a temporary table, over the zone's days: computed once,
    not again in each of the report's sections."""
    return _UTC_DAY.sub(lambda m: local_date(m[1], zone), statement.replace("TEMP VIEW", "TEMP TABLE", 1))


def _local_rows(table, zone: str) -> str:
    own, when = f'{CATALOG}.main."{table.name}"', table.date_from
    if table.name == "sessions" or "session_id" not in table.column_names:
        return f"SELECT * REPLACE (COALESCE({local_date(when, zone)}, date) AS date) FROM {own}"
    dated = f"SELECT * REPLACE ({local_date(when, zone)} AS date) FROM {own} WHERE {when} IS NOT NULL"
    on = " AND ".join(f"s.{c} = x.{c}" for c in _SESSION)
    undated = (f"SELECT x.* REPLACE (COALESCE({local_date('s.created_at', zone)}, x.date) AS date) FROM {own} AS x "
               f"LEFT JOIN {CATALOG}.main.sessions AS s ON {on} WHERE x.{when} IS NULL")
    return f"{dated} UNION ALL {undated}"
