-- refresh: by project
-- reads: _in_tree, usage, model_names
-- insight_cache_efficiency: per session (a sub-agent is its own) and model, where the agent
-- records cache buckets: the share of the input read from the cache, and cache writes never
-- read back. A request's cache write is read back when a later request of the same session and
-- model reads the cache within the write's TTL (5 minutes, or 1 hour for 1-hour writes).
-- `model_name`: the name the model groups under (model_names; the recorded one where it has none).
CREATE OR REPLACE VIEW insight_cache_efficiency AS
WITH requests AS (
    SELECT u.*, COALESCE(n.model_name, u.model) AS model_name,
           MIN(CASE WHEN u.cache_read_tokens > 0 THEN u.requested_at END) OVER (
               PARTITION BY u.project, u.session_key, u.model ORDER BY u.requested_at, u.source_rowid
               ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS next_read_at
    FROM _in_tree('usage') AS u
    LEFT JOIN model_names AS n ON n.model = u.model AND n.llm_provider IS NOT DISTINCT FROM u.llm_provider
    WHERE u.cache_read_tokens IS NOT NULL OR u.cache_write_5m_tokens IS NOT NULL OR u.cache_write_1h_tokens IS NOT NULL
)
SELECT
    session_key,
    provider,
    project,
    machine,
    "user",
    source_id,
    session_id,
    model,
    model_name,
    COUNT(*) AS requests,
    SUM(COALESCE(input_uncached_tokens, 0) + COALESCE(cache_read_tokens, 0) + COALESCE(cache_write_5m_tokens, 0)
        + COALESCE(cache_write_1h_tokens, 0)) AS input_tokens,
    SUM(COALESCE(cache_read_tokens, 0)) AS cache_read_tokens,
    SUM(COALESCE(cache_write_5m_tokens, 0) + COALESCE(cache_write_1h_tokens, 0)) AS cache_write_tokens,
    SUM(COALESCE(cache_read_tokens, 0))
        / NULLIF(SUM(COALESCE(input_uncached_tokens, 0) + COALESCE(cache_read_tokens, 0)
                     + COALESCE(cache_write_5m_tokens, 0) + COALESCE(cache_write_1h_tokens, 0)), 0) AS cache_read_share,
    SUM(CASE WHEN next_read_at IS NULL OR next_read_at > requested_at + INTERVAL 5 MINUTE
             THEN COALESCE(cache_write_5m_tokens, 0) ELSE 0 END
        + CASE WHEN next_read_at IS NULL OR next_read_at > requested_at + INTERVAL 1 HOUR
               THEN COALESCE(cache_write_1h_tokens, 0) ELSE 0 END) AS unread_write_tokens
FROM requests
GROUP BY session_key, provider, project, machine, "user", source_id, session_id, model, model_name
