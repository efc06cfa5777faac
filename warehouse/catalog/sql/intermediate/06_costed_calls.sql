-- reads: _in_tree, tool_calls, _step_costs
-- _costed_calls(): every tool call (has_call) in its session's tree (see _in_tree), with the
-- model and llm_provider of the step (assistant message) that made it and the step's share: its
-- tokens and cost (see _step_costs) over its calls. A table macro: the building blocks and marts
-- that read it filter the calls they want, and the filter reaches the scan.
CREATE OR REPLACE MACRO _costed_calls() AS TABLE
SELECT
    c.*,
    s.model AS step_model,
    s.llm_provider AS step_llm_provider,
    s.tokens / GREATEST(s.tool_calls, 1) AS step_tokens,
    s.nanos / GREATEST(s.tool_calls, 1) AS step_nanos
FROM _in_tree('tool_calls') AS c
LEFT JOIN _step_costs AS s ON s.session_key = c.session_key
    AND s.message_id = c.message_id
WHERE c.has_call
