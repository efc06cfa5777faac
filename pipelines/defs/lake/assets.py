from collections import Counter, defaultdict

import dagster as dg

from pipelines.defs.lake.checks import CHECK_SPECS, LANDING, check_results
from pipelines.defs.partitions import sources_partitions
from pipelines.defs.resources import AgentlakeResource, Reporter
from warehouse.ingest import RunSummary, clean_stale_staging, ingest_many, mark_pending, record_run

# Extraction, one partition per agent and project (Source.dagster_partition): the only per-source
# bookkeeping Dagster keeps. The curated tables downstream are updated in one merge per run
# (pipelines/defs/warehouse).


class IngestConfig(dg.Config):
    full_refresh: bool = False  # re-read sources even when their fingerprint is unchanged
    run_id: str = ""  # id recorded in `sources`; the CLI passes one id for its whole run
    # the sources to read, by their partition_key; empty: every source of the run's partitions
    sources: list[str] = []


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
    keys = set(context.partition_keys)
    in_run = sorted((s for s in found.values() if s.dagster_partition in keys), key=lambda s: s.partition_key)
    missing = sorted(keys - {s.dagster_partition for s in in_run})
    gone = f"{GONE}: " + ", ".join(missing)
    if missing and not in_run:  # nothing to read: failed before any partition is marked done
        raise dg.Failure(description=gone)
    wanted = set(config.sources)
    todo = [s for s in in_run if not wanted or s.partition_key in wanted]
    for i, result in enumerate(ingest_many(todo, layout, summary.run_id, force=config.full_refresh), 1):
        summary.results.append(result)
        if result.status == "failed":  # the rest is in the partition's metadata and the run log
            context.log.warning(f"{result.source.partition_key}: {result.error}")
        reporter.source_done(i, len(todo), result)
    problem = record_run(layout, summary.run_id, summary.results)
    if problem:
        context.log.warning(problem)
    by_partition = defaultdict(list)
    for result in summary.results:
        by_partition[result.source.dagster_partition].append(result)
    for key, results in sorted(by_partition.items()):  # each partition's materialization: its own sources
        context.add_asset_metadata(partition_metadata(results), partition_key=key)
    # a range run reads its other partitions; a gone one is marked done by the run's single
    # output (Dagster records the range as a whole), with its status, and fails the run by name
    for key in missing:
        context.add_asset_metadata({"status": "not found", "sources": 0, "error": GONE}, partition_key=key)
    yield dg.MaterializeResult(asset_key=LANDING)
    yield from check_results(layout, summary)
    failed = [f"{r.source.partition_key}: {r.error}" for r in summary.results if r.status == "failed"]
    if missing:  # registered once, not found now: its landed rows stay in the lake
        failed.append(gone)
    if failed:
        raise dg.Failure(description="; ".join(failed), metadata={"failed_sources": len(failed)})


GONE = "no longer discovered, so not re-read (its rows stay in the lake)"
STATUS_ORDER = ("failed", "ok", "unchanged", "skipped")  # a partition's status: its first present


def partition_metadata(results: list) -> dict:
    """One partition's outcome, from its sources': status, rows per table, time and errors."""
    statuses = Counter(r.status for r in results)
    metadata = {"status": next(s for s in STATUS_ORDER if statuses[s]), "sources": len(results),
                "duration_s": round(sum(r.duration_s for r in results), 3)}
    metadata.update({f"sources_{status}": statuses[status] for status in STATUS_ORDER if statuses[status]})
    rows = Counter()
    for r in results:
        rows.update(r.rows)
    metadata.update({f"rows_{table}": n for table, n in rows.items()})
    errors = [f"{r.source.partition_key}: {r.error}" for r in results if r.error]
    if errors:
        metadata["error"] = "; ".join(errors)
    return metadata
