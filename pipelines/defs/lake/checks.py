import dagster as dg

from warehouse.checks import duplicate_keys, orphans
from warehouse.ingest import RunSummary

LAKE = dg.AssetKey(["lake"])

CHECK_SPECS = [
    dg.AssetCheckSpec("rows_reconcile", asset=LAKE, blocking=True,
                      description="Rows written (plus quarantined) equal the rows in each snapshot."),
    dg.AssetCheckSpec("keys_unique", asset=LAKE, description="No key repeats within a source."),
    dg.AssetCheckSpec("no_orphans", asset=LAKE, description="Every message, part and tool call has its parent."),
    dg.AssetCheckSpec("unknown_part_types", asset=LAKE,
                      description="Parts of a type this version does not know (kept raw): a warning."),
]


def check_results(lake, summary: RunSummary):
    ingested = [r for r in summary.results if r.status == "ok"]
    mismatched = {r.source.partition_key: r.reconcile for r in ingested if not r.reconciled}
    yield dg.AssetCheckResult(
        check_name="rows_reconcile", asset_key=LAKE, passed=not mismatched,
        metadata={"sources_checked": len(ingested), "mismatches": str(mismatched) if mismatched else "none"},
    )
    files = [f for r in ingested for f in r.files]
    dupes = {t: n for t, n in duplicate_keys(lake, files).items() if n}
    yield dg.AssetCheckResult(check_name="keys_unique", asset_key=LAKE, passed=not dupes,
                              metadata={"duplicates": str(dupes) if dupes else "none"})
    missing = {ref: n for ref, n in orphans(lake, files).items() if n}
    yield dg.AssetCheckResult(check_name="no_orphans", asset_key=LAKE, passed=not missing,
                              metadata={"orphans": str(missing) if missing else "none"})
    unknown = sum(r.unknown_part_types for r in ingested)
    yield dg.AssetCheckResult(check_name="unknown_part_types", asset_key=LAKE, passed=unknown == 0,
                              severity=dg.AssetCheckSeverity.WARN, metadata={"unknown_parts": unknown})
