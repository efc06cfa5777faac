-- refresh: whole (rows are per model, across projects)
-- reads: _in_tree, usage, _message_models, daily_costs, model_names
-- model_usage: assistant messages, root sessions and cost per agent and model, one row per model.
-- A message counts under the model _message_models gives it: the model daily_costs puts its
-- cost on. The cost is what daily_costs attributes to the model (the two marts' totals
-- agree), and `unknown` joins its sources when one of its requests is unpriced. A model without
-- a share of daily_costs costs NULL (`unknown`) when one of its requests is unpriced or one of
-- its messages may have made an unrecorded one (no request names it, in a session whose
-- requests name no message), else a known 0: its messages made no billed request (Claude Code's
-- `<synthetic>` API-error replies, `estimated` as the ingest counts a session without one) or
-- its requests cost 0. `model_name`: the name the model groups under (model_names; the recorded
-- one where it has none).
CREATE OR REPLACE VIEW model_usage AS
WITH requests AS (
    SELECT u.provider, u.model, u.llm_provider, u.cost_usd, u.cost_source, u.root_session_key
    FROM _in_tree('usage') AS u
),
steps AS (  -- assistant messages per session and the model they count under (_message_models)
    SELECT m.provider, m.machine, m."user", m.source_id, m.session_id, m.root_session_key, m.holds, m.model, m.llm_provider,
           SUM(m.messages) AS messages
    FROM _in_tree('_message_models') AS m
    GROUP BY ALL
),
uses AS (  -- messages, and root sessions with a message or a request of the model
    SELECT provider, model, llm_provider,
           CAST(SUM(messages) AS BIGINT) AS messages,
           COUNT(DISTINCT root_session_key) AS sessions,
           -- a message no request names made none where its session's requests name some message;
           -- elsewhere it may have made one nobody recorded
           COALESCE(SUM(messages) FILTER (WHERE NOT holds AND NOT named), 0) AS unrecorded,
           COALESCE(SUM(messages) FILTER (WHERE NOT holds AND named), 0) AS unbilled,
           COUNT(*) FILTER (WHERE is_request AND cost_usd IS NULL) AS unpriced,
           STRING_AGG(DISTINCT cost_source, ', ' ORDER BY cost_source) AS request_sources
    FROM (SELECT provider, model, llm_provider, root_session_key, FALSE AS is_request, messages, holds,
                 BOOL_OR(holds) OVER (PARTITION BY machine, "user", source_id, session_id) AS named,
                 NULL AS cost_usd, NULL AS cost_source
          FROM steps
          UNION ALL
          SELECT provider, model, llm_provider, root_session_key, TRUE, 0, TRUE, TRUE, cost_usd, cost_source
          FROM requests)
    GROUP BY provider, model, llm_provider
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
    COALESCE(n.model_name, u.model, c.model) AS model_name,
    COALESCE(u.llm_provider, c.llm_provider) AS llm_provider,
    COALESCE(u.messages, 0) AS messages,
    COALESCE(u.sessions, 0) AS sessions,
    CASE WHEN c.provider IS NOT NULL THEN c.cost_usd
         WHEN u.unpriced = 0 AND u.unrecorded = 0 THEN CAST(0 AS DECIMAL(38, 9)) END AS cost_usd,
    CASE WHEN c.provider IS NOT NULL
         THEN CASE WHEN u.unpriced > 0 AND c.cost_sources NOT LIKE '%unknown%'
                   THEN c.cost_sources || ', unknown' ELSE c.cost_sources END
         WHEN u.unpriced > 0 OR u.unrecorded > 0 THEN 'unknown'
         ELSE concat_ws(', ', CASE WHEN u.unbilled > 0 AND COALESCE(u.request_sources, '') NOT LIKE '%estimated%'
                                   THEN 'estimated' END, u.request_sources) END AS cost_sources
FROM uses AS u
FULL OUTER JOIN costs AS c
    ON c.provider = u.provider AND c.model IS NOT DISTINCT FROM u.model
    AND c.llm_provider IS NOT DISTINCT FROM u.llm_provider
LEFT JOIN model_names AS n ON n.model = COALESCE(u.model, c.model)
    AND n.llm_provider IS NOT DISTINCT FROM COALESCE(u.llm_provider, c.llm_provider)
WHERE u.messages > 0 OR c.provider IS NOT NULL
