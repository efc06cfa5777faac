-- refresh: by project
-- reads: _file_calls, _in_tree, file_versions, messages, sessions, session_summary, model_names
-- insight_idle_cost: root sessions that cost money (cost_usd > 0; an unknown cost is not
-- counted) and changed no file: no successful edit or write and no file history snapshot, in
-- the session or its sub-agents. Files a shell command changed are not seen. `model_names`: the
-- names `models` group under (model_names), comma-separated, as the report groups models; NULL
-- where `models` is (no model recorded).
CREATE OR REPLACE VIEW insight_idle_cost AS
WITH changed AS (
    SELECT root_session_key FROM _file_calls WHERE is_change
    UNION
    SELECT v.root_session_key
    FROM _in_tree('file_versions') AS v
),
-- the models session_summary.models lists (its tree's messages', else the root's own), with
-- their LLM provider, which the name depends on
recorded AS (
    SELECT DISTINCT m.root_session_key, m.model, m.llm_provider
    FROM _in_tree('messages') AS m
    WHERE m.model IS NOT NULL
),
root_model AS (
    SELECT r.session_key AS root_session_key, r.model, r.llm_provider
    FROM _in_tree('sessions') AS r
    WHERE r.is_root AND r.model IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM recorded AS d WHERE d.root_session_key = r.session_key)
),
named AS (  -- the distinct names first (as session_summary does: an ordered aggregate keeps its rows)
    SELECT root_session_key, STRING_AGG(model_name, ', ' ORDER BY model_name) AS model_names
    FROM (SELECT DISTINCT t.root_session_key, COALESCE(n.model_name, t.model) AS model_name
          FROM (SELECT * FROM recorded UNION ALL SELECT * FROM root_model) AS t
          LEFT JOIN model_names AS n ON n.model = t.model AND n.llm_provider IS NOT DISTINCT FROM t.llm_provider)
    GROUP BY ALL
)
SELECT
    s.session_key,
    s.provider,
    s.project,
    s.machine,
    s."user",
    s.source_id,
    s.session_id,
    s.title,
    s.started_at,
    s.models,
    nm.model_names,
    s.assistant_messages,
    s.tool_calls,
    s.cost_usd,
    s.cost_source
FROM session_summary AS s
LEFT JOIN changed AS c ON c.root_session_key = s.session_key
LEFT JOIN named AS nm ON nm.root_session_key = s.session_key
WHERE s.cost_usd > 0 AND c.root_session_key IS NULL
