"""Exact totals on a generated multi-project store covering every schema stage.

The generator counts what it writes while writing it; the lake must give the same numbers,
read back through the warehouse views."""

from collections import Counter

import pytest

from tests.conftest import ingest, query, scalar
from transforms.synth.crush import generate_store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    return generate_store(root / "crush", projects=8, sessions_per_project=5, seed=42, checkpoint=False)


@pytest.fixture(scope="module")
def lake(store, tmp_path_factory):
    from warehouse.lake.layout import Layout

    layout = Layout.resolve(home=tmp_path_factory.mktemp("home"))
    summary = ingest(layout, roots=[store.global_dir], workers=2)  # in parallel processes
    return layout, summary


def test_every_stage_is_covered_and_ingested(store, lake):
    layout, summary = lake
    assert {d.stage for d in store.dbs} == {4, 5, 6, 7}
    assert [r.status for r in summary.results] == ["ok"] * len(store.dbs)
    assert sorted(r.migrations for r in summary.results) == sorted(d.stage for d in store.dbs)
    assert all(r.reconciled for r in summary.results), [r.reconcile for r in summary.results]


def test_root_cost_to_the_cent_per_project(store, lake):
    layout, _ = lake
    got = dict(query(layout, "SELECT project_path, SUM(cost_usd) FROM sessions WHERE is_root GROUP BY 1"))
    want = {str(d.project_path): d.root_cost for d in store.dbs}
    assert got.keys() == want.keys()
    for path, cost in want.items():
        assert round(got[path], 6) == round(cost, 6)
    # summing every session would count sub-agents twice: the data really has sub-agents
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions") > store.root_cost + 0.005


def test_row_totals(store, lake):
    layout, _ = lake
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == store.sessions
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == store.messages
    assert scalar(layout, "SELECT COUNT(*) FROM file_versions") == sum(d.file_versions for d in store.dbs)
    assert scalar(layout, "SELECT COUNT(*) FROM read_files") == sum(d.read_files for d in store.dbs)
    assert scalar(layout, "SELECT COUNT(*) FROM quarantine") == 0


def test_parts_per_type(store, lake):
    layout, _ = lake
    assert Counter(dict(query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1"))) == store.parts_by_type


def test_tool_calls_per_tool_and_errors(store, lake):
    layout, _ = lake
    got = Counter(dict(query(layout, "SELECT tool_name, COUNT(*) FROM tool_calls WHERE has_call GROUP BY 1")))
    assert got == store.tool_calls_by_name
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE is_error") == store.tool_errors
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE NOT has_call") == 0


def test_message_count_column_matches_rows(lake):
    layout, _ = lake
    assert query(layout, """
        SELECT s.session_id FROM sessions s LEFT JOIN messages m USING (session_id)
        GROUP BY s.session_id, s.message_count HAVING COUNT(m.message_id) <> s.message_count""") == []


def test_daily_costs_add_up_to_the_root_costs(store, lake):
    layout, _ = lake
    got = dict(query(layout, "SELECT project, SUM(cost_usd) FROM daily_costs GROUP BY 1"))
    want = {}
    for d in store.dbs:
        slug = d.project_path.name
        want[slug] = want.get(slug, 0) + d.root_cost
    assert {k: round(float(v), 6) for k, v in got.items()} == {k: round(v, 6) for k, v in want.items()}
    # and every root session's shares sum to its own cost, to the nano-dollar
    assert query(layout, """
        WITH shares AS (SELECT project, SUM(cost_usd) AS s FROM daily_costs GROUP BY 1),
             roots AS (SELECT project, SUM(CAST(ROUND(cost_usd * 1e9) AS HUGEINT)) / 1e9 AS r
                       FROM sessions WHERE is_root GROUP BY 1)
        SELECT project FROM shares JOIN roots USING (project) WHERE abs(s::DOUBLE - r) > 1e-9""") == []
