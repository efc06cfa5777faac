-- refresh: by project
-- reads: _file_calls
-- insight_duplicate_reads: per session and file, reads of a file the session had already read
-- (the same range) with no successful change of that file in between: the agent paid to put
-- the same content into its context again. Sessions are their own (a sub-agent's context is
-- not its caller's). The cost is that of the steps that made the duplicate reads, each step's
-- tokens and cost shared equally over its tool calls (see _step_costs: tokens only where the
-- agent records per-request usage).
CREATE OR REPLACE VIEW insight_duplicate_reads AS
WITH events AS (
    SELECT *,
           -- how many successful changes of the file came before: reads in one epoch saw one content
           SUM(CASE WHEN is_change THEN 1 ELSE 0 END) OVER (
               PARTITION BY project, session_key, path ORDER BY called_at, source_rowid, tool_call_id
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS epoch
    FROM _file_calls
    WHERE is_read OR is_change
),
reads AS (
    SELECT *,
           COALESCE(SUM(CASE WHEN is_good_read THEN 1 ELSE 0 END) OVER (
               PARTITION BY project, session_key, path, read_range, epoch ORDER BY called_at, source_rowid, tool_call_id
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) > 0 AS is_duplicate
    FROM events
    WHERE is_read
)
SELECT
    session_key,
    provider,
    project,
    machine,
    "user",
    source_id,
    session_id,
    path,
    COUNT(*) AS reads,
    COUNT(*) FILTER (WHERE is_duplicate) AS duplicate_reads,
    SUM(result_size) FILTER (WHERE is_duplicate) AS duplicate_result_bytes,
    SUM(step_tokens) FILTER (WHERE is_duplicate) AS duplicate_step_tokens,
    CASE WHEN COUNT(step_nanos) FILTER (WHERE is_duplicate) = COUNT(*) FILTER (WHERE is_duplicate)  -- never partial
         THEN CAST(ROUND(SUM(step_nanos) FILTER (WHERE is_duplicate)) AS DECIMAL(38, 0)) * CAST(0.000000001 AS DECIMAL(18, 9))
    END AS duplicate_cost_usd
FROM reads
GROUP BY ALL
HAVING COUNT(*) FILTER (WHERE is_duplicate) > 0
