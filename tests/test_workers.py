"""A worker process that dies (the kernel's out-of-memory killer, a crash) fails its own source
only: the other sources of the run land. And a script that starts parallel workers without
Python's `if __name__ == '__main__':` guard gets an error that says so, not a pool error."""

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests.conftest import options_for
from transforms.synth.crush import generate_store
from warehouse.land.ingest import NO_WORKER_RAN, WORKER_DIED, discover_sources, ingest_all

REPO = Path(__file__).resolve().parents[1]


def _holding(pid: int, path: Path) -> bool:
    """The process has the file open (its snapshot is being taken from it)."""
    try:
        return any(os.readlink(fd).startswith(str(path)) for fd in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:  # the process or the descriptor went away meanwhile
        return False


def _kill_whoever_reads(path: Path, stop: threading.Event, killed: list) -> None:
    """SIGKILL every worker that opens `path`, as the kernel kills a process out of memory."""
    import multiprocessing

    while not stop.is_set():
        for child in multiprocessing.active_children():
            if child.pid and _holding(child.pid, path):
                os.kill(child.pid, signal.SIGKILL)
                killed.append(child.pid)
        stop.wait(0.001)


def test_a_worker_killed_on_one_source_fails_that_source_only(layout, tmp_path):
    store = generate_store(tmp_path / "crush", projects=8, sessions_per_project=100, seed=5, long_tail=True)
    culprit = store.dbs[0].path  # the biggest project: its snapshot takes long enough to be seen
    sources, _ = discover_sources(options_for(roots=[store.global_dir]))
    assert len(sources) == 8
    stop, killed = threading.Event(), []
    monitor = threading.Thread(target=_kill_whoever_reads, args=(culprit, stop, killed))
    monitor.start()
    try:
        summary = ingest_all(sources, layout, workers=2)
    finally:
        stop.set()
        monitor.join()
    by_path = {Path(r.source.path): r for r in summary.results}
    assert by_path[culprit].status == "failed" and by_path[culprit].error == WORKER_DIED
    assert len(killed) >= 2  # killed in the pool, then again alone
    others = [r for p, r in by_path.items() if p != culprit]
    assert [r.status for r in others] == ["ok"] * 7, [r.error for r in others]
    assert all(r.reconciled for r in others)
    # nothing lost: the next run, with nothing killing it, lands the culprit and only it
    again = ingest_all(sources, layout, workers=2)
    assert {Path(r.source.path): r.status for r in again.results} == {
        **{Path(r.source.path): "unchanged" for r in others}, culprit: "ok"}


def test_a_source_landed_earlier_in_the_same_run_is_reported_with_its_rows_not_unchanged(layout, tmp_path):
    """A pool that breaks after a worker landed a source loses that result; the source, tried
    again in the same run, is read again and reported `ok` with its rows (it was "unchanged",
    which the summary counted as not landed at all). In a later run it is unchanged."""
    from warehouse.land.ingest import Run, ingest_source, new_run_id

    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=3, seed=7)
    source = discover_sources(options_for(roots=[store.global_dir]))[0][0]
    run = Run(layout, new_run_id(), False)
    first = ingest_source(source, run)
    assert first.status == "ok" and first.rows["sessions"] == 3
    again = ingest_source(source, run)  # as the retry after a broken pool does
    assert (again.status, again.rows, again.files) == ("ok", first.rows, first.files) and again.reconciled
    later = ingest_source(source, Run(layout, new_run_id(), False))
    assert later.status == "unchanged" and later.files == first.files


def test_a_script_without_the_main_guard_is_told_what_to_do(tmp_path):
    store = generate_store(tmp_path / "crush", projects=6, sessions_per_project=2, seed=6)
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import sys\n"
        "from tests.conftest import options_for\n"
        "from warehouse.land.ingest import discover_sources, ingest_all\n"
        "from warehouse.lake.layout import Layout\n"
        "print('top level', flush=True)\n"
        "sources, _ = discover_sources(options_for(roots=[sys.argv[1]]))\n"
        "summary = ingest_all(sources, Layout.resolve(home=sys.argv[2]), workers=2)\n"
        "print('statuses', sorted({r.status for r in summary.results}))\n"
        "print('errors', sorted({r.error for r in summary.results}))\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(script), str(store.global_dir), str(tmp_path / "home")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "statuses ['failed']" in done.stdout
    assert f"errors [{NO_WORKER_RAN!r}]" in done.stdout
    assert "if __name__ == '__main__':" in NO_WORKER_RAN
    # the script's top level ran again in the first pool's workers and the isolated suspects
    # only (spawn re-runs it), not once per source
    assert 2 <= done.stdout.splitlines().count("top level") <= 1 + 2 + 3


def test_a_run_with_little_to_read_reads_it_in_its_own_process(tmp_path, monkeypatch):
    """Starting a pool's processes took longer than they saved on small stores: below
    POOL_FROM_BYTES a run (workers unset, as the CLI and Dagster leave it) reads its sources in
    its own process; above it, in the pool. The same rows either way."""
    from warehouse.land import ingest as ingesting
    from warehouse.land.ingest import POOL_FROM_BYTES, store_bytes
    from warehouse.lake.layout import Layout

    store = generate_store(tmp_path / "crush", projects=3, sessions_per_project=2, seed=8)
    sources, _ = discover_sources(options_for(roots=[store.global_dir]))
    size = sum(os.path.getsize(s.path) for s in sources)
    assert store_bytes(sources) == size < POOL_FROM_BYTES and store_bytes(sources, enough=1) <= size
    rounds = []
    real_round = ingesting._pool_round
    monkeypatch.setattr(ingesting, "_pool_round", lambda *a: rounds.append(len(a[0])) or real_round(*a))
    small = ingest_all(sources, Layout.resolve(home=tmp_path / "small"))
    assert rounds == [] and {r.status for r in small.results} == {"ok"}
    monkeypatch.setattr(ingesting, "POOL_FROM_BYTES", size)  # as much as it holds: the pool's
    pooled = ingest_all(sources, Layout.resolve(home=tmp_path / "pooled"))
    assert rounds == [len(sources)] and {r.status for r in pooled.results} == {"ok"}
    assert [r.rows for r in small.results] == [r.rows for r in pooled.results]
