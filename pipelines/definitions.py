import dagster as dg

from pipelines.defs.lake.assets import landing
from pipelines.defs.resources import AgentlakeResource, Reporter
from pipelines.defs.schedules import daily_full_refresh
from pipelines.defs.sensors import discover_sources, ingest_job
from pipelines.defs.warehouse.assets import curated_tables, marts

defs = dg.Definitions(
    assets=[landing, curated_tables, marts],
    jobs=[ingest_job],
    sensors=[discover_sources],
    schedules=[daily_full_refresh],
    resources={"agentlake": AgentlakeResource(), "reporter": Reporter()},
)
