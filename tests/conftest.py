"""Shared fixtures: real crush.db files, a real lake in tmp_path, real DuckDB queries.

Expensive things are built once and copied: a lake built for a session (`built_once`) is copied
into each test that uses it, and the CLI runs in this process (`run_cli`) unless the process
boundary is what a test checks."""

import contextlib
import ctypes.util
import io
import os
import shutil
import sys
import tempfile
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import pytest

from transforms.synth.codewhale import (
    cost_snapshot,
    session_doc,
    text_block,
    write_session,
)
from transforms.synth.crush import add_file, add_message, add_session, create_crush_db
from transforms.synth.crush_parts import (
    bash_output,
    finish_part,
    text_part,
    tool_call_part,
    tool_result_part,
)
from transforms.provider import DiscoverOptions
from warehouse.land.ingest import discover_sources, ingest_all
from warehouse.lake.layout import Layout
from warehouse.catalog.build import refresh
from warehouse.lake import ducklake
from warehouse.lake.ducklake import CATALOG, connect

# Every commit of SQLite, DuckDB and DuckLake syncs its file to disk, and the suite commits
# thousands of times: on a virtual disk a sync is milliseconds, on a memory file system nothing.
# Tests check what was written and what a killed process left, never what survives a power cut,
# so their files (and the commands' own temporary files) go to RAM when the machine has it to
# spare (docs/TESTING.md). AGENTLAKE_TEST_TMP names another place; an empty value keeps /tmp.
MEMORY_FS, MEMORY_FS_FREE = Path("/dev/shm"), 4 << 30


def _memory_temp_root() -> Path | None:
    wanted = os.environ.get("AGENTLAKE_TEST_TMP")
    if wanted is not None:
        return Path(wanted) if wanted else None
    try:
        stat = os.statvfs(MEMORY_FS)
    except OSError:
        return None
    return MEMORY_FS if stat.f_bavail * stat.f_frsize >= MEMORY_FS_FREE and os.access(MEMORY_FS, os.W_OK) else None


# The workers allocate with jemalloc (Debian's `libjemalloc2`, which .ci/run installs) instead of
# glibc's malloc, through which DuckDB's and DuckLake's many small allocations in each statement
# were a fifth of a merge's CPU (docs/TESTING.md). It is preloaded into the workers only, and taken
# out of their environment again, so what a test starts (Chromium, Java, PostgreSQL, a new
# interpreter) keeps the system's allocator. AGENTLAKE_TEST_MALLOC names another library; empty
# keeps glibc's.
PRELOADED = "AGENTLAKE_TEST_PRELOADED"


def _worker_allocator() -> str | None:
    wanted = os.environ.get("AGENTLAKE_TEST_MALLOC")
    if wanted is not None:
        return wanted or None
    return ctypes.util.find_library("jemalloc")  # its soname, which the loader finds as it would


def _preload_for_workers(config) -> None:
    """Before the controller starts its workers (xdist starts them at the session's start, after
    every plugin's configure): they inherit the preload. A worker takes it out of its environment."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        if os.environ.pop(PRELOADED, None) is not None:
            os.environ.pop("LD_PRELOAD", None)
        return
    lib = _worker_allocator()
    workers = getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", "no") != "no"
    if lib and workers and not os.environ.get("LD_PRELOAD"):
        os.environ["LD_PRELOAD"] = lib
        os.environ[PRELOADED] = lib


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    _preload_for_workers(config)
    # DuckDB's threads on the tests' small lakes cost more than they give, and the suite's workers
    # already use every core: one each (docs/TESTING.md). A test of the default unsets it.
    os.environ.setdefault("AGENTLAKE_THREADS", "1")
    # each worker, and every `python -m pipelines.cli` a test starts, imports the project: with
    # PYTHONDONTWRITEBYTECODE set (as some sandboxes and images set it) each compiled it all again
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        sys.dont_write_bytecode = False
    root = _memory_temp_root()
    if root is None or os.environ.get("PYTEST_XDIST_WORKER"):  # a worker has its parent's
        return
    temp = root / f"agentlake-tests-{os.getuid()}"
    temp.mkdir(exist_ok=True)
    temp.chmod(0o755)  # as /tmp, others may pass through (tests run a command as `nobody`); pytest's own is root's
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", str(temp))  # pytest's numbered run folders, here
    os.environ["TMPDIR"] = str(temp)  # what the commands and their subprocesses write for a while
    tempfile.tempdir = None


# A test that leaves a variable set changes every later test: DAGSTER_HOME left set made two
# "machines" share one Dagster instance in test_team, which failed only in a full run. The
# environment is compared once a test's fixtures are all torn down (monkeypatch's last).
_ENV_BEFORE = pytest.StashKey[dict]()
# set by the libraries themselves, once: polars' allocator on its import, PySpark's gateway
SET_BY_LIBRARIES = {"_RJEM_MALLOC_CONF", "SPARK_AUTH_SOCKET_TIMEOUT", "SPARK_BUFFER_SIZE"}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    item.stash[_ENV_BEFORE] = dict(os.environ)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    _forget_dagster_state_storage()
    before, after = item.stash.get(_ENV_BEFORE, None), dict(os.environ)
    changed = sorted(k for k in before.keys() | after.keys()
                     if before.get(k) != after.get(k) and k not in SET_BY_LIBRARIES) if before is not None else []
    if changed:
        os.environ.clear()
        os.environ.update(before)  # the next test starts clean whatever this one did
        raise AssertionError(f"{item.nodeid} left the environment changed: {', '.join(changed)}")


# The modules of long scenarios (seconds a test: processes killed or run side by side, Spark,
# a demo built and replaced), run first: the workers then end on short tests, and finish together
# instead of one waiting for the other's last long one (docs/TESTING.md). Each module's tests stay
# together, in their own order, so its module-scoped fixtures are built once.
LONG_FIRST = ("test_crash", "test_demo_args", "test_shared_dagster_home", "test_spark", "test_dagster_trial",
              "test_newuser_quickstart", "test_notebooks", "test_interrupts", "test_team", "test_central",
              "test_concurrency", "test_team_postgres", "test_dagster_postgres")


def pytest_collection_modifyitems(config, items):
    rank = {name: at for at, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable: the rest as collected


def _forget_dagster_state_storage() -> None:
    """Dagster keeps the storage of the instance entered last in a context variable, put back as
    each `with instance` ends: instances ended out of order leave a later test an instance that is
    gone ("Attempted to resolve undefined DagsterInstance weakref", once in a full run). A worker
    whose tests have not loaded Dagster has nothing to forget, and is spared its import."""
    base = sys.modules.get("dagster._core.storage.defs_state.base")
    if base is not None:
        base._current_storage.set(None)


T0 = 1767225600  # 2026-01-01T00:00:00Z, in seconds as Crush writes it
DAY = 86400


@pytest.fixture(scope="session")
def shared_duckdb_dir(tmp_path_factory) -> Path:
    """One `~/.duckdb` for the whole run. Every agentlake command installs DuckLake's extension
    (36 MB) into the home's `.duckdb/extensions`; with a new home per test the copies over the suite
    filled CI's disk (docs/BENCHMARKS.md, "Figures behind the code's choices")."""
    return tmp_path_factory.mktemp("duckdb-home")


# the agents' variables pointed at empty folders, and those naming a file, unset
EMPTY_HOMES = (("CRUSH_GLOBAL_DATA", "crush"), ("CODEWHALE_HOME", "codewhale"), ("CLAUDE_CONFIG_DIR", "claude"),
               ("CODEX_HOME", "codex"), ("XDG_DATA_HOME", "xdg-data"), ("XDG_CONFIG_HOME", "xdg-config"))
UNSET = ("OPENCODE_DB", "AIDER_CHAT_HISTORY_FILE", "KILO_DB", "AGENTLAKE_LAKE")
# the agents that keep their data under the home directory only (Droid's ~/.factory, ...)
EMPTY_DIRS = ("HOME", "USERPROFILE", "APPDATA", "LOCALAPPDATA", "XDG_STATE_HOME", "GEMINI_CLI_HOME", "QWEN_HOME",
              "QWEN_RUNTIME_DIR", "KIMI_SHARE_DIR", "GOOSE_PATH_ROOT", "COPILOT_HOME", "PI_CODING_AGENT_DIR")


@lru_cache(maxsize=1)
def _other_agent_vars() -> tuple[str, ...]:
    """Every other variable discovery reads (transforms.providers.env_vars: a new agent's own
    too), unset in each test: its agent then looks under the empty HOME."""
    from transforms.providers import env_vars

    handled = {var for var, _ in EMPTY_HOMES} | set(UNSET) | set(EMPTY_DIRS)
    return tuple(var for var in env_vars() if var not in handled)


def isolate(monkeypatch, empty: Path, duckdb_dir: Path) -> None:
    """Every agent's default home points into the empty folder `empty`: nothing reads the
    machine's own sessions, whatever it discovers by default."""
    for var, sub in EMPTY_HOMES:
        (empty / sub).mkdir()
        monkeypatch.setenv(var, str(empty / sub))
    for var in UNSET + _other_agent_vars():
        monkeypatch.delenv(var, raising=False)
    for var in EMPTY_DIRS:
        (empty / var.lower()).mkdir()
        monkeypatch.setenv(var, str(empty / var.lower()))
    (empty / "home" / ".duckdb").symlink_to(duckdb_dir, target_is_directory=True)


@pytest.fixture(autouse=True)
def no_real_agent_data(tmp_path_factory, monkeypatch, shared_duckdb_dir):
    isolate(monkeypatch, tmp_path_factory.mktemp("no-agent-data"), shared_duckdb_dir)


@pytest.fixture(scope="session")
def built_once(tmp_path_factory, shared_duckdb_dir):
    """`built_once(name, build)`: `build(root)` run once per session in an isolated environment
    (as every test has), its result kept; for the lakes and stores many tests read. A test that
    changes what was built copies it first (`copy_home`). `workers=True`: once for all of the
    run's workers, for what every reader only reads or copies (the first to ask builds it, the
    others wait and read its pickled result; a result that does not pickle is built by each)."""
    done = {}
    # the run's folder, above each worker's own (pytest-xdist's workers share it)
    run_root = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else None

    def build_here(build, root: Path, env: Path):
        with pytest.MonkeyPatch.context() as mp:
            isolate(mp, env, shared_duckdb_dir)
            return build(root)

    def get(name: str, build, workers: bool = False):
        if name in done:
            return done[name]
        if workers and run_root is not None:
            done[name] = _built_for_all_workers(run_root / f"built-{name}",
                                                lambda root, env: build_here(build, root, env))
        else:
            done[name] = build_here(build, tmp_path_factory.mktemp(f"built-{name}"),
                                    tmp_path_factory.mktemp(f"built-{name}-env"))
        return done[name]

    return get


def _built_for_all_workers(folder: Path, build):
    """`build(root, env)` into `folder` by the first worker to get there, under a lock; the others
    wait for it and read the pickled result."""
    import fcntl
    import pickle

    folder.mkdir(exist_ok=True)
    result = folder / "result.pickle"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if result.exists():
            return pickle.loads(result.read_bytes())
        mine = folder / os.environ["PYTEST_XDIST_WORKER"]  # a build that failed left its own folders
        (mine / "root").mkdir(parents=True)
        (mine / "env").mkdir()
        built = build(mine / "root", mine / "env")
        try:
            result.write_bytes(pickle.dumps(built))
        except (pickle.PicklingError, TypeError, AttributeError):  # the next worker builds its own
            pass
        return built


def copy_home(template: Path, home: Path) -> Path:
    """A copy of a built agentlake home (its lake and catalog together, as a user may copy one):
    the copy reads and writes its own files from its first merge on."""
    shutil.copytree(template, home, symlinks=True)
    return home


@dataclass
class Ran:
    """What a command returned and printed, as `subprocess.run(..., capture_output=True, text=True)` has it."""

    args: tuple
    returncode: int
    stdout: str
    stderr: str


def run_cli(*args, env: dict | None = None, replace_env: bool = False, cwd=None) -> Ran:
    """`agentlake ARGS` in this process: `main`, its output captured, `env` set on top of this
    process's environment (or instead of it), in `cwd`; everything is put back after. For the
    tests where the process boundary is the point (a signal, an exit without a traceback from a
    real interpreter, a scheduler's environment), start `python -m pipelines.cli` instead."""
    from pipelines.cli import main

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        if replace_env:
            os.environ.clear()
        os.environ.update({k: str(v) for k, v in (env or {}).items()})
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exc:  # argparse's usage errors, and sys.exit(message)
                if isinstance(exc.code, str):
                    print(exc.code, file=err)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return Ran(args, code, out.getvalue(), err.getvalue())


@pytest.fixture
def layout(tmp_path) -> Layout:
    return Layout.resolve(home=tmp_path / "home", machine="laptop", user="dev")


class Project:
    """A project directory with a Crush data dir and an open crush.db."""

    def __init__(self, root: Path, name: str, stage: int = 7):
        self.path = root / name
        self.data_dir = self.path / ".crush"
        self.data_dir.mkdir(parents=True)
        self.db = self.data_dir / "crush.db"
        self.conn = create_crush_db(self.db, stage)

    def close(self):
        self.conn.commit()
        self.conn.close()


@pytest.fixture
def project(tmp_path):
    made = []

    def make(name="proj", stage=7) -> Project:
        p = Project(tmp_path / "projects", name, stage)
        made.append(p)
        return p

    yield make
    for p in made:
        try:
            p.conn.close()
        except Exception:
            pass


def options_for(*stores, roots=(), codewhale_homes=(), homes=None, cache_root=None) -> DiscoverOptions:
    """Options that discover the named stores only (never the machine's own data).
    `homes` maps other providers to their agent homes (`{"claude": [dir]}`); `cache_root`: the
    home's caches, as the CLI gives them (Layout.cache_dir)."""
    extra_roots = {"crush": tuple(map(str, roots)), "codewhale": tuple(map(str, codewhale_homes))}
    for provider, paths in (homes or {}).items():
        extra_roots[provider] = extra_roots.get(provider, ()) + tuple(map(str, paths))
    return DiscoverOptions(
        env={},
        extra_stores={"crush": tuple(map(str, stores))},
        extra_roots=extra_roots,
        use_default=False,
        cache_root=cache_root,
    )


def discover_only(*stores, **where):
    return discover_sources(options_for(*stores, **where))


def ingest(layout: Layout, *stores, roots=(), full_refresh=False, codewhale_homes=(), workers=1, homes=None,
           marts=True):
    """Ingest the named stores (see options_for), then merge. One worker by default, so that
    monkeypatched code is the code that runs. `marts=False` merges the tables only, for tests that
    read nothing else (the marts and the search index stay pending, as after a merge stopped between
    the two: the next merge with marts builds them)."""
    sources, problems = discover_only(*stores, roots=roots, codewhale_homes=codewhale_homes, homes=homes,
                                      cache_root=layout.cache_dir)
    summary = ingest_all(sources, layout, full_refresh=full_refresh, problems=problems, workers=workers)
    refresh(layout.lake, layout.warehouse, marts=marts)
    return summary


def ingest_tables(layout: Layout, *stores, **where):
    """`ingest` for tests that read the curated tables only (each agent's own tests): building
    the marts after each of their ingests was most of their time."""
    return ingest(layout, *stores, marts=False, **where)


# The tests' readers, one per published catalog file, as the dashboard keeps them
# (warehouse.serve.dashboard.server.Reader): a merge publishes a new file, whose identity is new,
# so a query after it opens a new reader. Opening one (DuckDB, DuckLake, ATTACH) cost more than
# most of the queries run on it; the suite ran over a thousand.
_READERS: OrderedDict = OrderedDict()
KEPT_READERS = 4


def query(layout: Layout, sql: str, *params):
    """The tests' own SQL, on a reader's read-only connection. `ours`, as agentlake's own queries:
    DuckDB's second check of the pinned DuckLake binary hashes it at every connection
    (warehouse.lake.ducklake._opened)."""
    from warehouse.serve.dashboard.server import catalog_identity

    identity = catalog_identity(layout.warehouse)
    if identity is None:  # no warehouse: connect says so
        with connect(layout.warehouse, ours=True) as con:
            return con.execute(sql, list(params)).fetchall()
    key = (str(layout.warehouse), identity)
    con = _READERS.pop(key, None) or _moved_to_published(layout.warehouse) or connect(layout.warehouse, ours=True)
    _READERS[key] = con
    while len(_READERS) > KEPT_READERS:
        _READERS.popitem(last=False)[1].close()
    with con.cursor() as cursor:
        cursor.execute(f"USE {CATALOG}")
        return cursor.execute(sql, list(params)).fetchall()


def _moved_to_published(warehouse):
    """The reader kept for an earlier catalog file of this warehouse, moved to the one published
    now (a merge renames a new file over it): its DuckDB and extensions are kept, only the attach
    is new. None when there is none, or when it cannot move."""
    import duckdb

    stale = next((key for key in _READERS if key[0] == str(warehouse)), None)
    if stale is None:
        return None
    con = _READERS.pop(stale)
    try:
        con.execute("USE memory")
        con.execute(f"DETACH {CATALOG}")
        ducklake._attach(con, Path(warehouse), None, read_only=True)  # as `connect` attaches it
    except duckdb.Error:
        con.close()
        return None
    return con


@pytest.fixture(scope="session", autouse=True)
def _readers_closed():
    yield
    while _READERS:
        _READERS.popitem()[1].close()


def scalar(layout: Layout, sql: str, *params):
    return query(layout, sql, *params)[0][0]


# --- a lake with known totals, for the marts, the report, the notebooks, the dashboard and BI

def assistant(conn, mid, sid, t, model="claude-sonnet-4-5", provider="anthropic", parts=None):
    add_message(conn, mid, sid, "assistant", parts or [text_part("ok"), finish_part("end_turn", t)],
                created_at=t, finished_at=t, model=model, provider=provider)


@pytest.fixture
def lake(layout, built_once):
    """Known totals: a two-day root with a sub-agent, an awkward three-way split, a session
    without assistant messages, tool calls with failures, and CodeWhale estimated/unknown costs.
    Built once per session; each test has a copy of its home."""
    template = built_once("known-totals", _known_totals, workers=True)  # every test copies it
    copy_home(template.home, layout.home)
    return layout


def _known_totals(root: Path) -> Layout:
    layout = Layout.resolve(home=root / "home", machine="laptop", user="dev")
    p = Project(root / "projects", "shop")
    c = p.conn
    # R: cost 1.0, of which its sub-agent's 0.3; assistant messages: day 1 two (sonnet),
    # day 2 one (gpt) plus the sub-agent's one (sonnet) -> shares 0.5 / 0.25 / 0.25
    add_session(c, "R", title="two days", created_at=T0, cost=1.0)
    add_session(c, "a1$$call-sub", title="New Agent Session", created_at=T0 + DAY, parent="R", cost=0.3)
    assistant(c, "r1", "R", T0 + 10)
    assistant(c, "r2", "R", T0 + 20)
    assistant(c, "r3", "R", T0 + DAY + 10, model="gpt-5.1", provider="openai")
    assistant(c, "s1", "a1$$call-sub", T0 + DAY + 20)
    add_message(c, "u1", "R", "user", [text_part("go")], created_at=T0)
    # S: cost 0.1 over three days -> 0.033333333 + 0.033333333 + 0.033333334
    add_session(c, "S", title="thirds", created_at=T0 + 2 * DAY, cost=0.1)
    for i in range(3):
        assistant(c, f"t{i}", "S", T0 + (2 + i) * DAY, model="claude-haiku-4-5")
    # Q: no assistant message, cost lands on its creation day
    add_session(c, "Q", title="quiet", created_at=T0 + 6 * DAY, cost=0.2)
    # tools in R: two bash (one exits 1), one failed edit, one good edit, one write
    calls = [("b1", "bash", {"command": "FOO=1 npm test"}, bash_output("ok"), False),
             ("b2", "bash", {"command": "npm test -- --watch"}, bash_output("", stderr="x", exit_code=1), False),
             ("e1", "edit", {"file_path": str(p.path / "a.py")}, "old_string not found", True),
             ("e2", "edit", {"file_path": str(p.path / "a.py")}, "edited", False),
             ("w1", "write", {"file_path": "b.py"}, "written", False)]
    for i, (cid, name, args, result, is_error) in enumerate(calls):
        add_message(c, f"call-{cid}", "R", "assistant", [tool_call_part(cid, name, args), finish_part("tool_use", T0 + 100 + i)],
                    created_at=T0 + 100 + i, model="claude-sonnet-4-5", provider="anthropic")
        add_message(c, f"res-{cid}", "R", "tool", [tool_result_part(cid, name, result, is_error=is_error)],
                    created_at=T0 + 101 + i)
    add_file(c, "f0", "R", str(p.path / "a.py"), "", 0, created_at=T0 + 104)
    add_file(c, "f1", "R", str(p.path / "a.py"), "x", 1, created_at=T0 + 104)
    p.close()
    # CodeWhale in the same project: one native, one estimated, one unpriced
    sessions = root / "cw" / "sessions"
    msgs = [{"role": "user", "content": [text_block("hi")]}, {"role": "assistant", "content": [text_block("ok")]}]
    when = datetime.fromtimestamp(T0, timezone.utc)
    write_session(sessions, session_doc("cw-native", title="n", created_at=when, workspace=p.path, messages=msgs,
                                        total_tokens=1000, cost=cost_snapshot(0.04, 0.01)))
    write_session(sessions, session_doc("cw-estimated", title="e", created_at=when, workspace=p.path, messages=msgs,
                                        total_tokens=100_000, cost=None))
    write_session(sessions, session_doc("cw-unknown", title="u", created_at=when, workspace=p.path, messages=msgs,
                                        total_tokens=5000, cost=None, model="glm-4.6", model_provider="custom"))
    ingest(layout, p.db, codewhale_homes=[root / "cw"])
    return layout
