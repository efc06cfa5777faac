"""Issue 32, items 2 to 6: one bad thing never stops everything. An out-of-range value, a damaged
landing file, a lost or damaged table file, a damaged writer copy of the catalog: each is said,
naming the file or the source and the row, and repaired where it can be; the others go on, and
nothing is lost or dropped in silence. Every failure of a command is a `problem:` line."""

import shutil
import threading
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import T0, DAY, Project, copy_home, ingest, ingest_tables, run_cli
from transforms.synth.crush import add_message, add_session
from transforms.synth.crush_parts import text_part
from warehouse.catalog.compaction import compact
from warehouse.lake.ducklake import connect, writer_path
from warehouse.lake.layout import Layout
from warehouse.land.landing_files import LANDING_ID

MACHINE = ("--machine", "laptop", "--user", "dev")


def _two_projects(root: Path) -> SimpleNamespace:
    """Two Crush projects of three sessions, each with a message, ingested and merged."""
    layout = Layout.resolve(home=root / "home", machine="laptop", user="dev")
    dbs = []
    for name in ("alpha", "beta"):
        p = Project(root / "projects", name)
        for i in range(3):
            add_session(p.conn, f"{name}{i}", title="t", created_at=T0 + i * DAY, cost=1.0)
            add_message(p.conn, f"{name}{i}-m", f"{name}{i}", "user", [text_part("x" * 200)], created_at=T0 + i * DAY)
        p.close()
        dbs.append(p.db)
    ingest(layout, *dbs)
    compact(layout.warehouse)  # the rows small merges keep in the catalog, written out to the tables' files
    layout.pending_marker.unlink()  # merged, as the CLI's run leaves it: a rerun stays out of Dagster
    return SimpleNamespace(home=layout.home, dbs=dbs)


@pytest.fixture
def home(tmp_path, built_once) -> SimpleNamespace:
    """A copy of the two projects' home (its lake and catalog), and their stores."""
    built = built_once("damage-two-projects", _two_projects, workers=True)
    return SimpleNamespace(home=copy_home(built.home, tmp_path / "home"), dbs=built.dbs,
                           layout=Layout.resolve(home=tmp_path / "home", machine="laptop", user="dev"))


def _ingest_args(h) -> list:
    return ["ingest", "--home", h.home, "--no-default", "--quiet", *MACHINE, *[a for db in h.dbs for a in ("--db", db)]]


def _counts(layout: Layout) -> dict:
    with connect(layout.warehouse, ours=True) as con:
        return dict(con.execute("SELECT project, COUNT(*) FROM sessions GROUP BY 1").fetchall())


def _no_traceback(ran) -> None:
    assert "Traceback" not in ran.stderr + ran.stdout, ran.stderr[-3000:]


# --- 5: a writer copy that cannot be opened is made again from the published catalog

COMMANDS = {"ingest": None, "merge": ["merge"], "merge --full": ["merge", "--full"], "compact": ["compact"]}


@pytest.mark.parametrize("command, damage", [("ingest", "empty"), ("merge", "cut short"), ("merge --full", "empty"),
                                             ("compact", "cut short")])
def test_a_writer_copy_that_cannot_be_opened_is_made_again_from_the_published_catalog(home, damage, command):
    """A disk full during a merge left `warehouse.writer.ducklake` at 0 bytes, and every later
    run failed with "not a valid DuckDB database file" until it was deleted by hand; a copy cut
    short gave tracebacks from ingest, merge, merge --full and compact."""
    own = writer_path(home.layout.warehouse)
    whole = own.read_bytes()
    own.write_bytes(b"" if damage == "empty" else whole[:len(whole) // 2])
    argv = _ingest_args(home) if COMMANDS[command] is None else [*COMMANDS[command], "--home", home.home]
    ran = run_cli(*argv)
    _no_traceback(ran)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert f"the writer's copy {own} could not be opened" in ran.stderr
    assert "made again from the published catalog" in ran.stderr
    assert _counts(home.layout) == {"alpha": 3, "beta": 3}
    again = run_cli("merge", "--home", home.home)  # the copy made again opens: nothing more to say
    assert again.returncode == 0 and "writer's copy" not in again.stderr, again.stderr


# --- 6: every failure is a `problem:` line, with its exit status

def _raising(exc: Exception):
    def fail(*args, **kwargs):
        raise exc
    return fail


def test_a_merge_that_fails_is_a_problem_line_not_a_traceback(home, monkeypatch):
    from warehouse.catalog import merge

    monkeypatch.setattr(merge, "_merge_tables", _raising(
        duckdb.IOException("IO Error: Cannot open file \"x.parquet\": No such file or directory")))
    ran = run_cli("merge", "--home", home.home)
    _no_traceback(ran)
    assert ran.returncode == 1
    assert (f"problem: could not merge into the warehouse at {home.layout.warehouse}: IOException: IO Error: "
            "Cannot open file \"x.parquet\"") in ran.stderr
    # a run with nothing new to land merges alone: its failure is a problem of the run's summary
    ran = run_cli(*_ingest_args(home))
    _no_traceback(ran)
    assert ran.returncode == 1
    assert "sources: 0 ok, 2 unchanged" in ran.stdout
    assert f"problem: could not merge into the warehouse at {home.layout.warehouse}: IO Error" in ran.stdout


def test_a_compaction_that_fails_is_a_problem_line(home, monkeypatch):
    from warehouse.catalog import compaction

    monkeypatch.setattr(compaction, "_compact", _raising(duckdb.IOException("IO Error: No space left on device")))
    ran = run_cli("compact", "--home", home.home)
    _no_traceback(ran)
    assert ran.returncode == 1
    assert (f"problem: could not compact the warehouse at {home.layout.warehouse}: IOException: IO Error: "
            "No space left on device") in ran.stderr


def test_an_unexpected_error_says_where_it_was_raised(home, monkeypatch):
    from warehouse.serve import report

    monkeypatch.setattr(report, "build", _raising(ZeroDivisionError("division by zero")))
    ran = run_cli("report", "--home", home.home)
    _no_traceback(ran)
    assert ran.returncode == 1
    assert "problem: `agentlake report` failed: ZeroDivisionError: division by zero (at test_damage.py:" in ran.stderr


def test_an_interrupted_pool_has_stopped_its_thread_before_the_exit(home, monkeypatch):
    """Once in seven Ctrl-C during `ingest --full-refresh`, the exit printed `OSError: [Errno 9]
    Bad file descriptor` from concurrent.futures: at exit Python wakes each pool's thread through
    a pipe that thread closes as it ends, without a lock. An interrupted pool's thread has ended
    when the interrupt leaves `_pool_round`, so the exit has nothing to race."""
    from concurrent.futures import ProcessPoolExecutor

    from warehouse.land import ingest as landing
    from warehouse.land.ingest import Run, _pool_round, discover_sources
    from tests.conftest import options_for

    pools = []

    class Recorded(ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            pools.append(self)

    monkeypatch.setattr(landing, "ProcessPoolExecutor", Recorded)
    sources, _ = discover_sources(options_for(*home.dbs))
    rounds = _pool_round(sources, Run(home.layout, "interrupted", full_refresh=True), 2, [])
    next(rounds)  # one source done, the other in its worker or done
    threads = [t for t in threading.enumerate() if type(t).__name__ == "_ExecutorManagerThread"]
    assert threads
    with pytest.raises(KeyboardInterrupt):
        rounds.throw(KeyboardInterrupt)
    assert not [t for t in threads if t.is_alive()]
    assert pools


# --- 2: a value out of range is the source's problem: nulled, named, quarantined; the merge goes on

def test_values_out_of_range_are_nulled_named_and_quarantined_and_every_source_merges(layout, project):
    """A Crush session with `cost = 1e308` made every later merge fail (`Conversion Error: Type
    DOUBLE with value inf can't be cast ... INT128`) without naming the source, and no agent's new
    messages reached the warehouse; negative costs and tokens, and 9.2e18 tokens, were stored
    without a word."""
    good, bad = project("good"), project("bad")
    add_session(good.conn, "g", title="t", created_at=T0, cost=1.5)
    bad.conn.execute("PRAGMA ignore_check_constraints = ON")  # Crush's `prompt_tokens >= 0`, as a bad write bypassed it
    add_session(bad.conn, "huge", title="t", created_at=T0, cost=1e308)
    add_session(bad.conn, "negative", title="t", created_at=T0 + DAY, cost=-2.0, prompt_tokens=-5,
                completion_tokens=9_200_000_000_000_000_000)
    add_session(bad.conn, "fine", title="t", created_at=T0 + DAY, cost=0.25)
    for p in (good, bad):
        p.close()
    summary = ingest(layout, good.db, bad.db)
    by_project = {r.source.project: r for r in summary.results}
    assert [r.status for r in summary.results] == ["ok", "ok"]
    (said,) = by_project["bad"].warnings
    assert said.startswith("4 values out of range nulled (kept in quarantine): ")
    assert "sessions.cost_usd = 1e+308 is outside 0 to 1,000,000 (key huge, sessions row 1)" in said
    assert "sessions.cost_usd = -2.0 is outside 0 to 1,000,000 (key negative, sessions row 2)" in said
    assert "sessions.last_step_prompt_tokens = -5 is outside 0 to 1,000,000,000,000 (key negative" in said
    assert "sessions.last_step_completion_tokens = 9200000000000000000 is outside" in said
    assert not by_project["good"].warnings
    with connect(layout.warehouse, ours=True) as con:
        assert con.execute("SELECT session_id, cost_usd, cost_source, last_step_prompt_tokens, "
                           "last_step_completion_tokens FROM sessions ORDER BY session_id").fetchall() == [
            ("fine", 0.25, "native", 0, 0), ("g", 1.5, "native", 0, 0),
            ("huge", None, "unknown", 0, 0), ("negative", None, "unknown", None, None)]
        assert sorted(con.execute("SELECT key, raw, error LIKE '%: nulled' FROM quarantine").fetchall()) == [
            ("huge", "1e+308", True), ("negative", "-2.0", True), ("negative", "-5", True),
            ("negative", "9200000000000000000", True)]
        # the marts are built: every other value is counted
        assert con.execute("SELECT project, SUM(cost_usd)::DOUBLE FROM daily_costs "
                           "GROUP BY 1 ORDER BY 1").fetchall() == [
            ("bad", 0.25), ("good", 1.5)]


def _landed(home: Path, project: str) -> Path:
    """The landing folder of one of the two projects' sources."""
    for sessions in sorted((home / "lake" / "_landing").rglob("sessions.parquet")):
        if pq.read_table(sessions, columns=["project"]).column("project")[0].as_py() == project:
            return sessions.parent
    raise AssertionError(project)


def test_a_landing_file_with_values_out_of_range_from_another_machine_cannot_stop_the_merge(home):
    """A landing file of another machine, or of an older release that did not check values, is
    guarded in the merge too: its values out of range are nulled and named, and every source merges."""
    ours = _landed(home.home, "alpha")
    theirs = home.home / "lake" / "_landing" / "desk" / "ana" / "crush" / ours.name
    shutil.copytree(ours, theirs)
    data = pq.read_table(theirs / "sessions.parquet")
    metadata = {k: v for k, v in data.schema.metadata.items() if k == LANDING_ID}  # as an older release wrote it
    data = data.set_column(data.schema.get_field_index("cost_usd"), "cost_usd",
                           pa.array([float("inf"), float("nan"), 0.5]))
    data = data.set_column(data.schema.get_field_index("last_step_prompt_tokens"), "last_step_prompt_tokens",
                           pa.array([2**63 - 1, 1, 2]))
    pq.write_table(data.replace_schema_metadata(metadata), theirs / "sessions.parquet")
    ran = run_cli("merge", "--home", home.home)
    _no_traceback(ran)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert f"the landing file {theirs / 'sessions.parquet'} holds 3 values out of range, nulled" in ran.stderr
    assert "sessions.cost_usd = inf (key alpha0)" in ran.stderr and "sessions.cost_usd = nan (key alpha1)" in ran.stderr
    assert "sessions.last_step_prompt_tokens = 9223372036854775807 (key alpha0)" in ran.stderr
    assert "`agentlake ingest --full-refresh` on desk" in ran.stderr
    with connect(home.layout.warehouse, ours=True) as con:
        assert con.execute("SELECT session_id, cost_usd, cost_source, last_step_prompt_tokens FROM sessions "
                           "WHERE machine = 'desk' ORDER BY 1").fetchall() == [
            ("alpha0", None, "unknown", None), ("alpha1", None, "unknown", 1), ("alpha2", 0.5, "native", 2)]
        assert con.execute("SELECT SUM(cost_usd)::DOUBLE FROM daily_costs WHERE machine = 'desk'").fetchone() == (0.5,)


# --- 3: a landing file that cannot be read keeps its source's rows, and its machine lands it again

def _flipped(path: Path) -> None:
    """Bytes flipped in place past the header, where the footer still reads but a page does not
    (DuckDB: "Out of buffer", "Variable-length int over 10 bytes"): same size, same name."""
    whole = path.read_bytes()
    for at in range(4, len(whole) - 8):
        damaged = bytearray(whole)
        damaged[at:at + 16] = bytes(b ^ 0xFF for b in whole[at:at + 16])
        path.write_bytes(bytes(damaged))
        try:
            pq.read_metadata(path)
            duckdb.sql(f"SELECT * FROM read_parquet('{path}')").fetchall()
        except duckdb.Error:
            return  # the footer reads, the pages do not
        except Exception:
            continue
    raise AssertionError(f"no flip of {path} made it unreadable")


def _damage(path: Path, how: str) -> None:
    if how == "cut short":
        path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    else:
        _flipped(path)


def _parts(layout: Layout) -> dict:
    with connect(layout.warehouse, ours=True) as con:
        return dict(con.execute("SELECT project, COUNT(*) FROM parts GROUP BY 1").fetchall())


@pytest.mark.parametrize("how", ["cut short", "flipped"])
def test_a_damaged_landing_file_keeps_its_rows_and_this_machine_lands_it_again(home, how):
    """Flipped bytes in a landing parts.parquet gave a traceback (`Out of buffer`) from ingest and
    merge --full; a truncated one was never landed again, and merge --full dropped its source's
    rows with exit 0."""
    damaged = _landed(home.home, "alpha") / "parts.parquet"
    _damage(damaged, how)
    for argv in (["merge", "--home", home.home], ["merge", "--full", "--home", home.home]):
        ran = run_cli(*argv)
        _no_traceback(ran)
        assert ran.returncode == 0, ran.stderr[-2000:]
        assert f"warning: the landing file {damaged} " in ran.stderr
        assert ("the warehouse keeps the rows its source had, and the next `agentlake ingest` of laptop (user dev) "
                "lands it again from the agent's store") in ran.stderr
        assert "were being written" not in ran.stderr  # it is not waiting for a write
        assert _parts(home.layout) == {"alpha": 3, "beta": 3} and _counts(home.layout) == {"alpha": 3, "beta": 3}
    ran = run_cli(*_ingest_args(home))  # this machine's next ingest: the store read again, the file written again
    _no_traceback(ran)
    assert ran.returncode == 0 and "sources: 1 ok, 1 unchanged" in ran.stdout, ran.stdout + ran.stderr[-2000:]
    assert "landing file" not in ran.stderr
    assert pq.read_table(damaged).num_rows == 3
    assert _parts(home.layout) == {"alpha": 3, "beta": 3}
    assert not list((home.home / "lake").glob("_damaged/**/*.parquet"))  # the note was taken


def test_a_full_refresh_writes_a_damaged_landing_file_again(home):
    """`ingest --full-refresh` kept a file damaged in place: same size, and the digest its state
    recorded matched what it would write."""
    damaged = _landed(home.home, "beta") / "parts.parquet"
    _flipped(damaged)
    summary = ingest_tables(home.layout, *home.dbs, full_refresh=True)  # it reads the `parts` table only
    assert [r.status for r in summary.results] == ["ok", "ok"]
    assert pq.read_table(damaged).num_rows == 3
    assert _parts(home.layout) == {"alpha": 3, "beta": 3}


def test_another_machines_damaged_landing_file_is_its_problem_named_and_its_rows_stay(home):
    ours = _landed(home.home, "alpha")
    theirs = home.home / "lake" / "_landing" / "desk" / "ana" / "crush" / ours.name
    shutil.copytree(ours, theirs)
    assert run_cli("merge", "--home", home.home).returncode == 0
    before = _counts(home.layout)
    _flipped(theirs / "messages.parquet")
    ran = run_cli("merge", "--full", "--home", home.home)
    _no_traceback(ran)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert (f"the landing file {theirs / 'messages.parquet'} cannot be read (" in ran.stderr
            and "the next `agentlake ingest` of desk (user ana) lands it again" in ran.stderr)
    assert _counts(home.layout) == before  # desk's rows are kept, not dropped
    with connect(home.layout.warehouse, ours=True) as con:
        assert con.execute("SELECT COUNT(*) FROM messages WHERE machine = 'desk'").fetchone() == (3,)
    # the note that machine's ingest finds; this machine's own ingest leaves it alone
    note = home.home / "lake" / "_damaged" / "desk" / "ana" / "crush" / ours.name / "messages.parquet"
    assert pq.read_table(note).column("file").to_pylist() == [f"_landing/desk/ana/crush/{ours.name}/messages.parquet"]
    ran = run_cli(*_ingest_args(home))
    assert ran.returncode == 0 and "sources: 0 ok, 2 unchanged" in ran.stdout, ran.stdout
    assert note.exists()


def test_a_changed_source_whose_previous_file_is_damaged_is_landed_again(layout, project):
    """Its old rows are read to carry the sessions the store no longer holds: a damaged previous
    file failed the source on every run ("cannot read the lake's previous files")."""
    p = project("gamma")
    add_session(p.conn, "s1", title="t", created_at=T0, cost=1.0)
    ingest_tables(layout, p.db)  # it reads the `sessions` table only
    _flipped(next((layout.lake / "_landing").rglob("sessions.parquet")))
    add_session(p.conn, "s2", title="t", created_at=T0 + DAY, cost=2.0)
    p.close()
    summary = ingest_tables(layout, p.db)
    (result,) = summary.results
    assert result.status == "ok", result.error
    assert any(w.startswith("the lake's previous file ") and "landed again from the agent's store" in w
               for w in result.warnings), result.warnings
    with connect(layout.warehouse, ours=True) as con:
        assert con.execute("SELECT session_id FROM sessions ORDER BY 1").fetchall() == [("s1",), ("s2",)]


# --- 4: a table file lost or damaged is found, said, and built again from the landing files

def _table_file(h, table: str, project: str | None = None) -> Path:
    """One of the warehouse's files of `table` (of `project`'s partition), once the copied home's
    first merge has recorded where its files are now."""
    assert run_cli("merge", "--home", h.home).returncode == 0
    folder = h.home / "lake" / "main" / table
    files = sorted(folder.rglob(f"project={project}/*.parquet" if project else "*.parquet"))
    assert files, folder
    return files[0]


def _read_all(h, table: str):
    return run_cli("sql", "--home", h.home, "--format", "csv", f"SELECT * FROM {table}")


def test_a_lost_table_file_is_found_by_the_next_ingest_and_built_again(home):
    """Deleting one Parquet file of `sessions` made every reader's query fail with `IO Error:
    Cannot open file ...`, and the next ingest did not notice."""
    lost = _table_file(home, "sessions", "alpha")
    lost.unlink()
    read = _read_all(home, "sessions")
    assert read.returncode == 1
    assert f'Cannot open file "{lost}"' in read.stderr and "`agentlake merge --full` builds the tables" in read.stderr
    ran = run_cli(*_ingest_args(home))
    _no_traceback(ran)
    assert ran.returncode == 0, ran.stdout + ran.stderr[-2000:]
    assert (f"warning: the warehouse's `sessions` table file {lost} is missing: the tables are built again from "
            "the landing files") in ran.stderr
    assert _read_all(home, "sessions").returncode == 0
    assert _counts(home.layout) == {"alpha": 3, "beta": 3} and _parts(home.layout) == {"alpha": 3, "beta": 3}
    again = run_cli("merge", "--home", home.home)  # repaired: nothing more to say
    assert again.returncode == 0 and "table file" not in again.stderr, again.stderr


def test_a_table_file_cut_short_stops_compaction_with_what_to_run(home):
    cut = _table_file(home, "messages")
    cut.write_bytes(cut.read_bytes()[:100])
    ran = run_cli("compact", "--home", home.home)
    _no_traceback(ran)
    assert ran.returncode == 1
    assert (f"problem: could not compact the warehouse at {home.layout.warehouse}: DamagedTables: the warehouse's "
            f"`messages` table file {cut} has 100 bytes, not the") in ran.stderr
    assert "`agentlake merge` builds the tables again from the landing files" in ran.stderr
    merged = run_cli("merge", "--home", home.home)
    assert merged.returncode == 0 and f"`messages` table file {cut} has 100 bytes" in merged.stderr
    assert run_cli("compact", "--home", home.home).returncode == 0
    assert _read_all(home, "messages").returncode == 0


def test_bytes_flipped_in_a_table_file_name_the_repair_and_a_full_merge_says_what_it_repaired(home):
    """A file damaged in place (`ZSTD Decompression failure`, or its footer) keeps its size:
    a reader's error names the command that repairs it, and `merge --full` says what it found."""
    flipped = _table_file(home, "sessions", "beta")
    whole = flipped.read_bytes()
    footer = int.from_bytes(whole[-8:-4], "little")
    # the footer's first bytes, its first fields' headers: the same size and the same last bytes.
    # (Its middle holds the columns' min and max values: bytes flipped inside a path there were read.)
    at = len(whole) - 8 - footer
    flipped.write_bytes(whole[:at] + bytes(b ^ 0xFF for b in whole[at:at + 16]) + whole[at + 16:])
    read = _read_all(home, "sessions")
    assert read.returncode == 1 and "`agentlake merge --full` builds the tables" in read.stderr, read.stderr
    ran = run_cli("merge", "--full", "--home", home.home)
    _no_traceback(ran)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert f"warning: the warehouse's `sessions` table file {flipped} has a footer that cannot be read" in ran.stderr
    assert _read_all(home, "sessions").returncode == 0 and _counts(home.layout) == {"alpha": 3, "beta": 3}


def test_a_lost_mart_file_builds_the_marts_again_and_leaves_the_tables(home):
    lost = _table_file(home, "daily_costs")
    lost.unlink()

    def files_of_sessions():
        with connect(home.layout.warehouse, ours=True) as con:
            return con.execute("SELECT data_file FROM ducklake_list_files('lake', 'sessions') ORDER BY 1").fetchall()

    before = files_of_sessions()
    ran = run_cli("merge", "--home", home.home)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert f"the warehouse's `daily_costs` table file {lost} is missing: the marts are built again" in ran.stderr
    with connect(home.layout.warehouse, ours=True) as con:
        assert con.execute("SELECT project, SUM(cost_usd)::DOUBLE FROM daily_costs "
                           "GROUP BY 1 ORDER BY 1").fetchall() == [
            ("alpha", 3.0), ("beta", 3.0)]
    assert files_of_sessions() == before  # the tables were not built again
    assert _read_all(home, "sessions").returncode == 0


@pytest.mark.parametrize("large", [True, False], ids=["large merge", "small merge"])
def test_a_lost_model_names_file_is_made_again_when_the_next_merge_changes_a_source(layout, project, monkeypatch,
                                                                                    large):
    """A damaged table the marts keep (`model_names`) is dropped in the tables' transaction and made
    again by the marts: those of a small merge, in that transaction (where the committed catalog
    still lists the dropped table), and those of a large one, in their own."""
    import sqlite3

    from tests.conftest import assistant, scalar
    from warehouse.catalog import merge as merging

    if large:
        monkeypatch.setattr(merging, "MARTS_WITH_TABLES_ROWS", -1)  # as past it
    p = project("gamma")
    add_session(p.conn, "g0", title="t", created_at=T0, cost=1.0)
    assistant(p.conn, "g0-a", "g0", T0 + 10)
    p.close()
    ingest(layout, p.db)
    compact(layout.warehouse)  # the names kept in the catalog, written out to the table's file
    lost = sorted((layout.lake / "main" / "model_names").rglob("*.parquet"))
    assert len(lost) == 1
    lost[0].unlink()
    conn = sqlite3.connect(p.db)
    add_session(conn, "g1", title="t", created_at=T0 + DAY, cost=0.5)
    assistant(conn, "g1-a", "g1", T0 + DAY + 10, model="gpt-5.1", provider="openai")
    conn.commit()
    conn.close()
    ingest(layout, p.db)
    assert scalar(layout, "SELECT list(model ORDER BY model) FROM model_names") == ["claude-sonnet-4-5", "gpt-5.1"]
    assert scalar(layout, "SELECT SUM(cost_usd)::DOUBLE FROM daily_costs") == 1.5
