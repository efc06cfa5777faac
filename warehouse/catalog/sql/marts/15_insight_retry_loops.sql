-- refresh: by project
-- reads: _costed_calls
-- insight_retry_loops: one row per loop: the same shell command failing (tool error or non-zero
-- exit) at least 3 times running in a session with no success of it in between (kind
-- 'shell_command'), or the same non-shell tool erroring at least 3 times running (kind
-- 'tool_error'). Calls without a result (interrupted) are left out of the sequence. The cost is
-- that of the steps that made the failing calls (shares as in insight_duplicate_reads).
CREATE OR REPLACE VIEW insight_retry_loops AS
WITH calls AS (
    SELECT c.provider, c.project, c.machine, c."user", c.source_id, c.session_id, c.session_key,
           c.tool_name, c.called_at, c.source_rowid, c.tool_call_id,
           CASE WHEN c.tool_category = 'shell' THEN 'shell_command' ELSE 'tool_error' END AS kind,
           CASE WHEN c.tool_category = 'shell' THEN c.command END AS command,
           CASE WHEN c.tool_category = 'shell' THEN COALESCE(c.is_error OR c.exit_code <> 0, FALSE)
                ELSE COALESCE(c.is_error, FALSE) END AS failed,
           c.step_tokens,
           c.step_nanos
    FROM _costed_calls() AS c
    WHERE c.has_result AND (c.tool_category <> 'shell' OR c.command IS NOT NULL)
),
islands AS (
    -- gaps and islands: within one (session, kind, tool, command) sequence, consecutive
    -- failures share this difference
    SELECT *,
           ROW_NUMBER() OVER (PARTITION BY project, session_key, kind, tool_name, command
                              ORDER BY called_at, source_rowid, tool_call_id)
         - ROW_NUMBER() OVER (PARTITION BY project, session_key, kind, tool_name, command, failed
                              ORDER BY called_at, source_rowid, tool_call_id) AS island
    FROM calls
)
SELECT
    session_key,
    provider,
    project,
    machine,
    "user",
    source_id,
    session_id,
    kind,
    tool_name,
    command,
    COUNT(*) AS failures,
    MIN(called_at) AS first_at,
    MAX(called_at) AS last_at,
    SUM(step_tokens) AS step_tokens,
    CASE WHEN COUNT(step_nanos) = COUNT(*)  -- never partial
         THEN CAST(ROUND(SUM(step_nanos)) AS DECIMAL(38, 0)) * CAST(0.000000001 AS DECIMAL(18, 9)) END AS cost_usd
FROM islands
WHERE failed
GROUP BY session_key, provider, project, machine, "user", source_id, session_id, kind, tool_name, command, island
HAVING COUNT(*) >= 3
