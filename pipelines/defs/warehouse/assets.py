from pathlib import Path
from typing import NamedTuple

import dagster as dg

from pipelines.defs.lake.assets import LANDING
from pipelines.defs.resources import AgentlakeResource
from transforms.contract import ALL_TABLES
from warehouse.catalog import checks as lakewide
from warehouse.catalog import model_names, search_index
from warehouse.catalog.marts import MARTS, depends_on, mart_sql
from warehouse.catalog.merge import duck_type
from warehouse.catalog.build import configured_prices, refresh
from warehouse.lake.config import settings_file
from warehouse.land.ingest import merged_since, pending_token
from pipelines.budget_check import DESCRIPTION as BUDGETS, budget_check_result, spend_of
from pipelines.runner import repriced

# Runs launched from the UI or the sensor update what depends on them, not only the CLI's.
EAGER = dg.AutomationCondition.eager()
TABLES = [dg.AssetKey([t.name]) for t in ALL_TABLES]
MART_KEYS = [dg.AssetKey([m]) for m in MARTS]
KEYED = {t: dg.AssetKey([t]) for t in lakewide.LAKE_KEYS}
CHILDREN = {child: dg.AssetKey([child]) for (child, _col) in lakewide.REFERENCES}

# Keys and parents are per source, and a source's rows change only when a merge replaces them:
# the checks look at the sources the merge replaced (every one on a cold or full merge). Over the
# whole lake they cost more, and more with the history on every merge (docs/BENCHMARKS.md, "Figures
# behind the code's choices").
_CHECKED = " Checked on the sources the merge replaced (`sources_checked`): the others are unchanged since theirs."
TABLE_CHECKS = [dg.AssetCheckSpec("keys_unique", asset=key, description="No key repeats within a source." + _CHECKED)
                for key in KEYED.values()] + [
    dg.AssetCheckSpec("no_orphans", asset=key, description="Every row finds its parent in its own source." + _CHECKED)
    for key in CHILDREN.values()]
NOTHING_MERGED = "No source was merged in this run: nothing was checked."
# a WARN check Dagster's alerting can route (docs/DAGSTER.md, "Budgets"): the marts' spend this month
# against config.toml's [[budgets]]
BUDGET_CHECK = dg.AssetCheckSpec("within_budgets", asset=dg.AssetKey(["daily_costs"]), description=BUDGETS)


def mart_description(name: str, sql: str) -> str:
    """A mart's description: its SQL file's header comment, from the line naming the mart (after
    `-- refresh:` and any `-- threads:` note), as one paragraph."""
    header = []
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        header.append(line.removeprefix("--").strip())
    start = next((i for i, line in enumerate(header) if line.startswith(f"{name}:")), 1)
    text = " ".join(header[start:]).removeprefix(f"{name}:").strip()
    return text[:1].upper() + text[1:]


def column_schema(table) -> dg.TableSchema:
    """A table's columns as the contract has them, after the two partition columns."""
    return dg.TableSchema(columns=[
        dg.TableColumn("date", "DATE", f"The row's own UTC date, from `{table.date_from}` (a partition column)."),
        dg.TableColumn("project", "VARCHAR", "The project's slug (a partition column)."),
    ] + [dg.TableColumn(c.name, duck_type(c.type), c.doc) for c in table.columns])


MART_DOCS = {name: mart_description(name, sql) for name, sql in mart_sql() if name in MARTS}
# the names models group under: a table of the catalog the merge fills from the tables' names,
# read by the marts that group by model (their `-- reads:` lines)
MODEL_NAMES = dg.AssetSpec(
    model_names.NAME, deps=[dg.AssetKey([t]) for t in model_names.READS], group_name="tables", kinds={"ducklake"},
    automation_condition=EAGER, description=" ".join(model_names.__doc__.split("\n\n")[0].split()),
    metadata={"dagster/column_schema": dg.TableSchema(columns=[dg.TableColumn(c, t) for c, t in model_names.COLUMNS])})

# the BM25 index of `agentlake search`, a DuckDB file beside the catalog that the merge keeps
SEARCH_INDEX = dg.AssetSpec(
    "search_index", deps=[dg.AssetKey([t]) for t in search_index.READS], group_name="search", kinds={"duckdb"},
    automation_condition=EAGER, description=" ".join(search_index.__doc__.split("\n\n")[0].split()))


@dg.multi_asset(
    specs=[dg.AssetSpec(key, deps=[LANDING], group_name="tables", kinds={"ducklake", "parquet"},
                        automation_condition=EAGER, description=t.doc,
                        metadata={"dagster/column_schema": column_schema(t)})
           for key, t in zip(TABLES, ALL_TABLES)]
    + [MODEL_NAMES, SEARCH_INDEX]
    # each its own description: without one, Dagster gives every spec the op's docstring; its
    # parents the tables and marts its SQL reads (its `-- reads:` line, blocks resolved)
    + [dg.AssetSpec(key, deps=[dg.AssetKey([d]) for d in depends_on(name)], group_name="marts",
                    kinds={"ducklake"}, automation_condition=EAGER, description=MART_DOCS[name])
       for key, name in zip(MART_KEYS, MARTS)],
    check_specs=TABLE_CHECKS + [BUDGET_CHECK],
    can_subset=False,
)
def tables_and_marts(context: dg.AssetExecutionContext, agentlake: AgentlakeResource):
    """Merge what landed into the DuckLake tables, one transaction for all changed sources, then
    the touched projects' mart rows (warehouse/catalog/sql/marts) in a second, published with them: no
    reader sees new tables with old marts. One step, not a step for the tables and one for the
    marts: the second cost Dagster's step events and a connection of its own, for counts
    (docs/BENCHMARKS.md)."""
    layout = agentlake.layout()
    checks = {}

    def check(con, merge):  # on the merge's own connection, the tables and marts as it publishes them
        # budgets from the file `report --budgets` reads: a quickstart demo's home's (settings_file)
        checks["found"] = look_after_merge(con, merge.source_ids, settings_file(layout))

    # the marts too, if anything changed or was pending
    token = pending_token(layout)
    result = refresh(layout.lake, layout.warehouse, prices=configured_prices(layout), then=check, home=layout.home)
    # what landed is merged: the marker goes, as `agentlake ingest` takes it away after its merge
    # (left by a run from the UI or the sensor, it sent the next `agentlake ingest` with nothing
    # changed to merge again: docs/BENCHMARKS.md, "Figures behind the code's choices")
    merged_since(layout, token)
    if result.repriced:  # as `agentlake ingest` and `merge` say it
        context.log.info(repriced(layout))
    found = checks["found"]
    for table in ALL_TABLES:
        yield dg.MaterializeResult(asset_key=table.name, metadata={
            "rows": found.counts[table.name], "rows_inserted": result.rows.get(table.name, 0),
            "sources_merged": result.merged, "sources_removed": result.removed})
    for fields in table_check_fields(found, note=None if result.source_ids else NOTHING_MERGED):
        yield dg.AssetCheckResult(**fields)
    for name in (model_names.NAME, *MARTS):
        yield dg.MaterializeResult(asset_key=name, metadata={"rows": found.counts[name]})
    index = result.search  # None: the merge changed no source, the index was current
    yield dg.MaterializeResult(asset_key=SEARCH_INDEX.key, metadata=search_index_metadata(
        index and (index.documents, index.rebuilt, index.sources_read, index.sources_removed)))
    yield budget_check_result(found.budgets, found.spend, found.unknown, found.config_file,
                              asset_key=BUDGET_CHECK.asset_key, check_name=BUDGET_CHECK.name)
    if result.waiting:
        context.log.warning(f"{len(result.waiting)} sources were being written and wait for the next merge")
    for problem in result.problems:  # in the run's log too (a run from the UI has no terminal to read)
        context.log.warning(problem)


class Looked(NamedTuple):
    """What the checks after a merge read, on one snapshot of the catalog."""
    merged: list[str]  # the source ids checked: the ones the merge replaced
    counts: dict  # rows per table, model_names and mart
    duplicates: dict
    orphans: dict
    budgets: list
    spend: list
    unknown: list
    config_file: Path


def look_after_merge(con, merged, config_file: Path) -> Looked:
    """Row counts, the keys and parents of the merged sources, and config.toml's budgets, on `con`
    (the merge's connection in a Dagster run; a reader's for the runs of `agentlake ingest`)."""
    merged = sorted(merged)
    return Looked(merged,
                  lakewide.count_rows(con, [t.name for t in ALL_TABLES] + [model_names.NAME] + list(MARTS),
                                      "lake.main"),  # one statement
                  lakewide.duplicate_keys(con, merged) if merged else {},
                  lakewide.orphans(con, merged) if merged else {},
                  *spend_of(con, config_file), config_file)


def table_check_fields(found: Looked, note: str | None) -> list[dict]:
    """The tables' key and parent checks, as the fields of a check result (AssetCheckResult in a
    run, AssetCheckEvaluation from a sensor); `note`: a pass that checked nothing says so."""
    checked = len(found.merged)
    fields = [dict(asset_key=key, check_name="keys_unique", passed=not found.duplicates.get(table), description=note,
                   metadata={"duplicates": found.duplicates.get(table, 0), "sources_checked": checked})
              for table, key in KEYED.items()]
    for child, key in CHILDREN.items():
        orphans = {ref: n for ref, n in found.orphans.items() if ref.startswith(f"{child}.")}
        fields.append(dict(asset_key=key, check_name="no_orphans", passed=not any(orphans.values()), description=note,
                           metadata={"orphans": str(orphans), "sources_checked": checked}))
    return fields


def search_index_metadata(index) -> dict:
    """`index`: (documents, rebuilt, sources read, sources removed) of the merge's update, or
    None when the index was current."""
    documents, rebuilt, read, removed = index or ("unchanged", False, 0, 0)
    return {"documents": documents, "rebuilt": bool(rebuilt), "sources_read": read, "sources_removed": removed}
