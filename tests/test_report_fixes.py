"""What users found wrong in `agentlake report` (and the dashboard's same figures), on real stores:
a call that failed two ways counted twice, unknown costs counted in daily_costs rows, insights
dropped by a date filter on a column that may be NULL, blanks for real zeros."""

import html
import json
import re
from datetime import datetime, timedelta, timezone

from urllib.parse import parse_qs, urlsplit

import pytest

from pipelines.cli import main
from tests.conftest import DAY, T0, Project, assistant, copy_home, ingest, query, scalar
from tests.support_dashboard import tool_bar_labels
from transforms.synth.claude import generate_home
from transforms.synth.codewhale import session_doc, text_block, write_session
from transforms.synth.crush import add_message, add_session
from transforms.synth.crush_parts import bash_output, finish_part, tool_call_part, tool_result_part
from warehouse.lake.layout import Layout

FAILED = "has_call AND (is_error OR exit_code <> 0)"


def _calls(c, sid, t, calls):
    for i, (cid, name, args, result, is_error) in enumerate(calls):
        add_message(c, f"call-{cid}", sid, "assistant",
                    [tool_call_part(cid, name, args), finish_part("tool_use", t + i)],
                    created_at=t + i, model="claude-sonnet-4-5", provider="anthropic")
        add_message(c, f"res-{cid}", sid, "tool", [tool_result_part(cid, name, result, is_error=is_error)],
                    created_at=t + i)


@pytest.fixture
def mixed(layout, built_once):
    """Crush in `ops`: F with bash calls that fail (its tool error: no exit code, or by exit code
    only) or not, and an edit that errors. Claude Code's generated home in two more projects:
    sessions on three days whose context grows (none compacts), some on a model without a price
    (their cost unknown), Bash calls that fail both ways. CodeWhale in `dark`: one session whose
    cost is unknown, the project's only one, answered on two days. Built once per session; each
    test has a copy of its home."""
    copy_home(built_once("report-fixes-mixed", _mixed).home, layout.home)
    return layout


def _mixed(root):
    layout = Layout.resolve(home=root / "home", machine="laptop", user="dev")
    ops = Project(root / "projects", "ops")
    add_session(ops.conn, "F", title="failures", created_at=T0, cost=0.5)
    assistant(ops.conn, "f0", "F", T0 + 1)
    _calls(ops.conn, "F", T0 + 10, [
        ("err", "bash", {"command": "make deploy"}, "permission denied", True),
        ("exit", "bash", {"command": "npm test"}, bash_output("", stderr="1 failed", exit_code=1), False),
        ("ok", "bash", {"command": "ls"}, bash_output("a.py"), False),
        ("edit", "edit", {"file_path": "a.py"}, "old_string not found", True)])
    ops.close()
    generate_home(root / "claude", sessions=8, seed=5)
    dark = root / "projects" / "dark"
    dark.mkdir(parents=True)
    # its messages 30 s apart from 45 s before midnight: answered on two days
    msgs = [{"role": role, "content": [text_block(text)]}
            for role, text in (("user", "hi"), ("assistant", "ok"), ("user", "more"), ("assistant", "done"))]
    write_session(root / "cw" / "sessions", session_doc(
        "cw-dark", title="d", created_at=datetime.fromtimestamp(T0 + DAY - 45, timezone.utc), workspace=dark,
        messages=msgs, total_tokens=5000, cost=None, model="glm-4.6", model_provider="custom", journal=True))
    ingest(layout, ops.db, codewhale_homes=[root / "cw"], homes={"claude": [root / "claude"]})
    return layout


def _json(capsys, home, *args):
    assert main(["report", "--home", str(home), "--format", "json", *args]) == 0
    return json.loads(capsys.readouterr().out)


# --------------------------------------------------------------------------- failing tools


def test_a_call_that_errors_and_exits_non_zero_fails_once(mixed, capsys):
    both = scalar(mixed, "SELECT COUNT(*) FROM tool_calls WHERE has_call AND is_error AND exit_code <> 0")
    assert both > 0  # the fixture has a call that failed both ways
    truth = {name: (calls, failed) for name, calls, failed in query(
        mixed, f"SELECT tool_name, COUNT(*), COUNT(*) FILTER (WHERE {FAILED}) FROM tool_calls WHERE has_call "
               "GROUP BY 1")}
    rows = _json(capsys, mixed.home, "--top", "0")["failing_tools"]
    assert {r["tool_name"]: (r["calls"], r["failed"]) for r in rows} == {
        name: cf for name, cf in truth.items() if cf[1]}
    for r in rows:
        assert r["failed"] <= r["errors"] + r["nonzero_exits"] and 0 < r["failure_rate"] <= 1
        assert r["failure_rate"] == round(r["failed"] / r["calls"], 3)
    bash = next(r for r in rows if r["tool_name"] == "bash")
    assert bash["failed"] == bash["errors"] + bash["nonzero_exits"] - scalar(
        mixed, "SELECT COUNT(*) FROM tool_calls WHERE tool_name = 'bash' AND is_error AND exit_code <> 0")


def _rows(page: str, table_id: str) -> list[tuple[str, list[str]]]:
    """(first cell's link, cell texts) of each row of a dashboard table."""
    body = re.search(rf'<table id="{table_id}">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        link = re.search(r'<a href="([^"]+)"', row)
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        rows.append((html.unescape(link.group(1)) if link else "", cells))
    return rows


def test_the_dashboard_counts_a_failed_call_once(mixed):
    from warehouse.serve.dashboard.server import render
    from warehouse.lake.ducklake import connect

    (project,) = {p for (p,) in query(mixed, "SELECT project FROM tool_calls WHERE is_error AND exit_code <> 0")}
    with connect(mixed.warehouse) as con:
        overview, _ = render(con, "/", "")
        page, _ = render(con, "/project", f"project={project}")
    # the tool chart: each category's calls and failed calls, as tool_calls counts them
    for category, label in tool_bar_labels(mixed).items():
        assert label + ";" in overview, category
    # a root session's failed calls, its sub-agents' included, each once
    truth = dict(query(mixed, f"""SELECT COALESCE(s.root_session_id, s.session_id), COUNT(*) FILTER (WHERE {FAILED})
                                  FROM tool_calls c JOIN sessions s USING (machine, source_id, session_id)
                                  WHERE c.project = ? GROUP BY 1""", project))
    shown = {parse_qs(urlsplit(link).query)["id"][0]: int(cells[6]) for link, cells in _rows(page, "sessions")}
    assert shown == {sid: truth.get(sid, 0) for sid in shown} and sum(shown.values()) == sum(truth.values())
    per_project = dict(query(mixed, f"SELECT project, COUNT(*) FILTER (WHERE {FAILED}) FROM tool_calls "
                                    "GROUP BY 1"))
    listed = {cells[0]: int(cells[5]) for _, cells in _rows(overview, "projects")}
    assert listed == {p: per_project.get(p, 0) for p in listed} and set(per_project) <= set(listed)
    # the columns say what they count: the sessions started in the window and what they hold
    # (the report counts messages sent in it; a session across midnight made them differ unsaid)
    head = overview.split('id="projects"', 1)[1].split("</tr>", 1)[0]
    # a header is its column's sort link (the dashboard's sortable tables): its text, tags aside
    assert [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>(.*?)</th>", head)][2:6] == [
        "sessions started", "their messages", "their tool calls", "their failed calls"]


def test_synthetic_replies_are_not_called_a_model(mixed, capsys):
    """Issue 32, item 12: Claude Code writes `<synthetic>` as the model of the replies it makes
    itself (API errors): the report's table listed it as a model, the dashboard too. Both now say
    what it is in the same words; the JSON keeps the agent's own value."""
    from warehouse.lake.ducklake import connect
    from warehouse.serve.dashboard.server import render
    from warehouse.serve.labels import NOT_MODELS

    said = NOT_MODELS["<synthetic>"]
    rows = _json(capsys, mixed.home, "--by", "model", "--top", "0")["by_model"]
    synthetic = [r for r in rows if r["model_name"] == "<synthetic>"]
    assert synthetic and all(r["models"] == "<synthetic>" for r in synthetic)
    # they made no request: a known $0, as model_usage says, not a blank the legend reads as unknown
    assert [r["cost_usd"] for r in synthetic] == [0] == [
        float(c) for (c,) in query(mixed, "SELECT cost_usd FROM model_usage WHERE model_name = '<synthetic>'")]
    assert main(["report", "--home", str(mixed.home), "--by", "model", "--top", "0"]) == 0
    text = capsys.readouterr().out
    # said for the name it groups under and for the recorded name listed beside it
    assert "<synthetic>" not in text and text.count(said) == 2 * len(synthetic)
    assert re.search(rf"^{re.escape(said)} +0\.0000 ", text, re.M), text
    project, source, sid, models = query(mixed, "SELECT project, source_id, session_id, models FROM session_summary "
                                                "WHERE models LIKE '%<synthetic>%' LIMIT 1")[0]
    with connect(mixed.warehouse) as con:
        page, _ = render(con, "/project", f"project={project}")
        session, _ = render(con, "/session", f"source={source}&id={sid}")
    listed = [cells[8] for link, cells in _rows(page, "sessions") if f"id={sid}" in link]
    assert listed == [models.replace("<synthetic>", said)]
    assert "&lt;synthetic&gt;" not in page and "&lt;synthetic&gt;" not in session
    assert f"<th>models</th><td>{html.escape(listed[0])}</td>" in session
    assert f"· {html.escape(said)}</div>" in session  # the API error's message, in the transcript


# --------------------------------------------------------------------------- unknown costs


def test_totals_count_the_root_sessions_whose_cost_is_unknown(mixed, capsys):
    unknown_days = scalar(mixed, "SELECT COUNT(*) FROM daily_costs WHERE cost_source = 'unknown'")
    unknown = scalar(mixed, "SELECT COUNT(*) FROM sessions WHERE is_root AND cost_source = 'unknown'")
    assert unknown_days > unknown > 0  # a session's unknown cost spreads over its days and models
    totals = _json(capsys, mixed.home)["totals"][0]
    assert totals["root_sessions_with_unknown_cost"] == unknown
    assert "rows_with_unknown_cost" not in totals
    # within the filters, as root_sessions: the root sessions started in the window
    project, last = query(mixed, "SELECT project, MAX(date) FROM sessions WHERE cost_source = 'unknown' "
                                 "AND provider = 'claude' GROUP BY 1")[0]
    window = _json(capsys, mixed.home, "--project", project, "--since", last.isoformat())["totals"][0]
    started, unpriced = query(mixed, "SELECT COUNT(*), COUNT(*) FILTER (WHERE cost_source = 'unknown') FROM sessions "
                                     "WHERE is_root AND project = ? AND date >= ?", project, last)[0]
    assert window["root_sessions"] == started
    assert window["root_sessions_with_unknown_cost"] == unpriced and 0 < unpriced < unknown


def test_totals_count_the_root_sessions_priced_in_part(layout, tmp_path, capsys):
    """A root session with priced and unpriced requests has a cost (`partial`: its priced ones),
    and the total had no word of it: read as exact, it was a floor (a trial user's report)."""
    from tests.test_claude import CWD, SID, T0, project, response
    from transforms.synth.claude import usage, user_line, write_jsonl

    home = tmp_path / "claude"
    mixed_models = "22222222-1111-4222-8333-444455556666"
    write_jsonl(project(home) / f"{SID}.jsonl", [user_line(SID, T0, CWD, "a")] + response(SID, T0, "m1", usage(1, 10)))
    write_jsonl(project(home) / f"{mixed_models}.jsonl", [user_line(mixed_models, T0, CWD, "b")]
                + response(mixed_models, T0, "m2", usage(1, 10))
                + response(mixed_models, T0, "m3", usage(1, 10), model="glm-4.6"))  # no price for it
    ingest(layout, homes={"claude": [home]})
    assert query(layout, "SELECT cost_source, COUNT(*) FROM sessions WHERE is_root GROUP BY 1 ORDER BY 1") == [
        ("estimated", 1), ("partial", 1)]
    totals = _json(capsys, layout.home)["totals"][0]
    assert (totals["root_sessions"], totals["root_sessions_with_unknown_cost"],
            totals["root_sessions_with_partial_cost"]) == (2, 0, 1)
    # the unpriced model's row says it is unknown, not nothing (its requests are all inside a
    # session priced in part, which gives it no cost row: a team trial's reader saw an empty cell)
    by_model = {r["model_name"]: r for r in _json(capsys, layout.home, "--by", "model")["by_model"]}
    assert (by_model["glm-4.6"]["cost_usd"], by_model["glm-4.6"]["cost_source"]) == (None, "unknown")
    sonnet = by_model["claude-sonnet-4-5"]
    assert sonnet["cost_usd"] is not None and "unknown" not in sonnet["cost_source"]
    from warehouse.serve.dashboard.server import render
    from warehouse.lake.ducklake import connect

    with connect(layout.warehouse) as con:
        page, _ = render(con, "/", "")
    assert "2 root sessions started · 1 priced in part (their unpriced requests not counted)" in page


def test_the_dashboard_says_how_many_root_sessions_have_an_unknown_cost(mixed):
    from warehouse.serve.dashboard.server import render
    from warehouse.lake.ducklake import connect

    unknown = scalar(mixed, "SELECT COUNT(*) FROM sessions WHERE is_root AND cost_source = 'unknown'")
    with connect(mixed.warehouse) as con:
        page, _ = render(con, "/", "")
        dark, _ = render(con, "/", "project=dark")
    assert f"{unknown} of them with unknown cost (not counted as $0)" in page
    assert "rows with unknown cost" not in page
    # every cost in `dark` is unknown: the total is unknown, as the report's is, not $0
    assert "Total cost: unknown" in dark


# --------------------------------------------------------------------------- zeros


def test_nothing_in_the_filters_is_zero_everywhere(mixed, capsys):
    last = query(mixed, "SELECT MAX(date) FROM daily_costs")[0][0]
    after = (last + timedelta(days=30)).isoformat()
    totals = _json(capsys, mixed.home, "--since", after)["totals"][0]
    assert set(totals) == {"cost_usd", "root_sessions", "root_sessions_with_unknown_cost",
                           "root_sessions_with_partial_cost", "messages", "tool_calls", "tool_errors", "nonzero_exits"}
    assert all(v == 0 for v in totals.values()), totals  # counted and found none: no blanks
    assert main(["report", "--home", str(mixed.home), "--since", after, "--format", "csv", "--section", "totals"]) == 0
    block = capsys.readouterr().out.splitlines()
    assert block[0].split(",") == list(totals) and set(block[1].split(",")) == {"0"}
    assert main(["report", "--home", str(mixed.home), "--since", after]) == 0
    table = capsys.readouterr().out.split("\n\n")[0].splitlines()
    # the cost with the 4 decimals every cost in the table has (issue 32, item 13), the counts whole
    assert table[0] == "Totals" and table[3].split() == ["0.0000"] + ["0"] * (len(totals) - 1)
    # every cost in `dark` is unknown: the report leaves it blank rather than $0 (the dashboard: unknown)
    assert _json(capsys, mixed.home, "--project", "dark")["totals"][0]["cost_usd"] is None
    from warehouse.serve.dashboard.server import render
    from warehouse.lake.ducklake import connect

    with connect(mixed.warehouse) as con:
        page, _ = render(con, "/", f"since={after}")
    assert "Total cost: $0.0000 · 0 root sessions started" in page


@pytest.mark.parametrize("by", ["day", "project", "agent", "user", "model"])
def test_a_breakdown_row_that_counted_none_says_0_as_totals_do(mixed, capsys, by):
    """A row with cost but no root session started on its day (or no call in its project) printed
    null where Totals print 0 (a trial user's report): each count is a number in every row."""
    report = _json(capsys, mixed.home, "--by", by, "--top", "0")
    rows = report[next(k for k in report if k.startswith("by_"))]
    counts = [c for c in ("root_sessions", "messages", "tool_calls", "assistant_messages") if c in rows[0]]
    assert counts and all(isinstance(r[c], int) for r in rows for c in counts), rows
    if by == "day":  # the fixture has days answered in a session started the day before
        assert any(r["root_sessions"] == 0 for r in rows), rows


def test_an_empty_warehouse_totals_zero(layout, project, capsys):
    empty = project("empty")
    empty.close()
    ingest(layout, empty.db)
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 0
    totals = _json(capsys, layout.home)["totals"]
    assert totals == [{"cost_usd": 0, "root_sessions": 0, "root_sessions_with_unknown_cost": 0,
                       "root_sessions_with_partial_cost": 0, "messages": 0, "tool_calls": 0, "tool_errors": 0,
                       "nonzero_exits": 0}]
    # its zeros are no total of anything: said, with where to look next (a new user's trial)
    from pipelines.command_args import agentlake_exe

    exe = agentlake_exe()
    for report in (["report"], ["report", "--budgets"]):  # the budgets' month too, of a config's budget
        (layout.home / "config.toml").write_text("[[budgets]]\nmonthly_usd = 10\n")
        assert main([*report, "--home", str(layout.home)]) == 0
        assert capsys.readouterr().err == (
            f"note: the warehouse {layout.warehouse} holds no session yet: `{exe} sources --home {layout.home}` "
            f"lists what an ingest finds, `{exe} ingest --home {layout.home} --agent-home AGENT=DIR` names a place, "
            f"or `{exe} demo --home {layout.home / 'demo'}` makes a demo the commands read until the home holds "
            "data\n"), report
    (layout.home / "config.toml").unlink()
    # a warehouse the home alone does not read: no demo pointer (quickstart's demo would not be read)
    import shutil

    other = layout.home.parent / "other.ducklake"
    shutil.copyfile(layout.warehouse, other)
    assert main(["report", "--home", str(layout.home), "--warehouse", str(other)]) == 0
    said = capsys.readouterr().err
    assert said.startswith(f"note: the warehouse {other} holds no session yet") and " demo " not in said, said
    from warehouse.serve.dashboard.server import render
    from warehouse.lake.ducklake import connect

    with connect(layout.warehouse) as con:
        page, _ = render(con, "/", "")
    assert "Total cost: $0.0000 · 0 root sessions started" in page


# --------------------------------------------------------------------------- insights by date


def test_insights_are_filtered_by_their_sessions_date(mixed, capsys):
    """A session that never compacted has no first_compaction_at: the date filter is the session's."""
    never = scalar(mixed, "SELECT COUNT(*) FROM insight_context_growth WHERE first_compaction_at IS NULL")
    rows = scalar(mixed, "SELECT COUNT(*) FROM insight_context_growth")
    assert never > 0
    every = _json(capsys, mixed.home, "--insights", "--top", "0")
    wide = _json(capsys, mixed.home, "--insights", "--top", "0", "--since", "2000-01-01")
    assert len(every["insight_context_growth"]) == len(wide["insight_context_growth"]) == rows
    for name, found in every.items():
        if name.startswith("insight_"):
            assert wide[name] == found, name  # a window holding every session holds every finding
    # a window holds the findings of the sessions started in it, by the session's own date
    days = [d for (d,) in query(mixed, "SELECT DISTINCT date FROM sessions WHERE provider = 'claude' ORDER BY 1")]
    assert len(days) >= 3
    since, until = days[1].isoformat(), days[-2].isoformat()
    window = _json(capsys, mixed.home, "--insights", "--top", "0", "--since", since, "--until", until)
    kept = {k for (k,) in query(mixed, "SELECT g.session_key FROM insight_context_growth g JOIN sessions s "
                                       "ON g.session_key = concat_ws('/', s.machine, s.\"user\", s.provider, "
                                       "s.source_id, s.session_id) WHERE s.date BETWEEN ? AND ?", since, until)}
    assert 0 < len(kept) < rows
    assert {r["session_key"] for r in window["insight_context_growth"]} == kept
    # the SQL shown gives the same rows in `agentlake sql`
    assert main(["sql", "--home", str(mixed.home), "--format", "json",
                 window["sql"]["insight_context_growth"]]) == 0
    assert {r["session_key"] for r in json.loads(capsys.readouterr().out)} == kept
