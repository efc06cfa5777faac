import dagster as dg

from pipelines.defs.partitions import sources_partitions
from pipelines.defs.sensors import ingest_job


@dg.schedule(job=ingest_job, cron_schedule="0 3 * * *", default_status=dg.DefaultScheduleStatus.RUNNING)
def daily_full_refresh(context: dg.ScheduleEvaluationContext):
    """Every night, re-read every source (fingerprints ignored): a safety net for anything missed."""
    keys = sources_partitions.get_partition_keys(dynamic_partitions_store=context.instance)
    if not keys:
        return dg.SkipReason("no sources registered yet")
    config = {"ops": {"landing": {"config": {"full_refresh": True}}}}
    return dg.RunRequest(
        run_key=f"full-refresh-{context.scheduled_execution_time:%Y-%m-%d}",
        run_config=config,
        tags={"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]},
    )
