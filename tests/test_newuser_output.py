"""Issue 12, items 21 and 22: odd input and output of the commands, and what the report's
columns say. One generated demo (all five agents) is the warehouse every test reads."""

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from pipelines.cli import main
from tests.support_homes import quickstart_with_a_typo
from warehouse.serve.formatting import render

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def demo(built_once):
    """The home of the default demo (every agent, seed 7, 4 projects of 6 sessions), the one
    `agentlake quickstart` generates in <home>/demo: built once per session, and only read here."""
    built = quickstart_with_a_typo(built_once)  # test_newuser_quickstart checks what it says
    assert built.code == 1 and ", 0 failed" in built.out  # 1: the place it was told of is missing
    return built.home


def _run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- item 21


def test_an_empty_query_is_a_usage_error(demo, capsys):
    for query in ("", "   ", "-- only a comment"):
        code, out, err = _run(capsys, "sql", "--home", str(demo), query)
        assert code == 2 and "error:" in err and out == ""


def test_a_pipe_closed_early_is_no_traceback(demo):
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "sql", "--home", str(demo),
                             "SELECT * FROM range(300000)"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"range"
    proc.stdout.close()  # what `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_a_decimal_zero_prints_as_0(demo, capsys):
    query = "SELECT 0::DECIMAL(38,9) AS zero, 1.5::DECIMAL(38,9) AS half, 0.000000001::DECIMAL(38,9) AS nano"
    code, out, _ = _run(capsys, "sql", "--home", str(demo), query, "--format", "csv")
    assert code == 0 and out.splitlines() == ["zero,half,nano", "0,1.5,0.000000001"]
    code, out, _ = _run(capsys, "sql", "--home", str(demo), query)
    assert out.splitlines()[2].split() == ["0", "1.5", "0.000000001"]
    assert "E-" not in render(["x"], [(__import__("decimal").Decimal("0E-9"),)])


def test_top_must_not_be_negative_and_0_shows_everything(demo, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["report", "--home", str(demo), "--top", "-1"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--top" in err and "Binder" not in err
    code, out, _ = _run(capsys, "report", "--home", str(demo), "--by", "tool", "--top", "0", "--format", "json")
    data = json.loads(out)
    assert code == 0 and "not_shown" not in data and len(data["by_tool"]) > 10
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    assert "0: all" in " ".join(capsys.readouterr().out.split())  # however the help is wrapped


def test_an_unknown_project_is_named_with_close_ones(demo, capsys):
    code, out, err = _run(capsys, "report", "--home", str(demo), "--project", "shop")
    assert code == 2 and out == ""
    assert "no project 'shop' in the warehouse; close ones: webshop" in err
    code, out, err = _run(capsys, "report", "--home", str(demo), "--project", "zzzz")
    assert code == 2 and "no project 'zzzz' in the warehouse; it holds 4: " in err
    code, _, err = _run(capsys, "report", "--home", str(demo), "--provider", "claud")
    assert code == 2 and "no agent 'claud' in the warehouse; close ones: claude" in err


@pytest.mark.parametrize("command", ["views", "serving"])
def test_views_and_serving_in_an_empty_home_say_nothing_is_ingested(tmp_path, capsys, command):
    home = tmp_path / "empty-home"
    code, out, err = _run(capsys, command, "--home", str(home))
    assert code == 1 and f"nothing ingested in {home / 'lake'} yet" in err
    assert err.rstrip().endswith("first, or name a team's lake with --lake"), err  # a reader's first step
    assert not home.exists() or not any(home.rglob("*.duckdb"))  # no empty file written


def test_an_unknown_option_is_named_with_the_usage(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--bogus"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "usage: agentlake" in err and "unrecognized arguments: --bogus" in err
    with pytest.raises(SystemExit) as exc:  # a command's own option mistyped: its usage, and the close one
        main(["search", "test", "--agnet", "claude"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "usage: agentlake search" in err
    assert "agentlake search: error: unrecognized arguments: --agnet claude (did you mean --agent?)" in err
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2 and "COMMAND is required" in capsys.readouterr().err


# --------------------------------------------------------------------------- item 22


def _json_report(capsys, demo, *args):
    code, out, _ = _run(capsys, "report", "--home", str(demo), "--format", "json", "--top", "0", *args)
    assert code == 0
    return json.loads(out)


@pytest.mark.parametrize("by", ["day", "project", "agent", "user"])
def test_cost_and_use_counts_sessions_messages_tool_calls_and_tokens(demo, capsys, by):
    data = _json_report(capsys, demo, "--by", by)
    rows, totals = data[f"by_{by}"], data["totals"][0]
    assert {"cost_usd", "root_sessions", "messages", "tool_calls", "tokens", "cost_source"} <= set(rows[0])
    assert "root_session_days" not in rows[0]
    assert sum(r["root_sessions"] or 0 for r in rows) == totals["root_sessions"]
    assert sum(r["messages"] or 0 for r in rows) == totals["messages"]
    assert sum(r["tool_calls"] or 0 for r in rows) == totals["tool_calls"]
    # exact to the nano-dollar in JSON: the rows add up to the total, digit for digit
    assert sum(Decimal(str(r["cost_usd"] or 0)) for r in rows) == Decimal(str(totals["cost_usd"]))


def test_cost_and_use_by_agent_counts_root_sessions_not_session_days(demo, capsys):
    rows = {r["provider"]: r for r in _json_report(capsys, demo, "--by", "agent")["by_agent"]}
    code, out, _ = _run(capsys, "sql", "--home", str(demo), "SELECT provider, COUNT(*) AS n FROM sessions "
                        "WHERE is_root GROUP BY ALL", "--format", "json")
    assert {r["provider"]: r["root_sessions"] for r in rows.values()} == {
        r["provider"]: r["n"] for r in json.loads(out)}
    assert rows["crush"]["tokens"] is None and rows["claude"]["tokens"] > 0  # Crush records no per-request tokens


def test_the_top_cut_says_how_many_rows_it_left_out(demo, capsys):
    from transforms.providers import PROVIDERS

    left = len(PROVIDERS) - 2  # the demo holds every agent
    code, out, _ = _run(capsys, "report", "--home", str(demo), "--by", "agent", "--top", "2")
    assert code == 0
    section = out.split("Cost and use by agent\n", 1)[1].split("\n\n", 1)[0]
    note = f"{left} more not shown (--top {len(PROVIDERS)} or --top 0 shows them)"
    assert section.splitlines()[-2:] == ["(2 rows)", note]
    data = json.loads(_run(capsys, "report", "--home", str(demo), "--by", "agent", "--top", "2",
                           "--format", "json")[1])
    assert len(data["by_agent"]) == 2 and data["not_shown"]["by_agent"] == left
    _, csv, said = _run(capsys, "report", "--home", str(demo), "--by", "agent", "--top", "2", "--format", "csv")
    assert len(csv.splitlines()) == 3 and f"note: by_agent: {note}" in said  # the rows are the CSV's only lines


def test_lists_in_cells_are_sorted(demo, capsys):
    seen = 0
    for by in ("project", "agent", "user", "model", "day"):
        for row in _json_report(capsys, demo, "--by", by)[f"by_{by}"]:
            for column in ("cost_source", "agents"):
                if row.get(column) and "," in row[column]:
                    items = row[column].split(", ")
                    assert items == sorted(items), (by, row)
                    seen += 1
    assert seen  # the demo mixes estimated and unknown costs in one agent


def test_a_long_path_keeps_its_file_name_and_other_text_its_start():
    path = "/home/dev/.local/share/agentlake/demo/demo-data/crush/projects/webshop/src/cart/checkout.py"
    note = "a long note " * 10
    lines = render(["path", "note"], [(path, note)], max_width=40).splitlines()
    cells = lines[2].split("  ")
    assert cells[0] == "…" + path[-39:] and cells[0].endswith("cart/checkout.py")
    assert cells[-1].strip() == note[:39] + "…"


def test_totals_count_root_sessions_and_messages_as_the_rows_do_in_a_window(demo, capsys):
    days = [r["date"] for r in _json_report(capsys, demo, "--by", "day")["by_day"]]
    assert len(days) >= 3
    window = _json_report(capsys, demo, "--since", days[1], "--until", days[-2], "--by", "day")
    rows, totals = window["by_day"], window["totals"][0]
    assert {r["date"] for r in rows} <= set(days[1:-1])
    # sessions cross midnight: a window cuts some, and the totals must cut them the same way
    for measure in ("root_sessions", "messages", "tool_calls"):
        assert sum(r[measure] or 0 for r in rows) == totals[measure], measure
