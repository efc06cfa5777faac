import dagster as dg

from pipelines.defs.lake.assets import LAKE
from pipelines.defs.resources import AgentlakeResource
from warehouse.views import build_warehouse


@dg.asset(
    key=["warehouse", "views"],
    deps=[LAKE],
    group_name="warehouse",
    automation_condition=dg.AutomationCondition.eager(),
)
def warehouse_views(context: dg.AssetExecutionContext, agentlake: AgentlakeResource) -> dg.MaterializeResult:
    """warehouse.duckdb: views over the lake, rebuilt atomically (readers open it read_only)."""
    layout = agentlake.layout()
    views = build_warehouse(layout.lake, layout.warehouse)
    return dg.MaterializeResult(metadata={"path": str(layout.warehouse), "views": ", ".join(views)})
