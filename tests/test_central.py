"""The central deployment: lake-wide checks on a real two-machine lake, the `pipelines.central`
code location materialised in-process, and the deploy/ configuration validated as far as it can
be without Docker, Kubernetes, Spark or Trino (the instance on PostgreSQL runs in
tests/test_dagster_postgres.py)."""

import ast
import dataclasses
import importlib
import importlib.util
import re
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import yaml

from pipelines.central import (
    ROLE_TAG,
    TEAM_WAREHOUSE,
    TeamLake,
    defs,
    keys_unique_lakewide,
    machines_reporting,
    no_orphans_lakewide,
    team_warehouse,
)
from tests.conftest import copy_home, ingest_tables
from tests.support_dagster import agentlake_instance
from tests.support_s3 import BUCKET, s3, s3_server  # noqa: F401  (the moto fixtures)
from transforms.contract import ALL_TABLES
from transforms.synth.crush import generate_store
from warehouse.catalog import checks as lakewide
from warehouse.serve.hive_export import export_tables
from warehouse.lake import ducklake
from warehouse.catalog.build import build_warehouse, refresh
from warehouse.catalog.checks import checked
from warehouse.lake.ducklake import connect
from warehouse.lake.layout import Layout

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
CHECKS = [keys_unique_lakewide, no_orphans_lakewide, machines_reporting]


# --- a team lake: two machine identities ingest into one directory ---------------------------

@dataclasses.dataclass
class Team:
    lake: Path
    warehouse: Path  # the center's own file, not a machine's
    laptop: object  # StoreTruth of what each machine ingested
    desktop: object

    def rebuild(self, marts: bool = True):
        """The center's merge; `marts=False` for checks that read the curated tables only (the
        marts stay owed, as after `ingest_tables`)."""
        refresh(self.lake, self.warehouse, marts=marts)
        return connect(self.warehouse, ours=True)

    def files(self, table: str, identity: str) -> list[Path]:
        """A machine's landing files of a table (`identity` is `machine/user`, or `machine/*`)."""
        if table == "sources":
            return sorted((self.lake / "_landing").glob(f"{identity}/_runs/*.parquet"))
        return sorted((self.lake / "_landing").glob(f"{identity}/*/*/{table}.parquet"))


def _two_machines(root: Path) -> Team:
    layout = Layout.resolve(home=root / "home", machine="laptop", user="dev")
    laptop = generate_store(root / "laptop-crush", projects=2, sessions_per_project=3, seed=11)
    desktop = generate_store(root / "desktop-crush", projects=1, sessions_per_project=4, seed=12)
    # the machines' own warehouses are never read: their tables only; the center's is built whole
    ingest_tables(layout, roots=[laptop.global_dir])  # machine "laptop", user "dev"
    ingest_tables(dataclasses.replace(layout, machine="desktop", user="ana"), roots=[desktop.global_dir])
    team = Team(layout.lake, root / "center" / "team.duckdb", laptop, desktop)
    team.rebuild().close()
    return team


@pytest.fixture
def team(layout, tmp_path, built_once) -> Team:
    """Two machines' lake and the center's warehouse, built once; each test has its own copy."""
    template = built_once("two-machines", _two_machines, workers=True)
    copy_home(template.lake.parent, layout.home)
    copy_home(template.warehouse.parent, tmp_path / "center")
    return Team(layout.lake, tmp_path / "center" / "team.duckdb", template.laptop, template.desktop)


def _age_runs(team: Team, identity: str, days: int) -> None:
    """Make a machine's run log `days` older, as if it had not run since."""
    for path in team.files("sources", identity):
        table = pq.read_table(path)
        old = pc.subtract(table["run_at"], pa.scalar(timedelta(days=days), pa.duration("us")))
        table = table.set_column(table.schema.get_field_index("run_at"), "run_at", old)
        table = table.set_column(0, "date", pc.cast(old, pa.date32()))
        pq.write_table(table, path)


def test_lake_facts_and_checks_on_a_good_two_machine_lake(team):
    with team.rebuild() as con:
        facts = lakewide.lake_facts(con)
        assert facts.rows["sessions"] == team.laptop.sessions + team.desktop.sessions
        assert facts.rows["messages"] == team.laptop.messages + team.desktop.messages
        assert facts.rows["sources"] == 3  # one run of each store: two on the laptop, one on the desktop
        assert facts.machines == ["desktop", "laptop"] and facts.users == ["ana", "dev"]
        assert set(lakewide.duplicate_keys(con).values()) == {0}
        assert set(lakewide.orphans(con).values()) == {0}
        runs = lakewide.last_runs(con)
    assert sorted(runs) == ["desktop", "laptop"]
    assert lakewide.stale_machines(runs, datetime.now(timezone.utc), timedelta(hours=1)) == {}


def test_the_checks_run_capped_and_spill_to_scratch_and_retry_when_that_is_too_little(team, monkeypatch):
    """Over every source of a big lake, the key and parent checks used more memory than the merge
    (docs/BENCHMARKS.md, "Memory"): they run under the writer's limit, spilling to a scratch
    folder, and once more with most of the memory if DuckDB still runs out."""
    import tempfile

    team.rebuild().close()
    settings = "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
    limit, spill = checked(team.warehouse, lambda con: con.execute(settings).fetchone())
    with connect(team.warehouse, ours=True) as con:
        con.execute(f"SET memory_limit = '{ducklake.WRITER_SETTINGS['memory_limit']}'")
        assert limit == con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    assert Path(spill).parent == Path(tempfile.gettempdir()) and Path(spill).name.startswith("agentlake-merge-")
    assert not Path(spill).exists()  # removed when the checks end
    with connect(team.warehouse, ours=True) as con:
        expected = lakewide.duplicate_keys(con), lakewide.orphans(con)
    # too little memory even to start: it fails under the cap, then runs with most of the machine's
    monkeypatch.setitem(ducklake.WRITER_SETTINGS, "memory_limit", "4MB")
    limits = []

    def both(con):
        limits.append(con.execute("SELECT current_setting('memory_limit')").fetchone()[0])
        return lakewide.duplicate_keys(con), lakewide.orphans(con)

    assert checked(team.warehouse, both) == expected
    assert len(limits) == 2 and limits[0] != limits[1]


def test_a_copied_file_is_a_duplicate_only_the_lake_wide_check_sees(team):
    """One store's landing folder copied under another user name (by hand, or one store read
    under two user names): the lake-wide check counts exactly its rows as duplicates."""
    original = team.files("sessions", "laptop/dev")[0].parent
    copy = team.lake / "_landing" / "laptop" / "dev-backup" / original.parent.name / original.name
    shutil.copytree(original, copy)
    with team.rebuild(marts=False) as con:
        dupes = lakewide.duplicate_keys(con)
    assert dupes == {t: pq.read_metadata(original / f"{t}.parquet").num_rows for t in lakewide.LAKE_KEYS}
    assert dupes["sessions"] > 0
    shutil.rmtree(copy)  # removing the folder removes exactly its rows
    with team.rebuild(marts=False) as con:
        assert set(lakewide.duplicate_keys(con).values()) == {0}


def test_file_per_session_agents_keep_keys_unique_across_the_sessions_of_a_project(team, layout, tmp_path):
    """Codebuff, Codex and OpenCode land every session of a project as one source: their
    message ids must be unique within it (Codebuff numbers its messages per chat), or the
    lake-wide check and the machine's own `keys_unique` (the same function, over the sources a
    merge replaced) fail on clean data, and a transcript joined on (source, message) doubles."""
    from transforms.synth.codebuff import generate_home as codebuff_home
    from transforms.synth.codex import generate_home as codex_home
    from transforms.synth.opencode import generate_home as opencode_home

    one = ("/home/dev/shop",)
    codebuff_home(tmp_path / "manicode", sessions=4, seed=2, workspaces=one)
    codex_home(tmp_path / "codex", sessions=4, seed=2, workspaces=one)
    opencode_home(tmp_path / "opencode", sessions=4, seed=2, workspaces=one)
    summary = ingest_tables(layout, homes={"codebuff": [tmp_path / "manicode"], "codex": [tmp_path / "codex"],
                                           "opencode": [tmp_path / "opencode"]})
    landed = {r.source.provider: r.source.source_id for r in summary.results}
    assert sorted(landed) == ["codebuff", "codex", "opencode"]  # one source each
    with team.rebuild() as con:
        assert set(lakewide.duplicate_keys(con, list(landed.values())).values()) == {0}
        assert set(lakewide.duplicate_keys(con).values()) == {0}
        assert set(lakewide.orphans(con).values()) == {0}
        joined = con.execute("SELECT p.provider, COUNT(*) FROM parts p JOIN messages m ON m.machine = p.machine "
                             "AND m.source_id = p.source_id AND m.message_id = p.message_id "
                             "WHERE p.provider IN ('codebuff', 'codex', 'opencode') GROUP BY 1 ORDER BY 1").fetchall()
        parts = con.execute("SELECT provider, COUNT(*) FROM parts WHERE provider IN ('codebuff', 'codex', 'opencode') "
                            "GROUP BY 1 ORDER BY 1").fetchall()
    assert joined == parts
    resource = TeamLake(home=str(team.warehouse.parent), lake=str(team.lake), warehouse=str(team.warehouse))
    with agentlake_instance() as instance:
        result = dg.materialize([team_warehouse, keys_unique_lakewide], resources={"team_lake": resource},
                                instance=instance)
    (check,) = result.get_asset_check_evaluations()
    assert check.passed, check.metadata


def test_deleted_sessions_leave_orphans_counted_per_reference(team):
    """Forgetting data by emptying one table's landing file (and not its children's) is caught, exactly."""
    gone = team.files("sessions", "desktop/ana")[0]
    with team.rebuild() as con:
        ids = pq.read_table(gone, columns=["session_id"])["session_id"].to_pylist()
        expected = {}
        for (child, col), (parent, pcol) in lakewide.REFERENCES.items():
            placeholders = ", ".join("?" * len(ids))
            expected[f"{child}.{col} -> {parent}.{pcol}"] = con.execute(
                f'SELECT COUNT(*) FROM "{child}" WHERE machine = \'desktop\' AND "{col}" IN ({placeholders})', ids
            ).fetchone()[0]
    assert expected["messages.session_id -> sessions.session_id"] > 0
    table = pq.read_table(gone)
    pq.write_table(table.slice(0, 0), gone)
    with team.rebuild(marts=False) as con:
        assert lakewide.orphans(con) == expected


def test_a_machine_that_stopped_reporting_is_stale(team):
    with team.rebuild() as con:
        before = lakewide.last_runs(con)
    _age_runs(team, "laptop/dev", days=5)
    with team.rebuild(marts=False) as con:
        runs = lakewide.last_runs(con)
        assert lakewide.row_counts(con)["sources"] == 3  # moved, not lost
    assert runs["laptop"] == before["laptop"] - timedelta(days=5) and runs["desktop"] == before["desktop"]
    now = datetime.now(timezone.utc)
    assert lakewide.stale_machines(runs, now, timedelta(hours=72)) == {"laptop": runs["laptop"]}
    assert lakewide.stale_machines(runs, now, timedelta(days=6)) == {}


def test_an_empty_lake_has_no_facts_and_passes(tmp_path):
    build_warehouse(tmp_path / "lake", tmp_path / "w.duckdb")
    with connect(tmp_path / "w.duckdb") as con:
        facts = lakewide.lake_facts(con)
        assert set(facts.rows.values()) == {0} and facts.machines == [] and facts.last_runs == {}
        assert set(lakewide.duplicate_keys(con).values()) == {0} and set(lakewide.orphans(con).values()) == {0}


# --- the code location ------------------------------------------------------------------------

def test_central_definitions_load():
    dg.Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    assert {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()} == {"team/warehouse"}
    job = defs.resolve_job_def("team_refresh")
    assert job.tags == ROLE_TAG
    assert {k.name for k in job.asset_layer.asset_graph.asset_check_keys} == {
        "keys_unique_lakewide", "no_orphans_lakewide", "machines_reporting", "within_budgets"}
    schedule = defs.resolve_schedule_def("daily_team_refresh")
    assert schedule.cron_schedule == "0 5 * * *" and schedule.job_name == "team_refresh"
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    (spec,) = team_warehouse.specs
    assert spec.freshness_policy.fail_window.to_timedelta() == timedelta(hours=26)
    # the central location never ingests: nothing of pipelines.definitions is in it
    assert not repo.sensor_defs and "lake" not in {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}


def test_materialize_team_warehouse_and_checks_on_a_good_lake(team):
    resource = TeamLake(home=str(team.warehouse.parent), lake=str(team.lake), warehouse=str(team.warehouse))
    with agentlake_instance() as instance:
        result = dg.materialize([team_warehouse, *CHECKS], resources={"team_lake": resource}, instance=instance)
    assert result.success
    (mat,) = result.get_asset_materialization_events()
    meta = mat.materialization.metadata
    assert meta["rows_sessions"].value == team.laptop.sessions + team.desktop.sessions
    assert meta["rows_messages"].value == team.laptop.messages + team.desktop.messages
    assert meta["machines"].value == 2 and meta["users"].value == 2
    assert meta["machine_names"].value == "desktop, laptop"
    assert set(meta["last_run_by_machine"].value) == {"desktop", "laptop"}
    assert meta["lake"].value == str(team.lake)
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert {n: e.passed for n, e in evaluations.items()} == {
        "keys_unique_lakewide": True, "no_orphans_lakewide": True, "machines_reporting": True}
    assert evaluations["machines_reporting"].metadata["stale_after_hours"].value == 72
    with connect(team.warehouse) as con:  # the file readers open: views and marts over both machines
        assert con.execute("SELECT COUNT(DISTINCT machine) FROM daily_costs").fetchone()[0] == 2


def test_the_scheduled_job_reads_its_settings_from_env_and_reports_a_bad_lake(team, monkeypatch):
    original = team.files("messages", "laptop/dev")[0].parent
    shutil.copytree(original, team.lake / "_landing" / "laptop" / "restored" / original.parent.name / original.name)
    _age_runs(team, "desktop/ana", days=4)
    monkeypatch.setenv("AGENTLAKE_HOME", str(team.warehouse.parent))
    monkeypatch.setenv("AGENTLAKE_LAKE", str(team.lake))
    monkeypatch.setenv("AGENTLAKE_WAREHOUSE", str(team.warehouse))
    monkeypatch.setenv("AGENTLAKE_STALE_AFTER_HOURS", "48")
    with agentlake_instance() as instance:
        result = defs.resolve_job_def("team_refresh").execute_in_process(instance=instance, raise_on_error=False)
        assert instance.get_run_by_id(result.run_id).tags["agentlake/role"] == "team-warehouse"
    assert result.success  # failed checks report; they do not fail the rebuild
    assert team.warehouse.exists()
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    dupes = evaluations["keys_unique_lakewide"]
    copied = sum(pq.read_metadata(original / f"{t}.parquet").num_rows for t in lakewide.LAKE_KEYS)
    assert not dupes.passed and dupes.metadata["duplicate_rows"].value == copied
    assert evaluations["no_orphans_lakewide"].passed
    stale = evaluations["machines_reporting"]
    assert not stale.passed and stale.severity == dg.AssetCheckSeverity.WARN
    assert stale.metadata["stale_after_hours"].value == 48
    assert stale.metadata["stale_machines"].value.startswith("desktop (last run ")


@pytest.mark.parametrize("hours", ["abc", "0", "-5", "inf", "nan"])
def test_a_staleness_limit_that_is_no_number_of_hours_is_the_checks_said_failure(team, monkeypatch, hours):
    """$AGENTLAKE_STALE_AFTER_HOURS=abc failed the rebuild's run with Python's own ValueError (a
    new user's trial): the check fails, naming the variable, and the rebuild stands."""
    from pipelines.central import TeamLake, machines_reporting

    monkeypatch.setenv("AGENTLAKE_STALE_AFTER_HOURS", hours)
    result = machines_reporting(TeamLake(home=str(team.warehouse.parent), lake=str(team.lake),
                                         warehouse=str(team.warehouse)))
    assert not result.passed and result.severity == dg.AssetCheckSeverity.ERROR
    assert result.description == (f"AGENTLAKE_STALE_AFTER_HOURS={hours!r}: give a number of hours above 0 (e.g. 72), "
                                  "or unset it for 72")


# --- the same Parquet, read by other engines --------------------------------------------------

def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_trino_ddl_is_current_and_matches_the_files_written(team):
    ddl = _load(DEPLOY / "trino" / "ddl.py", "trino_ddl")
    assert (DEPLOY / "trino" / "tables.sql").read_text() == ddl.render(), \
        "regenerate: python deploy/trino/ddl.py > deploy/trino/tables.sql"
    sql = ddl.render("s3://bucket/prefix?endpoint_override=minio:9000", "v20261204T050000000000Z", ["v1", "v2"])
    for table in ALL_TABLES:  # one version's tables, the views re-pointed at them, the versions before dropped
        assert f"external_location = 's3://bucket/prefix/export/v20261204T050000000000Z/{table.name}'" in sql
        assert f"sync_partition_metadata('v20261204t050000000000z', '{table.name}', 'FULL')" in sql
        assert (f'VIEW agentlake.agentlake."{table.name}" SECURITY INVOKER AS '
                f'SELECT * FROM agentlake.v20261204t050000000000z."{table.name}"') in sql
        assert f'DROP TABLE IF EXISTS agentlake.v1."{table.name}"' in sql
    assert "agentlake.v2." not in sql  # the version just replaced stays for the queries planned on it
    # what Trino will map by name: every column of every written file, in the DDL's types
    column = re.compile(r'^  "(\w+)" (\S+?),?$', re.MULTILINE)
    declared = {t.name: column.findall(ddl.table_ddl(t, "s3://b/l", "v1")) for t in ALL_TABLES}
    assert all(cols[-2:] == [("date", "date"), ("project", "varchar")] for cols in declared.values())
    checked = set()
    team.rebuild().close()
    version = export_tables(team.warehouse, team.lake).version
    for table in ALL_TABLES:
        for path in sorted((team.lake / "export" / version / table.name).glob("date=*/project=*/*.parquet")):
            schema = pq.read_schema(path)
            assert [(f.name, ddl.TRINO_TYPES[f.type]) for f in schema] == declared[table.name][:-2], path
            checked.add(table.name)
    assert {"sessions", "messages", "parts", "tool_calls", "file_versions", "sources"} <= checked


def test_trino_catalog_reads_microseconds_without_a_metastore_service():
    lines = (DEPLOY / "trino" / "agentlake.properties").read_text().splitlines()
    props = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    assert props["connector.name"] == "hive" and props["hive.metastore"] == "file"
    assert props["hive.metastore.catalog.dir"].startswith("s3://")
    assert props["fs.native-s3.enabled"] == "true"
    assert props["hive.timestamp-precision"] == "MICROSECONDS"  # tables.sql declares timestamp(6)
    assert props["hive.non-managed-table-writes-enabled"] == "false"


def test_hive_partition_discovery_outside_duckdb_sees_what_duckdb_sees(team):
    """The layout Spark and Trino rely on: keys only in directory names, discovered by a reader
    that is not DuckDB (Arrow's dataset, hive flavour), with the same rows per project and date."""
    spark = _load(DEPLOY / "spark" / "read_lake.py", "read_lake")
    assert spark.TABLES == tuple(t.name for t in ALL_TABLES)
    team.rebuild().close()
    version = export_tables(team.warehouse, team.lake).version
    path = spark.table_path(str(team.lake), "sessions", version)
    dataset = ds.dataset(path, format="parquet", partitioning="hive")
    assert {"date", "project"} <= set(dataset.schema.names)
    arrow = dataset.to_table(columns=["date", "project"]).group_by(["date", "project"]).aggregate([([], "count_all")])
    got = sorted((str(r["date"]), r["project"], r["count_all"]) for r in arrow.to_pylist())
    with team.rebuild() as con:
        want = con.execute("SELECT CAST(date AS VARCHAR), project, COUNT(*) FROM sessions "
                           "GROUP BY ALL ORDER BY ALL").fetchall()
    assert got == [tuple(r) for r in want] and sum(r[2] for r in got) == team.laptop.sessions + team.desktop.sessions


def test_spark_reads_s3_through_s3a_with_agentlakes_endpoint_settings():
    spark = _load(DEPLOY / "spark" / "read_lake.py", "read_lake")
    ast.parse((DEPLOY / "spark" / "read_lake.py").read_text())
    lake = "s3://team-lake/agentlake?endpoint_override=minio:9000&scheme=http&region=eu-west-1"
    assert spark.table_path(lake, "messages", "v1") == "s3a://team-lake/agentlake/export/v1/messages"
    conf = spark.spark_conf(lake, env={})
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "minio:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert conf["spark.sql.sources.partitionColumnTypeInference.enabled"] == "false"
    aws = spark.spark_conf("s3://team-lake/agentlake", env={"AWS_REGION": "us-east-2"})
    assert "spark.hadoop.fs.s3a.endpoint" not in aws and aws["spark.hadoop.fs.s3a.endpoint.region"] == "us-east-2"


# --- deploy/: what can be checked without the services ----------------------------------------

def _yaml(name: str):
    return yaml.safe_load((DEPLOY / name).read_text())


def test_instance_yaml_passes_dagsters_own_schema(tmp_path):
    from dagster._config import validate_config
    from dagster._core.instance.config import dagster_instance_config
    from dagster._core.run_coordinator import QueuedRunCoordinator

    for name in ("dagster.yaml", "dagster-docker.yaml"):
        config, _ = dagster_instance_config(str(DEPLOY), name)  # the check DagsterInstance runs on load
        assert set(config["storage"]["postgres"]["postgres_db"]) >= {"hostname", "username", "password", "db_name"}
        assert config["storage"]["postgres"]["postgres_db"]["password"] == {"env": "DAGSTER_PG_PASSWORD"}
        coordinator = config["run_coordinator"]
        assert coordinator["class"] == "QueuedRunCoordinator"
        assert validate_config(QueuedRunCoordinator.config_type(), coordinator["config"]).success
        (limit,) = coordinator["config"]["tag_concurrency_limits"]
        assert {limit["key"]: limit["value"]} == ROLE_TAG and limit["limit"] == 1
    # the validator is real: a misspelt key is refused
    (tmp_path / "dagster.yaml").write_text((DEPLOY / "dagster.yaml").read_text().replace("max_retries:", "max_retry:"))
    with pytest.raises(dg.DagsterInvalidConfigError):
        dagster_instance_config(str(tmp_path), "dagster.yaml")
    # the Docker variant is the same instance plus its launcher
    docker = _yaml("dagster-docker.yaml")
    assert docker.pop("run_launcher")["class"] == "DockerRunLauncher"
    assert docker == _yaml("dagster.yaml")


def test_docker_launcher_config_fits_dagster_docker():
    dagster_docker = pytest.importorskip("dagster_docker")  # in the deployment image, not in agentlake's deps
    from dagster._config import validate_config

    launcher = _yaml("dagster-docker.yaml")["run_launcher"]
    assert validate_config(dagster_docker.DockerRunLauncher.config_type(), launcher["config"]).success


def test_docker_launcher_reaches_compose_network_volumes_and_env():
    compose = _yaml("docker-compose.yml")
    launcher = _yaml("dagster-docker.yaml")["run_launcher"]["config"]
    assert launcher["network"] == compose["networks"]["agentlake"]["name"]
    named = {v["name"] for v in compose["volumes"].values() if v and "name" in v}
    assert {v.split(":", 1)[0] for v in launcher["container_kwargs"]["volumes"]} <= named
    # a bare name is read from the daemon's environment when a run starts, and must be set there
    daemon_env = compose["services"]["daemon"]["environment"]
    assert set(launcher["env_vars"]) <= set(daemon_env)
    user_code = compose["services"]["user_code"]
    assert user_code["environment"]["DAGSTER_CURRENT_IMAGE"] == user_code["image"]


def test_workspace_points_at_the_code_server_serving_pipelines_central():
    from dagster._core.workspace.config_schema import ensure_workspace_config

    workspace = _yaml("workspace.yaml")
    ensure_workspace_config(workspace, str(DEPLOY / "workspace.yaml"))
    (location,) = workspace["load_from"]
    server = location["grpc_server"]
    compose = _yaml("docker-compose.yml")
    command = compose["services"][server["host"]]["command"]
    assert command[:3] == ["dagster", "code-server", "start"]
    assert command[command.index("-p") + 1] == str(server["port"])
    module = command[command.index("-m") + 1]
    assert module == "pipelines.central" and isinstance(importlib.import_module(module).defs, dg.Definitions)
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert '"-m", "pipelines.central"' in dockerfile
    for service in ("webserver", "daemon"):
        assert "/opt/dagster/dagster_home/workspace.yaml" in compose["services"][service]["command"]


def test_compose_and_dockerfile_reference_files_that_exist():
    compose = _yaml("docker-compose.yml")
    assert set(compose["services"]) == {"postgres", "user_code", "webserver", "daemon"}
    build = compose["services"]["user_code"]["build"]
    context = (DEPLOY / build["context"]).resolve()
    assert context == ROOT and (context / build["dockerfile"]).is_file()
    for service in ("user_code", "webserver", "daemon"):
        env = compose["services"][service]["environment"]
        # PGPASSWORD and AWS_ENDPOINT_URL: a catalog in PostgreSQL, an S3-compatible server (docs/DEPLOYMENT.md;
        # a new user's trial found the compose file could not name either)
        assert {"DAGSTER_PG_HOST", "DAGSTER_PG_PASSWORD", "AGENTLAKE_LAKE", "AGENTLAKE_WAREHOUSE", "PGPASSWORD",
                "AWS_ENDPOINT_URL"} <= set(env)
        assert env["AGENTLAKE_WAREHOUSE"].startswith("${AGENTLAKE_WAREHOUSE:-")  # .env may name PostgreSQL
    override = _yaml("docker-compose.docker-launcher.yml")
    for service in override["services"].values():
        for volume in service["volumes"]:
            source = volume.split(":", 1)[0]
            assert not source.startswith(".") or (DEPLOY / source).is_file(), source
    copies = re.findall(r"^COPY (.+) \S+$", (DEPLOY / "Dockerfile").read_text(), re.MULTILINE)
    sources = [s for line in copies for s in line.split()]
    assert sources and all((ROOT / s).exists() for s in sources), sources
    env_example = (DEPLOY / "env.example").read_text()
    assert all(f"{var}=" in env_example for var in ("DAGSTER_PG_PASSWORD", "AGENTLAKE_LAKE"))


def test_deployment_libraries_match_dagster_and_stay_out_of_agentlakes_deps():
    patch = dg.__version__.split(".")[2]  # dagster 1.13.N goes with its libraries 0.29.N
    pins = dict(re.findall(r"^(dagster-[\w-]+)==(\S+)", (DEPLOY / "requirements.txt").read_text(), re.MULTILINE))
    assert pins == {name: f"0.29.{patch}" for name in ("dagster-docker", "dagster-k8s")}
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert not any(name in pyproject for name in pins)
    # the instance's storage is the `central` extra (and the tests'), so it is in the lock: the
    # tests run the instance on it (tests/test_dagster_postgres.py)
    import tomllib

    extras = tomllib.loads(pyproject)["project"]["optional-dependencies"]
    assert f"dagster-postgres==0.29.{patch}" in set(extras["central"]) & set(extras["test"])
    assert f"dagster-postgres==0.29.{patch}" in (ROOT / "requirements.lock").read_text().split()
    assert '".[central]"' in (DEPLOY / "Dockerfile").read_text()


def test_helm_values_run_pipelines_central_with_the_k8s_launcher():
    values = _yaml("k8s/values.yaml")
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    assert deployment["codeServerArgs"] == ["-m", "pipelines.central"]
    assert deployment["image"]["tag"] != "latest" and deployment["includeConfigInLaunchedRuns"]["enabled"]
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    queue = values["dagsterDaemon"]["runCoordinator"]
    assert queue["type"] == "QueuedRunCoordinator"
    instance = _yaml("dagster.yaml")["run_coordinator"]["config"]
    assert queue["config"]["queuedRunCoordinator"]["tagConcurrencyLimits"] == instance["tag_concurrency_limits"]
    assert queue["config"]["queuedRunCoordinator"]["maxConcurrentRuns"] == instance["max_concurrent_runs"]
    env = {e["name"] for e in deployment["env"]}
    assert {"AGENTLAKE_HOME", "AGENTLAKE_WAREHOUSE"} <= env
    assert any(m["mountPath"] == "/data" for m in deployment["volumeMounts"])


def test_team_warehouse_key_is_stable():
    # docs/DEPLOYMENT.md and the UI links name it
    assert TEAM_WAREHOUSE.to_user_string() == "team/warehouse"


@pytest.mark.slow
@pytest.mark.parametrize("where", ["folder", "s3"])
def test_trino_ddl_run_as_a_script_exits_cleanly_every_time(tmp_path, request, where):
    """deploy/trino/ddl.py in a cron pipeline (`ddl.py > file && trino --file`): it read the
    export's state through pyarrow's thread pool and aborted at exit in about 3 runs of 10, its
    output whole but its status 134 (a new user's trial; a team lead's again on S3). Ten runs, each
    exit 0 and the same DDL."""
    import os
    import subprocess
    import sys

    from warehouse.lake.storage import open_store
    from warehouse.serve import hive_export

    env = request.getfixturevalue("s3") if where == "s3" else {}
    lake = f"s3://{BUCKET}/ddl" if where == "s3" else tmp_path / "lake"
    version = "v20261206T000000000000Z"
    open_store(lake).put_all({f"export/{version}/{hive_export.STATE}": hive_export._state_bytes(
        {}, {}, (1, "2026-12-06"), ["v20261205T000000000000Z"]), "export/CURRENT": version.encode()})
    outputs = set()
    for _ in range(10):
        ran = subprocess.run([sys.executable, str(DEPLOY / "trino" / "ddl.py"), str(lake)], capture_output=True,
                             text=True, timeout=120, env={**os.environ, **env})
        assert ran.returncode == 0, ran.stderr
        outputs.add(ran.stdout)
    [sql] = outputs
    assert f"agentlake.{version.lower()}." in sql
