import dagster as dg

from pipelines.defs.lake.assets import lake_tables
from pipelines.defs.resources import AgentlakeResource, Reporter
from pipelines.defs.schedules import daily_full_refresh
from pipelines.defs.sensors import discover_sources, ingest_job
from pipelines.defs.warehouse.assets import warehouse_views

defs = dg.Definitions(
    assets=[lake_tables, warehouse_views],
    jobs=[ingest_job],
    sensors=[discover_sources],
    schedules=[daily_full_refresh],
    resources={"agentlake": AgentlakeResource(), "reporter": Reporter()},
)
