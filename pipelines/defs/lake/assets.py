import dagster as dg

from pipelines.defs.lake.checks import CHECK_SPECS, check_results
from pipelines.defs.partitions import sources_partitions
from pipelines.defs.resources import AgentlakeResource, Reporter
from transforms.contract import ALL_TABLES
from warehouse.ingest import RunSummary, clean_stale_staging, ingest_many

# One asset for all the lake tables of a source: Dagster records an event per asset and
# partition, and eight assets made that bookkeeping cost more than the ingestion itself
# (35 s for 300 sources). The tables are listed in the description and metadata.
LAKE = dg.AssetKey(["lake"])


class IngestConfig(dg.Config):
    full_refresh: bool = False  # re-read sources even when their fingerprint is unchanged
    run_id: str = ""  # id recorded in `sources`; the CLI passes one id for its whole run


@dg.multi_asset(
    specs=[dg.AssetSpec(LAKE, group_name="lake", description="The lake's tables (hive Parquet): "
                        + ", ".join(f"`{t.name}`" for t in ALL_TABLES) + ", one file each per date and source.")],
    check_specs=CHECK_SPECS,
    partitions_def=sources_partitions,
    backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=50),
    pool="source_snapshot",
    can_subset=False,
)
def lake_tables(context: dg.AssetExecutionContext, config: IngestConfig, agentlake: AgentlakeResource,
                reporter: dg.ResourceParam[Reporter]):
    """Snapshot, normalise and write every source in the run's partitions."""
    layout = agentlake.layout()
    found, problems = agentlake.discover()
    for problem in problems:
        context.log.warning(problem)
    clean_stale_staging(layout)
    summary = RunSummary(config.run_id or context.run.run_id, problems=problems)
    keys = context.partition_keys
    missing = [k for k in keys if k not in found]
    for key in missing:  # registered once, not found now: its lake files are kept
        context.log.warning(f"{key}: no longer discovered; its lake files are left as they are")
    todo = [found[k] for k in keys if k in found]
    for i, result in enumerate(ingest_many(todo, layout, summary.run_id, force=config.full_refresh), 1):
        summary.results.append(result)
        context.log.info(f"{result.source.partition_key}: {result.status} {result.error or ''}".rstrip())
        reporter.source_done(i, len(todo), result)
    metadata = {f"rows_{name}": n for name, n in summary.rows.items()}
    metadata.update({f"sources_{status}": n for status, n in summary.by_status.items()})
    yield dg.MaterializeResult(asset_key=LAKE, metadata=metadata)
    yield from check_results(layout.lake, summary)
    failed = [r for r in summary.results if r.status == "failed"]
    if failed:
        raise dg.Failure(
            description="; ".join(f"{r.source.partition_key}: {r.error}" for r in failed),
            metadata={"failed_sources": len(failed)},
        )
