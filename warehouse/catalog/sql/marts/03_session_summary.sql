-- refresh: by project
-- reads: _in_tree, messages, tool_calls, _session_tree, sessions
-- session_summary: one row per root session, its sub-agents folded in; session_key names it
-- lake-wide (see _session_tree). Its cost is a DECIMAL, as every mart's money: the DOUBLE the
-- agent recorded, taken to the nano-dollar (as daily_costs takes it), so that sums are exact.
CREATE OR REPLACE VIEW session_summary AS
WITH tree_messages AS (
    SELECT m.root_session_key, m.created_at, m.finished_at, m.role, m.model, m.message_id
    FROM _in_tree('messages') AS m
),
message_stats AS (
    SELECT root_session_key,
           COUNT(*) AS messages,
           COUNT(*) FILTER (WHERE role = 'assistant') AS assistant_messages,
           MIN(created_at) AS first_message_at,
           GREATEST(MAX(created_at), MAX(finished_at)) AS last_message_at
    FROM tree_messages
    GROUP BY ALL
),
-- the distinct models first: an aggregate with ORDER BY keeps every input row of its group in
-- memory, which a team's history (14.6M messages) did not fit in 512 MB (tried)
tree_models AS (
    SELECT root_session_key, STRING_AGG(model, ', ' ORDER BY model) AS models
    FROM (SELECT DISTINCT root_session_key, model FROM tree_messages WHERE model IS NOT NULL)
    GROUP BY ALL
),
tool_stats AS (
    SELECT c.root_session_key,
           COUNT(*) FILTER (WHERE c.has_call) AS tool_calls,
           COUNT(*) FILTER (WHERE c.has_call AND c.is_error) AS tool_errors,
           COUNT(*) FILTER (WHERE c.has_call AND c.exit_code <> 0) AS nonzero_exits,
           COUNT(*) FILTER (WHERE c.has_call AND (c.is_error OR c.exit_code <> 0)) AS failed_tool_calls
    FROM _in_tree('tool_calls') AS c
    GROUP BY ALL
),
subagents AS (
    SELECT root_session_key, COUNT(*) AS subagents
    FROM _session_tree
    WHERE NOT is_root
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
    s.created_at AS started_at,
    GREATEST(s.updated_at, ms.last_message_at) AS ended_at,
    date_diff('second', s.created_at, GREATEST(s.updated_at, ms.last_message_at)) AS duration_s,
    COALESCE(ms.messages, 0) AS messages,
    COALESCE(ms.assistant_messages, 0) AS assistant_messages,
    COALESCE(ts.tool_calls, 0) AS tool_calls,
    COALESCE(ts.tool_errors, 0) AS tool_errors,
    COALESCE(ts.nonzero_exits, 0) AS nonzero_exits,
    COALESCE(ts.failed_tool_calls, 0) AS failed_tool_calls,
    COALESCE(tm.models, s.model) AS models,
    CAST(s.cost_usd AS DECIMAL(38, 9)) AS cost_usd,
    s.cost_source,
    COALESCE(sa.subagents, 0) AS subagents,
    s.forked_from_session_id
FROM _in_tree('sessions') AS s
LEFT JOIN message_stats AS ms ON ms.root_session_key = s.session_key
LEFT JOIN tree_models AS tm ON tm.root_session_key = s.session_key
LEFT JOIN tool_stats AS ts ON ts.root_session_key = s.session_key
LEFT JOIN subagents AS sa ON sa.root_session_key = s.session_key
WHERE s.is_root
