"""`agentlake report` on the marts fixture: the same numbers as tables, JSON and CSV."""

import json

from pipelines.cli import main


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
        ("2026-01-03", 0.0333), ("2026-01-04", 0.0333), ("2026-01-05", 0.0333)]
    assert window["totals"][0]["cost_usd"] == 0.1


def test_unknown_costs_are_counted_not_zeroed(lake, capsys):
    data = json.loads(_report(lake, capsys, "--provider", "codewhale", "--by", "model", "--format", "json"))
    glm = [r for r in data["by_model"] if r["model"] == "glm-4.6"]
    assert glm == [{"model": "glm-4.6", "llm_provider": "custom", "provider": "codewhale", "cost_usd": None,
                    "assistant_messages": 1, "tokens": None, "cost_source": "unknown"}]
    assert data["totals"][0]["rows_with_unknown_cost"] == 1


def test_tables_and_csv(lake, capsys):
    text = _report(lake, capsys, "--by", "tool")
    assert text.startswith("Totals\n") and "Cost and use by tool" in text and "Failing tools" in text
    csv = _report(lake, capsys, "--by", "tool", "--format", "csv")
    blocks = {b.split("\n", 1)[0]: b.split("\n")[1:] for b in csv.split("\n\n")}
    assert blocks["# failing_tools"][0] == "tool_name,calls,errors,nonzero_exits,failure_rate"
    assert "bash,2,0,1,0.5" in blocks["# failing_tools"]
    assert "edit,2,1,0,0.5" in blocks["# failing_tools"]


def test_bad_date_is_a_usage_error(lake, capsys):
    import pytest

    with pytest.raises(SystemExit) as exc:
        main(["report", "--home", str(lake.home), "--since", "yesterday"])
    assert exc.value.code == 2
    assert "not a date" in capsys.readouterr().err
