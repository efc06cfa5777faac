"""A team lake: several machines ingest into one lake on a real S3 protocol server (moto, on
loopback), and the views show exactly the union of what each machine holds."""

import logging
import os
import sqlite3

import pytest

from tests import support_forked as forked
from tests.support_s3 import BUCKET, run_cli_fresh, s3, s3_client, s3_server  # noqa: F401  (the moto fixtures)
from transforms.synth.crush import generate_store
from warehouse.lake.config import load_layout
from warehouse.catalog.build import build_warehouse
from warehouse.lake.ducklake import connect


def machine_ingest(home, lake, machine, user, crush_root, env) -> forked.Forked:
    """One engineer's scheduled run: the real CLI, in its own process, with its own home (for
    machines that run at once)."""
    return forked.cli("ingest", "--quiet", "--no-default", "--home", home, "--lake", lake, "--machine", machine,
                      "--user", user, "--crush-root", crush_root, env={**os.environ, **env})


def ingest_here(home, lake, machine, user, crush_root, env):
    """The same run in this process, for machines' runs one after another (with the credentials
    in `env`: the object stores an earlier run made are forgotten)."""
    return run_cli_fresh("ingest", "--quiet", "--no-default", "--home", home, "--lake", lake, "--machine", machine,
                         "--user", user, "--crush-root", crush_root, env=env)


def ok(ran) -> bool:
    """The in-process run ended with 0; else the assertion shows what it printed."""
    assert ran.returncode == 0, f"exit {ran.returncode}\n{ran.stderr[-4000:]}\n{ran.stdout[-2000:]}"
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
    from warehouse.lake.storage import open_store

    files = open_store(layout.lake).list("_landing")
    assert files and all(f.startswith(("_landing/ana-laptop/ana/", "_landing/ben-desktop/ben/")) for f in files)


def test_a_pruned_session_keeps_its_history_in_the_s3_lake(s3, tmp_path):
    lake = f"s3://{BUCKET}/pruned"
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=4, seed=5)
    home = tmp_path / "home"
    for _ in range(2):  # the second run is the agent's store after it pruned a session
        assert ok(ingest_here(home, lake, "ana-laptop", "ana", store.global_dir, s3))
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
    assert ok(ingest_here(tmp_path / "writer", lake, "ana-laptop", "ana", store.global_dir, s3))
    env = {**s3, "AGENTLAKE_HOME": str(tmp_path / "reader")}
    views = run_cli_fresh("views", "--lake", lake, env=env)
    assert views.returncode == 0, views.stderr
    out = run_cli_fresh("sql", "--lake", lake, "--format", "csv", "SELECT COUNT(*) AS n FROM sessions", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["n", str(store.sessions)]


def test_the_object_store_writes_replaces_lists_and_removes_stale_files(s3):
    """The writer's contract on S3: a changed file is replaced whole, an unchanged one is not
    written again, a file the source no longer needs is removed, and listing sees exactly that."""
    from warehouse.lake.storage import open_store
    from warehouse.land.landing_files import SourceFiles, write_files

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
    from transforms.synth.codex import generate_home

    lake = f"s3://{BUCKET}/views"
    crush = generate_store(tmp_path / "crush", projects=1, sessions_per_project=2, seed=3)
    ana = tmp_path / "ana"
    assert ok(ingest_here(ana, lake, "ana-laptop", "ana", crush.global_dir, s3))
    with connect(load_layout(ana, lake).warehouse) as con:
        assert con.execute("SELECT COUNT(*) FROM usage").fetchall() == [(0,)]  # Crush records no usage
    codex = generate_home(tmp_path / "codex", sessions=2, seed=3)
    ben = ["ingest", "--quiet", "--no-default", "--home", str(tmp_path / "ben"),
           "--lake", lake, "--machine", "ben-desktop", "--user", "ben", "--agent-home", f"codex={tmp_path / 'codex'}"]
    assert ok(run_cli_fresh(*ben, env=s3))
    assert ok(ingest_here(ana, lake, "ana-laptop", "ana", crush.global_dir, s3))  # unchanged
    with connect(load_layout(ana, lake).warehouse) as con:
        assert con.execute("SELECT COUNT(*) FROM usage").fetchall() == [(codex.usage_rows,)]


def test_the_lakes_endpoint_in_the_uri_or_in_the_environment_is_one_lake(s3, tmp_path):
    """A team lead's trial landed every source again after writing the endpoint into the URI, which
    it had given in $AWS_ENDPOINT_URL: the machine's state of a lake was keyed by the URI as written.
    It is now keyed by the place (bucket, prefix, endpoint), and an older release's state moves over."""
    import hashlib

    plain = f"s3://{BUCKET}/spelt"
    host = s3["AWS_ENDPOINT_URL"].split("://", 1)[1]
    spelt = f"{plain}?endpoint_override={host}&scheme=http&region=us-east-1"
    store = generate_store(tmp_path / "crush", projects=2, sessions_per_project=2, seed=10)
    home = tmp_path / "ana"
    first = ingest_here(home, plain, "ana-laptop", "ana", store.global_dir, s3)
    assert ok(first) and "sources: 2 ok, 0 unchanged" in first.stdout
    again = ingest_here(home, spelt, "ana-laptop", "ana", store.global_dir, s3)
    assert ok(again) and "sources: 0 ok, 2 unchanged" in again.stdout, again.stdout
    [state] = (home / "remote").iterdir()
    # an older release kept it by the URI as written: moved over, not landed again
    state.rename(home / "remote" / hashlib.sha256(plain.encode()).hexdigest()[:12])
    moved = ingest_here(home, plain, "ana-laptop", "ana", store.global_dir, s3)
    assert ok(moved) and "sources: 0 ok, 2 unchanged" in moved.stdout, moved.stdout
    assert [p.name for p in (home / "remote").iterdir()] == [state.name]


def test_an_emptied_bucket_heals_on_the_next_run(s3, tmp_path):
    """Issue 12 item 8: the landing objects of a machine deleted (a bucket emptied): the next run
    reads its sources again instead of calling them unchanged, and the tables are whole again."""
    import boto3

    lake = f"s3://{BUCKET}/emptied"
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=3, seed=8)
    home = tmp_path / "home"
    assert ok(ingest_here(home, lake, "ana-laptop", "ana", store.global_dir, s3))
    client = boto3.client("s3", endpoint_url=s3["AWS_ENDPOINT_URL"], region_name="us-east-1")
    for obj in client.list_objects_v2(Bucket=BUCKET, Prefix="emptied/")["Contents"]:
        client.delete_object(Bucket=BUCKET, Key=obj["Key"])
    run = ingest_here(home, lake, "ana-laptop", "ana", store.global_dir, s3)
    assert run.returncode == 0, run.stdout + run.stderr
    with connect(load_layout(home, lake).warehouse) as con:
        assert con.execute("SELECT COUNT(*) FROM messages").fetchall() == [(store.messages,)]
        statuses = con.execute("SELECT status FROM sources WHERE run_at = (SELECT MAX(run_at) FROM sources)").fetchall()
    assert statuses == [("ok",)]


def test_credentials_in_the_lake_uri_are_refused_and_never_printed(tmp_path):
    """Issue 12 item 18: `s3://KEY:SECRET@bucket` is refused with a message that masks the secret."""
    secret = "wJalrXUtnFEMI" + "K7MDENGbPxRfiCY"
    out = run_cli_fresh("ingest", "--no-default", "--home", tmp_path / "home",
                        "--lake", f"s3://AKIAEXAMPLE:{secret}@{BUCKET}/lake")
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
    started = time.monotonic()
    out = forked.run_cli("ingest", "--no-default", "--home", tmp_path / "home", "--lake", f"s3://{BUCKET}/dead",
                         "--crush-root", store.global_dir, env=env, timeout=120)
    assert time.monotonic() - started < 60
    assert out.returncode == 1 and f"127.0.0.1:{port}" in out.stderr and "cannot reach the lake" in out.stderr
    assert "Traceback" not in out.stderr


# -- a team lead's trial of a shared S3 lake: one bad object, an empty or missing lake, a store
# that stops answering ---------------------------------------------------------------------------

def cli(*args, env, home):
    """A reader's command, in this process."""
    return run_cli_fresh(*args, "--home", home, env=env)


def cli_in_its_own_process(*args, env, home):
    """A command whose whole output is checked, native libraries' included: its own process."""
    return forked.run_cli(*args, "--home", home, env={**os.environ, **env})


def count(home, sql, env):
    out = cli("sql", "--format", "csv", sql, env=env, home=home)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[1])


def test_a_run_log_object_that_is_not_parquet_is_named_and_skipped(s3, tmp_path):
    """An object under another machine's `_runs/` that is not Parquet (a chunked upload stored
    raw: `2563\\r\\nPAR1...`) made every machine's ingest and every reader's merge die with
    `ArrowInvalid: Parquet magic bytes not found`, naming no file. Now it is named and left out
    of `sources`, the rest merges, and the other machines go on; it is named until it is fixed."""
    lake = f"s3://{BUCKET}/badlog"
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=3, seed=6)
    ana = tmp_path / "ana"
    assert ok(ingest_here(ana, lake, "ana-laptop", "ana", store.global_dir, s3))
    bad = "badlog/_landing/ben-desktop/ben/_runs/20260101T000000Z-0a1b2c3d-4e5f6a7b.parquet"
    s3_client(s3).put_object(Bucket=BUCKET, Key=bad, Body=b"2563\r\nPAR1" + bytes(range(256)) * 40)
    garbage = "badlog/_landing/ben-desktop/ben/crush/0a1b2c3d4e5f6a7b/sessions.parquet"  # a data file: its source waits
    s3_client(s3).put_object(Bucket=BUCKET, Key=garbage, Body=b"")

    reader = tmp_path / "reader"
    merged = cli("merge", "--lake", lake, env=s3, home=reader)
    assert merged.returncode == 0, merged.stderr
    assert f"s3://{BUCKET}/{bad}" in merged.stderr and "not a Parquet file" in merged.stderr
    assert f"s3://{BUCKET}/{garbage} is not a Parquet file (empty)" in merged.stderr
    assert "Traceback" not in merged.stderr
    assert count(reader, "SELECT COUNT(*) AS n FROM sessions", s3) == store.sessions
    assert count(reader, "SELECT COUNT(DISTINCT machine) AS n FROM sources", s3) == 1  # ana's runs, not the bad one

    again = ingest_here(ana, lake, "ana-laptop", "ana", store.global_dir, s3)  # another machine: unaffected
    err = again.stderr
    assert again.returncode == 0 and bad in err and "Traceback" not in err, err
    assert count(ana, "SELECT COUNT(*) AS n FROM sessions", s3) == store.sessions

    s3_client(s3).delete_object(Bucket=BUCKET, Key=bad)  # fixed: said no more
    s3_client(s3).delete_object(Bucket=BUCKET, Key=garbage)
    fixed = cli("merge", "--lake", lake, env=s3, home=reader)
    assert fixed.returncode == 0 and "not a Parquet file" not in fixed.stderr, fixed.stderr


def test_a_bucket_that_does_not_exist_is_an_error_naming_it(s3, tmp_path):
    """`merge --lake s3://nosuchbucket/...` said "merged 0 sources" and exited 0."""
    lake = "s3://no-such-agentlake-bucket/lake"
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=1, seed=2)
    for args in (["merge", "--lake", lake],
                 ["ingest", "--quiet", "--no-default", "--lake", lake, "--crush-root", str(store.global_dir)]):
        out = cli(*args, env=s3, home=tmp_path / "home")
        assert out.returncode == 1, out.stdout + out.stderr
        assert "'no-such-agentlake-bucket', which does not exist" in out.stderr and s3["AWS_ENDPOINT_URL"] in out.stderr
        assert "merged 0 sources" not in out.stdout and "Traceback" not in out.stderr


def test_a_lake_that_lists_nothing_does_not_empty_a_reader(s3, tmp_path):
    """A reader's warehouse merged from a lake, merged again from a lake that lists nothing (an
    empty bucket named by mistake, or the same lake emptied): all its rows were removed, exit 0.
    Now the merge refuses, names what it would remove and how to do it on purpose (`--full`)."""
    lake = f"s3://{BUCKET}/wiped"
    store = generate_store(tmp_path / "crush", projects=2, sessions_per_project=2, seed=7)
    assert ok(ingest_here(tmp_path / "ana", lake, "ana-laptop", "ana", store.global_dir, s3))
    reader = tmp_path / "reader"
    assert cli("merge", "--lake", lake, env=s3, home=reader).returncode == 0
    assert count(reader, "SELECT COUNT(*) AS n FROM sessions", s3) == store.sessions

    s3_client(s3).create_bucket(Bucket="empty-agentlake")
    client = s3_client(s3)
    for objects in client.list_objects_v2(Bucket=BUCKET, Prefix="wiped/_landing/ana-laptop/ana/crush/")["Contents"]:
        client.delete_object(Bucket=BUCKET, Key=objects["Key"])  # the run logs stay: no source does
    for other in ("s3://empty-agentlake/lake", lake):
        out = cli("merge", "--lake", other, env=s3, home=reader)
        assert out.returncode == 1, out.stdout + out.stderr
        assert f"the lake {other} lists no landing file" in out.stderr
        assert f"holds {len(store.dbs)} sources merged from {'it' if other == lake else lake}" in out.stderr
        assert "agentlake merge --full" in out.stderr and "Traceback" not in out.stderr
        assert count(reader, "SELECT COUNT(*) AS n FROM sessions", s3) == store.sessions  # nothing removed

    emptied = cli("merge", "--full", "--lake", lake, env=s3, home=reader)  # on purpose
    assert emptied.returncode == 0, emptied.stderr
    assert count(reader, "SELECT COUNT(*) AS n FROM sessions", s3) == 0


def test_a_reader_merge_against_a_dead_store_is_one_error_naming_it(tmp_path):
    """A reader's `merge` against an endpoint that does not answer printed a raw OSError traceback."""
    import socket
    import time

    with socket.socket() as probe:  # a loopback port with nothing listening on it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    started = time.monotonic()
    out = cli_in_its_own_process("merge", "--lake", f"s3://{BUCKET}/dead", env=env, home=tmp_path / "reader")
    assert time.monotonic() - started < 60
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("error: cannot reach the lake") and f"127.0.0.1:{port}" in out.stderr


def test_a_store_that_stops_answering_fails_each_later_call_at_once(tmp_path, monkeypatch):
    """The store dying mid-ingest took minutes: every source's write waited out pyarrow's three
    tries again (docs/BENCHMARKS.md, "Figures behind the code's choices"). Once it did not answer,
    every later call of the process fails at once with the same error naming the endpoint."""
    import time

    from moto.server import ThreadedMotoServer

    from warehouse.lake.storage import LakeUnreachable, ObjectStore

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    s3_client({"AWS_ENDPOINT_URL": f"http://{host}:{port}"}).create_bucket(Bucket=BUCKET)
    store = ObjectStore(f"s3://{BUCKET}/dying?endpoint_override={host}:{port}&scheme=http&region=us-east-1")
    store.put_all({f"_landing/m/u/crush/s{i}/sessions.parquet": b"x" for i in range(3)})
    assert len(store.list("_landing")) == 3
    server.stop()

    started = time.monotonic()
    with pytest.raises(LakeUnreachable, match=f"cannot reach the lake .* at http://{host}:{port}") as first:
        store.put_all({"_landing/m/u/crush/s9/sessions.parquet": b"y"})
    assert time.monotonic() - started < 30  # pyarrow's own tries, once
    started = time.monotonic()
    for call in [lambda: store.put_all({"_landing/m/u/crush/s8/sessions.parquet": b"z"}),
                 lambda: store.read("_landing/m/u/crush/s0/sessions.parquet"), lambda: store.size("x"),
                 lambda: store.versions("_landing"), lambda: store.delete("x")] * 8:
        with pytest.raises(LakeUnreachable) as later:
            call()
        assert str(later.value) == str(first.value)
    assert time.monotonic() - started < 2  # forty calls, no request


def test_the_permissions_docs_deployment_gives_a_machine(s3, tmp_path, monkeypatch):
    """docs/DEPLOYMENT.md said a machine needs only Put and Delete under its own folder; each
    ingest also lists and reads all of `_landing/` (the laptop's catalog holds everyone's rows).
    The three policies the page now gives, on a server that enforces them (moto's IAM)."""
    import json

    import boto3
    from moto import settings

    iam = boto3.client("iam", endpoint_url=s3["AWS_ENDPOINT_URL"], region_name="us-east-1")
    lake, prefix = f"s3://{BUCKET}/perms", f"arn:aws:s3:::{BUCKET}/perms/_landing"

    def identity(name, statements) -> dict:
        iam.create_user(UserName=name)
        iam.put_user_policy(UserName=name, PolicyName="agentlake", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": statements}))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return {**s3, "AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}

    def may(actions, resource):
        return {"Effect": "Allow", "Action": actions, "Resource": resource}

    write = ["s3:PutObject", "s3:DeleteObject"]
    admin = identity("lake-admin", [may("s3:*", "*")])
    machine = identity("ben", [may("s3:ListBucket", f"arn:aws:s3:::{BUCKET}"), may("s3:GetObject", f"{prefix}/*"),
                               may(write, f"{prefix}/ben-desktop/*")])
    own_only = identity("cleo", [may("s3:ListBucket", f"arn:aws:s3:::{BUCKET}"),
                                 may(["s3:GetObject", *write], f"{prefix}/cleo-mini/*")])
    write_only = identity("dev", [may(write, f"{prefix}/dev-box/*")])  # what the page used to say
    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # from now on every request is checked

    stores = {name: generate_store(tmp_path / name, projects=1, sessions_per_project=2, seed=n)
              for n, name in enumerate(["ana", "ben", "cleo", "dev"], 1)}

    def ingest(name, machine_name, env):  # each with its own credentials, as a new process has them
        ran = ingest_here(tmp_path / f"{name}-home", lake, machine_name, name, stores[name].global_dir, env)
        return ran.returncode, ran.stdout + ran.stderr

    assert ingest("ana", "ana-laptop", admin)[0] == 0
    code, said = ingest("ben", "ben-desktop", machine)
    assert code == 0, said
    assert count(tmp_path / "ben-home", "SELECT COUNT(*) AS n FROM sessions", s3) == \
        stores["ana"].sessions + stores["ben"].sessions  # everyone's rows, in ben's own catalog

    def landed(machine_name):
        listed = s3_client(admin).list_objects_v2(Bucket=BUCKET, Prefix=f"perms/_landing/{machine_name}/")
        return [o["Key"] for o in listed.get("Contents", [])]

    code, said = ingest("cleo", "cleo-mini", own_only)
    assert code == 1 and "could not merge into the warehouse" in said and "cannot read the lake" in said, said
    assert "ACCESS_DENIED" in said and "Traceback" not in said
    assert any("/sessions.parquet" in key for key in landed("cleo-mini"))  # landed all the same, for the center

    code, said = ingest("dev", "dev-box", write_only)
    assert code == 1 and said.startswith("error: cannot read the lake") and "ACCESS_DENIED" in said, said
    assert landed("dev-box") == []  # stopped at its first listing

    # a key the store does not know: it answered, so "cannot read", and the credentials are named
    stores["eve"] = stores["dev"]
    code, said = ingest("eve", "eve-box", {**s3, "AWS_ACCESS_KEY_ID": "AKIA" + "Q" * 16,
                                           "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"})
    assert code == 1 and said.startswith("error: cannot read the lake") and "refused the credentials" in said, said
