"""The central deployment's Dagster instance run for real: deploy/dagster.yaml as written (runs,
event logs, schedules and ticks in PostgreSQL through dagster-postgres, the run queue and its
one-rebuild-at-a-time tag limit) on a real PostgreSQL server (tests/support_postgres.py), with
the `pipelines.central` code location. The scheduler daemon's ticks queue the daily rebuild, the
queue daemon starts the runs one at a time, each materialises `team/warehouse` with its four
lake-wide checks, and what the webserver would show is read back from PostgreSQL.

The one setting changed for the test is where a dequeued run executes: in this process
(Dagster's SyncInMemoryRunLauncher), where the deployment's default launcher starts it as a
process of the code server, a gRPC server this test does not start."""

import logging
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
import pytest
import yaml
from sqlalchemy import create_engine, text

from pipelines.central import ROLE_TAG, TEAM_WAREHOUSE
from tests.support_postgres import Server, create_database, postgres  # noqa: F401  (the server fixture)
from tests.test_central import team  # noqa: F401  (two machines' lake and the center's warehouse, built once)

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
LOCATION = "agentlake-central"  # as deploy/workspace.yaml names it
DB, USER, PASSWORD = "dagster", "dagster", "dagster-secret-4"
CHECKS = {"keys_unique_lakewide", "no_orphans_lakewide", "machines_reporting", "within_budgets"}


@pytest.fixture(scope="module")
def dagster_db(postgres: Server) -> Server:  # noqa: F811
    """Dagster's own database on the worker's server, once for the module."""
    create_database(postgres, DB, USER, PASSWORD)
    return postgres


def _dagster_home(root: Path, server: Server) -> Path:
    """deploy/dagster.yaml as it is, but for the server's port, the compute logs' folder and
    where a dequeued run executes (this process)."""
    config = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())
    config["storage"]["postgres"]["postgres_db"]["port"] = server.port
    config["compute_logs"]["config"]["base_dir"] = str(root / "logs")
    assert "run_launcher" not in config  # the deployment's is Dagster's default
    config["run_launcher"] = {"module": "dagster._core.launcher.sync_in_memory_run_launcher",
                              "class": "SyncInMemoryRunLauncher"}
    root.mkdir()
    (root / "dagster.yaml").write_text(yaml.safe_dump(config))
    return root


def _rows(server: Server, query: str) -> list[tuple]:
    """What PostgreSQL itself holds, read beside Dagster, as Dagster's role."""
    engine = create_engine(f"postgresql+psycopg2://{USER}:{PASSWORD}@{server.host}:{server.port}/{DB}")
    try:
        with engine.connect() as con:
            return [tuple(r) for r in con.execute(text(query))]
    finally:
        engine.dispose()


def test_the_schedule_queues_the_rebuild_and_the_queue_runs_it_one_at_a_time_in_postgres(
        dagster_db, team, tmp_path, monkeypatch):  # noqa: F811
    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.scheduler.instigation import TickData, TickStatus
    from dagster._core.storage.tags import SCHEDULE_NAME_TAG, SCHEDULED_EXECUTION_TIME_TAG
    from dagster._core.test_utils import create_test_daemon_workspace_context
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
    from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
    from dagster._scheduler.scheduler import launch_scheduled_runs
    from dagster._serdes import deserialize_value

    # the variables deploy/dagster.yaml and the code location read, as the compose file sets them
    for var, value in {"DAGSTER_PG_HOST": dagster_db.host, "DAGSTER_PG_USERNAME": USER,
                       "DAGSTER_PG_PASSWORD": PASSWORD, "DAGSTER_PG_DB": DB,
                       "AGENTLAKE_HOME": team.warehouse.parent, "AGENTLAKE_LAKE": team.lake,
                       "AGENTLAKE_WAREHOUSE": team.warehouse}.items():
        monkeypatch.setenv(var, str(value))
    home = _dagster_home(tmp_path / "dagster_home", dagster_db)
    target = InProcessWorkspaceLoadTarget(InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name="pipelines.central"), location_name=LOCATION))
    log = logging.getLogger("test_dagster_postgres")
    # the scheduler sees the schedule at 04:00, ticks at 05:00, and again the next day while the
    # queue daemon was down: two rebuilds wait
    start = datetime.now(timezone.utc).replace(hour=4, minute=0, second=0, microsecond=0) - timedelta(days=2)
    with dg.DagsterInstance.from_config(str(home)) as instance, \
            create_test_daemon_workspace_context(target, instance) as context:
        assert [type(s).__name__ for s in (instance.run_storage, instance.event_log_storage,
                                           instance.schedule_storage)] == [
            "PostgresRunStorage", "PostgresEventLogStorage", "PostgresScheduleStorage"]
        for now in (start, start + timedelta(hours=1, minutes=1), start + timedelta(days=1, hours=1, minutes=1)):
            list(launch_scheduled_runs(context, log, now, iteration_times={}))
        queued = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.QUEUED]))
        # both missed ticks, 05:00 on each day, each a queued rebuild with the role tag
        assert sorted(r.tags[SCHEDULED_EXECUTION_TIME_TAG][:16] for r in queued) == [
            f"{(start + timedelta(days=d)).date()}T05:00" for d in (0, 1)], [r.tags for r in queued]
        assert all(r.job_name == "team_refresh" and r.tags[SCHEDULE_NAME_TAG] == "daily_team_refresh"
                   and ROLE_TAG.items() <= r.tags.items() for r in queued)

        queue = QueuedRunCoordinatorDaemon(interval_seconds=1)
        list(queue.run_iteration(context))  # room for 4 runs, but one at a time with the role tag
        statuses = {r.run_id: r.status for r in instance.get_runs()}
        assert sorted(statuses.values(), key=str) == [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.SUCCESS]
        list(queue.run_iteration(context))  # the first one done: the second starts
        assert {r.status for r in instance.get_runs()} == {dg.DagsterRunStatus.SUCCESS}

    # what is in PostgreSQL, read beside Dagster: two successful runs, their materialisations
    # and every check evaluated in each, and the schedule's ticks naming the runs
    runs = {run_id for run_id, in _rows(dagster_db, "SELECT run_id FROM runs WHERE status = 'SUCCESS'")}
    assert runs == set(statuses)
    assert _rows(dagster_db, "SELECT value, COUNT(*) FROM run_tags WHERE key = 'agentlake/role' GROUP BY 1") == [
        ("team-warehouse", 2)]
    materialised = _rows(dagster_db, "SELECT run_id FROM event_logs WHERE dagster_event_type = "
                                     f"'ASSET_MATERIALIZATION' AND asset_key = '{TEAM_WAREHOUSE.to_string()}'")
    assert sorted(r for r, in materialised) == sorted(runs)
    checks = _rows(dagster_db, "SELECT run_id, check_name, execution_status FROM asset_check_executions")
    assert sorted(checks) == sorted((run, name, "SUCCEEDED") for run in runs for name in CHECKS)
    ticks = [deserialize_value(body, TickData) for body, in _rows(
        dagster_db, "SELECT tick_body FROM job_ticks WHERE type = 'SCHEDULE'")]
    assert {t.status for t in ticks} == {TickStatus.SUCCESS}
    assert sorted(run for t in ticks for run in t.run_ids) == sorted(runs)

    # another process (the webserver) opening the same instance sees the runs and the asset
    with dg.DagsterInstance.from_config(str(home)) as webserver:
        event = webserver.get_latest_materialization_event(TEAM_WAREHOUSE)
        assert event.run_id in runs
        sessions = event.asset_materialization.metadata["rows_sessions"].value
        assert sessions == team.laptop.sessions + team.desktop.sessions
        assert {r.dagster_run.run_id for r in webserver.get_run_records(dg.RunsFilter(job_name="team_refresh"))} == runs
