"""A value an option cannot have is a usage error: exit 2 and one line naming it, never a Python
traceback (a new user's report: `serving` into a folder or a place it cannot write, an unknown
`--storage-version`, `compact --keep-seconds -5`, `dashboard --port 99999`); and `agentlake dev
--help` offers only what `dev` takes."""

import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from pipelines.cli import main
from tests.conftest import copy_home, run_cli
from tests.support_homes import ONE_SESSION_COST, one_session_home


@pytest.fixture
def home(built_once, tmp_path, monkeypatch):
    """A home with something ingested (one Crush session, built once, each test has a copy): the
    checks below are the ones a real warehouse meets, not the "nothing ingested yet" that comes
    first in an empty home."""
    for var in ("AGENTLAKE_HOME", "AGENTLAKE_LAKE", "AGENTLAKE_WAREHOUSE", "DAGSTER_HOME"):
        monkeypatch.delenv(var, raising=False)
    built = one_session_home(built_once)
    assert built.code == 0
    return copy_home(built.home, tmp_path / "home")


def usage_error(capsys, *argv) -> str:
    """The error line of a command that must exit 2 without a traceback."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's own errors: the usage, then the error line
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and err.endswith(lines[0] + "\n"), err
    return lines[0]


def test_serving_into_a_folder_names_a_file_to_give(home, tmp_path, capsys):
    folder = tmp_path / "bi"
    folder.mkdir()
    line = usage_error(capsys, "serving", "--home", home, folder)
    assert line == f"error: {folder} is a folder: give the serving database's file, e.g. {folder / 'serving.duckdb'}"
    assert list(folder.iterdir()) == []
    # a folder not there yet, named as one (its slash): no file of its name is written
    meant = tmp_path / "new-bi"
    line = usage_error(capsys, "serving", "--home", home, f"{meant}/")
    assert line == f"error: {meant}/ names a folder: give the serving database's file, e.g. {meant / 'serving.duckdb'}"
    assert not meant.exists()
    # the file it names is written
    assert main(["serving", "--home", str(home), str(folder / "serving.duckdb")]) == 0
    assert f"{folder / 'serving.duckdb'}: daily_costs " in capsys.readouterr().out


def test_serving_replaces_only_a_serving_database(home, tmp_path, capsys):
    """The file is replaced whole: the home's catalog given by mistake broke the home, and a text
    file became a database (a trial)."""
    import duckdb

    catalog, index = home / "warehouse.ducklake", home / "warehouse.search.duckdb"
    before = {p: p.read_bytes() for p in (catalog, index)}
    for target, what in ((catalog, "catalog"), (index, "search index")):
        line = usage_error(capsys, "serving", "--home", home, target)
        assert line == (f"error: {target} is this home's {what}, not a serving database: give another file, "
                        f"e.g. {home / 'serving.duckdb'}")
    assert {p: p.read_bytes() for p in before} == before
    text = tmp_path / "notes.md"
    text.write_text("# my notes\n")
    assert usage_error(capsys, "serving", "--home", home, text) == (
        f"error: {text} is not a serving database (not a DuckDB database): it is left as it is; give another "
        f"file, e.g. {tmp_path / 'serving.duckdb'}")
    assert text.read_text() == "# my notes\n"
    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as con:
        con.execute("CREATE TABLE orders (id INTEGER)")
    assert "(a DuckDB database with other tables: orders)" in usage_error(capsys, "serving", "--home", home, other)
    # a serving database is written again, and an empty file is written
    empty = tmp_path / "empty.duckdb"
    empty.touch()
    for target in (tmp_path / "serving.duckdb", tmp_path / "serving.duckdb", empty):
        assert main(["serving", "--home", str(home), str(target)]) == 0
        assert f"{target}: daily_costs " in capsys.readouterr().out
    assert main(["sql", "--home", str(home), "SELECT COUNT(*) AS n FROM sessions"]) == 0  # the home still reads
    # a DuckDB file another program holds open for writing cannot be looked into: replaced only
    # under the default name (a BI tool holding the serving file), else refused (a review)
    import subprocess

    held = tmp_path / "analytics.duckdb"
    code = (f"import duckdb, sys; c = duckdb.connect({str(held)!r}); c.execute('CREATE TABLE t (a INT)'); "
            "print('ready', flush=True); sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        assert "(a DuckDB database another program holds open for writing: close it, or give another file)" in \
            usage_error(capsys, "serving", "--home", home, held)
    finally:
        holder.communicate("")


def test_serving_where_nothing_can_be_written_says_where(home, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    places = [blocker / "serving.duckdb", blocker / "deeper" / "serving.duckdb"]
    if sys.platform.startswith("linux") and Path("/proc/self").is_dir():
        places.append(Path("/proc/serving.duckdb"))  # no file can be made there, even by root
    for target in places:
        line = usage_error(capsys, "serving", "--home", home, target)
        assert line.startswith(f"error: cannot write the serving database {target}: ")
    assert blocker.read_text() == "not a folder"


def test_serving_into_a_folder_that_is_not_there_makes_none(home, tmp_path, capsys):
    # a mistyped path made its folder tree (a new user's trial): refused, as sqlite3 and duckdb do
    target = tmp_path / "no-such" / "dir" / "serving.duckdb"
    line = usage_error(capsys, "serving", "--home", home, target)
    assert line == (f"error: cannot write the serving database {target}: the folder {target.parent} does not "
                    "exist (create it first)")
    assert not (tmp_path / "no-such").exists()


def test_serving_with_a_storage_version_duckdb_does_not_know(home, tmp_path, capsys):
    target = tmp_path / "serving.duckdb"
    for version in ("banana", "v0.9.0", "'; DROP TABLE x; --"):
        line = usage_error(capsys, "serving", "--home", home, target, "--storage-version", version)
        assert line.startswith(f"error: --storage-version {version!r} is not a DuckDB storage version (")
        assert "v1.0.0" in line or " to " in line
    # said before the warehouse is looked at: the same in a home with nothing ingested
    line = usage_error(capsys, "serving", "--home", tmp_path / "empty", "--storage-version", "banana")
    assert "'banana' is not a DuckDB storage version" in line
    assert not target.exists()
    assert main(["serving", "--home", str(home), str(target), "--storage-version", "latest"]) == 0
    with duckdb.connect(str(target), read_only=True) as con:
        assert con.execute("SELECT SUM(cost_usd) FROM session_summary").fetchone()[0] == ONE_SESSION_COST


def test_compact_keeps_files_for_no_negative_time(home, capsys):
    for value in ("-5", "-1", "ten"):
        line = usage_error(capsys, "compact", "--home", home, "--keep-seconds", value)
        assert line.endswith(f"argument --keep-seconds: wants 0 or a positive whole number of seconds: {value!r}")
    assert main(["compact", "--home", str(home), "--keep-seconds", "0"]) == 0
    # a home of small merges: its rows were kept in the catalog, and become files (more of them after)
    out = capsys.readouterr().out
    said = re.fullmatch(r"files read by the tables and marts: (\d+) before, (\d+) after \(and (\d+) rows small "
                        r"merges kept in the catalog written out to files\); in their folder: (\d+) before, (\d+) "
                        r"after \((\d+) deleted, (\d+) written\)\n", out)
    assert said and int(said[2]) > int(said[1]) and int(said[3]) > 0, out
    # with no grace, the folder holds what the tables and marts read, and no more; what went and came
    # are counted apart (a review: the net difference hid the files a compaction writes)
    before, after, deleted, written = (int(said[i]) for i in (4, 5, 6, 7))
    assert after <= int(said[2]) and written > 0 and after == before - deleted + written, out


@pytest.mark.parametrize("command", ["dashboard", "dev"])
def test_a_port_outside_0_to_65535_is_a_usage_error(command, capsys):
    for port in ("99999", "65536", "-1", "http"):
        line = usage_error(capsys, command, "--port", port)
        assert line.endswith(f"argument --port: wants a port from 0 (any free one) to 65535: {port!r}")


def test_a_breakdown_named_in_other_words_is_answered_with_the_reports_own(capsys):
    """A team trial typed `report --by person`: argparse's "invalid choice" alone, where a mistyped
    command gets its closest name."""
    for given, meant in (("person", "user"), ("Person", "user"), ("machines", "user"), ("provider", "agent"),
                         ("projekt", "project")):
        line = usage_error(capsys, "report", "--by", given)
        assert line.startswith("agentlake report: error: argument --by: invalid choice") and \
            line.endswith(f"(did you mean --by {meant}?)"), line
    assert "did you mean" not in usage_error(capsys, "report", "--by", "zzz")


def test_dev_offers_only_the_home(capsys):
    """`agentlake dev` honours --home only (Dagster reads that home's lake and warehouse): its
    help does not offer --lake or --warehouse, which it refuses, saying why."""
    with pytest.raises(SystemExit) as exc:
        main(["dev", "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and "--home HOME" in out
    assert "--lake" not in out and "--warehouse" not in out
    for flag in ("--lake", "--warehouse"):
        line = usage_error(capsys, "dev", flag, "/tmp/elsewhere")
        assert line.startswith("error: `agentlake dev` takes --home only")
    with pytest.raises(SystemExit):
        main(["sql", "--help"])  # the other commands still offer them
    out = capsys.readouterr().out
    assert "--lake LAKE" in out and "--warehouse WAREHOUSE" in out


def test_every_commands_help_says_what_it_does(capsys):
    """`agentlake merge --help` (and dashboard, serving, compact) began with the usage lines and
    went on to the options: each command's help now opens with a sentence saying what it does."""
    from pipelines.cli import command_parsers, parser

    commands = command_parsers(parser())
    assert {"merge", "dashboard", "serving", "compact", "ingest", "sql"} <= set(commands)
    for name in commands:
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])
        out = capsys.readouterr().out
        said = out.split("\n\n")[1]  # after the usage lines
        assert exc.value.code == 0 and said[0].isupper() and said.rstrip().endswith("."), (name, said)
        assert not said.startswith(("positional arguments", "options")), (name, out)


def test_every_commands_help_fills_its_lines(capsys, monkeypatch):
    """The descriptions and epilogs are prose filled to the terminal's width: edited text had left
    lines of a few words (`dashboard --help`'s "the page. The"). No line of a paragraph ends where
    the next one's first word would have fitted; indented lines (examples, options) are as written."""
    from pipelines.cli import command_parsers, parser

    for columns in (80, 120):
        monkeypatch.setenv("COLUMNS", str(columns))
        for name in command_parsers(parser()):
            with pytest.raises(SystemExit):
                main([name, "--help"])
            lines = capsys.readouterr().out.splitlines()
            for line, after in zip(lines, lines[1:]):
                if line and after and not line[0].isspace() and not after[0].isspace() \
                        and not line.startswith("usage:"):
                    assert len(line) + 1 + len(after.split()[0]) > columns - 2, (name, columns, line, after)


HEAVY = ("pyarrow", "duckdb", "dagster", "warehouse.land.ingest", "transforms.crush.normalise", "transforms.contract")


@pytest.mark.parametrize("args", [
    ["--help"], ["--version"], ["report", "--no-such-flag"], ["no-such-command"], ["reprot"], ["report", "--by", "person"],
    # usage errors the commands find after parsing, before they open anything
    ["report", "--last", "0d"], ["report", "--week", "--since", "2026-01-01"], ["report", "--budgets", "--by", "day"],
    ["report", "--since", "2026-02-01", "--until", "2026-01-01"], ["report", "--output", "x"],
    ["sql", "SELECT 1", "-f", "q.sql"], ["sql", "SELECT 1 \udcff"]])
def test_help_and_a_usage_error_load_no_engine_and_no_agent(args):
    """`--help` and a usage error answer at once: they load neither DuckDB, pyarrow nor Dagster,
    and none of the agents' normalisers (the times are in docs/BENCHMARKS.md)."""
    probe = ("import sys\nfrom pipelines.cli import main\n"
             f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
             f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert ran.stdout.strip().splitlines()[-1] == "[]", ran.stdout + ran.stderr


def test_a_query_in_a_home_with_a_config_loads_no_redaction_rules(lake):
    """Every home the quickstart makes has a config.toml, and reading it imported the redaction
    rules (detect-secrets, polars) to check a [privacy] table it did not have: most of a `sql`
    call's start-up. They load only for a [privacy] table now."""
    lake.config_file.write_text('machine = "laptop"\n')
    probe = ("import sys\nfrom pipelines.cli import main\n"
             f"code = main(['sql', '--home', {str(lake.home)!r}, 'SELECT COUNT(*) FROM sessions'])\n"
             "print(code, sorted(m for m in ('transforms.redact', 'detect_secrets', 'polars') if m in sys.modules))")
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert ran.stdout.strip().splitlines()[-1] == "0 []", ran.stdout + ran.stderr
    lake.config_file.write_text('[privacy]\n"parts.text" = "bogus"\n')  # a policy is still checked
    assert "unknown action 'bogus'" in run_cli("sql", "--home", lake.home, "SELECT 1").stderr


def test_dev_on_port_0_starts_dagster_on_a_free_port_and_names_it(tmp_path, monkeypatch, capsys):
    """`agentlake dev --port 0` took dagster dev's default, 3000, whatever else listened there (a new
    user's trial): 0 picks a free port, given to dagster dev and named on stderr."""
    import socket

    started = []

    def execvpe(file, argv, env):
        started.append(argv)
        raise SystemExit(0)

    monkeypatch.setattr(os, "execvpe", execvpe)
    with pytest.raises(SystemExit):
        main(["dev", "--home", str(tmp_path / "home"), "--port", "0"])
    [argv] = started
    port = int(argv[argv.index("--port") + 1])
    assert port > 0 and f"(port 0: the UI takes the free port {port})" in capsys.readouterr().err
    with socket.socket() as free:  # free a moment ago, and still
        free.bind(("127.0.0.1", port))


def test_dev_on_a_home_ingested_under_other_names_lands_as_they_did_or_refuses(tmp_path, monkeypatch, project):
    """A team trial: `agentlake dev` on a home ingested with `--machine laptop-b --user bob` landed
    every source again under the host and login names, and the report counted each session twice.
    It now refuses, naming the names to give; given them, Dagster's runs land as those."""
    from tests.conftest import T0, add_session, run_cli

    p = project("shop")
    add_session(p.conn, "s1", title="one", created_at=T0, cost=1.0)
    p.close()
    home = tmp_path / "home"
    ran = run_cli("ingest", "--home", home, "--db", p.db, "--no-default", "--quiet", "--machine", "laptop-b",
                  "--user", "bob")
    assert ran.returncode == 0, ran.stderr
    # a run under other names whose every source failed landed nothing as them (a bucket refusing
    # a new machine's folder, a trial): the home's names stay the ones that landed
    broken = tmp_path / "broken" / ".crush" / "crush.db"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a database" * 100)
    failed = run_cli("ingest", "--home", home, "--db", broken, "--no-default", "--quiet", "--machine", "laptop-c",
                     "--user", "bob")
    assert failed.returncode == 1 and "1 failed" in failed.stdout, failed.stdout + failed.stderr
    started = []

    def execvpe(file, argv, env):
        started.append(env)
        raise SystemExit(0)

    monkeypatch.setattr(os, "execvpe", execvpe)
    monkeypatch.setenv("AGENTLAKE_MACHINE", "vm")
    monkeypatch.setenv("AGENTLAKE_USER", "root")
    # the names last landed as are the home's (the sensor removes the CLI's run records once reported)
    import shutil

    reported = list(home.glob("lake/_state/*/cli-runs"))
    assert reported and (home / "landed-as.json").exists()
    for folder in reported:
        shutil.rmtree(folder)
    refused = run_cli("dev", "--home", home, "--port", "0")
    assert refused.returncode == 2 and not started
    assert refused.stderr == (
        "error: this home last landed into its lake as laptop-b/bob, and Dagster would land every source again as "
        "vm/root, counting each session twice: give `--machine laptop-b --user bob`; or, if the new names are meant "
        "(a rename, docs/TEAM.md), run `agentlake ingest` once under them first\n"), refused.stderr
    import signal

    # started as `agentlake dev &` from a script, SIGINT ignored: dagster dev's children kept that
    # through exec and outlived a SIGTERM to the group (they are stopped by SIGINT)
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(SystemExit):
            main(["dev", "--home", str(home), "--port", "0", "--machine", "laptop-b", "--user", "bob"])
        at_exec = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, before)
    [env] = started
    assert (env["AGENTLAKE_MACHINE"], env["AGENTLAKE_USER"]) == ("laptop-b", "bob")
    assert at_exec is not signal.SIG_IGN


def test_a_dagster_home_or_a_warehouse_dev_cannot_use_is_a_usage_error_naming_it(tmp_path, monkeypatch):
    """`DAGSTER_HOME=afile agentlake dev` said `problem: ... failed: FileExistsError` (exit 1),
    where `--home afile` is named as a file (exit 2). Nothing is started; nor for a warehouse
    that is no catalog."""
    afile = tmp_path / "afile"
    afile.write_text("not a database\n")
    started = []
    monkeypatch.setattr(os, "execvpe", lambda *a: started.append(a))
    ran = run_cli("dev", "--home", tmp_path / "home", "--port", "0", env={"DAGSTER_HOME": str(afile)})
    assert ran.returncode == 2 and not started
    assert ran.stderr.endswith(f"error: the Dagster home {afile} ($DAGSTER_HOME) is a file, not a folder: give a "
                               "folder (Dagster makes its files there)\n"), ran.stderr
    # $AGENTLAKE_WAREHOUSE naming no catalog started Dagster, and its first merge failed on it
    ran = run_cli("dev", "--port", "0", env={"AGENTLAKE_HOME": str(tmp_path / "home"), "AGENTLAKE_WAREHOUSE": str(afile)})
    assert ran.returncode == 2 and not started
    assert f"error: the warehouse {afile} is not a DuckLake catalog" in ran.stderr, ran.stderr
    # with --home, the home's warehouse, as the note says: Dagster is not given the variable
    monkeypatch.setattr(os, "execvpe", lambda file, argv, env: started.append(env) or (_ for _ in ()).throw(SystemExit(0)))
    run_cli("dev", "--home", tmp_path / "home", "--port", "0", env={"AGENTLAKE_WAREHOUSE": str(afile)})
    assert started and "AGENTLAKE_WAREHOUSE" not in started[0]


def test_sources_finding_nothing_names_the_page_that_says_where_it_looked(tmp_path, capsys):
    """It named a README section that had moved to docs/SOURCES.md (a trial)."""
    assert main(["sources", "--home", str(tmp_path / "home"), "--no-default"]) == 0
    err = capsys.readouterr().err
    assert "no sources found: each agent is looked for where it keeps its data (docs/SOURCES.md)" in err
    assert (Path(__file__).parent.parent / "docs" / "SOURCES.md").exists()


def test_an_ingest_finding_nothing_says_where_it_looked_or_that_it_looked_nowhere(tmp_path, capsys):
    """`--no-default` with no place named said "looked in the named places" (a new user's trial)."""
    home = str(tmp_path / "home")
    assert main(["ingest", "--home", home, "--no-default"]) == 0
    assert ("no sources found (no default homes (--no-default, or use_default = false), and no place named); "
            "name stores with") in capsys.readouterr().err
    # places named by config.toml, not by flags (a demo's home: use_default = false, extra_roots)
    (tmp_path / "home" / "config.toml").write_text(
        f'use_default = false\n[codex]\nextra_roots = ["{tmp_path / "gone"}"]\n')
    main(["ingest", "--home", home])
    assert "no sources found (looked in the named places)" in capsys.readouterr().err
    assert main(["ingest", "--home", home, "--no-default", "--agent-home", f"codex={tmp_path / 'none'}"]) == 1
    said = capsys.readouterr()
    assert "no sources found (looked in the named places); name stores with" in said.err
    assert str(tmp_path / "none") in said.out + said.err  # the named home that is not there: a problem


@pytest.mark.parametrize("command", [["ingest"], ["schedule", "--kind", "cron"]])
def test_a_team_catalog_named_to_a_command_that_lands_is_refused_not_swapped_for_a_file(tmp_path, capsys,
                                                                                        monkeypatch, command):
    """`ingest --warehouse postgres:...` merged into the home's file catalog without a word, and
    `schedule` with it made a center's timer that never merged (a team lead's trial). The flag is
    refused, naming the center's merge; the same setting from $AGENTLAKE_WAREHOUSE (a reader's,
    as config.toml's) still lets the machine land."""
    team = "postgres:dbname=agentlake host=127.0.0.1 user=center"
    home, lake = tmp_path / "center", tmp_path / "lake"
    assert main([*command, "--home", str(home), "--lake", str(lake), "--warehouse", team, "--no-default"]) == 2
    said = capsys.readouterr().err
    assert said.startswith("error: --warehouse names a team's catalog in PostgreSQL, which ") and (
        f"`agentlake merge --lake {lake} --warehouse '{team}'`" in said), said
    assert not (home / "warehouse.ducklake").exists()
    assert main([*command, "--home", str(home), "--warehouse", team, "--no-default"]) == 2  # no lake named
    assert "`agentlake merge --lake s3://TEAM-BUCKET/LAKE --warehouse" in capsys.readouterr().err  # not its own
    monkeypatch.setenv("AGENTLAKE_WAREHOUSE", team.replace("center", "reader"))
    assert main(["ingest", "--lake", str(lake), "--no-default"]) == 0
    assert "no sources found" in capsys.readouterr().err
    # a timer made with that variable set: its ingest is not given the catalog as a flag it refuses
    assert main(["schedule", "--kind", "cron", "--lake", str(lake), "--no-default"]) == 0
    timer = capsys.readouterr().out
    assert "ingest --quiet" in timer and "--warehouse" not in timer, timer  # (the variable is carried)
