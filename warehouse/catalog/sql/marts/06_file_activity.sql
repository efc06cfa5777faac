-- refresh: by project
-- reads: tool_calls, file_versions, _listings
-- file_activity: per project and file, how often agents changed, read and versioned it.
-- A change is an edit-, multiedit- or write-category call WITH a result that is not an error:
-- a failed edit changed nothing. A null is_error is no error: Codex, Cursor, Aider and Codebuff
-- flag only what failed (their successful edits counted as nothing: a trial). Relative paths are
-- resolved against the project directory. A folder's listing (_listings) is no read of a file,
-- and its folder no row.
CREATE OR REPLACE VIEW file_activity AS
WITH calls AS (
    SELECT provider, project, tool_category, is_error, has_result, called_at,
           CASE WHEN file_path LIKE '/%' OR project_path = '' THEN file_path
                ELSE project_path || '/' || file_path END AS path
    FROM tool_calls
    -- the calls it counts: a file another tool names (an MCP call's argument) is no activity, and
    -- was a row of zeros
    WHERE has_call AND file_path IS NOT NULL AND tool_category IN ('edit', 'write', 'read')
      AND lower(regexp_replace(tool_name, '^.*?__', '')) NOT IN (SELECT tool_name FROM _listings())
),
by_calls AS (
    SELECT provider, project, path,
           COUNT(*) FILTER (WHERE tool_category IN ('edit', 'write') AND has_result AND is_error IS NOT TRUE) AS changes,
           COUNT(*) FILTER (WHERE tool_category = 'edit' AND has_result AND is_error IS NOT TRUE) AS edits,
           COUNT(*) FILTER (WHERE tool_category = 'write' AND has_result AND is_error IS NOT TRUE) AS writes,
           COUNT(*) FILTER (WHERE tool_category IN ('edit', 'write') AND (is_error OR NOT has_result)) AS failed_changes,
           COUNT(*) FILTER (WHERE tool_category = 'read') AS reads,
           MAX(called_at) FILTER (WHERE tool_category IN ('edit', 'write') AND has_result AND is_error IS NOT TRUE) AS last_changed_at
    FROM calls
    GROUP BY ALL
),
by_versions AS (
    SELECT provider, project, path, COUNT(*) AS versions, MAX(created_at) AS last_version_at
    FROM file_versions
    GROUP BY ALL
)
SELECT
    COALESCE(c.provider, v.provider) AS provider,
    COALESCE(c.project, v.project) AS project,
    COALESCE(c.path, v.path) AS path,
    COALESCE(c.changes, 0) AS changes,
    COALESCE(c.edits, 0) AS edits,
    COALESCE(c.writes, 0) AS writes,
    COALESCE(c.failed_changes, 0) AS failed_changes,
    COALESCE(c.reads, 0) AS reads,
    COALESCE(v.versions, 0) AS versions,
    GREATEST(c.last_changed_at, v.last_version_at) AS last_changed_at
FROM by_calls AS c
FULL OUTER JOIN by_versions AS v ON v.provider = c.provider AND v.project = c.project AND v.path = c.path
