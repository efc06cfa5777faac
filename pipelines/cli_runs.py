"""What an `agentlake ingest` leaves for Dagster. The CLI runs without Dagster (pipelines.runner);
the `cli_runs_reported` sensor of `agentlake dev` (pipelines/defs/cli_runs_sensor.py) reports each
run it finds here as the materializations of the assets the run wrote, with the metadata and checks
a Dagster run gives them. No Dagster import here: the CLI writes these.

One JSON file per run in `<state>/cli-runs/`, named by when it was written (then the run's id),
written whole then renamed; at most KEEP of them, so a home nobody opens in Dagster keeps its
latest runs only. The sensor's cursor is the names it reported last: its next tick removes those
(Dagster stored that tick's events with the cursor) and reports the rest, whatever their order
(two ingests at once finish in either order).
"""

import json
import time
from collections import Counter
from pathlib import Path

from transforms.atomic import replace_file
from transforms.findings import UNKNOWN_PARTS

FOLDER = "cli-runs"
KEEP = 100
STATUS_ORDER = ("failed", "ok", "unchanged", "skipped")  # a partition's status: its first present


def folder(layout) -> Path:
    return layout.state_dir / FOLDER


def keep(layout, summary, read: list, merge, landed_before: list = ()) -> None:
    """The run for Dagster: the partitions of the sources it read (`read`: their results), the
    landing checks over them, and the merge's outcome (None: it failed or did not run);
    `landed_before`: the results of the sources another run landed and this merge merged
    (landed_by_a_stopped_run), whose partitions it reports too. Nothing
    when it read no source and the merge changed nothing: no Dagster run would have started
    either. Best effort: a state folder that cannot be written costs Dagster's view of this run,
    not the run."""
    partitions = {r.source.dagster_partition for r in read}
    if not partitions and not (merge and (merge.merged or merge.removed)):
        return
    landed_before = {r.source.dagster_partition for r in landed_before}
    by_partition = {}
    for result in summary.results:
        if result.source.dagster_partition in partitions | landed_before:
            by_partition.setdefault(result.source.dagster_partition, []).append(result)
    metadata = {key: partition_metadata(results) for key, results in sorted(by_partition.items())}
    for key in landed_before - partitions:
        metadata[key]["landed_by"] = ("another run that had not merged it (one that stopped, whose merge failed, "
                                      "or one still running beside this one)")
    record = {
        "run_id": summary.run_id,
        "warehouse": str(layout.warehouse),  # the one it merged into (a team reader's own, not the team's)
        "partitions": metadata,
        "landing_checks": landing_checks(read),
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
        replace_file(target / f"{time.time_ns():020d}-{summary.run_id}.json", json.dumps(record, sort_keys=True))
        for old in sorted(target.glob("*.json"))[:-KEEP]:
            old.unlink(missing_ok=True)
    except OSError:
        pass


def landed_by_a_stopped_run(layout, summary, merge) -> list:
    """This machine's sources the run found settled (`unchanged`) whose landing files its merge
    merged: another run landed them and had not merged them. One killed between landing and its
    end recorded them neither for Dagster nor in a summary (a new user's trial, after a kill -9);
    one still running beside this run merges nothing of them after it."""
    if merge is None or not merge.landings:
        return []
    return [r for r in summary.results if r.status == "unchanged" and
            f"{layout.machine}/{layout.user}/{r.source.provider}/{r.source.source_id}" in merge.landings]


def after(layout, reported: list[str], most: int) -> list[tuple[str, dict]]:
    """The runs kept and not yet reported, oldest first, `most` of them at the most, as (file
    name, record); the files named in `reported` (the last tick's) are removed first."""
    target = folder(layout)
    for name in reported:
        (target / name).unlink(missing_ok=True)
    try:
        paths = sorted(target.glob("*.json"))
    except OSError:
        return []
    runs = []
    for path in paths[:most]:
        try:
            runs.append((path.name, json.loads(path.read_text())))
        except (OSError, ValueError):  # unreadable: reported as nothing, removed with the rest
            runs.append((path.name, None))
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
    errors = [f"{r.source.partition_key}: {said(r)[0]}" for r in results if r.error]
    if errors:
        metadata["error"] = "; ".join(errors)
    # what was unknown or bad, as the CLI's summary lists it (the run log, `sources`, keeps them all)
    warnings = [f"{r.source.partition_key}: {w}" for r in results for w in said(r)[1]]
    if warnings:
        metadata["warnings"] = "; ".join(capped(warnings))
    return metadata


MOST_WARNINGS = 50  # in a partition's metadata or a run's log: a first ingest of many stores has hundreds


def capped(warnings: list[str]) -> list[str]:
    """The first MOST_WARNINGS, and how many more there are."""
    more = len(warnings) - MOST_WARNINGS
    return warnings[:MOST_WARNINGS] + ([f"and {more} more (the run log, `sources`, keeps them)"] if more > 0 else [])


def said(result) -> tuple[str | None, list[str]]:
    """A source's error and warnings as its row of the `sources` run log has them: in team mode
    without their secrets (a key in a part type's name), for what is written beside the lake (the
    CLI's runs kept for Dagster, in a shared folder's state) and shown in Dagster."""
    row = result.log_row
    if row is None:
        return result.error, list(result.warnings)
    return row.get("error"), row["warnings"].split("; ") if row.get("warnings") else []


def landing_checks(results: list) -> dict:
    """The landing asset's checks over a run's results, by name: passed, metadata, description."""
    ingested = [r for r in results if r.status == "ok"]
    mismatched = {r.source.partition_key: r.reconcile for r in ingested if not r.reconciled}
    unknown = sum(r.unknown_part_types for r in ingested)
    named = [f"{r.source.partition_key}: {w}" for r in ingested for w in said(r)[1] if w.startswith(UNKNOWN_PARTS)]
    return {
        "rows_reconcile": {
            "passed": not mismatched,
            "metadata": {"sources_checked": len(ingested), "mismatches": str(mismatched) if mismatched else "none"},
            # a pass that checked nothing says so: the run read no source (all unchanged, or failed)
            "description": (f"{len(mismatched)} of {len(ingested)} sources read do not reconcile with their "
                            f"snapshot: {'; '.join(f'{k}: {v}' for k, v in sorted(mismatched.items()))}" if mismatched
                            else None if ingested else "No source was read in this run: nothing to reconcile.")},
        "unknown_part_types": {"passed": unknown == 0, "metadata": {"unknown_parts": unknown},
                               # which types, as each source's warning names them; a source's warning
                               # names only the types met in what this run read
                               "description": "; ".join(named) if named else (
                                   f"{unknown} parts of unknown types kept raw, of types an earlier run named "
                                   "(the run log, `sources`, has its warnings)") if unknown else None},
    }

