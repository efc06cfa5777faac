-- refresh: by project
-- reads: _step_models, model_names
-- _message_models: the assistant messages counted per session, day and the model they count
-- under (_step_models). Internal building block of model_usage; `agentlake report` reads it too
-- (its messages by model, with its filters), so both count a message under the same model.
-- `holds`: the messages are ones a request names. `model_name`: the name the model groups under
-- (model_names; the recorded one where it has none).
CREATE OR REPLACE VIEW _message_models AS
WITH counted AS (
    SELECT provider, project, machine, "user", source_id, session_id, date, holds, model, llm_provider,
           COUNT(*) AS messages
    FROM _step_models
    GROUP BY ALL
)
SELECT c.*, COALESCE(n.model_name, c.model) AS model_name
FROM counted AS c
LEFT JOIN model_names AS n ON n.model = c.model AND n.llm_provider IS NOT DISTINCT FROM c.llm_provider
