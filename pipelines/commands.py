"""What each `agentlake` command does: discovery options and layouts from the parsed
arguments, the demo a home without data reads instead, and a function per command
(`cmd_<name>(args) -> exit status`). The parser and `main` are in pipelines/cli.py."""

import json
import os
import shlex
import shutil
import sys
from datetime import date
from functools import partial
from pathlib import Path

from transforms.provider import DiscoverOptions, merge_paths
from warehouse.lake.config import DEMO, demo_layout, has_data, load_config, load_layout
from warehouse.lake.layout import Layout, check_catalog, own_lake, same_lake
from warehouse.lake.pg_catalog import PostgresCatalog, is_postgres


def _layout(args) -> Layout:
    layout = load_layout(args.home, args.lake, args.warehouse, machine=getattr(args, "machine", None),
                         user=getattr(args, "user", None), team=getattr(args, "team", None))
    named = os.environ.get("AGENTLAKE_WAREHOUSE")
    if args.home and named and not args.warehouse and not _same_warehouse(named, layout.warehouse) \
            and not getattr(args, "warehouse_note_said", False):
        args.warehouse_note_said = True  # once per command, which may look its home up again
        # it names $AGENTLAKE_HOME's warehouse, not this home's (docs/CLI.md, --warehouse); a
        # center that gave --home merged into a file of its own without a word (a new user's trial)
        _err(f"note: $AGENTLAKE_WAREHOUSE ({named}) is not read with --home: this command reads "
             f"{layout.warehouse}; give --warehouse to read another")
    return layout


def _same_warehouse(named: str, warehouse) -> bool:
    """`named` (a setting as written) is `warehouse`: the same file, however spelt (`~`, relative),
    or the same PostgreSQL catalog."""
    if is_postgres(named) != is_postgres(warehouse):
        return False
    if is_postgres(named):
        return str(warehouse) == named or str(warehouse) == str(PostgresCatalog.parse(named))
    return Path(named).expanduser().absolute().resolve() == Path(warehouse).absolute().resolve()


def _options(args, layout: Layout) -> DiscoverOptions:
    config = load_config(layout.config_file)
    flags_stores = {"crush": tuple(args.db or ()), "codewhale": tuple(args.codewhale_session or ())}
    flags_roots = merge_paths({"crush": tuple(args.crush_root or ()), "codewhale": tuple(args.codewhale_home or ())},
                              _agent_homes(args.agent_home))
    return DiscoverOptions(
        env=dict(os.environ),
        extra_stores=merge_paths(flags_stores, config.extra_stores),
        extra_roots=merge_paths(flags_roots, config.extra_roots),
        use_default=not args.no_default and config.use_default,
        project_names=config.project_names,
    )


class UsageError(ValueError):
    """A flag's value is wrong: exit 2, like argparse's own errors."""


def _agent_homes(values: list[str]) -> dict[str, tuple[str, ...]]:
    from transforms.providers import PROVIDERS

    out: dict[str, tuple[str, ...]] = {}
    for value in values:
        agent, sep, path = value.partition("=")
        if not sep or agent not in PROVIDERS or not path:
            from warehouse.lake.setting_names import close_to

            hint = close_to(agent, {p: p for p in PROVIDERS}) if sep and agent not in PROVIDERS else ""
            raise UsageError(f"--agent-home wants AGENT=DIR with AGENT one of {', '.join(PROVIDERS)}; "
                             f"got {value!r}{hint}")
        out[agent] = out.get(agent, ()) + (path,)
    return out


def _err(*parts) -> None:
    print(*parts, file=sys.stderr, flush=True)


def _nothing_ingested(layout: Layout) -> int:
    merged = _merged_lake(layout)
    if merged and not same_lake(merged, str(layout.lake)):  # a reader's home, merged from a lake named by a flag once
        _err(f"error: nothing ingested in {layout.lake}: this warehouse merges {merged}; name it with --lake "
             "(or `lake` in config.toml, $AGENTLAKE_LAKE)")
    else:
        hint = " (a wrong bucket, prefix or endpoint? it lists no landing file)" if layout.remote else ""
        reader = ", or name a team's lake with --lake" if own_lake(layout.lake, layout.warehouse) else ""
        _err(f"error: nothing ingested in {layout.lake} yet{hint}: run `agentlake ingest` (or `agentlake demo`) "
             f"first{reader}")
    return 1


def _merged_lake(layout: Layout) -> str | None:
    """The lake the warehouse's last merge read, if there is a warehouse to ask."""
    from warehouse.lake.ducklake import connect
    from warehouse.catalog.build import lake_of

    if not layout.warehouse.is_file():
        return None
    try:
        with connect(layout.warehouse, ours=True) as con:
            return lake_of(con)
    except Exception:  # only a hint: the error said already is the one that matters
        return None


# the discovery flags, and their values when none is given (`dev`, which takes none, has these)
NO_DISCOVERY = {"db": None, "crush_root": None, "codewhale_home": None, "codewhale_session": None, "agent_home": [],
                "no_default": False}
DISCOVERY_FLAGS = tuple(NO_DISCOVERY)


def _demo_instead(args) -> Layout | None:
    """The quickstart demo's layout when this command should use it (warehouse.lake.config.demo_layout);
    never when --lake or --warehouse name another place."""
    if getattr(args, "lake", None) or getattr(args, "warehouse", None):
        return None
    return demo_layout(_layout(args))


def use_demo_if_empty(args) -> None:
    """After a quickstart that found no agent data, the README's next commands work as written:
    they use the demo in <home>/demo until <home> holds data of its own (see the module doc).
    `ingest`, `sources` and `dev` do so only when discovery finds no store of the agents at all
    (`dev` then finds the demo's stores in the demo home's config.toml)."""
    if args.command not in ("sql", "report", "search", "dashboard", "mcp", "serving", "views", "merge", "compact",
                            "sources", "ingest", "dev"):
        return
    demo = _demo_instead(args)
    if demo is None:
        return
    home = demo.home.parent
    if args.command in ("sources", "ingest", "dev"):
        from transforms.synth.demo import HOMES
        from warehouse.land.demo_home import DEMO_DATA
        from warehouse.land.ingest import discover_sources

        if any(getattr(args, f) for f in DISCOVERY_FLAGS):
            return
        sources, problems = discover_sources(_options(args, _layout(args)))
        if sources or problems:
            return
        if args.command != "dev":
            args.no_default = True
            args.agent_home = [f"{p}={demo.home / DEMO_DATA / d}" for p, d in HOMES.items()]
        _err(f"note: no agent data found on this machine and {home} holds none yet: using the quickstart demo "
             f"in {demo.home} (once an agent has written sessions, `agentlake ingest` puts them in {home})")
    else:
        _err(f"note: {home} holds no ingested data yet: using the quickstart demo in {demo.home} "
             f"(`agentlake ingest` puts your agents' own data in {home})")
    args.own_home = str(home)  # its config.toml still holds the user's settings (budgets)
    args.home = str(demo.home)


def _tsv(text: str) -> str:
    """A field of a tab-separated line: a tab or a newline in a path would split it."""
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def cmd_sources(args) -> int:
    from warehouse.land.ingest import discover_sources

    layout = _layout(args)
    sources, problems = discover_sources(_options(args, layout))
    for problem in problems:
        _err(f"warning: {problem}")
    for s in sources:
        state = f"skipped: {s.skip_reason}" if s.skip_reason else "ok"
        print(f"{s.partition_key}\t{_tsv(s.path)}\t{_tsv(state)}")
    if not sources:
        _err("no sources found: each agent is looked for where it keeps its data (README, \"Where the data "
             "comes from\"); name other places with --agent-home AGENT=DIR, or try `agentlake demo`")
    return 1 if problems else 0


def cmd_ingest(args) -> int:
    from dataclasses import replace

    from pipelines.runner import run_ingest
    from warehouse.lake.pg_catalog import is_postgres
    from pipelines.summary import print_summary

    from transforms.crush.discover import global_data_dir

    layout = _layout(args)
    if is_postgres(layout.warehouse):  # a reader of the team's catalog: the center alone writes it
        layout = replace(layout, warehouse=layout.home / "warehouse.ducklake")
    check_catalog(layout.warehouse)  # a folder or a file not DuckDB's: said before any source is read
    options = _options(args, layout)
    if _unredacted_share(args, layout):
        _err(f"warning: the lake {layout.lake} is a folder other than this home's own (a shared directory?) and "
             "team mode is off: rows are written as the agents hold them, secrets included. Set team = true in "
             f"{layout.config_file} (or --team) to redact them, or team = false (--no-team) to say it is meant")
    summary = run_ingest(layout, options, full_refresh=args.full_refresh, quiet=args.quiet)
    print_summary(summary, layout, verbose=args.verbose, sql=_command_for(layout, "sql"))
    _mixed_with_a_demo(layout, summary)
    if not summary.results:
        where = (f"each agent's default home, e.g. {global_data_dir(options.env) / 'projects.json'}"
                 if options.use_default else "the named places")
        _err(f"no sources found (looked in {where}); name stores with --db, --crush-root, --codewhale-home "
             "or --agent-home AGENT=DIR, or try `agentlake demo`")
    return summary.exit_code


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
        _err(f"warning: {layout.home} also holds `agentlake demo`'s generated sessions ({layout.home / DEMO_DATA}): "
             f"the report and the dashboard add them to the {len(own)} source{'s' if len(own) > 1 else ''} of "
             "your own this run landed. To keep yours alone, ingest into a home of its own (--home, "
             "$AGENTLAKE_HOME); the demo belongs in one too (`agentlake demo --home DIR`)")


def _unredacted_share(args, layout: Layout) -> bool:
    """A folder lake that is not the home's own, with team mode left to its default (off for a
    folder): a share other machines read, unredacted, and nothing said (a team lead's trial)."""
    if layout.team or layout.remote or own_lake(layout.lake, layout.warehouse):
        return False
    return args.team is None and load_config(layout.config_file).team is None


def cmd_demo(args) -> int:
    from pipelines.runner import run_ingest
    from pipelines.summary import print_summary
    from transforms.synth.demo import HOMES, generate_demo
    from warehouse.land.demo_home import (
        DEMO_DATA, NotADemoHome, demo_made, describe, forget_demo_sources, refuse_real_data)

    layout = _layout(args)
    try:
        refuse_real_data(layout)
    except NotADemoHome as exc:
        raise UsageError(str(exc)) from None
    root = layout.home / DEMO_DATA
    done = root / ".generated"  # written last: a demo cut short is generated again
    wanted = {"seed": args.seed, "projects": args.projects, "sessions": args.sessions}
    made = demo_made(done) if done.exists() else None
    if made is None or made != wanted or args.regenerate:
        if made and any(made.get(k) != v for k, v in wanted.items() if k in made):
            # the options say which demo: one of another seed or size replaces it, never hides behind it
            _err(f"replacing the demo of {describe(made)} in {root} with {describe(wanted)} "
                 "(the same options keep a demo as it is; --regenerate writes it again)")
        _err(f"generating demo data for {', '.join(HOMES)} in {root} ({describe(wanted)}) ...")
        shutil.rmtree(root, ignore_errors=True)  # first: a demo cut short from here is generated again
        forget_demo_sources(layout, root, everything=True)
        generate_demo(root, projects=args.projects, sessions=args.sessions, seed=args.seed)
        done.write_text(" ".join(f"{k} {v}" for k, v in wanted.items()) + "\n")
    else:
        forget_demo_sources(layout, root, everything=False)  # a demo home moved or copied here
    # the home's project names apply to the demo's sessions as to any (a rename is what a new user
    # tries on it); its other settings name places, which the demo's stores are not
    names = load_config(layout.config_file).project_names if layout.config_file.exists() else {}
    options = DiscoverOptions(env={}, extra_roots={p: (str(root / d),) for p, d in HOMES.items()},
                              use_default=False, project_names=names)
    # so that `agentlake dev` on this home finds the demo's stores: in quickstart's <home>/demo, or a
    # home named for the demo with --home; never a home only defaulted to (it may be the one your
    # own agents' data goes to later, which `use_default = false` would hide)
    if (layout.home.name == DEMO or args.home) and not layout.config_file.exists():
        _write_demo_config(layout, options)
        home = shlex.quote(str(layout.home))
        _err(f"wrote {layout.config_file}: the demo's stores, for `agentlake dev --home {home}`")
    summary = run_ingest(layout, options, full_refresh=False, quiet=args.quiet)
    print_summary(summary, layout, verbose=args.verbose, demo=True, sql=_command_for(layout, "sql"))
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

    layout = _layout(args)
    sources, problems = discover_sources(_options(args, layout))
    if any(not s.skip_reason for s in sources):
        code = cmd_ingest(args)
        _first_look(layout)
        return code
    for problem in problems:  # a place that could not be read is no reason for a demo to hide it
        _err(f"warning: {problem}")
    from transforms.providers import PROVIDERS

    _err(f"no data of any of the {len(PROVIDERS)} agents agentlake reads found on this machine: "
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
    command = partial(_command_for, layout)
    print(f"\nNext: {command('report')}                 (cost and use by project; --by agent|day|week|model|category; --week)")
    print(f"      {command('report')} --insights      (money that buys nothing, with the SQL behind it)")
    print(f"      {command('dashboard')}              (the team dashboard in a browser)")
    print(f"      {command('sql')} \"SELECT tool_name, COUNT(*) AS calls FROM tool_calls GROUP BY 1 ORDER BY 2 DESC\"")


def _command_for(layout: Layout, command: str) -> str:
    """`agentlake COMMAND` as the user types it to read this home's warehouse: with --home unless
    it is the default one (the quickstart demo's plain commands use it: use_demo_if_empty), and
    with --warehouse when the home alone reads another one (one named by --warehouse or
    $AGENTLAKE_WAREHOUSE; the team's, named in config.toml, where an ingest merged its own file)."""
    home = layout.home
    if home.name == DEMO and not has_data(load_layout(str(home.parent), env={})):
        home = home.parent
    flag = f" --home {shlex.quote(str(home))}" if home != Layout.resolve().home else ""
    if home == layout.home and not _same_warehouse(str(load_layout(str(home), env={}).warehouse), layout.warehouse):
        flag += f" --warehouse {shlex.quote(str(layout.warehouse))}"
    exe = "agentlake" if shutil.which("agentlake") else shlex.quote(sys.argv[0])  # a venv not on PATH
    return f"{exe} {command}{flag}"


def _no_warehouse(layout) -> str:
    """Why there is nothing to read yet, and what to do: a home's first ingest publishes its
    warehouse only when its merge ends, and a reader asking meanwhile was told to run one."""
    if layout.pending_marker.exists():
        return (f"no warehouse at {layout.warehouse} yet: an ingest has landed data it has not merged "
                "(it is running now, or it stopped before its merge, and the next `agentlake ingest` merges it)")
    from warehouse.lake.ducklake import FIRST_STEP

    return f"no warehouse at {layout.warehouse}: {FIRST_STEP}"


def _read_warehouse(args, answer, opener=None) -> int:
    """Open the warehouse read-only (with `opener`, `connect`'s arguments, if given), print
    `answer(con)`; a missing warehouse or a bad query is a usage error (exit 2) with DuckDB's own
    message."""
    import duckdb

    from warehouse.lake.ducklake import connect

    layout = _layout(args)
    try:
        con = (opener or connect)(layout.warehouse, layout.tables_path)
    except FileNotFoundError:
        _err(f"error: {_no_warehouse(layout)}")
        return 2
    with con:
        try:
            print(answer(con))
        except duckdb.Error as exc:
            from warehouse.lake.ducklake import damage_hint, storage_failure

            failed = storage_failure(exc)
            if failed:  # the lake's storage did not answer: no bad query either
                _err(f"error: {failed}")
                return 1
            hint = damage_hint(exc)  # a table file lost or damaged is no bad query: what repairs it
            _err(f"error: {exc}{hint}")
            return 1 if hint else 2
    return 0


def cmd_sql(args) -> int:
    args.query, source = _query_text(args)  # a usage error here loads no DuckDB
    if not args.query.strip():
        raise UsageError(f'empty query{source}: give one SQL statement, e.g. agentlake sql "SELECT * FROM sessions '
                         'LIMIT 5"')
    from warehouse.serve.formatting import fetch_rows, render
    from warehouse.serve.read_only_sql import NotOne, Refused, check, open_reader

    def answer(con):
        try:
            check(con, args.query)
        except NotOne as exc:
            raise UsageError(str(exc)) from None
        except Refused as exc:
            rows = ("; for a file of the rows, use --format csv or json and redirect it"
                    if exc.what.startswith(("COPY ", "EXPORT ")) else "")
            raise UsageError(f"{exc.what}: `agentlake sql` only reads ({exc.why}){rows}") from None
        cur = con.execute(args.query)
        if cur is None:  # only comments, or only whitespace between statements
            raise UsageError(f"nothing to run in the query {args.query!r}")
        columns = [d[0] for d in cur.description] if cur.description else []
        return render(columns, fetch_rows(cur), args.format)

    return _read_warehouse(args, answer, open_reader)


def _query_text(args) -> tuple[str, str]:
    """The query and where it came from (for a message): the argument, else -f FILE, else
    standard input when it is a pipe or a file (`-` as either says standard input)."""
    if args.query is not None and args.file is not None:
        raise UsageError("give the query once: as an argument or with -f FILE, not both")
    where = args.file if args.file is not None else args.query if args.query == "-" else None
    if args.query is not None and where is None:
        text, source = args.query, ""
    elif where is None and (sys.stdin is None or sys.stdin.isatty()):
        raise UsageError('no query: give one SQL statement, e.g. agentlake sql "SELECT * FROM sessions LIMIT 5", '
                         "-f FILE, or pipe it in")
    elif where in (None, "-"):
        if sys.stdin is None:
            raise UsageError("no standard input to read the query from")
        try:
            text, source = sys.stdin.read(), " on standard input"
        except UnicodeDecodeError:
            raise UsageError("the query on standard input is not UTF-8 text") from None
    else:
        try:
            text, source = Path(where).expanduser().read_text(encoding="utf-8"), f" in {where}"
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read the query from {where}: {exc}") from None
    try:
        text.encode("utf-8")  # an argument's undecodable bytes arrive as lone surrogates
    except UnicodeEncodeError:
        raise UsageError(f"the query{source} is not UTF-8 text") from None
    return text, source


def cmd_report(args) -> int:
    if args.provider_old is not None:  # --agent's first name
        if args.provider is not None and args.provider != args.provider_old:
            raise UsageError(f"--agent {args.provider} and --provider {args.provider_old} name different agents "
                             "(--provider is --agent's older name): give one")
        args.provider = args.provider_old
    zone = _report_zone(args)
    if args.budgets:
        return _report_budgets(args, zone)
    args.by = args.by or "project"
    since, until = _window(args, zone)  # the usage errors first: they load no DuckDB
    if since and until and since > until:
        raise UsageError(f"--since {args.since} is after --until {args.until}: no day is in between")
    _check_csv_report(args)
    from warehouse.serve.local_days import use_zone
    from warehouse.serve.report import Filters, build, build_insights, render_report, unknown_filters
    from warehouse.lake.zones import UTC

    filters = Filters(since, until, args.project, args.provider, args.user, args.machine, zone=zone)
    if zone != UTC:  # the tables look the same in any zone: say whose days they count
        _err(f"note: days of {zone} (the lake keeps UTC, and the times in these tables are UTC)")

    def answer(con):
        unknown = unknown_filters(con, filters)
        if unknown:
            raise UsageError("; ".join(unknown))
        _say_if_the_prices_wait_for_a_merge(con, args)
        if zone != UTC and not args.insights:  # the insights' SQL names the zone's days itself
            use_zone(con, zone)
        if args.insights:
            sections = build_insights(con, filters, top=3 if args.top is None else args.top)
        else:
            sections = build(con, filters, by=args.by, top=10 if args.top is None else args.top)
        _say_if_the_window_is_empty(con, filters)
        if args.section:
            sections = _section(sections, args)
        if args.format != "csv":
            return render_report(sections, args.format)
        return _report_csv(sections, args)

    from warehouse.lake.ducklake import connect

    # the report runs agentlake's own SQL only (the filters are parameters)
    return _read_warehouse(args, answer, partial(connect, ours=True))


def _say_if_the_prices_wait_for_a_merge(con, args) -> None:
    """config.toml's prices are applied by a merge: prices changed since the last one are not in
    the report yet, and it said nothing (a new user's trial)."""
    from warehouse.catalog.prices import recorded_fingerprint

    layout = _layout(args)
    if is_postgres(layout.warehouse) or Path(layout.warehouse).parent != layout.home:
        return  # a warehouse another home merges (a team's): its prices are that home's config's
    config_file = layout.config_file
    prices = load_config(config_file).prices
    if prices and prices.fingerprint() != recorded_fingerprint(con):
        _err(f"note: the prices in {config_file} are not the ones the warehouse was merged with: "
             "`agentlake merge` applies them")


def _say_if_the_window_is_empty(con, filters) -> None:
    """A window with no session where the warehouse holds some elsewhere: the days it does hold
    (a demo's January looked like an empty warehouse to `report --week` in December)."""
    if filters.since is None and filters.until is None:
        return
    from dataclasses import replace

    from warehouse.lake.zones import UTC
    from warehouse.serve.local_days import local_date

    scope, params = replace(filters, since=None, until=None).where()  # the project and agent filters
    # the zone's day whether or not `sessions` is shadowed with it (the insights read UTC tables)
    day = '"date"' if filters.zone == UTC else f'COALESCE({local_date("created_at", filters.zone)}, "date")'
    first, last, inside = con.execute(
        f"SELECT MIN({day}), MAX({day}), COUNT(*) FILTER (WHERE {day} BETWEEN ? AND ?) FROM sessions {scope}",
        [filters.since or date.min, filters.until or date.max, *params]).fetchone()
    if first is not None and not inside:
        _err(f"note: no session from {filters.since or 'the first day'} to {filters.until or 'today'}; "
             f"the sessions{' of these filters' if scope else ''} are from {first} to {last} "
             f"(--since {first} --until {last})")


BUDGETS_EXCEEDED = 3  # `report --budgets`: a budget is exceeded (a cron job or CI step alerts on it)


def _report_budgets(args, zone: str) -> int:
    """This month's spend against each budget of config.toml, the month and its days those of
    `zone`; exit 3 when one is exceeded."""
    given = [flag for flag, value in (("--insights", args.insights), ("--since", args.since), ("--until", args.until),
                                      (f"--{args.window}", args.window), ("--last", args.last),
                                      ("--project", args.project), ("--agent", args.provider), ("--user", args.user),
                                      ("--machine", args.machine), ("--by", args.by),
                                      ("--top", args.top), ("--section", args.section), ("--output", args.output))
             if value is not None and value is not False]  # --top 0 is given too (0 == False)
    if given:
        raise UsageError(f"--budgets is this month's spend against the budgets of config.toml: give it without "
                         f"{', '.join(given)}")
    config_file = _own_config_file(args)
    budgets = load_config(config_file).budgets
    if not budgets:
        raise UsageError(f"no budgets in {config_file}: add one, e.g. `[[budgets]]` with `monthly_usd = 500` "
                         "(docs/CONFIG.md, Budgets)")
    from warehouse.lake.ducklake import connect
    from warehouse.serve.budgets import COLUMNS, OVER, PROJECTED_OVER, budget_statuses, rows, unknown_scopes
    from warehouse.serve.report import Section, render_report
    from warehouse.serve.report_csv import csv_text
    from warehouse.serve.local_days import use_zone
    from warehouse.lake.zones import UTC, today_in
    over, projected = [], []

    def answer(con):
        today = today_in(zone)
        if zone != UTC:
            use_zone(con, zone, marts=("daily_costs",))
        statuses = budget_statuses(con, budgets, today)
        for note in unknown_scopes(con, budgets):
            _err(f"note: {note}")
        over.extend(s.budget.name for s in statuses if s.status == OVER)
        projected.extend(s.budget.name for s in statuses if s.status == PROJECTED_OVER)
        section = Section("budgets", f"Budgets, {today:%B %Y} to {today} ({zone})", COLUMNS, rows(statuses, today, zone))
        return csv_text(section).rstrip("\n") if args.format == "csv" else render_report([section], args.format)

    code = _read_warehouse(args, answer, partial(connect, ours=True))
    if code == 0 and projected:
        _err(f"note: projected over budget by the month's end at this pace: {', '.join(projected)}")
    if code == 0 and over:
        _err(f"over budget: {', '.join(over)}")
        return BUDGETS_EXCEEDED
    return code


def _own_config_file(args) -> Path:
    return load_layout(getattr(args, "own_home", None) or args.home).config_file


def _report_zone(args) -> str:
    """Whose days the report and the dashboard count: --tz, else $AGENTLAKE_TZ, else `tz` in config.toml (checked
    when read), else UTC."""
    from warehouse.lake.zones import TZ_VARIABLE, UTC, BadZone, check_zone

    if args.tz is not None and not args.tz.strip():
        raise UsageError("--tz is empty: give an IANA name such as Europe/Berlin, or UTC")
    for name, where in ((args.tz, "--tz"), (os.environ.get(TZ_VARIABLE), f"${TZ_VARIABLE} =")):
        if name:
            try:
                return check_zone(name, where)
            except BadZone as exc:
                raise UsageError(str(exc)) from None
    return load_config(_own_config_file(args)).tz or UTC


def _window(args, zone: str):
    """--since/--until, or the days a relative window (--today, --week, --last 7d, ...) names:
    days of `zone`."""
    from warehouse.lake.zones import today_in
    from warehouse.serve.report_options import BadWindow, last_days, relative_days

    named = f"--{args.window}" if args.window else f"--last {args.last}" if args.last is not None else None
    if named is None:
        return args.since, args.until
    if args.since or args.until:
        raise UsageError(f"{named} names its own days: give it without --since and --until")
    try:
        today = today_in(zone)
        since, until = relative_days(args.window, today) if args.window else last_days(args.last, today)
    except BadWindow as exc:
        raise UsageError(str(exc)) from None
    _err(f"note: {named}: {since} to {until} ({zone} days)")
    return since, until


def _report_name(args) -> str:
    return "report --insights" if args.insights else f"report --by {args.by}"


def _check_csv_report(args) -> None:
    """What a CSV report cannot be, said before the warehouse is opened."""
    if args.output is not None and args.format != "csv":
        raise UsageError("--output writes a CSV file per section: give --format csv with it")
    if args.output is not None and Path(args.output).exists() and not Path(args.output).is_dir():
        raise UsageError(f"--output {args.output} is a file: give a folder (made if missing) for the CSV files")
    if args.insights and args.format == "csv" and not (args.section or args.output):
        from warehouse.serve.report_csv import INSIGHT_SECTIONS

        raise UsageError("`report --insights --format csv` has a table per insight, with columns of its own: name one "
                         f"with --section ({', '.join(INSIGHT_SECTIONS)}), or write each to its own file with "
                         "--output DIR")


def _section(sections, args):
    from warehouse.serve.report_csv import UnknownSection, pick

    try:
        return pick(sections, args.section, _report_name(args))
    except UnknownSection as exc:
        raise UsageError(str(exc)) from None


def _report_csv(sections, args) -> str:
    """One CSV (a section, or the breakdown --by asks for: a spreadsheet opens one table), or with
    --output a file per section; what is left out, a ranking's cut or another section, said on stderr."""
    from warehouse.serve.report_csv import csv_text, cut_notes, write_sections

    if args.output is not None:
        folder = Path(args.output).expanduser()
        try:
            written = write_sections(sections, folder)
        except OSError as exc:
            raise UsageError(f"cannot write the CSV files into {folder}: {exc}") from None
        for note in cut_notes(sections):
            _err(f"note: {note}")
        return "\n".join(f"wrote {path}" + ("" if rows is None else f" ({rows:,} row{'' if rows == 1 else 's'})")
                         for path, rows in written)
    if len(sections) > 1:  # the plain report: its breakdown
        main = next(s for s in sections if s.name == f"by_{args.by}")
        others = [s.name for s in sections if s is not main]
        _err(f"note: the CSV is one table, the report's {main.name}; its others ({', '.join(others)}): "
             "--section NAME, or --output DIR for a file each")
        sections = [main]
    for note in cut_notes(sections):
        _err(f"note: {note}")
    return csv_text(sections[0]).rstrip("\n")


def search_index_of(layout: Layout) -> Path:
    """The search index this home's reader searches: beside a catalog file, or for the team's
    catalog in PostgreSQL the center's copy in the lake, fetched into the home when it changed
    (warehouse.catalog.team_index)."""
    from warehouse.catalog.search_index import search_path
    from warehouse.catalog.team_index import for_reader
    from warehouse.lake.pg_catalog import is_postgres

    return for_reader(layout.warehouse, layout.home) if is_postgres(layout.warehouse) else search_path(layout.warehouse)


def cmd_search(args) -> int:
    if args.provider_old is not None:  # --agent's first name
        args.provider = args.provider or args.provider_old
    zone = _report_zone(args)
    since, until = _window(args, zone)  # the usage errors first: they load no DuckDB
    if since and until and since > until:
        raise UsageError(f"--since {args.since} is after --until {args.until}: no day is in between")
    from warehouse.catalog.team_index import NoPublishedIndex
    from warehouse.serve.search import BadQuery, NoIndex, SearchFilters, parse, render, search, shell_quoted

    try:
        parse(args.query)
    except BadQuery as exc:
        raise UsageError(str(exc)) from None
    layout = _layout(args)
    if not layout.warehouse.exists():
        _err(f"error: {_no_warehouse(layout)}")
        return 2
    filters = SearchFilters(since, until, args.project, args.provider, args.user, args.machine,
                            zone=zone, role=args.role, tool=args.tool, kind=args.kind)
    try:
        hits = search(search_index_of(layout), args.query, filters, args.limit)
    except BadQuery as exc:
        raise UsageError(str(exc)) from None
    except (NoIndex, NoPublishedIndex) as exc:
        _err(f"error: {exc}")
        return 2
    opener = _command_for(layout, "sql")
    for hit in hits:
        hit.open_command = f"{opener} {shell_quoted(hit.open_sql)}"
    if not hits and args.format == "table":
        _err(f"note: nothing matches {args.query!r} with these filters")
        return 0
    print(render(hits, args.format, zone))
    if hits.total > len(hits):
        _err(f"note: {hits.counted()} shown, best first; --limit N shows more (up to 1000)")
    return 0


def cmd_serving(args) -> int:
    from warehouse.serve.serving_file import ServingError, build_serving, check_storage_version, check_target

    layout = _layout(args)
    target = Path(args.output).expanduser().absolute() if args.output else layout.home / "serving.duckdb"
    try:
        check_storage_version(args.storage_version)  # bad usage is said first, data or not
        if args.output and args.output.endswith(("/", os.sep)):  # a folder meant, there or not: Path drops the slash
            raise ServingError(f"{args.output} names a folder: give the serving database's file, "
                               f"e.g. {target / 'serving.duckdb'}")
        check_target(target)
        if args.output and not target.parent.exists():  # a mistyped path made its folder tree (a new user's trial)
            raise ServingError(f"cannot write the serving database {target}: the folder {target.parent} does not "
                               "exist (create it first)")
        # a reader's home has no lake of its own: the catalog holds what its merge read elsewhere
        own_lake = layout.remote or Path(layout.lake).is_dir()
        if not layout.warehouse.exists() or (own_lake and not has_data(layout)):
            return _nothing_ingested(layout)
        counts = build_serving(layout.warehouse, target, args.storage_version, layout.tables_path)
    except ServingError as exc:
        raise UsageError(str(exc)) from None
    print(f"{target}: " + ", ".join(f"{mart} {n:,}" for mart, n in counts.items()))
    return 0


def cmd_dashboard(args) -> int:
    from warehouse.serve.dashboard.server import make_server
    from warehouse.lake.ducklake import connect

    layout = _layout(args)
    if not layout.warehouse.exists():
        _err(f"error: {_no_warehouse(layout)}")
        return 2
    connect(layout.warehouse, ours=True).close()  # a file that is not a catalog: a usage error now, not a page's 500
    # the budgets and zone of the user's own config.toml (also on the demo), read once: a bad one stops here
    config_file = _own_config_file(args)
    zone = _report_zone(args)
    try:
        server = make_server(layout.warehouse, args.host, args.port, allowed_hosts=args.allow_host,
                             data_path=layout.tables_path, budgets=load_config(config_file).budgets,
                             config_file=config_file, zone=zone, index=lambda: search_index_of(layout))
    except OSError as exc:
        _err(f"error: cannot listen on {args.host}:{args.port}: {exc}")
        return 2
    _err(f"dashboard on {server.url} (warehouse {layout.warehouse}, {zone} days); Ctrl-C stops it")
    with server:
        server.serve_forever()
    return 0



def cmd_mcp(args) -> int:
    from warehouse.lake.ducklake import connect
    from warehouse.serve.dashboard.server import Reader, is_loopback

    if not args.http and (args.host is not None or args.port is not None):
        raise UsageError("--host and --port are where `agentlake mcp --http` listens: give them with --http "
                         "(stdio has neither)")
    args.host, args.port = args.host or "127.0.0.1", args.port or 8766
    if args.http and not is_loopback(args.host):
        raise UsageError(f"--host {args.host} is beyond this machine: `agentlake mcp --http` serves on loopback "
                         "only (127.0.0.1, ::1 or localhost)")
    layout = _layout(args)
    if not layout.warehouse.exists():
        _err(f"error: {_no_warehouse(layout)}")
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
        serve_http(tools, args.host, args.port, os.environ.get(TOKEN_ENV) or None, _err)
    except OSError as exc:
        _err(f"error: cannot listen on {args.host}:{args.port}: {exc}")
        return 2
    return 0


def cmd_merge(args) -> int:
    from warehouse.catalog.build import configured_prices, refresh

    layout = _layout(args)
    if not has_data(layout):
        return _nothing_ingested(layout)
    result = refresh(layout.lake, layout.warehouse, full=args.full, prices=configured_prices(layout),
                     home=layout.home)
    print(f"merged {result.merged} sources ({result.removed} removed, {result.runs} run logs) from {layout.lake} "
          f"into {layout.warehouse}")
    if result.repriced:
        print(f"the prices in {layout.config_file} changed: the history was priced again with them")
    if result.waiting:
        print(f"{len(result.waiting)} sources were being written and wait for the next merge", file=sys.stderr)
    return 0


def cmd_compact(args) -> int:
    from warehouse.catalog.compaction import compact

    layout = _layout(args)
    if not layout.warehouse.exists():
        return _nothing_ingested(layout)
    files = compact(layout.warehouse, keep_seconds=args.keep_seconds, orphans=args.orphans,
                    data_path=layout.tables_path, lake=str(layout.lake))
    # rows small merges kept in the catalog become files of their own: a compaction may end with more
    out = files["rows_written_out"]
    said = f" (and {out:,} rows small merges kept in the catalog written out to files)" if out else ""
    print(f"data files: {files['files_before']:,} before, {files['files_after']:,} after{said}")
    return 0


def _discovery_passed(args) -> list[str]:
    """The discovery flags given to `schedule`, for its `agentlake ingest`: paths made absolute
    (the scheduler runs it from another folder), an --agent-home checked here."""
    def place(path: str) -> str:
        return os.path.abspath(os.path.expanduser(path))

    _agent_homes(args.agent_home)  # a bad AGENT=DIR is a usage error now, not at every scheduled run
    out = [a for flag in ("db", "crush_root", "codewhale_home", "codewhale_session")
           for value in getattr(args, flag) or () for a in (f"--{flag.replace('_', '-')}", place(value))]
    for value in args.agent_home:
        agent, _, path = value.partition("=")
        out += ["--agent-home", f"{agent}={place(path)}"]
    return out + (["--no-default"] if args.no_default else [])


def cmd_schedule(args) -> int:
    import subprocess

    from pipelines import schedule

    layout = _layout(args)
    # the scheduler runs without this shell's variables: the home always, and whatever the
    # home's own config.toml would not give (a flag, $AGENTLAKE_LAKE, $AGENTLAKE_WAREHOUSE, ...)
    own = load_layout(str(layout.home), env={})
    passed = ["--home", str(layout.home)]
    if args.lake or str(layout.lake) != str(own.lake):
        passed += ["--lake", str(layout.lake)]
    if args.warehouse or layout.warehouse != own.warehouse:
        passed += ["--warehouse", str(layout.warehouse)]
    for flag in ("machine", "user"):
        if getattr(args, flag) or getattr(layout, flag) != getattr(own, flag):
            passed += [f"--{flag}", getattr(layout, flag)]
    if args.team is not None:
        passed.append("--team" if args.team else "--no-team")
    passed += _discovery_passed(args)
    merged = _merged_lake(layout) if own_lake(layout.lake, layout.warehouse) else None
    if merged and not same_lake(merged, str(layout.lake)):  # a reader's home: its ingests are refused
        _err(f"error: the warehouse {layout.warehouse} is read from the lake {merged}, so an ingest of this "
             f"home's own lake would be refused: run `agentlake schedule --lake {merged}` to land this machine's "
             f"agents there, or have your scheduler run `agentlake merge --lake {merged}`")
        return 2
    try:
        recipe = schedule.recipe(args.kind or schedule.default_kind(), args.every, schedule.ingest_argv(passed),
                                 Path.home(), layout.home / "ingest.log", env=schedule.job_env(os.environ))
    except ValueError as exc:
        _err(f"error: {exc}")
        return 2
    if not args.install:
        print(schedule.render(recipe), end="")
        return 0
    for path in schedule.install(recipe):
        print(f"wrote {path}")
    tool = recipe.enable[0].split()[0].strip("(")
    tool = "crontab" if recipe.kind == "cron" else tool
    if not shutil.which(tool):
        _err(f"{tool} is not on this machine: turn the schedule on with:\n  " + "\n  ".join(recipe.enable))
        return 1
    for command in recipe.enable:
        done = subprocess.run(command, shell=True)
        if done.returncode:
            _err(f"error: `{command}` failed (exit {done.returncode})")
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
    layout = _layout(args)
    env = dagster_env(layout)
    port = args.port or _free_port(args.host)  # dagster dev took 0 for its default, 3000 (a new user's trial)
    # dagster 1.13 says `dagster dev` is superseded by `dg dev` (dagster-dg-cli, not a dependency)
    cmd = [sys.executable, "-W", "ignore:Function `dev_command` is superseded:FutureWarning",
           "-m", "dagster", "dev", "-m", "pipelines.definitions",
           "--host", args.host, "--port", str(port), *args.dagster_args]
    _err(f"DAGSTER_HOME={env['DAGSTER_HOME']}  AGENTLAKE_HOME={env['AGENTLAKE_HOME']}"
         + (f"  (port 0: the UI takes the free port {port})" if not args.port else ""))
    os.execvpe(cmd[0], cmd, env)


