"""The marts computed afresh from the curated tables, for tests that compare them with the mart
tables a merge wrote."""

import re

from warehouse.catalog.marts import is_macro, mart_sql, temporary

_VIEW = re.compile(r"^CREATE OR REPLACE VIEW (\w+)", re.MULTILINE)


def recompute_marts(con, name_of=lambda name: name) -> None:
    """Every building block and mart, computed by its own SQL into a temporary table of the
    connection: a mart's as `name_of(name)` (its own name shadows the mart table for the marts
    after it). Views, as `create_mart_views` makes them, compute every block again in each mart
    that reads it, and each mart again at each read: comparing every mart that way was most of a test's time."""
    for name, sql in mart_sql():
        if is_macro(sql):
            con.execute(temporary(sql))
            continue
        target = name if name.startswith("_") else name_of(name)
        head = _VIEW.search(sql)
        con.execute(f'{sql[:head.start()]}CREATE OR REPLACE TEMP TABLE "{target}"{sql[head.end():]}')
