-- refresh: by project
-- reads: _file_calls, _in_tree, file_versions, session_summary
-- insight_idle_cost: root sessions that cost money (cost_usd > 0; an unknown cost is not
-- counted) and changed no file: no successful edit or write and no file history snapshot, in
-- the session or its sub-agents. Files a shell command changed are not seen.
CREATE OR REPLACE VIEW insight_idle_cost AS
WITH changed AS (
    SELECT root_session_key FROM _file_calls WHERE is_change
    UNION
    SELECT v.root_session_key
    FROM _in_tree('file_versions') AS v
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
    s.assistant_messages,
    s.tool_calls,
    s.cost_usd,
    s.cost_source
FROM session_summary AS s
LEFT JOIN changed AS c ON c.root_session_key = s.session_key
WHERE s.cost_usd > 0 AND c.root_session_key IS NULL
