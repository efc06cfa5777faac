"""config.toml's prices (warehouse.lake.prices) applied by the merge, in the tables' transaction.

The landing files keep what the agents recorded; the merged `usage` rows of the sources a merge
inserts get a configured price where one covers them: the row's model (as recorded, any case,
through an alias, or the name it groups under in `model_names`), a price in force on the row's
`date` (the latest `since` on or before it), a request with token counts, and a cost that the agent
did not record (`estimated` or `unknown`; a `native` cost is the agent's own and stays). Such a row
gets `cost_source = 'configured'` and a `pricing_note` naming the price.

The sessions those requests belong to follow, so that `daily_costs`, the report and the dashboard
agree: a session's cost (a root's, with `cost_includes_subagents`, its tree's requests) changes by
what its requests' costs changed, summed as DECIMAL(38,9); it becomes `configured`, or `partial`
while one of its requests is still unpriced. A `native` session keeps its cost.

The merge records the prices' fingerprint (`_agentlake_prices`); another one rebuilds the tables
from the landing files, so a changed or removed price re-prices the whole history once."""

import difflib
from datetime import date, timedelta
from decimal import Decimal

import duckdb
import pyarrow as pa

from warehouse.lake.prices import Price, Prices

FINGERPRINT_TABLE = "_agentlake_prices"
OVERRIDDEN = ("estimated", "unknown")  # the usage rows' cost_source a configured price replaces
_PER_TOKEN = Decimal("0.000001")  # a rate per million tokens, per token
_RATE_TYPE = pa.decimal128(38, 18)
_BUCKETS = (("input_uncached_tokens", "input"), ("cache_read_tokens", "cache_read"),
            ("cache_write_5m_tokens", "cache_write_5m"), ("cache_write_1h_tokens", "cache_write_1h"),
            ("output_tokens", "output"))


def recorded_fingerprint(con) -> str:
    """The fingerprint of the prices the tables were merged with ("" for none, or a catalog from
    before configured prices)."""
    try:
        row = con.execute(f"SELECT fingerprint FROM {FINGERPRINT_TABLE}").fetchone()
    except duckdb.CatalogException:
        return ""
    return row[0] if row else ""


def record_fingerprint(con, fingerprint: str) -> None:
    con.execute(f"CREATE OR REPLACE TABLE {FINGERPRINT_TABLE} AS SELECT ?::VARCHAR AS fingerprint", [fingerprint])


def _windows(priced: list[tuple[str, Price]]) -> pa.Table:
    """One row per recorded model name and price: the days [since, until) it holds."""
    rows = sorted(priced, key=lambda mp: (mp[0], mp[1].since or date.min))
    cols: dict[str, list] = {"model": [], "since": [], "until": [], "note": [],
                             **{rate: [] for _, rate in _BUCKETS}}
    for i, (model, price) in enumerate(rows):
        later = rows[i + 1] if i + 1 < len(rows) and rows[i + 1][0] == model else None
        cols["model"].append(model)
        cols["since"].append(price.since or date.min)
        cols["until"].append(later[1].since if later else date.max - timedelta(days=1))
        cols["note"].append(price.note)
        for _, rate in _BUCKETS:
            cols[rate].append((getattr(price, rate) * _PER_TOKEN).quantize(Decimal(1).scaleb(-18)))
    types = {"since": pa.date32(), "until": pa.date32(), **{rate: _RATE_TYPE for _, rate in _BUCKETS}}
    return pa.table({k: pa.array(v, types.get(k, pa.string())) for k, v in cols.items()})


_COVERED = ("lower(u.model) = p.model AND u.date >= p.since AND u.date < p.until "
            f"AND u.cost_source IN ({', '.join(repr(s) for s in OVERRIDDEN)}) AND u.total_tokens IS NOT NULL")
_COST = "CAST(ROUND(" + " + ".join(f"CAST(COALESCE(u.{col}, 0) AS DECIMAL(38, 0)) * p.{rate}"
                                   for col, rate in _BUCKETS) + ", 9) AS DECIMAL(38, 9))"


def apply_prices(con, prices: Prices, scope: str) -> int:
    """Price the `usage` rows that `scope` (a filter on the table's own columns) selects and a
    configured price covers, then their sessions; returns the requests re-priced."""
    if not prices:
        return 0
    con.register("_price_windows", _windows(_with_grouped(con, prices, scope)))
    try:
        con.execute(f"""CREATE OR REPLACE TEMP TABLE _repriced AS
            SELECT u.machine, u."user", u.source_id, u.session_id,
                   {_COST} - COALESCE(CAST(u.cost_usd AS DECIMAL(38, 9)), 0) AS delta
            FROM (SELECT * FROM usage WHERE {scope}) AS u JOIN _price_windows AS p ON {_COVERED}""")
        count = con.execute("SELECT COUNT(*) FROM _repriced").fetchone()[0]
        if count:
            con.execute(f"""UPDATE usage AS u SET cost_usd = CAST({_COST} AS DOUBLE), cost_source = 'configured',
                                pricing_note = p.note
                            FROM _price_windows AS p WHERE {_COVERED} AND {scope}""")
            _reprice_sessions(con, scope)
        return count
    finally:
        con.unregister("_price_windows")
        con.execute("DROP TABLE IF EXISTS temp._repriced")


def _with_grouped(con, prices: Prices, scope: str) -> list[tuple[str, Price]]:
    """The prices by recorded name (and alias), plus the recorded names of the `scope`'s requests
    that are priced under the name they group under (`model_names.model_name`, what the report
    shows: `claude-sonnet-4-5` for `claude-sonnet-4-5-20250929`): a price copied from the report
    priced nothing (a new user's trial). A price for the recorded name itself comes first."""
    from transforms.pricing import model_name

    priced = prices.by_recorded_model()
    by_name: dict[str, list] = {}
    for name, price in priced:
        by_name.setdefault(name, []).append(price)
    recorded = con.execute(f"SELECT DISTINCT lower(model), llm_provider FROM usage WHERE {scope} AND model IS NOT NULL "
                           f"AND cost_source IN ({', '.join(repr(s) for s in OVERRIDDEN)})").fetchall()
    grouped = {}
    for model, provider in recorded:
        group = model_name(model, provider).lower()
        if model not in by_name and group in by_name:
            grouped[model] = by_name[group]
    return priced + [(model, price) for model, group_prices in grouped.items() for price in group_prices]


def _reprice_sessions(con, scope: str) -> None:
    """Each non-native session by what its requests' costs changed (a root's whole tree when its
    cost includes its sub-agents'); `partial` while one of them is still unpriced."""
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _session_costs AS
        WITH sessions_of AS (
            SELECT machine, "user", source_id, session_id, COALESCE(root_session_id, session_id) AS root_id,
                   is_root AND cost_includes_subagents AS whole_tree, cost_usd, cost_source
            FROM sessions WHERE {scope}
        ),
        requests AS (  -- the re-priced ones, and those still unpriced, each with its session's root
            SELECT r.machine, r."user", r.source_id, r.session_id, COALESCE(s.root_id, r.session_id) AS root_id,
                   r.delta, 0 AS unpriced, 1 AS repriced
            FROM _repriced AS r LEFT JOIN sessions_of AS s USING (machine, "user", source_id, session_id)
            UNION ALL
            SELECT u.machine, u."user", u.source_id, u.session_id, COALESCE(s.root_id, u.session_id), 0, 1, 0
            FROM (SELECT machine, "user", source_id, session_id FROM usage WHERE {scope} AND cost_source = 'unknown') AS u
            LEFT JOIN sessions_of AS s USING (machine, "user", source_id, session_id)
        )
        SELECT s.machine AS of_machine, s."user" AS of_user, s.source_id AS of_source, s.session_id AS of_session,
               CAST(COALESCE(CAST(s.cost_usd AS DECIMAL(38, 9)), 0) + SUM(r.delta) AS DOUBLE) AS new_cost,
               CASE WHEN SUM(r.unpriced) > 0 THEN 'partial' ELSE 'configured' END AS new_source
        FROM sessions_of AS s
        JOIN requests AS r ON r.machine = s.machine AND r."user" = s."user" AND r.source_id = s.source_id
         AND (r.session_id = s.session_id OR (s.whole_tree AND r.root_id = s.session_id))
        WHERE s.cost_source <> 'native'
        GROUP BY s.machine, s."user", s.source_id, s.session_id, s.cost_usd
        HAVING SUM(r.repriced) > 0""")
    # the scope's unqualified columns are the session's: _session_costs' are named apart
    con.execute(f"""UPDATE sessions SET cost_usd = c.new_cost, cost_source = c.new_source
                    FROM temp._session_costs AS c
                    WHERE {scope} AND machine = c.of_machine AND "user" = c.of_user AND source_id = c.of_source
                      AND session_id = c.of_session""")
    con.execute("DROP TABLE temp._session_costs")


def unmatched_prices(con, prices: Prices) -> list[str]:
    """A line for each configured model or alias that no request in `usage` names (a typo prices
    nothing, and would otherwise say nothing)."""
    if not prices:
        return []
    from transforms.pricing import model_name

    pairs = con.execute("SELECT DISTINCT lower(model), llm_provider FROM usage WHERE model IS NOT NULL").fetchall()
    # the names recorded, and the names they group under
    recorded = {m for m, _ in pairs} | {model_name(m, p).lower() for m, p in pairs}
    named = prices.by_recorded_model()
    # a priced model that requests reach through an alias only is used: its own name is no typo
    reached = {price.model.lower() for name, price in named if name in recorded}
    as_recorded = sorted({m for m, _ in pairs})

    def hint(name: str) -> str:  # `qwen3-coder-30b` for the recorded `qwen3-coder:30b` (a trial)
        close = difflib.get_close_matches(name, as_recorded, n=1, cutoff=0.8)
        return f"did you mean {close[0]!r}?" if close else "a typo?"

    return [f"config.toml prices the model {name!r}, which no request in `usage` names ({hint(name)} "
            "`agentlake sql \"SELECT DISTINCT model FROM usage\"` lists them)"
            for name in sorted({name for name, _ in named} - recorded - reached)]
