"""What a Dagster user's trial found, on a real Dagster instance and real generated stores: a
range run's failed partitions are failed (not materialised), the sensor and the schedule launch
range runs of what is found, `dagster asset materialize --partition-range` and the UI's backfills
run ranges, each mart and table describes itself, the checks say what they checked, and the run's
log shows each source as it is done."""

import json
import logging
import os
import time
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

from pipelines.defs.lake.assets import GONE, landing
from pipelines.defs.partitions import sources_partitions
from pipelines.defs.resources import AgentlakeResource
from pipelines.defs.schedules import daily_full_refresh
from pipelines.defs.warehouse.assets import NOTHING_MERGED, mart_description, tables_and_marts
from pipelines.runner import contiguous_batches
from warehouse.land.ingest import mark_pending
from transforms.contract import ALL_TABLES
from tests import support_forked as forked
from tests.conftest import T0
from tests.support_dagster import agentlake_instance, schedule_tick, sensor_tick
from transforms.synth.crush import add_session, generate_store
from warehouse.catalog.marts import MARTS, mart_sql
from warehouse.lake.ducklake import connect

LANDING = dg.AssetKey("landing")
DAGSTER_CLI = "import sys\nfrom dagster._cli import main\nsys.argv[0] = 'dagster'\nsys.exit(main())\n"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def instance():
    with agentlake_instance() as inst:
        yield inst


@pytest.fixture
def store(tmp_path):
    """Four generated projects: crush-docs-site, crush-infra-tools, crush-ml-pipeline, crush-webshop."""
    return generate_store(tmp_path / "crush", projects=4, sessions_per_project=2, seed=5)


def _home(tmp_path, store, *extra_stores) -> AgentlakeResource:
    """A home whose config.toml names the stores, as a user's would: the resource reads it."""
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    roots = [str(store.global_dir)] if store else []
    (home / "config.toml").write_text(
        f"use_default = false\n[crush]\nextra_roots = {json.dumps(roots)}\n"
        f"extra_stores = {json.dumps([str(s) for s in extra_stores])}\n")
    return AgentlakeResource(home=str(home))


def _broken(tmp_path, name="ledger") -> Path:
    data = tmp_path / name / ".crush"
    data.mkdir(parents=True)
    (data / "crush.db").write_bytes(os.urandom(8192))  # random bytes: not a database
    return data / "crush.db"


def _range(keys) -> dict:
    return {"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]}


def _status(instance) -> tuple[set, set]:
    """Materialised and failed partitions of `landing`, as the UI counts them (numFailed)."""
    value = get_and_update_asset_status_cache_value(instance, LANDING, sources_partitions, instance)
    subset = sources_partitions.deserialize_subset
    return (set(subset(value.serialized_materialized_partition_subset).get_partition_keys()),
            set(subset(value.serialized_failed_partition_subset).get_partition_keys())
            if value.serialized_failed_partition_subset else set())


def _logged(instance, run_id) -> list[str]:
    return [e.user_message for e in instance.all_logs(run_id) if e.dagster_event is None]


def _run(instance, resource, tags, config=None):
    return dg.materialize([landing], instance=instance, raise_on_error=False, tags=tags,
                          resources={"agentlake": resource},
                          run_config={"ops": {"landing": {"config": config or {}}}})


# 1. failed and gone partitions of a range are failed, not materialised; 7. progress in the log

def test_a_range_run_materialises_the_partitions_that_landed_and_fails_the_others(tmp_path, store, instance):
    resource = _home(tmp_path, store, _broken(tmp_path))
    keys = sorted({s.dagster_partition for s in resource.discover()[0].values()})
    assert keys == ["crush-docs-site", "crush-infra-tools", "crush-ledger", "crush-ml-pipeline", "crush-webshop"]
    instance.add_dynamic_partitions("sources", keys + ["crush-zeta"])  # crush-zeta: its store is gone
    run = _run(instance, resource, _range(["crush-docs-site", "crush-zeta"]))
    assert not run.success
    landed = {e.partition: e.materialization.metadata for e in run.get_asset_materialization_events()}
    assert set(landed) == {"crush-docs-site", "crush-infra-tools", "crush-ml-pipeline", "crush-webshop"}
    assert {m["status"].value for m in landed.values()} == {"ok"}
    assert all(m["rows_sessions"].value for m in landed.values())
    materialised, failed = _status(instance)
    assert materialised == set(landed) and failed == {"crush-ledger", "crush-zeta"}  # not green, and counted
    error = next(e for e in run.all_events if e.event_type_value == "STEP_FAILURE").event_specific_data.error.message
    assert "crush-ledger" in error and "crush.db" in error and GONE in error and "crush-zeta" in error
    # each source in the run's log as it was done: partition, status, rows or the error
    progress = [m for m in _logged(instance, run.run_id) if m.startswith("[")]
    assert len(progress) == 5 and {m.split("/", 1)[1].split("]")[0] for m in progress} == {"5"}
    assert any("crush-ledger: failed" in m and "crush.db" in m for m in progress)
    assert any("crush-webshop: ok" in m and "sessions" in m and "messages" in m for m in progress)

    # the broken store taken out of the config: crush-ledger is gone, in the middle of the range;
    # it fails by name again, and the others are materialised again
    resource = _home(tmp_path, store)
    again = _run(instance, resource, _range(["crush-docs-site", "crush-webshop"]))
    assert not again.success
    assert {e.partition for e in again.get_asset_materialization_events()} == set(landed)
    assert _status(instance) == (set(landed), {"crush-ledger", "crush-zeta"})


def test_a_single_partition_that_fails_is_not_materialised(tmp_path, store, instance):
    resource = _home(tmp_path, store, _broken(tmp_path))
    instance.add_dynamic_partitions("sources", ["crush-ledger", "crush-webshop"])
    run = dg.materialize([landing], partition_key="crush-ledger", instance=instance, raise_on_error=False,
                         resources={"agentlake": resource})
    assert not run.success and not run.get_asset_materialization_events()
    assert _status(instance) == (set(), {"crush-ledger"})
    # a partition no longer discovered fails with that reason, before anything is read
    gone = dg.materialize([landing], partition_key="crush-webshop", instance=instance, raise_on_error=False,
                          resources={"agentlake": _home(tmp_path / "elsewhere", None)})
    assert not gone.success
    failure = next(e for e in gone.all_events if e.event_type_value == "STEP_FAILURE")
    assert GONE in failure.event_specific_data.error.message
    assert _status(instance) == (set(), {"crush-ledger", "crush-webshop"})


# 2. the sensor: as few range runs as the partition order allows

def test_the_sensor_requests_changed_partitions_as_contiguous_ranges(tmp_path, store, instance, project):
    resource = _home(tmp_path, store)
    first = sensor_tick(instance, resource)
    (added,) = first.dynamic_partitions_requests
    keys = list(added.partition_keys)
    (cold,) = first.run_requests  # every partition new: one run, not one per partition
    assert cold.partition_key is None and cold.tags == _range(keys)
    instance.add_dynamic_partitions("sources", keys)  # as the daemon does before launching the run
    run = _run(instance, resource, cold.tags, cold.run_config["ops"]["landing"]["config"])
    assert run.success and {e.partition for e in run.get_asset_materialization_events()} == set(keys)

    # two projects changed apart, plus a new one (added last in the order): three ranges at most
    for db in store.dbs:
        if db.path.parent.parent.name in ("docs-site", "ml-pipeline", "webshop"):
            os.utime(db.path, (time.time() + 60, time.time() + 60))
    more = project("api-gateway")
    add_session(more.conn, "s", title="t", created_at=T0, cost=0.5)
    more.close()
    resource = _home(tmp_path, store, more.db)
    tick = sensor_tick(instance, resource, first.cursor)
    new = [k for r in tick.dynamic_partitions_requests for k in r.partition_keys]
    assert new == ["crush-api-gateway"]
    order = keys + new
    changed = ["crush-docs-site", "crush-ml-pipeline", "crush-webshop", "crush-api-gateway"]
    expected = contiguous_batches(changed, order)
    assert expected == [["crush-docs-site"], ["crush-ml-pipeline", "crush-webshop", "crush-api-gateway"]]
    assert [(r.partition_key, r.tags.get("dagster/asset_partition_range_start"),
             r.tags.get("dagster/asset_partition_range_end")) for r in tick.run_requests] == [
        ("crush-docs-site", None, None), (None, "crush-ml-pipeline", "crush-api-gateway")]
    # each run reads its partitions' changed sources only
    found = resource.discover()[0]
    for request, batch in zip(tick.run_requests, expected):
        assert request.run_config["ops"]["landing"]["config"]["sources"] == sorted(
            key for key, s in found.items() if s.dagster_partition in batch)


def test_a_sensor_run_of_what_the_cli_landed_is_settled_without_workers(tmp_path, store, instance, monkeypatch):
    """The CLI landed a change before the sensor saw it, and its merge has not run: the sensor's
    run finds every source unchanged, settles them in its own process (no worker pool, most of
    such a run's time: docs/BENCHMARKS.md, "Figures behind the code's choices"), and the merge it
    triggers takes the pending marker away, so the next CLI run with nothing changed stays out of
    Dagster."""
    import pipelines.defs.lake.assets as assets
    from pipelines.runner import run_ingest

    resource = _home(tmp_path, store)
    layout = resource.layout()
    # unset for the CLI's run only (the home's own Dagster home, as with no DAGSTER_HOME set; not
    # the test instance's, which instance_for_test set): undone at the test's end, after
    # `instance` restored the variable to what it found, it would leave that home set for every
    # later test
    with monkeypatch.context() as env:
        env.delenv("DAGSTER_HOME")
        summary = run_ingest(layout, resource.options(), quiet=True)  # the CLI's `agentlake ingest`
    assert summary.by_status["ok"] == 4 and not layout.pending_marker.exists()
    # what it landed waits for a merge (an ingest killed before it, say): the sensor asks for a run,
    # whose landing has the merge done; with nothing waiting it asks for none (test_dev_opens_as_is)
    mark_pending(layout)
    tick = sensor_tick(instance, resource)
    instance.add_dynamic_partitions("sources", list(tick.dynamic_partitions_requests[0].partition_keys))
    handed = []
    real = assets.land
    monkeypatch.setattr(assets, "land",
                        lambda sources, *a, **k: handed.extend(sources) or real(sources, *a, **k))
    (request,) = tick.run_requests
    run = _run(instance, resource, request.tags, request.run_config["ops"]["landing"]["config"])
    assert run.success and handed == []
    assert {e.materialization.metadata["status"].value for e in run.get_asset_materialization_events()} == {"unchanged"}
    checks = {c.check_name: c for c in run.get_asset_check_evaluations()}
    assert checks["rows_reconcile"].metadata["sources_checked"].value == 0
    assert checks["rows_reconcile"].description == "No source was read in this run: nothing to reconcile."
    assert layout.pending_marker.exists()  # landing marks it before it writes
    merge = dg.materialize([tables_and_marts], instance=instance, resources={"agentlake": resource})
    assert merge.success and not layout.pending_marker.exists()


# 3. ranges from Dagster's own CLI, and the UI's backfills

def test_dagster_cli_materialises_a_partition_range(tmp_path, store):
    resource = _home(tmp_path, store)
    dagster_home = tmp_path / "dagster"
    dagster_home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home), "AGENTLAKE_HOME": resource.home}
    with dg.DagsterInstance.from_config(str(dagster_home)) as inst:
        inst.add_dynamic_partitions("sources", sorted({s.dagster_partition for s in resource.discover()[0].values()}))
    # the `dagster` command's own main, in a process of its own that imported Dagster already
    done = forked.finished(forked.code(DAGSTER_CLI, "asset", "materialize", "-m", "pipelines.definitions",
                                       "--select", "landing", "--partition-range", "crush-infra-tools...crush-webshop",
                                       cwd=ROOT, env=env))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "crush-ml-pipeline: ok" in done.stderr  # the progress lines
    with dg.DagsterInstance.from_config(str(dagster_home)) as inst:
        assert inst.get_materialized_partitions(LANDING) == {"crush-infra-tools", "crush-ml-pipeline", "crush-webshop"}


def test_a_ui_backfill_runs_one_range_per_contiguous_selection(tmp_path, store, monkeypatch):
    """The backfill daemon, as the UI's "Materialize selected" over partitions starts it."""
    from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
    from dagster._core.test_utils import create_test_daemon_workspace_context
    from dagster._core.workspace.load_target import ModuleTarget
    from dagster._daemon.backfill import execute_backfill_iteration

    resource = _home(tmp_path, store)
    monkeypatch.setenv("AGENTLAKE_HOME", resource.home)
    keys = sorted({s.dagster_partition for s in resource.discover()[0].values()})
    selected = [k for k in keys if k != "crush-ml-pipeline"]  # two ranges
    launcher = {"run_launcher": {"module": "dagster._core.launcher.sync_in_memory_run_launcher",
                                 "class": "SyncInMemoryRunLauncher"},
                "run_coordinator": {"module": "dagster._core.run_coordinator", "class": "DefaultRunCoordinator"}}
    with agentlake_instance(overrides=launcher) as inst:
        inst.add_dynamic_partitions("sources", keys)
        target = ModuleTarget(module_name="pipelines.definitions", attribute=None, working_directory=str(ROOT),
                              location_name="agentlake")
        with create_test_daemon_workspace_context(target, inst) as workspace:
            inst.add_backfill(PartitionBackfill.from_asset_partitions(
                backfill_id="ui", asset_graph=workspace.create_request_context().asset_graph,
                partition_names=selected, asset_selection=[LANDING], backfill_timestamp=time.time(), tags={},
                dynamic_partitions_store=inst, all_partitions=False, title=None, description=None, run_config=None))
            for _ in range(3):
                list(execute_backfill_iteration(workspace, logging.getLogger("backfill")))
            runs = inst.get_runs()
            ranges = sorted((r.tags["dagster/asset_partition_range_start"], r.tags["dagster/asset_partition_range_end"])
                            for r in runs)
            assert ranges == [("crush-docs-site", "crush-infra-tools"), ("crush-webshop", "crush-webshop")]
            assert all(r.is_success for r in runs)
            assert inst.get_backfill("ui").status == BulkActionStatus.COMPLETED_SUCCESS
            assert inst.get_materialized_partitions(LANDING) == set(selected)


# 4. the nightly schedule: what is found now, in ranges; 8. its time zone

def test_the_schedule_refreshes_the_partitions_found_now_in_ranges(tmp_path, store, instance):
    resource = _home(tmp_path, store)
    keys = sorted({s.dagster_partition for s in resource.discover()[0].values()})
    # a project whose store is gone stays registered, between two that are found
    instance.add_dynamic_partitions("sources", keys[:2] + ["crush-gone"] + keys[2:])
    when = datetime(2026, 3, 1, 3, tzinfo=timezone.utc)
    requests = schedule_tick(instance, resource, when)
    assert [r.tags for r in requests] == [_range(keys[:2]), _range(keys[2:])]
    assert len({r.run_key for r in requests}) == 2
    assert all(r.run_key.startswith("full-refresh-2026-03-01") for r in requests)
    for request in requests:
        run = _run(instance, resource, request.tags, request.run_config["ops"]["landing"]["config"])
        assert run.success
    assert _status(instance) == (set(keys), set())  # the gone one not attempted, so not failed
    assert daily_full_refresh.execution_timezone == "UTC" and "03:00 UTC" in daily_full_refresh.description


# 5. descriptions and column schemas; 6. what the checks checked

def test_each_mart_and_table_describes_itself():
    from pipelines.definitions import defs

    graph = defs.get_repository_def().asset_graph
    marts = {name: graph.get(dg.AssetKey(name)).description for name in MARTS}
    assert len(set(marts.values())) == len(MARTS) and not any("Merge what landed" in d for d in marts.values())
    assert marts["daily_costs"].startswith("Root-session cost spread over days and models. Rule:")
    unused = marts["insight_unused_reads"]  # its `-- threads: 1` note left out
    assert unused.startswith("Per root session") and "threads" not in unused
    sql = dict(mart_sql())
    assert all(mart_description(name, sql[name]) == marts[name] for name in MARTS)
    for table in ALL_TABLES:
        node = graph.get(dg.AssetKey(table.name))
        assert node.description == table.doc
        columns = node.metadata["dagster/column_schema"].columns
        assert [c.name for c in columns] == ["date", "project", *table.column_names]
        assert all(c.description for c in columns)


def test_the_column_schemas_are_the_tables_and_the_checks_say_what_they_checked(tmp_path, store, instance):
    from pipelines.definitions import defs

    resource = _home(tmp_path, store)
    keys = sorted({s.dagster_partition for s in resource.discover()[0].values()})
    instance.add_dynamic_partitions("sources", keys)
    assert _run(instance, resource, _range(keys)).success
    merged = dg.materialize([tables_and_marts], instance=instance, resources={"agentlake": resource})
    checks = [c for c in merged.get_asset_check_evaluations() if c.check_name != "within_budgets"]
    assert checks and all(c.passed and c.metadata["sources_checked"].value == 4 and c.description is None
                          for c in checks)
    (budgets,) = [c for c in merged.get_asset_check_evaluations() if c.check_name == "within_budgets"]
    assert budgets.passed and budgets.description.startswith("No budget is set in ")  # tests/test_budgets.py
    again = dg.materialize([tables_and_marts], instance=instance, resources={"agentlake": resource})
    checks = [c for c in again.get_asset_check_evaluations()  # nothing merged: nothing checked, and said
              if c.check_name != "within_budgets"]
    assert checks and all(c.metadata["sources_checked"].value == 0 and c.description == NOTHING_MERGED
                          for c in checks)
    graph = defs.get_repository_def().asset_graph
    with connect(resource.layout().warehouse) as con:
        for table in ALL_TABLES:
            described = [(n, t) for n, t, *_ in con.execute(f'DESCRIBE "{table.name}"').fetchall()]
            schema = graph.get(dg.AssetKey(table.name)).metadata["dagster/column_schema"]
            assert described == [(c.name, c.type) for c in schema.columns], table.name
