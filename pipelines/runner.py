"""Run the Dagster assets in-process for the CLI, with progress and a summary.

Unchanged and skipped sources are settled without a Dagster run (nothing is materialised for
them); each changed source gets one partitioned run of `lake_tables`, as the sensor would
request; then `warehouse/views` is rebuilt.
"""

import os
import sys
import warnings
from importlib import resources
from pathlib import Path

from transforms.provider import DiscoverOptions
from transforms.providers import PROVIDERS
from warehouse import state as state_store
from warehouse.ingest import RunSummary, SourceResult, discover_sources, ingest_source, new_run_id
from warehouse.layout import Layout

QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def dagster_env(layout: Layout) -> dict:
    """The environment for Dagster: a persistent DAGSTER_HOME (ours unless the user set one)."""
    env = dict(os.environ)
    home = Path(env.get("DAGSTER_HOME") or layout.dagster_home)
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(resources.files("pipelines").joinpath("dagster.yaml").read_text())
    env["DAGSTER_HOME"] = str(home)
    env["AGENTLAKE_HOME"] = str(layout.home)
    return env


class PrintingReporter:
    def __init__(self, quiet: bool = False, stream=None):
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.results = []
        self.done = 0
        self.total = 0

    def source_done(self, index, total, result) -> None:
        self.results.append(result)
        self.done += 1
        if self.quiet:
            return
        s = result.source
        detail = result.error or (f"{result.rows.get('messages', 0):,} messages, {result.rows.get('parts', 0):,} parts"
                                  if result.status == "ok" else "")
        width = len(str(self.total))
        print(f"[{self.done:>{width}}/{self.total}] {result.status:<9} {s.provider} {s.project:<24} "
              f"{detail} ({result.duration_s:.2f}s)", file=self.stream, flush=True)


def _unchanged(source, layout: Layout) -> bool:
    previous = state_store.load(layout.state_dir, source.provider, source.source_id)
    return previous.fingerprint == PROVIDERS[source.provider].fingerprint(source) and all(
        (layout.lake / rel).exists() for rel in previous.files
    )


def run_ingest(layout: Layout, options: DiscoverOptions, *, full_refresh: bool = False,
               quiet: bool = False) -> RunSummary:
    os.environ["DAGSTER_HOME"] = dagster_env(layout)["DAGSTER_HOME"]
    warnings.filterwarnings("ignore")  # Dagster's beta/preview notices are not for end users
    import dagster as dg

    from pipelines.defs.lake.assets import lake_tables
    from pipelines.defs.resources import AgentlakeResource
    from pipelines.defs.warehouse.assets import warehouse_views

    sources, problems = discover_sources(options)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    reporter = PrintingReporter(quiet)
    reporter.total = len(sources)
    summary = RunSummary(new_run_id(), problems=problems)
    resource = AgentlakeResource(
        home=str(layout.home), lake=str(layout.lake), warehouse=str(layout.warehouse),
        extra_stores=list(options.extra_stores), extra_roots=list(options.extra_roots),
        use_default=options.use_default,
    )
    with dg.DagsterInstance.get() as instance:
        known = set(instance.get_dynamic_partitions("sources"))
        new_keys = [s.partition_key for s in sources if s.partition_key not in known]
        if new_keys:
            instance.add_dynamic_partitions("sources", new_keys)
        for source in sources:
            if source.skip_reason or (not full_refresh and _unchanged(source, layout)):
                reporter.source_done(0, len(sources), ingest_source(source, layout, summary.run_id))
                continue
            before = reporter.done
            run = dg.materialize(
                [lake_tables], partition_key=source.partition_key, instance=instance, raise_on_error=False,
                resources={"agentlake": resource, "reporter": reporter},
                run_config={**QUIET_LOGS, "ops": {"lake_tables": {"config": {"full_refresh": full_refresh, "run_id": summary.run_id}}}},
            )
            if reporter.done == before:  # the run died before reaching the source
                reporter.source_done(0, len(sources), SourceResult(
                    source, "failed", error=f"Dagster run {run.run_id} failed before ingesting the source"))
        views = dg.materialize([warehouse_views], instance=instance, resources={"agentlake": resource},
                               run_config=QUIET_LOGS, raise_on_error=False)
        if not views.success:
            summary.problems.append(f"could not build the warehouse at {layout.warehouse}")
    summary.results = reporter.results
    return summary


def print_summary(summary: RunSummary, layout: Layout, stream=None) -> None:
    stream = stream or sys.stdout
    counts = summary.by_status
    print(f"\nsources: {counts['ok']} ok, {counts['unchanged']} unchanged, {counts['skipped']} skipped, "
          f"{counts['failed']} failed", file=stream)
    rows = summary.rows
    print("rows written: " + ", ".join(f"{t} {n:,}" for t, n in rows.items()), file=stream)
    for r in summary.results:
        if r.status == "failed":
            print(f"FAILED  {r.source.path}: {r.error}", file=stream)
        elif r.status == "skipped":
            print(f"skipped {r.source.project_path}: {r.error}", file=stream)
        for w in r.warnings:
            print(f"warning {r.source.partition_key}: {w}", file=stream)
    for problem in summary.problems:
        print(f"problem: {problem}", file=stream)
    print(f"lake: {layout.lake}\nwarehouse: {layout.warehouse}", file=stream)
