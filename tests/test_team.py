"""A team lake: several machines ingest into one lake on a real S3 protocol server (moto, on
loopback), and the views show exactly the union of what each machine holds."""

import logging
import os
import sqlite3
import subprocess
import sys

import pytest

from transforms.crush.synth import generate_store
from warehouse.config import load_layout
from warehouse.views import build_warehouse, connect

BUCKET = "team-lake"


@pytest.fixture
def s3(monkeypatch):
    """A moto S3 server on 127.0.0.1 and the AWS settings every client reads."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    import boto3

    boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1").create_bucket(Bucket=BUCKET)
    yield env
    server.stop()


def machine_ingest(home, lake, machine, user, crush_root, env) -> subprocess.Popen:
    """One engineer's scheduled run: the real CLI, in its own process, with its own home."""
    argv = [sys.executable, "-m", "pipelines.cli", "ingest", "--quiet", "--no-default", "--home", str(home),
            "--lake", lake, "--machine", machine, "--user", user, "--crush-root", str(crush_root)]
    return subprocess.Popen(argv, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def succeeded(run: subprocess.Popen) -> bool:
    """The run ended with 0; else the assertion shows what it printed. Its pipes are drained as it
    runs (waiting on a full pipe would hang it)."""
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, f"exit {run.returncode}\n{err[-4000:]}\n{out[-2000:]}"
    return True


@pytest.mark.parametrize("where", ["s3", "shared directory"])
def test_two_machines_ingest_concurrently_into_one_lake(s3, tmp_path, where):
    lake = f"s3://{BUCKET}/agentlake" if where == "s3" else str(tmp_path / "nfs" / "lake")
    # machine A has project 0; machine B has projects 0 and 1: project 0 is shared (same name)
    a = generate_store(tmp_path / "a" / "crush", projects=1, sessions_per_project=5, seed=1)
    b = generate_store(tmp_path / "b" / "crush", projects=2, sessions_per_project=5, seed=2)
    assert a.dbs[0].project_path.name == b.dbs[0].project_path.name
    runs = [machine_ingest(tmp_path / "a" / "home", lake, "ana-laptop", "ana", a.global_dir, s3),
            machine_ingest(tmp_path / "b" / "home", lake, "ben-desktop", "ben", b.global_dir, s3)]
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err

    layout = load_layout(tmp_path / "reader", lake)  # a third party: reads only
    assert layout.team == layout.remote == (where == "s3")  # an object-storage lake is a team lake
    build_warehouse(layout.lake, layout.warehouse)
    with connect(layout.warehouse) as con:
        def one(sql):
            return con.execute(sql).fetchall()

        by_machine = dict(one("SELECT machine, COUNT(*) FROM sessions GROUP BY 1"))
        assert by_machine == {"ana-laptop": a.sessions, "ben-desktop": b.sessions}
        assert one("SELECT COUNT(*) FROM messages")[0][0] == a.messages + b.messages
        assert one("SELECT COUNT(*) - COUNT(DISTINCT (machine, source_id, session_id)) FROM sessions")[0][0] == 0
        assert one("SELECT SUM(cost_usd) FROM sessions WHERE is_root")[0][0] == pytest.approx(
            a.root_cost + b.root_cost, abs=1e-9)
        shared = a.dbs[0].project_path.name
        assert sorted(one(f"SELECT DISTINCT \"user\" FROM sessions WHERE project = '{shared}'")) == [("ana",), ("ben",)]
        assert dict(one("SELECT \"user\", COUNT(*) FROM daily_costs GROUP BY 1")).keys() == {"ana", "ben"}
    # every machine lands under its own machine and user: two machines never write one object
    from warehouse.store import open_store

    files = open_store(layout.lake).list("_landing")
    assert files and all(f.startswith(("_landing/ana-laptop/ana/", "_landing/ben-desktop/ben/")) for f in files)


def test_a_pruned_session_keeps_its_history_in_the_s3_lake(s3, tmp_path):
    lake = f"s3://{BUCKET}/pruned"
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=4, seed=5)
    home = tmp_path / "home"
    for _ in range(2):  # the second run is the agent's store after it pruned a session
        run = machine_ingest(home, lake, "ana-laptop", "ana", store.global_dir, s3)
        assert succeeded(run)
        if _:
            break
        with sqlite3.connect(store.dbs[0].path) as db:
            db.execute("PRAGMA foreign_keys = ON")
            (gone,) = db.execute("SELECT id FROM sessions WHERE parent_session_id IS NULL LIMIT 1").fetchone()
            db.execute("DELETE FROM sessions WHERE id = ?", (gone,))
    layout = load_layout(home, lake)
    with connect(layout.warehouse) as con:
        assert con.execute("SELECT COUNT(*) FROM sessions").fetchall()[0][0] == store.sessions
        assert con.execute("SELECT COUNT(*) FROM sessions WHERE session_id = ?", [gone]).fetchall()[0][0] == 1
        assert con.execute("SELECT COUNT(*) FROM messages").fetchall()[0][0] == store.messages
        retained = con.execute("SELECT MAX(retained_sessions) FROM sources").fetchall()[0][0]
    assert retained >= 1  # the deleted root, plus its sub-agents


def test_a_reader_builds_views_over_the_team_lake_with_one_command(s3, tmp_path):
    lake = f"s3://{BUCKET}/readers"
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=3, seed=9)
    run = machine_ingest(tmp_path / "writer", lake, "ana-laptop", "ana", store.global_dir, s3)
    assert succeeded(run)
    reader = [sys.executable, "-m", "pipelines.cli"]
    env = {**os.environ, **s3, "AGENTLAKE_HOME": str(tmp_path / "reader")}
    views = subprocess.run([*reader, "views", "--lake", lake], env=env, capture_output=True, text=True)
    assert views.returncode == 0, views.stderr
    out = subprocess.run([*reader, "sql", "--lake", lake, "--format", "csv", "SELECT COUNT(*) AS n FROM sessions"],
                         env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["n", str(store.sessions)]


def test_the_object_store_writes_replaces_lists_and_removes_stale_files(s3):
    """The writer's contract on S3: a changed file is replaced whole, an unchanged one is not
    written again, a file the source no longer needs is removed, and listing sees exactly that."""
    from warehouse.store import open_store
    from warehouse.writer import SourceFiles, write_files

    store = open_store(f"s3://{BUCKET}/store-test")
    first = SourceFiles(data={"sessions/date=2026-01-01/project=a/x.parquet": b"one",
                              "sessions/date=2026-01-02/project=a/x.parquet": b"two"})
    written = write_files(store, first, {})
    assert written.replaced == 2 and store.list() == sorted(first.data)
    second = SourceFiles(data={"sessions/date=2026-01-01/project=a/x.parquet": b"one",
                               "sessions/date=2026-01-03/project=a/x.parquet": b"three!"})
    again = write_files(store, second, written.files)
    assert (again.unchanged, again.replaced, again.removed) == (1, 1, 1)
    assert store.list() == sorted(second.data)
    assert store.read("sessions/date=2026-01-03/project=a/x.parquet") == b"three!"
    assert store.size("sessions/date=2026-01-02/project=a/x.parquet") is None


def test_a_machine_with_nothing_new_still_sees_tables_others_started_filling(s3, tmp_path):
    """Views of tables with no file are fixed empty views: on a shared lake each run rebuilds
    them, even when none of this machine's sources changed."""
    from transforms.codex.synth import generate_home

    lake = f"s3://{BUCKET}/views"
    crush = generate_store(tmp_path / "crush", projects=1, sessions_per_project=2, seed=3)
    ana = tmp_path / "ana"
    assert succeeded(machine_ingest(ana, lake, "ana-laptop", "ana", crush.global_dir, s3))
    with connect(load_layout(ana, lake).warehouse) as con:
        assert con.execute("SELECT COUNT(*) FROM usage").fetchall() == [(0,)]  # Crush records no usage
    codex = generate_home(tmp_path / "codex", sessions=2, seed=3)
    ben = [sys.executable, "-m", "pipelines.cli", "ingest", "--quiet", "--no-default", "--home", str(tmp_path / "ben"),
           "--lake", lake, "--machine", "ben-desktop", "--user", "ben", "--agent-home", f"codex={tmp_path / 'codex'}"]
    assert subprocess.run(ben, env={**os.environ, **s3}).returncode == 0
    assert succeeded(machine_ingest(ana, lake, "ana-laptop", "ana", crush.global_dir, s3))  # unchanged
    with connect(load_layout(ana, lake).warehouse) as con:
        assert con.execute("SELECT COUNT(*) FROM usage").fetchall() == [(codex.usage_rows,)]


def test_an_emptied_bucket_heals_on_the_next_run(s3, tmp_path):
    """Issue 12 item 8: the landing objects of a machine deleted (a bucket emptied): the next run
    reads its sources again instead of calling them unchanged, and the tables are whole again."""
    import boto3

    lake = f"s3://{BUCKET}/emptied"
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=3, seed=8)
    home = tmp_path / "home"
    assert succeeded(machine_ingest(home, lake, "ana-laptop", "ana", store.global_dir, s3))
    client = boto3.client("s3", endpoint_url=s3["AWS_ENDPOINT_URL"], region_name="us-east-1")
    for obj in client.list_objects_v2(Bucket=BUCKET, Prefix="emptied/")["Contents"]:
        client.delete_object(Bucket=BUCKET, Key=obj["Key"])
    run = machine_ingest(home, lake, "ana-laptop", "ana", store.global_dir, s3)
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, out + err
    with connect(load_layout(home, lake).warehouse) as con:
        assert con.execute("SELECT COUNT(*) FROM messages").fetchall() == [(store.messages,)]
        statuses = con.execute("SELECT status FROM sources WHERE run_at = (SELECT MAX(run_at) FROM sources)").fetchall()
    assert statuses == [("ok",)]


def test_credentials_in_the_lake_uri_are_refused_and_never_printed(tmp_path):
    """Issue 12 item 18: `s3://KEY:SECRET@bucket` is refused with a message that masks the secret."""
    secret = "wJalrXUtnFEMI" + "K7MDENGbPxRfiCY"
    argv = [sys.executable, "-m", "pipelines.cli", "ingest", "--no-default", "--home", str(tmp_path / "home"),
            "--lake", f"s3://AKIAEXAMPLE:{secret}@{BUCKET}/lake"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "holds credentials" in out.stderr and "***@team-lake" in out.stderr
    assert secret not in out.stdout + out.stderr and "AKIAEXAMPLE" not in out.stdout + out.stderr
    assert "Traceback" not in out.stderr


def test_a_dead_endpoint_fails_once_and_fast_naming_it(tmp_path):
    """Issue 12 item 14: an S3 endpoint that does not answer took 6 to 8 minutes to give up,
    source by source. Now: one error naming the endpoint, exit 1, well within a minute."""
    import socket
    import time

    with socket.socket() as probe:  # a loopback port with nothing listening on it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = generate_store(tmp_path / "crush", projects=2, sessions_per_project=2, seed=4)
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    argv = [sys.executable, "-m", "pipelines.cli", "ingest", "--no-default", "--home", str(tmp_path / "home"),
            "--lake", f"s3://{BUCKET}/dead", "--crush-root", str(store.global_dir)]
    started = time.monotonic()
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert time.monotonic() - started < 60
    assert out.returncode == 1 and f"127.0.0.1:{port}" in out.stderr and "cannot reach the lake" in out.stderr
    assert "Traceback" not in out.stderr
