-- refresh: by project
-- reads: _costed_calls, _listings
-- _file_calls: tool calls naming a file, with the path resolved against the project directory
-- (as file_activity does) and the step's cost share. Internal building block of the insights.
-- A read is a read-category call that is not a folder's listing (_listings); a change is an edit- or
-- write-category call with a result that is not an error (a failed edit changed nothing); a
-- null is_error is no error: Codex, Cursor, Aider and Codebuff flag only what failed.
-- read_range tells partial reads apart (offset:limit, empty for a whole file).
-- model, llm_provider: the step's (see _step_costs).
CREATE OR REPLACE VIEW _file_calls AS
SELECT
    c.provider, c.project, c.machine, c."user", c.source_id, c.session_id, c.project_path,
    c.session_key, c.root_session_key, c.root_session_id,
    c.message_id, c.tool_call_id, c.tool_name, c.tool_category, c.called_at, c.source_rowid, c.result_size,
    CASE WHEN c.file_path LIKE '/%' OR c.project_path = '' THEN c.file_path
         ELSE c.project_path || '/' || c.file_path END AS path,
    c.tool_category = 'read' AND l.tool_name IS NULL AS is_read,
    c.tool_category = 'read' AND l.tool_name IS NULL AND c.has_result AND c.is_error IS NOT TRUE AS is_good_read,
    c.tool_category IN ('edit', 'write') AND c.has_result AND c.is_error IS NOT TRUE AS is_change,
    concat_ws(':', json_extract_string(c.input, '$.offset'), json_extract_string(c.input, '$.limit')) AS read_range,
    c.step_model AS model,
    c.step_llm_provider AS llm_provider,
    c.step_tokens,
    c.step_nanos
FROM _costed_calls() AS c
LEFT JOIN _listings() AS l ON l.tool_name = lower(regexp_replace(c.tool_name, '^.*?__', ''))
WHERE c.file_path IS NOT NULL
