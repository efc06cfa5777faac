"""Issue 12 item 12: Ctrl-C stops a run (exit 130) and a killed run leaves no process behind."""

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import support_forked as forked
from tests.conftest import run_cli
from transforms.synth.crush import generate_store

REPO = Path(__file__).resolve().parents[1]


def _procs() -> list[tuple[int, list[str]]]:
    """(pid, the fields of /proc/<pid>/stat after the command name) of every process."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            out.append((int(stat.parent.name), stat.read_text().rsplit(")", 1)[1].split()))
        except OSError:
            continue
    return out


def _session_pids(sid: int) -> set[int]:
    """Processes of a session (a process group leader's descendants keep its session id)."""
    return {pid for pid, fields in _procs() if int(fields[3]) == sid and fields[0] != "Z"}


def _children(pid: int) -> set[int]:
    return {child for child, fields in _procs() if int(fields[1]) == pid}


def _gone(pids: set[int], seconds: float) -> set[int]:
    deadline = time.monotonic() + seconds
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        alive = {p for p in alive if Path(f"/proc/{p}").exists()
                 and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"}
        time.sleep(0.1)
    return alive


def _wait_for_workers(proc, seconds=60) -> set[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        workers = {c for c in _children(proc.pid) if "resource_tracker" not in Path(f"/proc/{c}/cmdline").read_text()}
        if len(workers) >= 2:
            return workers
        time.sleep(0.05)
    return set()


@pytest.fixture
def big_store(built_once):
    """A store whose ingest runs long enough to start its workers; read only, built once per session."""
    return built_once("interrupts-big-store", lambda root: generate_store(root / "crush", projects=12,
                                                                          sessions_per_project=40, seed=21))


def test_ctrl_c_stops_the_run_with_130_and_leaves_no_process(tmp_path, big_store):
    store = big_store
    env = {**os.environ, "AGENTLAKE_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "home" / "dagster")}
    proc = forked.cli("ingest", "--no-default", "--crush-root", store.global_dir, env=env, cwd=REPO, new_session=True)
    workers = _wait_for_workers(proc)
    assert workers, "the run ended before its workers started: use a bigger corpus"
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted" in err and "Traceback" not in err
    assert "sources:" not in out  # no summary that pretends the run went through
    assert not _gone(_session_pids(proc.pid), 10)


def test_a_killed_run_leaves_no_worker_behind(tmp_path, big_store):
    store = big_store
    code = ("import sys\nfrom tests.conftest import options_for\nfrom warehouse.land.ingest import discover_sources, ingest_all\n"
            "from warehouse.lake.layout import Layout\n"
            "sources, _ = discover_sources(options_for(roots=[sys.argv[1]]))\n"
            "ingest_all(sources, Layout.resolve(home=sys.argv[2]), workers=2)\n")
    proc = forked.code(code, store.global_dir, tmp_path / "home", cwd=REPO, new_session=True)
    workers = _wait_for_workers(proc)
    assert workers, "the run ended before its workers started: use a bigger corpus"
    proc.kill()  # SIGKILL: the parent cannot stop its pool
    proc.wait()
    assert not _gone(workers, 15)


def _wait_for(path: Path, proc, seconds=120) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists():
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize("how", [(signal.SIGINT, 0.0), (signal.SIGINT, 0.4), (signal.SIGTERM, 0.2)])
def test_a_signal_during_the_merge_ends_the_run_as_interrupted(tmp_path, how, built_once):
    """Ctrl-C (or a scheduler's SIGTERM) while Dagster's run merges: Dagster handles it, and it used
    to fail the merge ("could not merge: Query interrupted", exit 1) or be printed as ignored while
    the run went on (exit 0). Wherever it lands, the run now ends as interrupted, and the next run
    has the totals right."""
    sig, delay = how
    # read only: the cases share it
    store = built_once("interrupts-store", lambda root: generate_store(root / "crush", projects=4,
                                                                       sessions_per_project=25, seed=23))
    home = tmp_path / "home"
    env = {**os.environ, "AGENTLAKE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    argv = ["ingest", "--no-default", "--crush-root", str(store.global_dir)]
    proc = forked.cli(*argv, env=env, cwd=REPO, new_session=True)
    assert _wait_for(home / "warehouse.writer.lock", proc), "the run ended before its merge: use a bigger corpus"
    time.sleep(delay)
    sent = proc.poll() is None  # (a late one may find the run ended: nothing to say then)
    if sent:
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    if sent:
        assert proc.returncode == 130, err[-3000:]
        assert err.strip().splitlines()[-1] == "interrupted"
        assert "Traceback" not in err and "Exception ignored" not in err and "could not merge" not in err
        assert "sources:" not in out
    # the next run and the count need no process of their own
    homes = {"AGENTLAKE_HOME": home, "DAGSTER_HOME": home / "dagster"}
    again = run_cli(*argv, "--quiet", env=homes, cwd=REPO)
    assert again.returncode == 0, again.stderr[-3000:]
    counted = run_cli("sql", "--format", "csv", "SELECT COUNT(*), COUNT(DISTINCT session_id) FROM sessions",
                      env=homes, cwd=REPO)
    assert counted.stdout.split()[-1] == f"{store.sessions},{store.sessions}"


def test_a_ctrl_c_while_workers_start_is_raised_once_they_have_started():
    """The kernel may hand a Ctrl-C to any thread that does not block it (Dagster's, DuckDB's), and
    Python runs the handler in the main thread all the same: the parent was cut off between
    starting a worker and sending it its work, and the worker printed `EOFError: Ran out of
    input` under the run's `interrupted` (a CI run, under load)."""
    import threading

    from warehouse.land.ingest import _sigint_held

    def another_thread_gets_it():
        os.kill(os.getpid(), signal.SIGINT)  # this thread does not block it: the kernel may pick it

    reached = []
    # Python's own handler, whatever an earlier test's library left (PySpark's, or SIGINT ignored)
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    # the thread the kernel picks may wait long for a core on a busy machine: its C-level handler
    # writes to the wakeup fd once it has run, and the Python handler runs after that
    woken, wakeup = os.pipe()
    os.set_blocking(wakeup, False)
    before = signal.set_wakeup_fd(wakeup)
    try:
        with pytest.raises(KeyboardInterrupt):
            with _sigint_held():
                sender = threading.Thread(target=another_thread_gets_it)
                sender.start()
                sender.join()
                select.select([woken], [], [], 60)
                for _ in range(1000):  # the handler runs at the next check: give it many
                    time.sleep(0.0001)
                reached.append("the workers started")
    finally:
        after = signal.signal(signal.SIGINT, handler)  # what _sigint_held left, the earlier one put back
        signal.set_wakeup_fd(before)
        os.close(woken)
        os.close(wakeup)
    assert reached == ["the workers started"]
    assert after is signal.default_int_handler


def test_ctrl_c_during_a_query_of_agentlake_sql_is_130(lake):
    """A trial: Ctrl-C on a long `agentlake sql` query said `problem: ... RuntimeError: Query
    interrupted` and exited 1. DuckDB raises that RuntimeError when Python's own signal check came
    first: an interrupt like its InterruptException, `interrupted`, 130."""
    env = {**os.environ, "AGENTLAKE_HOME": str(lake.home)}
    proc = forked.cli("sql", "SELECT count(*) FROM range(100000000000)", env=env, cwd=REPO, new_session=True)
    time.sleep(1.5)  # the query running (it never ends by itself)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (130, "interrupted\n"), err[-2000:]
