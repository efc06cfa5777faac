"""What every `agentlake` command takes from its parsed arguments: the home's layout, the
discovery options, usage errors and how they are said, and the demo a home without data reads
instead (`use_demo_if_empty`)."""

import os
import shlex
import shutil
import sys
from pathlib import Path

from transforms.provider import DiscoverOptions, merge_paths
from warehouse.lake.config import DEMO_DATA, demo_layout, load_config, load_layout, stood_in_for
from warehouse.lake.layout import Layout, default_home, own_lake, same_lake
from warehouse.lake.pg_catalog import PostgresCatalog, is_postgres



def layout_of(args) -> Layout:
    layout = load_layout(args.home, args.lake, args.warehouse, machine=getattr(args, "machine", None),
                         user=getattr(args, "user", None), team=getattr(args, "team", None))
    named = os.environ.get("AGENTLAKE_WAREHOUSE")
    if args.home and named and not args.warehouse and not same_warehouse(named, layout.warehouse) \
            and not getattr(args, "warehouse_note_said", False):
        args.warehouse_note_said = True  # once per command, which may look its home up again
        # it names $AGENTLAKE_HOME's warehouse, not this home's (docs/CLI.md, --warehouse); a
        # center that gave --home merged into a file of its own without a word (a new user's trial)
        other = ("" if getattr(args, "command", None) == "dev"  # (dev takes --home only)
                 else "; give --warehouse to read another")
        print_err(f"note: $AGENTLAKE_WAREHOUSE ({named}) is not read with --home: this command reads "
                  f"{layout.warehouse}{other}")
    return layout


def same_warehouse(named: str, warehouse) -> bool:
    """`named` (a setting as written) is `warehouse`: the same file, however spelt (`~`, relative),
    or the same PostgreSQL catalog."""
    if is_postgres(named) != is_postgres(warehouse):
        return False
    if is_postgres(named):
        return str(warehouse) == named or str(warehouse) == str(PostgresCatalog.parse(named))
    return Path(named).expanduser().absolute().resolve() == Path(warehouse).absolute().resolve()


def discover_options(args, layout: Layout) -> DiscoverOptions:
    config = load_config(layout.config_file)
    flags_stores = {"crush": tuple(args.db or ()), "codewhale": tuple(args.codewhale_session or ())}
    flags_roots = merge_paths({"crush": tuple(args.crush_root or ()), "codewhale": tuple(args.codewhale_home or ())},
                              agent_homes(args.agent_home))
    return DiscoverOptions(
        env=dict(os.environ),
        extra_stores=merge_paths(flags_stores, config.extra_stores),
        extra_roots=merge_paths(flags_roots, config.extra_roots),
        use_default=not args.no_default and config.use_default,
        project_names=config.project_names,
        cache_root=layout.cache_dir,
    )


class UsageError(ValueError):
    """A flag's value is wrong: exit 2, like argparse's own errors."""


def refuse_team_catalog_flag(args, layout: Layout, what: str) -> None:
    """--warehouse naming a team's catalog in PostgreSQL, given to a command that lands (`ingest`,
    or `schedule`'s timer of it): an ingest never writes that catalog (the center's merge does), and
    it merged into the home's file catalog instead, saying nothing (a team lead's trial scheduled a
    center that never merged). One set in config.toml or $AGENTLAKE_WAREHOUSE is a reader's: kept."""
    if args.warehouse and is_postgres(layout.warehouse):
        # the team's lake: the one given, else a placeholder (not this home's own folder, which a new
        # catalog would take for its tables' place)
        lake = shlex.quote(str(layout.lake)) if args.lake or layout.remote else "s3://TEAM-BUCKET/LAKE"
        raise UsageError(
            f"--warehouse names a team's catalog in PostgreSQL, which {what} never writes: an ingest lands this "
            "machine's files (and merges them into its home's file catalog). The center writes the team's catalog "
            f"with `agentlake merge --lake {lake} --warehouse {shlex.quote(args.warehouse)}`, "
            "on a timer of its own "
            "(docs/TEAM.md, step 3); a machine's ingest needs no --warehouse")


def agent_homes(values: list[str]) -> dict[str, tuple[str, ...]]:
    from transforms.providers import PROVIDERS

    out: dict[str, tuple[str, ...]] = {}
    for value in values:
        agent, sep, path = value.partition("=")
        if not sep or agent not in PROVIDERS or not path:
            from warehouse.lake.setting_names import close_to

            hint = close_to(agent, {p: p for p in PROVIDERS}) if sep and agent not in PROVIDERS else ""
            if not sep and value.lower() in PROVIDERS:  # `--agent codex`, which argparse took for --agent-home
                hint = (f" (an agent alone names no home: every agent found is read; only {value.lower()}'s: "
                        f"--no-default --agent-home {value.lower()}=DIR)")
            raise UsageError(f"--agent-home wants AGENT=DIR with AGENT one of {', '.join(PROVIDERS)}; "
                             f"got {value!r}{hint}")
        out[agent] = out.get(agent, ()) + (path,)
    return out


def print_err(*parts) -> None:
    print(*parts, file=sys.stderr, flush=True)


def nothing_ingested(layout: Layout) -> int:
    merged = merged_lake(layout)
    if merged and not same_lake(merged, str(layout.lake)):  # a reader's home, merged from a lake named by a flag once
        print_err(f"error: nothing ingested in {layout.lake}: this warehouse merges {merged}; name it with --lake "
             "(or `lake` in config.toml, $AGENTLAKE_LAKE)")
    else:
        hint = (" (a wrong bucket, prefix or endpoint? it lists no landing file)" if layout.remote else
                " (no such folder: a mistyped path?)" if not Path(layout.lake).exists() and not own_lake(
                    layout.lake, layout.warehouse) else "")
        reader = ", or name a team's lake with --lake" if own_lake(layout.lake, layout.warehouse) else ""
        print_err(f"error: nothing ingested in {layout.lake} yet{hint}: run `agentlake ingest` (or `agentlake demo`) "
             f"first{reader}")
    return 1


def merged_lake(layout: Layout) -> str | None:
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
    return demo_layout(layout_of(args))


def use_demo_if_empty(args) -> None:
    """After a quickstart that found no agent data, the README's next commands work as written:
    they use the demo in <home>/demo until <home> holds data of its own (see the module doc).
    `ingest`, `sources` and `dev` do so only when discovery finds no store of the agents at all
    (`dev` then finds the demo's stores in the demo home's config.toml). `demo` makes its demo
    there too, not a second one in <home> (which would then hold "data of its own", a trial)."""
    if args.command not in ("sql", "report", "search", "dashboard", "mcp", "serving", "views", "merge", "compact",
                            "sources", "ingest", "dev", "demo"):
        return
    demo = _demo_instead(args)
    if demo is None:
        return
    home = demo.home.parent
    if args.command in ("sources", "ingest", "dev"):
        from transforms.synth.demo import HOMES
        from warehouse.land.ingest import discover_sources

        if any(getattr(args, f) for f in DISCOVERY_FLAGS):
            return
        sources, problems = discover_sources(discover_options(args, layout_of(args)))
        if sources or problems:
            return
        if args.command != "dev":
            args.no_default = True
            args.agent_home = [f"{p}={demo.home / DEMO_DATA / d}" for p, d in HOMES.items()]
        print_err(f"note: no agent data found on this machine and {home} holds none yet: using the quickstart demo "
             f"in {demo.home} (once an agent has written sessions, `agentlake ingest` puts them in {home})")
    elif args.command == "demo":
        print_err(f"note: the quickstart's demo is in {demo.home}: this demo goes there, where the other commands "
                  f"find it ({home} is kept for your agents' own data)")
    else:
        # a server keeps the warehouse it started with: the first ingest's data needs a new start (a trial)
        again = "; start this again after it" if args.command in ("dashboard", "mcp") else ""
        print_err(f"note: {home} holds no ingested data yet: using the quickstart demo in {demo.home} "
                  f"(`agentlake ingest` puts your agents' own data in {home}{again})")
    args.home = str(demo.home)


def tsv_field(text: str) -> str:
    """A field of a tab-separated line: a tab or a newline in a path would split it."""
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def command_for(layout: Layout, command: str, *, pinned: bool = False) -> str:
    """`agentlake COMMAND` as the user types it to read this home's warehouse: with --home unless
    it is the default one (the quickstart demo's plain commands use it: use_demo_if_empty), and
    with --warehouse when the home alone reads another one (one named by --warehouse or
    $AGENTLAKE_WAREHOUSE; the team's, named in config.toml, where an ingest merged its own file).
    `pinned`: a command kept to read this warehouse later (a search hit's), which names the
    demo's own home: the plain command reads the user's data once there is some."""
    owner = None if pinned else stood_in_for(layout.home)
    home = owner.home if owner is not None else layout.home
    flag = f" --home {shlex.quote(str(home))}" if home != default_home().absolute() else ""
    if home == layout.home and not same_warehouse(str(load_layout(str(home), env={}).warehouse), layout.warehouse):
        flag += f" --warehouse {shlex.quote(str(layout.warehouse))}"
    return f"{agentlake_exe()} {command}{flag}"


def agentlake_exe() -> str:
    """`agentlake` as the user runs it: its path when the venv is not on PATH."""
    return "agentlake" if shutil.which("agentlake") else shlex.quote(sys.argv[0])
