-- refresh: by project
-- _step_costs: every assistant message (a step) of every session, with what it cost and the
-- tool calls it made. Internal building block of the insight marts.
-- Where the session's tree has per-request usage (Claude Code, Codex, OpenCode), a step costs
-- its own requests (a step without a billed request costs a known 0) and `tokens` are theirs.
-- Elsewhere (Crush, CodeWhale) the root's cost is shared equally over the tree's assistant
-- messages, the rule daily_costs splits it by, and `tokens` is NULL (not recorded per step).
-- Costs are in whole nano-dollars (HUGEINT); NULL when unknown. Windows and groupings in the
-- insight marts lead with project: the same partitions (a session has one project), and so a
-- by-project refresh's filter reaches the scans.
CREATE OR REPLACE VIEW _step_costs AS
WITH steps AS (
    SELECT m.machine, m.source_id, m.session_id, m.message_id, m.message_index, m.created_at, m.model,
           t.session_key, t.root_session_key,
           COUNT(*) OVER (PARTITION BY m.project, t.root_session_key) AS tree_steps
    FROM messages AS m
    JOIN _session_tree AS t ON t.machine = m.machine AND t.source_id = m.source_id AND t.session_id = m.session_id
    WHERE m.role = 'assistant'
),
requests AS (
    SELECT t.root_session_key, u.session_id, u.message_id,
           SUM(u.total_tokens) AS tokens,
           SUM(CAST(ROUND(u.cost_usd * 1e9) AS HUGEINT)) AS nanos,
           COUNT(*) FILTER (WHERE u.cost_usd IS NULL) AS unpriced
    FROM usage AS u
    JOIN _session_tree AS t ON t.machine = u.machine AND t.source_id = u.source_id AND t.session_id = u.session_id
    GROUP BY ALL
),
metered AS (SELECT DISTINCT root_session_key FROM requests),
roots AS (
    SELECT t.session_key, CAST(ROUND(s.cost_usd * 1e9) AS HUGEINT) AS nanos
    FROM sessions AS s
    JOIN _session_tree AS t ON t.machine = s.machine AND t.source_id = s.source_id AND t.session_id = s.session_id
    WHERE s.is_root
),
calls AS (
    SELECT machine, source_id, session_id, message_id, COUNT(*) AS tool_calls
    FROM tool_calls
    WHERE has_call AND message_id IS NOT NULL
    GROUP BY ALL
)
SELECT
    st.machine, st.source_id, st.session_id, st.message_id, st.message_index, st.created_at, st.model,
    st.session_key, st.root_session_key,
    COALESCE(c.tool_calls, 0) AS tool_calls,
    CASE WHEN me.root_session_key IS NOT NULL THEN COALESCE(r.tokens, 0) END AS tokens,
    CASE WHEN me.root_session_key IS NULL THEN CAST(ROUND(ro.nanos / st.tree_steps) AS HUGEINT)
         WHEN r.unpriced > 0 THEN NULL
         ELSE COALESCE(r.nanos, 0) END AS nanos
FROM steps AS st
LEFT JOIN metered AS me ON me.root_session_key = st.root_session_key
LEFT JOIN requests AS r ON r.root_session_key = st.root_session_key AND r.session_id = st.session_id
    AND r.message_id = st.message_id
LEFT JOIN roots AS ro ON ro.session_key = st.root_session_key
LEFT JOIN calls AS c ON c.machine = st.machine AND c.source_id = st.source_id AND c.session_id = st.session_id
    AND c.message_id = st.message_id
