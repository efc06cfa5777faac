import dagster as dg

from pipelines.defs.partitions import sources_partitions
from pipelines.defs.resources import AgentlakeResource, ConfigProblem
from pipelines.defs.sensors import batch_request, ingest_job
from pipelines.runner import contiguous_batches


# the UI shows the description, not the docstring
DESCRIPTION = ("Every night at 03:00 UTC, re-read every source found now (fingerprints ignored): a safety net "
               "for anything missed. A partition whose sources are gone stays registered (its history stays in "
               "the lake) and is not attempted: it could only fail.")


# UTC, said and set: a schedule without a time zone runs at 03:00 UTC whatever the machine's
@dg.schedule(job=ingest_job, cron_schedule="0 3 * * *", execution_timezone="UTC", description=DESCRIPTION,
             default_status=dg.DefaultScheduleStatus.RUNNING)
def daily_full_refresh(context: dg.ScheduleEvaluationContext, agentlake: AgentlakeResource):
    registered = sources_partitions.get_partition_keys(dynamic_partitions_store=context.instance)
    try:
        found = {s.dagster_partition for s in agentlake.discover()[0].values()}
    except ConfigProblem as exc:  # said in one line, as the sensors say it
        return dg.SkipReason(exc.description)
    keys = [key for key in registered if key in found]
    if not keys:
        return dg.SkipReason("no registered partition has sources found now" if registered
                             else "no sources registered yet")
    config = {"ops": {"landing": {"config": {"full_refresh": True}}}}
    day = f"{context.scheduled_execution_time:%Y-%m-%d}"
    # one run per range of neighbours in the partition order: a range covers every key between
    # its ends, so a gone partition splits it
    return [batch_request(batch, f"full-refresh-{day}-{batch[0]}", config)
            for batch in contiguous_batches(keys, registered)]
