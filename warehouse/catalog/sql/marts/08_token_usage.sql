-- refresh: by project
-- reads: usage, model_names
-- token_usage: tokens in disjoint buckets and their cost, per day, agent, project, person and
-- model, from the per-request `usage` table (agents that record per-request usage: Claude Code,
-- Codex, OpenCode). Sums of null buckets stay null: an agent that does not record a bucket shows
-- no number for it, never 0. Costs are summed exactly (in nano-dollars). `model_name`: the name
-- the model groups under (model_names; the recorded one where it has none). `cache_requests` and
-- `cache_input_tokens`: the requests that record a cache bucket, and all their input, as
-- insight_cache_efficiency takes them: a group's cache share is cache_read_tokens of
-- cache_input_tokens (a group's other requests record no cache: they have no share).
CREATE OR REPLACE VIEW token_usage AS
-- by cost source first, then per group: an aggregate with DISTINCT and ORDER BY keeps every
-- request of its group in memory (30M requests in 359k groups did not fit 200 MB; this did)
WITH by_source AS (
    SELECT
        date, provider, project, machine, "user", model, llm_provider, cost_source,
        COUNT(*) AS requests,
        SUM(input_uncached_tokens) AS input_uncached_tokens,
        SUM(cache_read_tokens) AS cache_read_tokens,
        SUM(cache_write_5m_tokens) AS cache_write_5m_tokens,
        SUM(cache_write_1h_tokens) AS cache_write_1h_tokens,
        SUM(output_tokens) AS output_tokens,
        SUM(reasoning_tokens) AS reasoning_tokens,
        SUM(total_tokens) AS total_tokens,
        SUM(CAST(ROUND(cost_usd * 1e9) AS HUGEINT)) AS cost_nanos,
        COUNT(*) FILTER (WHERE cost_usd IS NULL) AS unpriced_requests,
        COUNT(*) FILTER (WHERE cached) AS cache_requests,
        SUM(COALESCE(input_uncached_tokens, 0) + COALESCE(cache_read_tokens, 0) + COALESCE(cache_write_5m_tokens, 0)
            + COALESCE(cache_write_1h_tokens, 0)) FILTER (WHERE cached) AS cache_input_tokens
    FROM (SELECT *, cache_read_tokens IS NOT NULL OR cache_write_5m_tokens IS NOT NULL
                    OR cache_write_1h_tokens IS NOT NULL AS cached FROM usage)
    GROUP BY ALL
)
SELECT
    date,
    provider,
    project,
    machine,
    "user",
    b.model,
    COALESCE(n.model_name, b.model) AS model_name,
    b.llm_provider,
    CAST(SUM(requests) AS BIGINT) AS requests,
    SUM(input_uncached_tokens) AS input_uncached_tokens,
    SUM(cache_read_tokens) AS cache_read_tokens,
    SUM(cache_write_5m_tokens) AS cache_write_5m_tokens,
    SUM(cache_write_1h_tokens) AS cache_write_1h_tokens,
    SUM(output_tokens) AS output_tokens,
    SUM(reasoning_tokens) AS reasoning_tokens,
    SUM(total_tokens) AS total_tokens,
    CAST(SUM(cost_nanos) AS DECIMAL(38, 0)) * CAST(0.000000001 AS DECIMAL(18, 9)) AS cost_usd,
    CAST(SUM(unpriced_requests) AS BIGINT) AS unpriced_requests,
    STRING_AGG(cost_source, ', ' ORDER BY cost_source) AS cost_sources,
    CAST(SUM(cache_requests) AS BIGINT) AS cache_requests,
    SUM(cache_input_tokens) AS cache_input_tokens
FROM by_source AS b
LEFT JOIN model_names AS n ON n.model = b.model AND n.llm_provider IS NOT DISTINCT FROM b.llm_provider
GROUP BY date, provider, project, machine, "user", b.model, n.model_name, b.llm_provider
