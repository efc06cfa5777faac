import dagster as dg

from pipelines.defs.lake.assets import landing
from pipelines.defs.resources import AgentlakeResource, Reporter
from pipelines.defs.schedules import daily_full_refresh
from pipelines.defs.sensors import discover_sources, ingest_job
from pipelines.defs.warehouse.assets import tables_and_marts

# Dagster's own automation sensor starts stopped: ours is on, so a run launched from the UI (or
# by the sensor) brings the tables and marts up to date without anyone switching it on.
automation = dg.AutomationConditionSensorDefinition(
    "update_tables_and_marts", target=dg.AssetSelection.all(), default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60)

defs = dg.Definitions(
    assets=[landing, tables_and_marts],
    jobs=[ingest_job],
    sensors=[discover_sources, automation],
    schedules=[daily_full_refresh],
    resources={"agentlake": AgentlakeResource(), "reporter": Reporter()},
)
