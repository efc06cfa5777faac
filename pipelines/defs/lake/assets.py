from collections import defaultdict
from itertools import chain

import dagster as dg

from pipelines.cli_runs import capped, partition_metadata, said
from pipelines.defs.lake.checks import CHECK_SPECS, LANDING, check_results
from pipelines.defs.partitions import sources_partitions
from pipelines.defs.resources import AgentlakeResource
from warehouse.land.ingest import Run, RunSummary, clean_stale_staging, land, mark_pending, record_run, settle
from warehouse.land.landing_files import landed_files

# Extraction, one partition per agent and project (Source.dagster_partition): the only per-source
# bookkeeping Dagster keeps. The curated tables downstream are updated in one merge per run
# (pipelines/defs/warehouse).


class IngestConfig(dg.Config):
    full_refresh: bool = False  # re-read sources even when their fingerprint is unchanged
    run_id: str = ""  # id recorded in `sources` (empty: the Dagster run's own)
    # the sources to read, by their partition_key; empty: every source of the run's partitions
    sources: list[str] = []


@dg.multi_asset(
    specs=[dg.AssetSpec(LANDING, group_name="extract", kinds={"parquet"},
                        description="Each source's rows, one Parquet file per table: "
                                    "`_landing/<machine>/<user>/<provider>/<source_id>/<table>.parquet`.")],
    check_specs=CHECK_SPECS,
    partitions_def=sources_partitions,
    # one run per contiguous range, as the sensor and the schedule launch it: a run reads
    # its sources in parallel processes and is merged once, a partition that fails is reported
    # failed alone (below), and `dagster asset materialize --partition-range` accepts only this
    backfill_policy=dg.BackfillPolicy.single_run(),
    pool="source_snapshot",
    can_subset=False,
)
def landing(context: dg.AssetExecutionContext, config: IngestConfig, agentlake: AgentlakeResource):
    """Snapshot and normalise every source in the run's partitions, and land its rows."""
    layout = agentlake.layout()
    found, problems = agentlake.discover()
    for problem in problems:
        context.log.warning(problem)
    clean_stale_staging(layout)
    summary = RunSummary(config.run_id or context.run.run_id, problems=problems)
    keys = set(context.partition_keys)
    in_run = sorted((s for s in found.values() if s.dagster_partition in keys), key=lambda s: s.partition_key)
    missing = sorted(keys - {s.dagster_partition for s in in_run})
    gone = f"{GONE}: " + ", ".join(missing)
    if missing and not in_run:  # nothing to read: failed before any partition is marked done
        raise dg.Failure(description=gone)
    wanted = set(config.sources)
    todo = [s for s in in_run if not wanted or s.partition_key in wanted]
    # sources the CLI landed before the sensor saw them are settled here, as the CLI settles them,
    # without starting worker processes for them (docs/BENCHMARKS.md); a run that settles every
    # source, one or many, then leaves no merge due
    run = Run(layout, summary.run_id, config.full_refresh)
    settled, rest = ([], todo) if config.full_refresh else _settled_here(todo, run)
    # what lands waits for a merge (`land`); a run that settles every source leaves none due (the
    # sensor then asked for its sources again, and the tables were rebuilt)
    results = chain(settled, land(rest, run))
    for i, result in enumerate(results, 1):
        summary.results.append(result)
        # progress in the run's log as each source is done
        (context.log.warning if result.status == "failed" else context.log.info)(progress_line(i, len(todo), result))
        for warning in capped(said(result)[1]):  # what was unknown or bad, as the CLI's summary says it
            context.log.warning(f"{result.source.partition_key}: {warning}")
    problem = record_run(layout, summary.run_id, summary.results)
    if problem:
        context.log.warning(problem)
    elif any(r.status == "ok" for r in summary.results):  # the run log's own file waits for a merge too
        mark_pending(layout)
    by_partition = defaultdict(list)
    for result in summary.results:
        by_partition[result.source.dagster_partition].append(result)
    failed = [f"{r.source.partition_key}: {r.error}" for r in summary.results if r.status == "failed"]
    if missing:  # registered once, not found now: its landed rows stay in the lake
        failed.append(gone)
    broken = {r.source.dagster_partition for r in summary.results if r.status == "failed"} | set(missing)
    if not broken:
        for key, results in sorted(by_partition.items()):  # each partition's materialization: its own sources
            context.add_asset_metadata(partition_metadata(results), partition_key=key)
        yield dg.MaterializeResult(asset_key=LANDING)
    else:
        # the run's output would mark every partition of its range materialised, the failed and
        # gone ones too: the ones that landed are materialised one by one, the step then fails,
        # and Dagster shows the rest of the range failed
        for key in sorted(keys - broken):
            yield dg.AssetMaterialization(asset_key=LANDING, partition=key,
                                          metadata=partition_metadata(by_partition[key]) if by_partition[key] else None)
    yield from check_results(layout, summary)
    if failed:
        raise dg.Failure(description="; ".join(failed), metadata={
            "failed_sources": len(failed), "failed_partitions": ", ".join(sorted(broken))})


def _settled_here(todo: list, run: Run) -> tuple[list, list]:
    try:
        landed = landed_files(run.layout) if run.layout.remote else None  # one listing, not one per source
    except OSError:  # the lake cannot be listed: each source's own attempt says why
        return [], todo
    return settle(todo, run, landed)


GONE = "no longer discovered, so not re-read (its rows stay in the lake)"


def progress_line(index: int, total: int, result) -> str:
    """One source done, as the run's log shows it: partition, status, rows or the error."""
    s = result.source
    detail = result.error or ", ".join(f"{n:,} {table}" for table, n in result.rows.items() if n)
    return (f"[{index}/{total}] {s.dagster_partition}: {result.status}{', ' + detail if detail else ''} "
            f"({s.partition_key}, {result.duration_s:.2f}s)")
