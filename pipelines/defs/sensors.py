import json

import dagster as dg

from pipelines.defs.lake.assets import landing
from pipelines.defs.partitions import sources_partitions
from pipelines.defs.resources import AgentlakeResource
from transforms.providers import PROVIDERS

ingest_job = dg.define_asset_job("ingest_sources", selection=[landing])


@dg.sensor(job=ingest_job, minimum_interval_seconds=300, default_status=dg.DefaultSensorStatus.RUNNING)
def discover_sources(context: dg.SensorEvaluationContext, agentlake: AgentlakeResource):
    """Add a partition for each new source; request a run for each new or changed one.

    The cursor holds each source's fingerprint (size and mtime of the db and its -wal), so
    nothing is opened and unchanged sources cost nothing.
    """
    found, problems = agentlake.discover()
    for problem in problems:
        context.log.warning(problem)
    seen = json.loads(context.cursor) if context.cursor else {}
    current = {key: PROVIDERS[s.provider].fingerprint(s) for key, s in found.items() if not s.skip_reason}
    new_keys = [k for k in found if not sources_partitions.has_partition_key(k, dynamic_partitions_store=context.instance)]
    requests = [
        dg.RunRequest(partition_key=key, run_key=f"{key}:{fp}")
        for key, fp in sorted(current.items())
        if seen.get(key) != fp
    ]
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[sources_partitions.build_add_request(new_keys)] if new_keys else [],
        cursor=json.dumps({**seen, **current}, sort_keys=True),
    )
