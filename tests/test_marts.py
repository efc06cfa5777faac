"""The marts: column contracts from docs/MARTS.md, and exact figures on a fixture with known totals."""

import re
from decimal import Decimal
from pathlib import Path

from tests.conftest import DAY, query, scalar
from warehouse.catalog.marts import MARTS

ROOT = Path(__file__).resolve().parents[1]


def documented_columns() -> dict[str, list[tuple[str, str]]]:
    text = (ROOT / "docs" / "MARTS.md").read_text()
    out = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        name = re.match(r"`(\w+)`", section)
        if name is None:  # a section about several marts (Insights), not one mart's columns
            continue
        out[name.group(1)] = re.findall(r"^\| `(\w+)` \| ([A-Z0-9(),]+) \|", section, flags=re.M)
    return out


def test_every_mart_matches_its_documented_columns(lake):
    documented = documented_columns()
    assert sorted(documented) == sorted(MARTS)
    for mart, columns in documented.items():
        actual = [(name, type_.replace(" ", "")) for name, type_, *_ in query(lake, f"DESCRIBE {mart}")]
        assert actual == columns, mart


def test_daily_costs_split_multi_day_sessions_exactly(lake):
    rows = query(lake, "SELECT date::VARCHAR, model, sessions, cost_usd FROM daily_costs "
                       "WHERE provider = 'crush' ORDER BY 1, 2")
    # R (1.0) has 9 assistant messages: 7 on day 1 (2 answers, 5 tool steps), and on day 2 one
    # gpt answer and one from its sub-agent; S (0.1) has one on each of 3 days; Q (0.2) has none
    assert rows == [
        ("2026-01-01", "claude-sonnet-4-5", 1, Decimal("0.777777778")),
        ("2026-01-02", "claude-sonnet-4-5", 1, Decimal("0.111111111")),
        ("2026-01-02", "gpt-5.1", 1, Decimal("0.111111111")),  # the last share takes the remainder
        ("2026-01-03", "claude-haiku-4-5", 1, Decimal("0.033333333")),
        ("2026-01-04", "claude-haiku-4-5", 1, Decimal("0.033333333")),
        ("2026-01-05", "claude-haiku-4-5", 1, Decimal("0.033333334")),
        ("2026-01-07", None, 1, Decimal("0.2")),
    ]
    # each session's shares sum exactly to its cost, and sub-agents are never counted twice
    assert scalar(lake, "SELECT SUM(cost_usd) FROM daily_costs WHERE provider = 'crush'") == Decimal("1.3")
    assert sum(c for d, m, _, c in rows if d in ("2026-01-01", "2026-01-02")) == Decimal("1.0")


def test_daily_costs_say_where_each_number_came_from(lake):
    rows = dict(query(lake, "SELECT cost_source, SUM(cost_usd) FROM daily_costs WHERE provider = 'codewhale' "
                            "GROUP BY 1"))
    assert rows["native"] == Decimal("0.05")
    assert rows["estimated"] > 0
    assert "unknown" in rows and rows["unknown"] is None  # shown as unknown, never as $0


def test_session_summary(lake):
    row = query(lake, "SELECT messages, assistant_messages, tool_calls, tool_errors, nonzero_exits, subagents, "
                      "cost_usd, models, duration_s FROM session_summary WHERE session_id = 'R'")[0]
    assert row[:7] == (15, 9, 5, 1, 1, 1, 1.0)
    assert row[7] == "claude-sonnet-4-5, gpt-5.1"
    assert row[8] >= DAY
    assert scalar(lake, "SELECT COUNT(*) FROM session_summary WHERE provider = 'crush'") == 3  # roots only


def test_tool_usage(lake):
    rows = {r[0]: r[1:] for r in query(lake, "SELECT tool_name, calls, errors, error_rate, nonzero_exits, "
                                             "median_result_bytes FROM tool_usage WHERE provider = 'crush'")}
    assert rows["bash"][:4] == (2, 0, 0.0, 1)
    assert rows["edit"][:3] == (2, 1, 0.5)
    assert rows["write"][:2] == (1, 0)
    # per machine and user too: a team's calls by person are the mart's rows (report --user)
    by_person = query(lake, 'SELECT machine, "user", SUM(calls) FROM tool_usage GROUP BY ALL ORDER BY ALL')
    assert by_person == query(lake, 'SELECT machine, "user", COUNT(*) FROM tool_calls WHERE has_call '
                                    'GROUP BY ALL ORDER BY ALL') == [("laptop", "dev", 5)]


def test_shell_commands_by_first_word_and_command(lake):
    first = query(lake, "SELECT first_word, calls, failures, failure_rate FROM shell_commands "
                        "WHERE \"grouping\" = 'first_word'")
    assert first == [("npm", 2, 1, 0.5)]
    full = dict(query(lake, "SELECT command, failures FROM shell_commands WHERE \"grouping\" = 'command'"))
    assert full == {"FOO=1 npm test": 0, "npm test -- --watch": 1}


def test_file_activity_ignores_failed_edits(lake, project):
    rows = {Path(r[0]).name: r[1:] for r in query(
        lake, "SELECT path, changes, edits, writes, failed_changes, versions FROM file_activity")}
    assert rows["a.py"] == (1, 1, 0, 1, 2)  # the failed edit changed nothing
    assert rows["b.py"] == (1, 0, 1, 0, 0)  # a relative path, resolved against the project
    assert scalar(lake, "SELECT path FROM file_activity WHERE path LIKE '%b.py'").endswith("/shop/b.py")


def test_model_usage(lake):
    rows = {r[0]: r[1:] for r in query(lake, "SELECT model, messages, sessions, cost_usd, cost_sources "
                                             "FROM model_usage WHERE provider = 'crush'")}
    assert rows["gpt-5.1"] == (1, 1, Decimal("0.111111111"), "native")
    assert rows["claude-haiku-4-5"][:3] == (3, 1, Decimal("0.1"))
    unknown = query(lake, "SELECT cost_usd, cost_sources FROM model_usage WHERE model = 'glm-4.6'")
    assert unknown == [(None, "unknown")]


def test_a_refresh_builds_the_marts_by_project_first_unless_one_reads_a_mart_built_whole():
    """The blocks the marts share are computed once for each scope (by project, then whole), not
    again at each switch; a mart refreshed by project that reads one built whole comes after it."""
    from warehouse.catalog.marts import _scoped_first

    reads = {"c": {"a"}, "e": {"b"}}
    plan = [("a", "SELECT 1", "scoped"), ("b", "SELECT 2", "whole"), ("c", "SELECT * FROM a", "scoped"),
            ("d", "SELECT 3", "whole")]
    assert [m[0] for m in _scoped_first(plan, lambda n: reads.get(n, set()))] == ["a", "c", "b", "d"]
    reads_whole = plan + [("e", "SELECT * FROM b", "scoped")]
    assert [m[0] for m in _scoped_first(reads_whole, lambda n: reads.get(n, set()))] == ["a", "b", "c", "d", "e"]
