"""Two ingests sharing one DAGSTER_HOME at once (the user's own, or a scheduled run beside a
manual one). Each ingest once ran in that home's Dagster instance, and unguarded one of them failed
with "table runs already exists" or a UNIQUE constraint. An ingest no longer runs Dagster
(pipelines.runner): both land, and the folder is left to Dagster's own processes."""

import os

from tests import support_forked as forked
from tests.conftest import run_cli
from transforms.synth.crush import generate_store


def test_two_ingests_with_one_dagster_home_both_land_and_leave_it_alone(tmp_path):
    dagster_home = tmp_path / "dagster"  # set by the user, shared, and new
    runs = []
    stores = []
    for name, seed in (("ana", 1), ("ben", 2)):
        store = generate_store(tmp_path / name / "crush", projects=2, sessions_per_project=3, seed=seed)
        stores.append(store)
        env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
        runs.append(forked.cli("ingest", "--quiet", "--no-default", "--home", tmp_path / name / "home",
                               "--lake", tmp_path / name / "lake", "--crush-root", store.global_dir, env=env))
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, f"{err[-4000:]}\n{out[-2000:]}"
    for name, store in zip(("ana", "ben"), stores):
        out = run_cli("sql", "--home", tmp_path / name / "home", "--format", "csv", "SELECT COUNT(*) FROM sessions")
        assert out.returncode == 0, out.stderr
        assert out.stdout.split()[-1] == str(store.sessions)
        assert len(list((tmp_path / name).rglob("cli-runs/*.json"))) == 1  # for `agentlake dev`'s sensor
    assert not dagster_home.exists()
