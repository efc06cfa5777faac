"""The commands that read the warehouse: `sql`, `report` (with its budgets, CSV files and time
zone) and `search`. Each opens the published catalog read-only."""

import os
import re
import sys
from functools import partial
from pathlib import Path

from pipelines.command_args import UsageError, agentlake_exe, command_for, layout_of, print_err
from warehouse.lake.config import load_config, load_layout, settings_file
from warehouse.lake.layout import Layout
from warehouse.lake.pg_catalog import is_postgres


def no_warehouse(layout) -> str:
    """Why there is nothing to read yet, and what to do: a home's first ingest publishes its
    warehouse only when its merge ends, and a reader asking meanwhile was told to run one."""
    if layout.pending_marker.exists():
        return (f"no warehouse at {layout.warehouse} yet: an ingest has landed data it has not merged "
                "(it is running now, or it stopped before its merge, and the next `agentlake ingest` merges it)")
    from warehouse.lake.ducklake import FIRST_STEP

    return f"no warehouse at {layout.warehouse}: {FIRST_STEP}"


def _read_warehouse(args, answer, opener=None, hint=lambda exc: "", error=str) -> int:
    """Open the warehouse read-only (with `opener`, `connect`'s arguments, if given), print
    `answer(con)`; a missing warehouse or a bad query is a usage error (exit 2) with DuckDB's own
    message (as `error(exc)` words it), and `hint(exc)` after it."""
    import duckdb

    from warehouse.lake.ducklake import connect

    layout = layout_of(args)
    try:
        con = (opener or connect)(layout.warehouse, layout.tables_path)
    except FileNotFoundError:
        print_err(f"error: {no_warehouse(layout)}")
        return 2
    written = False  # a piece of a streamed result written before an error: the output is cut short
    _say_if_another_lake(con, args, layout)
    with con:
        try:
            said = answer(con)
            if isinstance(said, str):
                print(said)
            else:  # pieces written as they come (a large result in CSV or JSON)
                for piece in said:
                    sys.stdout.write(piece)
                    written = True
        except duckdb.Error as exc:
            from warehouse.lake.ducklake import damage_hint, interrupted, storage_failure

            if interrupted(exc):  # DuckDB's InterruptException is one of its Errors: Ctrl-C, 130 (a review)
                raise KeyboardInterrupt from None
            if written:  # not a bad query, and the rows above are not the result (a review)
                sys.stdout.flush()
                print_err(f"error: the query failed after part of its rows were written, so the output is incomplete: "
                          f"{' '.join(str(exc).split())}")
                return 1

            failed = storage_failure(exc, con)
            if failed:  # the lake's storage did not answer: no bad query either
                print_err(f"error: {failed}")
                return 1
            damage = damage_hint(exc)  # a table file lost or damaged is no bad query: what repairs it
            print_err(f"error: {error(exc)}{damage or hint(exc)}")
            return 1 if damage else 2
    return 0


def _say_if_another_lake(con, args, layout) -> None:
    """A reader reads a warehouse, not a lake: a --lake other than the one the warehouse merges
    changes nothing it reads, which it said nothing of (a new user's trial read the home's rows
    with --lake naming another)."""
    from warehouse.lake.layout import own_lake, same_lake

    if not getattr(args, "lake", None) or own_lake(layout.lake, layout.warehouse):  # (a moved home's own, too)
        return
    from warehouse.catalog.build import lake_of
    from warehouse.lake.storage import masked

    merged = lake_of(con)
    if merged is not None and not same_lake(merged, masked(str(layout.lake))):
        print_err(f"note: --lake {args.lake} is not the lake the warehouse {layout.warehouse} merges ({merged}): a "
                  "reader reads that warehouse as it is. To read another lake, name its warehouse (--warehouse or "
                  "--home), or merge it into one (`agentlake merge --lake LAKE --warehouse FILE`)")


_NO_TABLE = re.compile(r"Catalog Error: Table with name (.*) does not exist")


def _tables_hint(exc) -> str:
    """Where the warehouse's tables are listed, after DuckDB's own error for a table a user's
    query names and it does not hold: its suggestion is the closest name of any catalog's, a
    system view's too (`nosuchtable`: "Did you mean duckdb_tables?", a new user's trial)."""
    if not _NO_TABLE.match(str(exc)):
        return ""
    return ('\nthe tables and marts: agentlake sql "SHOW TABLES" lists them; docs/TABLES.md and '
            "docs/MARTS.md say what each holds")


def _sql_error(exc) -> str:
    """DuckDB's error, but for a file named as a table (`FROM 'data.csv'`), which DuckDB reads only
    with file access, off here: its "no such table, did you mean daily_costs?" misled (a trial)."""
    named = _NO_TABLE.match(str(exc))
    if named and re.search(r"[/\\]|\.(?:csv|tsv|txt|json|jsonl|ndjson|parquet|xlsx|gz|zst)$", named.group(1), re.I):
        return f"reading a file is refused ({named.group(1)!r}): `agentlake sql` reads the warehouse's tables only"
    return str(exc)


def cmd_sql(args) -> int:
    args.query, source = _query_text(args)  # a usage error here loads no DuckDB
    if not args.query.strip():
        raise UsageError(f'empty query{source}: give one SQL statement, e.g. agentlake sql "SELECT * FROM sessions '
                         'LIMIT 5"')
    from warehouse.serve.formatting import fetch_batches, fetch_rows, render, render_chunks
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
        if args.format in ("csv", "json"):  # streamed: a result larger than memory prints too
            return render_chunks(columns, fetch_batches(cur), args.format)
        return render(columns, fetch_rows(cur), args.format)

    return _read_warehouse(args, answer, open_reader, hint=_tables_hint, error=_sql_error)


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


def _one_agent(args) -> None:
    """--agent, or --provider (its first name) in its place: both, naming different agents, is a
    usage error (`report` and `search` alike)."""
    if args.provider_old is not None:
        if args.provider is not None and args.provider.lower() != args.provider_old.lower():
            raise UsageError(f"--agent {args.provider} and --provider {args.provider_old} name different agents "
                             "(--provider is --agent's older name): give one")
        args.provider = args.provider_old


def cmd_report(args) -> int:
    _one_agent(args)
    zone = report_zone(args)
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
        print_err(f"note: days of {zone} (the lake keeps UTC, and the times in these tables are UTC)")

    layout = layout_of(args)  # once: each of the notes below asks it

    def answer(con):
        unknown = unknown_filters(con, filters)
        if unknown:
            raise UsageError("; ".join(unknown))
        _say_if_the_prices_wait_for_a_merge(con, layout)
        if zone != UTC and not args.insights:  # the insights' SQL names the zone's days itself
            use_zone(con, zone)
        if args.insights:
            sections = build_insights(con, filters, top=3 if args.top is None else args.top)
        else:
            sections = build(con, filters, by=args.by, top=10 if args.top is None else args.top)
        _say_if_the_window_is_empty(con, filters)
        _say_if_the_pair_is_empty(con, filters)
        _say_if_the_warehouse_is_empty(con, layout)
        if args.section:
            sections = _section(sections, args)
        if args.format != "csv":
            return render_report(sections, args.format)
        return _report_csv(sections, args)

    from warehouse.lake.ducklake import connect

    # the report runs agentlake's own SQL only (the filters are parameters)
    return _read_warehouse(args, answer, partial(connect, ours=True))


def _say_if_the_prices_wait_for_a_merge(con, layout) -> None:
    """config.toml's prices are applied by a merge: prices changed since the last one are not in
    the report yet, and it said nothing (a new user's trial)."""
    from warehouse.catalog.prices import recorded_fingerprint

    team = is_postgres(layout.warehouse)
    if not team and Path(layout.warehouse).parent != layout.home:
        return  # a file catalog another home merges: its prices are that home's config's
    config_file = settings_file(layout)
    prices = load_config(config_file).prices
    if team and not prices:  # the center's prices price the team's catalog: nothing of this reader's to apply
        return
    if prices.fingerprint() != recorded_fingerprint(con):  # (prices removed too: a team lead's trial)
        # a team's catalog is merged by its center, with the center's config.toml: said there
        # before its next merge, and to a reader whose own prices would never apply
        merge = ("the merge that writes it applies its own home's prices (the team's center: `agentlake merge` "
                 "there)" if team else "`agentlake merge` applies them" if prices
                 else "`agentlake merge` prices the history without them")
        what = (f"the prices in {config_file} are not the ones" if prices
                else f"{config_file} sets no prices, and configured prices are the ones")
        print_err(f"note: {what} the warehouse was merged with: {merge}")


def _say_if_the_window_is_empty(con, filters, flags: bool = True) -> None:
    """The note `empty_window` writes, if any, on stderr."""
    from warehouse.serve.report import empty_window

    said = empty_window(con, filters, flags)
    if said:
        print_err(f"note: {said}")


def _say_if_the_pair_is_empty(con, filters) -> None:
    """--user and --machine, each in the warehouse, that name no session together: the user's
    machines (a team trial's `--user ana --machine bo-desktop` printed zeros without a word)."""
    from warehouse.serve.report import pair_without_sessions

    if filters.user is None or filters.machine is None:
        return
    theirs = [r[0] for r in con.execute('SELECT DISTINCT machine FROM sessions WHERE "user" = ?',
                                        [filters.user]).fetchall()]
    said = pair_without_sessions(filters.user, filters.machine, theirs)
    if said:
        print_err(f"note: {said}")


def _say_if_the_warehouse_is_empty(con, layout) -> None:
    """A warehouse without a session (an ingest that found no source made it): the report's zeros
    are no total of anything, and `serving` says nothing is ingested (a new user's trial). A
    home's own lake is told where to look next, with its --home; a demo goes where quickstart
    keeps one (a shared lake must not take it)."""
    if con.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]:
        return
    said = f"note: the warehouse {layout.warehouse} holds no session yet"
    if not (layout.remote or is_postgres(layout.warehouse)):
        import shlex

        from warehouse.lake.config import DEMO

        said += (f": `{command_for(layout, 'sources')}` lists what an ingest finds, "
                 f"`{command_for(layout, 'ingest')} --agent-home AGENT=DIR` names a place")
        own = load_layout(str(layout.home), env={})
        if (str(own.lake), own.warehouse) == (str(layout.lake), layout.warehouse):  # where quickstart's demo is read
            said += (f", or `{agentlake_exe()} demo --home {shlex.quote(str(layout.home / DEMO))}` makes a demo the "
                     "commands read until the home holds data")
    print_err(said)


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
    layout = layout_of(args)  # once: the notes below ask it
    config_file = settings_file(layout)  # own_config_file, on the layout read once
    named = layout.config_file
    if config_file != named and named.is_file() and load_config(named).budgets:  # `--home <home>/demo` (a trial)
        print_err(f"note: the budgets are those of {config_file}, the home this quickstart demo stands in for "
                  f"until that home holds data of its own; {named}'s are not read")
    budgets = load_config(config_file).budgets
    if not budgets:
        raise UsageError(f"no budgets in {config_file}: add one, e.g. `[[budgets]]` with `monthly_usd = 500` "
                         "(docs/CONFIG.md, Budgets)")
    from warehouse.lake.ducklake import connect
    from warehouse.serve.budgets import COLUMNS, OVER, PROJECTED_OVER, budget_statuses, rows, unknown_scopes
    from warehouse.serve.report import Filters, Section, render_report
    from warehouse.serve.report_csv import csv_text
    from warehouse.serve.local_days import use_zone
    from warehouse.lake.zones import UTC, today_in
    over, projected = [], []

    def answer(con):
        today = today_in(zone)
        if zone != UTC:
            use_zone(con, zone, marts=("daily_costs",))
        statuses = budget_statuses(con, budgets, today)
        _say_if_the_warehouse_is_empty(con, layout)
        _say_if_the_prices_wait_for_a_merge(con, layout)  # a spend, and so a status, may change
        # a month without a session reads as every budget at 0, ok (a trial on the demo's January);
        # not said beside a spend (a session started last month spends on this month's days)
        if not any(s.spent_usd for s in statuses):
            _say_if_the_window_is_empty(con, Filters(since=today.replace(day=1), until=today, zone=zone), flags=False)
        for note in unknown_scopes(con, budgets):
            print_err(f"note: {note}")
        over.extend(s.budget.name for s in statuses if s.status == OVER)
        projected.extend(s.budget.name for s in statuses if s.status == PROJECTED_OVER)
        section = Section("budgets", f"Budgets, {today:%B %Y} to {today} ({zone})", COLUMNS, rows(statuses, today, zone))
        return csv_text(section).rstrip("\n") if args.format == "csv" else render_report([section], args.format)

    code = _read_warehouse(args, answer, partial(connect, ours=True))
    if code == 0 and projected:
        print_err(f"note: projected over budget by the month's end at this pace: {', '.join(projected)}")
    if code == 0 and over:
        print_err(f"over budget: {', '.join(over)}")
        return BUDGETS_EXCEEDED
    return code


def own_config_file(args) -> Path:
    """The config.toml of the user's settings (budgets, tz): the home's, also while the quickstart's
    demo stands in for it (warehouse.lake.config.settings_file, which prices the merges too)."""
    return settings_file(layout_of(args))


def report_zone(args) -> str:
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
    return load_config(own_config_file(args)).tz or UTC


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
    print_err(f"note: {named}: {since} to {until} ({zone} days)")
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
            print_err(f"note: {note}")
        return "\n".join(f"wrote {path}" + ("" if rows is None else f" ({rows:,} row{'' if rows == 1 else 's'})")
                         for path, rows in written)
    if len(sections) > 1:  # the plain report: its breakdown
        main = next(s for s in sections if s.name == f"by_{args.by}")
        others = [s.name for s in sections if s is not main]
        print_err(f"note: the CSV is one table, the report's {main.name}; its others ({', '.join(others)}): "
             "--section NAME, or --output DIR for a file each")
        sections = [main]
    for note in cut_notes(sections):
        print_err(f"note: {note}")
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
    _one_agent(args)
    zone = report_zone(args)
    since, until = _window(args, zone)  # the usage errors first: they load no DuckDB
    if since and until and since > until:
        raise UsageError(f"--since {args.since} is after --until {args.until}: no day is in between")
    from warehouse.catalog.team_index import NoPublishedIndex
    from warehouse.serve.search import (BadQuery, NoIndex, SearchFilters, check_filters, parse, render, search,
                                         shell_quoted)

    filters = SearchFilters(since, until, args.project, args.provider, args.user, args.machine,
                            zone=zone, role=args.role, tool=args.tool, kind=args.kind)
    try:
        parse(args.query)
        check_filters(filters)
    except BadQuery as exc:
        raise UsageError(str(exc)) from None
    layout = layout_of(args)
    if not layout.warehouse.exists():
        print_err(f"error: {no_warehouse(layout)}")
        return 2
    try:
        hits = search(search_index_of(layout), args.query, filters, args.limit)
    except BadQuery as exc:
        raise UsageError(str(exc)) from None
    except (NoIndex, NoPublishedIndex) as exc:
        print_err(f"error: {exc}")
        return 2
    opener = command_for(layout, "sql", pinned=True)  # a hit's session, in the warehouse searched
    for hit in hits:
        hit.open_command = f"{opener} {shell_quoted(hit.open_sql)}"
    if not hits:  # said on stderr whatever the format: JSON's `[]` on stdout, as CLI.md says
        filtered = filters != SearchFilters(zone=filters.zone)
        print_err(f"note: nothing matches {args.query!r}" + (" with these filters" if filtered else ""))
        if hits.held:  # as the report says an empty window
            first, last = hits.held
            scoped = filters != SearchFilters(since=filters.since, until=filters.until, zone=filters.zone)
            print_err(f"note: the index holds nothing from {filters.since or 'the first day'} to "
                      f"{filters.until or 'today'}; its messages and tool calls{' of these filters' if scoped else ''}"
                      f" are from {first} to {last} (--since {first} --until {last})")
        if args.format == "table":
            return 0
    print(render(hits, args.format, zone))
    if hits.total > len(hits):
        print_err(f"note: {hits.counted()} shown, best first; --limit N shows more (up to 1000)")
    return 0
