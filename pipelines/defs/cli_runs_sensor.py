"""The `agentlake ingest` runs, as Dagster shows them. The CLI lands and merges without Dagster
(pipelines.runner) and leaves each run in the home (pipelines.cli_runs); this sensor reports it as
the materializations a Dagster run of the same work records: the `landing` partitions it read
(one whose source failed as an observation, with the error), then the tables, `model_names`, the
search index and the marts when it merged. The checks are evaluated once a tick, on a reader of
the warehouse as it is then: the landing checks per run, the tables' checks (keys, parents,
budgets) over the sources the tick's runs merged, and the tables' and marts' row counts given to
the latest run's materializations. The fields are the Dagster run's own (pipelines/defs)."""

import json

import dagster as dg

from pipelines import cli_runs
from pipelines.budget_check import budget_check_result
from pipelines.defs.lake.assets import LANDING
from pipelines.defs.lake.checks import landing_check_fields
from pipelines.defs.partitions import sources_partitions
from pipelines.defs.resources import AgentlakeResource, ConfigProblem
from pipelines.defs.warehouse.assets import (BUDGET_CHECK, SEARCH_INDEX, Looked, look_after_merge,
                                             search_index_metadata, table_check_fields)
from transforms.contract import ALL_TABLES
from warehouse.catalog import checks as lakewide
from warehouse.catalog import model_names
from warehouse.catalog.marts import MARTS
from warehouse.lake.config import settings_file

TAG = "agentlake/cli_run"  # each reported event's tag: the run id the CLI printed and `sources` records
MOST = 20  # runs reported per tick: a backlog (the CLI keeps 100) is reported over the next ticks
TABLES = [t.name for t in ALL_TABLES]


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def cli_runs_reported(context: dg.SensorEvaluationContext, agentlake: AgentlakeResource):
    """Report the `agentlake ingest` runs the home keeps (oldest first) as materializations and
    check evaluations; the cursor names the files reported, removed at the next tick."""
    try:
        layout = agentlake.layout()
    except ConfigProblem as exc:
        return dg.SkipReason(exc.description)
    runs = cli_runs.after(layout, json.loads(context.cursor) if context.cursor else [], MOST)
    if not runs:
        return dg.SensorResult(skip_reason="no `agentlake ingest` run since the last one reported", cursor="[]")
    records = [record for _, record in runs if record]
    registered = set(sources_partitions.get_partition_keys(dynamic_partitions_store=context.instance))
    new = sorted({key for record in records for key in record["partitions"]} - registered)
    merges = [record for record in records if record["merge"] is not None]
    merged = sorted({i for record in merges for i in record["merge"]["source_ids"]})
    found = _looked(context, layout, merges[-1]["warehouse"], merged) if merges else None
    events = []
    for record in records:
        events += _landing(record)
        if record["merge"] is not None:
            events += _merged(record, found if record is merges[-1] else None)
    # Dagster shows a tick without a run request as skipped: its reason says what it reported (it
    # said "Sensor function returned an empty result", a tick that did the work looking like a no-op)
    said = ", ".join(record["run_id"] for record in records)
    return dg.SensorResult(
        asset_events=events, cursor=json.dumps([name for name, _ in runs]),
        dynamic_partitions_requests=[sources_partitions.build_add_request(new)] if new else [],
        skip_reason=f"reported {len(records)} `agentlake ingest` run(s) as {len(events)} events, no run to "
                    f"launch: {said}")


def _landing(record: dict) -> list:
    tags = {TAG: record["run_id"]}
    events = []
    for key, metadata in record["partitions"].items():
        kind = dg.AssetObservation if metadata["status"] == "failed" else dg.AssetMaterialization
        events.append(kind(asset_key=LANDING, partition=key, metadata=metadata, tags=tags))
    if record["partitions"]:
        events += [dg.AssetCheckEvaluation(**fields) for fields in landing_check_fields(record["landing_checks"])]
    return events


def _looked(context, layout, warehouse: str, merged: list[str]) -> Looked | None:
    """The checks after the runs' merges, on a reader of `warehouse` (the one they merged into);
    None, said in the tick's log, when it cannot be read (moved, deleted, a config.toml that does
    not parse): the runs are reported without."""
    try:
        return lakewide.checked(warehouse, lambda con: look_after_merge(con, merged, settings_file(layout)))
    except Exception as exc:  # noqa: BLE001 (one tick's checks; the materializations still go)
        context.log.warning(f"could not check the warehouse at {warehouse}: {' '.join(str(exc).split())}")
        return None


def _merged(record: dict, found: Looked | None) -> list:
    """The tables', marts' and index's materializations of a run that merged; with `found` (the
    tick's latest merge), their row counts and the tables' checks."""
    merge, tags = record["merge"], {TAG: record["run_id"]}
    rows = (lambda name: {"rows": found.counts[name]}) if found else (lambda name: {})
    events = [dg.AssetMaterialization(asset_key=name, tags=tags, metadata={
        **rows(name), "rows_inserted": merge["rows_inserted"].get(name, 0),
        "sources_merged": merge["sources_merged"], "sources_removed": merge["sources_removed"]}) for name in TABLES]
    events += [dg.AssetMaterialization(asset_key=name, tags=tags, metadata=rows(name))
               for name in (model_names.NAME, *MARTS)]
    index = merge["search"]
    events.append(dg.AssetMaterialization(asset_key=SEARCH_INDEX.key, tags=tags, metadata=search_index_metadata(
        index and (index["documents"], index["rebuilt"], index["sources_read"], index["sources_removed"]))))
    if not found:
        return events
    note = None if found.merged else "No source was merged in these runs: nothing was checked."
    events += [dg.AssetCheckEvaluation(**fields) for fields in table_check_fields(found, note)]
    budget = budget_check_result(found.budgets, found.spend, found.unknown, found.config_file,
                                 asset_key=BUDGET_CHECK.asset_key, check_name=BUDGET_CHECK.name)
    events.append(dg.AssetCheckEvaluation(asset_key=BUDGET_CHECK.asset_key, check_name=BUDGET_CHECK.name,
                                          passed=budget.passed, severity=budget.severity,
                                          description=budget.description, metadata=budget.metadata))
    return events
