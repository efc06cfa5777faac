-- refresh: by project
-- reads: usage, messages
-- _step_models: every assistant message (a step) with the model it counts under. Internal
-- building block of _message_models (model_usage's and the report's counts) and of _step_costs
-- (the insight marts): one rule, so the insights name a step's model as the report does.
-- A step counts under the model of the request it holds (`usage.message_id`; the latest, if it
-- holds several), else its own, else the model most of its session's requests name (agents that
-- record the model per request only: Aider, Droid, Goose, Kilo): the model daily_costs puts their
-- cost on. `holds`: the message is one a request names.
CREATE OR REPLACE VIEW _step_models AS
WITH held AS (  -- the model of the requests a message holds (of the latest, if they name several)
    SELECT machine, "user", source_id, session_id, message_id,
           arg_max({'model': model, 'llm_provider': llm_provider}, {'at': requested_at, 'row': source_rowid}) AS key
    FROM usage
    WHERE message_id IS NOT NULL
    GROUP BY machine, "user", source_id, session_id, message_id
),
session_model AS (  -- the model most of a session's requests name
    SELECT machine, "user", source_id, session_id, model, llm_provider
    FROM usage
    GROUP BY machine, "user", source_id, session_id, model, llm_provider
    QUALIFY ROW_NUMBER() OVER (PARTITION BY machine, "user", source_id, session_id
                               ORDER BY model IS NULL, COUNT(*) DESC, model, llm_provider NULLS LAST) = 1
)
SELECT m.provider, m.project, m.machine, m."user", m.source_id, m.session_id, m.date,
       m.message_id, m.message_index, m.created_at,
       h.message_id IS NOT NULL AS holds,
       CASE WHEN h.message_id IS NOT NULL THEN h.key.model WHEN m.model IS NOT NULL THEN m.model
            WHEN s.session_id IS NOT NULL THEN s.model END AS model,
       CASE WHEN h.message_id IS NOT NULL THEN h.key.llm_provider WHEN m.model IS NOT NULL THEN m.llm_provider
            WHEN s.session_id IS NOT NULL THEN s.llm_provider ELSE m.llm_provider END AS llm_provider
FROM messages AS m
LEFT JOIN held AS h ON h.machine = m.machine AND h."user" = m."user" AND h.source_id = m.source_id
    AND h.session_id = m.session_id
    AND h.message_id = m.message_id
LEFT JOIN session_model AS s ON s.machine = m.machine AND s."user" = m."user" AND s.source_id = m.source_id
    AND s.session_id = m.session_id
WHERE m.role = 'assistant'
