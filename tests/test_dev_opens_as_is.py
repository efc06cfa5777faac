"""Issue 32, item 16: `agentlake dev` on an ingested home opens on what is there. Its sensor, with
a new cursor, launched a run over every partition (each source unchanged), whose landing then had
the tables and marts rebuilt; and the UI opened on Dagster's newsletter pop-up. Checked without a
webserver: what decides to launch a run, on the home's own Dagster instance, and the instance's
settings as agentlake writes them."""

import json
import sqlite3
from importlib import resources

import dagster as dg

from pipelines.defs.lake.assets import landing
from pipelines.defs.resources import AgentlakeResource
from pipelines.defs.warehouse.assets import tables_and_marts
from pipelines.runner import dagster_config, dagster_env
from tests.conftest import T0, ingest
from tests.support_dagster import agentlake_instance, sensor_tick
from tests.support_homes import small_demo_home
from tests.test_dagster_storage import EARLIER
from transforms.synth.crush import add_message, add_session
from transforms.synth.crush_parts import text_part
from warehouse.lake.layout import Layout
from warehouse.land.ingest import mark_pending


def test_dev_on_a_home_the_cli_ingested_launches_no_run(built_once, tmp_path, monkeypatch):
    """Every agent's sources, as `agentlake demo` ingested them (without Dagster): the sensor's
    first tick registers each agent's and project's partition and requests no run, the CLI's run
    is reported as materializations, and the automation that updates the tables and marts then
    requests nothing."""
    import shutil

    from pipelines.defs.cli_runs_sensor import cli_runs_reported
    from pipelines.definitions import defs

    built = small_demo_home(built_once)
    assert built.code == 0
    home = tmp_path / "home"
    shutil.copytree(built.home, home)  # the sensor removes the run it reported: a copy of its own
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))  # as `agentlake dev` runs Dagster there
    resource = AgentlakeResource(home=str(home))
    found = {key for key, s in resource.discover()[0].items() if not s.skip_reason}
    assert len({key.split("-")[0] for key in found}) > 10  # the demo's agents, each its own way
    with agentlake_instance() as instance:
        tick = sensor_tick(instance, resource)
        assert tick.run_requests == []
        [add] = tick.dynamic_partitions_requests
        assert set(add.partition_keys) == {s.dagster_partition for s in resource.discover()[0].values()}
        instance.add_dynamic_partitions("sources", list(add.partition_keys))
        assert set(json.loads(tick.cursor)) == found  # each source's fingerprint kept: the next tick too
        with dg.build_sensor_context(instance=instance, resources={"agentlake": resource}) as context:
            reported = cli_runs_reported(context)
        assert reported.dynamic_partitions_requests == []  # registered by the tick above
        for event in reported.asset_events:  # as Dagster's daemon records a sensor's events
            instance.report_runless_asset_event(event)
        assert dg.evaluate_automation_conditions(defs=defs, instance=instance).total_requested == 0


def _store(project, name):
    p = project(name)
    add_session(p.conn, "s", title="t", created_at=T0, cost=0.5)
    add_message(p.conn, "m", "s", "user", [text_part("hi")], created_at=T0)
    p.close()
    return p


def test_the_sensor_still_asks_for_what_the_lake_does_not_hold_as_it_is(layout, project):
    """A source changed since it landed is requested, and so is every source while a merge is due
    (what landed waits for it, an ingest killed before it; or no warehouse built yet): the run's
    landing has the merge done."""
    a, b = _store(project, "alpha"), _store(project, "beta")
    ingest(layout, a.db, b.db, marts=False)  # landed and merged, without Dagster
    layout.pending_marker.unlink()  # as the merge step of `agentlake ingest`'s Dagster run does
    resource = AgentlakeResource(home=str(layout.home), machine=layout.machine, user=layout.user,
                                 extra_stores={"crush": [str(a.db), str(b.db)]}, use_default=False)
    with agentlake_instance() as instance:
        def tick():
            return sensor_tick(instance, resource)

        first = tick()
        instance.add_dynamic_partitions("sources", list(first.dynamic_partitions_requests[0].partition_keys))
        assert first.run_requests == []  # both held as they are, and the tick says so
        assert first.skip_reason.skip_message == ("2 sources found, 2 new or changed since the last tick, 2 of them as the lake "
                                     "holds them; 2 partitions added"), first.skip_reason
        conn = sqlite3.connect(a.db)
        conn.execute("UPDATE sessions SET cost = 0.9")
        conn.commit()
        conn.close()
        (changed,) = tick().run_requests
        assert changed.partition_key == "crush-alpha"
        mark_pending(layout)
        (both,) = tick().run_requests
        assert both.tags["dagster/asset_partition_range_end"] == "crush-beta"
        # no warehouse built yet (moved away): a merge is due, as `agentlake ingest` has it
        layout.pending_marker.unlink()
        layout.warehouse.rename(layout.warehouse.with_name("moved-away.ducklake"))
        (again,) = tick().run_requests
        assert again.tags["dagster/asset_partition_range_end"] == "crush-beta"


RANGE = {"dagster/asset_partition_range_start": "crush-alpha", "dagster/asset_partition_range_end": "crush-beta"}


def test_a_run_that_finds_every_source_as_the_lake_holds_it_leaves_no_merge_due(layout, project):
    """`dagster asset materialize --select landing` over sources an ingest landed and merged: the
    run settled them, read nothing, and left the merge marker all the same, so the sensor asked
    for them again and the tables were rebuilt from nothing new."""
    a, b = _store(project, "alpha"), _store(project, "beta")
    ingest(layout, a.db, b.db, marts=False)
    layout.pending_marker.unlink()  # merged
    resource = AgentlakeResource(home=str(layout.home), machine=layout.machine, user=layout.user,
                                 extra_stores={"crush": [str(a.db), str(b.db)]}, use_default=False)
    with agentlake_instance() as instance:
        instance.add_dynamic_partitions("sources", ["crush-alpha", "crush-beta"])
        ran = dg.materialize([landing], instance=instance, resources={"agentlake": resource},
                             tags=RANGE)
        assert ran.success and not layout.merge_due
        assert sensor_tick(instance, resource).run_requests == []
        one = dg.materialize([landing], partition_key="crush-beta", instance=instance,
                             resources={"agentlake": resource})  # one source alone, settled as well
        assert one.success and not layout.merge_due
        conn = sqlite3.connect(a.db)  # a source to read: its landing waits for a merge
        conn.execute("UPDATE sessions SET cost = 0.9")
        conn.commit()
        conn.close()
        ran = dg.materialize([landing], instance=instance, resources={"agentlake": resource},
                             tags=RANGE)
        assert ran.success and layout.merge_due


def test_the_dagster_ui_opens_without_its_newsletter_pop_up(tmp_path, monkeypatch):
    """In agentlake's own Dagster home and in one set elsewhere, new or written by an earlier
    release and unedited; a dagster.yaml its user edited is kept as it is."""
    own_before = EARLIER + resources.files("pipelines").joinpath("dagster_storage.yaml").read_text()
    layout = Layout.resolve(home=tmp_path / "al")
    homes = {"own, new": (None, None), "own, an earlier release's": (None, own_before),
             "elsewhere, new": (tmp_path / "theirs", None),
             "elsewhere, an earlier release's": (tmp_path / "theirs-before", EARLIER)}
    for case, (elsewhere, before) in homes.items():
        with monkeypatch.context() as env:
            if elsewhere:
                env.setenv("DAGSTER_HOME", str(elsewhere))
            else:
                env.delenv("DAGSTER_HOME", raising=False)
            home = elsewhere or layout.dagster_home
            if before:
                home.mkdir(parents=True, exist_ok=True)
                (home / "dagster.yaml").write_text(before)
            env.setenv("DAGSTER_HOME", dagster_env(layout)["DAGSTER_HOME"])
            assert (home / "dagster.yaml").read_text() == dagster_config(own=not elsewhere), case
            with dg.DagsterInstance.from_config(str(home)) as instance:
                assert instance.nux_enabled is False, case
    edited = tmp_path / "edited"
    edited.mkdir()
    (edited / "dagster.yaml").write_text(EARLIER + "retention:\n  schedule:\n    purge_after_days: 7\n")
    monkeypatch.setenv("DAGSTER_HOME", str(edited))
    dagster_env(layout)
    assert "nux" not in (edited / "dagster.yaml").read_text()


def test_what_landed_beside_a_merge_waits_for_the_next_one_and_the_sensor_asks_for_it(layout, project,
                                                                                        monkeypatch):
    """Dagster's run landed while an `agentlake ingest` merged: the ingest's merge, started
    before, took the marker away, and its tables, reported after, looked newer than the landing:
    two runs' sources stayed unmerged until the next ingest (a trial). A merge keeps a marker
    marked since it started (by a token, not a clock), and the sensor asks for a merge once a
    marker is left waiting with no run in progress."""
    import os

    import pipelines.defs.warehouse.assets as warehouse_assets
    import warehouse.catalog.build as build
    from pipelines.defs.sensors import MERGE_WAITED_SECONDS, discover_sources, merge_left_waiting
    from pipelines.definitions import defs
    from tests.conftest import run_cli

    a = _store(project, "alpha")
    ingest(layout, a.db, marts=False)
    layout.pending_marker.unlink()
    resource = AgentlakeResource(home=str(layout.home), machine=layout.machine, user=layout.user,
                                 extra_stores={"crush": [str(a.db)]}, use_default=False)

    def landed_meanwhile(real):  # a run beside the merge lands (and marks) while it merges
        def merge(*args, **kwargs):
            mark_pending(layout)
            return real(*args, **kwargs)
        return merge

    with agentlake_instance() as instance:
        mark_pending(layout)
        monkeypatch.setattr(warehouse_assets, "refresh", landed_meanwhile(warehouse_assets.refresh))
        assert dg.materialize([tables_and_marts], instance=instance, resources={"agentlake": resource}).success
        assert layout.pending_marker.exists()  # what landed meanwhile waits for the next merge
        monkeypatch.undo()
        assert dg.materialize([tables_and_marts], instance=instance, resources={"agentlake": resource}).success
        assert not layout.pending_marker.exists()
        # `agentlake ingest`'s merge keeps it the same way
        monkeypatch.setattr(build, "refresh", landed_meanwhile(build.refresh))
        ran = run_cli("ingest", "--home", layout.home, "--no-default", "--db", a.db, "--full-refresh",
                      env={"AGENTLAKE_MACHINE": layout.machine, "AGENTLAKE_USER": layout.user})
        assert ran.returncode == 0 and layout.pending_marker.exists(), ran.stderr
        monkeypatch.undo()

        assert merge_left_waiting(layout, instance) == []  # fresh: a run's own merge comes first
        marked = layout.pending_marker.stat().st_mtime
        os.utime(layout.pending_marker, (marked - MERGE_WAITED_SECONDS - 1, marked - MERGE_WAITED_SECONDS - 1))
        (request,) = merge_left_waiting(layout, instance)
        assert request.job_name == "merge_landed"
        instance.add_dynamic_partitions("sources", ["crush-alpha"])
        repository = defs.get_repository_def()  # ticks as Dagster evaluates them: each request names its job

        def tick(cursor):  # the daemon loads the partitions from the instance, as here
            with dg.partition_loading_context(dynamic_partitions_store=instance), dg.build_sensor_context(
                    instance=instance, cursor=cursor, resources={"agentlake": resource},
                    repository_def=repository) as context:
                return discover_sources.evaluate_tick(context)

        cursor = json.dumps(_fingerprints(resource))
        assert [r.job_name for r in tick(cursor).run_requests] == ["merge_landed"]
        conn = sqlite3.connect(a.db)  # a changed source: its landing is asked for, not a merge
        conn.execute("UPDATE sessions SET cost = 0.9")
        conn.commit()
        conn.close()
        assert [r.job_name for r in tick(cursor).run_requests] == ["ingest_sources"]
        assert dg.materialize([tables_and_marts], instance=instance, resources={"agentlake": resource}).success
        assert not layout.pending_marker.exists()


def _fingerprints(resource) -> dict:
    from transforms.providers import PROVIDERS

    return {key: PROVIDERS[s.provider].fingerprint(s) for key, s in resource.discover()[0].items()}
