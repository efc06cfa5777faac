-- refresh: by project
-- reads: _in_tree, sessions, tool_calls, session_summary
-- insight_subagent_share: per root session and kind of sub-agent, the part of the root's cost
-- spent in its sub-agents (at any depth, each at its own recorded cost). The kind is the
-- agent's own type where recorded (Claude Code's `agentType`), else the tool that started it
-- (Crush names a sub-agent session `<message>$$<tool call>`), else 'sub-agent'. A kind with a
-- sub-agent of unknown cost shows a NULL cost, never a partial sum. Costs are DECIMALs, each
-- taken to the nano-dollar, as session_summary takes the root's.
CREATE OR REPLACE VIEW insight_subagent_share AS
WITH subs AS (
    SELECT s.root_session_key, s.cost_usd,
           COALESCE(json_extract_string(s.extra_columns, '$.agentType'), spawn.tool_name, 'sub-agent') AS agent_kind
    FROM _in_tree('sessions') AS s
    LEFT JOIN tool_calls AS spawn ON spawn.machine = s.machine AND spawn."user" = s."user" AND spawn.source_id = s.source_id
        AND spawn.session_id = s.parent_session_id AND spawn.has_call
        AND spawn.tool_call_id = split_part(s.session_id, '$$', 2)
    WHERE NOT s.is_root
),
kinds AS (
    SELECT root_session_key, agent_kind, COUNT(*) AS subagents,
           CASE WHEN COUNT(*) = COUNT(cost_usd) THEN SUM(CAST(cost_usd AS DECIMAL(38, 9))) END AS subagent_cost_usd
    FROM subs
    GROUP BY ALL
)
SELECT
    r.session_key,
    r.provider,
    r.project,
    r.machine,
    r."user",
    r.source_id,
    r.session_id,
    k.agent_kind,
    k.subagents,
    k.subagent_cost_usd,
    r.cost_usd AS root_cost_usd,
    k.subagent_cost_usd / NULLIF(r.cost_usd, 0) AS share
FROM kinds AS k
JOIN session_summary AS r ON r.session_key = k.root_session_key
