-- refresh: by project
-- reads: _in_tree, _step_models, usage, sessions, tool_calls
-- _step_costs: every assistant message (a step) of every session, with what it cost and the
-- tool calls it made. Internal building block of the insight marts.
-- A step's model (and llm_provider) is the one _step_models gives it, as the report counts it.
-- Where the session's tree has per-request usage (the `usage` table), a step costs its own
-- requests (those naming it) and `tokens` are theirs; the session's requests that name none of
-- its steps (Copilot, Droid, Goose and Kilo's tasks name no message; Aider names its system
-- lines) are shared equally over the session's steps, tokens and cost, in whole units, rounded
-- half up, the last step taking the remainder (so the steps sum exactly to the requests). A step
-- of a session without requests costs a known 0. Elsewhere (Crush, CodeWhale, Cursor) the root's
-- cost is shared equally over the tree's assistant messages, the rule daily_costs splits it by,
-- and `tokens` is NULL (not recorded per step). A step's cost is NULL when one of its requests,
-- or of its session's shared ones, is unpriced (or the root's cost is unknown), and its tokens
-- NULL when one of them records none (never a partial sum).
-- Costs are in whole nano-dollars (HUGEINT). Windows and groupings in the insight marts lead
-- with project: the same partitions (a session has one project), and so a by-project refresh's
-- filter reaches the scans.
CREATE OR REPLACE VIEW _step_costs AS
WITH requests AS (  -- per session and message named (NULL: none)
    SELECT u.root_session_key, u.session_key, u.message_id,
           SUM(u.total_tokens) AS tokens,
           COUNT(*) FILTER (WHERE u.total_tokens IS NULL) AS untokened,
           SUM(CAST(ROUND(u.cost_usd * 1e9) AS HUGEINT)) AS nanos,
           COUNT(*) FILTER (WHERE u.cost_usd IS NULL) AS unpriced
    FROM _in_tree('usage') AS u
    GROUP BY ALL
),
session_requests AS (  -- every request of the session
    SELECT session_key, COALESCE(SUM(tokens), 0) AS tokens, SUM(untokened) AS untokened,
           COALESCE(SUM(nanos), 0) AS nanos, SUM(unpriced) AS unpriced
    FROM requests
    GROUP BY ALL
),
metered AS (SELECT DISTINCT root_session_key FROM requests),
steps AS (  -- each step with its own requests
    SELECT m.project, m.machine, m."user", m.source_id, m.session_id, m.message_id, m.message_index, m.created_at,
           m.model, m.llm_provider, m.session_key, m.root_session_key,
           r.tokens AS own_tokens, r.untokened AS own_untokened, r.nanos AS own_nanos, r.unpriced AS own_unpriced
    FROM _in_tree('_step_models') AS m
    LEFT JOIN requests AS r ON r.session_key = m.session_key AND r.message_id = m.message_id
),
trees AS (SELECT project, root_session_key, COUNT(*) AS tree_steps FROM steps GROUP BY ALL),
held AS (  -- per session: its steps, the last of them, and what they hold between them
    SELECT project, session_key, COUNT(*) AS session_steps, MAX({'i': message_index, 'id': message_id}) AS last_step,
           COALESCE(SUM(own_tokens), 0) AS tokens, COALESCE(SUM(own_untokened), 0) AS untokened,
           COALESCE(SUM(own_nanos), 0) AS nanos, COALESCE(SUM(own_unpriced), 0) AS unpriced
    FROM steps
    GROUP BY ALL
),
roots AS (
    SELECT s.session_key, CAST(ROUND(s.cost_usd * 1e9) AS HUGEINT) AS nanos
    FROM _in_tree('sessions') AS s
    WHERE s.is_root
),
calls AS (
    SELECT machine, "user", source_id, session_id, message_id, COUNT(*) AS tool_calls
    FROM tool_calls
    WHERE has_call AND message_id IS NOT NULL
    GROUP BY ALL
),
shared AS (  -- the session's requests no step holds, and this step's share of them
    SELECT st.*, tr.tree_steps, h.session_steps,
           h.last_step = {'i': st.message_index, 'id': st.message_id} AS is_last,
           COALESCE(sr.untokened, 0) - h.untokened AS pool_untokened,
           COALESCE(sr.unpriced, 0) - h.unpriced AS pool_unpriced,
           COALESCE(sr.tokens, 0) - h.tokens AS pool_tokens,
           COALESCE(sr.nanos, 0) - h.nanos AS pool_nanos
    FROM steps AS st
    JOIN trees AS tr ON tr.project IS NOT DISTINCT FROM st.project AND tr.root_session_key = st.root_session_key
    JOIN held AS h ON h.project IS NOT DISTINCT FROM st.project AND h.session_key = st.session_key
    LEFT JOIN session_requests AS sr ON sr.session_key = st.session_key
)
SELECT
    sh.machine, sh.source_id, sh.session_id, sh.message_id, sh.message_index, sh.created_at, sh.model, sh.llm_provider,
    sh.session_key, sh.root_session_key,
    COALESCE(c.tool_calls, 0) AS tool_calls,
    CASE WHEN me.root_session_key IS NULL OR COALESCE(sh.own_untokened, 0) > 0 OR sh.pool_untokened > 0 THEN NULL
         ELSE COALESCE(sh.own_tokens, 0)
              + CASE WHEN NOT sh.is_last  -- rounded half up; the last takes the remainder
                     THEN (2 * sh.pool_tokens + sh.session_steps) // (2 * sh.session_steps)
                     ELSE sh.pool_tokens - (sh.session_steps - 1)
                          * ((2 * sh.pool_tokens + sh.session_steps) // (2 * sh.session_steps)) END END AS tokens,
    CASE WHEN me.root_session_key IS NULL THEN CAST(ROUND(ro.nanos / sh.tree_steps) AS HUGEINT)
         WHEN COALESCE(sh.own_unpriced, 0) > 0 OR sh.pool_unpriced > 0 THEN NULL
         ELSE COALESCE(sh.own_nanos, 0)
              + CASE WHEN NOT sh.is_last
                     THEN (2 * sh.pool_nanos + sh.session_steps) // (2 * sh.session_steps)
                     ELSE sh.pool_nanos - (sh.session_steps - 1)
                          * ((2 * sh.pool_nanos + sh.session_steps) // (2 * sh.session_steps)) END END AS nanos
FROM shared AS sh
LEFT JOIN metered AS me ON me.root_session_key = sh.root_session_key
LEFT JOIN roots AS ro ON ro.session_key = sh.root_session_key
LEFT JOIN calls AS c ON c.machine = sh.machine AND c."user" = sh."user" AND c.source_id = sh.source_id
    AND c.session_id = sh.session_id
    AND c.message_id = sh.message_id
