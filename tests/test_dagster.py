"""The Dagster layer: definitions load, assets materialise per agent and project, the sensor and
schedule."""

import logging
import sqlite3
from datetime import datetime, timezone

import dagster as dg
import pytest

from pipelines.defs.lake.assets import landing
from pipelines.defs.resources import AgentlakeResource
from pipelines.defs.warehouse.assets import tables_and_marts
from tests.conftest import T0, query, scalar
from tests.support_dagster import agentlake_instance, schedule_tick, sensor_tick
from transforms.synth.crush import add_message, add_session
from transforms.synth.crush_parts import text_part


@pytest.fixture
def instance():
    with agentlake_instance() as inst:  # a real (temporary) instance: schedules need its ref
        yield inst


def _resource(layout, *stores) -> AgentlakeResource:
    return AgentlakeResource(home=str(layout.home), extra_stores={"crush": [str(s) for s in stores]},
                             use_default=False)


def _partitions(resource) -> list[str]:
    return sorted({s.dagster_partition for s in resource.discover()[0].values()})


def _store(project, name, cost=0.5, messages=1):
    p = project(name)
    add_session(p.conn, "s", title="t", created_at=T0, cost=cost)
    for n in range(messages):
        add_message(p.conn, f"m{n}" if n else "m", "s", "user", [text_part("hi")], created_at=T0 + n)
    p.close()
    return p


def test_definitions_load():
    from pipelines.definitions import defs

    repo = defs.get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    # the graph is the data model: extraction, one asset per table, one per mart
    from warehouse.catalog.marts import MARTS

    assert keys == {"landing", "sessions", "messages", "parts", "tool_calls", "file_versions", "read_files",
                    "usage", "quarantine", "sources", "model_names", "search_index"} | set(MARTS)
    assert {"daily_costs", "session_summary", "tool_usage", "shell_commands", "file_activity", "model_usage",
            "token_usage"} <= set(MARTS)
    marts = repo.asset_graph.get(dg.AssetKey("daily_costs"))
    assert dg.AssetKey("sessions") in marts.parent_keys
    assert marts.automation_condition is not None  # a run launched from the UI updates the marts
    sensors = {s.name: s for s in repo.sensor_defs}
    assert sensors["update_tables_and_marts"].default_status == dg.DefaultSensorStatus.RUNNING
    assert "default_automation_condition_sensor" not in sensors  # Dagster's own starts stopped
    assert repo.get_sensor_def("discover_sources") and repo.get_schedule_def("daily_full_refresh")


def test_sensor_adds_partitions_and_requests_only_changed_sources(layout, project, instance):
    a, b = _store(project, "alpha"), _store(project, "beta")
    resource = _resource(layout, a.db, b.db)
    result = sensor_tick(instance, resource)
    keys = list(result.dynamic_partitions_requests[0].partition_keys)
    assert keys == ["crush-alpha", "crush-beta"]  # a partition per agent and project
    (both,) = result.run_requests  # neighbours share one run, over the range
    assert both.tags["dagster/asset_partition_range_start"] == "crush-alpha"
    assert both.tags["dagster/asset_partition_range_end"] == "crush-beta"
    assert both.run_key.startswith("crush-alpha...crush-beta:")
    instance.add_dynamic_partitions("sources", keys)

    # nothing changed: no run; then one db changes: one run, for it only
    again = sensor_tick(instance, resource, result.cursor)
    assert again.run_requests == [] and again.dynamic_partitions_requests == []
    conn = sqlite3.connect(a.db)
    conn.execute("UPDATE sessions SET cost = 0.9")
    conn.commit()
    conn.close()
    third = sensor_tick(instance, resource, again.cursor)
    assert [r.partition_key for r in third.run_requests] == ["crush-alpha"]
    assert third.run_requests[0].run_key.startswith("crush-alpha:")
    # the run reads the changed source only, not every source of its partition
    (changed,) = third.run_requests
    assert changed.run_config["ops"]["landing"]["config"]["sources"] == [
        s.partition_key for s in resource.discover()[0].values() if s.project == "alpha"]


def test_the_sensor_drops_the_per_source_partitions_of_an_older_version(layout, project, instance):
    """An older version registered a partition per source (`crush-alpha-1a2b3c4d`). The nightly
    run over every partition would fail on them: each one whose source is found is deleted, and
    its project's partition added."""
    a = _store(project, "alpha")
    resource = _resource(layout, a.db)
    (old_key,) = resource.discover()[0]
    instance.add_dynamic_partitions("sources", [old_key, "crush-gone-12345678"])
    result = sensor_tick(instance, resource)
    add, delete = result.dynamic_partitions_requests
    assert list(add.partition_keys) == ["crush-alpha"]
    assert list(delete.partition_keys) == sorted([old_key, "crush-gone-12345678"])  # found or not


def test_a_project_named_like_an_old_per_source_key_keeps_its_partition_once_gone(layout, project, instance,
                                                                                   tmp_path):
    """A project whose name ends in 8 hex digits (`hotfix-20261201`) has a partition shaped like
    an older version's per-source key: once its store was gone, the sensor deleted it, history
    and all, where DAGSTER.md says a partition whose sources are gone stays registered."""
    import shutil

    a, b = _store(project, "alpha"), _store(project, "hotfix-20261201")
    resource = _resource(layout, a.db, b.db)
    instance.add_dynamic_partitions("sources", _partitions(resource))
    assert dg.materialize([landing], partition_key="crush-hotfix-20261201", instance=instance,
                          resources={"agentlake": resource}).success
    # and one whose only run failed (a store that is no database): its failure's history stays too
    c = project("fix-cafebabe")
    c.close()
    c.db.write_bytes(b"not a database " * 100)
    resource = _resource(layout, a.db, b.db, c.db)
    instance.add_dynamic_partitions("sources", ["crush-fix-cafebabe"])
    assert not dg.materialize([landing], partition_key="crush-fix-cafebabe", instance=instance,
                              resources={"agentlake": resource}, raise_on_error=False).success
    shutil.rmtree(b.db.parent.parent)  # the projects' stores are gone
    shutil.rmtree(c.db.parent.parent)
    result = sensor_tick(instance, resource)
    assert not [r for r in result.dynamic_partitions_requests if isinstance(r, dg.DeleteDynamicPartitionsRequest)]


def test_materialize_one_source_partition_and_the_views(layout, project, instance):
    a, b = _store(project, "alpha", cost=0.5), _store(project, "beta", cost=0.25)
    resource = _resource(layout, a.db, b.db)
    instance.add_dynamic_partitions("sources", _partitions(resource))
    key = "crush-alpha"
    result = dg.materialize([landing], partition_key=key, instance=instance,
                            resources={"agentlake": resource})
    assert result.success
    mats = result.get_asset_materialization_events()
    assert {m.partition for m in mats} == {key}
    (lake,) = [m.materialization.metadata for m in mats]
    assert lake["rows_sessions"].value == 1 and lake["rows_messages"].value == 1 and lake["status"].value == "ok"
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    assert checks == {"rows_reconcile": True, "unknown_part_types": True}

    tables = dg.materialize([tables_and_marts], instance=instance, resources={"agentlake": resource})
    assert tables.success
    table_checks = {(c.asset_key.to_user_string(), c.check_name): c.passed for c in tables.get_asset_check_evaluations()}
    assert table_checks[("sessions", "keys_unique")] and table_checks[("messages", "no_orphans")]
    assert all(table_checks.values())  # keys and parents, per source, on every table
    rows = {m.asset_key.to_user_string(): m.materialization.metadata["rows"].value
            for m in tables.get_asset_materialization_events() if "rows" in m.materialization.metadata}
    assert rows["sessions"] == 1 and rows["messages"] == 1 and "daily_costs" in rows
    assert query(layout, "SELECT project, cost_usd FROM sessions") == [("alpha", 0.5)]


def test_what_the_merge_says_is_in_the_runs_log(layout, project, instance):
    """The merge's warnings (a landing file that is not Parquet, two machines' copies of a
    session) went to the terminal only: a run from the UI or the sensor has none to read."""
    a = _store(project, "alpha")
    resource = _resource(layout, a.db)
    instance.add_dynamic_partitions("sources", _partitions(resource))
    assert dg.materialize([landing], partition_key="crush-alpha", instance=instance,
                          resources={"agentlake": resource}).success
    stray = layout.lake / "_landing" / "other" / "dev" / "crush" / "0123456789abcdef" / "sessions.parquet"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"not parquet")
    tables = dg.materialize([tables_and_marts], instance=instance, resources={"agentlake": resource})
    assert tables.success
    warned = [e.user_message for e in instance.all_logs(tables.run_id) if e.level == logging.WARNING]
    assert any("is not a Parquet file (11 bytes, not starting with PAR1)" in m for m in warned), warned


def test_failed_source_fails_its_partition_with_the_reason(layout, project, instance, tmp_path):
    bad_dir = tmp_path / "broken" / ".crush"
    bad_dir.mkdir(parents=True)
    (bad_dir / "crush.db").write_bytes(b"\0" * 4096)
    resource = _resource(layout, bad_dir / "crush.db")
    (key,) = _partitions(resource)
    instance.add_dynamic_partitions("sources", [key])
    result = dg.materialize([landing], partition_key=key, instance=instance, raise_on_error=False,
                            resources={"agentlake": resource})
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "crush.db" in failure.event_specific_data.error.message
    from warehouse.catalog.build import refresh

    refresh(layout.lake, layout.warehouse, marts=False)  # `sources` is a table: the marts are not read
    assert scalar(layout, "SELECT status FROM sources") == "failed"


def test_a_partition_no_longer_discovered_fails_with_the_reason(layout, project, instance):
    """Issue 12 item 24: Materialize on a partition the resource cannot discover (a demo source
    seen from the UI's default settings) ended in SUCCESS having done nothing."""
    a = _store(project, "alpha")
    (key,) = _partitions(_resource(layout, a.db))
    instance.add_dynamic_partitions("sources", [key])
    elsewhere = _resource(layout)  # the UI's resource: it does not look where the source is
    result = dg.materialize([landing], partition_key=key, instance=instance, raise_on_error=False,
                            resources={"agentlake": elsewhere})
    assert not result.success
    assert not instance.get_materialized_partitions(dg.AssetKey("landing"))  # not marked done
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "no longer discovered" in failure.event_specific_data.error.message and key in \
        failure.event_specific_data.error.message


def test_daily_schedule_requests_a_full_refresh_of_every_source(layout, project, instance):
    stores = [_store(project, n) for n in ("a", "b", "c")]
    resource = _resource(layout, *(s.db for s in stores))
    when = datetime(2026, 3, 1, 3, tzinfo=timezone.utc)
    assert isinstance(schedule_tick(instance, resource, when), dg.SkipReason)
    instance.add_dynamic_partitions("sources", ["crush-a", "crush-b", "crush-c"])
    (request,) = schedule_tick(instance, resource, when)
    assert request.run_key == "full-refresh-2026-03-01-crush-a"
    assert request.tags["dagster/asset_partition_range_start"] == "crush-a"
    assert request.tags["dagster/asset_partition_range_end"] == "crush-c"
    assert request.run_config["ops"]["landing"]["config"]["full_refresh"] is True


def test_partition_range_run_ingests_every_source(layout, project, instance):
    """What the schedule launches: one run over a range of source partitions."""
    stores = [_store(project, n, messages=k) for k, n in enumerate(("alpha", "beta", "gamma"), 1)]
    resource = _resource(layout, *(s.db for s in stores))
    keys = _partitions(resource)
    instance.add_dynamic_partitions("sources", keys)
    result = dg.materialize(
        [landing], instance=instance, resources={"agentlake": resource},
        tags={"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]},
        run_config={"ops": {"landing": {"config": {"full_refresh": True}}}},
    )
    assert result.success
    events = result.get_asset_materialization_events()
    assert {m.partition for m in events} == set(keys)
    messages = {}
    for event in events:  # each partition's materialization has its own source's counts
        own = event.materialization.metadata
        assert own["status"].value == "ok" and own["rows_sessions"].value == 1
        messages[event.partition] = own["rows_messages"].value
    assert {name: n for key, n in messages.items() for name in ("alpha", "beta", "gamma") if name in key} == {
        "alpha": 1, "beta": 2, "gamma": 3}
    assert dg.materialize([tables_and_marts], instance=instance, resources={"agentlake": resource}).success
    assert scalar(layout, "SELECT COUNT(DISTINCT project) FROM sessions") == 3
    assert sorted(r[0] for r in query(layout, "SELECT partition_key FROM sources")) == sorted(resource.discover()[0])


def test_a_gone_partition_in_a_range_fails_alone(layout, project, instance):
    """A range run (the UI's, a backfill's) over a partition whose sources are gone fails the
    run, by name; the others in the range are still read, each with its own metadata, and the
    gone one is not reported materialised."""
    a, b = _store(project, "alpha"), _store(project, "beta")
    resource = _resource(layout, a.db, b.db)
    instance.add_dynamic_partitions("sources", ["crush-alpha", "crush-beta", "crush-gamma"])
    result = dg.materialize(
        [landing], instance=instance, raise_on_error=False,
        resources={"agentlake": resource},
        tags={"dagster/asset_partition_range_start": "crush-alpha", "dagster/asset_partition_range_end": "crush-gamma"})
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "no longer discovered" in failure.event_specific_data.error.message
    assert "crush-gamma" in failure.event_specific_data.error.message
    status = {m.partition: m.materialization.metadata["status"].value for m in result.get_asset_materialization_events()}
    assert status == {"crush-alpha": "ok", "crush-beta": "ok"}
    assert instance.get_materialized_partitions(dg.AssetKey("landing")) == {"crush-alpha", "crush-beta"}


def test_one_partition_set_and_sensor_for_every_provider(layout, project, instance, tmp_path):
    from transforms.synth.codewhale import generate_home

    crush = _store(project, "alpha")
    generate_home(tmp_path / "cw", sessions=2, workspaces=(str(crush.path),))
    resource = AgentlakeResource(home=str(layout.home), extra_stores={"crush": [str(crush.db)]},
                                 extra_roots={"codewhale": [str(tmp_path / "cw")]}, use_default=False)
    result = sensor_tick(instance, resource)
    keys = list(result.dynamic_partitions_requests[0].partition_keys)
    assert keys == ["codewhale-alpha", "crush-alpha"]  # two sessions of one project: one source
    assert len(result.run_requests) == 1  # the two new partitions: neighbours, one run
    instance.add_dynamic_partitions("sources", keys)
    run = dg.materialize([landing], instance=instance, resources={"agentlake": resource},
                         tags={"dagster/asset_partition_range_start": keys[0],
                               "dagster/asset_partition_range_end": keys[-1]})
    assert run.success
    own = {m.partition: m.materialization.metadata for m in run.get_asset_materialization_events()}
    assert own["codewhale-alpha"]["sources"].value == 1 and own["codewhale-alpha"]["rows_sessions"].value == 2
    assert own["crush-alpha"]["sources"].value == 1 and own["crush-alpha"]["sources_ok"].value == 1
    assert dg.materialize([tables_and_marts], instance=instance, resources={"agentlake": resource}).success
    assert query(layout, "SELECT provider, COUNT(*) FROM sessions GROUP BY 1 ORDER BY 1") == [
        ("codewhale", 2), ("crush", 1)]


def test_dg_lists_the_graph_dagster_dev_serves():
    """`dg list defs` (Dagster's project CLI, on pyproject's [tool.dg]) loads the same assets as
    `dagster dev -m pipelines.definitions`: `dg dev` serves them. A process of its own: the
    command a user types is what is checked."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from pipelines.definitions import defs

    root = Path(__file__).resolve().parents[1]
    ran = subprocess.run([str(Path(sys.executable).with_name("dg")), "list", "defs", "--json"], cwd=root,
                         capture_output=True, text=True, timeout=120)
    # (Dagster's one-time telemetry notice may be said on stderr: a new HOME)
    assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr
    assert "virtual environment" not in ran.stderr  # run as .venv/bin/dg, not activated: no warning
    listed = {a["asset_key"] for a in json.loads(ran.stdout)["assets"]}
    assert listed == {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"sessions", "messages", "daily_costs", "model_names", "search_index"} <= listed
    # under the location name `agentlake dev` gives it: one DAGSTER_HOME keeps one state for both
    # (dg named it after the checkout's folder, and the daemon dropped the schedule's state)
    from dagster_dg_core.context import DgContext

    assert DgContext.for_project_environment(root, {}).code_location_name == "pipelines.definitions"


def test_what_was_unknown_or_bad_is_in_the_run_log_the_metadata_and_the_check(layout, tmp_path, instance):
    """A Claude transcript with a block of an unknown type and a broken line: the CLI's summary
    named both, Dagster's run log said `ok`, the landing's metadata held no warning, and the
    unknown_part_types check failed without a description."""

    from transforms.synth.claude import base, user_line, write_jsonl

    sid, cwd, at = "7a1e2c44-1111-4222-8333-444455556666", "/home/dev/shop", datetime(2026, 1, 5, tzinfo=timezone.utc)
    home = tmp_path / "claude"
    path = write_jsonl(home / "projects" / "-home-dev-shop" / f"{sid}.jsonl", [
        user_line(sid, at, cwd, "go"),
        base("assistant", sid, at, cwd, message={"id": "m1", "type": "message", "role": "assistant",
                                                  "model": "claude-sonnet-4-5", "content": [{"type": "hologram"}],
                                                  "usage": {"input_tokens": 1, "output_tokens": 1}})])
    with open(path, "a") as fh:
        fh.write("{not json\n")
    resource = AgentlakeResource(home=str(layout.home), extra_roots={"claude": [str(home)]}, use_default=False)
    instance.add_dynamic_partitions("sources", ["claude-shop"])
    result = dg.materialize([landing], partition_key="claude-shop", instance=instance,
                            resources={"agentlake": resource}, raise_on_error=False)
    (metadata,) = [m.materialization.metadata for m in result.get_asset_materialization_events()]
    assert "unknown part types kept raw: hologram=1" in metadata["warnings"].value
    assert "1 unparseable row quarantined" in metadata["warnings"].value
    (check,) = [c for c in result.get_asset_check_evaluations() if c.check_name == "unknown_part_types"]
    assert not check.passed and check.description.endswith(": unknown part types kept raw: hologram=1")
    logged = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert any(m.endswith(": unknown part types kept raw: hologram=1") for m in logged), logged
    # the transcript grows: the part is still there, its type was named by the run that read it
    write_jsonl(path, [user_line(sid, at, cwd, "more")])
    again = dg.materialize([landing], partition_key="claude-shop", instance=instance,
                           resources={"agentlake": resource}, raise_on_error=False)
    (check,) = [c for c in again.get_asset_check_evaluations() if c.check_name == "unknown_part_types"]
    assert not check.passed and check.description == ("1 parts of unknown types kept raw, of types an earlier run "
                                                      "named (the run log, `sources`, has its warnings)")


def test_a_typo_in_config_toml_is_one_line_in_dagster_not_a_traceback(layout, project, instance):
    """`use_defualt = false` in config.toml: the landing step failed with a wrapped traceback,
    and the CLI runs' sensor logged one every 30 s. The step fails with the config's one line,
    and each sensor skips saying it."""
    from pipelines.defs.cli_runs_sensor import cli_runs_reported

    a = _store(project, "alpha")
    resource = _resource(layout, a.db)
    instance.add_dynamic_partitions("sources", _partitions(resource))
    layout.config_file.parent.mkdir(parents=True, exist_ok=True)
    layout.config_file.write_text("use_defualt = false\n")
    result = dg.materialize([landing], partition_key="crush-alpha", instance=instance,
                            resources={"agentlake": resource}, raise_on_error=False)
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    said = failure.step_failure_data.user_failure_data.description
    assert "use_defualt" in said and str(layout.config_file) in said and "Traceback" not in said, said
    tick = sensor_tick(instance, resource)
    assert isinstance(tick, dg.SkipReason) and "use_defualt" in tick.skip_message, tick
    with dg.build_sensor_context(instance=instance, resources={"agentlake": resource}) as context:
        reported = cli_runs_reported(context)
    assert isinstance(reported, dg.SkipReason) and "use_defualt" in reported.skip_message, reported
    nightly = schedule_tick(instance, resource, datetime(2026, 1, 2, 3, tzinfo=timezone.utc))
    assert isinstance(nightly, dg.SkipReason) and "use_defualt" in nightly.skip_message, nightly


def test_a_tick_that_finds_no_source_says_so(layout, instance):
    """`agentlake dev` on a home with no agent data: the sensor's tick said Dagster's "Sensor
    function returned an empty result", as after a tick that added partitions."""
    resource = AgentlakeResource(home=str(layout.home), use_default=False)
    tick = sensor_tick(instance, resource)
    assert tick.run_requests == [] and tick.skip_reason.skip_message.startswith("no source found"), tick
