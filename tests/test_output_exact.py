"""No output format changes a value: `agentlake sql` and `agentlake report` as tables, CSV and JSON
on a real warehouse, each figure checked against what DuckDB itself returns for it."""

import csv
import io
import json
import math
import re
import tempfile
from datetime import datetime, timezone
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from pipelines.cli import main
from tests.conftest import T0, DAY, Project, assistant, copy_home, ingest, query, run_cli, scalar
from transforms.synth.crush import add_message, add_session
from transforms.synth.crush_parts import text_part
from warehouse.lake.layout import Layout
from warehouse.serve.formatting import render


def _out(capsys, *args) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


def _strict_json(text: str):
    """JSON as a strict parser reads it (no NaN or Infinity), numbers kept to their last digit."""
    def no_constant(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_float=Decimal, parse_constant=no_constant)


def _table_rows(text: str) -> list[list[str]]:
    """A table's rows, without a breakdown's total row under its second rule."""
    lines = text.splitlines()
    assert lines[-1].startswith("(") and set(lines[1]) <= {"-", " "}
    body = lines[2:-1]
    return [line.split() for line in (body[:body.index(lines[1])] if lines[1] in body else body)]


# --------------------------------------------------------------------------- agentlake sql

DOUBLES = ("SELECT 1e-7::DOUBLE AS tiny, 0.24806485::DOUBLE AS claude, 1e-9::DOUBLE AS nano, "
           "(i + 1) / 3 * pow(10, i % 30 - 15) AS x, "
           "(SELECT MAX(cost_usd) FROM sessions) AS session_cost, "
           "(SELECT SUM(cost_usd) FROM daily_costs) AS total "
           "FROM range(60) t(i) ORDER BY i")


def test_the_sql_table_changes_no_double_and_no_decimal(lake, capsys):
    """A table cell reads back as the very value DuckDB returned: 1e-7 is not 0, a Claude cost
    keeps its 8 decimals; ordinary numbers are in plain notation."""
    expected = query(lake, DOUBLES)
    rows = _table_rows(_out(capsys, "sql", "--home", str(lake.home), DOUBLES))
    assert len(rows) == len(expected) == 60
    for cells, values in zip(rows, expected):
        assert len(cells) == len(values)
        for cell, value in zip(cells, values):
            if isinstance(value, Decimal):
                assert Decimal(cell) == value, (cell, value)
            else:
                assert float(cell) == value, (cell, value)
                if 1e-9 <= abs(value) < 1e21:
                    assert "e" not in cell, cell  # readable: no scientific notation
    assert isinstance(expected[0][-1], Decimal)  # daily_costs' DECIMAL, not a float


def test_a_number_is_never_cut_to_the_column_width():
    value = Decimal("12345678901234567890123456789.123456789")
    assert render(["n"], [(value,)], max_width=10).splitlines()[2] == str(value)


ODD = (r"SELECT 12345678901.123456789::DECIMAL(38,9) AS big, 0.000000001::DECIMAL(38,9) AS nano, "
       r"'nan'::DOUBLE AS nan, 'inf'::DOUBLE AS inf, '-inf'::DOUBLE AS ninf, '\x00\xFFab'::BLOB AS blob, "
       r"INTERVAL '3 days' AS days, INTERVAL '1 day 1 hour 1.5 seconds' AS mixed, -INTERVAL '1 hour' AS neg, "
       r"[0.1::DECIMAL(10,9), 0.000000001::DECIMAL(10,9)] AS decimals, 0.24806485::DOUBLE AS claude, "
       r"1e-7::DOUBLE AS tiny, (SELECT SUM(cost_usd) FROM daily_costs) AS total")


def _reads_back_as_interval(lake, text, value):
    """DuckDB itself reads the text back as the same INTERVAL."""
    assert query(lake, "SELECT CAST(? AS INTERVAL)", text)[0][0] == value, text


def test_sql_json_is_valid_and_exact(lake, capsys):
    (expected,) = [dict(zip(("big", "nano", "nan", "inf", "ninf", "blob", "days", "mixed", "neg", "decimals",
                             "claude", "tiny", "total"), row)) for row in query(lake, ODD)]
    (row,) = _strict_json(_out(capsys, "sql", "--home", str(lake.home), "--format", "json", ODD))
    for name in ("big", "nano", "total"):  # DECIMAL: a JSON number with every digit
        assert isinstance(row[name], Decimal) and row[name] == expected[name], name
    assert row["decimals"] == expected["decimals"]
    for name in ("claude", "tiny"):  # DOUBLE: the shortest text that reads back as the same double
        assert float(row[name]) == expected[name], name
    # JSON has no NaN or Infinity: null (see warehouse.serve.formatting.json_text)
    assert math.isnan(expected["nan"]) and math.isinf(expected["inf"]) and math.isinf(expected["ninf"])
    assert row["nan"] is None and row["inf"] is None and row["ninf"] is None
    assert bytes.fromhex(row["blob"]) == expected["blob"]
    for name in ("days", "mixed", "neg"):
        _reads_back_as_interval(lake, row[name], expected[name])


def test_sql_json_says_its_timestamps_are_utc(lake, capsys):
    """The lake's TIMESTAMPs are UTC without a zone attached: in JSON they end in `Z`, so that a
    reader (JavaScript's Date, pandas, Python) does not take them for local times. A TIMESTAMPTZ
    keeps its own offset; a DATE stays a date."""
    sql = ("SELECT created_at, created_at::TIMESTAMPTZ AS with_zone, created_at::DATE AS day "
           "FROM sessions ORDER BY created_at LIMIT 1")
    ((created_at, _, day),) = query(lake, sql)
    (row,) = _strict_json(_out(capsys, "sql", "--home", str(lake.home), "--format", "json", sql))
    assert row["created_at"].endswith("Z")
    assert datetime.fromisoformat(row["created_at"]) == created_at.replace(tzinfo=timezone.utc)
    assert datetime.fromisoformat(row["with_zone"]) == created_at.replace(tzinfo=timezone.utc)
    assert row["with_zone"].endswith("+00:00")  # agentlake's connections run in UTC
    assert row["day"] == day.isoformat()


def test_sql_csv_is_exact(lake, capsys):
    (expected,) = query(lake, ODD)
    reader = csv.reader(io.StringIO(_out(capsys, "sql", "--home", str(lake.home), "--format", "csv", ODD)))
    header, row = next(reader), next(reader)
    got, want = dict(zip(header, row)), dict(zip(header, expected))
    assert bytes.fromhex(got["blob"]) == want["blob"]
    for name in ("days", "mixed", "neg"):
        _reads_back_as_interval(lake, got[name], want[name])
    for name in ("big", "nano", "total"):
        assert Decimal(got[name]) == want[name], name
    assert _strict_json(got["decimals"]) == want["decimals"]  # a LIST cell: its JSON text
    for name in ("claude", "tiny", "inf", "ninf"):
        assert float(got[name]) == want[name], name
    assert math.isnan(float(got["nan"]))


# --------------------------------------------------------------------------- agentlake report


def _report_json(capsys, home, *args):
    return _strict_json(_out(capsys, "report", "--home", str(home), "--format", "json", *args))


def _report_csv(capsys, home, *args) -> dict[str, list[dict]]:
    """Each section's rows, from the CSV file `--output` writes for it."""
    folder = Path(tempfile.mkdtemp(prefix="report-csv-", dir=home))  # a folder of this call's files only
    _out(capsys, "report", "--home", str(home), "--format", "csv", "--output", str(folder), *args)
    return {path.stem: list(csv.DictReader(path.read_text().splitlines())) for path in folder.glob("*.csv")}


def test_report_by_day_is_each_days_exact_cost_and_the_table_rounds_it(lake, capsys):
    truth = {d.isoformat(): c for d, c in query(lake, "SELECT date, SUM(cost_usd) FROM daily_costs GROUP BY 1")}
    assert any(c != c.quantize(Decimal("0.0001")) for c in truth.values())  # what rounding to 4 places would change
    data = _report_json(capsys, lake.home, "--by", "day")
    assert {r["date"]: r["cost_usd"] for r in data["by_day"]} == truth
    csv_rows = _report_csv(capsys, lake.home, "--by", "day")["by_day"]
    assert {r["date"]: Decimal(r["cost_usd"]) for r in csv_rows} == truth
    # the table is for reading: costs rounded to 4 places (half away from zero, as SQL's ROUND)
    text = _out(capsys, "report", "--home", str(lake.home), "--by", "day")
    section = text.split("Cost and use by day\n", 1)[1].split("\n\n", 1)[0]
    shown = {cells[0]: Decimal(cells[1]) for cells in _table_rows(section)}
    assert shown == {day: cost.quantize(Decimal("0.0001"), ROUND_HALF_UP) for day, cost in truth.items()}
    total = section.splitlines()[-2].split()  # the exact total, rounded once (not a sum of rounded days)
    assert total[0] == "total" and Decimal(total[1]) == sum(truth.values()).quantize(Decimal("0.0001"), ROUND_HALF_UP)


def test_a_day_with_use_but_no_cost_costs_a_known_0_and_a_day_of_unknown_cost_stays_unknown(layout, tmp_path, capsys):
    """A session begun just before midnight, its reply and its cost after: its first day has a
    root session and a message but no cost, a known $0 (a trial: the row said `unknown`, as if that
    day's spend were not known); a day whose only cost is unknown still says so. The days add up
    to the total, as daily_costs has them."""
    from transforms.synth.codewhale import session_doc, text_block, write_session

    midnight = (T0 // DAY + 3) * DAY
    p = Project(tmp_path / "projects", "night")
    add_session(p.conn, "N", title="late", created_at=midnight - 10, cost=0.25)
    add_message(p.conn, "u1", "N", "user", [text_part("go")], created_at=midnight - 10)
    assistant(p.conn, "a1", "N", midnight + 20)
    p.close()
    msgs = [{"role": "user", "content": [text_block("hi")]}, {"role": "assistant", "content": [text_block("ok")]}]
    write_session(tmp_path / "cw" / "sessions", session_doc(
        "cw-unknown", title="u", created_at=datetime.fromtimestamp(midnight + 5 * DAY, timezone.utc), workspace=p.path,
        messages=msgs, total_tokens=5000, cost=None, model="glm-4.6", model_provider="custom"))
    ingest(layout, p.db, codewhale_homes=[tmp_path / "cw"])
    day = lambda t: datetime.fromtimestamp(t, timezone.utc).date().isoformat()  # noqa: E731
    rows = {r["date"]: r for r in _report_json(capsys, layout.home, "--by", "day")["by_day"]}
    assert rows[day(midnight - 10)]["cost_usd"] == 0 and rows[day(midnight - 10)]["root_sessions"] == 1
    assert rows[day(midnight - 10)]["messages"] == 1 and rows[day(midnight - 10)]["cost_source"] is None
    assert rows[day(midnight)]["cost_usd"] == Decimal("0.25") and rows[day(midnight)]["root_sessions"] == 0
    unknown = rows[day(midnight + 5 * DAY)]
    assert unknown["cost_usd"] is None and unknown["cost_source"] == "unknown" and unknown["root_sessions"] == 1
    assert set(rows) == {d.isoformat() for (d,) in query(layout, "SELECT DISTINCT date FROM daily_costs")} | {
        day(midnight - 10)}
    assert sum(r["cost_usd"] or 0 for r in rows.values()) == scalar(layout, "SELECT SUM(cost_usd) FROM daily_costs")
    for by in ("week", "month"):  # the day's week and month hold the cost: no row of use alone there
        assert all(r["cost_usd"] is not None or r["cost_source"] == "unknown"
                   for r in _report_json(capsys, layout.home, "--by", by)[f"by_{by}"])


def test_a_cost_is_rounded_alike_on_every_surface_that_shows_four_places():
    """A new user's trial: a request of exactly $0.00465 read 0.0047 in the report and $0.0046 on
    the dashboard, its session page and MCP's open_session, which formatted the double
    (0.004649999...). Each is now rounded half away from zero from the number's own digits."""
    from warehouse.serve.dashboard.page_parts import usd
    from warehouse.serve.formatting import dollars
    from warehouse.serve.report import _for_display
    from warehouse.serve.session_text import _money

    for value in (0.00465, Decimal("0.004650000"), 9.58565, 6.02565, 1234.56785, -0.00005, 0.0, 2.5):
        digits = Decimal(repr(value) if isinstance(value, float) else value)  # as the report's table rounds it
        expected = digits.quantize(Decimal("0.0001"), ROUND_HALF_UP)
        assert _for_display(value) == expected
        assert usd(value) == _money(value) == dollars(value) == f"${expected:,}"
    assert usd(None) == _money(None) == "unknown"
    assert dollars(1234.565, 2) == "$1,234.57" and dollars(Decimal("0.125"), 2) == "$0.13"
    assert dollars(5) == "$5.0000"  # an integer cost column's value, with the places every cost has
    # the charts' bars say it so too (the time chart's label was d3's rounding of the double)
    from warehouse.serve.dashboard.charts import cost_over_time, hbars

    day = datetime(2026, 1, 5).date()
    for svg in (cost_over_time([(day, "shop", Decimal("0.00465"), None)], "day", "project", ["shop"]),
                hbars([("shop", 0.00465, None)])):
        assert "$0.0047" in svg and "$0.0046" not in svg


@pytest.fixture
def nine_decimals(layout, built_once):
    """Idle sessions (they change no file) whose costs carry 9 decimals, in two projects, on three
    days, with two models: rounded to 4 places, `pico`'s cost is 0 and no row adds up. Built once
    per session; each test has a copy of its home."""
    copy_home(built_once("nine-decimals", _nine_decimals).home, layout.home)
    return layout


def _nine_decimals(root):
    layout = Layout.resolve(home=root / "home", machine="laptop", user="dev")
    nano = Project(root / "projects", "nano")
    add_session(nano.conn, "A", title="a", created_at=T0, cost=0.123456789)
    assistant(nano.conn, "a1", "A", T0 + 10)
    add_session(nano.conn, "B", title="b", created_at=T0 + DAY, cost=0.000000007)
    assistant(nano.conn, "b1", "B", T0 + DAY + 10)
    nano.close()
    pico = Project(root / "projects", "pico")
    add_session(pico.conn, "C", title="c", created_at=T0 + 2 * DAY, cost=0.000044444)
    assistant(pico.conn, "c1", "C", T0 + 2 * DAY + 10, model="claude-haiku-4-5")
    pico.close()
    ingest(layout, nano.db, pico.db)
    return layout


def _source_costs(layout) -> dict[str, Decimal]:
    """Each project's sessions' costs as their agent recorded them, added exactly."""
    out = {}
    for project, cost in query(layout, "SELECT project, cost_usd FROM sessions"):
        out[project] = out.get(project, Decimal(0)) + Decimal(repr(cost))
    return out


@pytest.mark.parametrize("by", ["day", "project", "agent", "user", "model"])
def test_report_json_and_csv_costs_add_up_to_the_total_exactly(nine_decimals, capsys, by):
    total = sum(_source_costs(nine_decimals).values())
    assert total != total.quantize(Decimal("0.0001"))  # what rounding to 4 places would change
    assert scalar(nine_decimals, "SELECT SUM(cost_usd) FROM daily_costs") == total
    data = _report_json(capsys, nine_decimals.home, "--by", by, "--top", "0")
    assert data["totals"][0]["cost_usd"] == total
    assert sum(r["cost_usd"] for r in data[f"by_{by}"] if r["cost_usd"] is not None) == total
    blocks = _report_csv(capsys, nine_decimals.home, "--by", by, "--top", "0")
    assert Decimal(blocks["totals"][0]["cost_usd"]) == total
    assert sum(Decimal(r["cost_usd"]) for r in blocks[f"by_{by}"] if r["cost_usd"]) == total


def test_report_and_insights_carry_nine_decimals(nine_decimals, capsys):
    truth = _source_costs(nine_decimals)
    data = _report_json(capsys, nine_decimals.home, "--by", "project")
    assert {r["project"]: r["cost_usd"] for r in data["by_project"]} == truth
    insights = _report_json(capsys, nine_decimals.home, "--insights")
    assert {r["project"]: r["cost_usd"] for r in insights["insight_idle_cost"]} == truth
    blocks = _report_csv(capsys, nine_decimals.home, "--insights")
    assert {r["project"]: Decimal(r["cost_usd"]) for r in blocks["insight_idle_cost"]} == truth
    # the query shown with the finding gives the same exact figures in `agentlake sql`
    rows = _strict_json(_out(capsys, "sql", "--home", str(nine_decimals.home), "--format", "json",
                             insights["sql"]["insight_idle_cost"]))
    assert {r["project"]: r["cost_usd"] for r in rows} == truth


# --------------------------------------------------------------------------- INTERVAL, exactly

# DuckDB keeps an INTERVAL's months, days and microseconds apart: `1 month` is not `30 days`, nor
# `25 hours` `1 day 01:00:00` (a session's duration in seconds is all microseconds, its age has months)
INTERVALS = ("SELECT INTERVAL 1 MONTH AS month, INTERVAL 25 HOUR AS hours, INTERVAL 14 MONTH AS months, "
             "INTERVAL 30 DAY AS days, -INTERVAL '1 year 2 days 3.25 seconds' AS neg, INTERVAL 0 SECOND AS zero, "
             "[INTERVAL 1 MONTH, INTERVAL 36 HOUR] AS list, {'took': INTERVAL '2 months 1 microsecond'} AS struct, "
             "(SELECT to_seconds(MAX(duration_s)) FROM session_summary) AS longest, "
             "(SELECT MAX(age(ended_at, started_at)) FROM session_summary) AS age")


SCALARS = ("month", "hours", "months", "days", "neg", "zero", "longest", "age")


def _duckdb_text(lake) -> dict:
    """Each INTERVAL as DuckDB itself writes it: a cast to VARCHAR (a LIST's or STRUCT's one by one)."""
    casts = ", ".join(f"{c}::VARCHAR" for c in SCALARS)
    (row,) = query(lake, f"SELECT {casts}, list_transform(list, x -> x::VARCHAR), struct.took::VARCHAR "
                         f"FROM ({INTERVALS})")
    return dict(zip(SCALARS, row)) | {"list": row[-2], "struct": {"took": row[-1]}}


def test_every_format_writes_an_interval_as_duckdb_does(lake):
    from warehouse.serve.formatting import fetch_rows, interval_text
    from warehouse.lake.ducklake import connect

    want = _duckdb_text(lake)
    assert want["month"] == "1 month" and want["hours"] == "25:00:00"
    with connect(lake.warehouse) as con:
        # what a timedelta (DuckDB's fetchall) cannot tell apart: `1 month` from `30 days`, ...
        cur = con.execute(INTERVALS)
        lost = {d[0]: interval_text(v) for d, v in zip(cur.description, cur.fetchall()[0]) if d[0] in SCALARS}
        assert {c for c in SCALARS if lost[c] != want[c]} == {"month", "hours", "months", "neg", "longest", "age"}, lost
        cur = con.execute(INTERVALS)
        columns = [d[0] for d in cur.description]
        rows = fetch_rows(cur)
    (row,) = _strict_json(render(columns, rows, "json"))
    assert row == want
    (line,) = list(csv.DictReader(io.StringIO(render(columns, rows, "csv"))))
    assert {k: (json.loads(v) if k in ("list", "struct") else v) for k, v in line.items()} == want
    header, _, cells = render(columns, rows, "table").splitlines()[:3]
    # the table's cells, cut where each column starts (a value may hold spaces: `1 year 2 months`)
    starts = [header.index(c) for c in columns] + [None]
    shown = {c: cells[a:b].strip() for c, a, b in zip(columns, starts, starts[1:])}
    assert {c: shown[c] for c in SCALARS} == {c: want[c] for c in SCALARS}
    assert json.loads(shown["list"]) == want["list"] and json.loads(shown["struct"]) == want["struct"]
    # and DuckDB reads each text back as the same INTERVAL, part by part
    for name in SCALARS:
        assert query(lake, "SELECT CAST(CAST(? AS INTERVAL) AS VARCHAR)", row[name])[0][0] == want[name], name


def test_a_query_without_intervals_is_fetched_as_duckdb_gives_it(lake):
    from warehouse.serve.formatting import fetch_rows
    from warehouse.lake.ducklake import connect

    sql = "SELECT session_id, cost_usd, started_at, tool_calls FROM session_summary ORDER BY session_id"
    with connect(lake.warehouse) as con:
        assert fetch_rows(con.execute(sql)) == con.execute(sql).fetchall()
        # beside an INTERVAL, the other columns are still DuckDB's own Python values
        mixed = fetch_rows(con.execute(f"SELECT *, INTERVAL 1 MONTH AS m FROM ({sql})"))
        assert [r[:-1] for r in mixed] == con.execute(sql).fetchall()


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_agentlake_sql_writes_an_interval_as_duckdb_does(lake, capsys, fmt):
    out = _out(capsys, "sql", "--home", str(lake.home), "--format", fmt,
               "SELECT INTERVAL 1 MONTH AS month, INTERVAL 25 HOUR AS hours")
    assert "1 month" in out and "25:00:00" in out and "30 days" not in out and "1 day" not in out


# --------------------------------------------------------------------------- columns that line up


def _column(text: str, name: str) -> list[str]:
    """One column's cells of a table, as printed (padding included): the span of its rule's dashes."""
    header, rule, *lines = text.splitlines()
    at = re.search(rf"(?<!\S){re.escape(name)}(?!\S)", header).start()
    start, end = next(m.span() for m in re.finditer(r"-+", rule) if m.start() <= at < m.end())
    return [line[start:end].ljust(end - start) for line in lines[:-1] if line != rule]  # a total row's rule


def test_a_money_column_has_one_number_of_decimals_right_aligned():
    """Issue 32, item 13: `0.35`, `0.174`, `2.3255` in one column did not line up. DECIMALs, and
    DOUBLEs as rounded (at most 9 decimals), are padded with zeros to the most decimals in their
    column, right-aligned; each cell still reads back as the very value."""
    rounded = [0.35, 0.174, 2.3255, 1.0, None]
    decimals = [Decimal("0.3500"), Decimal("12.0000"), Decimal("0.0037")]
    text = render(["cost_usd", "ratio", "usd"], [(r, r, d) for r, d in zip(rounded, decimals + [None, None])])
    for name, values in (("cost_usd", rounded), ("usd", decimals + [None, None])):
        cells = _column(text, name)
        shown = [c for c in cells if c.strip()]
        assert len({len(c.strip().split(".")[1]) for c in shown}) == 1, cells  # one number of decimals
        assert len({c.index(".") for c in shown}) == 1 and all(c[-1] != " " for c in shown), cells  # aligned
        assert [float(c) if c.strip() else None for c in cells] == [None if v is None else float(v) for v in values]
    # a DOUBLE with more decimals than a nano-dollar (a raw sum, a division) keeps its shortest text
    raw = render(["x"], [(0.1 + 0.2,), (0.5,)]).splitlines()[2:4]
    assert [r.strip() for r in raw] == ["0.30000000000000004", "0.5"]


def test_the_report_table_shows_costs_with_four_decimals(lake, capsys):
    """Every cost the report's tables show has DISPLAY_DECIMALS decimals, right-aligned, in each
    section (a DOUBLE's as a DECIMAL's); the JSON keeps the exact figures."""
    from warehouse.serve.report import DISPLAY_DECIMALS

    text = _out(capsys, "report", "--home", str(lake.home), "--top", "0")
    insights = _out(capsys, "report", "--home", str(lake.home), "--insights", "--top", "0")
    checked = 0
    for block in (text + "\n\n" + insights).split("\n\n"):
        title, *lines = block.splitlines()
        table = lines[:next(i for i, line in enumerate(lines) if re.fullmatch(r"\(\d+ rows?\)", line)) + 1]
        for name in [h for h in table[0].split() if h.endswith("_usd")]:
            for cell in [c for c in _column("\n".join(table), name) if c.strip()]:
                assert re.fullmatch(rf" *\d+\.\d{{{DISPLAY_DECIMALS}}}", cell), (title, name, cell)
                checked += 1
    assert checked > 10


# --------------------------------------------------------------------------- money is DECIMAL


def _money_columns(layout) -> dict[tuple[str, str], str]:
    from warehouse.catalog.marts import MARTS

    return {(t, c): d for t, c, d in query(layout, "SELECT table_name, column_name, data_type FROM "
                                                   "information_schema.columns WHERE column_name LIKE '%\\_usd' "
                                                   "ESCAPE '\\'")
            if t in MARTS}


def test_every_money_column_of_the_marts_is_an_exact_decimal(nine_decimals, capsys):
    """Issue 32, item 13: session_summary's cost (and the insights built on it) was a DOUBLE, so a
    plain SUM printed float noise. Every mart's money column is DECIMAL(38,9): a session's cost
    taken to the nano-dollar, as daily_costs and the report take it, and summed exactly."""
    money = _money_columns(nine_decimals)
    assert ("session_summary", "cost_usd") in money and ("insight_subagent_share", "root_cost_usd") in money
    assert {d for d in money.values()} == {"DECIMAL(38,9)"}, money
    total = sum(_source_costs(nine_decimals).values())
    for sql in ("SELECT SUM(cost_usd) FROM session_summary", "SELECT SUM(cost_usd) FROM insight_idle_cost"):
        assert scalar(nine_decimals, sql) == total, sql
        (row,) = _table_rows(_out(capsys, "sql", "--home", str(nine_decimals.home), sql))
        assert Decimal(row[0]) == total  # the exact digits, no float noise


def test_marts_of_an_older_release_are_built_again_as_decimals(lake):
    """A lake an older release merged holds its marts' costs as DOUBLEs, under that release's SQL:
    the next merge finds each mart's SQL changed (warehouse.catalog.marts) and builds it again
    whole, with the DECIMAL columns and the same figures."""
    from tests.conftest import run_cli
    from warehouse.lake import ducklake

    before = query(lake, "SELECT session_key, cost_usd FROM session_summary ORDER BY 1")
    with ducklake.writing(lake.warehouse) as con:
        for table in ("session_summary", "insight_idle_cost"):
            con.execute(f"CREATE OR REPLACE TABLE {table} AS "
                        f"SELECT * REPLACE (CAST(cost_usd AS DOUBLE) AS cost_usd) FROM {table}")
            con.execute("UPDATE _agentlake_marts SET sql_sha = 'an older release' WHERE name = ?", [table])
    assert _money_columns(lake)[("session_summary", "cost_usd")] == "DOUBLE"
    ran = run_cli("merge", "--home", lake.home)
    assert ran.returncode == 0, ran.stderr
    assert set(_money_columns(lake).values()) == {"DECIMAL(38,9)"}
    assert query(lake, "SELECT session_key, cost_usd FROM session_summary ORDER BY 1") == before


def test_the_table_lines_up_chinese_and_japanese_text_by_the_columns_it_takes():
    """A wide character takes two columns of a terminal: padded by characters, the columns after
    Chinese or Japanese text were pushed right, and the 60-character cut let 120 columns through
    (a new user's trial)."""
    from warehouse.serve.formatting import display_width, render

    table = render(["text", "role"], [("東京で会議", "user"), ("hello", "assistant"), ("Größe", "user")], "table")
    lines = table.splitlines()
    starts = [display_width(line[:line.index(word)]) for line, word in zip(lines[2:5], ("user", "assistant", "user"))]
    assert starts == [12, 12, 12]  # every role in the same column: 10 columns of text, 2 of gap
    [cut] = render(["text"], [("東" * 50,)], "table").splitlines()[2:3]
    assert display_width(cut) <= 60 and cut.endswith("…")


def test_csv_and_json_written_as_the_rows_come_are_the_text_render_gives():
    """`agentlake sql --format csv` of 5M rows held them all (1.6 GB) before its first line, and
    `| head` waited for them (a trial): CSV and JSON are written a batch of rows at a time. The
    text is render()'s, byte for byte, over several batches, a batch cut short, and no row."""
    import duckdb

    from warehouse.serve.formatting import fetch_batches, fetch_rows, render, render_chunks

    sql = ("SELECT range AS i, range / 3 AS d, CAST(range AS DECIMAL(18, 3)) / 7 AS dec, 'é\"' || range AS t, "
           "[range, NULL] AS l, {'a': range, 'b': 'x'} AS s, TIMESTAMP '2026-01-01' + range * INTERVAL 1 SECOND AS ts, "
           "CASE WHEN range % 5 = 0 THEN 'nan'::DOUBLE END AS n, NULL AS nothing FROM range(25)")
    with duckdb.connect() as con:
        for fmt in ("csv", "json"):
            for where in ("", " WHERE false"):
                cur = con.execute(f"SELECT * FROM ({sql}){where}")
                columns = [d[0] for d in cur.description]
                whole = render(columns, fetch_rows(cur), fmt) + "\n"
                streamed = "".join(render_chunks(columns, fetch_batches(con.execute(f"SELECT * FROM ({sql}){where}"),
                                                                        size=7), fmt))
                assert streamed == whole, (fmt, where)


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_query_failing_after_rows_were_written_says_the_output_is_incomplete(lake, monkeypatch, fmt):
    """Streamed, a query whose error comes after its first rows (a cast failing at row 5M) left
    4.9M lines that look like a whole result, said as a bad query, exit 2 (a review): it is said
    as output cut short, exit 1. DuckDB's InterruptException, one of its Errors, is Ctrl-C: 130."""
    import duckdb

    from warehouse.serve import formatting

    def failing(error):
        def batches(cur, size=10_000):
            yield cur.fetchmany(size)
            raise error
        return batches

    monkeypatch.setattr(formatting, "fetch_batches", failing(duckdb.ConversionException("Could not convert 'x'")))
    ran = run_cli("sql", "--home", lake.home, "--format", fmt, "SELECT 1 AS a")
    assert ran.returncode == 1 and ran.stderr == ("error: the query failed after part of its rows were written, so the "
                                                  "output is incomplete: Could not convert 'x'\n"), ran.stderr
    assert ran.stdout == ("a\n1\n" if fmt == "csv" else '[\n  {\n    "a": 1\n  }')
    monkeypatch.setattr(formatting, "fetch_batches", failing(duckdb.InterruptException("INTERRUPT Error: Interrupted!")))
    ran = run_cli("sql", "--home", lake.home, "--format", fmt, "SELECT 1 AS a")
    assert (ran.returncode, ran.stderr) == (130, "interrupted\n")
