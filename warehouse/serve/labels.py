"""What the report's tables and the dashboard call a model value that is not a model's name: one
place, so that both say the same words. Only what people read changes; the data keeps its own
values (NULL, `<synthetic>`) in the tables, the JSON and CSV of `agentlake report` and in SQL.
"""

from warehouse.lake.ducklake import sql_string

# a cost or a message without a model: an agent that records its cost per session (Codebuff), or
# the model per request only, or none at all
NO_MODEL = "no model recorded"
# what agents write where a model's name belongs for replies no model gave: Claude Code's
# `<synthetic>` (an API error, an interrupted turn; never billed, docs/FORMATS.md)
NOT_MODELS = {"<synthetic>": "synthetic (not a model)"}
NEVER_BILLED = ("<synthetic>",)  # of those, the replies that made no request: their cost is a known 0
# a model, the name it groups under (model_names), or models comma-separated (session_summary.models)
MODEL_COLUMNS = ("model", "model_name", "models")
SEPARATOR = ", "


def model_label(model: str | None) -> str:
    """A model as people read it: its name, or what stands in its place said in words."""
    if model is None or model == "":
        return NO_MODEL
    return NOT_MODELS.get(model, model)


def models_label(models: str | None) -> str:
    """A comma-separated list of models (session_summary.models), each as `model_label` says it."""
    if models is None or models == "":
        return NO_MODEL
    return SEPARATOR.join(model_label(m) for m in models.split(SEPARATOR))


def label(column: str, value):
    """`value` of a column as people read it: a model column's labelled, any other as it is."""
    if column in ("model", "model_name"):
        return model_label(value)
    if column == "models":
        return models_label(value)
    return value


def model_sql(column: str) -> str:
    """SQL giving `model_label` of a column, for a query that groups or draws by it."""
    cases = "".join(f" WHEN {column} = {sql_string(k)} THEN {sql_string(v)}" for k, v in NOT_MODELS.items())
    return f"CASE WHEN {column} IS NULL OR {column} = '' THEN {sql_string(NO_MODEL)}{cases} ELSE {column} END"
