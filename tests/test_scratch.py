"""Scratch folders (snapshots of agents' stores): a process killed before removing its own leaves
a copy of private transcripts in the temp folder; the next process removes it, and only the
folders whose owner is dead."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from transforms.synth.crush import generate_store
from warehouse.lake.locks import LOCKS
from warehouse.lake.scratch_dirs import OWNER, UNOWNED_AGE_S, scratch, sweep, sweep_once

pytestmark = pytest.mark.skipif(not LOCKS, reason="no file locks on this system: nothing is swept")

REPO = Path(__file__).resolve().parents[1]
# a process killed in the middle of its work: no `finally` runs, as with SIGKILL
DIES_INSIDE = """
import os, shutil, sys
from warehouse.lake.scratch_dirs import scratch
with scratch("snapshot") as path:
    shutil.copyfile(sys.argv[1], path / "crush.db")
    print(path, flush=True)
    os._exit(9)
"""


def _killed_inside(tmp: Path, store: Path) -> Path:
    out = subprocess.run([sys.executable, "-c", DIES_INSIDE, str(store)], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "TMPDIR": str(tmp)})
    assert out.returncode == 9, out.stderr
    left = Path(out.stdout.strip())
    assert (left / "crush.db").stat().st_size == store.stat().st_size
    return left


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


@pytest.fixture
def crush_root(tmp_path) -> Path:
    return generate_store(tmp_path / "crush", projects=2, sessions_per_project=3, seed=5).global_dir


def test_a_dead_owners_folder_goes_and_a_live_ones_stays(tmp_path, crush_root):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    db = next(crush_root.rglob("crush.db"))
    dead_old, dead_young = _killed_inside(tmp, db), _killed_inside(tmp, db)
    _age(dead_old, 120)
    unowned_recent, unowned_stale = tmp / "agentlake-snapshot-older1", tmp / "agentlake-snapshot-older2"
    for folder in (unowned_recent, unowned_stale):  # made by a release before the locks
        folder.mkdir()
        (folder / "crush.db").write_bytes(b"x")
    _age(unowned_recent, 3600)
    _age(unowned_stale, UNOWNED_AGE_S + 60)
    other = tmp / "someone-elses-folder"
    other.mkdir()
    _age(other, UNOWNED_AGE_S + 60)
    with scratch("merge") as live:  # this process is alive: its folder stays however old
        moved = tmp / live.name
        live.rename(moved)  # into the swept folder, its lock still held
        _age(moved, 3600)
        assert sweep(tmp) == 2
        assert moved.exists()
        moved.rename(live)
    assert not live.exists()  # removed at the end of its work
    assert not dead_old.exists() and not unowned_stale.exists()
    assert dead_young.exists()  # it may be between its creation and its owner's lock
    assert unowned_recent.exists() and other.exists()
    _age(dead_young, 120)
    assert sweep(tmp) == 1 and not dead_young.exists()


def test_the_next_ingest_removes_a_killed_ingests_snapshot(tmp_path, crush_root, monkeypatch):
    import tempfile

    from tests.conftest import ingest_tables
    from warehouse.lake.layout import Layout

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    left = _killed_inside(tmp, next(crush_root.rglob("crush.db")))
    _age(left, 120)
    assert (left / OWNER).exists()
    # the next ingest, in this process as if it were a new one (a process sweeps at its first
    # scratch folder): its temp folder is `tmp`
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    sweep_once.cache_clear()
    summary = ingest_tables(Layout.resolve(home=tmp_path / "home", machine="vm"), roots=[crush_root])
    assert summary.exit_code == 0
    assert sorted(r.status for r in summary.results) == ["ok"] * 2  # the two projects
    assert not left.exists()
    assert not list(tmp.iterdir())  # and its own snapshots and merge folder went at their end


def test_the_sweep_follows_no_symlink(tmp_path):
    """A shared temp folder may hold what another user planted: a folder whose lock file is a
    symlink (opening it would make a file where it points), or a symlink to a folder."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    victim = tmp_path / "victim"
    planted = tmp / "agentlake-snapshot-planted"
    planted.mkdir()
    (planted / OWNER).symlink_to(victim)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("x")
    (tmp / "agentlake-merge-link").symlink_to(elsewhere, target_is_directory=True)
    for path in (planted, elsewhere):
        _age(path, UNOWNED_AGE_S + 60)
    assert sweep(tmp) == 0
    assert not victim.exists() and planted.exists()
    assert (elsewhere / "keep").exists() and (tmp / "agentlake-merge-link").is_symlink()
