-- refresh: by project
-- reads: tool_calls
-- shell_commands: shell commands by first word and by full command, with failure rates.
-- `grouping` is 'first_word' (command is NULL) or 'command'. A call fails when the tool errored
-- or the command exited non-zero. The first word skips leading VAR=value assignments.
CREATE OR REPLACE VIEW shell_commands AS
WITH commands AS (
    SELECT provider, project, command, is_error, exit_code,
           regexp_extract(command, '^\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(\S+)', 1) AS first_word
    FROM tool_calls
    WHERE has_call AND tool_category = 'shell' AND command IS NOT NULL
)
SELECT
    CASE WHEN GROUPING(command) = 1 THEN 'first_word' ELSE 'command' END AS "grouping",
    provider,
    project,
    first_word,
    command,
    COUNT(*) AS calls,
    COUNT(*) FILTER (WHERE is_error OR exit_code <> 0) AS failures,
    COUNT(*) FILTER (WHERE is_error OR exit_code <> 0) / COUNT(*) AS failure_rate
FROM commands
GROUP BY GROUPING SETS ((provider, project, first_word), (provider, project, first_word, command))
