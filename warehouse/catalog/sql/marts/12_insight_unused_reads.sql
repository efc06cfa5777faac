-- refresh: by project
-- reads: _file_calls, _in_tree, tool_calls
-- threads: 1 (its join holds every later call's arguments, per thread: with two, a team's
-- 14.6M messages did not fit the marts' 1 GB; with one they did)
-- insight_unused_reads: per root session (its sub-agents folded in) and file, files read and
-- then never changed nor named again: no call from the first successful read on (a call of the
-- same step included), other than a read, has the file's path (relative to the project, else
-- absolute) in its arguments. The cost is that of the steps that read it (shares as in
-- insight_duplicate_reads), NULL when one of them is unknown.
-- Memory: the join with the later calls takes each file's key, name and first read only, and
-- the totals are summed for the unused files after it. Summed first and carried through the
-- joins, a team's 14.6M messages ran out of 1 GB; like this they fit 600 MB.
CREATE OR REPLACE VIEW insight_unused_reads AS
WITH firsts AS (  -- per root session and file
    SELECT root_session_key, path,
           CASE WHEN path LIKE ANY_VALUE(project_path) || '/%' AND ANY_VALUE(project_path) <> ''
                THEN substr(path, length(ANY_VALUE(project_path)) + 2) ELSE path END AS name,
           MIN(called_at) AS first_read_at
    FROM _file_calls
    WHERE is_good_read
    GROUP BY root_session_key, path
),
later AS (
    SELECT c.root_session_key, c.called_at, c.input_raw
    FROM _in_tree('tool_calls') AS c
    WHERE c.has_call AND c.tool_category <> 'read' AND c.input_raw IS NOT NULL
),
used AS (
    SELECT DISTINCT r.root_session_key, r.path
    FROM firsts AS r
    JOIN later AS l ON l.root_session_key = r.root_session_key AND l.called_at >= r.first_read_at
        AND contains(l.input_raw, r.name)
),
reads AS (  -- the files no later call used
    SELECT root_session_key, path,
           project, ANY_VALUE(provider) AS provider, ANY_VALUE(machine) AS machine,
           ANY_VALUE("user") AS "user", ANY_VALUE(source_id) AS source_id, ANY_VALUE(root_session_id) AS session_id,
           MIN(called_at) AS first_read_at,
           COUNT(*) AS reads,
           SUM(result_size) AS result_bytes,
           SUM(step_tokens) AS step_tokens,
           CASE WHEN COUNT(step_nanos) = COUNT(*) THEN SUM(step_nanos) END AS step_nanos  -- never partial
    FROM _file_calls AS f
    WHERE is_good_read
      AND NOT EXISTS (SELECT 1 FROM used AS u WHERE u.root_session_key = f.root_session_key AND u.path = f.path)
    GROUP BY project, root_session_key, path
)
SELECT
    r.root_session_key AS session_key,
    r.provider,
    r.project,
    r.machine,
    r."user",
    r.source_id,
    r.session_id,
    r.path,
    r.reads,
    r.result_bytes,
    r.first_read_at,
    r.step_tokens AS read_step_tokens,
    CAST(ROUND(r.step_nanos) AS DECIMAL(38, 0)) * CAST(0.000000001 AS DECIMAL(18, 9)) AS read_cost_usd
FROM reads AS r
