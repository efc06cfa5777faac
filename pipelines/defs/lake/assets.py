import dagster as dg

from pipelines.defs.lake.checks import CHECK_SPECS, LANDING, check_results
from pipelines.defs.partitions import sources_partitions
from pipelines.defs.resources import AgentlakeResource, Reporter
from warehouse.ingest import RunSummary, clean_stale_staging, ingest_many, mark_pending, record_run

# Extraction, one partition per source (LANDING): the only per-source bookkeeping Dagster keeps.
# The curated tables downstream are updated in one merge per run (pipelines/defs/warehouse).


class IngestConfig(dg.Config):
    full_refresh: bool = False  # re-read sources even when their fingerprint is unchanged
    run_id: str = ""  # id recorded in `sources`; the CLI passes one id for its whole run


@dg.multi_asset(
    specs=[dg.AssetSpec(LANDING, group_name="extract", kinds={"parquet"},
                        description="Each source's rows, one Parquet file per table: "
                                    "`_landing/<machine>/<user>/<provider>/<source_id>/<table>.parquet`.")],
    check_specs=CHECK_SPECS,
    partitions_def=sources_partitions,
    backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=50),
    pool="source_snapshot",
    can_subset=False,
)
def landing(context: dg.AssetExecutionContext, config: IngestConfig, agentlake: AgentlakeResource,
            reporter: dg.ResourceParam[Reporter]):
    """Snapshot and normalise every source in the run's partitions, and land its rows."""
    layout = agentlake.layout()
    found, problems = agentlake.discover()
    for problem in problems:
        context.log.warning(problem)
    clean_stale_staging(layout)
    mark_pending(layout)
    summary = RunSummary(config.run_id or context.run.run_id, problems=problems)
    keys = context.partition_keys
    missing = [k for k in keys if k not in found]
    if missing:  # registered once, not found now: its landed rows stay in the lake
        raise dg.Failure(description="no longer discovered, so not re-read (its rows stay in the lake): "
                                     + ", ".join(missing))
    todo = [found[k] for k in keys]
    for i, result in enumerate(ingest_many(todo, layout, summary.run_id, force=config.full_refresh), 1):
        summary.results.append(result)
        if result.status == "failed":  # the rest is in the partition's metadata and the run log
            context.log.warning(f"{result.source.partition_key}: {result.error}")
        reporter.source_done(i, len(todo), result)
    problem = record_run(layout, summary.run_id, summary.results)
    if problem:
        context.log.warning(problem)
    for result in summary.results:  # each partition's materialization carries its own source's counts
        context.add_asset_metadata(partition_metadata(result), partition_key=result.source.partition_key)
    yield dg.MaterializeResult(asset_key=LANDING)
    yield from check_results(layout, summary)
    failed = [r for r in summary.results if r.status == "failed"]
    if failed:
        raise dg.Failure(
            description="; ".join(f"{r.source.partition_key}: {r.error}" for r in failed),
            metadata={"failed_sources": len(failed)},
        )


def partition_metadata(result) -> dict:
    """One source's outcome: its status, rows per table, time and error."""
    metadata = {"status": result.status, "duration_s": result.duration_s}
    metadata.update({f"rows_{table}": n for table, n in result.rows.items()})
    if result.error:
        metadata["error"] = result.error
    return metadata
