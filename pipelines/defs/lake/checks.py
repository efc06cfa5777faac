import dagster as dg

from warehouse.checks import duplicate_keys, orphans
from warehouse.ingest import RunSummary

LANDING = dg.AssetKey(["landing"])

CHECK_SPECS = [
    dg.AssetCheckSpec("rows_reconcile", asset=LANDING, blocking=True,
                      description="Rows landed (plus quarantined) equal the rows in each snapshot."),
    dg.AssetCheckSpec("keys_unique", asset=LANDING, description="No key repeats within a source."),
    dg.AssetCheckSpec("no_orphans", asset=LANDING, description="Every message, part and tool call has its parent."),
    dg.AssetCheckSpec("unknown_part_types", asset=LANDING,
                      description="Parts of a type this version does not know (kept raw): a warning."),
]


def check_results(layout, summary: RunSummary):
    ingested = [r for r in summary.results if r.status == "ok"]
    mismatched = {r.source.partition_key: r.reconcile for r in ingested if not r.reconciled}
    yield dg.AssetCheckResult(
        check_name="rows_reconcile", asset_key=LANDING, passed=not mismatched,
        metadata={"sources_checked": len(ingested), "mismatches": str(mismatched) if mismatched else "none"},
    )
    dupes, missing = {}, {}
    for r in ingested:  # each source on its own: keys are unique within a source, not across agents
        dupes.update({f"{r.source.partition_key}: {t}": n for t, n in duplicate_keys(layout.lake, r.files).items() if n})
        missing.update({f"{r.source.partition_key}: {ref}": n for ref, n in orphans(layout.lake, r.files).items() if n})
    yield dg.AssetCheckResult(check_name="keys_unique", asset_key=LANDING, passed=not dupes,
                              metadata={"duplicates": str(dupes) if dupes else "none"})
    yield dg.AssetCheckResult(check_name="no_orphans", asset_key=LANDING, passed=not missing,
                              metadata={"orphans": str(missing) if missing else "none"})
    unknown = sum(r.unknown_part_types for r in ingested)
    yield dg.AssetCheckResult(check_name="unknown_part_types", asset_key=LANDING, passed=unknown == 0,
                              severity=dg.AssetCheckSeverity.WARN, metadata={"unknown_parts": unknown})
