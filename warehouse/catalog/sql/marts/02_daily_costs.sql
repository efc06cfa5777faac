-- refresh: by project
-- reads: _in_tree, sessions, usage, messages, model_names
-- daily_costs: root-session cost spread over days and models.
-- Rule: a root session's cost (which already includes its sub-agents') is split over the
-- (day, model, llm_provider) of the session and its sub-agents: in proportion to the requests'
-- own costs where the agent records usage (the `usage` table), or, where none of them costs more
-- than 0 (all unpriced, say), to their counts: on the requests' models, never on the NULL model
-- of the messages of an agent that records the model per request only (Aider, Droid, Goose,
-- Kilo); else to the counts of assistant messages (Crush, CodeWhale, Cursor). Shares are computed in whole nano-dollars (integers: exact), each
-- but the last rounded half up; the last takes the remainder, so one session's shares sum
-- exactly to its cost. A session with no assistant
-- message puts its whole cost on the day it was created. Unknown costs stay NULL. `model_name`:
-- the name the model groups under (model_names; the recorded one where it has none).
CREATE OR REPLACE VIEW daily_costs AS
WITH roots AS (
    SELECT s.provider, s.project, s.machine, s."user", s.source_id, s.session_id, s.session_key, s.created_at, s.date,
           s.model, s.llm_provider, s.cost_source, CAST(ROUND(s.cost_usd * 1e9) AS HUGEINT) AS nanos
    FROM _in_tree('sessions') AS s
    WHERE s.is_root
),
priced AS (
    SELECT u.root_session_key, u.date, u.model, u.llm_provider,
           SUM(CAST(ROUND(u.cost_usd * 1e9) AS HUGEINT)) AS n
    FROM _in_tree('usage') AS u
    WHERE u.cost_usd > 0
    GROUP BY ALL
),
counted AS (
    SELECT u.root_session_key, u.date, u.model, u.llm_provider, COUNT(*) AS n
    FROM _in_tree('usage') AS u
    WHERE u.root_session_key NOT IN (SELECT root_session_key FROM priced)
    GROUP BY ALL
),
weights AS (
    SELECT * FROM priced
    UNION ALL
    SELECT * FROM counted
    UNION ALL
    SELECT m.root_session_key, m.date, m.model, m.llm_provider, COUNT(*) AS n
    FROM _in_tree('messages') AS m
    WHERE m.role = 'assistant'
      AND m.root_session_key NOT IN (SELECT root_session_key FROM priced)
      AND m.root_session_key NOT IN (SELECT root_session_key FROM counted)
    GROUP BY ALL
),
shares AS (
    SELECT
        r.provider, r.project, r.machine, r."user", r.session_key, r.nanos, r.cost_source,
        COALESCE(w.date, CAST(r.created_at AS DATE), r.date) AS date,
        CASE WHEN w.n IS NULL THEN r.model ELSE w.model END AS model,
        CASE WHEN w.n IS NULL THEN r.llm_provider ELSE w.llm_provider END AS llm_provider,
        w.n,
        SUM(w.n) OVER session AS total_n,
        ROW_NUMBER() OVER (session ORDER BY w.date, w.model, w.llm_provider) AS k,
        COUNT(*) OVER session AS shares
    FROM roots AS r
    LEFT JOIN weights AS w ON w.root_session_key = r.session_key
    WINDOW session AS (PARTITION BY r.session_key)
),
rounded AS (
    SELECT *, CASE WHEN n IS NULL THEN nanos ELSE (2 * nanos * n + total_n) // (2 * total_n) END AS share
    FROM shares
),
amounts AS (
    SELECT *,
           CASE WHEN k = shares
                THEN nanos - COALESCE(SUM(share) OVER (PARTITION BY session_key ORDER BY k
                                                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
                ELSE share END AS amount_nanos
    FROM rounded
)
SELECT
    date,
    provider,
    project,
    machine,
    "user",
    a.model,
    COALESCE(n.model_name, a.model) AS model_name,
    a.llm_provider,
    cost_source,
    COUNT(DISTINCT session_key) AS sessions,
    CAST(SUM(amount_nanos) AS DECIMAL(38, 0)) * CAST(0.000000001 AS DECIMAL(18, 9)) AS cost_usd
FROM amounts AS a
LEFT JOIN model_names AS n ON n.model = a.model AND n.llm_provider IS NOT DISTINCT FROM a.llm_provider
GROUP BY ALL
