import dagster as dg

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


def check_results(layout, summary: RunSummary):
    ingested = [r for r in summary.results if r.status == "ok"]
    mismatched = {r.source.partition_key: r.reconcile for r in ingested if not r.reconciled}
    yield dg.AssetCheckResult(
        check_name="rows_reconcile", asset_key=LANDING, passed=not mismatched,
        metadata={"sources_checked": len(ingested), "mismatches": str(mismatched) if mismatched else "none"},
        # a pass that checked nothing says so: the run read no source (all unchanged, or failed)
        description=None if ingested else "No source was read in this run: nothing to reconcile.",
    )
    unknown = sum(r.unknown_part_types for r in ingested)
    yield dg.AssetCheckResult(check_name="unknown_part_types", asset_key=LANDING, passed=unknown == 0,
                              severity=dg.AssetCheckSeverity.WARN, metadata={"unknown_parts": unknown})
