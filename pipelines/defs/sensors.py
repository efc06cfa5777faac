import hashlib
import json
import time
from collections import defaultdict

import dagster as dg

from pipelines.defs.lake.assets import landing
from pipelines.defs.warehouse.assets import tables_and_marts
from pipelines.defs.partitions import keys_after, partition_changes, sources_partitions
from pipelines.defs.resources import AgentlakeResource, ConfigProblem
from pipelines.runner import contiguous_batches, partition_tags
from transforms.providers import PROVIDERS
from warehouse.lake.layout import Layout
from warehouse.land.landing_files import landed_files
from warehouse.land.source_state import SourceStates, Verdict

ingest_job = dg.define_asset_job("ingest_sources", selection=[landing])
# the tables and marts merged alone: what landed and waits, when nothing else will merge it
merge_job = dg.define_asset_job("merge_landed", selection=[tables_and_marts])
# a marker this old, with no landing to request, was left behind: the automation sensor merges
# a run's landing within its minute, and an `agentlake ingest` its own at once
MERGE_WAITED_SECONDS = 120


def batch_request(batch: list[str], run_key: str, run_config: dict) -> dg.RunRequest:
    """A run of `ingest_job` over a range of neighbouring partitions (one: its partition key)."""
    single = len(batch) == 1
    return dg.RunRequest(run_key=run_key, run_config=run_config, partition_key=batch[0] if single else None,
                         tags=None if single else partition_tags(batch), job_name=ingest_job.name)


@dg.sensor(jobs=[ingest_job, merge_job], minimum_interval_seconds=300, default_status=dg.DefaultSensorStatus.RUNNING)
def discover_sources(context: dg.SensorEvaluationContext, agentlake: AgentlakeResource):
    """Add a partition for each new agent and project; request the partitions with a new or
    changed source that the lake does not hold as it is (held_as_they_are), neighbours in the
    partition order sharing one run, for those sources; drop the per-source partitions an older
    version registered. With none to request, a merge of what landed and was left waiting
    (merge_left_waiting).

    The cursor holds each source's fingerprint (size and mtime of the db and its -wal), so
    nothing is opened and unchanged sources cost nothing.
    """
    try:
        found, problems = agentlake.discover()
        layout = agentlake.layout()  # once a tick: each reads config.toml again
    except ConfigProblem as exc:
        return dg.SkipReason(exc.description)
    for problem in problems:
        context.log.warning(problem)
    seen = json.loads(context.cursor) if context.cursor else {}
    current = {key: PROVIDERS[s.provider].fingerprint(s) for key, s in found.items() if not s.skip_reason}
    new = [found[key] for key, fp in current.items() if seen.get(key) != fp]
    held = held_as_they_are(layout, new, current)
    changed = defaultdict(dict)
    for source in new:
        if source.partition_key not in held:
            changed[source.dagster_partition][source.partition_key] = current[source.partition_key]
    registered = sources_partitions.get_partition_keys(dynamic_partitions_store=context.instance)
    partition_requests = partition_changes(set(registered), {s.dagster_partition for s in found.values()},
                                           lambda agents: SourceStates(layout).partitions(agents))
    # a run per range of neighbours: a partition each cost a run's set-up, and
    # after a demo ingest a run per partition took far longer than one run (docs/BENCHMARKS.md,
    # "Figures behind the code's choices"). A run reads its partitions' changed sources only: one
    # new session of a project with a thousand leaves the others alone
    requests = []
    for batch in contiguous_batches(list(changed), keys_after(registered, partition_requests)):
        fps = {key: fp for partition in batch for key, fp in changed[partition].items()}
        span = batch[0] if len(batch) == 1 else f"{batch[0]}...{batch[-1]}"
        requests.append(batch_request(batch, f"{span}:{_digest(fps)}",
                                      {"ops": {"landing": {"config": {"sources": sorted(fps)}}}}))
    if not requests:
        requests += merge_left_waiting(layout, context.instance)
    # a tick that requests no run says why (Dagster's own words were "returned an empty result",
    # after a tick that found nothing as after one that added partitions)
    added = sum(len(r.partition_keys) for r in partition_requests if isinstance(r, dg.AddDynamicPartitionsRequest))
    said = (f"{len(found)} sources found, {len(new)} new or changed since the last tick, "
            f"{len(new) - sum(len(c) for c in changed.values())} of them as the lake holds them; "
            f"{added} partitions added" if found else "no source found: each agent's home is empty or not there "
            "(`agentlake sources` lists what discovery finds)")
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=partition_requests,
        cursor=json.dumps({**seen, **current}, sort_keys=True),
        skip_reason=None if requests else said,
    )


IN_PROGRESS = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
               dg.DagsterRunStatus.STARTED]


def merge_left_waiting(layout: Layout, instance, now: float | None = None) -> list:
    """A merge of what landed and waits for one that nothing else will run: Dagster's run landed
    beside an `agentlake ingest`, whose merge started before and whose tables, reported after,
    looked newer than the landing (a trial: two runs' sources stayed unmerged). Requested once
    the marker is MERGE_WAITED_SECONDS old and no run is queued or running (a landing, or the
    merge the automation started); again at a later tick if it failed and the marker stays."""
    try:
        marked = layout.pending_marker.stat().st_mtime
    except OSError:
        return []
    if (now if now is not None else time.time()) - marked < MERGE_WAITED_SECONDS:
        return []
    if instance.get_run_records(filters=dg.RunsFilter(statuses=IN_PROGRESS), limit=1):
        return []
    return [dg.RunRequest(job_name=merge_job.name)]


def held_as_they_are(layout: Layout, sources: list, fingerprints: dict[str, str]) -> set[str]:
    """The sources the lake holds as they are now (their state's verdict: unchanged), by partition
    key: landed by `agentlake ingest`, or by a run this cursor does not know of. A run for them
    would read nothing and then merge again: a new Dagster home or cursor (`agentlake dev` on an
    ingested home) launched one over every partition, then rebuilt the tables and marts. None while
    a merge is due (what landed waits for it, or no warehouse was built yet): the merge the run's
    landing triggers is what is left to do, as `agentlake ingest` does it."""
    if not sources or layout.merge_due:
        return set()
    try:
        landed = landed_files(layout) if layout.remote else None  # one listing, not one per source
    except OSError:  # the lake cannot be listed: the runs say why
        return set()
    states = SourceStates(layout)
    return {s.partition_key for s in sources if states.verdict(
        s, states.of(s.provider, s.source_id), fingerprints[s.partition_key], landed) is Verdict.UNCHANGED}


def _digest(fingerprints: dict) -> str:
    return hashlib.sha256(json.dumps(fingerprints, sort_keys=True).encode()).hexdigest()[:16]
