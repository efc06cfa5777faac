"""Limits: symlinks escaping a project, agents' credential files, huge rows and sessions."""

import os
import subprocess
from pathlib import Path
import sys
import threading

import pytest

from tests.conftest import T0, ingest_tables, query
from transforms.crush.discover import discover
from transforms.synth.crush import add_message, add_session, create_crush_db, write_registry
from transforms.synth.crush_parts import finish_part, tool_call_part, tool_result_part


def test_a_symlink_escaping_its_project_is_refused(layout, project, tmp_path):
    secret = project("elsewhere")  # any SQLite file on the machine
    add_session(secret.conn, "secret", title="not yours", created_at=T0)
    secret.close()
    victim = tmp_path / "projects" / "victim"
    (victim / ".crush").mkdir(parents=True)
    (victim / ".crush" / "crush.db").symlink_to(secret.db)
    write_registry(tmp_path / "g", [{"path": str(victim), "data_dir": ".crush", "last_accessed": "x"}])
    (source,) = discover(env={"CRUSH_GLOBAL_DATA": str(tmp_path / "g")}).sources
    assert source.skip_reason.startswith("refused:") and str(secret.db) in source.skip_reason
    summary = ingest_tables(layout, victim / ".crush" / "crush.db")
    assert summary.results[0].status == "skipped" and "refused" in summary.results[0].error
    assert query(layout, "SELECT COUNT(*) FROM sessions") == [(0,)]


def test_a_symlink_inside_the_project_is_fine(tmp_path):
    proj = tmp_path / "proj"
    (proj / "real-data").mkdir(parents=True)
    create_crush_db(proj / "real-data" / "crush.db").close()
    (proj / ".crush").symlink_to(proj / "real-data")
    write_registry(tmp_path / "g", [{"path": str(proj), "data_dir": ".crush", "last_accessed": "x"}])
    (source,) = discover(env={"CRUSH_GLOBAL_DATA": str(tmp_path / "g")}).sources
    assert source.skip_reason is None


def test_credential_files_are_never_opened(layout, project, tmp_path):
    """crush.json can hold API keys. Make it a FIFO: opening it would block forever."""
    p = project("proj")
    add_session(p.conn, "s", title="t", created_at=T0)
    p.close()
    global_dir = tmp_path / "g"
    write_registry(global_dir, [{"path": str(p.path), "data_dir": ".crush", "last_accessed": "x"}])
    for fifo in (global_dir / "crush.json", p.data_dir / "crush.json", p.path / ".crush.json"):
        os.mkfifo(fifo)
    done = threading.Event()

    def run():
        ingest_tables(layout, roots=[global_dir])
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(60), "ingestion blocked: it opened a credential file"
    assert query(layout, "SELECT session_id FROM sessions") == [("s",)]


BIG = """
import resource, sys
from tests.conftest import ingest
from warehouse.lake.layout import Layout
summary = ingest(Layout.resolve(home=sys.argv[2]), sys.argv[1])
r = summary.results[0]
assert r.status == "ok" and r.reconciled, (r.status, r.error, r.reconcile)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, r.rows["messages"], r.rows["parts"])
"""


def _peak_mib(db, home) -> tuple[int, int, int]:
    out = subprocess.run([sys.executable, "-c", BIG, str(db), str(home)], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(__file__)), timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    peak, messages, parts = map(int, out.stdout.split())
    return peak, messages, parts


@pytest.mark.slow
def test_a_50_mb_tool_result_within_the_memory_bound(project, tmp_path):
    p = project("big-result")
    add_session(p.conn, "s", title="t", created_at=T0)
    add_message(p.conn, "a", "s", "assistant", [tool_call_part("c", "bash", {"command": "cat big.log"})], created_at=T0)
    add_message(p.conn, "r", "s", "tool", [tool_result_part("c", "bash", "x" * 50_000_000), finish_part("stop")],
                created_at=T0 + 1)
    p.close()
    peak, messages, _ = _peak_mib(p.db, tmp_path / "home")
    print(f"50 MB tool result: peak RSS {peak} MiB")
    assert messages == 2 and peak < 1536


@pytest.mark.slow
def test_a_200k_message_session_within_the_memory_bound(project, tmp_path):
    p = project("long-session")
    add_session(p.conn, "s", title="t", created_at=T0)
    rows = [(f"m{i}", "s", "assistant" if i % 2 else "user",
             '[{"type":"text","data":{"text":"step %d with some words of text"}},'
             '{"type":"finish","data":{"reason":"end_turn","time":%d}}]' % (i, T0 + i), "m", T0 + i, T0 + i)
            for i in range(200_000)]
    p.conn.executemany("INSERT INTO messages (id, session_id, role, parts, model, created_at, updated_at) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    p.close()
    peak, messages, parts = _peak_mib(p.db, tmp_path / "home")
    print(f"200k-message session: peak RSS {peak} MiB")
    assert (messages, parts) == (200_000, 400_000) and peak < 1536


PERMISSIONS = """
import os, sys
# everything is imported first: nobody may not read root's Python install nor this checkout
from transforms.provider import DiscoverOptions
from warehouse.land.ingest import discover_sources, ingest_all
from warehouse.lake.layout import Layout
from transforms.providers import PROVIDERS
list(PROVIDERS.values())  # each agent's module (imported when first asked for)
from transforms.bundle import code_version
code_version()  # the digest of agentlake's code a family's cached rows are keyed by: the checkout may be root's alone
options = DiscoverOptions(env={}, extra_stores={"crush": (sys.argv[1],)}, use_default=False)
os.setgid(65534); os.setuid(65534)  # nobody: file permissions apply again
sources, _ = discover_sources(options)
summary = ingest_all(sources, Layout.resolve(home=sys.argv[2]), workers=1)
r = summary.results[0]
print(r.status, "|", r.error)
"""


@pytest.fixture
def world_tmp():
    """A temporary dir another user can reach (pytest's own is root-only)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="agentlake-perm-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a child as another user")
def test_permission_errors_give_a_clear_error_and_leave_the_lake(world_tmp):
    from tests.conftest import Project

    tmp_path = world_tmp
    p = Project(tmp_path / "projects", "private")
    os.chmod(tmp_path / "projects", 0o755)
    add_session(p.conn, "s", title="t", created_at=T0)
    p.close()
    os.chmod(p.db, 0o600)  # root's, unreadable to the child
    home = tmp_path / "nobody-home"
    home.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(home, 0o777)
    repo = os.path.dirname(os.path.dirname(__file__))
    out = subprocess.run([sys.executable, "-c", PERMISSIONS, str(p.db), str(home)], capture_output=True, text=True,
                         cwd=repo, timeout=120, env={**os.environ, "HOME": str(home)})
    assert out.returncode == 0 and " | " in out.stdout, out.stdout + out.stderr[-2000:]
    status, error = out.stdout.strip().split(" | ", 1)
    assert status == "failed" and "cannot open" in error and str(p.db) in error

    # a lake the child cannot write to: the source fails with the reason, and the lake is as it was
    os.chmod(p.db, 0o644)
    os.chmod(p.data_dir, 0o777)  # SQLite's -shm beside the db
    from tests.conftest import ingest as ingest_as_root
    from warehouse.lake.layout import Layout

    locked = Layout.resolve(home=tmp_path / "locked")
    ingest_as_root(locked, p.db, full_refresh=True)
    before = {q: q.read_bytes() for q in locked.lake.rglob("*.parquet")}
    con = __import__("sqlite3").connect(p.db)
    con.execute("UPDATE sessions SET cost = 2.0")
    con.commit()
    con.close()
    os.chmod(locked.home, 0o777)
    out = subprocess.run([sys.executable, "-c", PERMISSIONS, str(p.db), str(locked.home)], capture_output=True,
                         text=True, cwd=repo, timeout=120, env={**os.environ, "HOME": str(home)})
    assert out.returncode == 0 and " | " in out.stdout, out.stdout + out.stderr[-2000:]
    status, error = out.stdout.strip().split(" | ", 1)
    assert status == "failed" and "Permission denied" in error
    assert {q: q.read_bytes() for q in locked.lake.rglob("*.parquet")} == before


UNREADABLE = """
import json, os, sys
from transforms.provider import DiscoverOptions
from warehouse.land.ingest import discover_sources, ingest_all
from warehouse.lake.layout import Layout
import importlib.metadata, transforms.claude.provider, transforms.claude.normalise, transforms.pricing  # noqa: F401,E401 (imported before dropping root)
from transforms.pricing import input_rate
input_rate("claude-sonnet-4-5", "anthropic", "2026-01-06")  # the price table loads lazily: while root may read it
from transforms.providers import PROVIDERS
list(PROVIDERS.values())  # each agent's module (imported when first asked for)
from transforms.bundle import code_version
code_version()  # the digest of agentlake's code a family's cached rows are keyed by: the checkout may be root's alone
options = DiscoverOptions(env={}, extra_roots={"claude": (sys.argv[1],)}, use_default=False)
os.setgid(65534); os.setuid(65534)
sources, _ = discover_sources(options)
summary = ingest_all(sources, Layout.resolve(home=sys.argv[2]), workers=1)
print(json.dumps([[r.status, r.rows.get("sessions"), r.warnings or [r.error]] for r in summary.results]))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a child as another user")
def test_a_file_unreadable_in_one_run_is_read_in_the_next(world_tmp):
    """Issue 12 item 10: an unreadable transcript was quarantined but its source recorded `ok`
    with its fingerprint, and chmod changes neither size nor mtime: later runs said `unchanged`
    and the session stayed missing. A source with a read failure is not settled."""
    import json
    import subprocess
    import sys

    from transforms.synth.claude import generate_home

    truth = generate_home(world_tmp / "claude", sessions=2, seed=4,
                          workspaces=("/home/dev/webshop",))  # one project folder, two transcripts
    for path in (world_tmp / "claude").rglob("*"):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    os.chmod(world_tmp / "claude", 0o755)
    locked = sorted((world_tmp / "claude" / "projects").glob("*/*.jsonl"))[0]
    os.chmod(locked, 0o600)  # root's own: unreadable to the child
    home = world_tmp / "home"
    home.mkdir(mode=0o777)
    os.chmod(home, 0o777)
    repo = os.path.dirname(os.path.dirname(__file__))

    def run():
        out = subprocess.run([sys.executable, "-c", UNREADABLE, str(world_tmp / "claude"), str(home)],
                             capture_output=True, text=True, cwd=repo, timeout=120,
                             env={**os.environ, "HOME": str(home)})
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout)

    total = truth.sessions + truth.subagents
    [[status, sessions, warnings]] = run()
    assert status == "ok" and sessions < total, warnings
    assert any("read again next run" in w for w in warnings)
    os.chmod(locked, 0o644)  # fixed: same size, same mtime
    [[status, sessions, _]] = run()
    assert status == "ok" and sessions == total
    [[status, _, _]] = run()
    assert status == "unchanged"  # settled once every file was read
