"""agentlake: coding-agent sessions (Crush, Claude Code, Codex, OpenCode, Gemini CLI and thirteen more) in a DuckLake lake, queried with DuckDB.

Exit status: 0 success; 1 the run finished but some source failed, or a place to look
(a registry, an agent home, the config) could not be read, or there is nothing ingested to
build from; 2 bad usage or nothing to query; 3 a budget is exceeded (report --budgets); 130
interrupted; 141 the output was closed early (a pipe into `head`).

After `agentlake quickstart` found no agent data, its demo lives in <home>/demo. Until <home>
holds data of its own, every command that reads or ingests (sql, report, dashboard, serving,
views, sources, ingest, demo) uses that demo instead, and says so on stderr.
"""

import argparse
import gc
import os
import sys
from pathlib import Path

from pipelines.command_args import NO_DISCOVERY, UsageError, layout_of, print_err, use_demo_if_empty
from pipelines.commands import (
    cmd_compact,
    cmd_dashboard,
    cmd_demo,
    cmd_dev,
    cmd_ingest,
    cmd_mcp,
    cmd_merge,
    cmd_quickstart,
    cmd_schedule,
    cmd_serving,
    cmd_sources,
)
from pipelines.reading import cmd_report, cmd_search, cmd_sql
from pipelines.summary import LISTED_WARNINGS
from warehouse.serve.report_options import BREAKDOWNS, parse_day
from warehouse.lake.config import ConfigError
from warehouse.lake.layout import HomeNotMade, NotACatalog, NotAHome
from warehouse.lake.storage import LakeUnreachable

# -- argument types -------------------------------------------------------------------------

def _date(text: str):
    try:
        return parse_day(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


def _whole(low: int, high: int | None, wants: str):
    """An argparse type: a whole number from `low` to `high`, else a usage error saying `wants`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"wants {wants}: {text!r}")
        return value
    return parse


_top = _whole(0, None, "0 (no limit) or a positive number of rows")
_port = _whole(0, 65535, "a port from 0 (any free one) to 65535")
_seconds = _whole(0, None, "0 or a positive whole number of seconds")


# -- parser ---------------------------------------------------------------------------------

def _windows(p, today: str) -> None:
    """The relative windows, one at most: --today, --yesterday, --week, --month, --last N{d,w,m}."""
    window = p.add_mutually_exclusive_group()
    window.add_argument("--today", dest="window", action="store_const", const="today", help=today)
    window.add_argument("--yesterday", dest="window", action="store_const", const="yesterday", help="yesterday only")
    window.add_argument("--week", dest="window", action="store_const", const="week",
                        help="the last 7 days, today included")
    window.add_argument("--month", dest="window", action="store_const", const="month",
                        help="this calendar month so far")
    window.add_argument("--last", metavar="N{d,w,m}",
                        help="the last N days, weeks or months, today included (7d, 2w, 3m)")


def _common(p: argparse.ArgumentParser, discovery: bool = False, places: bool = True) -> None:
    """`places=False`: --lake and --warehouse are not advertised (`agentlake dev`, which takes the
    home's own and says so when given them)."""
    p.add_argument("--home", help="agentlake home (default: $AGENTLAKE_HOME, else $XDG_DATA_HOME/agentlake, "
                                  "else ~/.local/share/agentlake)")
    p.add_argument("--lake", help="lake directory or s3://bucket/prefix (default: $AGENTLAKE_LAKE, "
                                  "`lake` in config.toml, else <home>/lake)" if places else argparse.SUPPRESS)
    p.add_argument("--warehouse", help="the DuckLake catalog readers open: a file, or the team's "
                                       "postgres:dbname=... host=... user=... (default: without --home, "
                                       "$AGENTLAKE_WAREHOUSE if set; `warehouse` in config.toml; else "
                                       "<home>/warehouse.ducklake)" if places else argparse.SUPPRESS)
    if discovery:
        p.add_argument("--db", action="append", metavar="PATH",
                       help="also ingest this crush.db, data dir or project dir (repeatable)")
        p.add_argument("--crush-root", action="append", metavar="DIR",
                       help="also read this Crush global data dir's projects.json (repeatable)")
        p.add_argument("--codewhale-home", action="append", metavar="DIR",
                       help="also read this CodeWhale home's sessions/ (repeatable)")
        p.add_argument("--codewhale-session", action="append", metavar="PATH",
                       help="also ingest this CodeWhale session file or sessions dir (repeatable)")
        p.add_argument("--agent-home", action="append", metavar="AGENT=DIR", default=[],
                       help="also read this agent home, e.g. claude=~/.claude, codex=~/.codex, "
                            "opencode=~/.local/share/opencode (repeatable)")
        p.add_argument("--machine", help="machine name in rows and file names (default: $AGENTLAKE_MACHINE, "
                                         "config.toml, else the host name)")
        p.add_argument("--user", help="user name in rows and file names (default: $AGENTLAKE_USER, config.toml, "
                                      "else the login name)")
        p.add_argument("--team", action=argparse.BooleanOptionalAction, default=None,
                       help="team mode: redact secrets before writing (default: on for an s3:// lake)")
        p.add_argument("--no-default", action="store_true",
                       help="do not read the agents' default locations ($CRUSH_GLOBAL_DATA, $CODEWHALE_HOME, ...)")


def _verbose(p: argparse.ArgumentParser) -> None:
    p.add_argument("--verbose", action="store_true",
                   help=f"list every warning in the summary (without it: the first {LISTED_WARNINGS}, and of a demo "
                        "only their number; the run log, `sources`, keeps them all)")


class _Paragraphs(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as paragraphs, each filled to the terminal's width whatever the
    line breaks in the source (edited text left ragged lines there); indented lines (examples)
    are kept as written."""

    def _fill_text(self, text, width, indent):
        import textwrap

        blocks, prose = [], []
        for line in text.splitlines() + [""]:
            if line.strip() and not line[0].isspace():
                prose.append(line.strip())
                continue
            if prose:
                blocks.append(textwrap.fill(" ".join(prose), width, initial_indent=indent,
                                            subsequent_indent=indent, break_on_hyphens=False,
                                            break_long_words=False))
                prose = []
            blocks.append(indent + line if line.strip() else "")
        return "\n".join(blocks).rstrip("\n")


def _command(sub, name: str, help: str, description: str | None = None, **kw) -> argparse.ArgumentParser:
    """A subcommand whose `--help` opens with what it does: its one-line help as a sentence,
    where it has no description of its own (merge, dashboard, serving, compact had none)."""
    kw.setdefault("formatter_class", _Paragraphs)
    return sub.add_parser(name, help=help, description=description or help[0].upper() + help[1:] + ".", **kw)


class _Version(argparse.Action):
    """`--version`: the installed package's version, looked up only when asked (start-up)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import PackageNotFoundError, version

        try:
            said = version("agentlake")
        except PackageNotFoundError:  # run from a checkout that was never installed
            said = "(not installed)"
        print(f"agentlake {said}")  # on stdout, as argparse's own version action
        parser.exit()


def _unrecognised(ap: argparse.ArgumentParser, command: str | None, extra: list[str]) -> None:
    """argparse's "unrecognized arguments", said by the command's own parser (its usage, not the
    top level's), with the closest of its options for a mistyped one (`--agnet`: `--agent`)."""
    import difflib

    sub = command_parsers(ap).get(command) if command else None
    owner = sub or ap
    options = [o for action in owner._actions for o in action.option_strings if o.startswith("--")]
    hints = []
    for given in (e for e in extra if e.startswith("--")):
        name = given.split("=", 1)[0]
        close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
        if close and close[0] == name:  # an option of its own, given after `--`
            hints.append(f"{close[0]} goes before --: what follows -- is the query")
        elif close:
            hints.append(f"did you mean {close[0]}?")
        elif PERSON_WORDS.get(name) in options:  # `--person ana` (a trial), as `--by person` is
            hints.append(f"did you mean {PERSON_WORDS[name]}?")
    if command == "search" and any(e.startswith("-") and not e.startswith("--") for e in extra):
        hints.append(NEGATION_FIRST)
    elif command == "search" and not any(e.startswith("-") for e in extra):  # words only: an unquoted query
        hints.append("the query is one argument: quote its words, agentlake search 'login handler'")
    owner.error(f"unrecognized arguments: {' '.join(extra)}" + (f" ({'; '.join(hints)})" if hints else ""))


def command_parsers(ap: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The commands' parsers by name (argparse keeps them in its subparsers action only)."""
    return ap._subparsers._group_actions[0].choices


# the words users type for --user (a team lead's `--person ana`), as BY_WORDS for --by
PERSON_WORDS = {"--person": "--user", "--people": "--user", "--developer": "--user", "--dev": "--user",
                "--author": "--user"}

# argparse takes a leading -word for an option: `--` ends the options
NEGATION_FIRST = 'a query that starts with -word goes after --: agentlake search -- "-test login"'


# old names a command still answers to, not listed (`views` was merge's first name)
LEGACY_NAMES = {"views"}
# words users type as commands that are options of one (the README's "insights")
OPTION_COMMANDS = {"insights": "report --insights", "budgets": "report --budgets", "tools": "report --by tool",
                   "users": "report --by user", "people": "report --by user", "models": "report --by model",
                   # no `export` command: the report's CSV files, or the marts as a DuckDB file (a trial)
                   "export": "report --format csv --output DIR` or `serving"}
# words users type for a breakdown `report --by` names otherwise (a team trial's `--by person`)
BY_WORDS = {"person": "user", "persons": "user", "people": "user", "users": "user", "machine": "user",
            "machines": "user", "developer": "user", "developers": "user", "provider": "agent",
            "providers": "agent", "agents": "agent", "projects": "project", "models": "model", "tools": "tool",
            "categories": "category", "days": "day", "daily": "day", "weeks": "week", "weekly": "week",
            "months": "month", "monthly": "month"}


class _Parser(argparse.ArgumentParser):
    """argparse, with a mistyped command answered by the closest one ("did you mean `report`?")
    and the list of commands without the legacy names."""

    def error(self, message):
        import re

        typo = re.match(r"argument COMMAND: invalid choice: '(.*)' \(choose from", message)
        if typo:
            import difflib

            names = [n for n in command_parsers(self) if n not in LEGACY_NAMES]
            close = ([OPTION_COMMANDS[typo[1]]] if typo[1] in OPTION_COMMANDS
                     else difflib.get_close_matches(typo[1], names, n=1, cutoff=0.6))
            message = (f"unknown command {typo[1]!r}" + (f": did you mean `{close[0]}`?" if close else "")
                       + f" (the commands: {', '.join(names)})")
        elif message == "argument --last: expected one argument":  # `--last -3d` reads as an option
            message += " (a number of days, weeks or months back from today: --last 7d, --last 2w, --last 3m)"
        elif self.prog.endswith(" search") and message.endswith("required: query"):
            message += f" ({NEGATION_FIRST})"
        elif by := re.match(r"argument --by: invalid choice: '(.*)' \(choose from", message):
            import difflib

            from warehouse.serve.report_options import BREAKDOWNS

            given = by[1].lower()  # `--by Person` too
            close = [BY_WORDS[given]] if given in BY_WORDS else difflib.get_close_matches(given, BREAKDOWNS, n=1)
            message += f" (did you mean --by {close[0]}?)" if close else ""
        super().error(message)


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="agentlake", description=__doc__.split("\n")[0],
                                 formatter_class=_Paragraphs,
                                 epilog="Exit status: 0 ok; 1 some source failed, a place to look could not be read,\n"
                                        "or nothing is ingested yet (merge, serving, compact); 2 usage error, bad query or no\n"
                                        "warehouse yet; 3 a budget exceeded (report --budgets); 130 interrupted; 141 output\n"
                                        "closed early (a pipe into head).\n"
                                        "After a quickstart that found no agent data, the commands use its demo\n"
                                        "(<home>/demo) until <home> holds data of its own.\n"
                                        "Every option and exit status: agentlake COMMAND --help, docs/CLI.md.")
    ap.add_argument("-V", "--version", action=_Version, help="print agentlake's version and exit")
    # not required here: argparse would then report a missing COMMAND before an unknown option
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    p = _command(sub, "quickstart", help="ingest your agents' data (or a demo if you have none) and show a first query",
                 description="Ingest this machine's agents' data, or a demo when there is none; then print a\n"
                             "first query (cost per agent) and the next commands to try.",
                 epilog="With agent data found, it runs `agentlake ingest` and prints what that prints.\n"
                        "Otherwise it runs `agentlake demo` into <home>/demo (--lake and --warehouse are\n"
                        "not used there). Until <home> holds data of its own, sql, report, dashboard,\n"
                        "serving, merge, compact, sources, ingest, dev and demo use that demo, and say so on\n"
                        "stderr; the first `agentlake ingest` that finds an agent's data puts it in\n"
                        "<home>, and the demo steps aside.\n\n"
                        "Exit status: as `agentlake ingest`; a demo after a place that could not be read\n"
                        "exits 1. Every case: docs/CLI.md.")
    _common(p, discovery=True)
    p.add_argument("--quiet", action="store_true", help="no per-source progress")
    _verbose(p)
    p.add_argument("--full-refresh", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_quickstart)

    p = _command(sub, "ingest", help="read every new or changed source, land its rows and merge them into the tables and marts, with progress",
                 description="Read every new or changed source, land its rows and merge them into the tables\n"
                             "and marts, with progress.",
                 epilog="Each new or changed source lands its rows in the lake; then one merge updates\n"
                        "the tables, the marts and the search index. Unchanged sources are settled\n"
                        "without being read; a run with nothing new only appends to the run log. Dagster\n"
                        "is not run: `agentlake dev` shows each ingest as the materializations of what it\n"
                        "wrote (docs/DAGSTER.md).\n\n"
                        "Prints a line per source on stderr, then a summary on stdout: the sources ok,\n"
                        "unchanged, skipped and failed, the rows written per table, failures, the first\n"
                        f"{LISTED_WARNINGS} warnings (--verbose: all; the others counted, with the query of the run log\n"
                        "that lists them), a problem: line per place that could not be read, the lake\n"
                        "and the warehouse.\n"
                        "A folder lake other than the home's own, with team mode unset, is warned about:\n"
                        "its rows go unredacted (set team in config.toml, or give --team or --no-team).\n"
                        "Sources landed before and not found now keep their rows; the first run that\n"
                        "misses them says how many (--verbose names them every run).\n\n"
                        "Exit status: 0 every source ingested, unchanged or skipped; 1 a source failed or\n"
                        "a place could not be read (the others are still ingested), config.toml cannot\n"
                        "be read, the lake cannot be reached, or the merge failed; 2 bad usage, or a\n"
                        "--warehouse that is not a DuckLake catalog; 130 interrupted (what landed is\n"
                        "merged by the next run). Every case: docs/CLI.md.")
    _common(p, discovery=True)
    p.add_argument("--full-refresh", action="store_true", help="re-read every source, even unchanged ones")
    p.add_argument("--quiet", action="store_true", help="no per-source progress")
    _verbose(p)
    p.set_defaults(func=cmd_ingest)

    p = _command(sub, "demo", help="generate demo data of every agent under <home> and ingest it",
                       description="Generate a seeded demo of every agent in the same projects under\n"
                                   "<home>/demo-data, each in its real store format, and ingest it.",
                       epilog="The same options keep the demo as it is; another --seed or size replaces it\n"
                              "(said on stderr), its old rows gone. A home whose lake holds anything but a\n"
                              "demo (your agents' data, another machine's, a lake on object storage) is\n"
                              "refused, exit 2: run `agentlake demo --home <home>/demo`, where quickstart\n"
                              "keeps its demo (a home holding no data and quickstart's demo: the demo goes\n"
                              "there, said on stderr). In <home>/demo, or a home named with --home, it also writes\n"
                              "the home's config.toml naming the demo's stores (when there is none), so that\n"
                              "`agentlake dev --home ...` materialises them.\n\n"
                              "Its summary counts the warnings of the demo's stores (traps planted to show\n"
                              "each is counted, not lost) instead of listing them: --verbose lists them.")
    _common(p)
    from transforms.synth.demo import LIMITS, size_option

    p.add_argument("--projects", type=size_option("projects"), default=4, metavar="N",
                   help="projects (%d to %d; default: 4)" % LIMITS["projects"])
    p.add_argument("--sessions", type=size_option("sessions"), default=6, metavar="N",
                   help="Crush's root sessions per project, each other agent's in all (%d to %d; default: 6)"
                        % LIMITS["sessions"])
    p.add_argument("--seed", type=int, default=7, help="the generator's seed, any whole number: the same seed and sizes give the same numbers wherever the demo is written (default: 7)")
    p.add_argument("--regenerate", action="store_true",
                   help="write the demo data again even with the seed and sizes it has (other ones replace it anyway)")
    p.add_argument("--quiet", action="store_true", help="no per-source progress")
    _verbose(p)
    p.set_defaults(func=cmd_demo)

    p = _command(sub, "sql", help="run a query against the warehouse (read-only)",
                 description="Run one query on the warehouse, opened read-only, and print its rows.",
                 epilog="One statement at a time, and it can change nothing: an empty query, several\n"
                        "statements, or one that would change the warehouse, its files or the connection\n"
                        "(COPY, EXPORT, ATTACH, INSTALL, LOAD, CREATE, SET, CHECKPOINT, DuckLake's\n"
                        "maintenance calls, ...) is a usage error. No file but the tables' own is read\n"
                        "(read_csv of your own file neither); for a file of the rows, redirect --format\n"
                        "csv or json.\n\n"
                        "No format changes a value: DECIMALs print their exact digits in plain notation\n"
                        "(0, never 0E-9; numbers in JSON), DOUBLEs the shortest text that reads back as\n"
                        "the same double. JSON is always valid (NaN and Infinity are null) and its\n"
                        "timestamps end in Z (UTC); a BLOB is hex, an INTERVAL DuckDB's text. The table\n"
                        "cuts a cell at 60 columns of a terminal (a CJK character takes two).\n\n"
                        "Exit status: 2 for a bad query, or no warehouse yet. The tables and marts:\n"
                        "docs/TABLES.md, docs/MARTS.md.")
    _common(p)
    p.add_argument("query", nargs="?",
                   help='the query: one SQL statement over the tables and marts, e.g. "SELECT * FROM sessions '
                        'LIMIT 5"; - or none reads it from standard input (a pipe or a redirect)')
    p.add_argument("-f", "--file", metavar="FILE", help="read the query from FILE (- for standard input)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="how the rows print: table (default; aligned, long cells cut), csv (a header, then a "
                        "line per row) or json (a list of objects); no format changes a value")
    p.set_defaults(func=cmd_sql)

    p = _command(sub, "report", help="cost, models and tools in readable tables (or JSON/CSV)",
                       description="Totals, then cost and use (root sessions, messages, tool calls, tokens) by\n"
                                   "--by, the top projects, models, tools and failing tools. root_sessions counts\n"
                                   "the root sessions started in the window, messages the messages sent in it\n"
                                   "(the totals as the rows); tokens are the per-request tokens of the agents\n"
                                   "that record them (Claude Code, Codex, OpenCode and most others; none for\n"
                                   "Crush, CodeWhale, Cursor and Codebuff).",
                       epilog="Totals: cost_usd (0 when nothing is in the filters, empty when every cost in\n"
                              "them is unknown), root_sessions_with_unknown_cost (never counted as $0) and\n"
                              "root_sessions_with_partial_cost (their unpriced requests are not in cost_usd:\n"
                              "the total is a floor while there are any). By model: assistant_messages and\n"
                              "tokens; by tool: calls, errors, error_rate and nonzero_exits. Failing tools:\n"
                              "failed (errored or exited non-zero, each counted once) and failure_rate =\n"
                              "failed / calls. Lists in a cell are sorted. Costs are exact in JSON and CSV\n"
                              "(the rows add up to the total); the table rounds them to 4 decimals.\n\n"
                              "--insights: each finding comes with the SQL that gives all its rows, the\n"
                              "filters written in; --since and --until keep the findings about sessions\n"
                              "started in the window.\n\n"
                              "CSV is one table, as a spreadsheet opens it: the --section named, else the\n"
                              "--by breakdown (a note on stderr names the other sections); --output DIR writes\n"
                              "a file per section. A ranking's cut is a note on stderr. --insights has no main\n"
                              "table: with --format csv it takes --section or --output.\n\n"
                              "Days are UTC unless --tz names a zone: then every section counts that zone's\n"
                              "days, and each session's cost is split over them exactly.\n\n"
                              "Exit status: 2 for an unknown --project, --agent, --user, --machine, --section or\n"
                              "--tz (named with the close or valid ones), a bad date or window, --since after\n"
                              "--until, a window\n"
                              "given with them or with another, a negative --top, --output without --format\n"
                              "csv or naming a file, --insights --format csv with neither --section nor\n"
                              "--output, or no warehouse yet; 3 with --budgets when a budget is exceeded.\n"
                              "Every column: docs/CLI.md.")
    _common(p)
    p.add_argument("--since", type=_date, metavar="DATE", help="first day included (YYYY-MM-DD, a day of --tz)")
    p.add_argument("--until", type=_date, metavar="DATE", help="last day included (YYYY-MM-DD, a day of --tz)")
    p.add_argument("--tz", metavar="ZONE",
                   help="count the days of this time zone, an IANA name (Europe/Berlin, America/New_York, "
                        "Asia/Kolkata, UTC): the days, weeks and months of --by, the windows and --since/--until, "
                        "the budgets' month (default: $AGENTLAKE_TZ, else tz in config.toml, else UTC)")
    _windows(p, today="today only (in --tz)")
    p.add_argument("--project", help="one project (its slug); an unknown one is an error naming close ones")
    p.add_argument("--agent", dest="provider", metavar="AGENT",
                   help="one agent, by the name `agentlake sources` shows (crush, claude, codex, opencode, goose, "
                        "...); an unknown one is an error naming those present")
    p.add_argument("--provider", dest="provider_old", help=argparse.SUPPRESS)  # --agent's first name, still taken
    p.add_argument("--user", help="one person, by the user name their rows were ingested under (the dashboard's "
                                  "People); an unknown one is an error naming close ones")
    p.add_argument("--machine", help="one machine, by the name its rows were ingested under; an unknown one is an "
                                     "error naming close ones")
    p.add_argument("--by", choices=BREAKDOWNS, default=None,
                   help="the main breakdown: a row per day, ISO week, month, project, agent, user, model, tool or "
                        "tool category (shell, read, edit, ...: each agent's names for it listed), and a total "
                        "row under it in the table (default: project)")
    p.add_argument("--top", type=_top, default=None, metavar="N",
                   help="rows per ranking (default: 10, 3 with --insights; 0: all); a cut says how many rows it "
                        "left out")
    p.add_argument("--budgets", action="store_true",
                   help="instead: this month's spend against each budget of config.toml, the share used and the "
                        "month's end at the current pace; exit 3 when one is exceeded")
    p.add_argument("--insights", action="store_true",
                   help="instead: the top findings of each insight mart (money that buys nothing), each with "
                        "the SQL that gives them all (paste it into `agentlake sql`)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="table (default), json or csv (one table: --section's, else the --by breakdown; "
                        "a note on stderr names the others); a cut ranking says what it left out in each")
    p.add_argument("--section", metavar="NAME",
                   help="only this section: totals, by_<--by>, top_projects, models, tools or failing_tools (of "
                        "those --by leaves), or with --insights one insight mart; an unknown one is an error "
                        "naming the report's")
    p.add_argument("--output", metavar="DIR",
                   help="with --format csv: write each section to DIR/<section>.csv (an insight's SQL to "
                        "<section>.sql), DIR made if missing, and print the files written")
    p.set_defaults(func=cmd_report)

    p = _command(sub, "search", help="find messages and tool calls by their words, best first (BM25), across "
                                      "every agent, machine and user",
                 description="Rank the messages (text, reasoning) and tool calls (command or input, file path,\n"
                             "result) of every agent, machine and user by relevance (BM25), and print per hit\n"
                             "the session, its agent, when, a snippet with the matches **marked**, and the\n"
                             "`agentlake sql` command that prints the whole session.",
                 epilog="The query: words that must all appear, stemmed (migrations finds migrate), case and\n"
                        "accents ignored; what is not a letter or a digit splits words (src/auth.py is src,\n"
                        "auth and py; a Chinese or Japanese character is a word of its own); a \"quoted\n"
                        "phrase\" must also appear as written; -word must not\n"
                        "appear, stemmed too (-test leaves out tests and testing). English stop words (the,\n"
                        "a, of, ...) are ignored. E.g.\n"
                        "  agentlake search 'stripe webhook -test' --agent claude --last 30d\n"
                        "  agentlake search '\"connection refused\" postgres' --tool shell\n"
                        "  agentlake search -- '-test login'   (a -word first: after --, not an option)\n\n"
                        "The index is a file beside the warehouse (warehouse.search.duckdb) that every\n"
                        "merge keeps current; in a team lake it holds the redacted text only. Days and times\n"
                        "are UTC unless --tz names a zone (as report --tz).\n\n"
                        "Exit status: 2 for an empty query, one of stop words only, an unclosed quote, an\n"
                        "unknown --project, --agent, --user or --machine (named with the close ones), filters\n"
                        "no hit can meet together (--role user with --kind tool_call), a bad date or window,\n"
                        "or no warehouse or search index yet.")
    _common(p)
    p.add_argument("query", help="what to find (the syntax: below)")
    p.add_argument("--since", type=_date, metavar="DATE", help="first day included (YYYY-MM-DD, a day of --tz)")
    p.add_argument("--until", type=_date, metavar="DATE", help="last day included (YYYY-MM-DD, a day of --tz)")
    p.add_argument("--tz", metavar="ZONE",
                   help="the days and hit times of this time zone, an IANA name (Europe/Berlin), as report --tz "
                        "(default: $AGENTLAKE_TZ, else tz in config.toml, else UTC)")
    _windows(p, today="today only (in --tz)")
    p.add_argument("--project", help="one project (its slug)")
    p.add_argument("--agent", dest="provider", metavar="AGENT", help="one agent (crush, claude, codex, ...)")
    p.add_argument("--provider", dest="provider_old", help=argparse.SUPPRESS)  # --agent's first name, still taken
    p.add_argument("--user", help="one user, as ingested")
    p.add_argument("--machine", help="one machine, as ingested")
    p.add_argument("--role", choices=("user", "assistant", "system", "developer", "tool"),
                   help="messages of this role only (tool: tool calls, and the messages holding a tool's result)")
    p.add_argument("--tool", metavar="NAME", help="tool calls of this tool only: its native name (bash, Edit, "
                                                  "shell_command, ...) or its category (shell, read, edit, ...)")
    p.add_argument("--kind", choices=("message", "tool_call"), help="messages only, or tool calls only")
    p.add_argument("--limit", type=_whole(1, 1000, "a number of hits from 1 to 1000"), default=10, metavar="N",
                   help="hits to print, 1 to 1000 (default: 10)")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table (default: a block per hit) or json (a list of objects, each with its open_sql)")
    p.set_defaults(func=cmd_search)

    p = _command(sub, "dashboard", help="serve the team dashboard (headline, budgets, cost and trends over time, "
                                         "by project, model and person, tools, insights, CSV; filters by "
                                         "person and machine; drill down project -> session -> transcript)",
                 description="Serve the team dashboard: the headline, this month's budgets, cost over time\n"
                             "with its trends (tokens, tool-call failure rate, cache share), cost by project\n"
                             "and model, tool calls and errors, the projects and people, the insights, every\n"
                             "table as CSV; filters by date, project, agent, person and machine; drill down\n"
                             "project -> session -> transcript.",
                 epilog="Filters: dates (or a window a click sets: the last 7, 30, 90 days, this month,\n"
                        "to today in --tz), project, agent, user, machine, rows per ranking, the time\n"
                        "chart's bars (grain=day, week or month) and the time zone (tz=Europe/Berlin:\n"
                        "whose days every figure counts, --tz's unless given); a bad one is named on\n"
                        "the page. The\n"
                        "headline tiles (cost, root sessions, failed tool calls, cache share) compare\n"
                        "the window with the one before it (no dates: the 30 days to the last day with\n"
                        "data). Beside cost over time, per the same day, week or month: tokens (input\n"
                        "with cache, output), the tool-call failure rate and the cache share; a period\n"
                        "with nothing recorded is a gap, never a 0. Every page says when the warehouse\n"
                        "was last merged and each machine's last run. Budgets ([[budgets]] in the\n"
                        "home's config.toml, read at start): the overview's table gives this month's\n"
                        "spend, share used, projection and status as report --budgets does, over in\n"
                        "red, projected over in amber; the monthly cost chart (grain=month) draws the\n"
                        "budget's line and marks this month. Every ranking shows its top 15\n"
                        "and one \"others\" row (rows per ranking\n"
                        "0 shows all). Every table sorts by a column (its header's link) and links its\n"
                        "every row as CSV (/csv?table=..., the page's filters and sort, exact figures).\n"
                        "Charts are SVG drawn on the server: the page holds no script and fetches\n"
                        "nothing.\n\n"
                        "It answers only requests whose Host header names it (loopback names on\n"
                        "loopback; beyond it also IP addresses, this machine's names and --allow-host),\n"
                        "so no other site can read it by DNS rebinding. Bound beyond loopback (--host\n"
                        "0.0.0.0) it warns and requires a token: $AGENTLAKE_DASHBOARD_TOKEN, else a\n"
                        "random one printed with the URL. Open http://HOST:PORT/?token=... once; a\n"
                        "cookie carries it afterwards. Setting $AGENTLAKE_DASHBOARD_TOKEN requires the\n"
                        "token on loopback too.\n\n"
                        "Exit status: 2 with no warehouse yet, an address it cannot listen on, or a\n"
                        "--tz or $AGENTLAKE_TZ that is not a time zone; 1 with a bad config.toml (its\n"
                        "error said).")
    _common(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8765, help="port (default: 8765; 0 picks a free one)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="also answer requests for this host name (repeatable; e.g. a reverse proxy's name); "
                        "beyond loopback a token is required: $AGENTLAKE_DASHBOARD_TOKEN, else one is printed")
    p.add_argument("--tz", metavar="ZONE",
                   help="count the days of this time zone, an IANA name (Europe/Berlin): every page's days, "
                        "windows, bars and budgets' month, as report --tz (default: $AGENTLAKE_TZ, else tz in "
                        "config.toml, else UTC; a page's tz= overrides it)")
    p.set_defaults(func=cmd_dashboard)

    p = _command(sub, "mcp", help="serve the history to the agents themselves over MCP (stdio; --http on loopback), "
                                   "read-only: search, sessions, the report, insights, SQL",
                 epilog="Tools: search_history, open_session, usage_report (report --by --format json's\n"
                        "numbers), insights (report --insights'), run_sql (under `agentlake sql`'s guard:\n"
                        "a write, ATTACH, COPY or another file is refused). Every answer's first line\n"
                        "says what it shows of how much: at most 500 rows, 20,000 characters, and a query\n"
                        "is interrupted after 30 seconds. Registering it with Claude Code, Codex, Gemini\n"
                        "CLI and OpenCode: docs/MCP.md.\n\n"
                        "--http serves streamable HTTP at http://HOST:PORT/mcp on loopback only; every\n"
                        "request needs `Authorization: Bearer TOKEN`: $AGENTLAKE_MCP_TOKEN, else a random\n"
                        "one printed at start.\n\n"
                        "Exit status: 2 with no warehouse yet, a --host beyond loopback, --host or\n"
                        "--port without --http, or an address it cannot listen on.")
    _common(p)
    p.add_argument("--http", action="store_true",
                   help="serve streamable HTTP on loopback, with a token, instead of stdio")
    p.add_argument("--host", help="with --http: a loopback address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, help="with --http: the port (default: 8766)")
    p.set_defaults(func=cmd_mcp)

    p = _command(sub, "serving", help="write the marts as tables into a small serving database for BI tools",
                 epilog="Prints the file and each mart's row count. With nothing ingested in a local lake\n"
                        "it writes nothing and exits 1 (a reader's home, merged from a lake named once\n"
                        "with `merge --lake`, serves what that merge read). A PATH that is a folder or\n"
                        "cannot be written, a file that is not a serving database (the home's catalog,\n"
                        "another DuckDB database, a text file: left as it is), or a --storage-version\n"
                        "DuckDB does not know, is a usage error, exit 2. Connecting BI tools: docs/BI.md.")
    _common(p)
    p.add_argument("output", nargs="?", help="where to write it (default: <home>/serving.duckdb)")
    p.add_argument("--storage-version", default="v1.0.0",
                   help="DuckDB storage format, for BI drivers bundling an older DuckDB (default: v1.0.0)")
    p.set_defaults(func=cmd_serving)

    p = _command(sub, "sources", help="list the sources discovery finds, without landing them",
                 epilog="One tab-separated line per source: its name as progress lines and warnings give\n"
                        "it (agent-project-<first 8 of its id>), its path, and ok or skipped: the reason.\n"
                        "A tab, newline or backslash in a path is written \\t, \\n, \\\\. Nothing is\n"
                        "read but what names a source: an Antigravity conversation's workspace row, and what\n"
                        "Claude Code's transcripts appended since the last look (the links that make their\n"
                        "families, kept in <home>/cache). --machine, --user and --team are accepted as\n"
                        "ingest takes them; nothing is landed.\n\n"
                        "Exit status: 1 when a place to look could not be read (a warning on stderr).")
    _common(p, discovery=True)
    p.set_defaults(func=cmd_sources)

    p = _command(sub, "merge", aliases=["views"],
                       help="merge what every machine landed into the warehouse's tables and marts, without "
                            "reading any agent (a reader of a team lake)",
                       description="Merge what every machine landed into the warehouse's tables and marts,\n"
                                   "without reading any agent.",
                       epilog="How a reader of a team lake gets its warehouse: `agentlake merge --lake\n"
                              "s3://...` once; sql, report, dashboard and serving then read where it wrote,\n"
                              "with no --lake. `agentlake views` is the old name, still accepted.\n\n"
                              "Prints the sources merged and removed and the run logs read. Exit status: 1\n"
                              "with nothing ingested in the lake (for a new reader, an s3:// prefix that\n"
                              "lists no landing file: a wrong bucket, prefix or endpoint?), when a shared\n"
                              "lake lists no landing file while the warehouse holds sources (--full empties\n"
                              "it), or in a reader's home asked to merge its own lake; into the team's catalog\n"
                              "in PostgreSQL, with a role that may only read it, while another center's merge\n"
                              "holds it past $AGENTLAKE_WRITER_WAIT, or with its tables in another lake.")
    for listed in sub._choices_actions:  # the list of commands names merge alone (argparse adds its aliases)
        if listed.dest == "merge":
            listed.metavar = "merge"
    _common(p)
    p.add_argument("--full", action="store_true",
                   help="rebuild every table from the landing files (after a table file was lost; or to empty a warehouse whose shared lake lists nothing)")
    p.set_defaults(func=cmd_merge)

    p = _command(sub, "compact", help="merge small files, apply deletes and remove files no snapshot needs",
                 epilog="It also writes out to Parquet the rows small merges kept in the catalog, and\n"
                        "prints the data files before and after. Merges compact by themselves once files\n"
                        "outnumber partitions by 20%. Exit status: 1 with no warehouse yet.")
    _common(p)
    p.add_argument("--keep-seconds", type=_seconds, default=600, metavar="S",
                   help="keep files older snapshots need for this long, for readers still on them (default: 600)")
    p.add_argument("--orphans", action="store_true",
                   help="also delete data files the catalog never committed (a merge killed mid-write); "
                        "only where this catalog is the one writer of its data folder")
    p.set_defaults(func=cmd_compact)

    p = _command(sub, "schedule", help="print (or install) a systemd timer, cron line or launchd agent that "
                                        "runs `agentlake ingest` on this machine",
                 description="Print (or install) a systemd timer, cron line or launchd agent that runs\n"
                             "`agentlake ingest --quiet` on this machine.",
                 epilog="The scheduled run has none of your shell's variables. It always gets --home\n"
                        "(this command's home), plus --lake, --warehouse, --machine and --user when a\n"
                        "flag or a variable set them rather than the home's config.toml, --team or\n"
                        "--no-team when given, and the discovery flags given here (paths made absolute).\n"
                        "It runs with the variables that say where the agents keep their data\n"
                        "($CLAUDE_CONFIG_DIR, $CODEX_HOME, $XDG_DATA_HOME, ...: pipelines/schedule.py\n"
                        "lists them), agentlake's own $AGENTLAKE_*, an s3:// lake's\n"
                        "$AWS_ENDPOINT_URL, $AWS_ENDPOINT_URL_S3, $AWS_PROFILE, $AWS_REGION,\n"
                        "$AWS_DEFAULT_REGION, $AWS_CONFIG_FILE and $AWS_SHARED_CREDENTIALS_FILE, $TZ, and\n"
                        "$HOME when it is not the account's own, as set now (the output names them; run\n"
                        "this again after changing them). Never any other variable: never AWS keys. An\n"
                        "$AWS_ENDPOINT_URL holding user:password@ is refused: put credentials in\n"
                        "~/.aws/credentials or a profile. The job logs to <home>/ingest.log.\n\n"
                        "Exit status: 2 for an interval the scheduler cannot keep, a value holding a line\n"
                        "break, credentials in $AWS_ENDPOINT_URL, or a reader's home (give --lake\n"
                        "s3://... to land this machine's agents in the team's lake); 1 when --install\n"
                        "cannot run the scheduler's own command (systemctl, launchctl, crontab), after\n"
                        "writing the files. Team setup: docs/TEAM.md.")
    _common(p, discovery=True)  # each passed on to the scheduled `agentlake ingest`
    p.add_argument("--kind", choices=("systemd", "cron", "launchd"),
                   help="scheduler (default: launchd on macOS, systemd on Linux, else cron)")
    p.add_argument("--every", type=int, default=60, metavar="MINUTES",
                   help="interval, from 5 minutes to 24 hours; cron takes only those that divide an hour or a "
                        "day (default: 60)")
    p.add_argument("--install", action="store_true", help="write the files and turn the schedule on")
    p.set_defaults(func=cmd_schedule)

    p = _command(sub, "dev", help="start the Dagster UI and daemon (dagster dev) on this home",
                       description="Start the Dagster UI and daemon (dagster dev) on --home: Dagster uses that\n"
                                   "home's lake and warehouse (`lake` in <home>/config.toml names another lake).",
                       epilog="DAGSTER_HOME is $DAGSTER_HOME if set, else <home>/dagster, kept between runs.\n"
                              "After a quickstart demo, while this machine has no agent data, it starts on\n"
                              "the demo's home (<home>/demo), saying so. What the UI shows:\n"
                              "docs/DAGSTER.md.")
    _common(p, places=False)
    p.set_defaults(**NO_DISCOVERY)  # none given: its home's config.toml names the places
    p.add_argument("--machine", help="the machine name Dagster's runs land as (default: $AGENTLAKE_MACHINE, "
                                     "config.toml, else the host name); one the home's ingests did not use is refused")
    p.add_argument("--user", help="the user name Dagster's runs land as (default: $AGENTLAKE_USER, config.toml, "
                                  "else the login name)")
    p.add_argument("--host", default="127.0.0.1", help="UI address (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=3000, help="UI port (default: 3000; 0 picks a free one)")
    p.add_argument("dagster_args", nargs=argparse.REMAINDER, help="after --: passed on to `dagster dev`")
    p.set_defaults(func=cmd_dev)
    return ap


def _options_before_the_command(ap: argparse.ArgumentParser, argv: list[str]) -> None:
    """`agentlake --home H report`: the options are the command's, and go after it (argparse took
    H for the command: "unknown command 'H'", a trial). Said with the command as it is meant."""
    import shlex

    commands = command_parsers(ap)
    if not argv or not argv[0].startswith("-") or argv[0] in ("-h", "--help", "-V", "--version"):
        return
    # the last name of a command: an option's value may be one too (`--home demo report`, a review)
    at = next((i for i in reversed(range(len(argv))) if argv[i] in commands), None)
    if at is not None:
        meant = shlex.join(["agentlake", argv[at], *argv[:at], *argv[at + 1:]])
        ap.error(f"{argv[0]} is an option of the command: it goes after it, `{meant}`")


def main(argv=None) -> int:
    ap = parser()
    _options_before_the_command(ap, list(sys.argv[1:] if argv is None else argv))
    args, extra = ap.parse_known_args(argv)
    if extra:  # an unknown option: its name, the closest of the command's, and the command's usage (exit 2)
        _unrecognised(ap, args.command, extra)
    if args.command is None:
        ap.error("a COMMAND is required (`agentlake --help` lists them)")
    try:
        use_demo_if_empty(args)
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:  # `agentlake sql ... | head`: the reader had enough
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # nothing left for the exit's flush to fail on
            os.close(devnull)
        except (OSError, ValueError):
            pass
        return 141
    except (UsageError, NotACatalog, NotAHome) as exc:
        print_err(f"error: {exc}")
        return 2
    except KeyboardInterrupt:
        print_err("interrupted")
        return 130
    except Exception as exc:  # anything else is one `problem:` line, never a traceback (docs/CLI.md)
        from warehouse.lake.ducklake import interrupted

        if interrupted(exc):  # DuckDB's Ctrl-C in a query
            print_err("interrupted")
            return 130
        from warehouse.lake.duckdb_settings import BadThreads
        from warehouse.lake.pg_catalog import BadWriterWait, CatalogUnreachable, LakeClaimed

        if isinstance(exc, (ConfigError, BadThreads, BadWriterWait, LakeUnreachable, CatalogUnreachable, LakeClaimed,
                            HomeNotMade)):
            print_err(f"error: {exc}")
            return 1
        from warehouse.lake.ducklake import damage_hint

        print_err(f"problem: {_failed(args)}: {one_line(exc)}{damage_hint(exc)}")
        return 1


def _failed(args) -> str:
    """What a command that raised could not do, for its `problem:` line."""
    try:
        warehouse = layout_of(args).warehouse
    except Exception:  # the layout itself is what failed
        return f"`agentlake {args.command}` failed"
    if args.command in ("merge", "views"):
        return f"could not merge into the warehouse at {warehouse}"
    if args.command == "compact":
        return f"could not compact the warehouse at {warehouse}"
    return f"`agentlake {args.command}` failed"


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type and its message, and for an error that is not the
    environment's (DuckDB's, the OS's) where agentlake raised it, for a bug report."""
    import traceback

    text = " ".join(str(exc).split()) or "(no message)"
    said = f"{type(exc).__name__}: {text}"
    if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] == "duckdb":
        return said
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/site-packages/" not in f.filename]
    if frames:
        said += f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})"
    return said


def entry() -> None:
    """The `agentlake` command: `main`, then an exit without Python's last garbage collections. At
    exit the interpreter collects a heap that Dagster, SQLAlchemy and pydantic made large (some
    200,000 objects), a good part of a changed source's ingest (docs/BENCHMARKS.md, "Figures behind
    the code's choices"). One collection runs first (the garbage's finalizers run, as at any exit),
    then every live object is frozen, which the interpreter's own collections skip. Not in `main`,
    which tests and notebooks call: a frozen object is never collected in a process that goes on."""
    code = main()
    gc.collect()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    entry()
