"""Benchmark: the hive export for Spark and Trino, whole against incremental, on the generated corpus.

    .venv/bin/python benchmarks/export.py --projects 30 --repeat 3 [--baseline OLD_HIVE_EXPORT.py]

The corpus is benchmarks/run.py's (a long tail of projects, sessions over --days days), ingested
and merged once into a home of its own. Then, each --repeat times: a full export (every
partition written, as the export wrote it before versions: `full=True`), and an export after one
changed source (a message added to one store, ingested and merged). `--baseline` times another
hive_export.py's `export_tables` on the same warehouse (the export of an earlier release).
Medians are printed as a Markdown table for docs/BENCHMARKS.md, with the tables' Parquet files
live and on disk after the merges (within the readers' grace, and after a merge past it).
"""

import argparse
import importlib.util
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import run  # noqa: E402  (benchmarks/run.py: the corpus and the one-message change)
from corpus import corpus_arguments, ingest_corpus, timed  # noqa: E402
from warehouse.catalog.compaction import file_counts  # noqa: E402
from warehouse.catalog.merge import merge  # noqa: E402
from warehouse.lake.layout import Layout  # noqa: E402
from warehouse.serve.hive_export import EXPORT, export_tables  # noqa: E402




def _baseline(path: str):
    spec = importlib.util.spec_from_file_location("old_hive_export", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.export_tables


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    corpus_arguments(ap, projects=30, repeat=3)
    ap.add_argument("--baseline", help="another hive_export.py to time on the same warehouse")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="agentlake-export-bench-"))
    corpus = run._corpus(args, work)
    layout = Layout.resolve(home=work / "export-home")
    ingest_corpus(corpus, layout)
    dbs = sorted(corpus.rglob("crush.db"))

    rows = {}
    if args.baseline:
        old = _baseline(args.baseline)
        runs = [timed(lambda: old(layout.warehouse, layout.lake)) for _ in range(args.repeat)]
        rows["the export before versions (every file, replaced in place)"] = (
            [t for t, _ in runs], [sum(r.values()) for _, r in runs], [0 for _ in runs])
        for stale in (Path(layout.lake) / EXPORT).iterdir():  # its flat layout: not a version
            if stale.is_dir() and not stale.name.startswith("v"):
                shutil.rmtree(stale)
    full = [timed(lambda: export_tables(layout.warehouse, layout.lake, full=True, keep_seconds=0))
            for _ in range(args.repeat)]
    rows["full export (every partition written)"] = _figures(full)
    changed = []
    for i in range(args.repeat):
        run._touch_one(dbs[i % len(dbs)], i)
        ingest_corpus(corpus, layout)
        changed.append(timed(lambda: export_tables(layout.warehouse, layout.lake, keep_seconds=0)))
    rows["incremental export, one source changed"] = _figures(changed)
    rows["export, nothing changed"] = _figures(
        [timed(lambda: export_tables(layout.warehouse, layout.lake, keep_seconds=0)) for _ in range(args.repeat)])

    total = full[-1][1].files
    print(f"Corpus: {len(dbs)} crush.db (--projects {args.projects} --sessions {args.sessions} --days {args.days}); "
          f"the export holds {total:,} files. Medians of {args.repeat}.\n")
    print("| export | wall (s) | files written | files carried over |\n| --- | ---: | ---: | ---: |")
    for name, (times, written, carried) in rows.items():
        print(f"| {name} | {statistics.median(times):.2f} | {statistics.median(written):,.0f} | "
              f"{statistics.median(carried):,.0f} |")
    within = file_counts(layout.warehouse)
    merge(layout.lake, layout.warehouse, keep_seconds=0)
    past = file_counts(layout.warehouse)
    print(f"\nTables' Parquet files after the {args.repeat + 1} merges: {within['live']:,} live, "
          f"{within['on_disk']:,} on disk within the readers' grace; after a merge past it: {past['live']:,} live, "
          f"{past['on_disk']:,} on disk.")


def _figures(runs) -> tuple[list, list, list]:
    return [t for t, _ in runs], [sum(r.written.values()) for _, r in runs], [r.carried for _, r in runs]


if __name__ == "__main__":
    main()
