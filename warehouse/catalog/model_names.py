"""`model_names`: every model name the tables record, with its LLM provider, and the name it
groups under (`transforms.pricing.model_name`: the id of the model genai-prices resolves it to,
else the name lower-cased). `claude-sonnet-4-5`, `claude-sonnet-4-5-20250929` and another agent's
`claude-sonnet-4.5` are one `model_name` in the marts, the report and the dashboard.

A small table of the catalog, filled by the merge before the marts are built (`update`, in the
marts' transaction): only the names it does not hold yet are looked up. Each row records the
genai-prices release that resolved it; the first merge under another release that builds the
marts looks every name up again, and a name that moved rebuilds them whole (their rows hold the
old name).
"""

import pyarrow as pa

from warehouse.lake.ducklake import give_statistics

NAME = "model_names"
# the tables that record a model and its LLM provider (Dagster draws the table's parents from it)
READS = ("messages", "sessions", "usage")
COLUMNS = (("model", "VARCHAR"), ("llm_provider", "VARCHAR"), ("model_name", "VARCHAR"), ("resolved_by", "VARCHAR"))


def update(con, where: str | None, have: set[str], read=None) -> bool:
    """Add the (model, llm_provider) pairs the tables hold, in the rows `where` selects (all when
    None), that the table lacks; look every name up again when another genai-prices release
    resolved it. `have`: the catalog's tables now; `read(table)`: where to read a table's rows
    (the marts' cut of the touched projects' sources, which holds every row `where` selects;
    default the lake's table). True when a name recorded before now groups under another
    `model_name`."""
    from transforms.pricing import model_name, prices_version

    if NAME not in have:
        con.execute(f"CREATE TABLE lake.main.{NAME} ({', '.join(f'{c} {t}' for c, t in COLUMNS)})")
        give_statistics(con, f"lake.main.{NAME}")
        where, read = None, None  # every name the tables hold
    read = read or (lambda table: f"lake.main.{table}")
    scan = " UNION ".join(f"SELECT DISTINCT model, llm_provider FROM {read(t)} WHERE model IS NOT NULL"
                          + (f" AND {where}" if where else "") for t in READS)
    new = con.execute(f"SELECT model, llm_provider FROM ({scan}) AS t WHERE NOT EXISTS (SELECT 1 FROM lake.main.{NAME} "
                      "AS n WHERE n.model = t.model AND n.llm_provider IS NOT DISTINCT FROM t.llm_provider)").fetchall()
    version = prices_version()
    old = con.execute(f"SELECT model, llm_provider, model_name FROM lake.main.{NAME} "
                      "WHERE resolved_by IS DISTINCT FROM ?", [version]).fetchall()
    moved = any(model_name(m, p) != name for m, p, name in old)
    if old:
        con.execute(f"DELETE FROM lake.main.{NAME} WHERE resolved_by IS DISTINCT FROM ?", [version])
    pairs = new + [(m, p) for m, p, _ in old]
    if pairs:
        con.register("_model_names", pa.table({
            "model": pa.array([m for m, _ in pairs], pa.string()),
            "llm_provider": pa.array([p for _, p in pairs], pa.string()),
            "model_name": pa.array([model_name(m, p) for m, p in pairs], pa.string()),
            "resolved_by": pa.array([version] * len(pairs), pa.string())}))
        con.execute(f"INSERT INTO lake.main.{NAME} SELECT * FROM _model_names")
        con.unregister("_model_names")
    return moved
