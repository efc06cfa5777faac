"""`agentlake report` on the marts fixture: the same numbers as tables, JSON and CSV."""

import json
import re
from datetime import datetime, timedelta, timezone

from pipelines.cli import main
from tests.conftest import query, scalar


def _report(lake, capsys, *args):
    assert main(["report", "--home", str(lake.home), *args]) == 0
    return capsys.readouterr().out


def test_json_totals_and_filters(lake, capsys):
    data = json.loads(_report(lake, capsys, "--provider", "crush", "--format", "json"))
    assert data["totals"][0]["cost_usd"] == 1.3
    assert data["totals"][0]["root_sessions"] == 3
    assert data["totals"][0]["tool_calls"] == 5
    assert [r["project"] for r in data["by_project"]] == ["shop"]
    window = json.loads(_report(lake, capsys, "--provider", "crush", "--since", "2026-01-03",
                                "--until", "2026-01-05", "--by", "day", "--format", "json"))
    assert [(r["date"], r["cost_usd"]) for r in window["by_day"]] == [
        ("2026-01-03", 0.033333333), ("2026-01-04", 0.033333333), ("2026-01-05", 0.033333334)]  # exact: they add up
    assert window["totals"][0]["cost_usd"] == 0.1


def test_unknown_costs_are_counted_not_zeroed(lake, capsys):
    data = json.loads(_report(lake, capsys, "--provider", "codewhale", "--by", "model", "--format", "json"))
    glm = [r for r in data["by_model"] if r["model_name"] == "glm-4.6"]
    assert glm == [{"model_name": "glm-4.6", "cost_usd": None, "assistant_messages": 1, "tokens": None,
                    "models": "glm-4.6", "agents": "codewhale", "cost_source": "unknown"}]
    # root sessions, as the totals count them, whose cost is unknown: cw-unknown's
    unknown = scalar(lake, "SELECT COUNT(*) FROM sessions WHERE is_root AND provider = 'codewhale' "
                           "AND cost_source = 'unknown'")
    assert data["totals"][0]["root_sessions_with_unknown_cost"] == unknown > 0


def test_tables_and_csv(lake, capsys):
    text = _report(lake, capsys, "--by", "tool")
    assert text.startswith("Totals\n") and "Cost and use by tool" in text and "Failing tools" in text
    # a rate has its three decimals in every section (a trial saw `1` in one, `1.0` in another)
    for by in ("tool", "category"):
        shown = text if by == "tool" else _report(lake, capsys, "--by", by)
        tools = [line for line in shown.splitlines() if line.split()[:1] in (["bash"], ["edit"], ["write"], ["shell"])]
        assert tools and {len(d) for line in tools for d in re.findall(r"\.(\d+)\b", line)} == {3}, tools
    lines = _report(lake, capsys, "--by", "tool", "--format", "csv", "--section", "failing_tools").splitlines()
    assert lines[0] == "tool_name,calls,errors,nonzero_exits,failed,failure_rate"
    assert "bash,2,0,1,1,0.5" in lines
    assert "edit,2,1,0,1,0.5" in lines


def test_bad_date_is_a_usage_error(lake, capsys):
    import pytest

    # 20261201 and the ISO week 2026-W49 were taken (Python's fromisoformat), the week as its Monday
    # without a word (a new user's trial): a day is YYYY-MM-DD
    for day in ("yesterday", "20261201", "2026-W49", "2026-W49-3"):
        with pytest.raises(SystemExit) as exc:
            main(["report", "--home", str(lake.home), "--since", day])
        assert exc.value.code == 2
        assert f"not a date (YYYY-MM-DD): {day!r}" in capsys.readouterr().err


def test_a_window_that_ends_before_it_starts_is_a_usage_error(lake, capsys):
    assert main(["report", "--home", str(lake.home), "--since", "2026-02-01", "--until", "2026-01-01"]) == 2
    assert "--since 2026-02-01 is after --until 2026-01-01" in capsys.readouterr().err


def test_insights_top_findings_with_their_sql(lake, capsys):
    """`--insights` on the marts fixture: R (1.0, sub-agent 0.3) edited a.py; the CodeWhale
    sessions changed no file; R's call `call-sub` has no tool row, so its sub-agent is 'sub-agent'."""
    text = _report(lake, capsys, "--insights")
    assert text.startswith("Duplicate reads") and text.count("\nSQL: SELECT ") == 9
    data = json.loads(_report(lake, capsys, "--insights", "--provider", "crush", "--format", "json"))
    assert data["insight_subagent_share"] == [{"agent_kind": "sub-agent", "root_sessions": 1, "subagents": 1,
                                               "subagent_cost_usd": 0.3, "mean_share": 0.3}]
    # S (0.1) and Q (0.2) cost money and changed nothing; R changed a.py and b.py
    assert data["insight_idle_cost"] == [
        {"project": "shop", "models": None, "sessions": 1, "cost_usd": 0.2},
        {"project": "shop", "models": "claude-haiku-4-5", "sessions": 1, "cost_usd": 0.1}]
    sql = data["sql"]["insight_idle_cost"]
    assert "provider = 'crush'" in sql
    # the SQL shown is what `agentlake sql` runs to give the same rows
    assert main(["sql", "--home", str(lake.home), "--format", "json", sql]) == 0
    assert json.loads(capsys.readouterr().out) == data["insight_idle_cost"]
    cut = json.loads(_report(lake, capsys, "--insights", "--top", "1", "--format", "json"))
    # all agents: (shop, Q's none), (shop, S's haiku) and (shop, the model cw-native and cw-estimated
    # share; cw-unknown's cost is unknown, not counted): 3 rows, 1 shown
    assert cut["not_shown"]["insight_idle_cost"] == 2
    assert len(cut["insight_idle_cost"]) == 1


def test_insight_sql_carries_the_filters_each_mart_can_take(lake, capsys):
    data = json.loads(_report(lake, capsys, "--insights", "--since", "2026-01-07", "--project", "shop",
                              "--format", "json"))
    # a finding about a session is in the window when its session started in it
    in_window = (" WHERE session_key IN (SELECT concat_ws('/', machine, \"user\", provider, source_id, session_id) "
                 "FROM sessions WHERE date >= DATE '2026-01-07') AND project = 'shop' ")
    for name in data["sql"]:
        if name != "insight_usage_blocks":
            assert data["sql"][name].count(in_window) == 1, name
    assert data["insight_idle_cost"] == [{"project": "shop", "models": None, "sessions": 1, "cost_usd": 0.2}]  # Q only
    assert "project" not in data["sql"]["insight_usage_blocks"]  # blocks span projects: dates only
    assert "DATE '2026-01-07'" in data["sql"]["insight_usage_blocks"]


def test_a_model_that_is_none_is_said_in_words_in_the_table_only(lake, capsys):
    """Issue 32, item 12: Q's cost (a session without an assistant message) has no model: its row
    was blank in the table. The table says what it is, in the words the dashboard uses; the JSON
    keeps the warehouse's null."""
    from warehouse.serve.labels import NO_MODEL

    data = json.loads(_report(lake, capsys, "--by", "model", "--top", "0", "--format", "json"))
    nameless = [r for r in data["by_model"] if r["model_name"] is None]
    assert nameless and all(r["cost_usd"] is not None for r in nameless)
    text = _report(lake, capsys, "--by", "model", "--top", "0")
    section = text.split("Cost and use by model\n", 1)[1].split("\n\n", 1)[0]
    lines = section.splitlines()
    rows = lines[2:lines.index(lines[1], 2)]  # down to the rule over the total row
    assert lines[-2].startswith("total ")
    assert len(rows) == len(data["by_model"])
    assert sum(line.startswith(NO_MODEL + " ") for line in rows) == len(nameless)
    assert NO_MODEL in _report(lake, capsys, "--insights", "--provider", "crush")  # Q in the idle cost's models


def test_a_window_without_sessions_says_which_days_hold_them(lake, capsys):
    first = scalar(lake, 'SELECT MIN("date") FROM sessions')
    last = scalar(lake, 'SELECT MAX("date") FROM sessions')
    after = last + timedelta(days=1)
    assert main(["report", "--home", str(lake.home), "--since", str(after)]) == 0
    said = capsys.readouterr().err
    assert f"note: no session from {after} to today; the sessions are from {first} to {last}" in said
    assert main(["report", "--home", str(lake.home), "--since", "2030-01-01", "--tz", "UTC"]) == 0
    said = capsys.readouterr().err  # not "from 2030-01-01 to today", as if today came after
    assert (f"note: no session from 2030-01-01 to today ({datetime.now(timezone.utc).date()}: --since is in the "
            f"future); the sessions are from {first} to {last}") in said
    assert main(["report", "--home", str(lake.home), "--agent", "crush", "--until", "2020-01-01"]) == 0
    assert "the sessions of these filters are from" in capsys.readouterr().err
    assert main(["report", "--home", str(lake.home), "--since", str(first)]) == 0
    assert "note: no session" not in capsys.readouterr().err  # sessions in the window: nothing said


def test_a_user_and_a_machine_that_hold_no_session_together_are_said(lake, project, capsys):
    """A team trial's `report --user ana --machine bo-desktop`, each name in the warehouse but no
    session of the two together, printed zeros without a word: the user's machines are named."""
    from tests.conftest import T0
    from transforms.synth.crush import add_session

    p = project("ops")
    add_session(p.conn, "o1", title="ops", created_at=T0, cost=0.5)
    p.close()
    assert main(["ingest", "--home", str(lake.home), "--db", str(p.db), "--no-default", "--quiet",
                 "--machine", "ci-box", "--user", "ana"]) == 0
    capsys.readouterr()
    assert main(["report", "--home", str(lake.home), "--user", "dev", "--machine", "ci-box", "--format", "json"]) == 0
    ran = capsys.readouterr()
    assert json.loads(ran.out)["totals"][0]["root_sessions"] == 0
    assert "note: user 'dev' has no session on machine 'ci-box'; theirs are on laptop" in ran.err, ran.err
    assert main(["report", "--home", str(lake.home), "--user", "ana", "--machine", "ci-box", "--format", "json"]) == 0
    ran = capsys.readouterr()
    assert json.loads(ran.out)["totals"][0]["root_sessions"] == 1 and "no session on machine" not in ran.err


def test_a_window_a_session_spends_in_but_did_not_start_in_is_not_said_empty(lake, capsys):
    """A new user's trial: a session started before midnight and spending after it. `report --since
    D --until D` showed that cost, then said no session was from D, and its flags left the cost out."""
    spent = dict(query(lake, 'SELECT "date", SUM(cost_usd) FROM daily_costs GROUP BY 1'))
    started = {r[0] for r in query(lake, 'SELECT DISTINCT "date" FROM sessions')}
    day = min(d for d in spent if d not in started)  # the two-day root's second day
    data = json.loads(_report(lake, capsys, "--since", str(day), "--until", str(day), "--format", "json"))
    assert data["totals"][0]["cost_usd"] == round(float(spent[day]), 9) > 0
    assert main(["report", "--home", str(lake.home), "--since", str(day), "--until", str(day)]) == 0
    assert "note: no session" not in capsys.readouterr().err
    # a window with nothing in it names the last day something was spent, not the last start
    after = max(spent) + timedelta(days=1)
    assert main(["report", "--home", str(lake.home), "--since", str(after), "--until", str(after)]) == 0
    assert f"(--since {min(started)} --until {max(spent)})" in capsys.readouterr().err
