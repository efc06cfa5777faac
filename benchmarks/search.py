"""Benchmark: `agentlake search` on the generated corpus: the index's build, size and update, and
a query's latency warm (one open index, as the MCP server and the dashboard keep it) and cold (a
new `agentlake search` process, start-up included).

    .venv/bin/python benchmarks/search.py --projects 300 --sessions 200 --workdir /tmp/benchL

The corpus is benchmarks/run.py's (a long tail of projects, sessions spread over --days days),
landed and merged once into a home of its own (the merge builds the index). Then: the index
built whole again (`merge --full`'s index step), --repeat times; the update after one changed
source (a message added to one store, landed and merged); and QUERIES, each run --repeat times
warm after one untimed run, and --repeat times cold. Medians are printed as Markdown for
docs/BENCHMARKS.md.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import run  # noqa: E402  (benchmarks/run.py: the corpus and the one-message change)
from corpus import corpus_arguments, ingest_corpus, timed  # noqa: E402
from warehouse.catalog import search_index  # noqa: E402
from warehouse.lake.layout import Layout, tables_path  # noqa: E402
from warehouse.serve.search import search  # noqa: E402

# words the generator's sessions use, from common to rare, a phrase and an exclusion among them
QUERIES = ("failing test", "webhook retries backoff", "cache invalidated", '"empty id"', "pagination endpoint",
           "flaky -tests", "fehlermeldung", "scheduler router", "go vet", "concurrent writes diverge")




def _mib(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    corpus_arguments(ap, projects=100, repeat=5)
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="agentlake-search-bench-"))
    corpus = run._corpus(args, work)
    layout = Layout.resolve(home=work / "search-home")
    catalog, index = Path(layout.warehouse), search_index.search_path(layout.warehouse)
    if not index.exists():
        first, _ = timed(lambda: ingest_corpus(corpus, layout))
        print(f"landed and merged (index included) in {first:.1f} s", file=sys.stderr)
    data = tables_path(layout.lake, catalog)

    builds = [timed(lambda: search_index.update(catalog, data, full=True)) for _ in range(args.repeat)]
    documents = builds[-1][1].documents
    sizes = (_mib(index), _mib(Path(data)))

    store = sorted(corpus.rglob("crush.db"))[len(QUERIES)]  # a mid-sized project, not the largest
    run._touch_one(store, 0)
    update_seconds, updated = timed(lambda: ingest_corpus(corpus, layout).search)

    warm, cold, hits = {}, {}, {}
    with search_index.open_fts(index) as con:
        for q in QUERIES:
            found = search(con, q, limit=10)  # untimed: the first run reads the index's pages
            hits[q] = found.total
            warm[q] = statistics.median(timed(lambda: search(con, q, limit=10))[0] for _ in range(args.repeat))
    for q in QUERIES:
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "pipelines.cli", "search", "--home", str(layout.home), "--", q],
                           cwd=HERE.parent, check=True, capture_output=True)
            times.append(time.perf_counter() - start)
        cold[q] = statistics.median(times)

    build = statistics.median(t for t, _ in builds)
    print(f"Corpus: --projects {args.projects} --sessions {args.sessions} --seed {args.seed}; "
          f"{documents:,} documents indexed; medians of {args.repeat}.\n")
    print("| | figure |\n| --- | ---: |")
    print(f"| index built whole (cold, from the tables) | {build:.1f} s |")
    print(f"| index file / the tables' Parquet | {sizes[0]:,.0f} MiB / {sizes[1]:,.0f} MiB |")
    print(f"| a merge after one changed source, index update included (its documents re-read: "
          f"{updated.sources_read if updated else 0}) | {update_seconds:.2f} s |")
    print(f"| a query warm, median over the {len(QUERIES)} queries | {statistics.median(warm.values()) * 1000:.0f} ms |")
    print(f"| a query warm, slowest query's median | {max(warm.values()) * 1000:.0f} ms |")
    print(f"| a query cold (`agentlake search`, a new process), median | {statistics.median(cold.values()):.2f} s |")
    print("\n| query | hits | warm (ms) | cold (s) |\n| --- | ---: | ---: | ---: |")
    for q in QUERIES:
        print(f"| `{q}` | {hits[q]:,} | {warm[q] * 1000:.0f} | {cold[q]:.2f} |")


if __name__ == "__main__":
    main()
