"""Issue 12 item 11: a full disk under the home. Dagster's own storage there raised an unhandled
`OperationalError` with no summary, later one clear error; an ingest no longer writes Dagster's
storage (pipelines.runner), so a full disk there cannot stop it."""

from pathlib import Path

from tests.conftest import run_cli, scalar
from transforms.synth.crush import generate_store
from warehouse.lake.layout import Layout

REPO = Path(__file__).resolve().parents[1]


def test_dagster_storage_on_a_full_disk_does_not_stop_an_ingest(tmp_path, monkeypatch):
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=3, seed=6)
    home = tmp_path / "home"
    history = home / "dagster" / "history"
    history.mkdir(parents=True)
    (history / "runs.db").symlink_to("/dev/full")  # every write there fails with ENOSPC
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    out = run_cli("ingest", "--quiet", "--no-default", "--crush-root", store.global_dir, env={"AGENTLAKE_HOME": home},
                  cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert scalar(Layout.resolve(home=home), "SELECT COUNT(*) FROM messages") == store.messages
