"""What an `agentlake ingest` leaves for Dagster. The CLI runs without Dagster (pipelines.runner);
the `cli_runs` sensor of `agentlake dev` (pipelines/defs/sensors.py) reports each run it finds here
as materializations of the assets the run wrote, with the metadata and checks a Dagster run gives
them. No Dagster import here: the CLI writes these.

One JSON file per run, `<state>/cli-runs/<run id>.json` (run ids sort by time), written whole
then renamed; at most KEEP of them, so a home nobody opens in Dagster keeps its latest runs only.
"""

import json
from collections import Counter
from pathlib import Path

from transforms.atomic import replace_file

FOLDER = "cli-runs"
KEEP = 100
STATUS_ORDER = ("failed", "ok", "unchanged", "skipped")  # a partition's status: its first present


def folder(layout) -> Path:
    return layout.state_dir / FOLDER


def keep(layout, summary, merge) -> None:
    """The run for Dagster: the partitions it read sources of, the landing checks over them, and
    the merge's outcome (None: it failed, or the run landed and merged nothing). Best effort:
    a state folder that cannot be written costs Dagster's view of this run, not the run."""
    read = {r.source.dagster_partition for r in summary.results if r.status in ("ok", "failed")}
    if not read and not (merge and (merge.merged or merge.removed)):
        return  # nothing new for Dagster: no run of its own would have started either
    by_partition = {}
    for result in summary.results:
        if result.source.dagster_partition in read:
            by_partition.setdefault(result.source.dagster_partition, []).append(result)
    record = {
        "run_id": summary.run_id,
        "partitions": {key: partition_metadata(results) for key, results in sorted(by_partition.items())},
        "landing_checks": landing_checks([r for results in by_partition.values() for r in results]),
        "merge": None if merge is None else {
            "sources_merged": merge.merged, "sources_removed": merge.removed,
            "source_ids": sorted(merge.source_ids), "rows_inserted": dict(merge.rows),
            "search": None if merge.search is None else {
                "documents": merge.search.documents, "rebuilt": merge.search.rebuilt,
                "sources_read": merge.search.sources_read, "sources_removed": merge.search.sources_removed}},
    }
    try:
        target = folder(layout)
        target.mkdir(parents=True, exist_ok=True)
        replace_file(target / f"{summary.run_id}.json", json.dumps(record, sort_keys=True))
        for old in sorted(target.glob("*.json"))[:-KEEP]:
            old.unlink(missing_ok=True)
    except OSError:
        pass


def after(layout, cursor: str | None) -> list[dict]:
    """The runs kept since `cursor` (the last run id reported), oldest first; those up to it are
    removed (reported by an earlier tick of the sensor, whose cursor Dagster stored)."""
    try:
        paths = sorted(folder(layout).glob("*.json"))
    except OSError:
        return []
    runs = []
    for path in paths:
        if cursor is not None and path.stem <= cursor:
            path.unlink(missing_ok=True)
            continue
        try:
            runs.append(json.loads(path.read_text()))
        except (OSError, ValueError):  # cut short by a crash mid-write: nothing to report
            continue
    return runs


def partition_metadata(results: list) -> dict:
    """One partition's outcome, from its sources': status, rows per table, time and errors."""
    statuses = Counter(r.status for r in results)
    metadata = {"status": next(s for s in STATUS_ORDER if statuses[s]), "sources": len(results),
                "duration_s": round(sum(r.duration_s for r in results), 3)}
    metadata.update({f"sources_{status}": statuses[status] for status in STATUS_ORDER if statuses[status]})
    rows = Counter()
    for r in results:
        rows.update(r.rows)
    metadata.update({f"rows_{table}": n for table, n in rows.items()})
    errors = [f"{r.source.partition_key}: {r.error}" for r in results if r.error]
    if errors:
        metadata["error"] = "; ".join(errors)
    return metadata


def landing_checks(results: list) -> dict:
    """The landing asset's checks over a run's results, by name: passed, metadata, description."""
    ingested = [r for r in results if r.status == "ok"]
    mismatched = {r.source.partition_key: r.reconcile for r in ingested if not r.reconciled}
    unknown = sum(r.unknown_part_types for r in ingested)
    return {
        "rows_reconcile": {
            "passed": not mismatched,
            "metadata": {"sources_checked": len(ingested), "mismatches": str(mismatched) if mismatched else "none"},
            # a pass that checked nothing says so: the run read no source (all unchanged, or failed)
            "description": None if ingested else "No source was read in this run: nothing to reconcile."},
        "unknown_part_types": {"passed": unknown == 0, "metadata": {"unknown_parts": unknown}, "description": None},
    }

