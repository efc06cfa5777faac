"""The central deployment's code location: `dagster dev -m pipelines.central`.

Machines ingest (each runs `agentlake ingest --lake ...` on its own timer) and never need this.
The center is the single writer of the team's tables: every day it merges what every machine
landed into its DuckLake catalog (tables and marts), exports a hive copy for Spark and Trino,
and runs the checks no single machine can run, because each sees only its own files.
The logic is in warehouse/ (views, lakewide); see docs/DEPLOYMENT.md for the deployment.
"""

import os
from datetime import datetime, timedelta, timezone

import dagster as dg

from pipelines.budget_check import DESCRIPTION as BUDGETS, budget_check_result, spend_of
from warehouse.catalog import checks as lakewide
from warehouse.lake.config import load_layout
from warehouse.lake.layout import Layout
from warehouse.lake.storage import under
from warehouse.serve.hive_export import export_tables
from warehouse.catalog.build import build_warehouse, configured_prices, lake_of
from warehouse.catalog.checks import checked
from warehouse.lake.ducklake import connect

TEAM_WAREHOUSE = dg.AssetKey(["team", "warehouse"])
# deploy/dagster.yaml lets one run with this tag at a time: two rebuilds would race to swap the file
ROLE_TAG = {"agentlake/role": "team-warehouse"}
DEFAULT_STALE_HOURS = 72.0  # a laptop shut over a weekend is not yet a problem on Monday morning


class TeamLake(dg.ConfigurableResource):
    """The shared lake and the warehouse file built over it.

    Unset fields come from AGENTLAKE_LAKE, AGENTLAKE_WAREHOUSE and AGENTLAKE_HOME (and that
    home's config.toml), exactly as for the CLI; the staleness limit from
    AGENTLAKE_STALE_AFTER_HOURS, else 72 hours.
    """

    home: str | None = None
    lake: str | None = None
    warehouse: str | None = None
    stale_after_hours: float | None = None

    def layout(self) -> Layout:
        return load_layout(self.home, self.lake, self.warehouse)

    def stale_after(self) -> timedelta:
        """Raises BadStaleHours for an $AGENTLAKE_STALE_AFTER_HOURS that is no number of hours."""
        if self.stale_after_hours:
            return timedelta(hours=self.stale_after_hours)
        raw = (os.environ.get(STALE_VARIABLE) or "").strip()
        try:
            hours = float(raw) if raw else DEFAULT_STALE_HOURS
        except ValueError:
            hours = float("nan")
        if not 0 < hours < float("inf"):
            raise BadStaleHours(f"{STALE_VARIABLE}={raw!r}: give a number of hours above 0 (e.g. 72), or unset it "
                                f"for {DEFAULT_STALE_HOURS:g}")
        return timedelta(hours=hours)


STALE_VARIABLE = "AGENTLAKE_STALE_AFTER_HOURS"


class BadStaleHours(ValueError):
    """$AGENTLAKE_STALE_AFTER_HOURS is not a number of hours above 0."""


@dg.asset(
    key=TEAM_WAREHOUSE,
    group_name="team",
    kinds={"duckdb", "parquet"},
    # Dagster's own freshness (evaluated by the daemon): one missed daily rebuild fails it
    freshness_policy=dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=26)),
)
def team_warehouse(context: dg.AssetExecutionContext, team_lake: TeamLake) -> dg.MaterializeResult:
    """The views and marts over the whole team lake, in one DuckDB file (views only; open it read_only)."""
    layout = team_lake.layout()
    views = build_warehouse(layout.lake, layout.warehouse, prices=configured_prices(layout), home=layout.home)
    exported = export_tables(layout.warehouse, layout.lake)  # for Spark and Trino (no DuckLake reader)
    context.log.info(f"exported {under(layout.lake, f'export/{exported.version}')} for Spark and Trino: "
                     f"{sum(exported.written.values())} files written, {exported.carried} carried over; "
                     f"{len(exported.removed)} versions past their grace removed")
    with connect(layout.warehouse, ours=True) as con:
        facts = lakewide.lake_facts(con)
        lake = lake_of(con)  # the lake URI as stored: never credentials written into it
    context.log.info(f"{len(views)} views over {lake}: {len(facts.machines)} machines, {len(facts.users)} users")
    metadata = {f"rows_{table}": n for table, n in facts.rows.items()}
    metadata.update({
        "lake": lake,
        "path": str(layout.warehouse),
        "machines": len(facts.machines),
        "users": len(facts.users),
        "machine_names": ", ".join(facts.machines) or "none",
        "user_names": ", ".join(facts.users) or "none",
        "last_run_by_machine": dg.MetadataValue.json({m: at.isoformat() for m, at in facts.last_runs.items()}),
    })
    return dg.MaterializeResult(metadata=metadata)


def _describe(counts: dict[str, int]) -> str:
    bad = {name: n for name, n in counts.items() if n}
    return ", ".join(f"{name}: {n}" for name, n in bad.items()) or "none"


@dg.asset_check(asset=TEAM_WAREHOUSE,
                description="No key repeats across the lake: (machine, source_id, key) per table.")
def keys_unique_lakewide(team_lake: TeamLake) -> dg.AssetCheckResult:
    dupes = checked(team_lake.layout().warehouse, lakewide.duplicate_keys)
    return dg.AssetCheckResult(passed=not any(dupes.values()),
                               metadata={"duplicates": _describe(dupes), "duplicate_rows": sum(dupes.values())})


@dg.asset_check(asset=TEAM_WAREHOUSE,
                description="Every message, part, tool call and file row finds its parent in its own source.")
def no_orphans_lakewide(team_lake: TeamLake) -> dg.AssetCheckResult:
    missing = checked(team_lake.layout().warehouse, lakewide.orphans)
    return dg.AssetCheckResult(passed=not any(missing.values()),
                               metadata={"orphans": _describe(missing), "orphan_rows": sum(missing.values())})


@dg.asset_check(asset=TEAM_WAREHOUSE,
                description="Every machine that ever reported ran within the staleness limit (a warning).")
def machines_reporting(team_lake: TeamLake) -> dg.AssetCheckResult:
    try:
        limit = team_lake.stale_after()
    except BadStaleHours as exc:  # said as the check's result, as any failed check: the rebuild stands
        return dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.ERROR, description=str(exc),
                                   metadata={"error": str(exc)})
    with connect(team_lake.layout().warehouse, ours=True) as con:
        runs = lakewide.last_runs(con)
    stale = lakewide.stale_machines(runs, datetime.now(timezone.utc), limit)
    return dg.AssetCheckResult(
        passed=not stale,
        severity=dg.AssetCheckSeverity.WARN,  # a machine off on holiday is news, not a broken lake
        metadata={
            "stale_after_hours": limit.total_seconds() / 3600,
            "machines": len(runs),
            "stale_machines": ", ".join(f"{m} (last run {at:%Y-%m-%d %H:%M} UTC)" for m, at in stale.items()) or "none",
        },
    )


@dg.asset_check(asset=TEAM_WAREHOUSE, description=BUDGETS + " The budgets of the center's config.toml.")
def within_budgets(team_lake: TeamLake) -> dg.AssetCheckResult:
    layout = team_lake.layout()
    with connect(layout.warehouse, ours=True) as con:
        budgets, spend, unknown = spend_of(con, layout.config_file)
    return budget_check_result(budgets, spend, unknown, layout.config_file)


team_refresh = dg.define_asset_job(
    "team_refresh",
    selection=dg.AssetSelection.assets(TEAM_WAREHOUSE),  # its checks come with it
    tags=ROLE_TAG,
    description="Rebuild the team warehouse over the whole lake, then run the lake-wide checks.",
)

daily_team_refresh = dg.ScheduleDefinition(
    name="daily_team_refresh",
    job=team_refresh,
    cron_schedule="0 5 * * *",  # UTC: move it after your machines' nightly runs have landed
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)

defs = dg.Definitions(
    assets=[team_warehouse],
    asset_checks=[keys_unique_lakewide, no_orphans_lakewide, machines_reporting, within_budgets],
    jobs=[team_refresh],
    schedules=[daily_team_refresh],
    resources={"team_lake": TeamLake()},
    # the rebuild and its four checks one after another in the run's process: the default executor
    # started a process per step (agentlake imported five times), and ran the checks at once, each
    # capped at the merge's memory (warehouse/catalog/checks.py), on one catalog
    executor=dg.in_process_executor,
)
