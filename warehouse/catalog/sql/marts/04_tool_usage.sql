-- refresh: by project
-- reads: tool_calls
-- tool_usage: calls and failures per day, project, machine, user and tool (a team lead's
-- filters by person: report --user, the dashboard's ?user= and ?machine=, MCP's usage_report).
-- errors: the tool itself failed (is_error); nonzero_exits: a shell command exited non-zero,
-- which the agent does not count as an error; failed: either, a call that did both counted once.
CREATE OR REPLACE VIEW tool_usage AS
SELECT
    date,
    provider,
    project,
    machine,
    "user",
    tool_name,
    tool_category,
    COUNT(*) AS calls,
    COUNT(*) FILTER (WHERE is_error) AS errors,
    COUNT(*) FILTER (WHERE is_error) / COUNT(*) AS error_rate,
    COUNT(*) FILTER (WHERE exit_code <> 0) AS nonzero_exits,
    COUNT(*) FILTER (WHERE is_error OR exit_code <> 0) AS failed,
    COUNT(*) FILTER (WHERE NOT has_result) AS without_result,
    MEDIAN(result_size) AS median_result_bytes
FROM tool_calls
WHERE has_call
GROUP BY ALL
