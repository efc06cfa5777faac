"""What `agentlake ingest` leaves for Dagster (pipelines/cli_runs.py), and how the sensor of
`agentlake dev` reports it (pipelines/defs/cli_runs_sensor.py) when runs end out of order, a
source keeps failing, or the warehouse is gone."""

import json
import shutil
from pathlib import Path

import dagster as dg

from pipelines import cli_runs
from pipelines.cli import main
from pipelines.defs.cli_runs_sensor import cli_runs_reported
from pipelines.defs.resources import AgentlakeResource
from tests.conftest import T0
from transforms.synth.crush import add_message, add_session
from transforms.synth.crush_parts import text_part
from warehouse.lake.layout import Layout


def _records(layout: Layout) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(cli_runs.folder(layout).glob("*.json"))]


def _tick(instance, home, cursor=None):
    resource = AgentlakeResource(home=str(home))
    with dg.build_sensor_context(instance=instance, cursor=cursor, resources={"agentlake": resource}) as context:
        return cli_runs_reported(context)


def test_runs_that_end_out_of_order_are_each_reported_once(tmp_path):
    """Two ingests at once (a scheduled one beside a manual one) finish in either order: a run
    kept after the last tick is reported whatever its name, and what a tick reported is removed
    by the next."""
    layout = Layout.resolve(home=tmp_path / "home")
    where = cli_runs.folder(layout)
    where.mkdir(parents=True)
    record = {"run_id": "r", "warehouse": str(layout.warehouse), "partitions": {}, "landing_checks": {}, "merge": None}
    (where / "2-b.json").write_text(json.dumps({**record, "run_id": "b"}))
    first = cli_runs.after(layout, [], 20)
    assert [name for name, _ in first] == ["2-b.json"]
    (where / "1-a.json").write_text(json.dumps({**record, "run_id": "a"}))  # started first, kept last
    second = cli_runs.after(layout, [name for name, _ in first], 20)
    assert [r["run_id"] for _, r in second] == ["a"]
    assert sorted(p.name for p in where.iterdir()) == ["1-a.json"]
    assert cli_runs.after(layout, ["1-a.json"], 20) == [] and not any(where.iterdir())


def test_a_source_that_keeps_failing_leaves_one_run_not_one_per_ingest(project, tmp_path, monkeypatch, capsys):
    """The failed source is read once, and reported as an observation of its partition with the
    error, not as materialized; the next ingests settle it as failed without reading it, and leave
    nothing for Dagster (no Dagster run would have started for them either)."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    good = project("good")
    add_session(good.conn, "s", title="t", created_at=T0, cost=0.5)
    add_message(good.conn, "m", "s", "user", [text_part("hi")], created_at=T0)
    good.close()
    bad = tmp_path / "bad" / ".crush"
    bad.mkdir(parents=True)
    (bad / "crush.db").write_bytes(b"")
    home = tmp_path / "home"
    argv = ["ingest", "--quiet", "--home", str(home), "--no-default", "--db", str(good.db), "--db", str(bad / "crush.db")]
    for _ in range(3):
        assert main(argv) == 1
    capsys.readouterr()
    layout = Layout.resolve(home=home)
    [kept] = _records(layout)
    statuses = {key: metadata["status"] for key, metadata in kept["partitions"].items()}
    assert sorted(statuses.values()) == ["failed", "ok"]
    with dg.instance_for_test() as instance:
        tick = _tick(instance, home)
    failed = next(key for key, status in statuses.items() if status == "failed")
    [observed] = [e for e in tick.asset_events if isinstance(e, dg.AssetObservation)]
    assert observed.partition == failed and "not a Crush database" in observed.metadata["error"].value
    landed = {e.partition for e in tick.asset_events if isinstance(e, dg.AssetMaterialization) and e.partition}
    assert landed == set(statuses) - {failed}


def test_a_warehouse_gone_since_the_run_still_reports_it_without_checks(project, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    p = project("cli-proj")
    add_session(p.conn, "s", title="t", created_at=T0, cost=0.5)
    p.close()
    home = tmp_path / "home"
    assert main(["ingest", "--quiet", "--home", str(home), "--no-default", "--db", str(p.db)]) == 0
    capsys.readouterr()
    layout = Layout.resolve(home=home)
    shutil.move(layout.warehouse, tmp_path / "elsewhere.ducklake")
    with dg.instance_for_test() as instance:
        tick = _tick(instance, home)
    kinds = {type(e).__name__ for e in tick.asset_events}
    assert kinds == {"AssetMaterialization", "AssetCheckEvaluation"}
    checks = {e.check_name for e in tick.asset_events if isinstance(e, dg.AssetCheckEvaluation)}
    assert checks == {"rows_reconcile", "unknown_part_types"}  # the landing's, from the run itself
    sessions = next(e for e in tick.asset_events if isinstance(e, dg.AssetMaterialization) and e.asset_key.path == ["sessions"])
    assert "rows" not in sessions.metadata and sessions.metadata["rows_inserted"].value == 1


def test_what_another_run_landed_is_said_as_it_came_to_the_warehouse(project, tmp_path, monkeypatch, capsys):
    """The sources a run merges that another run landed: into a warehouse that merged before, a run
    that stopped before its merge (or one beside it); into a new warehouse over a lake that holds
    them (a new or wiped home, docs/LAKE.md), what an earlier run landed (a trial: the first reason
    was said for both)."""
    from tests.conftest import discover_only
    from warehouse.land.ingest import ingest_all

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    stores = []
    for name in ("one", "two"):
        p = project(name)
        add_session(p.conn, "s", title=name, created_at=T0, cost=0.5)
        add_message(p.conn, "m", "s", "user", [text_part("hi")], created_at=T0)
        p.close()
        stores += ["--db", str(p.db)]
    home = tmp_path / "home"
    assert main(["ingest", "--home", str(home), "--no-default", *stores[:2]]) == 0
    sources, problems = discover_only(Path(stores[3]))
    ingest_all(sources, Layout.resolve(home=home), problems=problems)  # landed by a run killed before its merge
    capsys.readouterr()
    assert main(["ingest", "--home", str(home), "--no-default", *stores]) == 0
    out = capsys.readouterr().out
    assert "sources: 0 ok, 2 unchanged" in out
    assert "merged too: 1 sources another run landed but had not merged (one that stopped" in out
    new = tmp_path / "new"
    shutil.copytree(home / "lake", new / "lake")  # a new home over the same lake
    assert main(["ingest", "--home", str(new), "--no-default", *stores]) == 0
    out = capsys.readouterr().out
    assert "sources: 0 ok, 2 unchanged" in out and "another run" not in out
    assert "merged too: 2 sources an earlier run landed in the lake, merged into this new warehouse" in out
    assert main(["sql", "--home", str(new), "--format", "csv", "SELECT COUNT(*) FROM sessions"]) == 0
    assert capsys.readouterr().out.split() == ["count_star()", "2"]


def test_a_run_killed_after_landing_is_reported_by_the_next_that_merges_it(project, tmp_path, monkeypatch, capsys):
    """A run killed between its landing and its end (kill -9: no `finally`) records neither its
    landings for Dagster nor a summary. The next run finds those sources settled and merges their
    files: its summary says it merged them, and its record carries their partitions, so Dagster
    shows them landed (they stayed "never materialized": a new user's trial)."""
    from tests.conftest import discover_only
    from warehouse.land.ingest import ingest_all

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    p = project("killed")
    add_session(p.conn, "s", title="t", created_at=T0, cost=0.5)
    add_message(p.conn, "m", "s", "user", [text_part("hi")], created_at=T0)
    p.close()
    home = tmp_path / "home"
    layout = Layout.resolve(home=home)
    sources, problems = discover_only(p.db)
    ingest_all(sources, layout, problems=problems)  # landed, as the killed run left it: no merge, no record
    assert not _records(layout)
    assert main(["ingest", "--home", str(home), "--no-default", "--db", str(p.db)]) == 0
    out = capsys.readouterr().out
    assert "sources: 0 ok, 1 unchanged" in out
    assert "merged too: 1 sources an earlier run landed in the lake, merged into this new warehouse" in out
    [kept] = _records(layout)
    [(key, metadata)] = kept["partitions"].items()
    assert key == sources[0].dagster_partition and metadata["landed_by"].startswith("another run that had not merged it")
    with dg.instance_for_test() as instance:
        tick = _tick(instance, home)
    assert {e.partition for e in tick.asset_events if isinstance(e, dg.AssetMaterialization) and e.partition} == {key}


def test_a_full_merge_of_a_prices_change_is_not_said_to_merge_a_stopped_runs_landings(project, tmp_path, monkeypatch,
                                                                                    capsys):
    """A full merge reads every source again (a price changed in config.toml): those landed long
    ago are not an earlier run's unmerged landings (a review of this stop found it said so)."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    p = project("priced")
    add_session(p.conn, "s", title="t", created_at=T0, cost=0.5)
    p.close()
    home = tmp_path / "home"
    argv = ["ingest", "--home", str(home), "--no-default", "--db", str(p.db)]
    assert main(argv) == 0
    (home / "config.toml").write_text('[[prices]]\nmodel = "m"\ninput = 1\noutput = 2\n')
    capsys.readouterr()
    assert main(argv) == 0
    assert "merged too" not in capsys.readouterr().out
