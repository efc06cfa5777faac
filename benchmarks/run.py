"""Benchmark: ingestion against a read-only baseline, on a generated Crush corpus.

    .venv/bin/python benchmarks/run.py --projects 60 --sessions 40 --repeat 3 --machines 10

The corpus looks like real use: each project's sessions spread over --days days (180 by
default), projects of very unequal size (a long tail).

Every phase runs in a fresh subprocess, timed from outside and with its own peak RSS, and is
repeated; the medians are printed as a Markdown table for docs/BENCHMARKS.md.

- baseline: snapshot every db, read every row, decode every parts JSON once; nothing else.
  The practical floor for any ingester.
- cold ingest (library): warehouse.land.ingest.ingest_all into an empty home.
- cold ingest, team mode (library): the same with secrets redacted before writing.
- cold ingest (CLI): `agentlake ingest` end to end (Python, Dagster, views) into an empty home.
- no-op rerun (CLI): `agentlake ingest` again, nothing changed. The CLI runs also get --failed
  broken stores (2 by default), which fail every run as they do in real homes.
- one source changed (CLI): one db gets a new message, then `agentlake ingest`.
- queries: cost by day and project, tool usage, one session's transcript, and each mart
  (read-only, through the DuckLake catalog as every reader opens it).
- the Dagster UI: `dagster-webserver` on the home the CLI runs left, its GraphQL requests for
  the asset catalog, the `landing` partitions, the runs list and the cold run's events.
- team: the same corpus landed under --machines machine names into one lake, merged by one
  writer, compacted; files against (table, date, project) partitions, and the queries again.

With --codex N, instead: a Codex home of N sessions (a file each, with sub-agents' rollouts: landed
as a source per project, or per bucket of 64 sessions): the baseline (read and decode every line),
the CLI's cold ingest, no-op rerun, and a rerun after one new session; --codex-projects 1 puts every
session in one project (a heavy user's).

With --claude N, instead: the same for a Claude Code home of N sessions in one project (half of
them with a sub-agent's transcript: landed as families of transcripts, in buckets), and a rerun
after one line appended to one transcript (a session still running at a scheduled run).

With --agents N, instead: each agent's generated home of N sessions, extracted by the library
in one process (discover, extract, rows as Arrow; nothing written): messages per CPU-second.

With --phases, instead: a cold ingest of the corpus taken apart, in one process with one worker,
each phase's CPU seconds against the baseline's (the same process, the same corpus): landing
(snapshot, read and normalise; Parquet encoding; writing), the merge's tables, the marts built
whole. What the design spends before Dagster, whatever the cores.
"""

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable

BASELINE_IMPORTS = r"""
import json, sqlite3, sys, tempfile, pathlib
from transforms.crush.discover import discover
from transforms.snapshot import take_snapshot
"""
BASELINE_READ = r"""
found = discover(env={}, extra_roots=[sys.argv[1]], use_default=False)
rows = parts = 0
with tempfile.TemporaryDirectory() as tmp:
    for s in found.sources:
        snap = pathlib.Path(tmp) / "s.db"
        take_snapshot(s.path, snap)
        con = sqlite3.connect(snap)
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table in {"sessions", "files", "read_files"} & tables:
            rows += len(con.execute(f"SELECT rowid, * FROM {table}").fetchall())
        for (text,) in con.execute("SELECT parts FROM messages"):
            rows += 1
            parts += len(json.loads(text))
        con.close()
        snap.unlink()
"""
BASELINE = BASELINE_IMPORTS + BASELINE_READ + 'print(json.dumps({"rows": rows, "parts": parts}))\n'

LIBRARY_INGEST = r"""
import dataclasses, json, sys
from transforms.provider import DiscoverOptions
from warehouse.land.ingest import discover_sources, ingest_all
from warehouse.lake.layout import Layout
sources, _ = discover_sources(DiscoverOptions(env={}, extra_roots={"crush": (sys.argv[1],)}, use_default=False))
layout = dataclasses.replace(Layout.resolve(home=sys.argv[2]), team=sys.argv[3] == "team")
summary = ingest_all(sources, layout)
print(json.dumps(dict(summary.rows)))
"""

QUERIES = {
    "cost by day and project": "SELECT date, project, SUM(cost_usd) FROM sessions WHERE is_root GROUP BY ALL",
    "tool usage": "SELECT tool_name, COUNT(*), AVG(is_error::INT), AVG((exit_code <> 0)::INT) FROM tool_calls GROUP BY ALL",
    # as a reader does (the dashboard's session page): find the session, then read it by its key
    # (machine and project included: in a team lake the same source id is on several machines).
    # Both statements are timed; the second's parameters are the first's row.
    "one session transcript": (
        "SELECT project, machine, source_id, session_id FROM sessions WHERE is_root ORDER BY message_count DESC LIMIT 1",
        "SELECT m.message_index, p.part_index, p.part_type, p.text, p.tool_name FROM messages m "
        "JOIN parts p ON p.machine = m.machine AND p.source_id = m.source_id AND p.message_id = m.message_id "
        "WHERE m.project = $1 AND p.project = $1 AND m.machine = $2 AND p.machine = $2 "
        "AND m.source_id = $3 AND p.source_id = $3 AND m.session_id = $4 ORDER BY 1, 2"),
    "mart: daily_costs since a date": "SELECT * FROM daily_costs WHERE date >= DATE '2026-03-01' LIMIT 5",
    "mart: cost by month and project": "SELECT date_trunc('month', date), project, SUM(cost_usd) FROM daily_costs GROUP BY ALL",
    "mart: tool_usage": "SELECT * FROM tool_usage ORDER BY calls DESC LIMIT 20",
    "mart: session_summary top": "SELECT * FROM session_summary ORDER BY cost_usd DESC NULLS LAST LIMIT 20",
}

TEAM_LAND = r"""
import dataclasses, json, sys
from transforms.provider import DiscoverOptions
from warehouse.land.ingest import discover_sources, ingest_all
from warehouse.lake.layout import Layout
sources, _ = discover_sources(DiscoverOptions(env={}, extra_roots={"crush": (sys.argv[1],)}, use_default=False))
for m in range(int(sys.argv[4])):
    layout = Layout.resolve(home=sys.argv[2], lake=sys.argv[3], machine=f"machine-{m:02d}")
    ingest_all(sources, layout)
"""

TEAM_MERGE = r"""
import json, sys
from warehouse.catalog.compaction import compact
from warehouse.catalog.merge import merge
r = merge(sys.argv[1], __import__("pathlib").Path(sys.argv[2]))
c = compact(__import__("pathlib").Path(sys.argv[2]), keep_seconds=0)
print(json.dumps({"merged": r.merged, **c}))
"""


def _corpus(args, work: Path) -> Path:
    """The generated Crush corpus in `work`, made once (--workdir keeps it for the next run)."""
    from transforms.synth.crush import generate_store

    corpus = work / "crush"
    if not (corpus / "projects.json").exists():
        generate_store(corpus, projects=args.projects, sessions_per_project=args.sessions, seed=args.seed,
                       workers=2, days=args.days, long_tail=True)
    return corpus


# Linux keeps a process's peak RSS across fork and exec: a child of this process starts with this
# process's RSS as its peak (a benchmark that built its lakes in memory showed that as its
# children's peak: docs/BENCHMARKS.md, "A team of 10, 30 and 100 machines"). So each measured
# command is started by a small launcher, whose own child inherits the launcher's few MiB only,
# and which reports that child's usage in a file.
LAUNCHER = r"""
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    json.dump({"maxrss": usage.ru_maxrss, "utime": usage.ru_utime, "stime": usage.ru_stime}, out)
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""


def measure(cmd: list[str], env=None, ok=(0,)) -> tuple[float, float, str, float]:
    """(wall seconds, peak RSS in MiB, stdout, CPU seconds of it and its children) of one
    subprocess; `ok`: the exit codes expected."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r", suffix=".json") as usage_file:
        proc = subprocess.Popen([PY, "-S", "-c", LAUNCHER, usage_file.name, *map(str, cmd)], stdout=subprocess.PIPE,
                                stderr=err, env=env, cwd=HERE.parent)
        out = proc.stdout.read().decode()
        code = proc.wait()
        wall = time.perf_counter() - start
        if code not in ok:
            err.seek(0)
            raise SystemExit(f"{cmd[0]} {cmd[1]} failed:\n{err.read().decode()[-2000:]}")
        usage = json.loads(Path(usage_file.name).read_text())
    return wall, usage["maxrss"] / 1024, out, usage["utime"] + usage["stime"]


def du(path: Path, pattern: str = "*") -> int:
    return sum(p.stat().st_size for p in path.rglob(pattern) if p.is_file())


def median_of(runs):
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--projects", type=int, default=60)
    ap.add_argument("--sessions", type=int, default=40, help="root sessions per project")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--days", type=int, default=180, help="days each project's sessions spread over")
    ap.add_argument("--machines", type=int, default=0, help="also land the corpus under N machine names, merged")
    ap.add_argument("--workdir", help="keep the corpus here (default: a temp dir, removed)")
    ap.add_argument("--failed", type=int, default=2,
                    help="broken crush.db files the CLI runs also get (they fail every run, as in real homes)")
    ap.add_argument("--codex", type=int, default=0, help="instead: a Codex home of this many rollouts")
    ap.add_argument("--codex-projects", type=int, choices=(1, 2), default=2,
                    help="the projects the Codex home's sessions are spread over")
    ap.add_argument("--claude", type=int, default=0, help="instead: a Claude Code project of this many sessions")
    ap.add_argument("--agents", type=int, default=0, help="instead: every agent's home of this many sessions")
    ap.add_argument("--phases", action="store_true", help="instead: a cold ingest's CPU by phase, against the baseline's")
    args = ap.parse_args()
    if args.codex:
        return _codex(args)
    if args.claude:
        return _claude(args)
    if args.agents:
        return _agents(args)
    if args.phases:
        return _phases(args)

    work = Path(args.workdir or tempfile.mkdtemp(prefix="agentlake-bench-"))
    t = time.perf_counter()
    corpus = _corpus(args, work)
    gen_s = time.perf_counter() - t
    dbs = list(corpus.rglob("crush.db"))
    messages = sum(sqlite3.connect(d).execute("SELECT COUNT(*) FROM messages").fetchone()[0] for d in dbs)
    source_bytes = sum(du(d.parent, "crush.db*") for d in dbs)

    results = {}
    results["baseline"] = [measure([PY, "-c", BASELINE, str(corpus)]) for _ in range(args.repeat)]
    rows = json.loads(results["baseline"][0][2])
    lib, team, cli_cold, noop, changed, alone = [], [], [], [], [], []
    for i in range(args.repeat):
        home = work / f"lib-{i}"
        lib.append(measure([PY, "-c", LIBRARY_INGEST, str(corpus), str(home), "local"]))
        shutil.rmtree(home)
        team.append(measure([PY, "-c", LIBRARY_INGEST, str(corpus), str(home), "team"]))
        shutil.rmtree(home)
        home = work / f"cli-{i}"
        env = {**os.environ, "AGENTLAKE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
        cli = [str(Path(PY).with_name("agentlake")), "ingest", "--quiet", "--no-default", "--crush-root", str(corpus)]
        cli += [a for db in _broken(work, args.failed) for a in ("--db", str(db))]
        failing = (1,) if args.failed else (0,)  # the exit status says some source failed
        cli_cold.append(measure(cli, env, failing))
        noop.append(measure(cli, env, failing))
        _touch_one(dbs[i % len(dbs)], i)
        changed.append(measure(cli, env, failing))
        solo = work / f"solo-{i}"  # the changed source alone, into an empty home
        alone.append(measure([cli[0], "ingest", "--quiet", "--no-default", "--db", str(dbs[i % len(dbs)])],
                             {**os.environ, "AGENTLAKE_HOME": str(solo), "DAGSTER_HOME": str(solo / "dagster")}))
        shutil.rmtree(solo)
        if i < args.repeat - 1:
            shutil.rmtree(home)
    results.update({"cold ingest (library)": lib, "cold ingest, team mode (library)": team,
                    "cold ingest (CLI)": cli_cold,
                    "no-op rerun (CLI)": noop, "one source changed (CLI)": changed,
                    "that source alone, cold (CLI)": alone})
    lake = home / "lake"  # the team run below keeps its tables beside its own catalog instead
    # the catalog twice: the readers' file and the writer's own copy (warehouse.ducklake)
    lake_bytes = du(lake, "*.parquet") + du(home, "warehouse*.ducklake")
    parquet_files = len(list(lake.rglob("*.parquet")))
    query_times = _queries(home / "warehouse.ducklake", args.repeat)
    query_times["dashboard page"] = _dashboard(home / "warehouse.ducklake", args.repeat)
    query_times.update(_dagster_ui(home, args.repeat))
    _report(args, gen_s, len(dbs), messages, rows, source_bytes, lake_bytes, parquet_files, results, query_times)
    landing = du(lake / "_landing", "*.parquet")
    print(f"\nLake by part: landing files {landing / 2**20:.1f} MiB ({landing / source_bytes:.2f}x the sources), "
          f"tables {(du(lake, '*.parquet') - landing) / 2**20:.1f} MiB, catalog "
          f"{du(home, 'warehouse.ducklake') / 2**20:.1f} MiB (and as much again for the writer's copy).")
    print(_file_report(lake, home / "warehouse.ducklake", "after the CLI runs (compaction as the runs left it)"))
    if args.machines:
        _team(args, work, corpus, messages)
    if not args.workdir:
        shutil.rmtree(work)


CODEX_BASELINE = r"""
import json, pathlib, sys
lines = 0
for path in sorted(pathlib.Path(sys.argv[1]).rglob("rollout-*.jsonl")):
    for line in path.read_bytes().splitlines():
        json.loads(line)
        lines += 1
print(json.dumps({"lines": lines}))
"""


def _codex(args) -> None:
    """A home of many small sources: the cost per source, not per message."""
    from transforms.synth.codex import generate_home

    work = Path(args.workdir or tempfile.mkdtemp(prefix="agentlake-bench-codex-"))
    corpus = work / "codex"
    if not corpus.exists():
        generate_home(corpus, sessions=args.codex, seed=args.seed, workspaces=CODEX_PROJECTS[:args.codex_projects])
    files = list(corpus.rglob("rollout-*.jsonl"))
    results = {"baseline": [measure([PY, "-c", CODEX_BASELINE, str(corpus)]) for _ in range(args.repeat)]}
    cold, noop, one_new = [], [], []
    for i in range(args.repeat):
        home = work / f"cli-{i}"
        env = {**os.environ, "AGENTLAKE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
        cli = [str(Path(PY).with_name("agentlake")), "ingest", "--quiet", "--no-default",
               "--agent-home", f"codex={corpus}"]
        cold.append(measure(cli, env))
        noop.append(measure(cli, env))
        messages = subprocess.run([cli[0], "sql", "SELECT COUNT(*) FROM messages", "--format", "csv"], env=env,
                                  capture_output=True, text=True).stdout.split()[-1]
        new = _new_rollout(corpus)  # a session started in one of the home's projects
        one_new.append(measure(cli, env))
        new.unlink()
        shutil.rmtree(home)
    results.update({"cold ingest (CLI)": cold, "no-op rerun (CLI)": noop,
                    "one new session (CLI)": one_new})
    _phase_table(f"Codex home: {len(files)} rollouts, {du(corpus) / 2**20:.1f} MiB, {messages} messages",
                 results, args.repeat)
    if not args.workdir:
        shutil.rmtree(work)


def _phase_table(title: str, results: dict, repeat: int) -> None:
    """Each phase's median wall time against the baseline's, and its peak memory."""
    base = median_of(results["baseline"])[0]
    print(f"{title}; medians of {repeat}\n")
    print("| phase | wall (s) | vs baseline | peak RSS (MiB) |\n| --- | ---: | ---: | ---: |")
    for name, runs in results.items():
        wall, rss = median_of(runs)
        print(f"| {name} | {wall:.2f} | {wall / base:.1f}x | {rss:.0f} |")


CLAUDE_BASELINE = CODEX_BASELINE.replace('rglob("rollout-*.jsonl")', 'rglob("*.jsonl")')


def _claude(args) -> None:
    """A heavy user's Claude Code project: what one new session and one grown transcript cost."""
    from transforms.synth.claude import generate_home

    work = Path(args.workdir or tempfile.mkdtemp(prefix="agentlake-bench-claude-"))
    corpus = work / "claude"
    if not corpus.exists():
        generate_home(corpus, sessions=args.claude, seed=args.seed, workspaces=CODEX_PROJECTS[:1])
    files = sorted(corpus.rglob("*.jsonl"))
    results = {"baseline": [measure([PY, "-c", CLAUDE_BASELINE, str(corpus)]) for _ in range(args.repeat)]}
    runs: dict[str, list] = {"cold ingest (CLI)": [], "no-op rerun (CLI)": [], "one new session (CLI)": [],
                             "one line appended to one transcript (CLI)": []}
    grown = next(f for f in files if "/" not in f.relative_to(corpus / "projects").as_posix().split("/", 1)[1])
    kept = grown.read_bytes()
    for i in range(args.repeat):
        home = work / f"cli-{i}"
        env = {**os.environ, "AGENTLAKE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
        cli = [str(Path(PY).with_name("agentlake")), "ingest", "--quiet", "--no-default",
               "--agent-home", f"claude={corpus}"]
        runs["cold ingest (CLI)"].append(measure(cli, env))
        runs["no-op rerun (CLI)"].append(measure(cli, env))
        messages = subprocess.run([cli[0], "sql", "SELECT COUNT(*) FROM messages", "--format", "csv"], env=env,
                                  capture_output=True, text=True).stdout.split()[-1]
        new = _new_claude_session(grown.parent)
        runs["one new session (CLI)"].append(measure(cli, env))
        _append_claude_line(grown)
        runs["one line appended to one transcript (CLI)"].append(measure(cli, env))
        new.unlink()
        grown.write_bytes(kept)
        shutil.rmtree(home)
    results.update(runs)
    _phase_table(f"Claude Code project: {len(files)} transcripts, {du(corpus) / 2**20:.1f} MiB, {messages} messages",
                 results, args.repeat)
    if not args.workdir:
        shutil.rmtree(work)


def _new_claude_session(project: Path) -> Path:
    from datetime import datetime, timezone

    from transforms.synth.claude import assistant_lines, usage, user_line, write_jsonl

    sid, at, cwd = "00000000-0000-4000-8000-00000000beef", datetime(2026, 11, 30, 9, tzinfo=timezone.utc), \
        CODEX_PROJECTS[0]
    lines = [user_line(sid, at, cwd, "one more thing")] + assistant_lines(
        sid, at, cwd, message_id="msg_bench_new", request_id="req_bench_new", model="claude-sonnet-4-5-20250929",
        blocks=[{"type": "text", "text": "done"}], final_usage=usage(12, 300), stop_reason="end_turn")
    return write_jsonl(project / f"{sid}.jsonl", lines)


def _append_claude_line(transcript: Path) -> None:
    """One more response in a session's own transcript, as Claude Code appends it."""
    from datetime import datetime, timezone

    from transforms.synth.claude import assistant_lines, usage, write_jsonl

    first = json.loads(transcript.read_text().splitlines()[1])  # its first line is a file-history snapshot
    write_jsonl(transcript, assistant_lines(first["sessionId"], datetime(2026, 11, 30, 10, tzinfo=timezone.utc),
                                            first["cwd"], message_id="msg_bench_more", request_id="req_bench_more",
                                            model="claude-sonnet-4-5-20250929", final_usage=usage(3, 30),
                                            blocks=[{"type": "text", "text": "more"}], stop_reason="end_turn"))


CODEX_PROJECTS = ("/home/dev/webshop", "/home/dev/infra-tools")  # the new session joins the first


def _new_rollout(corpus: Path) -> Path:
    from datetime import datetime, timezone

    from transforms.synth.codex import RolloutBuilder

    b = RolloutBuilder("00000000-0000-4000-8000-00000000beef", start=datetime(2026, 11, 30, 9, tzinfo=timezone.utc),
                       cwd="/home/dev/webshop")
    b.turn("gpt-5.3-codex")
    b.prompt("one more thing")
    b.say("done")
    b.tokens(12000, 8000, 300)
    return b.write(corpus)


AGENT_EXTRACT = r"""
import json, pathlib, sys, tempfile
from datetime import datetime, timezone
from transforms.contract import BY_NAME
from transforms.provider import DiscoverOptions
from transforms.providers import PROVIDERS
from warehouse.land.landing_files import to_arrow
name, home = sys.argv[1], sys.argv[2]
provider = PROVIDERS[name]
found = provider.discover(DiscoverOptions(env={}, extra_roots={name: (home,)}, use_default=False))
messages = 0
with tempfile.TemporaryDirectory() as tmp:
    for source in found.sources:
        rows = provider.extract(source, pathlib.Path(tmp), datetime.now(timezone.utc)).rows
        tables = {t: to_arrow(BY_NAME[t], r) for t, r in rows.items() if t in BY_NAME}
        messages += tables["messages"].num_rows if "messages" in tables else 0
print(json.dumps({"sources": len(found.sources), "messages": messages}))
"""


PHASES = BASELINE_IMPORTS + r"""
import time
corpus, home = sys.argv[1], pathlib.Path(sys.argv[2])
cpu = time.process_time  # the whole process: DuckDB's threads too
T = {}
t = cpu()  # the baseline, as BASELINE does it
""" + BASELINE_READ + r"""
T["baseline"] = cpu() - t
import warehouse.land.ingest as ing
from transforms.provider import DiscoverOptions
from transforms.providers import PROVIDERS
from warehouse.lake.layout import Layout, tables_path
def timed(obj, name, label):
    f = getattr(obj, name)
    def g(*a, **k):
        s = cpu()
        try:
            return f(*a, **k)
        finally:
            T[label] = T.get(label, 0) + cpu() - s
    setattr(obj, name, g)
timed(PROVIDERS["crush"], "extract", "landing: snapshot, read and normalise")
timed(ing, "build_files", "landing: Parquet encoding")
timed(ing, "write_files", "landing: writing the files")
sources, _ = ing.discover_sources(DiscoverOptions(env={}, extra_roots={"crush": (corpus,)}, use_default=False))
layout = Layout.resolve(home=home)
t, run = cpu(), ing.new_run_id()
for source in sources:
    ing.ingest_source(source, ing.Run(layout, run))
T["landing: the rest (state, fingerprints)"] = cpu() - t - sum(v for k, v in T.items() if k.startswith("landing"))
from warehouse.lake import ducklake
from warehouse.catalog import marts
from warehouse.catalog.merge import merge
t = cpu()
merge(layout.lake, layout.warehouse, marts=False)
T["merge: the tables (the landing files read again, the tables written)"] = cpu() - t
t = cpu()
with ducklake.writing(layout.warehouse, tables_path(layout.lake, layout.warehouse)) as con:
    con.execute("BEGIN")  # as the merge builds them: one transaction
    marts.refresh_marts(con, whole=True)
    con.execute("COMMIT")
T["merge: the marts, built whole"] = cpu() - t
print(json.dumps(T))
"""


def _phases(args) -> None:
    """A cold ingest's CPU by phase, against the baseline's, in one process: medians of --repeat."""
    work = Path(args.workdir or tempfile.mkdtemp(prefix="agentlake-bench-phases-"))
    corpus = _corpus(args, work)
    runs = []
    for i in range(args.repeat):
        home = work / f"phases-{i}"
        runs.append(json.loads(measure([PY, "-c", PHASES, str(corpus), str(home)])[2]))
        shutil.rmtree(home)
    floor = statistics.median(r["baseline"] for r in runs)
    print(f"A cold ingest taken apart, one process and one worker; CPU seconds, medians of {args.repeat}\n")
    print("| phase | CPU (s) | x baseline |")
    print("| --- | ---: | ---: |")
    for phase in runs[0]:
        value = statistics.median(r[phase] for r in runs)
        print(f"| {phase} | {value:.2f} | {value / floor:.2f} |")
    if not args.workdir:
        shutil.rmtree(work)


def _agents(args) -> None:
    """Every agent but Crush (the main corpus), library only: the normaliser's own speed."""
    import importlib

    from transforms.providers import PROVIDERS

    work = Path(args.workdir or tempfile.mkdtemp(prefix="agentlake-bench-agents-"))
    print(f"Each agent's generated home of {args.agents} sessions, extracted in one process; medians of "
          f"{args.repeat}\n")
    print("| agent | sources | messages | wall (s) | ms per source | messages per CPU-second | peak RSS (MiB) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in sorted(p for p in PROVIDERS if p != "crush"):
        home = work / name
        if not home.exists():
            importlib.import_module(f"transforms.synth.{name}").generate_home(home, sessions=args.agents, seed=args.seed)
        runs = [measure([PY, "-c", AGENT_EXTRACT, name, str(home)]) for _ in range(args.repeat)]
        facts = json.loads(runs[0][2])
        wall, rss = median_of(runs)
        cpu = statistics.median(r[3] for r in runs)
        print(f"| {name} | {facts['sources']:,} | {facts['messages']:,} | {wall:.2f} | "
              f"{wall * 1000 / max(facts['sources'], 1):.1f} | {facts['messages'] / cpu:,.0f} | {rss:.0f} |")
    if not args.workdir:
        shutil.rmtree(work)


def _broken(work: Path, n: int) -> list[Path]:
    """Stores that are not SQLite databases (a copy cut short, a disk error)."""
    out = []
    for k in range(n):
        db = work / f"broken-{k}" / ".crush" / "crush.db"
        if not db.exists():
            db.parent.mkdir(parents=True, exist_ok=True)
            db.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 16)
        out.append(db)
    return out


def _touch_one(db: Path, i: int) -> None:
    con = sqlite3.connect(db)
    sid = con.execute("SELECT id FROM sessions LIMIT 1").fetchone()[0]
    con.execute("INSERT INTO messages (id, session_id, role, parts, model, created_at, updated_at) "
                "VALUES (?, ?, 'user', '[]', '', strftime('%s','now'), strftime('%s','now'))", (f"bench-{uuid.uuid4()}", sid))
    con.commit()
    con.close()


def _file_report(lake: Path, warehouse: Path, when: str) -> str:
    """Curated data files against the partitions they hold, and against the (table, date,
    project) pairs present (the target's measure)."""
    from transforms.contract import ALL_TABLES
    from warehouse.lake.layout import tables_path
    from warehouse.lake.ducklake import connect

    # in the lake for a home's own, beside the catalog for a team's (it counted 0 files there)
    tables = Path(tables_path(lake, warehouse))
    files = [p for t in ALL_TABLES for p in (tables / "main" / t.name).rglob("*.parquet")]
    partitions = {p.parent for p in files}
    with connect(warehouse) as con:
        days = sum(con.execute(f'SELECT COUNT(DISTINCT (date, project)) FROM "{t.name}"').fetchone()[0]
                   for t in ALL_TABLES)
    landing = len(list((lake / "_landing").rglob("*.parquet")))
    return (f"\nTable data files {when}: {len(files):,} in {len(partitions):,} (table, year, project) partitions "
            f"({len(files) / max(1, len(partitions)):.2f} per partition), {len(files) / max(1, days):.2f} per "
            f"(table, date, project) pair present ({days:,}); landing files: {landing:,}.")


def _dashboard(warehouse: Path, repeat: int) -> float:
    """Median seconds to draw and serve the dashboard's overview (all its charts), over HTTP on
    loopback. Each request asks for another ranking length, so the server's page cache never
    answers it: every figure is a first view."""
    import threading
    import urllib.request

    from warehouse.serve.dashboard.server import make_server

    server = make_server(warehouse, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    times = []
    try:
        for i in range(repeat + 1):  # the first warms the chart renderer (paid once per server)
            url = server.url + ("&" if "?" in server.url else "?") + f"top={15 + i}"
            t = time.perf_counter()
            with urllib.request.urlopen(url, timeout=60) as response:
                response.read()
            times.append(time.perf_counter() - t)
    finally:
        server.shutdown()
    return statistics.median(times[1:])


# What the Dagster UI asks its server for on its main pages (the same fields, fewer of them).
UI_QUERIES = {
    "Dagster UI: asset catalog": "{ assetsOrError { ... on AssetConnection { nodes { key { path } "
                                 "assetMaterializations(limit: 1) { runId timestamp } } } } }",
    "Dagster UI: landing's partitions": '{ assetNodeOrError(assetKey: {path: ["landing"]}) { ... on AssetNode { '
                                        "partitionKeys assetPartitionStatuses { ... on DefaultPartitionStatuses { "
                                        "materializedPartitions failedPartitions } } } } }",
    # the CLI's runs are no Dagster runs: their events are the materializations the sensor reported
    "Dagster UI: landing's events": '{ assetOrError(assetKey: {path: ["landing"]}) { ... on Asset { '
                                    "assetMaterializations(limit: 1000) { partition timestamp tags { key value } "
                                    "metadataEntries { label } } } } }",
}

# What `agentlake dev` shows of a home the CLI ingested: its Dagster home (pipelines.runner.dagster_env),
# with the CLI's runs reported by the sensor `cli_runs_reported`, each tick applied as Dagster's daemon
# does, until no run is left to report. Prints the events reported.
REPORT_CLI_RUNS = r"""
import os, sys
import dagster as dg
from pipelines.defs.cli_runs_sensor import cli_runs_reported
from pipelines.defs.resources import AgentlakeResource
from pipelines.runner import dagster_env
from warehouse.lake.layout import Layout
os.environ["DAGSTER_HOME"] = dagster_env(Layout.resolve(home=sys.argv[1]))["DAGSTER_HOME"]
resource, cursor, events = AgentlakeResource(home=sys.argv[1]), None, 0
with dg.DagsterInstance.get() as instance:
    while True:
        with dg.build_sensor_context(instance=instance, cursor=cursor, resources={"agentlake": resource}) as context:
            tick = cli_runs_reported(context)
        if not tick.asset_events:  # every tick has a skip reason: a reporting one says what it reported
            break
        for request in tick.dynamic_partitions_requests:
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        for event in tick.asset_events:
            instance.report_runless_asset_event(event)
        cursor, events = tick.cursor, events + len(tick.asset_events)
print(events)
"""


def _dagster_ui(home: Path, repeat: int) -> dict[str, float]:
    """Median seconds of each UI_QUERIES page's GraphQL request to `dagster-webserver` over
    loopback, on the home the CLI runs left, once the sensor reported them (REPORT_CLI_RUNS)."""
    import socket
    import urllib.request

    env = {**os.environ, "AGENTLAKE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    reported = int(measure([PY, "-c", REPORT_CLI_RUNS, str(home)], env)[2].split()[-1])
    if not reported:
        raise RuntimeError(f"the sensor reported no `agentlake ingest` run of {home}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tempfile.TemporaryFile()
    server = subprocess.Popen([str(Path(PY).with_name("dagster-webserver")), "-m", "pipelines.definitions",
                               "-h", "127.0.0.1", "-p", str(port)], env=env, cwd=HERE.parent,
                              stdout=subprocess.DEVNULL, stderr=log)

    def ask(query: str) -> dict:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", json.dumps({"query": query}).encode(),
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            answer = json.loads(response.read())
        if answer.get("errors"):
            raise RuntimeError(f"GraphQL: {answer['errors'][0].get('message')}")
        return answer["data"]

    try:
        loaded = "{ workspaceOrError { ... on Workspace { locationEntries { loadStatus } } } }"
        deadline = time.monotonic() + 180
        while True:  # the server answers before its code location is loaded
            try:
                entries = ask(loaded)["workspaceOrError"]["locationEntries"]
                if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"dagster-webserver did not start:\n{log.read().decode()[-2000:]}")
            time.sleep(0.5)
        out = {}
        for name, query in UI_QUERIES.items():
            times = []
            for _ in range(repeat + 1):  # the first warms the server's caches
                t = time.perf_counter()
                ask(query)
                times.append(time.perf_counter() - t)
            out[name] = statistics.median(times[1:])
        return out
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def _team(args, work: Path, corpus: Path, messages: int) -> None:
    home, lake = work / "team-home", work / "team-lake"
    land = measure([PY, "-c", TEAM_LAND, str(corpus), str(home), str(lake), str(args.machines)])
    merge = measure([PY, "-c", TEAM_MERGE, str(lake), str(home / "warehouse.ducklake")])
    facts = json.loads(merge[2].strip().splitlines()[-1])
    print(f"\n## Team: the corpus under {args.machines} machine names, {args.machines * messages:,} messages\n")
    print(f"Landing (library, all machines in one process): {land[0]:.1f} s; one merge of every machine "
          f"plus compaction: {merge[0]:.1f} s, peak RSS {merge[1]:.0f} MiB "
          f"(data files {facts['files_before']:,} before compaction, {facts['files_after']:,} after).")
    print(_file_report(lake, home / "warehouse.ducklake", "after compaction"))
    times = _queries(home / "warehouse.ducklake", args.repeat)
    times["dashboard page"] = _dashboard(home / "warehouse.ducklake", args.repeat)
    print("\n| query (warm, read-only), team lake | median (ms) | target |\n| --- | ---: | --- |")
    for name, seconds in times.items():
        target = 500 if name == "dashboard page" else 100 if name.startswith("mart") else 200
        print(f"| {name} | {seconds * 1000:.1f} | <= {target} ms {'met' if seconds * 1000 <= target else 'NOT met'} |")


def _run(con, sql: str | tuple[str, ...]) -> list:
    """One statement, or several where each takes the previous one's first row as parameters."""
    params, rows = None, []
    for statement in (sql,) if isinstance(sql, str) else sql:
        rows = con.execute(statement, params).fetchall()
        params = list(rows[0]) if rows else None
    return rows


def _queries(warehouse: Path, repeat: int) -> dict[str, float]:
    from warehouse.lake.ducklake import connect

    out = {}
    with connect(warehouse) as con:
        for name, sql in QUERIES.items():
            times = []
            for _ in range(repeat + 1):
                t = time.perf_counter()
                _run(con, sql)
                times.append(time.perf_counter() - t)
            out[name] = statistics.median(times[1:])  # the first run warms the file cache
    return out


def _report(args, gen_s, n_dbs, messages, rows, source_bytes, lake_bytes, files, results, query_times) -> None:
    base_wall, _ = median_of(results["baseline"])
    print(f"Corpus: {n_dbs} crush.db, {messages:,} messages, {rows['parts']:,} parts, {rows['rows']:,} source rows, "
          f"{source_bytes / 2**20:.1f} MiB (generated in {gen_s:.1f} s; --projects {args.projects} "
          f"--sessions {args.sessions} --seed {args.seed}).")
    print(f"Lake: {lake_bytes / 2**20:.1f} MiB in {files} Parquet files "
          f"({lake_bytes / source_bytes:.2f}x the source size). Medians of {args.repeat} runs.\n")
    print("| phase | wall (s) | x baseline | peak RSS (MiB) | messages/s | messages per CPU-second |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, runs in results.items():
        wall, rss = median_of(runs)
        cpu = statistics.median(r[3] for r in runs)
        rate = f"{messages / wall:,.0f}" if "cold ingest" in name or name == "baseline" else ""
        per_core = f"{messages / cpu:,.0f}" if rate and cpu else ""
        print(f"| {name} | {wall:.2f} | {wall / base_wall:.2f} | {rss:.0f} | {rate} | {per_core} |")
    print("\n| query (warm, read-only) | median (ms) |\n| --- | ---: |")
    for name, seconds in query_times.items():
        print(f"| {name} | {seconds * 1000:.1f} |")
    med = {name: median_of(runs) for name, runs in results.items()}
    cold, cold_rss = med["cold ingest (CLI)"]
    noop = med["no-op rerun (CLI)"][0]
    changed, alone = med["one source changed (CLI)"][0], med["that source alone, cold (CLI)"][0]
    peak = max(rss for _, rss in med.values())
    checks = [
        ("cold ingest (CLI) <= 2x baseline", f"{cold / base_wall:.2f}x", cold <= 2 * base_wall),
        ("peak RSS <= 1.5 GB", f"{peak:.0f} MiB", peak <= 1536),
        ("no-op rerun <= 1 s", f"{noop:.2f} s", noop <= 1),
        ("one changed <= no-op + 3 s", f"{changed:.2f} s vs {noop + 3:.2f} s", changed <= noop + 3),
        ("raw-table queries <= 0.2 s", f"{max(v for k, v in query_times.items() if k in QUERIES and not k.startswith('mart')) * 1000:.0f} ms",
         max(v for k, v in query_times.items() if k in QUERIES and not k.startswith("mart")) <= 0.2),
        ("dashboard page <= 0.5 s", f"{query_times['dashboard page'] * 1000:.0f} ms", query_times["dashboard page"] <= 0.5),
        ("mart queries <= 0.1 s", f"{max(v for k, v in query_times.items() if k.startswith('mart')) * 1000:.0f} ms",
         max(v for k, v in query_times.items() if k.startswith("mart")) <= 0.1),
        ("lake <= 25% of the sources", f"{lake_bytes / source_bytes:.2f}x", lake_bytes <= 0.25 * source_bytes),
    ]
    print("\n| target | measured | met |\n| --- | ---: | :---: |")
    for name, value, ok in checks:
        print(f"| {name} | {value} | {'yes' if ok else 'NO'} |")


if __name__ == "__main__":
    main()
