"""The summary an ingest prints: what each source came to, the rows written, and the warnings,
listed or counted. Apart from the runner, so that `--help` and a usage error need not load it."""

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from warehouse.lake.layout import Layout
    from warehouse.land.ingest import RunSummary


LISTED_WARNINGS = 10  # warnings a summary lists without --verbose; the rest are counted, and kept in `sources`


def print_summary(summary: "RunSummary", layout: "Layout", stream=None, *, verbose: bool = False, demo: bool = False,
                  sql: str = "agentlake sql") -> None:
    """The run's summary. Its warnings: every one with `verbose`; of a demo (whose stores hold traps
    planted to show they are counted) only their number; else the first LISTED_WARNINGS. What is
    not listed is said with its number and where to find it: `--verbose`, and the run log
    (`sql`: the command that reads this home's warehouse)."""
    stream = stream or sys.stdout
    counts = summary.by_status
    print(f"\nsources: {counts['ok']} ok, {counts['unchanged']} unchanged, {counts['skipped']} skipped, "
          f"{counts['failed']} failed", file=stream)
    rows = summary.rows
    print("rows written: " + ", ".join(f"{t} {n:,}" for t, n in rows.items()), file=stream)
    if summary.landed_before and summary.into_new_warehouse:  # a new or wiped home over a lake (a trial)
        print(f"merged too: {summary.landed_before} sources an earlier run landed in the lake, merged into this "
              "new warehouse", file=stream)
    elif summary.landed_before:  # "0 written" alone hid them (a new user's trial, after a kill -9)
        print(f"merged too: {summary.landed_before} sources another run landed but had not merged (one that "
              "stopped, whose merge failed, or one still running beside this one)", file=stream)
    for r in summary.results:
        if r.status == "failed":
            print(f"FAILED  {r.source.path}: {r.error}", file=stream)
        elif r.status == "skipped":
            print(f"skipped {r.source.project_path}: {r.error}", file=stream)
    warnings = [f"warning {r.source.partition_key}: {w}" for r in summary.results for w in r.warnings]
    listed = len(warnings) if verbose else 0 if demo else LISTED_WARNINGS
    for line in warnings[:listed]:
        print(line, file=stream)
    if len(warnings) > listed:
        unlisted = len(warnings) - listed
        said = (f"{unlisted} warnings in the demo's stores (traps planted to show each is counted, not lost)"
                if demo else f"{unlisted} more warnings")
        query = f"SELECT partition_key, warnings FROM sources WHERE run_id = '{summary.run_id}' AND warnings IS NOT NULL"
        print(f"{said}: `--verbose` lists them all in this summary; the run log keeps them:\n"
              f"  {sql} --format csv \"{query}\"", file=stream)
    for note in summary.notes:
        print(f"note: {note}", file=stream)
    for problem in summary.problems:
        print(f"problem: {problem}", file=stream)
    print(f"lake: {layout.lake}\nwarehouse: {layout.warehouse}", file=stream)
