"""The agentlake command, run in-process as a user would, on real stores."""

import contextlib
import io
import json
import os
import shutil

import pytest

from pipelines.cli import main
from tests.conftest import T0, copy_home, run_cli
from tests.support_homes import ONE_SESSION_COST, one_session_home
from transforms.synth.crush import add_message, add_session, write_registry
from transforms.synth.crush_parts import text_part


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTLAKE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own instance, as a user's ingest has
    monkeypatch.setenv("CRUSH_GLOBAL_DATA", str(tmp_path / "crush-global"))  # never the real ones
    monkeypatch.setenv("CODEWHALE_HOME", str(tmp_path / "codewhale"))
    return tmp_path / "home"


def _store(project, name="cli-proj", cost=0.125):
    p = project(name)
    add_session(p.conn, "s", title="t", created_at=T0, cost=cost)
    add_message(p.conn, "m", "s", "user", [text_part("hi")], created_at=T0)
    p.close()
    return p


@pytest.fixture
def ingested(home, built_once):
    """The home after `agentlake ingest` of `_store`'s one session (cli-proj, 0.125), for the
    tests that read it: built once, each test has a copy."""
    built = one_session_home(built_once)
    assert built.code == 0 and ONE_SESSION_COST == 0.125
    return copy_home(built.home, home)


def test_ingest_reads_the_registry_then_sql_answers(home, project, tmp_path, capsys):
    p = _store(project)
    write_registry(tmp_path / "crush-global", [{"path": str(p.path), "data_dir": ".crush",
                                                "last_accessed": "2026-01-01T00:00:00Z"}])
    assert main(["ingest"]) == 0
    out, err = capsys.readouterr()
    assert "[1/1] ok" in err and "sources: 1 ok, 0 unchanged, 0 skipped, 0 failed" in out
    # the merge is said before it starts: its seconds were silent after the last source's line (a trial)
    assert err.splitlines()[-1] == f"merging into {home / 'warehouse.ducklake'} (tables, marts, search index) ..."
    assert main(["sql", "SELECT project, cost_usd FROM sessions", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"project": "cli-proj", "cost_usd": 0.125}]
    assert main(["ingest"]) == 0
    out, err = capsys.readouterr()
    assert "0 ok, 1 unchanged" in out and "merging" not in err  # nothing new landed: a quick merge, not said


def test_sql_formats(ingested, capsys):
    main(["sql", "SELECT 'a,b' AS x, 1.5 AS y", "--format", "csv"])
    assert capsys.readouterr().out.splitlines() == ["x,y", '"a,b",1.5']
    main(["sql", "SELECT 'a' AS x, 1.5 AS y"])
    assert capsys.readouterr().out.splitlines() == ["x    y", "-  ---", "a  1.5", "(1 row)"]


def test_a_reader_given_another_lake_says_it_reads_the_warehouse_as_it_is(ingested, tmp_path, capsys):
    """`sql --lake OTHER` printed the home's rows without a word (a new user's trial)."""
    other = tmp_path / "other-lake"
    assert main(["sql", "SELECT SUM(cost_usd) AS c FROM sessions", "--lake", str(other), "--format", "csv"]) == 0
    said = capsys.readouterr()
    assert said.out.split() == ["c", str(ONE_SESSION_COST)]
    assert said.err.startswith(f"note: --lake {other} is not the lake the warehouse {ingested / 'warehouse.ducklake'} "
                               "merges ("), said.err
    assert "): a reader reads that warehouse as it is." in said.err
    # its own lake (this home is a copy: its catalog names the lake of the home it was copied from)
    assert main(["report", "--lake", str(ingested / "lake")]) == 0
    assert "--lake" not in capsys.readouterr().err


def test_a_table_the_warehouse_does_not_hold_says_where_its_tables_are_listed(ingested, capsys):
    """DuckDB's suggestion for an unknown table is the closest name of any catalog's: for
    `nosuchtable`, a system view (a new user's trial). The tables' list is named after it."""
    assert main(["sql", "SELECT * FROM nosuchtable"]) == 2
    said = capsys.readouterr().err
    assert said.startswith("error: Catalog Error: Table with name nosuchtable does not exist!")
    assert said.endswith('\nthe tables and marts: agentlake sql "SHOW TABLES" lists them; docs/TABLES.md and '
                         "docs/MARTS.md say what each holds\n")
    assert "reading a file" not in said
    # a file named as a table: DuckDB says no such table ("Did you mean daily_costs?"), as file access
    # is off: that is not said, the refusal is (a trial)
    assert main(["sql", "SELECT * FROM '/etc/passwd'"]) == 2
    said = capsys.readouterr().err
    assert said.startswith("error: reading a file is refused ('/etc/passwd'): `agentlake sql` reads the "
                           "warehouse's tables only\nthe tables and marts:"), said
    assert "Did you mean" not in said and "Catalog Error" not in said
    assert main(["sql", "SHOW TABLES", "--format", "csv"]) == 0
    assert {"sessions", "daily_costs"} <= set(capsys.readouterr().out.split())
    assert main(["sql", "SELECT nosuchcolumn FROM sessions"]) == 2  # another error: no such line
    assert "SHOW TABLES" not in capsys.readouterr().err


def test_bad_query_and_missing_warehouse_exit_2(home, capsys):
    assert main(["sql", "SELECT 1"]) == 2
    assert "run `agentlake ingest`" in capsys.readouterr().err


def test_failed_source_exits_1_and_names_it(home, project, tmp_path, capsys):
    good = _store(project)
    bad = tmp_path / "bad" / ".crush"
    bad.mkdir(parents=True)
    (bad / "crush.db").write_bytes(b"")
    assert main(["ingest", "--db", str(good.db), "--db", str(bad / "crush.db")]) == 1
    out = capsys.readouterr().out
    assert "1 ok, 0 unchanged, 0 skipped, 1 failed" in out
    assert f"FAILED  {bad / 'crush.db'}: not a Crush database" in out
    assert main(["sql", "SELECT COUNT(*) AS n FROM sessions", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["n", "1"]


def test_unreadable_registry_is_reported_and_exit_1(home, tmp_path, capsys):
    (tmp_path / "crush-global").mkdir()
    (tmp_path / "crush-global" / "projects.json").write_text("{not json")
    assert main(["ingest"]) == 1
    captured = capsys.readouterr()
    assert "projects.json is not valid JSON" in captured.err + captured.out


def test_help_lists_subcommands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in ("quickstart", "ingest", "demo", "sql", "sources", "dev"):
        assert name in out


def test_config_names_projects_and_a_bad_config_is_reported(home, project, capsys):
    p = _store(project, "scratch-dir")
    home.mkdir(parents=True)
    (home / "config.toml").write_text(f'[projects]\n"{p.path}" = "Billing API"\n')
    assert main(["ingest", "--db", str(p.db)]) == 0
    capsys.readouterr()
    main(["sql", "SELECT DISTINCT project FROM sessions", "--format", "csv"])
    assert capsys.readouterr().out.splitlines() == ["project", "billing-api"]
    (home / "config.toml").write_text("[projects]\nname = 3\n")
    assert main(["ingest", "--db", str(p.db)]) == 1
    assert "[projects] maps a path" in capsys.readouterr().err


def test_agent_home_names_any_agents_store(home, tmp_path, capsys, monkeypatch):
    from transforms.codex.provider import CodexProvider
    from transforms.synth.codex import generate_home

    walks = []
    discover = CodexProvider.discover
    monkeypatch.setattr(CodexProvider, "discover", lambda self, options: walks.append(1) or discover(self, options))
    truth = generate_home(tmp_path / "codex-home", sessions=3, seed=4)
    assert main(["ingest", "--no-default", "--agent-home", f"codex={tmp_path / 'codex-home'}",
                 "--machine", "ci-box", "--user", "ana"]) == 0
    assert walks == [1]  # the CLI's discovery is the one its Dagster run lands, not walked again
    capsys.readouterr()
    assert main(["sql", "SELECT provider, machine, \"user\", COUNT(*) AS n FROM sessions GROUP BY ALL",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"provider": "codex", "machine": "ci-box", "user": "ana",
                                                    "n": truth.sessions}]


def test_a_bad_agent_home_is_a_clear_error(home, capsys):
    assert main(["ingest", "--agent-home", "notanagent=/tmp/x"]) == 2
    said = capsys.readouterr().err
    assert "--agent-home wants AGENT=DIR" in said and "did you mean" not in said
    assert main(["ingest", "--agent-home", "claud=/tmp/x"]) == 2  # a typo: the agent it is close to
    assert capsys.readouterr().err.rstrip().endswith("got 'claud=/tmp/x' (did you mean claude?)")
    # `ingest --agent codex`, as report takes it: argparse reads it as --agent-home, which says what to do
    assert main(["ingest", "--agent", "Codex"]) == 2
    assert capsys.readouterr().err.rstrip().endswith(
        "got 'Codex' (an agent alone names no home: every agent found is read; only codex's: --no-default "
        "--agent-home codex=DIR)")


def test_an_ingest_in_process_leaves_dagster_alone(project, tmp_path, monkeypatch, capsys):
    """Called twice in one process (a notebook, a script): an ingest neither runs Dagster nor
    writes its storage (its start and run were most of a small ingest's time), nor sets
    DAGSTER_HOME; each leaves its run in its own home for `agentlake dev`'s sensor."""
    import os

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    p = _store(project)
    for name in ("first", "second"):
        assert main(["ingest", "--home", str(tmp_path / name), "--no-default", "--db", str(p.db)]) == 0
        assert "DAGSTER_HOME" not in os.environ
        assert not (tmp_path / name / "dagster").exists()
        assert len(list((tmp_path / name).rglob("cli-runs/*.json"))) == 1
    capsys.readouterr()


def test_dagster_shows_an_ingest_as_the_materializations_of_what_it_wrote(built_once, tmp_path):
    """`agentlake dev`'s sensor reports the run the CLI left: the partition it read, the tables,
    the marts and the search index, tagged with the run's id, their checks evaluated; the next
    tick has nothing to report and the record is gone."""
    import dagster as dg

    from pipelines.defs.cli_runs_sensor import TAG, cli_runs_reported
    from pipelines.defs.resources import AgentlakeResource

    built = one_session_home(built_once)
    assert built.code == 0 and "[1/1] ok" in built.err
    home = tmp_path / "home"
    shutil.copytree(built.home, home)  # the tick removes what it reported: a copy of its own
    [kept] = home.rglob("cli-runs/*.json")
    resource = AgentlakeResource(home=str(home))
    with dg.instance_for_test() as instance:
        with dg.build_sensor_context(instance=instance, resources={"agentlake": resource}) as context:
            tick = cli_runs_reported(context)
        assert json.loads(tick.cursor) == [kept.name]
        run_id = json.loads(kept.read_text())["run_id"]  # the tick's reason says what it reported (a new user's trial)
        assert tick.skip_reason.skip_message == (f"reported 1 `agentlake ingest` run(s) as {len(tick.asset_events)} "
                                                 f"events, no run to launch: {run_id}")
        [add] = tick.dynamic_partitions_requests
        assert list(add.partition_keys) == ["crush-cli-proj"]
        instance.add_dynamic_partitions("sources", list(add.partition_keys))
        for event in tick.asset_events:  # as Dagster's daemon records a sensor's events
            instance.report_runless_asset_event(event)
        landing = instance.get_latest_materialization_event(dg.AssetKey("landing")).asset_materialization
        run_id = json.loads(kept.read_text())["run_id"]
        assert landing.partition == "crush-cli-proj" and landing.tags[TAG] == run_id
        assert landing.metadata["rows_sessions"].value == 1
        for key in ("sessions", "daily_costs", "model_names", "search_index"):
            assert instance.get_latest_materialization_event(dg.AssetKey(key)).asset_materialization.tags[TAG] == run_id
        sessions = instance.get_latest_materialization_event(dg.AssetKey("sessions")).asset_materialization
        assert sessions.metadata["rows"].value == 1 and sessions.metadata["rows_inserted"].value == 1
        checks = {(e.asset_key.to_user_string(), e.check_name): e.passed for e in tick.asset_events
                  if isinstance(e, dg.AssetCheckEvaluation)}
        assert checks[("landing", "rows_reconcile")] and checks[("sessions", "keys_unique")]
        assert checks[("messages", "no_orphans")] and checks[("daily_costs", "within_budgets")]  # no budget set
        with dg.build_sensor_context(instance=instance, cursor=tick.cursor, resources={"agentlake": resource}) as context:
            again = cli_runs_reported(context)
        assert again.skip_reason and not again.asset_events
    assert not kept.exists()


def test_a_failed_merge_says_why_not_only_that_a_dagster_step_failed(home, project, tmp_path, capsys):
    p = _store(project)
    lake = tmp_path / "lake"
    lake.mkdir()
    home.mkdir(exist_ok=True)
    (home / "warehouse-tables").write_text("")  # a file where the tables' folder must go: the merge cannot write
    assert main(["ingest", "--db", str(p.db), "--lake", str(lake)]) == 1
    out = capsys.readouterr().out
    problem = next(line for line in out.splitlines() if "could not merge" in line)
    assert "Failed to create directory" in problem and "Not a directory" in problem
    assert "DagsterExecutionStepExecutionError" not in problem


def _data_path(warehouse) -> str:
    import duckdb

    with duckdb.connect() as con:
        con.execute(f"ATTACH '{warehouse}' AS m (READ_ONLY)")  # the catalog as the plain database it is
        return con.execute("SELECT value FROM m.ducklake_metadata WHERE key = 'data_path'").fetchone()[0]


def test_a_home_moved_or_copied_keeps_working_and_another_lake_rebuilds_it(home, tmp_path, monkeypatch, capsys):
    import shutil

    from transforms.synth.crush import generate_store

    # one project: one source, landed in this process (enough rows that the tables are Parquet files)
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=12, seed=3)
    ingest = ["ingest", "--no-default", "--crush-root", str(store.global_dir)]
    count = ["sql", "SELECT COUNT(*) AS n, ROUND(SUM(cost_usd), 9) AS usd FROM sessions", "--format", "csv"]
    assert main(ingest) == 0
    assert main(count) == 0
    capsys.readouterr()
    assert main(count) == 0
    expected = capsys.readouterr().out
    assert list((home / "lake" / "main").rglob("*.parquet"))  # the tables' own files, not rows inlined

    moved = tmp_path / "moved"
    shutil.move(home, moved)
    monkeypatch.setenv("AGENTLAKE_HOME", str(moved))
    assert main(count) == 0 and capsys.readouterr().out == expected  # read before any write
    assert main(["serving", str(tmp_path / "serving.duckdb")]) == 0  # a reader of every mart, before any write
    assert main(["compact"]) == 0  # a writer that builds nothing: it finds the files moved too
    assert _data_path(moved / "warehouse.ducklake") == f"{moved / 'lake'}/"
    assert main(["merge"]) == 0

    copy = tmp_path / "copy"
    shutil.copytree(moved, copy)
    monkeypatch.setenv("AGENTLAKE_HOME", str(copy))
    assert main(["merge"]) == 0
    shutil.rmtree(moved)  # the copy reads its own files, never the original's
    capsys.readouterr()
    assert main(count) == 0 and capsys.readouterr().out == expected

    other = tmp_path / "other-lake"  # the same home given another lake: built again from that one
    capsys.readouterr()
    assert main(["compact", "--lake", str(other)]) == 0  # it builds nothing: it compacts the tables where they are
    assert main([*ingest, "--lake", str(other)]) == 0
    capsys.readouterr()
    assert main([*count, "--lake", str(other)]) == 0 and capsys.readouterr().out == expected
    # a lake that is not the home's own may be other machines' too: the tables go beside the catalog
    assert _data_path(copy / "warehouse.ducklake") == f"{copy / 'warehouse-tables'}/"
    assert list((copy / "warehouse-tables" / "main").rglob("*.parquet")) and not (other / "main").exists()
    assert main(count) == 0 and capsys.readouterr().out == expected  # the lake named once, not since


def test_a_warehouse_that_is_not_a_catalog_is_a_usage_error_and_stays_untouched(ingested, tmp_path, capsys):
    import duckdb

    assert (ingested / "lake").is_dir()  # a lake to merge from
    folder = tmp_path / "a-folder"
    folder.mkdir()
    junk = tmp_path / "notes.db"
    junk.write_text("not a database at all\n")
    empty = tmp_path / "empty.ducklake"  # `touch`ed (a trial): DuckDB's own error, unexplained
    empty.touch()
    other = tmp_path / "serving.duckdb"  # a DuckDB database, not a DuckLake catalog
    with duckdb.connect(str(other)) as con:
        con.execute("CREATE TABLE t AS SELECT 1 AS x")
    before = other.read_bytes()
    for path, says in ((folder, "is a folder"), (junk, "not a DuckDB database"), (empty, "is an empty file, not a"),
                       (other, "not a DuckLake catalog")):
        commands = [["sql", "SELECT 1"], ["report"], ["merge"], ["compact"], ["serving", str(tmp_path / "out.duckdb")],
                    ["dashboard", "--port", "0"]]
        if path != other:  # a DuckDB file is told apart only by opening it: ingest says so at its merge
            commands.append(["ingest", "--no-default"])
        for command in commands:
            assert main([*command, "--warehouse", str(path)]) == 2, (command, path)
            err = capsys.readouterr().err
            assert says in err and "Traceback" not in err, (command, err)
    assert other.read_bytes() == before
    assert not list(tmp_path.glob("*writer*")) and not (tmp_path / "out.duckdb").exists()


def test_sql_runs_one_statement_and_says_so_when_given_more(ingested, capsys):
    assert main(["sql", "SELECT 1 AS a; SELECT 2 AS b"]) == 2  # not the last one's rows alone
    assert "the query holds 2 statements: give one at a time" in capsys.readouterr().err
    assert main(["sql", "SELECT 1 AS a;", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["a", "1"]


def test_sql_refuses_statements_that_write_files_and_the_catalog_stays_a_catalog(ingested, tmp_path, capsys):
    """A trial's `COPY (SELECT 1) TO '<home>/warehouse.ducklake'` exited 0 and left the catalog a
    4-byte CSV: the lake is attached read-only, but COPY, EXPORT and ATTACH reach other files."""
    from warehouse.lake.layout import Layout

    catalog = Layout.resolve(home=ingested).warehouse
    before = catalog.read_bytes()
    for kind, query in [("COPY", f"COPY (SELECT 1 AS a) TO '{catalog}' (FORMAT csv)"),
                        ("COPY", f"COPY sessions TO '{tmp_path / 'out.parquet'}'"),
                        ("EXPORT", f"EXPORT DATABASE '{tmp_path / 'export'}'"),
                        ("ATTACH", f"ATTACH '{tmp_path / 'new.duckdb'}' AS other"),
                        ("INSTALL and LOAD", "INSTALL httpfs")]:
        assert main(["sql", query]) == 2
        assert capsys.readouterr().err.startswith(f"error: {kind} statements are refused: `agentlake sql` only reads")
    assert catalog.read_bytes() == before
    assert not any((tmp_path / name).exists() for name in ("out.parquet", "export", "new.duckdb"))
    assert main(["sql", "SELECT COUNT(*) AS n FROM sessions", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["n", "1"]


def test_a_readers_home_reads_what_its_merge_read_without_naming_the_lake_again(home, built_once, tmp_path, capsys):
    """README, Team setup: a reader runs `merge --lake ...` once; `sql`, `report` and `serving`
    then read that warehouse with no --lake, and a second `merge` says which lake to name."""
    # machine A's home after its `agentlake ingest` of `_store`'s session
    built = one_session_home(built_once)
    assert built.code == 0
    lake = copy_home(built.home, tmp_path / "machine-a") / "lake"
    assert list(lake.rglob("*.parquet"))  # what its ingest landed, to merge
    reader = ["--home", str(tmp_path / "reader")]
    assert main(["merge", "--lake", str(lake), *reader]) == 0
    capsys.readouterr()
    assert main(["sql", "SELECT project, cost_usd FROM sessions", "--format", "json", *reader]) == 0
    assert json.loads(capsys.readouterr().out) == [{"project": "cli-proj", "cost_usd": 0.125}]
    assert main(["report", "--format", "json", *reader]) == 0
    assert json.loads(capsys.readouterr().out)["totals"][0]["cost_usd"] == 0.125
    assert main(["serving", str(tmp_path / "serving.duckdb"), *reader]) == 0
    assert main(["merge", *reader]) == 1
    assert f"this warehouse merges {lake}; name it with --lake" in capsys.readouterr().err


def test_a_reader_before_the_first_merge_is_told_an_ingest_has_landed_data(home, project, capsys):
    """A home's first ingest publishes its warehouse when its merge ends: a reader meanwhile was
    told to run `agentlake ingest`, while one was running."""
    from tests.conftest import discover_only
    from warehouse.land.ingest import ingest_all
    from warehouse.lake.layout import Layout

    p = _store(project)
    layout = Layout.resolve(home=home)
    assert main(["sql", "SELECT 1"]) == 2
    # a reader of a team's lake is told its own first step too (it was only told to ingest)
    assert ("run `agentlake ingest` (or `agentlake demo`) first, or `agentlake merge --lake LAKE` to read "
            "a team's lake") in capsys.readouterr().err
    sources, _ = discover_only(p.db)
    ingest_all(sources, layout, workers=1)  # landed, not merged: as mid-run, or killed before the merge
    for argv in (["sql", "SELECT 1"], ["report"], ["dashboard", "--port", "0"]):
        assert main(argv) == 2
        assert capsys.readouterr().err.strip() == (
            f"error: no warehouse at {layout.warehouse} yet: an ingest has landed data it has not merged (it is "
            "running now, or it stopped before its merge, and the next `agentlake ingest` merges it)")


def test_sources_keeps_one_line_per_source_whatever_the_path(home, project, capsys):
    """A path with a newline split its tab-separated line in two."""
    store = _store(project, "two\nlines\tand tab")
    assert main(["sources", "--no-default", "--db", str(store.db)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    key, path, state = line.split("\t")
    assert path == str(store.db).replace("\t", "\\t").replace("\n", "\\n") and state == "ok"


def test_agentlake_threads_caps_duckdbs_threads_and_a_bad_value_is_said(lake, monkeypatch):
    """$AGENTLAKE_THREADS caps every connection's threads (a cron job beside a person's work);
    unset, DuckDB takes one per core; a value that is not a count is one clear error."""
    def threads(value):
        ran = run_cli("sql", "--home", lake.home, "--format", "csv", "SELECT current_setting('threads')",
                      env={"AGENTLAKE_THREADS": value})
        return ran.returncode, ran.stdout.split(), ran.stderr

    assert threads("3")[:2] == (0, ["current_setting('threads')", "3"])
    monkeypatch.delenv("AGENTLAKE_THREADS")
    assert threads("")[1][-1] == str(os.cpu_count())
    code, out, err = threads("two")
    assert (code, out) == (1, [])
    assert "error: AGENTLAKE_THREADS='two': give a whole number of threads, at least 1" in err
    assert "Traceback" not in err


def test_agentlake_warehouse_is_not_read_with_home_and_a_note_says_so(built_once, tmp_path):
    """With --home, $AGENTLAKE_WAREHOUSE (the warehouse of $AGENTLAKE_HOME's home) is not read:
    a center that gave both merged into a file of its own without a word (a new user's trial).
    The note names what is read instead; without the variable, nothing is said."""
    built = one_session_home(built_once)
    home = tmp_path / "home"
    shutil.copytree(built.home, home)
    other = tmp_path / "elsewhere" / "warehouse.ducklake"
    ran = run_cli("sql", "--home", str(home), "SELECT COUNT(*) AS n FROM sessions", "--format", "json",
                  env={"AGENTLAKE_WAREHOUSE": str(other)})
    assert ran.returncode == 0 and json.loads(ran.stdout) == [{"n": 1}], ran.stderr
    assert ran.stderr == (f"note: $AGENTLAKE_WAREHOUSE ({other}) is not read with --home: this command reads "
                          f"{home / 'warehouse.ducklake'}; give --warehouse to read another\n")
    plain = run_cli("sql", "--home", str(home), "SELECT 1")
    assert plain.returncode == 0 and "AGENTLAKE_WAREHOUSE" not in plain.stderr
    # the same file, spelt another way: nothing to say (found reviewing this stop's change)
    same = run_cli("sql", "--home", str(home), "SELECT 1", env={"AGENTLAKE_WAREHOUSE": f"{home}/./warehouse.ducklake"})
    assert same.returncode == 0 and "AGENTLAKE_WAREHOUSE" not in same.stderr, same.stderr
    # `dev` takes --home only: the note does not send it to a flag it refuses (a trial)
    import argparse

    from pipelines.command_args import layout_of

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENTLAKE_WAREHOUSE", str(other))
        for command, tail in (("dev", "\n"), ("report", "; give --warehouse to read another\n")):
            said = io.StringIO()
            with contextlib.redirect_stderr(said):
                layout_of(argparse.Namespace(command=command, home=str(home), lake=None, warehouse=None))
            assert said.getvalue() == (f"note: $AGENTLAKE_WAREHOUSE ({other}) is not read with --home: this command "
                                       f"reads {home / 'warehouse.ducklake'}{tail}")


def test_sources_landed_before_and_not_found_are_said_once_and_keep_their_rows(tmp_path):
    """An agent's home deleted, moved or set elsewhere: the next runs found nothing of it and said
    nothing. The run that first misses a source says so (the lake keeps its rows), later runs do
    not, --verbose names them every run; a run told where to look (--crush-root, --no-default) says
    nothing."""
    from transforms.synth.crush import generate_store

    store = generate_store(tmp_path / "crush", projects=2, sessions_per_project=2, seed=3)
    home = tmp_path / "home"
    env = {"CRUSH_GLOBAL_DATA": str(store.global_dir)}
    assert run_cli("ingest", "--home", home, env=env).returncode == 0
    moved = tmp_path / "moved"
    shutil.move(store.global_dir, moved)  # the env variable now names nothing
    first = run_cli("ingest", "--home", home, env=env)
    assert first.returncode == 0 and ("note: 2 sources landed before were not found this run (crush 2): the lake "
                                      "keeps their rows") in first.stderr, first.stderr
    assert "not found: crush" not in first.stderr and "try `agentlake demo`" not in first.stderr
    again = run_cli("ingest", "--home", home, env=env)
    assert again.returncode == 0 and "not found this run" not in again.stderr, again.stderr
    listed = run_cli("ingest", "--home", home, "--verbose", env=env)
    named = sorted(line.removeprefix("  not found: crush ") for line in listed.stderr.splitlines()
                   if line.startswith("  not found: "))
    assert named == sorted(str(db.path) for db in store.dbs), listed.stderr
    elsewhere = run_cli("ingest", "--home", home, "--crush-root", moved, env=env)
    assert "not found this run" not in elsewhere.stderr and "0 failed" in elsewhere.stdout, elsewhere.stderr
    nowhere = run_cli("ingest", "--home", home, "--no-default", env=env)  # told not to look: nothing said
    assert "not found this run" not in nowhere.stderr, nowhere.stderr
    sessions = run_cli("sql", "--home", home, "--format", "csv", "SELECT COUNT(*) AS n FROM sessions")
    assert sessions.stdout.split() == ["n", str(store.sessions)], sessions.stdout
