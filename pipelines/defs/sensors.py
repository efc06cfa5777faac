import hashlib
import json
from collections import defaultdict

import dagster as dg

from pipelines.defs.lake.assets import landing
from pipelines.defs.partitions import partition_changes, sources_partitions
from pipelines.defs.resources import AgentlakeResource
from transforms.providers import PROVIDERS

ingest_job = dg.define_asset_job("ingest_sources", selection=[landing])


@dg.sensor(job=ingest_job, minimum_interval_seconds=300, default_status=dg.DefaultSensorStatus.RUNNING)
def discover_sources(context: dg.SensorEvaluationContext, agentlake: AgentlakeResource):
    """Add a partition for each new agent and project; request a run of each partition with a
    new or changed source, for those sources; drop the per-source partitions an older version
    registered.

    The cursor holds each source's fingerprint (size and mtime of the db and its -wal), so
    nothing is opened and unchanged sources cost nothing.
    """
    found, problems = agentlake.discover()
    for problem in problems:
        context.log.warning(problem)
    seen = json.loads(context.cursor) if context.cursor else {}
    current = {key: PROVIDERS[s.provider].fingerprint(s) for key, s in found.items() if not s.skip_reason}
    changed = defaultdict(dict)
    for key, fp in current.items():
        if seen.get(key) != fp:
            changed[found[key].dagster_partition][key] = fp
    registered = set(sources_partitions.get_partition_keys(dynamic_partitions_store=context.instance))
    partitions = {s.dagster_partition for s in found.values()}
    # a run reads its partition's changed sources only: one new session of a project with a
    # thousand leaves the others alone
    requests = [dg.RunRequest(partition_key=partition, run_key=f"{partition}:{_digest(fps)}",
                              run_config={"ops": {"landing": {"config": {"sources": sorted(fps)}}}})
                for partition, fps in sorted(changed.items())]
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=partition_changes(registered, partitions),
        cursor=json.dumps({**seen, **current}, sort_keys=True),
    )


def _digest(fingerprints: dict) -> str:
    return hashlib.sha256(json.dumps(fingerprints, sort_keys=True).encode()).hexdigest()[:16]
