"""Benchmark: `agentlake search` on the generated corpus: the index's build, size and update, and
a query's latency warm (one open index, as the MCP server and the dashboard keep it) and cold (a
new `agentlake search` process, start-up included); and a team catalog's index shared through the
lake, a folder and a loopback S3 server (the center's put, a reader's fetch).

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
    ap.add_argument("--attached-over-s3", action="store_true",
                    help="also: the queries on the lake's copy attached read-only over S3, not fetched")
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

    stores = sorted(corpus.rglob("crush.db"))
    store = stores[min(len(QUERIES), len(stores) - 1)]  # a mid-sized project, not the largest
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

    shared, attached = _through_a_lake(index, work, args.repeat, args.attached_over_s3)
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
    for where, (put, fetched, kept) in shared.items():
        print(f"| a team catalog's index through {where}: the center's put / a reader's first fetch / "
              f"a reader's check with nothing new | {put:.2f} s / {fetched:.2f} s / {kept * 1000:.0f} ms |")
    if attached:
        opened, first, median = attached
        print(f"| instead, the lake's copy attached read-only over loopback S3 (httpfs): the attach / the "
              f"queries' first run, slowest / median | {opened:.2f} s / {first:.2f} s / {median:.2f} s |")
    print("\n| query | hits | warm (ms) | cold (s) |\n| --- | ---: | ---: | ---: |")
    for q in QUERIES:
        print(f"| `{q}` | {hits[q]:,} | {warm[q] * 1000:.0f} | {cold[q]:.2f} |")


def _through_a_lake(index: Path, work: Path, repeat: int, attach: bool) -> tuple[dict, tuple | None]:
    """A team catalog's index shared through the lake (warehouse.catalog.team_index): the center's
    put, a reader's first fetch, and a reader's check when the lake holds nothing new, medians of
    `repeat`, through a folder and through a loopback S3 server (moto, as the tests use). `attach`:
    also the other way, QUERIES on the lake's copy attached read-only over S3 (no download):
    (the attach, the slowest query's first run, their median)."""
    import logging
    import os

    import boto3
    from moto.server import ThreadedMotoServer

    from warehouse.catalog import team_index

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1",
                       "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": f"http://{host}:{port}"})
    boto3.client("s3", endpoint_url=f"http://{host}:{port}").create_bucket(Bucket="bench")
    out = {}
    try:
        for where, lake in (("a folder", work / "shared-lake"), ("loopback S3", "s3://bench/lake")):
            center, reader = team_index.local_index(work / "center"), team_index.local_index(work / "reader")
            center.parent.mkdir(exist_ok=True)
            center.write_bytes(index.read_bytes())
            puts, fetches, checks = [], [], []
            for i in range(repeat):
                os.utime(center, ns=(i, i))  # a new file to the center: put again
                puts.append(timed(lambda: team_index.publish(lake, center))[0])
                fetches.append(timed(lambda: team_index.fetch(lake, reader))[0])  # a new copy: fetched
                checks.append(timed(lambda: team_index.fetch(lake, reader))[0])  # the same: kept
            out[where] = tuple(statistics.median(x) for x in (puts, fetches, checks))
        attached = _attached_over_s3(index, host, port) if attach else None
    finally:
        server.stop()
    return out, attached


def _attached_over_s3(index: Path, host: str, port: int) -> tuple[float, float, float]:
    """QUERIES, each run once, on `index` put in the loopback S3 server and attached read-only
    through DuckDB's httpfs, pages read as a search asks for them."""
    import boto3
    import duckdb

    from warehouse.lake import ducklake

    boto3.client("s3", endpoint_url=f"http://{host}:{port}").upload_file(str(index), "bench", "attached.duckdb")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    for name in ("httpfs", "fts"):
        ducklake.load_packaged(con, name, ducklake.pinned_binary(name))
    con.execute(f"CREATE SECRET (TYPE s3, KEY_ID 'bench', SECRET 'bench', REGION 'us-east-1', "
                f"ENDPOINT '{host}:{port}', USE_SSL false, URL_STYLE 'path')")
    opened, _ = timed(lambda: con.execute("ATTACH 's3://bench/attached.duckdb' AS ix (READ_ONLY); USE ix"))
    runs = [timed(lambda: search(con, q, limit=10))[0] for q in QUERIES]
    con.close()
    return opened, max(runs), statistics.median(runs)


if __name__ == "__main__":
    main()
