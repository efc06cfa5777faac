-- refresh: whole (rows are per model, across projects)
-- model_usage: assistant messages and sessions per model, with the cost daily_costs attributes
-- to it (NULL where the cost is unknown).
CREATE OR REPLACE VIEW model_usage AS
WITH usage AS (
    SELECT m.provider, m.model, m.llm_provider,
           COUNT(*) AS messages,
           COUNT(DISTINCT t.root_session_key) AS sessions
    FROM messages AS m
    JOIN _session_tree AS t ON t.machine = m.machine AND t.source_id = m.source_id AND t.session_id = m.session_id
    WHERE m.role = 'assistant'
    GROUP BY ALL
),
costs AS (
    SELECT provider, model, llm_provider, SUM(cost_usd) AS cost_usd,
           STRING_AGG(DISTINCT cost_source, ', ' ORDER BY cost_source) AS cost_sources
    FROM daily_costs
    GROUP BY ALL
)
SELECT
    COALESCE(u.provider, c.provider) AS provider,
    COALESCE(u.model, c.model) AS model,
    COALESCE(u.llm_provider, c.llm_provider) AS llm_provider,
    COALESCE(u.messages, 0) AS messages,
    COALESCE(u.sessions, 0) AS sessions,
    c.cost_usd,
    c.cost_sources
FROM usage AS u
FULL OUTER JOIN costs AS c
    ON c.provider = u.provider AND c.model IS NOT DISTINCT FROM u.model
    AND c.llm_provider IS NOT DISTINCT FROM u.llm_provider
