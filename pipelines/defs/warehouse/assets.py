import dagster as dg

from pipelines.defs.lake.assets import LANDING
from pipelines.defs.resources import AgentlakeResource
from transforms.contract import ALL_TABLES
from warehouse import lakewide
from warehouse.marts import MARTS
from warehouse.views import checked, refresh

# Runs launched from the UI or the sensor update what depends on them, not only the CLI's.
EAGER = dg.AutomationCondition.eager()
TABLES = [dg.AssetKey([t.name]) for t in ALL_TABLES]
MART_KEYS = [dg.AssetKey([m]) for m in MARTS]
KEYED = {t: dg.AssetKey([t]) for t in lakewide.LAKE_KEYS}
CHILDREN = {child: dg.AssetKey([child]) for (child, _col) in lakewide.REFERENCES}

TABLE_CHECKS = [dg.AssetCheckSpec("keys_unique", asset=key, description="No key repeats within a source.")
                for key in KEYED.values()] + [
    dg.AssetCheckSpec("no_orphans", asset=key, description="Every row finds its parent in its own source.")
    for key in CHILDREN.values()]


@dg.multi_asset(
    specs=[dg.AssetSpec(key, deps=[LANDING], group_name="tables", kinds={"ducklake", "parquet"},
                        automation_condition=EAGER, description=t.doc)
           for key, t in zip(TABLES, ALL_TABLES)]
    + [dg.AssetSpec(key, deps=TABLES, group_name="marts", kinds={"ducklake"}, automation_condition=EAGER)
       for key in MART_KEYS],
    check_specs=TABLE_CHECKS,
    can_subset=False,
)
def tables_and_marts(context: dg.AssetExecutionContext, agentlake: AgentlakeResource):
    """Merge what landed into the DuckLake tables, one transaction for all changed sources, then
    the touched projects' mart rows (warehouse/sql/marts) in a second, published with them: no
    reader sees new tables with old marts. One step, not a step for the tables and one for the
    marts: the second cost Dagster's step events and a connection of its own, for counts
    (docs/BENCHMARKS.md)."""
    layout = agentlake.layout()
    result = refresh(layout.lake, layout.warehouse)  # the marts too, if anything changed or was pending
    counts, dupes, missing = checked(layout.warehouse, lambda con: (
        lakewide.count_rows(con, [t.name for t in ALL_TABLES] + list(MARTS), "lake.main"),  # one statement
        lakewide.duplicate_keys(con, result.source_ids),  # the sources this merge replaced
        lakewide.orphans(con, result.source_ids)))
    for table in ALL_TABLES:
        yield dg.MaterializeResult(asset_key=table.name, metadata={
            "rows": counts[table.name], "rows_inserted": result.rows.get(table.name, 0),
            "sources_merged": result.merged, "sources_removed": result.removed})
    for table, key in KEYED.items():
        yield dg.AssetCheckResult(asset_key=key, check_name="keys_unique", passed=not dupes[table],
                                  metadata={"duplicates": dupes[table]})
    for child, key in CHILDREN.items():
        found = {ref: n for ref, n in missing.items() if ref.startswith(f"{child}.")}
        yield dg.AssetCheckResult(asset_key=key, check_name="no_orphans", passed=not any(found.values()),
                                  metadata={"orphans": str(found)})
    for name in MARTS:
        yield dg.MaterializeResult(asset_key=name, metadata={"rows": counts[name]})
    if result.waiting:
        context.log.warning(f"{len(result.waiting)} sources were being written and wait for the next merge")
