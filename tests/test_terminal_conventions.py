"""The conventions terminal users know from ccusage, tokscale and codeburn: a version, relative
windows, week and month grain, a total under each breakdown, one name (`agent`) for the agent
filter, `sql -f FILE` and a query on standard input, and "did you mean" for a mistyped command."""

import io
import json
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from importlib.metadata import version

import pytest

from tests.conftest import run_cli
from warehouse.lake.ducklake import connect
from warehouse.serve.report import Filters, build
from warehouse.serve.report_options import BREAKDOWNS, BadWindow, last_days, relative_days


def _json(lake, *args):
    ran = run_cli("report", "--home", lake.home, "--format", "json", *args)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout), ran.stderr


# -- --version, did you mean, the list of commands --------------------------------------------

@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_installed_version(flag):
    ran = run_cli(flag)
    assert (ran.returncode, ran.stdout) == (0, f"agentlake {version('agentlake')}\n")


def test_a_mistyped_command_is_answered_with_the_closest_one():
    ran = run_cli("reprot")
    assert ran.returncode == 2
    assert "unknown command 'reprot': did you mean `report`?" in ran.stderr
    listed = ran.stderr.split("(the commands: ")[1]
    assert "merge" in listed and "views" not in listed  # the legacy name is not offered
    # the README's "insights" is an option of report, not a command (a new user's trial)
    for word, meant in (("insights", "report --insights"), ("budgets", "report --budgets"),
                        ("export", "report --format csv --output DIR` or `serving")):
        option = run_cli(word)
        assert option.returncode == 2 and f"unknown command {word!r}: did you mean `{meant}`?" in option.stderr
    far = run_cli("zzzzzz")
    assert far.returncode == 2 and "unknown command 'zzzzzz' (the commands: quickstart" in far.stderr


def test_an_option_before_the_command_is_said_with_the_command_as_meant(tmp_path):
    """`agentlake --home H report` said "unknown command 'H'", and `--format json report`
    "unknown command 'json'" (a trial): argparse took the option's value for the command."""
    home = tmp_path / "my home"
    ran = run_cli("--home", home, "report", "--week")
    assert ran.returncode == 2 and ran.stderr.endswith(
        f"error: --home is an option of the command: it goes after it, `agentlake report --home '{home}' --week`\n"), \
        ran.stderr
    ran = run_cli("--format", "json", "report")
    assert ran.returncode == 2 and "`agentlake report --format json`" in ran.stderr and "unknown command" not in ran.stderr
    assert "unknown command 'zzz'" in run_cli("--quiet", "zzz").stderr  # no command named: as before
    ran = run_cli("--home", "demo", "report")  # an option's value that is a command's name too (a review)
    assert ran.returncode == 2 and "`agentlake report --home demo`" in ran.stderr, ran.stderr


def test_a_person_flag_and_a_negative_window_are_answered_with_the_flags_meant():
    """A team lead's `report --person ana` got no hint, and `--last -3d` "expected one argument"
    (a trial): --person is --user, and --last counts back from today."""
    ran = run_cli("report", "--person", "ana")
    assert ran.returncode == 2 and "unrecognized arguments: --person ana (did you mean --user?)" in ran.stderr
    ran = run_cli("report", "--last", "-3d")
    assert ran.returncode == 2 and ran.stderr.rstrip().endswith(
        "argument --last: expected one argument (a number of days, weeks or months back from today: --last 7d, "
        "--last 2w, --last 3m)"), ran.stderr


def test_the_list_of_commands_does_not_show_the_legacy_alias():
    ran = run_cli("--help")
    assert ran.returncode == 0 and "\n    merge  " in ran.stdout and "views" not in ran.stdout
    assert "-V, --version" in ran.stdout


# -- the agent filter: one name ---------------------------------------------------------------

def test_report_agent_is_the_filter_and_provider_still_works(lake):
    by_agent, _ = _json(lake, "--agent", "codewhale", "--by", "agent")
    by_provider, _ = _json(lake, "--provider", "codewhale", "--by", "agent")
    assert by_agent == by_provider
    assert [r["provider"] for r in by_agent["by_agent"]] == ["codewhale"]
    assert by_agent["totals"][0]["root_sessions"] == 3  # cw-native, cw-estimated, cw-unknown
    both = run_cli("report", "--home", lake.home, "--agent", "codewhale", "--provider", "crush")
    assert both.returncode == 2 and "--agent codewhale and --provider crush name different agents" in both.stderr
    # the one agent in two cases is one agent; search refuses two as report does (a review)
    same, _ = _json(lake, "--agent", "CodeWhale", "--provider", "codewhale", "--by", "agent")
    assert same == by_agent
    both = run_cli("search", "--home", lake.home, "cost", "--agent", "codewhale", "--provider", "crush")
    assert both.returncode == 2 and "--agent codewhale and --provider crush name different agents" in both.stderr
    wrong = run_cli("report", "--home", lake.home, "--agent", "codewhal")
    assert wrong.returncode == 2 and "no agent 'codewhal' in the warehouse; close ones: codewhale" in wrong.stderr
    helped = run_cli("report", "--help").stdout
    assert "--agent AGENT" in helped and "--provider" not in helped


# -- week and month grain, and the total row ---------------------------------------------------

def test_by_week_and_month_add_up_the_days_of_each_period(lake):
    days, _ = _json(lake, "--by", "day")
    for grain, start in (("week", lambda d: d - timedelta(days=d.weekday())), ("month", lambda d: d.replace(day=1))):
        got, _ = _json(lake, "--by", grain)
        expected: dict[str, dict] = {}
        for row in days["by_day"]:
            period = expected.setdefault(start(date.fromisoformat(row["date"])).isoformat(),
                                         {"cost_usd": Decimal(0), "root_sessions": 0, "messages": 0, "tool_calls": 0})
            for k in period:
                period[k] += Decimal(str(row[k])) if k == "cost_usd" else row[k]
        rows = {r[grain]: {k: Decimal(str(r[k])) if k == "cost_usd" else r[k] for k in expected[r[grain]]}
                for r in got[f"by_{grain}"]}
        assert rows == expected, grain
        assert got["totals"] == days["totals"]
    # the known-totals lake: 2026-01-01 (a Thursday) to 01-07 spans two ISO weeks, one month
    assert [r["week"] for r in _json(lake, "--by", "week")[0]["by_week"]] == ["2025-12-29", "2026-01-05"]
    assert [r["month"] for r in _json(lake, "--by", "month")[0]["by_month"]] == ["2026-01-01"]


@pytest.mark.parametrize("by", BREAKDOWNS)
def test_the_total_row_of_each_breakdown_is_the_reports_totals(lake, by):
    with connect(lake.warehouse, ours=True) as con:
        sections = {s.name: s for s in build(con, Filters(), by=by, top=1)}  # a cut ranking: totals are of all
    totals = dict(zip(sections["totals"].columns, sections["totals"].rows[0]))
    main = sections[f"by_{by}"]
    total = dict(zip(main.columns, main.total))
    assert main.total[0] == "total"
    if by in ("tool", "category"):
        assert (total["calls"], total["errors"], total["nonzero_exits"]) == (
            totals["tool_calls"], totals["tool_errors"], totals["nonzero_exits"])
        assert total["error_rate"] == round(totals["tool_errors"] / totals["tool_calls"], 3)
        return
    assert total["cost_usd"] == totals["cost_usd"] and totals["cost_usd"] > 0
    for measure in ("root_sessions", "messages", "tool_calls"):
        if measure in total:
            assert total[measure] == totals[measure], measure


def test_the_table_ends_each_breakdown_with_its_total_under_a_rule(lake):
    ran = run_cli("report", "--home", lake.home, "--by", "tool", "--top", "1")
    assert ran.returncode == 0, ran.stderr
    block = ran.stdout.split("Cost and use by tool\n")[1].split("\n\n")[0].splitlines()
    header, rule, first, rule_again, total, count = block[:6]
    assert rule == rule_again and set(rule) == {"-", " "}
    # every tool call (two bash, two edit, one write), not the one row shown: e1 failed, b2 exited 1
    assert total.split() == ["total", "5", "1", "0.200", "1"]  # a rate with its 3 decimals
    assert count == "(1 row)"
    csv_out = run_cli("report", "--home", lake.home, "--by", "tool", "--format", "csv").stdout
    assert "total" not in csv_out  # CSV and JSON hold the rows; the totals are their own section


def test_a_total_row_leaves_empty_what_it_does_not_sum(lake):
    """Under `--by model` the total row sums cost, messages and tokens; its models and agents
    columns are empty, not a model's label ("no model recorded") under every row's names."""
    ran = run_cli("report", "--home", lake.home, "--by", "model")
    assert ran.returncode == 0, ran.stderr
    block = ran.stdout.split("Cost and use by model\n")[1].split("\n\n")[0].splitlines()
    total = next(line for line in block if line.startswith("total "))
    assert "no model recorded" not in total and "sonnet" not in total and "crush" not in total
    word, *figures = total.split()  # the known-totals lake's: a cost and its messages (Crush records no tokens)
    assert word == "total" and figures and all(f.replace(".", "").replace(",", "").isdigit() for f in figures)


def test_by_category_groups_each_agents_names_of_a_tool(lake):
    """bash, Bash and Shell are one kind of tool: `--by category` gives it one row, the agents'
    own names listed, its counts the sum of theirs."""
    tools, _ = _json(lake, "--by", "tool", "--top", "0")
    grouped, _ = _json(lake, "--by", "category", "--top", "0")
    expected: dict[str, dict] = {}
    for row in tools["by_tool"]:
        kind = expected.setdefault(row["tool_category"], {"names": set(), "calls": 0, "errors": 0, "nonzero_exits": 0})
        kind["names"].add(row["tool_name"])
        for k in ("calls", "errors", "nonzero_exits"):
            kind[k] += row[k]
    got = {r["tool_category"]: {"names": set(r["tool_names"].split(", ")), "calls": r["calls"], "errors": r["errors"],
                                "nonzero_exits": r["nonzero_exits"]} for r in grouped["by_category"]}
    assert got == expected and got["shell"]["names"] == {"bash"}
    assert (got["edit"]["calls"], got["write"]["calls"]) == (2, 1)  # e1, e2; w1 is a write
    failing = {r["tool_name"]: r["failed"] for r in tools["failing_tools"]}
    assert {r["tool_category"]: r["failed"] for r in grouped["by_category"] if r["failed"]} == {
        "shell": failing["bash"], "edit": failing["edit"]}


# -- relative windows --------------------------------------------------------------------------

def test_relative_windows_name_their_days():
    today = date(2026, 3, 31)
    assert relative_days("today", today) == (today, today)
    assert relative_days("yesterday", today) == (date(2026, 3, 30),) * 2
    assert relative_days("week", today) == (date(2026, 3, 25), today)
    assert relative_days("month", today) == (date(2026, 3, 1), today)
    assert last_days("1d", today) == (today, today)
    assert last_days("7d", today) == relative_days("week", today)
    assert last_days("2w", today) == (date(2026, 3, 18), today)
    assert last_days("1m", today) == (date(2026, 3, 1), today)  # 28 February, the day after
    assert last_days("1m", date(2024, 3, 31)) == (date(2024, 3, 1), date(2024, 3, 31))  # leap: 29 Feb + 1
    assert last_days("3m", date(2026, 1, 15)) == (date(2025, 10, 16), date(2026, 1, 15))
    for bad in ("7", "d", "0d", "-1d", "7y", "7 days", ""):
        with pytest.raises(BadWindow) as raised:
            last_days(bad, today)
        # a zero is said as such, not as a form it has (a new user's trial)
        assert str(raised.value).startswith("--last counts from 1" if bad == "0d" else "--last wants a number")
    # a long window is a window; one past the calendar's start says so, not that the form is wrong
    # (a new user's trial: `100000d` was told it wants a number and d, w or m)
    assert last_days("100000d", today) == (today - timedelta(days=99999), today)
    assert last_days("0007d", today) == last_days("7d", today)
    with pytest.raises(BadWindow, match="^--last counts from 1"):
        last_days("00d", today)
    for far in ("1000000d", "200000w", "99999999999w", "30000m", "9" * 5000 + "d"):
        with pytest.raises(BadWindow, match=r"^--last \d+[dwm] reaches before year 1$"):
            last_days(far, today)


@pytest.mark.parametrize("flags, days", [
    (["--today"], (0, 0)), (["--yesterday"], (1, 1)), (["--week"], (6, 0)), (["--last", "30d"], (29, 0)),
    (["--last", "2w"], (13, 0)),
])
def test_a_relative_window_reports_as_its_dates_do(lake, flags, days):
    for _ in range(2):  # once more if UTC midnight passed between the test's today and the command's
        today = datetime.now(timezone.utc).date()
        relative, said = _json(lake, *flags)
        if datetime.now(timezone.utc).date() == today:
            break
    since, until = (today - timedelta(days=n) for n in days)
    explicit, _ = _json(lake, "--since", since.isoformat(), "--until", until.isoformat())
    assert relative == explicit
    assert f"note: {' '.join(flags)}: {since} to {until} (UTC days)" in said


def test_a_window_reaching_the_data_counts_it(lake):
    """The known-totals lake is of 2026-01-01 to 01-07: a long enough window holds all of it."""
    days = (datetime.now(timezone.utc).date() - date(2026, 1, 1)).days + 1
    everything, _ = _json(lake)
    window, _ = _json(lake, "--last", f"{days}d")
    assert window["totals"] == everything["totals"] and window["totals"][0]["root_sessions"] == 3 + 3


@pytest.mark.parametrize("flags, said", [
    (["--week", "--since", "2026-01-01"], "--week names its own days: give it without --since and --until"),
    (["--last", "3x"], "--last wants a number and d, w or m (7d, 2w, 3m): '3x'"),
    (["--today", "--month"], "argument --month: not allowed with argument --today"),
])
def test_a_window_given_twice_or_badly_is_a_usage_error(lake, flags, said):
    ran = run_cli("report", "--home", lake.home, *flags)
    assert ran.returncode == 2 and said in ran.stderr


# -- sql: a file, standard input, and what its arguments are -----------------------------------

QUERY = "SELECT COUNT(*) AS n FROM sessions WHERE is_root"


def test_sql_reads_the_query_from_a_file_or_standard_input(lake, tmp_path, monkeypatch):
    expected = run_cli("sql", "--home", lake.home, QUERY, "--format", "json")
    assert expected.returncode == 0 and json.loads(expected.stdout) == [{"n": 6}]
    query_file = tmp_path / "q.sql"
    query_file.write_text(f"-- root sessions\n{QUERY};\n")
    assert run_cli("sql", "--home", lake.home, "-f", query_file, "--format", "json").stdout == expected.stdout
    for args in ([], ["-"], ["-f", "-"]):
        monkeypatch.setattr("sys.stdin", io.StringIO(QUERY))
        assert run_cli("sql", "--home", lake.home, *args, "--format", "json").stdout == expected.stdout, args


def test_sql_names_standard_input_when_what_it_read_there_is_no_query(lake, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # a cron job's closed input
    empty = run_cli("sql", "--home", lake.home)
    assert empty.returncode == 2 and "empty query on standard input" in empty.stderr
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"SELECT 1 \xff"), encoding="utf-8"))
    binary = run_cli("sql", "--home", lake.home)
    assert binary.returncode == 2 and "the query on standard input is not UTF-8 text" in binary.stderr
    assert "is not UTF-8 text" in run_cli("sql", "--home", lake.home, "SELECT 1 \udcff").stderr  # argv's bad byte


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_sql_without_a_query_or_with_two_says_what_it_wants(lake, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stdin", _Terminal())
    none = run_cli("sql", "--home", lake.home)
    assert none.returncode == 2 and "no query: give one SQL statement" in none.stderr and "-f FILE" in none.stderr
    (tmp_path / "q.sql").write_text(QUERY)
    both = run_cli("sql", "--home", lake.home, QUERY, "-f", tmp_path / "q.sql")
    assert both.returncode == 2 and "give the query once" in both.stderr
    missing = run_cli("sql", "--home", lake.home, "-f", tmp_path / "nope.sql")
    assert missing.returncode == 2 and f"cannot read the query from {tmp_path / 'nope.sql'}" in missing.stderr
    helped = run_cli("sql", "--help").stdout
    assert "the query: one SQL statement" in helped and "standard input" in helped and "json (a list of objects)" in helped
