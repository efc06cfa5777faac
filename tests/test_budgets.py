"""Budgets that warn: `[[budgets]]` in config.toml, `report --budgets` (exit 3 when one is
exceeded) and the Dagster check on `daily_costs`, all from one computation."""

import calendar
import json
from datetime import date, datetime, timezone
from decimal import ROUND_HALF_UP, Decimal

import dagster as dg
import pytest

from pipelines.central import TeamLake, team_warehouse, within_budgets
from pipelines.defs.resources import AgentlakeResource
from pipelines.defs.warehouse.assets import tables_and_marts
from tests.conftest import Project, assistant, copy_home, ingest, query, run_cli
from tests.support_dagster import agentlake_instance
from transforms.synth.crush import add_session
from warehouse.lake.config import Budget, ConfigError, load_config
from warehouse.lake.ducklake import connect
from warehouse.lake.layout import Layout
from warehouse.serve.budgets import OK, OVER, PROJECTED_OVER, budget_statuses, unknown_scopes


def _config(tmp_path, text: str):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_config(path)


# -- config.toml --------------------------------------------------------------------------------

def test_budgets_are_read_with_their_scopes(tmp_path):
    config = _config(tmp_path, '[[budgets]]\nmonthly_usd = 500\n\n[[budgets]]\nmonthly_usd = 99.5\nuser = "ana"\n\n'
                               '[[budgets]]\nmonthly_usd = 40\nproject = "shop"\n\n[[budgets]]\nmonthly_usd = 7\n'
                               'agent = "claude"\n')
    assert config.budgets == (Budget(Decimal("500")), Budget(Decimal("99.5"), "user", "ana"),
                               Budget(Decimal("40"), "project", "shop"), Budget(Decimal("7"), "agent", "claude"))
    assert [b.name for b in config.budgets] == ["team", "user ana", "project shop", "agent claude"]
    assert _config(tmp_path, 'user = "ana"\n').budgets == ()


@pytest.mark.parametrize("text, said", [
    ("[[budgets]]\nuser = 'ana'\n", "budget 1: monthly_usd must be an amount in USD above 0"),
    ("[[budgets]]\nmonthly_usd = 0\n", "budget 1: monthly_usd must be an amount in USD above 0"),
    ("[[budgets]]\nmonthly_usd = '500'\n", "budget 1: monthly_usd must be an amount in USD above 0 (e.g. 500 or "
     "99.5), a number without quotes: it is the string '500'"),
    ("[[budgets]]\nmonthly_usd = true\n", "budget 1: monthly_usd must be an amount in USD above 0"),
    ("[[budgets]]\nmonthly_usd = 5\nuser = 'a'\nagent = 'b'\n", "budget 1: one scope at most, not user and agent: a "
     "budget is for one project, user or agent, or for the team with none"),
    ("[[budgets]]\nmonthly_usd = 5\nteam = 'x'\n", "budget 1: unknown setting 'team'; known: monthly_usd, project"),
    # a setting of the whole file below a budget: TOML reads it as the budget's (a trial)
    ("[[budgets]]\nmonthly_usd = 5\ntz = 'Europe/Berlin'\n", "budget 1: unknown setting 'tz'; known: monthly_usd, "
     "project, user, agent (tz is a setting of the whole file: put it above the first [section] or [[...]]; below "
     "one, TOML reads it as that one's)"),
    ("[[budgets]]\nmonthly_usd = 5\nmachin = 'x'\n", "known: monthly_usd, project, user, agent (machine is a setting"),
    ("[[budgets]]\nmonthly_usd = 5\nuser = ''\n", "budget 1: user must be a name"),
    ("[[budgets]]\nmonthly_usd = 5\n[[budgets]]\nmonthly_usd = 6\n", "budget 2: a second budget for the team"),
    # one name as typed twice: the table showed two rows for one user, the chart drew the first (a review)
    ("[[budgets]]\nmonthly_usd = 5\nuser = 'dev'\n[[budgets]]\nmonthly_usd = 6\nuser = 'DEV'\n",
     "budget 2: a second budget for the user DEV (user dev, as an ingest stores it)"),
    ("[[budgets]]\nmonthly_usd = 5\nproject = 'Acme/Shop'\n[[budgets]]\nmonthly_usd = 6\nproject = 'acme-shop'\n",
     "budget 2: a second budget for the project acme-shop"),
    ("budgets = 5\n", "budgets are [[budgets]] tables (double brackets: one per budget), each with monthly_usd"),
    ("[budgets]\nmonthly_usd = 500\n", "budgets are [[budgets]] tables (double brackets: one per budget)"),
])
def test_a_bad_budget_is_a_config_error_naming_it(tmp_path, text, said):
    with pytest.raises(ConfigError, match=None) as exc:
        _config(tmp_path, text)
    assert said in str(exc.value)


# -- the computation, on the known-totals lake (2026-01-01 to 01-07) ---------------------------

def test_spend_share_and_projection_of_each_scope(lake):
    today = date(2026, 1, 15)
    month_cost = {scope: Decimal(query(lake, f"SELECT COALESCE(SUM(cost_usd), 0) FROM daily_costs WHERE {where}")[0][0])
                  for scope, where in (("team", "true"), ("user dev", "\"user\" = 'dev'"),
                                       ("agent codewhale", "provider = 'codewhale'"), ("project shop", "project = 'shop'"))}
    assert month_cost["team"] > month_cost["agent codewhale"] > 0
    team = month_cost["team"]
    budgets = (Budget(team * 3),  # spends a third; at this pace 31/15 of it: ok
               Budget(month_cost["user dev"] * 2, "user", "dev"),  # 31/15 > 2: projected over
               Budget(month_cost["agent codewhale"] / 2, "agent", "codewhale"),  # over
               Budget(team, "project", "shop"))  # exactly spent: not over, projected over
    with connect(lake.warehouse, ours=True) as con:
        statuses = budget_statuses(con, budgets, today)
        assert unknown_scopes(con, budgets) == []
        assert unknown_scopes(con, (Budget(Decimal(1), "user", "deb"),)) == [
            "budget user deb: no user 'deb' in the warehouse; close ones: dev"]
    by_name = {s.budget.name: s for s in statuses}
    for name, cost in month_cost.items():
        s = by_name[name]
        assert s.spent_usd == cost and s.month == date(2026, 1, 1)
        assert s.projected_usd == (cost * 31 / 15).quantize(Decimal("0.000000001"), ROUND_HALF_UP)
        assert s.share_used == (cost / s.budget.monthly_usd).quantize(Decimal("0.0001"), ROUND_HALF_UP)
    assert [by_name[n].status for n in month_cost] == [OK, PROJECTED_OVER, OVER, PROJECTED_OVER]
    # the report's own count of root sessions of unknown cost (cw-unknown), the same way
    assert by_name["team"].unknown_cost_sessions == query(
        lake, "SELECT COUNT(*) FROM sessions WHERE is_root AND cost_source = 'unknown'")[0][0] == 1
    # February holds nothing: nothing spent, nothing projected
    with connect(lake.warehouse, ours=True) as con:
        (feb,) = budget_statuses(con, (Budget(Decimal(1)),), date(2026, 2, 10))
    assert (feb.spent_usd, feb.projected_usd, feb.status) == (0, 0, OK)


# -- the CLI and Dagster, on a lake that spends this month --------------------------------------

SPENT = Decimal("2.5")


def _this_month(root):
    """One root session of $2.50 started now (UTC), so that this month has spent it."""
    layout = Layout.resolve(home=root / "home", machine="laptop", user="dev")
    now = int(datetime.now(timezone.utc).timestamp())
    p = Project(root / "projects", "shop")
    add_session(p.conn, "now", title="today", created_at=now, cost=float(SPENT))
    assistant(p.conn, "a1", "now", now)
    p.close()
    ingest(layout, p.db)
    return layout, p.db


@pytest.fixture
def spending(layout, built_once):
    template, db = built_once("this-month", _this_month, workers=True)
    copy_home(template.home, layout.home)
    return layout, db


def _budgets(layout, *lines):
    layout.config_file.write_text("\n".join(lines) + "\n")


def test_report_budgets_exits_3_when_one_is_exceeded(spending):
    layout, _ = spending
    today = datetime.now(timezone.utc).date()
    days = calendar.monthrange(today.year, today.month)[1]
    _budgets(layout, "[[budgets]]", "monthly_usd = 1000", "[[budgets]]", "monthly_usd = 2", 'user = "dev"')
    ran = run_cli("report", "--home", layout.home, "--budgets", "--format", "json")
    assert ran.returncode == 3 and "over budget: user dev" in ran.stderr
    team, dev = json.loads(ran.stdout)["budgets"]
    assert (team["budget"], team["spent_usd"], team["status"]) == ("team", 2.5, OK if SPENT * days / today.day <= 1000
                                                                   else PROJECTED_OVER)
    assert (dev["budget"], dev["monthly_usd"], dev["spent_usd"], dev["share_used"], dev["status"]) == (
        "user dev", 2, 2.5, 1.25, OVER)
    assert Decimal(str(dev["projected_usd"])) == (SPENT * days / today.day).quantize(Decimal("0.000000001"))
    # whose month each row is: only the table's title said it (a new user's trial)
    assert {(b["month"], b["zone"]) for b in (team, dev)} == {(f"{today:%Y-%m}", "UTC")}
    table = run_cli("report", "--home", layout.home, "--budgets")
    assert table.returncode == 3 and f"Budgets, {today:%B %Y} to {today} (UTC)" in table.stdout
    # the share used with its four decimals whatever the rows: alone, half of the budget was `0.5`
    _budgets(layout, "[[budgets]]", "monthly_usd = 5", 'user = "dev"')
    half = run_cli("report", "--home", layout.home, "--budgets")
    [row] = [line.split() for line in half.stdout.splitlines() if line.startswith("user dev")]
    assert row[2:5] == ["5.0000", "2.5000", "0.5000"], half.stdout
    _budgets(layout, "[[budgets]]", f"monthly_usd = {days * 3}")  # $3 a day: 2.5 spent is within, whatever the day
    ok = run_cli("report", "--home", layout.home, "--budgets", "--format", "csv")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[0] == ("budget,monthly_usd,spent_usd,share_used,projected_usd,status,"
                                         "unknown_cost_sessions,partial_cost_sessions,month,zone")


@pytest.mark.parametrize("args, said", [
    ([], "no budgets in "),
    (["--by", "day"], "give it without --by"),
    (["--week", "--agent", "crush"], "give it without --week, --agent"),
    (["--top", "0"], "give it without --top"),
    (["--user", "dev", "--machine", "laptop"], "give it without --user, --machine"),  # a budget names its own scope
])
def test_report_budgets_says_what_it_wants(spending, args, said):
    layout, _ = spending
    if args:
        _budgets(layout, "[[budgets]]", "monthly_usd = 5")
    ran = run_cli("report", "--home", layout.home, "--budgets", *args)
    assert ran.returncode == 2 and said in ran.stderr


def test_a_user_or_machine_given_as_typed_finds_the_name_an_ingest_stored(spending, tmp_path):
    """An ingest stores `--user Ana.Smith` as `ana-smith` (names are slugs). `report --user
    Ana.Smith` then said there was no such user, and a budget for `Ana.Smith` spent nothing with
    only a note (a trial): both take the name as the ingest stored it. The ingest says so."""
    layout, _ = spending
    _budgets(layout, "[[budgets]]", "monthly_usd = 2", 'user = "DEV"')
    ran = run_cli("report", "--home", layout.home, "--budgets", "--format", "json")
    assert ran.returncode == 3 and "over budget: user DEV" in ran.stderr and "no user" not in ran.stderr, ran.stderr
    assert json.loads(ran.stdout)["budgets"][0]["spent_usd"] == float(SPENT)
    ran = run_cli("report", "--home", layout.home, "--user", "Dev", "--machine", "LAPTOP", "--format", "json")
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
    assert json.loads(ran.stdout)["totals"][0]["cost_usd"] == float(SPENT)

    p = Project(tmp_path / "projects", "web")
    add_session(p.conn, "s", title="t", created_at=1767225600, cost=0.5)
    p.close()
    home = tmp_path / "ana"
    ran = run_cli("ingest", "--home", home, "--no-default", "--db", p.db, "--user", "Ana.Smith", "--machine",
                  "Ana's MacBook")
    assert ran.returncode == 0, ran.stderr
    assert ("note: --user 'Ana.Smith' is stored as 'ana-smith', and --machine \"Ana's MacBook\" as 'ana-s-macbook' "
            "(names are kept in lower case letters, digits and dashes; filters and budgets take either)") in ran.stderr
    assert query(Layout.resolve(home=home), 'SELECT DISTINCT "user", machine FROM sessions') == [("ana-smith",
                                                                                                 "ana-s-macbook")]


def test_a_project_given_as_typed_finds_the_name_an_ingest_stored(spending):
    """Projects are stored as slugs too (`acme/myapp` and `Acme-MyApp` are `acme-myapp`): `--project
    acme/myapp` said there was no such project, and a budget for it spent nothing (a trial)."""
    from warehouse.lake.layout import stored_project

    assert [stored_project(n) for n in ("acme/myapp", "Acme-MyApp", "acme-myapp", "---")] == [
        "acme-myapp", "acme-myapp", "acme-myapp", "---"]
    _a_budget_and_a_filter_find_it(spending[0], "project", "Shop", "SHOP/")


def _a_budget_and_a_filter_find_it(layout, scope: str, in_budget: str, in_flag: str) -> None:
    """A budget for `scope` named `in_budget` spends this month's all, and `--scope in_flag` shows it."""
    _budgets(layout, "[[budgets]]", "monthly_usd = 2", f'{scope} = "{in_budget}"')
    ran = run_cli("report", "--home", layout.home, "--budgets", "--format", "json")
    assert ran.returncode == 3 and f"no {scope}" not in ran.stderr, ran.stderr
    assert json.loads(ran.stdout)["budgets"][0]["spent_usd"] == float(SPENT)
    ran = run_cli("report", "--home", layout.home, f"--{scope}", in_flag, "--format", "json")
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
    assert json.loads(ran.stdout)["totals"][0]["cost_usd"] == float(SPENT)


def test_a_month_without_a_session_is_said_not_shown_as_budgets_at_zero(lake):
    """On the demo (January to March) in December every budget read 0.0000, ok, with no word
    (a trial): `report --month` said the days the sessions are on, `--budgets` did not."""
    lake.config_file.write_text("[[budgets]]\nmonthly_usd = 5\n")
    ran = run_cli("report", "--home", lake.home, "--budgets")
    today = datetime.now(timezone.utc).date()
    [(first, last)] = query(lake, "SELECT MIN(date), MAX(date) FROM sessions")
    assert last < today.replace(day=1)
    assert ran.returncode == 0 and (f"note: no session from {today.replace(day=1)} to {today}; the sessions are "
                                    f"from {first} to {last}\n") in ran.stderr, ran.stderr


def test_the_dagster_check_warns_when_a_budget_is_exceeded_or_projected_to_be(spending):
    layout, db = spending
    # prices changed since the last merge too: the asset's log says the history was priced again (a review)
    _budgets(layout, "[[budgets]]", "monthly_usd = 1", "[[budgets]]", "monthly_usd = 100000", 'project = "shop"',
             "[[prices]]", 'model = "m"', "input = 1", "output = 2")
    resource = AgentlakeResource(home=str(layout.home), extra_stores={"crush": [str(db)]}, use_default=False)
    with agentlake_instance() as instance:
        result = dg.materialize([tables_and_marts], instance=instance, resources={"agentlake": resource})
        logged = [e.user_message for e in instance.all_logs(result.run_id)]
    assert result.success  # a warning, not a failed run
    assert f"the prices in {layout.config_file} changed: the history was priced again with them" in logged
    (check,) = [c for c in result.get_asset_check_evaluations() if c.check_name == "within_budgets"]
    assert check.asset_key == dg.AssetKey(["daily_costs"]) and not check.passed
    assert check.severity == dg.AssetCheckSeverity.WARN
    assert check.description.startswith("team: over (spent $2.50 of $1.00")
    assert check.metadata["project shop"].value["status"] == OK


def test_the_centers_check_reads_the_centers_budgets(spending):
    """The center's code location (pipelines.central) checks the same budgets on its rebuild of
    the team warehouse, from its own config.toml."""
    layout, _ = spending
    _budgets(layout, "[[budgets]]", "monthly_usd = 2", 'user = "dev"', "[[budgets]]", "monthly_usd = 1", 'agent = "codex"')
    with agentlake_instance() as instance:
        result = dg.materialize([team_warehouse, within_budgets], instance=instance,
                                resources={"team_lake": TeamLake(home=str(layout.home))})
    assert result.success
    (check,) = result.get_asset_check_evaluations()
    assert (check.check_name, check.passed, check.severity) == ("within_budgets", False, dg.AssetCheckSeverity.WARN)
    assert check.description.startswith("user dev: over (spent $2.50 of $2.00")
    assert check.metadata["agent codex"].value["spent_usd"] == 0  # a Crush-only lake: nothing spent by Codex
    # a budget for an agent the warehouse never saw is said (a typo would pass at $0 forever)
    assert "; budget agent codex: no agent 'codex' in the warehouse" in check.description


def test_dagster_checks_the_budgets_report_reads_while_the_quickstart_demo_stands_in(built_once, tmp_path):
    """After a quickstart demo, `agentlake dev` runs on `<home>/demo`, and its within_budgets
    check read `<home>/demo/config.toml` while `report --budgets` reads `<home>/config.toml`, where
    the README says budgets go: set in one, each said the other had none."""
    from tests.support_homes import copy_demo_home, small_demo_home

    home = tmp_path / "home"
    demo = copy_demo_home(small_demo_home(built_once).home, home / "demo")
    (home / "config.toml").write_text('[[budgets]]\nmonthly_usd = 5\nproject = "webshopp"\n')
    report = run_cli("report", "--budgets", env={"AGENTLAKE_HOME": home})
    assert "budget project webshopp: no project 'webshopp' in the warehouse" in report.stderr, report.stderr
    resource = AgentlakeResource(home=str(demo))
    with agentlake_instance() as instance:
        result = dg.materialize([tables_and_marts], instance=instance, resources={"agentlake": resource})
    (check,) = [c for c in result.get_asset_check_evaluations() if c.check_name == "within_budgets"]
    assert "budget project webshopp: no project 'webshopp' in the warehouse" in check.description, check.description


def test_an_agent_in_capitals_finds_the_agent(spending):
    """An analyst's trial: `--agent Claude` was refused on every surface, where a project, user or
    machine as typed was found. Agents' names are lower case: a budget, a filter and the
    dashboard's `?agent=` take one in any case."""
    from warehouse.serve.dashboard.request import parse_request

    _a_budget_and_a_filter_find_it(spending[0], "agent", "Crush", "CRUSH")
    req = parse_request("agent=Crush", ["shop"], ["crush"])
    assert req.filters.provider == "crush" and not req.errors
