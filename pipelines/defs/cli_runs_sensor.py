"""The `agentlake ingest` runs, as Dagster shows them. The CLI lands and merges without Dagster
(pipelines.runner) and leaves each run in the home (pipelines.cli_runs); this sensor reports it as
the materializations a Dagster run of the same work records: the `landing` partitions it read,
then the tables, `model_names`, the search index and the marts when it merged, with their checks.
The tables' checks (keys, parents, budgets) are evaluated here, on a reader of the warehouse as
it is now, over the sources the run merged."""

import dagster as dg

from pipelines import cli_runs
from pipelines.budget_check import budget_check_result, spend_of
from pipelines.defs.lake.assets import LANDING
from pipelines.defs.partitions import sources_partitions
from pipelines.defs.resources import AgentlakeResource
from pipelines.defs.warehouse.assets import BUDGET_CHECK, CHILDREN, KEYED, SEARCH_INDEX
from transforms.contract import ALL_TABLES
from warehouse.catalog import checks as lakewide
from warehouse.catalog import model_names
from warehouse.catalog.marts import MARTS

TAG = "agentlake/cli_run"  # each reported event's tag: the run id the CLI printed and `sources` records


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def cli_runs_reported(context: dg.SensorEvaluationContext, agentlake: AgentlakeResource):
    """Report each `agentlake ingest` run the home keeps (oldest first) as materializations and
    check results; the cursor is the last run reported."""
    layout = agentlake.layout()
    runs = cli_runs.after(layout, context.cursor)
    if not runs:
        return dg.SkipReason("no `agentlake ingest` run since the last one reported")
    registered = set(sources_partitions.get_partition_keys(dynamic_partitions_store=context.instance))
    new = sorted({key for run in runs for key in run["partitions"]} - registered)
    events = []
    for run in runs:
        events += _landing(run)
        if run["merge"] is not None:
            events += _merged(run, layout)
    return dg.SensorResult(
        asset_events=events, cursor=runs[-1]["run_id"],
        dynamic_partitions_requests=[sources_partitions.build_add_request(new)] if new else [])


def _landing(run: dict) -> list:
    tags = {TAG: run["run_id"]}
    events = [dg.AssetMaterialization(asset_key=LANDING, partition=key, metadata=metadata, tags=tags)
              for key, metadata in run["partitions"].items() if metadata["status"] != "failed"]
    if run["partitions"]:
        events += [dg.AssetCheckEvaluation(asset_key=LANDING, check_name=name, passed=found["passed"],
                                           metadata=found["metadata"], description=found["description"],
                                           severity=_severity(name))
                   for name, found in run["landing_checks"].items()]
    return events


def _severity(name: str):
    return dg.AssetCheckSeverity.WARN if name == "unknown_part_types" else dg.AssetCheckSeverity.ERROR


def _merged(run: dict, layout) -> list:
    merge, tags = run["merge"], {TAG: run["run_id"]}
    merged = merge["source_ids"]

    def look(con):
        return (lakewide.count_rows(con, [t.name for t in ALL_TABLES] + [model_names.NAME] + list(MARTS)),
                lakewide.duplicate_keys(con, merged) if merged else {},
                lakewide.orphans(con, merged) if merged else {},
                spend_of(con, layout.config_file))

    counts, dupes, missing, (budgets, spend, unknown) = lakewide.checked(layout.warehouse, look)
    note = None if merged else "No source was merged in this run: nothing was checked."
    events = [dg.AssetMaterialization(asset_key=t.name, tags=tags, metadata={
        "rows": counts[t.name], "rows_inserted": merge["rows_inserted"].get(t.name, 0),
        "sources_merged": merge["sources_merged"], "sources_removed": merge["sources_removed"]}) for t in ALL_TABLES]
    events += [dg.AssetCheckEvaluation(asset_key=key, check_name="keys_unique", passed=not dupes.get(table),
                                       description=note, metadata={"duplicates": dupes.get(table, 0),
                                                                   "sources_checked": len(merged)})
               for table, key in KEYED.items()]
    for child, key in CHILDREN.items():
        found = {ref: n for ref, n in missing.items() if ref.startswith(f"{child}.")}
        events.append(dg.AssetCheckEvaluation(asset_key=key, check_name="no_orphans", passed=not any(found.values()),
                                              description=note, metadata={"orphans": str(found),
                                                                          "sources_checked": len(merged)}))
    events += [dg.AssetMaterialization(asset_key=name, tags=tags, metadata={"rows": counts[name]})
               for name in (model_names.NAME, *MARTS)]
    index = merge["search"]
    events.append(dg.AssetMaterialization(asset_key=SEARCH_INDEX.key, tags=tags, metadata={
        "documents": index["documents"] if index else "unchanged", "rebuilt": bool(index and index["rebuilt"]),
        "sources_read": index["sources_read"] if index else 0,
        "sources_removed": index["sources_removed"] if index else 0}))
    result = budget_check_result(budgets, spend, unknown, layout.config_file, asset_key=BUDGET_CHECK.asset_key,
                                 check_name=BUDGET_CHECK.name)
    events.append(dg.AssetCheckEvaluation(asset_key=BUDGET_CHECK.asset_key, check_name=BUDGET_CHECK.name,
                                          passed=result.passed, severity=result.severity,
                                          description=result.description, metadata=result.metadata))
    return events

