import dagster as dg

from pipelines.cli_runs import landing_checks
from warehouse.land.ingest import RunSummary

LANDING = dg.AssetKey(["landing"])

# Unique keys and parents are checked on the tables, per source, after the merge
# (pipelines/defs/warehouse): once per run over every source costs less than once per source here
# (docs/BENCHMARKS.md, "Figures behind the code's choices").
CHECK_SPECS = [
    dg.AssetCheckSpec("rows_reconcile", asset=LANDING, blocking=True,
                      description="Rows landed (plus quarantined) equal the rows in each snapshot, for "
                                  "the sources the run read (an unchanged source is not read again)."),
    dg.AssetCheckSpec("unknown_part_types", asset=LANDING,
                      description="Parts of a type this version does not know (kept raw): a warning."),
]


def landing_check_fields(checks: dict) -> list[dict]:
    """The landing checks (pipelines.cli_runs.landing_checks: by name, over a run's sources), as the
    fields of a check result (a Dagster run's AssetCheckResult, or the AssetCheckEvaluation a
    sensor reports for an `agentlake ingest`)."""
    return [dict(check_name=name, asset_key=LANDING, passed=found["passed"], metadata=found["metadata"],
                 description=found["description"],
                 severity=dg.AssetCheckSeverity.WARN if name == "unknown_part_types" else dg.AssetCheckSeverity.ERROR)
            for name, found in checks.items()]


def check_results(layout, summary: RunSummary):
    for fields in landing_check_fields(landing_checks(summary.results)):
        yield dg.AssetCheckResult(**fields)
