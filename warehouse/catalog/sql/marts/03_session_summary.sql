-- refresh: by project
-- session_summary: one row per root session, its sub-agents folded in; session_key names it
-- lake-wide (see _session_tree).
CREATE OR REPLACE VIEW session_summary AS
WITH tree_messages AS (
    SELECT t.root_session_key, m.created_at, m.finished_at, m.role, m.model, m.message_id
    FROM messages AS m
    JOIN _session_tree AS t ON t.machine = m.machine AND t.source_id = m.source_id AND t.session_id = m.session_id
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
    SELECT t.root_session_key,
           COUNT(*) FILTER (WHERE c.has_call) AS tool_calls,
           COUNT(*) FILTER (WHERE c.has_call AND c.is_error) AS tool_errors,
           COUNT(*) FILTER (WHERE c.has_call AND c.exit_code <> 0) AS nonzero_exits,
           COUNT(*) FILTER (WHERE c.has_call AND (c.is_error OR c.exit_code <> 0)) AS failed_tool_calls
    FROM tool_calls AS c
    JOIN _session_tree AS t ON t.machine = c.machine AND t.source_id = c.source_id AND t.session_id = c.session_id
    GROUP BY ALL
),
subagents AS (
    SELECT root_session_key, COUNT(*) AS subagents
    FROM _session_tree
    WHERE NOT is_root
    GROUP BY ALL
)
SELECT
    k.session_key,
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
    s.cost_usd,
    s.cost_source,
    COALESCE(sa.subagents, 0) AS subagents,
    s.forked_from_session_id
FROM sessions AS s
JOIN _session_tree AS k ON k.machine = s.machine AND k.source_id = s.source_id AND k.session_id = s.session_id
LEFT JOIN message_stats AS ms ON ms.root_session_key = k.session_key
LEFT JOIN tree_models AS tm ON tm.root_session_key = k.session_key
LEFT JOIN tool_stats AS ts ON ts.root_session_key = k.session_key
LEFT JOIN subagents AS sa ON sa.root_session_key = k.session_key
WHERE s.is_root
