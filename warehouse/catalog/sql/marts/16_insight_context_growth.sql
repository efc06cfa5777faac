-- refresh: by project
-- reads: _in_tree, usage, messages, _step_costs
-- insight_context_growth: per session (a sub-agent is its own), how its context grows and what
-- it cost after its first compaction. A request's context is its input: uncached input, cache
-- reads and cache writes (per-request usage: Claude Code, Codex, OpenCode). Growth is
-- (last - first) / (requests - 1) tokens per request. A compaction is a summary message
-- (`is_summary`, every agent that records one); the cost after it is that of the session's
-- steps after the first summary message (see _step_costs). The session's cost is that of its
-- requests where it has any (a session whose requests no message holds, or without assistant
-- messages at all, still counts them; NULL when one is unpriced), else of its steps. Sessions
-- with neither requests nor a compaction have no row.
CREATE OR REPLACE VIEW insight_context_growth AS
WITH requests AS (
    SELECT u.project, u.session_key, ANY_VALUE(u.provider) AS provider,
           ANY_VALUE(u.machine) AS machine, ANY_VALUE(u."user") AS "user", ANY_VALUE(u.source_id) AS source_id,
           ANY_VALUE(u.session_id) AS session_id,
           COUNT(*) AS requests,
           FIRST(ctx ORDER BY u.requested_at, u.source_rowid) AS first_context_tokens,
           LAST(ctx ORDER BY u.requested_at, u.source_rowid) AS last_context_tokens,
           MAX(ctx) AS max_context_tokens,
           SUM(CAST(ROUND(u.cost_usd * 1e9) AS HUGEINT)) AS nanos,
           COUNT(*) FILTER (WHERE u.cost_usd IS NULL) AS unpriced
    FROM (SELECT *, COALESCE(input_uncached_tokens, 0) + COALESCE(cache_read_tokens, 0)
                    + COALESCE(cache_write_5m_tokens, 0) + COALESCE(cache_write_1h_tokens, 0) AS ctx
          FROM _in_tree('usage')) AS u
    GROUP BY u.project, u.session_key
),
summaries AS (
    SELECT m.project, m.session_key, ANY_VALUE(m.provider) AS provider,
           ANY_VALUE(m.machine) AS machine, ANY_VALUE(m."user") AS "user", ANY_VALUE(m.source_id) AS source_id,
           ANY_VALUE(m.session_id) AS session_id,
           COUNT(*) AS compactions, MIN(m.created_at) AS first_compaction_at, MIN(m.message_index) AS first_index
    FROM _in_tree('messages') AS m
    WHERE m.is_summary
    GROUP BY m.project, m.session_key
),
steps AS (
    SELECT s.session_key, SUM(s.nanos) AS nanos, SUM(s.nanos) FILTER (WHERE s.message_index > c.first_index) AS after,
           COUNT(*) = COUNT(s.nanos) AS known
    FROM _step_costs AS s
    LEFT JOIN summaries AS c ON c.session_key = s.session_key
    GROUP BY s.session_key
)
SELECT
    COALESCE(r.session_key, c.session_key) AS session_key,
    COALESCE(r.provider, c.provider) AS provider,
    COALESCE(r.project, c.project) AS project,
    COALESCE(r.machine, c.machine) AS machine,
    COALESCE(r."user", c."user") AS "user",
    COALESCE(r.source_id, c.source_id) AS source_id,
    COALESCE(r.session_id, c.session_id) AS session_id,
    COALESCE(r.requests, 0) AS requests,
    r.first_context_tokens,
    r.last_context_tokens,
    r.max_context_tokens,
    CASE WHEN r.requests > 1 THEN (r.last_context_tokens - r.first_context_tokens) / (r.requests - 1) END
        AS growth_per_request,
    COALESCE(c.compactions, 0) AS compactions,
    c.first_compaction_at,
    CASE WHEN r.session_key IS NOT NULL
         THEN CASE WHEN r.unpriced = 0 THEN CAST(r.nanos AS DECIMAL(38, 0)) * CAST(0.000000001 AS DECIMAL(18, 9)) END
         WHEN st.known THEN CAST(st.nanos AS DECIMAL(38, 0)) * CAST(0.000000001 AS DECIMAL(18, 9)) END AS cost_usd,
    CASE WHEN st.known AND c.session_key IS NOT NULL
         THEN CAST(COALESCE(st.after, 0) AS DECIMAL(38, 0)) * CAST(0.000000001 AS DECIMAL(18, 9))
    END AS cost_after_compaction_usd
FROM requests AS r
FULL OUTER JOIN summaries AS c ON c.session_key = r.session_key
LEFT JOIN steps AS st ON st.session_key = COALESCE(r.session_key, c.session_key)
