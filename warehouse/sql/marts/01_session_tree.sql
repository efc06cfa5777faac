-- Each session with the root session it belongs to, keyed by (source_id, session_id).
-- Internal building block for the marts below.
CREATE OR REPLACE VIEW _session_tree AS
SELECT
    provider,
    project,
    source_id,
    session_id,
    COALESCE(root_session_id, session_id) AS root_session_id,
    is_root
FROM sessions
