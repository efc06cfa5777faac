"""What each `agentlake` command that lands, merges, generates or serves does: a function per
command (`cmd_<name>(args) -> exit status`). The commands that read the warehouse (sql, report,
search) are in pipelines/reading.py, what every command takes from its arguments in
pipelines/command_args.py, the parser and `main` in pipelines/cli.py."""

import json
import os
import shlex
import shutil
import signal
import sys
from collections import Counter
from functools import partial
from pathlib import Path

from pipelines.command_args import (
    DISCOVERY_FLAGS, UsageError, agent_homes, command_for, discover_options, layout_of, merged_lake,
    nothing_ingested, print_err, refuse_team_catalog_flag, tsv_field)
from pipelines.reading import no_warehouse, own_config_file, report_zone, search_index_of
from transforms.provider import DiscoverOptions
from warehouse.lake.config import DEMO, has_data, load_config, load_layout, settings_file
from warehouse.lake.layout import (Layout, check_catalog, check_lake_writable, home_flag, make_home, own_lake,
                                   same_lake)
from warehouse.lake.pg_catalog import is_postgres



def cmd_sources(args) -> int:
    from warehouse.land.ingest import discover_sources

    layout = layout_of(args)
    sources, problems = discover_sources(discover_options(args, layout))
    for problem in problems:
        print_err(f"warning: {problem}")
    for s in sources:
        state = f"skipped: {s.skip_reason}" if s.skip_reason else "ok"
        print(f"{s.partition_key}\t{tsv_field(s.path)}\t{tsv_field(state)}")
    if not sources:
        print_err("no sources found: each agent is looked for where it keeps its data (docs/SOURCES.md); name other "
                  "places with --agent-home AGENT=DIR, or try `agentlake demo`")
    return 1 if problems else 0


def cmd_ingest(args) -> int:
    from dataclasses import replace

    from pipelines.runner import run_ingest
    from pipelines.summary import print_summary

    from transforms.crush.discover import global_data_dir

    layout = layout_of(args)
    refuse_team_catalog_flag(args, layout, "`agentlake ingest`")
    if is_postgres(layout.warehouse):  # a reader of the team's catalog: the center alone writes it
        layout = replace(layout, warehouse=layout.home / "warehouse.ducklake")
    make_home(layout.home)
    check_lake_writable(layout)
    check_catalog(layout.warehouse)  # a folder or a file not DuckDB's: said before any source is read
    options = discover_options(args, layout)
    if _unredacted_share(args, layout):
        print_err(f"warning: the lake {layout.lake} is a folder other than this home's own (a shared directory?) and "
             "team mode is off: rows are written as the agents hold them, secrets included. Set team = true in "
             f"{layout.config_file} (or --team) to redact them, or team = false (--no-team) to say it is meant")
    _say_names_stored_otherwise(args, layout)
    summary = run_ingest(layout, options, full_refresh=args.full_refresh, quiet=args.quiet)
    print_summary(summary, layout, verbose=args.verbose, sql=command_for(layout, "sql"))
    _mixed_with_a_demo(layout, summary)
    if not args.quiet and not _places_named(args):
        _say_not_found(layout, summary, verbose=args.verbose)
    if not summary.results:
        where = (f"looked in each agent's default home, e.g. {global_data_dir(options.env) / 'projects.json'}"
                 if options.use_default else "looked in the named places"
                 if any(options.extra_stores.values()) or any(options.extra_roots.values())
                 else "no default homes (--no-default, or use_default = false), and no place named")
        print_err(f"no sources found ({where}); name stores with --db, --crush-root, --codewhale-home "
                  "or --agent-home AGENT=DIR" + ("" if has_data(layout) else ", or try `agentlake demo`"))
    return summary.exit_code


def _say_names_stored_otherwise(args, layout: Layout) -> None:
    """--user and --machine are stored as slugs (`Ana.Smith` is ana-smith): said when one changed,
    as the reports and the dashboard will show it (a trial's names changed without a word)."""
    pairs = [(flag, given, stored) for flag, given, stored in (("user", args.user, layout.user),
                                                              ("machine", args.machine, layout.machine))
             if given and given != stored]
    if pairs and not args.quiet:
        said = [f"--{flag} {given!r} " + ("is stored as" if not i else "as") + f" {stored!r}"
                for i, (flag, given, stored) in enumerate(pairs)]
        print_err(f"note: {', and '.join(said)} (names are kept in lower case letters, digits and dashes; "
                  "filters and budgets take either)")


NOT_FOUND_SAID = "not-found-said.json"  # in the state folder: the sources a run said it did not find


def _places_named(args) -> bool:
    """The run looked only where its flags said, not everywhere the home looks."""
    return any(getattr(args, flag) for flag in DISCOVERY_FLAGS)


def _say_not_found(layout: Layout, summary, verbose: bool) -> None:
    """Sources landed before that a run looking everywhere did not find: their rows stay, and a
    moved store or an agent's home variable set elsewhere said nothing (a trial's deleted home).
    Said by the run that first misses them (`--verbose`: every run, naming them). The demo's
    sources are found by `agentlake demo` only."""
    from transforms.providers import PROVIDERS
    from transforms.said_once import not_said_before
    from warehouse.land.demo_home import is_demos
    from warehouse.land.source_state import SourceStates

    found = {(r.source.provider, r.source.source_id) for r in summary.results}
    missing = sorted((agent, path) for agent, paths in SourceStates(layout).not_found(found, PROVIDERS).items()
                     for path in paths if not is_demos(path))
    newly, remember = not_said_before(layout.state_dir / NOT_FOUND_SAID if layout.state_dir.is_dir() else None,
                                      [f"{agent} {path}" for agent, path in missing])
    remember()
    said = [pair for pair in missing if verbose or f"{pair[0]} {pair[1]}" in newly]
    if not said:
        return
    agents = Counter(agent for agent, _ in said)
    print_err(f"note: {len(said)} source{'s' if len(said) > 1 else ''} landed before "
              f"{'were' if len(said) > 1 else 'was'} not found this run "
              f"({', '.join(f'{agent} {n}' for agent, n in sorted(agents.items()))}): the lake keeps their rows. A "
              "store deleted or moved, or an agent's home set elsewhere? " + ("" if verbose else "--verbose names them; ")
              + "`agentlake sources` lists what is found")
    for agent, path in said if verbose else ():
        print_err(f"  not found: {agent} {path}")


def _mixed_with_a_demo(layout: Layout, summary) -> None:
    """An agent's own sessions landed in a home `agentlake demo` wrote into: the totals now add
    the generated sessions to the user's, which only the dashboard's banner said (a new user's
    trial). Said once per run that lands own data there; `agentlake demo` itself refuses the
    other way round (warehouse.land.demo_home)."""
    from warehouse.land.demo_home import DEMO_DATA, is_demos

    if not (layout.home / DEMO_DATA).is_dir():
        return
    own = [r for r in summary.results if r.status == "ok" and not is_demos(r.source.path)]
    if own:
        print_err(f"warning: {layout.home} also holds `agentlake demo`'s generated sessions ({layout.home / DEMO_DATA}): "
             f"the report and the dashboard add them to the {len(own)} source{'s' if len(own) > 1 else ''} of "
             "your own this run landed. To keep yours alone, ingest into a home of its own (--home, "
             "$AGENTLAKE_HOME); the demo belongs in one too (`agentlake demo --home DIR`)")


def _unredacted_share(args, layout: Layout) -> bool:
    """A folder lake that is not the home's own, with team mode left to its default (off for a
    folder): a share other machines read, unredacted, and nothing said (a team lead's trial)."""
    if layout.team or layout.remote or any(own_lake(layout.lake, catalog)  # (the home's, a --warehouse elsewhere)
                                          for catalog in (layout.warehouse, layout.home / "warehouse.ducklake")):
        return False
    return args.team is None and load_config(layout.config_file).team is None


def cmd_demo(args) -> int:
    from pipelines.runner import run_ingest
    from pipelines.summary import print_summary
    from transforms.synth.demo import HOMES, generate_demo
    from warehouse.land.demo_home import (
        DEMO_DATA, NotADemoHome, demo_made, describe, forget_demo_sources, refuse_real_data)

    layout = layout_of(args)
    try:
        refuse_real_data(layout)
    except NotADemoHome as exc:
        raise UsageError(str(exc)) from None
    make_home(layout.home)
    root = layout.home / DEMO_DATA
    done = root / ".generated"  # written last: a demo cut short is generated again
    wanted = {"seed": args.seed, "projects": args.projects, "sessions": args.sessions}
    made = demo_made(done) if done.exists() else None
    if made is None or made != wanted or args.regenerate:
        if made and any(made.get(k) != v for k, v in wanted.items() if k in made):
            # the options say which demo: one of another seed or size replaces it, never hides behind it
            print_err(f"replacing the demo of {describe(made)} in {root} with {describe(wanted)} "
                 "(the same options keep a demo as it is; --regenerate writes it again)")
        print_err(f"generating demo data for {', '.join(HOMES)} in {root} ({describe(wanted)}) ...")
        shutil.rmtree(root, ignore_errors=True)  # first: a demo cut short from here is generated again
        forget_demo_sources(layout, root, everything=True)
        generate_demo(root, projects=args.projects, sessions=args.sessions, seed=args.seed)
        done.write_text(" ".join(f"{k} {v}" for k, v in wanted.items()) + "\n")
    else:
        forget_demo_sources(layout, root, everything=False)  # a demo home moved or copied here
    # the home's project names apply to the demo's sessions as to any (a rename is what a new user
    # tries on it); its other settings name places, which the demo's stores are not
    # (the home a quickstart demo stands in for keeps them: settings_file)
    settings = settings_file(layout)
    names = load_config(settings).project_names if settings.exists() else {}
    options = DiscoverOptions(env={}, extra_roots={p: (str(root / d),) for p, d in HOMES.items()},
                              use_default=False, project_names=names, cache_root=layout.cache_dir)
    # so that `agentlake dev` on this home finds the demo's stores: in quickstart's <home>/demo, or a
    # home named for the demo with --home; never a home only defaulted to (it may be the one your
    # own agents' data goes to later, which `use_default = false` would hide)
    if (layout.home.name == DEMO or args.home) and not layout.config_file.exists():
        _write_demo_config(layout, options)
        home = shlex.quote(str(layout.home))
        print_err(f"wrote {layout.config_file}: the demo's stores, for `agentlake dev --home {home}`")
    summary = run_ingest(layout, options, full_refresh=False, quiet=args.quiet)
    print_summary(summary, layout, verbose=args.verbose, demo=True, sql=command_for(layout, "sql"))
    _first_look(layout, demo=describe(wanted))
    return summary.exit_code


def _write_demo_config(layout, options) -> None:
    lines = ["# written by `agentlake demo` (which `agentlake quickstart` runs): the demo's stores,",
             "# so the Dagster UI (`agentlake dev --home " + shlex.quote(str(layout.home)) + "`) materialises them too",
             "use_default = false"]
    for provider, roots in sorted(options.extra_roots.items()):
        lines += ["", f"[{provider}]", "extra_roots = [" + ", ".join(json.dumps(r) for r in roots) + "]"]
    layout.config_file.parent.mkdir(parents=True, exist_ok=True)
    layout.config_file.write_text("\n".join(lines) + "\n")


def cmd_quickstart(args) -> int:
    """Your own Crush data if there is any, else a demo; then a first look at the result."""
    from warehouse.land.ingest import discover_sources

    layout = layout_of(args)
    make_home(layout.home)
    sources, problems = discover_sources(discover_options(args, layout))
    if any(not s.skip_reason for s in sources):
        code = cmd_ingest(args)
        _first_look(layout)
        return code
    for problem in problems:  # a place that could not be read is no reason for a demo to hide it
        print_err(f"warning: {problem}")
    from transforms.providers import PROVIDERS

    print_err(f"no data of any of the {len(PROVIDERS)} agents agentlake reads found on this machine: "
         f"using a generated demo dataset instead, in {layout.home / DEMO}; until {layout.home} holds data "
         "of its own, the other commands use it too")
    args.home = str(layout.home / DEMO)
    args.lake = args.warehouse = None
    args.projects, args.sessions, args.seed, args.regenerate = 4, 6, 7, False
    code = cmd_demo(args)
    return max(code, 1) if problems else code


FIRST_LOOK = """
SELECT provider AS agent,
       COUNT(DISTINCT project) AS projects,
       COUNT(*) AS root_sessions,
       ROUND(SUM(cost_usd), 4) AS cost_usd,
       STRING_AGG(DISTINCT cost_source, ', ' ORDER BY cost_source) AS cost_source
FROM sessions WHERE is_root
GROUP BY ALL ORDER BY cost_usd DESC NULLS LAST, agent
"""


def _first_look(layout: Layout, demo: str | None = None) -> None:
    """`demo`: what the demo was generated with, when the data is one (said before its figures)."""
    from warehouse.serve.formatting import render
    from warehouse.lake.ducklake import connect

    with connect(layout.warehouse, layout.tables_path, ours=True) as con:
        cur = con.execute(FIRST_LOOK)
        if demo:
            print(f"\nThis is a demo: sessions generated by agentlake ({demo}), not your agents'.")
        print("\nCost per agent (root sessions only: a root's cost includes its sub-agents'; cost_source: "
              "native = the agent's own, estimated = priced by us, configured = config.toml's prices, "
              "partial = some requests unpriced, "
              "unknown = no price, never $0):")
        print(render([d[0] for d in cur.description], cur.fetchall()))
        # a demo's sessions are on fixed days (its seed's numbers whenever it is made): --week shows none.
        # A day either side: the report counts the days of its time zone, these are UTC's
        first, last = con.execute('SELECT MIN("date") - 1, MAX("date") + 1 FROM sessions').fetchone() if demo \
            else (None, None)
    command = partial(command_for, layout)
    window = f"the demo's days, and one either side for time zones: --since {first} --until {last}" if first \
        else "--week"
    print(f"\nNext: {command('report')}                 (cost and use by project; --by agent|day|week|model|category; {window})")
    print(f"      {command('report')} --insights      (money that buys nothing, with the SQL behind it)")
    print(f"      {command('dashboard')}              (the team dashboard in a browser)")
    print(f"      {command('sql')} \"SELECT tool_name, COUNT(*) AS calls FROM tool_calls GROUP BY 1 ORDER BY 2 DESC\"")




def cmd_serving(args) -> int:
    from warehouse.catalog.search_index import search_path as search_index_path
    from warehouse.lake.ducklake import writer_path
    from warehouse.serve.serving_file import ServingError, build_serving, check_storage_version, check_target

    layout = layout_of(args)
    target = Path(args.output).expanduser().absolute() if args.output else layout.home / "serving.duckdb"
    try:
        check_storage_version(args.storage_version)  # bad usage is said first, data or not
        if args.output and args.output.endswith(("/", os.sep)):  # a folder meant, there or not: Path drops the slash
            raise ServingError(f"{args.output} names a folder: give the serving database's file, "
                               f"e.g. {target / 'serving.duckdb'}")
        own = {} if is_postgres(layout.warehouse) else {
            layout.warehouse: "catalog", writer_path(layout.warehouse): "writer's catalog",
            search_index_path(layout.warehouse): "search index"}
        check_target(target, own)
        if args.output and not target.parent.exists():  # a mistyped path made its folder tree (a new user's trial)
            raise ServingError(f"cannot write the serving database {target}: the folder {target.parent} does not "
                               "exist (create it first)")
        # a reader's home has no lake of its own: the catalog holds what its merge read elsewhere,
        # and the team's catalog in PostgreSQL what the center merged (whatever the home's lake folder holds)
        own_lake = not is_postgres(layout.warehouse) and (layout.remote or Path(layout.lake).is_dir())
        if not layout.warehouse.exists() or (own_lake and not has_data(layout)):
            return nothing_ingested(layout)
        counts = build_serving(layout.warehouse, target, args.storage_version, layout.tables_path)
    except ServingError as exc:
        raise UsageError(str(exc)) from None
    print(f"{target}: " + ", ".join(f"{mart} {n:,}" for mart, n in counts.items()))
    return 0


def cmd_dashboard(args) -> int:
    from warehouse.serve.dashboard.server import make_server
    from warehouse.lake.ducklake import connect

    layout = layout_of(args)
    if not layout.warehouse.exists():
        print_err(f"error: {no_warehouse(layout)}")
        return 2
    connect(layout.warehouse, ours=True).close()  # a file that is not a catalog: a usage error now, not a page's 500
    # the budgets and zone of the user's own config.toml (also on the demo), read once: a bad one stops here
    config_file = own_config_file(args)
    zone = report_zone(args)
    try:
        server = make_server(layout.warehouse, args.host, args.port, allowed_hosts=args.allow_host,
                             data_path=layout.tables_path, budgets=load_config(config_file).budgets,
                             config_file=config_file, zone=zone, index=lambda: search_index_of(layout))
    except OSError as exc:
        print_err(f"error: cannot listen on {args.host}:{args.port}: {exc}")
        return 2
    print_err(f"dashboard on {server.url} (warehouse {layout.warehouse}, {zone} days); Ctrl-C stops it")
    with server:
        server.serve_forever()
    return 0



def cmd_mcp(args) -> int:
    from warehouse.lake.ducklake import connect
    from warehouse.serve.dashboard.server import Reader, is_loopback

    if not args.http and (args.host is not None or args.port is not None):
        raise UsageError("--host and --port are where `agentlake mcp --http` listens: give them with --http "
                         "(stdio has neither)")
    args.host, args.port = args.host or "127.0.0.1", 8766 if args.port is None else args.port  # 0: any free one
    if args.http and not is_loopback(args.host):
        raise UsageError(f"--host {args.host} is beyond this machine: `agentlake mcp --http` serves on loopback "
                         "only (127.0.0.1, ::1 or localhost)")
    layout = layout_of(args)
    if not layout.warehouse.exists():
        print_err(f"error: {no_warehouse(layout)}")
        return 2
    connect(layout.warehouse, ours=True).close()  # a file that is not a catalog: a usage error now, not a call's
    # the SDK only now: `agentlake --help` and every other command never load it
    from warehouse.serve.mcp_server import TOKEN_ENV, serve_http, serve_stdio
    from warehouse.serve.mcp_tools import Tools

    tools = Tools(Reader(layout.warehouse, layout.tables_path), index=lambda: search_index_of(layout))
    if not args.http:
        serve_stdio(tools)  # stdout is the protocol's: every note goes to stderr
        return 0
    try:
        serve_http(tools, args.host, args.port, os.environ.get(TOKEN_ENV) or None, print_err)
    except OSError as exc:
        print_err(f"error: cannot listen on {args.host}:{args.port}: {exc}")
        return 2
    return 0


def cmd_merge(args) -> int:
    from pipelines.runner import replaced_lake, repriced
    from warehouse.catalog.build import configured_prices, refresh
    from warehouse.lake.ducklake import refuse_a_readers_write

    layout = layout_of(args)
    if not has_data(layout):
        if is_postgres(layout.warehouse):  # a reader's role: that, before the lake to name
            refuse_a_readers_write(layout.warehouse)
        return nothing_ingested(layout)
    make_home(layout.home)
    result = refresh(layout.lake, layout.warehouse, full=args.full, prices=configured_prices(layout),
                     home=layout.home)
    sources = f"{result.merged} source{'' if result.merged == 1 else 's'}"
    logs = f"{result.runs} run log{'' if result.runs == 1 else 's'}"
    print(f"merged {sources} ({result.removed} removed, {logs}) from {layout.lake} into {layout.warehouse}")
    if result.repriced:
        print(repriced(layout))
    if result.replaced_from:
        print(f"note: {replaced_lake(layout, result.replaced_from)}", file=sys.stderr)
    if result.waiting:
        print(f"{len(result.waiting)} sources were being written and wait for the next merge", file=sys.stderr)
    return 0


def cmd_compact(args) -> int:
    from warehouse.catalog.compaction import compact, file_counts
    from warehouse.lake.ducklake import refuse_a_readers_write
    from warehouse.lake.pg_catalog import CatalogUnreachable

    layout = layout_of(args)
    if not layout.warehouse.exists():
        if has_data(layout) and not own_lake(layout.lake, layout.warehouse):  # a team's lake, no warehouse here
            print_err(f"error: {layout.home} has no warehouse yet to compact: `agentlake merge{home_flag(layout.home)} "
                      f"--lake {shlex.quote(str(layout.lake))}` builds it from that lake")
            return 1
        return nothing_ingested(layout)
    if is_postgres(layout.warehouse):  # a reader's role: that, before the lake to name
        refuse_a_readers_write(layout.warehouse)
    try:
        before = file_counts(layout.warehouse, layout.tables_path, str(layout.lake))
    except CatalogUnreachable:  # a team's catalog no merge made yet: the compaction's own refusal says why
        before = None
    files = compact(layout.warehouse, keep_seconds=args.keep_seconds, orphans=args.orphans,
                    data_path=layout.tables_path, lake=str(layout.lake))
    after = file_counts(layout.warehouse, layout.tables_path, str(layout.lake))
    # rows small merges kept in the catalog become files of their own: a compaction may end with more
    out = files["rows_written_out"]
    said = (f" (and {out:,} row{'' if out == 1 else 's'} small merges kept in the catalog written out to files)"
            if out else "")
    # the files the tables and marts read, and the Parquet under their folder: the difference is what
    # readers of older snapshots may still read, deleted once past their grace (a team lead's trial saw
    # 337 objects become 83 under "37 before, 37 after", which counted the tables' live files only)
    if before is None:
        print(f"files read by the tables and marts: {after['live']:,}{said}; in their folder: {after['on_disk']:,}")
        return 0
    deleted, written = len(before["listed"] - after["listed"]), len(after["listed"] - before["listed"])
    print(f"files read by the tables and marts: {before['live']:,} before, {after['live']:,} after{said}; "
          f"in their folder: {before['on_disk']:,} before, {after['on_disk']:,} after ({deleted:,} deleted, "
          f"{written:,} written)")
    return 0


def _discovery_passed(args) -> list[str]:
    """The discovery flags given to `schedule`, for its `agentlake ingest`: paths made absolute
    (the scheduler runs it from another folder), an --agent-home checked here."""
    def place(path: str) -> str:
        return os.path.abspath(os.path.expanduser(path))

    agent_homes(args.agent_home)  # a bad AGENT=DIR is a usage error now, not at every scheduled run
    out = [a for flag in ("db", "crush_root", "codewhale_home", "codewhale_session")
           for value in getattr(args, flag) or () for a in (f"--{flag.replace('_', '-')}", place(value))]
    for value in args.agent_home:
        agent, _, path = value.partition("=")
        out += ["--agent-home", f"{agent}={place(path)}"]
    return out + (["--no-default"] if args.no_default else [])


def cmd_schedule(args) -> int:
    import subprocess

    from pipelines import schedule

    layout = layout_of(args)
    refuse_team_catalog_flag(args, layout, "the timer's `agentlake ingest`")
    # the scheduler runs without this shell's variables: the home always, and whatever the
    # home's own config.toml would not give (a flag, $AGENTLAKE_LAKE, $AGENTLAKE_WAREHOUSE, ...)
    own = load_layout(str(layout.home), env={})
    passed = ["--home", str(layout.home)]
    if args.lake or str(layout.lake) != str(own.lake):
        passed += ["--lake", str(layout.lake)]
    # (a team's catalog in PostgreSQL is a reader's setting here, which an ingest does not write: not
    # passed, where the timer's ingest would refuse it as a flag)
    if (args.warehouse or layout.warehouse != own.warehouse) and not is_postgres(layout.warehouse):
        passed += ["--warehouse", str(layout.warehouse)]
    for flag in ("machine", "user"):
        if getattr(args, flag) or getattr(layout, flag) != getattr(own, flag):
            passed += [f"--{flag}", getattr(layout, flag)]
    if args.team is not None:
        passed.append("--team" if args.team else "--no-team")
    passed += _discovery_passed(args)
    merged = merged_lake(layout) if own_lake(layout.lake, layout.warehouse) else None
    if merged and not same_lake(merged, str(layout.lake)):  # a reader's home: its ingests are refused
        home = home_flag(layout.home)
        print_err(f"error: the warehouse {layout.warehouse} is read from the lake {merged}, so an ingest of this "
             f"home's own lake would be refused: run `agentlake schedule{home} --lake {shlex.quote(merged)}` to land "
             f"this machine's agents there, or have your scheduler run `agentlake merge{home} --lake "
             f"{shlex.quote(merged)}`")
        return 2
    try:
        recipe = schedule.recipe(args.kind or schedule.default_kind(), args.every, schedule.ingest_argv(passed),
                                 Path.home(), layout.home / "ingest.log", env=schedule.job_env(os.environ))
    except ValueError as exc:
        print_err(f"error: {exc}")
        return 2
    if not args.install:
        print(schedule.render(recipe), end="")
        return 0
    for path in schedule.install(recipe):
        print(f"wrote {path}")
    tool = recipe.enable[0].split()[0].strip("(")
    tool = "crontab" if recipe.kind == "cron" else tool
    if not shutil.which(tool):
        print_err(f"{tool} is not on this machine: turn the schedule on with:\n  " + "\n  ".join(recipe.enable))
        return 1
    for command in recipe.enable:
        done = subprocess.run(command, shell=True)
        if done.returncode:
            print_err(f"error: `{command}` failed (exit {done.returncode})")
            return 1
    print(f"scheduled every {args.every} minutes; {recipe.note}")
    return 0


def _free_port(host: str) -> int:
    """A port free on `host` now, as the operating system picks one for port 0."""
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def cmd_dev(args) -> int:
    from pipelines.runner import dagster_env

    if args.lake or args.warehouse:  # the Dagster process reads the home, never these flags
        raise UsageError("`agentlake dev` takes --home only: Dagster uses that home's lake and warehouse "
                         "(set `lake` in <home>/config.toml for another lake)")
    from warehouse.land import landed_as

    layout = layout_of(args)
    before = landed_as.recorded(layout)
    if before and before != (layout.machine, layout.user):
        # the sensor would land every source again under these names: each session counted twice
        raise UsageError(f"this home last landed into its lake as {before[0]}/{before[1]}, and Dagster would land "
                         f"every source again as {layout.machine}/{layout.user}, counting each session twice: give "
                         f"`--machine {before[0]} --user {before[1]}`; or, if the new names are meant (a rename, "
                         "docs/TEAM.md), run `agentlake ingest` once under them first")
    check_catalog(layout.warehouse)  # a warehouse that is no catalog ($AGENTLAKE_WAREHOUSE's): said now, not by a run
    env = dagster_env(layout)
    # the names Dagster's runs land as: the flags', else what the home's config and environment say
    env["AGENTLAKE_MACHINE"], env["AGENTLAKE_USER"] = layout.machine, layout.user
    port = args.port or _free_port(args.host)  # dagster dev took 0 for its default, 3000 (a new user's trial)
    # dagster 1.13 says `dagster dev` is superseded by `dg dev`; its warning says nothing a user acts on
    cmd = [sys.executable, "-W", "ignore:Function `dev_command` is superseded:FutureWarning",
           "-m", "dagster", "dev", "-m", "pipelines.definitions",
           "--host", args.host, "--port", str(port), *args.dagster_args]
    if args.home:  # --home reads that home's warehouse (said, as every command says it): so does Dagster
        env.pop("AGENTLAKE_WAREHOUSE", None)
    named = env.get("AGENTLAKE_WAREHOUSE")  # Dagster's processes read it as every command does
    print_err(f"DAGSTER_HOME={env['DAGSTER_HOME']}  AGENTLAKE_HOME={env['AGENTLAKE_HOME']}"
              + (f"  AGENTLAKE_WAREHOUSE={named}" if named else "")
              + (f"  (port 0: the UI takes the free port {port})" if not args.port else ""))
    # an ignored SIGINT is kept through exec (a shell's `cmd &` ignores it): dagster dev stops its
    # children by SIGINT, so they would outlive a SIGTERM to the group (a team trial)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.execvpe(cmd[0], cmd, env)
