-- refresh: whole (a block spans projects)
-- reads: _in_tree, usage
-- insight_usage_blocks: Claude Code's 5-hour usage blocks per user, by ccusage's `blocks` rule:
-- requests in time order; a block starts at the hour (UTC) of its first request, and a request
-- more than 5 hours after its block's start (so also one after a gap of more than 5 hours)
-- starts a new one. Every Claude request counts, sub-agents' too. ccusage's gap rows (no
-- requests) and its "active" flag (relative to now) are not rows here.
CREATE OR REPLACE VIEW insight_usage_blocks AS
WITH RECURSIVE requests AS (
    SELECT u.*
    FROM _in_tree('usage') AS u
    WHERE u.provider = 'claude' AND u.requested_at IS NOT NULL
),
times AS (
    -- a request more than 5 hours after the one before always starts a block (its block's start
    -- is at or before that one): it seeds a run, and only blocks within a run need walking
    SELECT *, SUM(CASE WHEN is_seed THEN 1 ELSE 0 END) OVER (PARTITION BY "user" ORDER BY ts
                                                           ROWS UNBOUNDED PRECEDING) AS run
    FROM (
        SELECT "user", ts,
               COALESCE(ts - LAG(ts) OVER (PARTITION BY "user" ORDER BY ts) > INTERVAL 5 HOUR, TRUE) AS is_seed
        FROM (SELECT DISTINCT "user", requested_at AS ts FROM requests)
    )
),
successor AS (
    -- for every request time of a run: the first request time of the run after the end of a
    -- block it would start. Block ends and request times in one ordered stream (a time before an
    -- end at a tie: only a request strictly past the end starts the next block), each end
    -- looking ahead.
    SELECT "user", run, ts, next_ts
    FROM (
        SELECT "user", run, ts, is_end,
               MIN(CASE WHEN NOT is_end THEN point END) OVER (
                   PARTITION BY "user", run ORDER BY point, is_end
                   ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS next_ts
        FROM (
            SELECT "user", run, ts, ts AS point, FALSE AS is_end FROM times
            UNION ALL
            SELECT "user", run, ts, date_trunc('hour', ts) + INTERVAL 5 HOUR AS point, TRUE AS is_end FROM times
        )
    )
    WHERE is_end
),
starts AS (
    -- the first request time of each block: each run's first, then each block's successor
    SELECT "user", run, ts FROM times WHERE is_seed
    UNION ALL
    SELECT s."user", s.run, s.next_ts
    FROM starts AS p
    JOIN successor AS s ON s."user" = p."user" AND s.run = p.run AND s.ts = p.ts
    WHERE s.next_ts IS NOT NULL
),
assigned AS MATERIALIZED (
    -- each request in the block of the latest start at or before it (starts sort first at a tie)
    SELECT *
    FROM (
        SELECT r.*, MAX(r.start_ts) OVER (PARTITION BY r."user" ORDER BY r.requested_at, r.is_request
                                          ROWS UNBOUNDED PRECEDING) AS block_first_at
        FROM (
            SELECT *, NULL::TIMESTAMP AS start_ts, TRUE AS is_request FROM requests
            UNION ALL BY NAME
            SELECT "user", ts AS requested_at, ts AS start_ts, FALSE AS is_request FROM starts
        ) AS r
    )
    WHERE is_request
),
-- a block's distinct sessions and models are found apart, from distinct rows: an aggregate with
-- DISTINCT keeps every request of its group in memory (30M requests in 359k groups did not fit
-- 200 MB; from distinct rows, they did)
block_sessions AS (
    SELECT "user", block_first_at, COUNT(*) AS sessions
    FROM (SELECT DISTINCT "user", block_first_at, session_key FROM assigned WHERE session_key IS NOT NULL)
    GROUP BY ALL
),
block_models AS (
    SELECT "user", block_first_at, STRING_AGG(model, ', ' ORDER BY model) AS models
    FROM (SELECT DISTINCT "user", block_first_at, model FROM assigned WHERE model IS NOT NULL)
    GROUP BY ALL
),
blocks AS (
    SELECT
        "user",
        block_first_at,
        MIN(requested_at) AS first_request_at,
        MAX(requested_at) AS last_request_at,
        COUNT(*) AS requests,
        SUM(input_uncached_tokens) AS input_uncached_tokens,
        SUM(cache_read_tokens) AS cache_read_tokens,
        SUM(COALESCE(cache_write_5m_tokens, 0) + COALESCE(cache_write_1h_tokens, 0)) AS cache_write_tokens,
        SUM(output_tokens) AS output_tokens,
        SUM(total_tokens) AS total_tokens,
        CAST(SUM(CAST(ROUND(cost_usd * 1e9) AS HUGEINT)) AS DECIMAL(38, 0)) * CAST(0.000000001 AS DECIMAL(18, 9)) AS cost_usd,
        COUNT(*) FILTER (WHERE cost_usd IS NULL) AS unpriced_requests
    FROM assigned
    GROUP BY "user", block_first_at
)
SELECT
    b."user",
    date_trunc('hour', b.block_first_at) AS block_start,
    date_trunc('hour', b.block_first_at) + INTERVAL 5 HOUR AS block_end,
    b.first_request_at,
    b.last_request_at,
    b.requests,
    COALESCE(s.sessions, 0) AS sessions,
    b.input_uncached_tokens,
    b.cache_read_tokens,
    b.cache_write_tokens,
    b.output_tokens,
    b.total_tokens,
    b.cost_usd,
    b.unpriced_requests,
    m.models
FROM blocks AS b
LEFT JOIN block_sessions AS s ON s."user" IS NOT DISTINCT FROM b."user" AND s.block_first_at = b.block_first_at
LEFT JOIN block_models AS m ON m."user" IS NOT DISTINCT FROM b."user" AND m.block_first_at = b.block_first_at
