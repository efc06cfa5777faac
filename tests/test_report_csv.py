"""Issue 32, item 18: `agentlake report --format csv` wrote its sections one after another with
`#` lines between them, which no CSV reader loads as one table. A CSV is now one table (the
section --section names, else the breakdown --by asks for), and --output DIR writes a file per
section; what else the report holds is named on stderr. Checked against the report's JSON."""

import csv
import io
import json
from decimal import Decimal

import pytest

from tests.conftest import run_cli
from warehouse.serve.report_csv import INSIGHT_SECTIONS


def _report(lake, *args):
    return run_cli("report", "--home", lake.home, *args)


def _json(lake, *args) -> dict:
    ran = _report(lake, "--format", "json", *args)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout, parse_float=Decimal)


def _read(text: str) -> list[dict]:
    """The CSV as a spreadsheet or any CSV reader loads it: one header, then rows."""
    return list(csv.DictReader(io.StringIO(text)))


def _as_text(rows: list[dict]) -> list[dict]:
    """The JSON's rows as CSV cells: text, empty for null."""
    return [{k: "" if v is None else str(v) for k, v in row.items()} for row in rows]


def test_a_plain_csv_report_is_one_table_the_breakdown_and_the_others_are_named(lake):
    data = _json(lake, "--by", "model")
    ran = _report(lake, "--by", "model", "--format", "csv")
    assert ran.returncode == 0, ran.stderr
    assert not any(line.startswith("#") for line in ran.stdout.splitlines())
    assert _read(ran.stdout) == _as_text(data["by_model"])
    others = [name for name in data if name != "by_model"]
    assert all(name in ran.stderr for name in others) and "--section NAME" in ran.stderr


def test_each_section_is_one_csv_and_an_unknown_one_is_named_with_those_there_are(lake):
    data = _json(lake, "--by", "tool", "--top", "1")
    for name, rows in data.items():
        if name == "not_shown":
            continue
        ran = _report(lake, "--by", "tool", "--top", "1", "--format", "csv", "--section", name)
        assert ran.returncode == 0 and _read(ran.stdout) == _as_text(rows), name
        cut = data.get("not_shown", {}).get(name)
        assert (f"{name}: {cut} more not shown" in ran.stderr) == bool(cut), ran.stderr
    assert data["not_shown"]  # a ranking was cut, and said so above
    cut = {k: n for k, n in data["not_shown"].items() if k == "failing_tools"}
    assert _json(lake, "--by", "tool", "--top", "1", "--section", "failing_tools") == (
        {"failing_tools": data["failing_tools"]} | ({"not_shown": cut} if cut else {}))
    bad = _report(lake, "--by", "tool", "--format", "csv", "--section", "by_project")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().endswith("its sections: " + ", ".join(n for n in data if n != "not_shown"))


def test_output_writes_a_csv_per_section_and_each_insights_sql(lake, tmp_path):
    data = _json(lake, "--by", "day")
    ran = _report(lake, "--by", "day", "--format", "csv", "--output", tmp_path / "report")
    assert ran.returncode == 0, ran.stderr
    sections = [name for name in data if name != "not_shown"]
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == sorted(f"{n}.csv" for n in sections)
    for name in sections:
        assert _read((tmp_path / "report" / f"{name}.csv").read_text()) == _as_text(data[name]), name
        assert f"wrote {tmp_path / 'report' / name}.csv" in ran.stdout
    insights = _json(lake, "--insights")
    ran = _report(lake, "--insights", "--format", "csv", "--output", tmp_path / "insights")
    assert ran.returncode == 0, ran.stderr
    for mart in INSIGHT_SECTIONS:
        got = _read((tmp_path / "insights" / f"{mart}.csv").read_text())
        assert len(got) == len(insights[mart]) and (not got or list(got[0]) == list(insights[mart][0]))
        assert (tmp_path / "insights" / f"{mart}.sql").read_text() == insights["sql"][mart] + "\n"


@pytest.mark.parametrize("args, said", [
    (("--insights", "--format", "csv"), "name one with --section (" + ", ".join(INSIGHT_SECTIONS) + ")"),
    (("--output", "out"), "--output writes a CSV file per section: give --format csv with it"),
    (("--format", "csv", "--output", "a-file"), "is a file: give a folder"),
])
def test_what_a_csv_report_cannot_be_is_a_usage_error(lake, tmp_path, args, said):
    (tmp_path / "a-file").write_text("")
    ran = run_cli("report", "--home", lake.home, *args, cwd=tmp_path)
    assert ran.returncode == 2 and said in ran.stderr and ran.stdout == ""
    assert not (tmp_path / "out").exists()
