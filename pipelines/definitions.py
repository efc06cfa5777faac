import dagster as dg

from pipelines.defs.cli_runs_sensor import cli_runs_reported
from pipelines.defs.lake.assets import landing
from pipelines.defs.resources import AgentlakeResource
from pipelines.defs.schedules import daily_full_refresh
from pipelines.defs.sensors import discover_sources, ingest_job, merge_job
from pipelines.defs.warehouse.assets import tables_and_marts

# Dagster's own automation sensor starts stopped: ours is on, so a run launched from the UI (or
# by the sensor) brings the tables and marts up to date without anyone switching it on.
automation = dg.AutomationConditionSensorDefinition(
    "update_tables_and_marts", target=dg.AssetSelection.all(), default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60)

defs = dg.Definitions(
    assets=[landing, tables_and_marts],
    jobs=[ingest_job, merge_job],
    sensors=[discover_sources, cli_runs_reported, automation],
    schedules=[daily_full_refresh],
    resources={"agentlake": AgentlakeResource()},
)
