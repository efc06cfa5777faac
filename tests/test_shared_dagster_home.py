"""Setting up Dagster's storage for an ingest. Two ingests sharing one DAGSTER_HOME at once (the
user's own, or a scheduled run beside a manual one): Dagster's first use creates its tables and
its partition add reads then inserts, so unguarded, one of them failed with "table runs already
exists" or a UNIQUE constraint. And a first run killed while Dagster made its tables: every later
run failed on the missing partitions table."""

import os
import sqlite3
from pathlib import Path

import dagster as dg

from pipelines.runner import _instance_with_partitions, dagster_env
from tests import support_forked as forked
from tests.conftest import run_cli
from transforms.synth.crush import generate_store
from warehouse.lake.layout import Layout

PROCESSES = 4
ROUNDS = 10


class _Source:
    def __init__(self, partition: str):
        self.dagster_partition = partition


def _register_rounds(home: str, start, failures) -> None:
    """One process: the same partitions as its siblings, round after round, all starting at once."""
    os.environ["DAGSTER_HOME"] = home  # (its own process) the shipped config reads it
    start.wait()
    try:
        for round_ in range(ROUNDS):
            sources = [_Source(f"crush-project-{round_}-{i}") for i in range(20)]
            with _instance_with_partitions(dg, home, sources) as instance:
                assert set(instance.get_dynamic_partitions("sources")) >= {s.dagster_partition for s in sources}
    except BaseException as exc:  # noqa: BLE001 (reported to the test, whatever it is)
        failures.put(f"{type(exc).__name__}: {str(exc)[:300]}")


def test_processes_setting_up_one_fresh_dagster_home_at_once_all_succeed(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own
    layout = Layout(home=tmp_path / "home", lake=tmp_path / "lake", warehouse=tmp_path / "wh.ducklake")
    home = dagster_env(layout)["DAGSTER_HOME"]  # agentlake's own config, no tables yet
    assert not any(name.endswith(".db") for _, _, files in os.walk(home) for name in files)
    context = forked.context()  # processes of their own, with Dagster imported already
    start, failures = context.Barrier(PROCESSES), context.Queue()
    workers = [context.Process(target=_register_rounds, args=(home, start, failures)) for _ in range(PROCESSES)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=240)
    errors = []
    while not failures.empty():
        errors.append(failures.get())
    assert errors == [] and [w.exitcode for w in workers] == [0] * PROCESSES
    monkeypatch.setenv("DAGSTER_HOME", home)
    with _instance_with_partitions(dg, home, [_Source("crush-last")]) as instance:
        every = {f"crush-project-{round_}-{i}" for round_ in range(ROUNDS) for i in range(20)} | {"crush-last"}
        registered = instance.get_dynamic_partitions("sources")
        assert sorted(registered) == sorted(every)  # each once


def test_two_ingests_with_one_dagster_home_both_land(tmp_path):
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


def _cut_short(dagster_home: Path) -> None:
    """Dagster's event index as a first run killed while creating it leaves it: two tables, no
    partitions table, no schema version."""
    with sqlite3.connect(dagster_home / "history" / "runs" / "index.db") as db:
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            if name not in ("event_logs", "secondary_indexes"):
                db.execute(f'DROP TABLE "{name}"')


def _cli(*args: str, env: dict | None = None):
    """One ingest after another, each with its own Dagster instance: in this process."""
    return run_cli(*args, env=env)


def test_a_first_run_killed_while_dagster_made_its_tables_is_completed_by_the_next(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    store = generate_store(tmp_path / "crush", projects=2, sessions_per_project=2, seed=3)
    home = tmp_path / "home"
    ingest = ("ingest", "--quiet", "--no-default", "--home", str(home), "--crush-root", str(store.global_dir))
    assert _cli(*ingest).returncode == 0
    _cut_short(home / "dagster")
    (home / "lake" / "_state").rename(tmp_path / "state")  # every source read again: a Dagster run
    again = _cli(*ingest, "--full-refresh")
    assert again.returncode == 0, again.stderr[-3000:]
    counted = _cli("sql", "--home", str(home), "--format", "csv", "SELECT COUNT(*) FROM sessions")
    assert counted.stdout.split()[-1] == str(store.sessions)


def test_a_dagster_home_of_the_users_own_is_not_migrated_but_the_command_is_said(tmp_path, monkeypatch):
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=2, seed=4)
    theirs = tmp_path / "their-dagster"
    ingest = ("ingest", "--quiet", "--no-default", "--home", str(tmp_path / "home"),
              "--crush-root", str(store.global_dir), "--full-refresh")
    assert _cli(*ingest, env={"DAGSTER_HOME": str(theirs)}).returncode == 0
    _cut_short(theirs)
    refused = _cli(*ingest, env={"DAGSTER_HOME": str(theirs)})
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        f"error: Dagster's storage in {theirs} has no partitions table (a first run interrupted while it was "
        f"created, or an older Dagster's storage): run `DAGSTER_HOME={theirs} dagster instance migrate`, "
        "then ingest again")
    with sqlite3.connect(theirs / "history" / "runs" / "index.db") as db:  # left as it was
        assert {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} == {
            "event_logs", "secondary_indexes"}
