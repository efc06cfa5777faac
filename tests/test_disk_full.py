"""Issue 12 item 11: a full disk under the home. Dagster's own storage raised an unhandled
`OperationalError` with no summary; now the run says what is full and exits 1, and the next
run, with room again, merges what was landed."""

import os
from pathlib import Path

from tests import support_forked as forked
from tests.conftest import run_cli, scalar
from transforms.synth.crush import generate_store
from warehouse.lake.layout import Layout

REPO = Path(__file__).resolve().parents[1]


def test_dagster_storage_on_a_full_disk_is_one_clear_error(tmp_path, monkeypatch):
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=3, seed=6)
    home = tmp_path / "home"
    history = home / "dagster" / "history"
    history.mkdir(parents=True)
    (history / "runs.db").symlink_to("/dev/full")  # every write there fails with ENOSPC
    env = {**os.environ, "AGENTLAKE_HOME": str(home)}
    env.pop("DAGSTER_HOME", None)
    argv = ["ingest", "--quiet", "--no-default", "--crush-root", str(store.global_dir)]
    out = forked.run_cli(*argv, env=env, cwd=REPO)  # its own process: the whole output, native libraries' too
    assert out.returncode == 1
    assert "cannot write Dagster's storage in" in out.stderr and "disk is full" in out.stderr
    assert "Traceback" not in out.stderr
    (history / "runs.db").unlink()  # room again
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    again = run_cli(*argv, env={"AGENTLAKE_HOME": home}, cwd=REPO)  # the next run needs no process of its own
    assert again.returncode == 0, again.stderr[-2000:]
    assert scalar(Layout.resolve(home=home), "SELECT COUNT(*) FROM messages") == store.messages
