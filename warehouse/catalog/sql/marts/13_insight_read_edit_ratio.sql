-- refresh: by project
-- reads: _file_calls, model_names
-- insight_read_edit_ratio: per root session (its sub-agents folded in) and model (of the step
-- that made the call, as _step_models gives it), file reads against successful changes. A
-- low ratio is editing without looking; reads without any change show a NULL ratio.
-- `model_name`: the name the model groups under (model_names; the recorded one where it has none,
-- NULL where no model is recorded), as the report groups by it.
CREATE OR REPLACE VIEW insight_read_edit_ratio AS
SELECT
    f.root_session_key AS session_key,
    ANY_VALUE(f.provider) AS provider,
    f.project,
    ANY_VALUE(f.machine) AS machine,
    ANY_VALUE(f."user") AS "user",
    ANY_VALUE(f.source_id) AS source_id,
    ANY_VALUE(f.root_session_id) AS session_id,
    f.model,
    COALESCE(n.model_name, f.model) AS model_name,
    COUNT(*) FILTER (WHERE f.is_read) AS reads,
    COUNT(*) FILTER (WHERE f.is_change) AS changes,
    CASE WHEN COUNT(*) FILTER (WHERE f.is_change) > 0
         THEN COUNT(*) FILTER (WHERE f.is_read) / COUNT(*) FILTER (WHERE f.is_change) END AS read_edit_ratio
FROM _file_calls AS f
LEFT JOIN model_names AS n ON n.model = f.model AND n.llm_provider IS NOT DISTINCT FROM f.llm_provider
WHERE f.is_read OR f.is_change
GROUP BY f.project, f.root_session_key, f.model, COALESCE(n.model_name, f.model)
