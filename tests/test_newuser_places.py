"""Issue 12, item 13: a place agentlake is told (or knows) to look at and cannot read is a
reported problem naming the path, and the run exits 1, even when another place works."""

import os
from pathlib import Path

import pytest

from pipelines.cli import main
from transforms.crush.discover import discover
from transforms.synth.crush import add_message, add_session, create_crush_db, text_part, write_registry


def _crush_root(root: Path) -> Path:
    """A working Crush global data dir with one project and its crush.db."""
    project = root / "proj"
    conn = create_crush_db(project / ".crush" / "crush.db")
    add_session(conn, "s1", title="t", created_at=1_767_600_000)
    add_message(conn, "m1", "s1", "user", [text_part("hi")], created_at=1_767_600_001)
    conn.close()
    write_registry(root / "global", [{"path": str(project), "data_dir": ".crush",
                                      "last_accessed": "2026-01-01T00:00:00Z"}])
    return root / "global"


def _broken_registry(kind: str, global_dir: Path) -> Path:
    global_dir.mkdir(parents=True)
    registry = global_dir / "projects.json"
    if kind == "symlink loop":
        os.symlink(registry, registry)
    elif kind == "link to /dev/zero":  # only ever stat()ed: reading it would never end
        os.symlink("/dev/zero", registry)
    elif kind == "directory":
        registry.mkdir()
    elif kind == "fifo":
        os.mkfifo(registry)
    return registry


@pytest.mark.parametrize(("kind", "says"), [("symlink loop", "Too many levels of symbolic links"),
                                            ("link to /dev/zero", "character device"),
                                            ("directory", "is a directory"),
                                            ("fifo", "named pipe")])
def test_a_default_registry_that_cannot_be_read_is_reported_beside_a_working_one(tmp_path, monkeypatch, capsys,
                                                                                  kind, says):
    registry = _broken_registry(kind, tmp_path / "default-crush")
    monkeypatch.setenv("CRUSH_GLOBAL_DATA", str(tmp_path / "default-crush"))
    monkeypatch.setenv("AGENTLAKE_HOME", str(tmp_path / "home"))
    good = _crush_root(tmp_path / "other")
    assert main(["sources", "--crush-root", str(good)]) == 1
    captured = capsys.readouterr()
    assert "crush-proj-" in captured.out  # the working registry is still read
    problem = next(line for line in captured.err.splitlines() if str(registry) in line)
    assert problem.startswith("warning: Crush registry") and says in problem


def test_discovery_never_reads_a_registry_that_is_a_device(tmp_path):
    registry = _broken_registry("link to /dev/zero", tmp_path / "g")
    found = discover(env={"CRUSH_GLOBAL_DATA": str(tmp_path / "g")})
    assert found.sources == [] and found.problems == [
        f"Crush registry {registry} is a character device (a symlink to /dev/zero), not a regular file"]


def test_an_empty_default_place_is_no_problem(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CRUSH_GLOBAL_DATA", str(tmp_path / "no-crush-here"))
    monkeypatch.setenv("AGENTLAKE_HOME", str(tmp_path / "home"))
    assert main(["sources"]) == 0
    assert "warning" not in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "says"), [
    ("--crush-root {p}", "Crush global data dir {p} does not exist"),
    ("--codewhale-home {p}", "CodeWhale home {p} does not exist"),
    ("--agent-home codex={p}", "Codex home {p} does not exist"),
    ("--agent-home claude={p}", "Claude Code home {p} does not exist"),
    ("--agent-home opencode={p}", "OpenCode data dir {p} does not exist"),
    ("--agent-home crush={p}", "Crush global data dir {p} does not exist"),
])
def test_a_missing_place_named_on_the_command_line_is_a_problem(tmp_path, monkeypatch, capsys, flag, says):
    monkeypatch.setenv("AGENTLAKE_HOME", str(tmp_path / "home"))
    missing = tmp_path / "typo"
    assert main(["sources", *flag.format(p=missing).split()]) == 1
    assert f"warning: {says.format(p=missing)}" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "says"), [
    ("--crush-root {p}", "no Crush registry (projects.json) in {p}"),
    ("--codewhale-home {p}", "no CodeWhale sessions in {p}"),
    ("--agent-home codex={p}", "no Codex rollouts in {p}"),
    ("--agent-home claude={p}", "no Claude Code transcripts in {p}"),
    ("--agent-home opencode={p}", "no OpenCode data (opencode*.db or storage/) in {p}"),
])
def test_a_named_place_without_the_agents_data_is_a_problem(tmp_path, monkeypatch, capsys, flag, says):
    """A home named one level off (its parent, or its sessions/ folder) is not silently empty."""
    monkeypatch.setenv("AGENTLAKE_HOME", str(tmp_path / "home"))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["sources", *flag.format(p=empty).split()]) == 1
    assert f"warning: {says.format(p=empty)}" in capsys.readouterr().err


def test_an_ingest_with_an_unreadable_registry_exits_1_and_names_it(tmp_path, monkeypatch, capsys):
    registry = _broken_registry("directory", tmp_path / "default-crush")
    monkeypatch.setenv("CRUSH_GLOBAL_DATA", str(tmp_path / "default-crush"))
    monkeypatch.setenv("AGENTLAKE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own Dagster instance
    assert main(["ingest", "--crush-root", str(_crush_root(tmp_path / "other"))]) == 1
    captured = capsys.readouterr()
    assert f"Crush registry {registry} is a directory, not a regular file" in captured.err + captured.out


@pytest.mark.parametrize("command", [["ingest", "--no-default"], ["quickstart"], ["demo", "--projects", "1"],
                                     ["report"], ["sql", "SELECT 1"], ["sources"], ["merge"]])
def test_a_home_that_is_a_file_is_one_usage_error_naming_it(tmp_path, monkeypatch, capsys, command):
    """A new user's trial: `--home` naming a file failed as NotADirectoryError from the merge,
    and a reader told to `agentlake ingest` into it first."""
    home = tmp_path / "notes.txt"
    home.write_text("mine\n")
    assert main([*command, "--home", str(home)]) == 2
    said = capsys.readouterr().err
    assert said == f"error: the home {home} (--home) is a file, not a folder: give a folder (agentlake makes it " \
                   "if it is not there)\n"
    assert home.read_text() == "mine\n"
    monkeypatch.setenv("AGENTLAKE_HOME", str(home))  # the same, named by the environment
    assert main(command) == 2
    assert f"the home {home} ($AGENTLAKE_HOME) is a file" in capsys.readouterr().err
    # a folder lake that is a file: said at once, not as each source's failure and the merge's
    monkeypatch.setenv("AGENTLAKE_HOME", str(tmp_path / "home"))
    assert main([*command, "--lake", str(home)]) == 2
    assert capsys.readouterr().err == f"error: the lake {home} (--lake) is a file, not a folder: give a folder " \
                                      "(agentlake makes it if it is not there) or an s3:// lake\n"
    assert home.read_text() == "mine\n" and not (tmp_path / "home" / "warehouse.ducklake").exists()


@pytest.mark.parametrize("command", [["ingest", "--no-default"], ["quickstart"], ["demo", "--projects", "1"]])
def test_a_home_that_cannot_be_made_is_said_before_anything_is_read(tmp_path, capsys, command):
    """Below a file, a home cannot be made: said once (exit 1), not as the merge's failure after
    every source was read, nor after quickstart's demo was announced."""
    (tmp_path / "notes.txt").write_text("mine\n")
    home = tmp_path / "notes.txt" / "home"
    assert main([*command, "--home", str(home)]) == 1
    assert capsys.readouterr().err == f"error: cannot make the home folder {home}: Not a directory\n"


@pytest.fixture
def read_only_folder(tmp_path):
    """A real read-only file system (a tmpfs mounted read-only), where this machine lets the tests
    mount one; skipped elsewhere (an unprivileged user, a container without the capability)."""
    import subprocess

    folder = tmp_path / "read-only"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.parametrize("command", [["ingest", "--no-default"], ["quickstart"], ["demo", "--projects", "1"]])
def test_a_home_that_cannot_be_written_is_said_before_anything_is_read(read_only_folder, capsys, command):
    """A read-only home read every source, then failed each one, then the merge, naming an internal
    file (a new user's trial); quickstart blamed a missing warehouse. Said once, before, as a home
    that cannot be made is."""
    assert main([*command, "--home", str(read_only_folder)]) == 1
    assert capsys.readouterr().err == (
        f"error: cannot write in the home folder {read_only_folder}: its file system is read-only (a command that "
        "ingests or merges writes its lake, warehouse and cache there; name another with --home or $AGENTLAKE_HOME)\n")


def test_a_lake_that_cannot_be_written_is_said_before_anything_is_read(read_only_folder, tmp_path, capsys):
    """A team lead's trial: a shared folder lake mounted read-only failed each source on its lock,
    then the run as an OSError without its summary. Said once, before; a reader is named the way."""
    assert main(["ingest", "--no-default", "--home", str(tmp_path / "home"), "--lake", str(read_only_folder)]) == 1
    assert capsys.readouterr().err == (
        f"error: cannot write in the lake {read_only_folder}: Read-only file system (a machine lands its sources "
        f"there; a reader only reads it: `agentlake merge --lake {read_only_folder}`)\n")


def test_a_file_elsewhere_named_home_or_demo_stops_no_command_given_a_good_home(tmp_path, monkeypatch, capsys):
    """The file-home check only where the home is read: $AGENTLAKE_HOME naming a file while
    --home names a folder (the next commands the summary prints compare with the default home),
    and a file called `demo` inside a home (a script: not quickstart's demo)."""
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    monkeypatch.setenv("AGENTLAKE_HOME", str(notes))
    home = tmp_path / "home"
    store = _crush_root(tmp_path / "crush")
    assert main(["ingest", "--home", str(home), "--no-default", "--crush-root", str(store), "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "notes.txt" not in out + err and f"warehouse: {home / 'warehouse.ducklake'}" in out
    monkeypatch.delenv("AGENTLAKE_HOME")
    empty = tmp_path / "empty"
    assert main(["ingest", "--home", str(empty), "--no-default", "--quiet"]) == 0
    (empty / "demo").write_text("#!/bin/sh\n")
    capsys.readouterr()
    for command in (["report"], ["sources", "--no-default"], ["ingest", "--no-default", "--quiet"]):
        assert main([*command, "--home", str(empty)]) == 0, command
        assert "is a file" not in capsys.readouterr().err
