"""The `agentlake ingest` runs, as Dagster shows them. The CLI lands and merges without Dagster
(pipelines.runner) and leaves each run in the home (pipelines.cli_runs); this sensor reports it as
the materializations a Dagster run of the same work records: the `landing` partitions it read
(one whose source failed as an observation, with the error), then the tables, `model_names`, the
search index and the marts when it merged. The checks are evaluated once a tick, on a reader of
the warehouse as it is then: the landing checks per run, the tables' checks (keys, parents,
budgets) over the sources the tick's runs merged, and the tables' and marts' row counts given to
the latest run's materializations."""

import json
from pathlib import Path
from typing import NamedTuple

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
MOST = 20  # runs reported per tick: a backlog (the CLI keeps 100) is reported over the next ticks
TABLES = [t.name for t in ALL_TABLES]


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def cli_runs_reported(context: dg.SensorEvaluationContext, agentlake: AgentlakeResource):
    """Report the `agentlake ingest` runs the home keeps (oldest first) as materializations and
    check evaluations; the cursor names the files reported, removed at the next tick."""
    layout = agentlake.layout()
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
    return dg.SensorResult(
        asset_events=events, cursor=json.dumps([name for name, _ in runs]),
        dynamic_partitions_requests=[sources_partitions.build_add_request(new)] if new else [])


def _landing(record: dict) -> list:
    tags = {TAG: record["run_id"]}
    events = []
    for key, metadata in record["partitions"].items():
        kind = dg.AssetObservation if metadata["status"] == "failed" else dg.AssetMaterialization
        events.append(kind(asset_key=LANDING, partition=key, metadata=metadata, tags=tags))
    if record["partitions"]:
        events += [dg.AssetCheckEvaluation(asset_key=LANDING, check_name=name, passed=found["passed"],
                                           metadata=found["metadata"], description=found["description"],
                                           severity=_severity(name))
                   for name, found in record["landing_checks"].items()]
    return events


def _severity(name: str):
    return dg.AssetCheckSeverity.WARN if name == "unknown_part_types" else dg.AssetCheckSeverity.ERROR


class _Found(NamedTuple):
    merged: list[str]  # the source ids checked
    counts: dict
    duplicates: dict
    orphans: dict
    budgets: list
    spend: list
    unknown: list
    config_file: Path


def _looked(context, layout, warehouse: str, merged: list[str]) -> _Found | None:
    """Row counts, the keys and parents of the merged sources, and the budgets, on a reader of
    `warehouse` (the one the runs merged into); None, said in the tick's log, when it cannot be
    read (moved, deleted, a config.toml that does not parse): the runs are reported without."""
    def look(con):
        return (lakewide.count_rows(con, TABLES + [model_names.NAME] + list(MARTS)),
                lakewide.duplicate_keys(con, merged) if merged else {},
                lakewide.orphans(con, merged) if merged else {},
                spend_of(con, layout.config_file))

    try:
        counts, dupes, missing, (budgets, spend, unknown) = lakewide.checked(warehouse, look)
        return _Found(merged, counts, dupes, missing, budgets, spend, unknown, layout.config_file)
    except Exception as exc:  # noqa: BLE001 (one tick's checks; the materializations still go)
        context.log.warning(f"could not check the warehouse at {warehouse}: {' '.join(str(exc).split())}")
        return None


def _merged(record: dict, found: _Found | None) -> list:
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
    events.append(dg.AssetMaterialization(asset_key=SEARCH_INDEX.key, tags=tags, metadata={
        "documents": index["documents"] if index else "unchanged", "rebuilt": bool(index and index["rebuilt"]),
        "sources_read": index["sources_read"] if index else 0,
        "sources_removed": index["sources_removed"] if index else 0}))
    if not found:
        return events
    checked = len(found.merged)
    note = None if checked else "No source was merged in these runs: nothing was checked."
    events += [dg.AssetCheckEvaluation(asset_key=key, check_name="keys_unique", passed=not found.duplicates.get(table),
                                       description=note, metadata={"duplicates": found.duplicates.get(table, 0),
                                                                   "sources_checked": checked})
               for table, key in KEYED.items()]
    for child, key in CHILDREN.items():
        orphans = {ref: n for ref, n in found.orphans.items() if ref.startswith(f"{child}.")}
        events.append(dg.AssetCheckEvaluation(asset_key=key, check_name="no_orphans", passed=not any(orphans.values()),
                                              description=note, metadata={"orphans": str(orphans),
                                                                          "sources_checked": checked}))
    budget = budget_check_result(found.budgets, found.spend, found.unknown, found.config_file,
                                 asset_key=BUDGET_CHECK.asset_key, check_name=BUDGET_CHECK.name)
    events.append(dg.AssetCheckEvaluation(asset_key=BUDGET_CHECK.asset_key, check_name=BUDGET_CHECK.name,
                                          passed=budget.passed, severity=budget.severity,
                                          description=budget.description, metadata=budget.metadata))
    return events
