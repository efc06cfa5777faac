"""Benchmark: the center's merge of a team's lake against the number of machines (issue 33).

    .venv/bin/python benchmarks/team.py --machines 10,30,100 --workdir /tmp/team
    .venv/bin/python benchmarks/team.py --machines 10,30,100 --combine /tmp/team,/tmp/team2,/tmp/team3

The corpus is benchmarks/run.py's (--projects Crush stores, a long tail of projects, sessions
spread over --days days), landed once by the library under one machine name. A lake of N
machines is then made of those landing files: machine k (k = 1..N) holds a sample of
max(--min-projects, --projects * k^-spread) of the sources, drawn with --seed, so a few heavy
users hold most projects and many light ones a few. Each machine's files are hard links to the
landed ones, under `_landing/machine-<k>/user-<k>/crush/<source id>/`: a source id of its own
per machine (the merge reads a row's machine, user and source from its folder), its sessions'
start moved by k microseconds (else every machine's sessions would be one store's copies, which
the merge looks for and reports), and its run log rewritten with its own names.

For each N, each step in a subprocess of its own (wall time, peak RSS, CPU):

- full merge: `warehouse.catalog.build.refresh` into an empty catalog, as `agentlake merge`
  does it: the tables, the marts, a compaction when the merge asks for one, the search index;
- incremental merge: one machine's source gets one more message (added to its store, landed
  again by the library, its landing files copied to that machine), then `refresh`; --repeat
  times, a heavy, a middling and a light machine in turn;
- no-op merge: `refresh` with nothing changed;
- a reader's first query: a new process connects read-only and asks the cost by day and
  project from the `daily_costs` mart;
- the hive export (`warehouse.serve.hive_export.export_tables`): full after the full merge,
  incremental after each incremental merge (files written);
- the tables' Parquet files live and on disk after the merges (`file_counts`), and after a
  merge past the readers' grace.

Each merge's time is also split by phase (functions of warehouse.catalog.merge and build
wrapped with a timer inside the subprocess; nested phases overlap). Medians over --repeat are
printed as Markdown tables for docs/BENCHMARKS.md, with ratios against the first N; each N's
figures are kept in --workdir as team-N.json, and --combine prints the medians of several runs'.
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import run  # noqa: E402  (benchmarks/run.py: the corpus, the one-message change and `measure`)

PY = sys.executable
BASE = "base"  # the machine name the corpus is landed under once

# One merge as `agentlake merge` runs it (build.refresh), with the time of its phases. Each name
# is wrapped where its caller looks it up, so the wrapper is the one called.
MERGE = r"""
import functools, importlib, json, sys, time
from pathlib import Path

PHASES = {
    "warehouse.catalog.build": ["merge", "compact"],
    "warehouse.catalog.search_index": ["update"],
    "warehouse.catalog.merge": ["_merge_tables", "_merged_files", "plan", "_complete", "_projects_of",
                                "_delete_sources", "_insert", "_landed_projects", "mark_pending",
                                "_out_of_range", "_record_merged", "_refresh_marts", "_copies_said",
                                "crowded", "sweep"],
    "warehouse.lake.ducklake": ["damaged_files", "publish", "roomy_memory_limit"],
}
T, N = {}, {}

def timed(owner, name, label):
    f = getattr(owner, name)
    @functools.wraps(f)
    def wrapper(*a, **k):
        start = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            T[label] = T.get(label, 0.0) + time.perf_counter() - start
            N[label] = N.get(label, 0) + 1
    setattr(owner, name, wrapper)

for module, names in PHASES.items():
    for name in names:
        timed(importlib.import_module(module), name, f"{module.rsplit('.', 1)[1]}.{name}")
from warehouse.lake.storage import LocalStore
timed(LocalStore, "versions", "storage.versions (listing the landing files)")
import warehouse.catalog.build as build

start = time.perf_counter()
result = build.refresh(sys.argv[1], Path(sys.argv[2]))
T["total"] = time.perf_counter() - start
print(json.dumps({"phases": T, "calls": N, "merged": result.merged, "runs": result.runs,
                  "crowded": result.crowded, "rows": dict(result.rows)}))
"""

# A reader's first query: a new process, the catalog attached read-only, one mart query.
READER = r"""
import json, sys, time
start = time.perf_counter()
from warehouse.lake.ducklake import connect
with connect(sys.argv[1]) as con:
    rows = con.execute("SELECT date, project, SUM(cost_usd) FROM daily_costs GROUP BY ALL").fetchall()
print(json.dumps({"seconds": time.perf_counter() - start, "rows": len(rows)}))
"""

EXPORT = r"""
import json, sys
from pathlib import Path
from warehouse.serve.hive_export import export_tables
e = export_tables(Path(sys.argv[1]), sys.argv[2], full=sys.argv[3] == "full", keep_seconds=0)
print(json.dumps({"written": sum(e.written.values()), "carried": e.carried, "files": e.files}))
"""


def main() -> None:
    args = _args()
    counts = [int(n) for n in args.machines.split(",")]
    if args.combine:  # earlier runs' figures only: their medians
        runs = [Path(d) for d in args.combine.split(",")]
        return _report({n: [json.loads((d / f"team-{n}.json").read_text()) for d in runs] for n in counts},
                       args.repeat)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="agentlake-team-bench-"))
    corpus = run._corpus(args, work)
    base = work / "base-lake"
    _land_base(corpus, work)
    landed = _sources(base)
    print(f"Corpus: {len(landed)} crush.db (--projects {args.projects} --sessions {args.sessions} "
          f"--days {args.days} --seed {args.seed}), {_messages(base, landed):,} messages; this machine: "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start.\n", flush=True)
    results = {}
    for n in counts:
        saved = work / f"team-{n}.json"  # every figure of this N, for --reuse and for reading
        if args.reuse and saved.exists():
            results[n] = [json.loads(saved.read_text())]
            continue
        results[n] = [_team(args, work, corpus, n)]
        saved.write_text(json.dumps(results[n][0], indent=1))
    _report(results, args.repeat)
    if not args.workdir:
        shutil.rmtree(work)


def _args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Each N's lake stays in --workdir (lake-N, center-N) until the next run.")
    ap.add_argument("--machines", default="10,30,100", help="comma-separated numbers of machines")
    ap.add_argument("--projects", type=int, default=40, help="Crush stores in the corpus, one project each")
    ap.add_argument("--sessions", type=int, default=40, help="root sessions per project")
    ap.add_argument("--days", type=int, default=180, help="days each project's sessions spread over")
    ap.add_argument("--seed", type=int, default=1, help="the corpus's and the machines' samples")
    ap.add_argument("--spread", type=float, default=0.5,
                    help="machine k holds --projects * k^-SPREAD of the sources (0: every machine all)")
    ap.add_argument("--min-projects", type=int, default=6, help="the fewest sources a machine holds")
    ap.add_argument("--repeat", type=int, default=3, help="incremental and no-op merges, reader queries")
    ap.add_argument("--workdir", help="keep the corpus and the lakes here (default: a temp dir, removed)")
    ap.add_argument("--reuse", action="store_true",
                    help="an N measured before in --workdir (team-N.json) is reported, not run again")
    ap.add_argument("--combine", metavar="DIR,DIR,...",
                    help="run nothing: the medians of earlier runs' figures (each DIR a --workdir holding team-N.json)")
    return ap.parse_args()


# --- the landing files: the corpus landed once, then copied under N machine names ----------------

def _land_base(corpus: Path, work: Path) -> None:
    """Land the corpus (only what changed since the last call) under the one machine name BASE."""
    from transforms.provider import DiscoverOptions
    from warehouse.land.ingest import discover_sources, ingest_all
    from warehouse.lake.layout import Layout

    sources, _ = discover_sources(DiscoverOptions(env={}, extra_roots={"crush": (str(corpus),)}, use_default=False))
    ingest_all(sources, Layout.resolve(home=work / "base-home", lake=work / "base-lake", machine=BASE, user=BASE))


def _base_landing(base: Path) -> Path:
    return base / "_landing" / BASE / BASE


def _sources(base: Path) -> list[str]:
    """The landed source ids, in their projects' order: the machines' samples then depend on the
    seed only, not on the ids (which follow the corpus's path)."""
    return sorted((p.name for p in (_base_landing(base) / "crush").iterdir()), key=lambda s: _store(base, s))


def _store(base: Path, source_id: str) -> Path:
    """The Crush store a landed source was read from."""
    import pyarrow.parquet as pq

    landed = _base_landing(base) / "crush" / source_id / "sessions.parquet"
    return Path(pq.read_table(landed, columns=["project_path"])["project_path"][0].as_py()) / ".crush" / "crush.db"


def _messages(base: Path, source_ids) -> int:
    import pyarrow.parquet as pq

    folder = _base_landing(base) / "crush"
    return sum(pq.read_metadata(folder / s / "messages.parquet").num_rows for s in source_ids)


def _holdings(args, sources: list[str], n: int) -> list[list[str]]:
    """The sources of each of n machines: a long tail of sizes, the heaviest first."""
    rng = random.Random(f"{args.seed}/{n}")
    out = []
    for k in range(1, n + 1):
        size = max(args.min_projects, round(len(sources) * k ** -args.spread))
        out.append(sorted(rng.sample(sources, min(size, len(sources)))))
    return out


def _machine(k: int) -> tuple[str, str]:
    return f"machine-{k:03d}", f"user-{k:03d}"


def _own_id(source_id: str, k: int) -> str:
    """A source's id on machine k: ids are per machine (a store's path there), never shared."""
    return hashlib.sha256(f"{source_id}/{k}".encode()).hexdigest()[:16]


def _build_lake(base: Path, lake: Path, holdings: list[list[str]]) -> None:
    for k, held in enumerate(holdings):
        for source_id in held:
            _copy_source(base, lake, k, source_id)
        for log in sorted((_base_landing(base) / "_runs").glob("*.parquet")):
            _copy_run_log(log, lake, k, held)


def _copy_source(base: Path, lake: Path, k: int, source_id: str) -> None:
    """Machine k's copy of one landed source, replacing the one it had (each file atomically)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    machine, user = _machine(k)
    target = lake / "_landing" / machine / user / "crush" / _own_id(source_id, k)
    target.mkdir(parents=True, exist_ok=True)
    for landed in sorted((_base_landing(base) / "crush" / source_id).glob("*.parquet")):
        staged = target / f".{landed.name}.tmp"
        staged.unlink(missing_ok=True)
        if landed.name == "sessions.parquet":  # its own start times: not another machine's copy
            table = pq.read_table(landed)
            moved = pc.add(table["created_at"], pa.scalar(timedelta(microseconds=k + 1)))
            table = table.set_column(table.schema.get_field_index("created_at"), "created_at", moved)
            pq.write_table(table, staged, compression="zstd")  # the schema's metadata kept (landing id)
        else:
            os.link(landed, staged)
        os.replace(staged, target / landed.name)


def _copy_run_log(log: Path, lake: Path, k: int, held: list[str]) -> None:
    """The run log's rows of the sources machine k holds, under its own names."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    machine, user = _machine(k)
    table = pq.read_table(log)
    table = table.filter(pc.is_in(table["source_id"], pa.array(held)))
    own = pa.array([_own_id(s, k) for s in table["source_id"].to_pylist()], pa.string())
    for name, column in (("source_id", own), ("machine", pa.array([machine] * len(table))),
                         ("user", pa.array([user] * len(table)))):
        table = table.set_column(table.schema.get_field_index(name), name, column)
    target = lake / "_landing" / machine / user / "_runs" / log.name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, target, compression="zstd")


def _change_one(corpus: Path, work: Path, lake: Path, holdings: list[list[str]], k: int, i: int) -> None:
    """One more message in one of machine k's sources: its store, landed again, copied to k."""
    base = work / "base-lake"
    source_id = holdings[k][i % len(holdings[k])]
    run._touch_one(_store(base, source_id), i)
    before = set((_base_landing(base) / "_runs").glob("*.parquet"))
    _land_base(corpus, work)
    _copy_source(base, lake, k, source_id)
    for log in sorted(set((_base_landing(base) / "_runs").glob("*.parquet")) - before):
        _copy_run_log(log, lake, k, holdings[k])


# --- the measures --------------------------------------------------------------------------------

def _step(script: str, *argv) -> dict:
    """One subprocess: wall, peak RSS, CPU and what it printed (its last line, JSON)."""
    wall, rss, out, cpu = run.measure([PY, "-c", script, *map(str, argv)])
    return {"wall": wall, "rss": rss, "cpu": cpu, **json.loads(out.strip().splitlines()[-1])}


def _team(args, work: Path, corpus: Path, n: int) -> dict:
    from warehouse.catalog.compaction import file_counts
    from warehouse.catalog.merge import merge

    base, lake, center = work / "base-lake", work / f"lake-{n}", work / f"center-{n}"
    for old in (lake, center):
        shutil.rmtree(old, ignore_errors=True)
    holdings = _holdings(args, _sources(base), n)
    start = time.perf_counter()
    _build_lake(base, lake, holdings)
    built = time.perf_counter() - start
    warehouse = center / "warehouse.ducklake"
    out = {"sources": sum(map(len, holdings)), "messages": sum(_messages(base, h) for h in holdings),
           "sizes": [len(h) for h in holdings], "lake_built_s": built,
           "landing_files": sum(1 for _ in (lake / "_landing").rglob("*.parquet"))}
    print(f"{n} machines: {out['sources']} sources, {out['messages']:,} messages, {out['landing_files']:,} "
          f"landing files (made in {built:.1f} s)", flush=True)
    out["full"] = _step(MERGE, lake, warehouse)
    out["export_full"] = _step(EXPORT, warehouse, lake, "full")
    out["incremental"], out["export_incremental"] = [], []
    for i, k in enumerate(_changed_machines(n, args.repeat)):
        _change_one(corpus, work, lake, holdings, k, i)
        out["incremental"].append({"machine": k, **_step(MERGE, lake, warehouse)})
        out["export_incremental"].append(_step(EXPORT, warehouse, lake, "incremental"))
    out["noop"] = [_step(MERGE, lake, warehouse) for _ in range(args.repeat)]
    out["reader"] = [_step(READER, warehouse) for _ in range(args.repeat)]
    out["files_within_grace"] = file_counts(warehouse)
    merge(lake, warehouse, keep_seconds=0)
    out["files_past_grace"] = file_counts(warehouse)
    return out


def _changed_machines(n: int, repeat: int) -> list[int]:
    """A heavy, a middling and a light machine in turn (indexes; the heaviest first)."""
    return [[0, n // 2, n - 1][i % 3] for i in range(repeat)]


# --- the report ----------------------------------------------------------------------------------

def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _report(results: dict[int, list[dict]], repeat: int) -> None:
    """`results`: per N, one or more runs' figures; a figure is the median over the runs of each
    run's own (itself a median of `repeat` where repeated)."""
    first = min(results)
    rows = {n: {key: statistics.median(_row(r)[key] for r in runs) for key in _row(runs[0])}
            for n, runs in results.items()}
    runs_said = f"; medians of {len(results[first])} runs of the whole" if len(results[first]) > 1 else ""
    print(f"\nMedians of {repeat} where repeated{runs_said}; (x) is the ratio to {first} machines. Wall "
          "seconds, then the CPU seconds of the process and its threads. The reader's first query: its process "
          "end to end (Python's start and imports included); after the semicolon, the connection and the query "
          "alone.\n")
    print("| machines | sources | messages | full merge (s) | its peak RSS (MiB) | incremental merge (s) | "
          "its peak RSS (MiB) | no-op merge (s) | reader's first query (s) | export full (s, files) | "
          "export incremental (s, files) | files live / on disk | past the grace |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n, row in rows.items():
        ref = rows[first]

        def x(key):
            return f"{row[key]:.2f} ({row[key] / ref[key]:.1f}x), CPU {row[key + '_cpu']:.2f}"
        print(f"| {n} | {row['sources']:,.0f} | {row['messages']:,.0f} | {x('full')} | {row['full_rss']:.0f} | "
              f"{x('incremental')} | {row['incremental_rss']:.0f} | {x('noop')} | {x('reader')}; "
              f"{row['reader_query']:.2f} | "
              f"{row['export_full']:.1f}, {row['export_files']:,.0f} | "
              f"{row['export_incremental']:.2f} (CPU {row['export_incremental_cpu']:.2f}), "
              f"{row['export_written']:.0f} | "
              f"{row['live']:,.0f} / {row['on_disk']:,.0f} | {row['live_past']:,.0f} / {row['on_disk_past']:,.0f} |")
    for n, runs in results.items():
        print(_facts(n, runs[0]))
    print("\nWhere a merge's time goes (wall seconds; nested phases overlap: `build.merge` holds "
          "`merge._merge_tables`, which holds the ones below it, and `_refresh_marts`):\n")
    phases = sorted({p for runs in results.values() for r in runs for m in _merges(r)
                     for p, t in m["phases"].items() if t >= 0.01}, key=_phase_order)
    names = [(n, kind) for n in results for kind in ("full", "incremental", "noop")]
    print("| phase | " + " | ".join(f"{n}: {kind}" for n, kind in names) + " |")
    print("| --- | " + " | ".join("---:" for _ in names) + " |")
    for phase in phases:
        cells = []
        for n, kind in names:
            merges = [m for r in results[n] for m in (r[kind] if isinstance(r[kind], list) else [r[kind]])]
            cells.append(f"{statistics.median(m['phases'].get(phase, 0.0) for m in merges):.2f}")
        print(f"| {phase} | " + " | ".join(cells) + " |")


def _facts(n: int, r: dict) -> str:
    full = r["full"]
    compacted = "build.compact" in full["phases"]
    retried = any("ducklake.roomy_memory_limit" in m["phases"] for m in _merges(r))
    each = ", ".join(f"{m['wall']:.2f} s (machine {m['machine'] + 1})" for m in r["incremental"])
    return (f"\n{n} machines: sources per machine {_sizes(r['sizes'])}; {r['landing_files']:,} landing files; "
            f"the full merge compacted: {'yes' if compacted else 'no'}, its CPU {full['cpu']:.1f} s; a merge run "
            f"again with more memory: {'yes' if retried else 'no'}; each incremental merge: {each}.")


def _merges(r: dict) -> list[dict]:
    return [r["full"], *r["incremental"], *r["noop"]]


def _sizes(sizes: list[int]) -> str:
    """The heaviest, the median and the lightest machine's number of sources."""
    return f"{sizes[0]} / {statistics.median(sizes):.0f} / {sizes[-1]} (heaviest / median / lightest)"


def _phase_order(phase: str) -> tuple[int, str]:
    order = ["total", "build.merge", "merge._merge_tables", "storage.versions", "merge._merged_files"]
    return (order.index(phase) if phase in order else len(order), phase)


def _row(r: dict) -> dict:
    """One run's figures for one N, each a number."""
    return {"sources": r["sources"], "messages": r["messages"],
            "full": r["full"]["wall"], "full_cpu": r["full"]["cpu"], "full_rss": r["full"]["rss"],
            "incremental": _median(r["incremental"], "wall"), "incremental_cpu": _median(r["incremental"], "cpu"),
            "incremental_rss": _median(r["incremental"], "rss"),
            "noop": _median(r["noop"], "wall"), "noop_cpu": _median(r["noop"], "cpu"),
            "reader": _median(r["reader"], "wall"), "reader_cpu": _median(r["reader"], "cpu"),
            "reader_query": _median(r["reader"], "seconds"),
            "export_full": r["export_full"]["wall"], "export_files": r["export_full"]["written"],
            "export_incremental": _median(r["export_incremental"], "wall"),
            "export_incremental_cpu": _median(r["export_incremental"], "cpu"),
            "export_written": _median(r["export_incremental"], "written"),
            "live": r["files_within_grace"]["live"], "on_disk": r["files_within_grace"]["on_disk"],
            "live_past": r["files_past_grace"]["live"], "on_disk_past": r["files_past_grace"]["on_disk"]}


if __name__ == "__main__":
    main()
