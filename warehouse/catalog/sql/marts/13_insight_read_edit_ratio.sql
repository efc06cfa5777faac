-- refresh: by project
-- reads: _file_calls
-- insight_read_edit_ratio: per root session (its sub-agents folded in) and model (of the step
-- that made the call), file reads against successful changes. A low ratio is editing without
-- looking; reads without any change show a NULL ratio.
CREATE OR REPLACE VIEW insight_read_edit_ratio AS
SELECT
    root_session_key AS session_key,
    ANY_VALUE(provider) AS provider,
    project,
    ANY_VALUE(machine) AS machine,
    ANY_VALUE("user") AS "user",
    ANY_VALUE(source_id) AS source_id,
    ANY_VALUE(root_session_id) AS session_id,
    model,
    COUNT(*) FILTER (WHERE is_read) AS reads,
    COUNT(*) FILTER (WHERE is_change) AS changes,
    CASE WHEN COUNT(*) FILTER (WHERE is_change) > 0
         THEN COUNT(*) FILTER (WHERE is_read) / COUNT(*) FILTER (WHERE is_change) END AS read_edit_ratio
FROM _file_calls
WHERE is_read OR is_change
GROUP BY project, root_session_key, model
