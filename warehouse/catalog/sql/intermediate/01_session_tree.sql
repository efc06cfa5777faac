-- refresh: by project
-- reads: sessions
-- Each session with the root session it belongs to. Internal building block of the marts: they
-- reach it through _in_tree, which joins a session's rows with it.
-- A source_id is unique on one machine and user only (two laptops with the same home path hash
-- alike; one store landed under two user names keeps its id), so joins on a session match
-- (machine, user, source_id, session_id). session_key names a session
-- lake-wide: machine/user/provider/source_id/session_id (none of the first four holds a '/').
CREATE OR REPLACE VIEW _session_tree AS
SELECT
    provider,
    project,
    machine,
    "user",
    source_id,
    session_id,
    COALESCE(root_session_id, session_id) AS root_session_id,
    is_root,
    concat_ws('/', machine, "user", provider, source_id, session_id) AS session_key,
    concat_ws('/', machine, "user", provider, source_id, COALESCE(root_session_id, session_id)) AS root_session_key
FROM sessions
