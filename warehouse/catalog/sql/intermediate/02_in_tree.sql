-- reads: _session_tree
-- _in_tree(tbl): the rows of the table named `tbl` that belong to a session, each with its
-- session's session_key, root_session_key and root_session_id (see _session_tree): the one join
-- of a session's rows with its tree, on (machine, user, source_id, session_id), that the marts share.
-- A table macro, expanded inside the query that calls it: filters reach the table's scan.
-- The row's own root_session_id (sessions': NULL for a root) gives way to the tree's.
CREATE OR REPLACE MACRO _in_tree(tbl) AS TABLE
SELECT x.*, t.session_key, t.root_session_key, t.root_session_id
FROM (SELECT COLUMNS(c -> c <> 'root_session_id') FROM query_table(tbl)) AS x
JOIN _session_tree AS t ON t.machine = x.machine AND t."user" = x."user" AND t.source_id = x.source_id
    AND t.session_id = x.session_id
