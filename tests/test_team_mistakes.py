"""A new user's mistakes setting up a team lake, each said in one line instead of done quietly:
a lake URI of another scheme (`S3://`, `s3:/`, `s3a://`, `gs://`) taken as a folder under the
working directory; a new reader's merge of an empty or mistyped prefix ("merged 0 sources",
exit 0); an `$AWS_ENDPOINT_URL` with a password copied into the schedule; a misspelt key in an
agent's section of config.toml ("no sources found", exit 0)."""

import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import copy_home, query, run_cli
from tests.support_s3 import BUCKET, run_cli_fresh, s3, s3_client, s3_server  # noqa: F401  (the moto fixtures)
from transforms.synth.crush import generate_store
from pipelines import schedule
from warehouse.lake.config import ConfigError, load_config, load_layout
from warehouse.lake.layout import Layout

KEY_ID = "AKIAIOSFODNN7EXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
ROOT = Path(__file__).resolve().parents[1]


def cli(*args, home, cwd, env=None):
    """The CLI, in a folder of its own (where a lake taken as a relative folder would go)."""
    cwd.mkdir(parents=True, exist_ok=True)
    return run_cli_fresh(*args, env={"AGENTLAKE_HOME": str(home), **(env or {})}, cwd=cwd)


# --- 1. a lake of another scheme ---------------------------------------------------------------

MISTYPED = [
    ("S3://team-lake/lake", "(did you mean s3://team-lake/lake?)"),
    ("s3:/team-lake/lake", "(did you mean s3://team-lake/lake?)"),
    ("s3a://team-lake/lake", "(did you mean s3://team-lake/lake?)"),
    ("gs://team-lake/lake", "(object storage is s3://bucket/prefix; an S3-compatible one also takes "
                            "?endpoint_override=host:port or $AWS_ENDPOINT_URL)"),
]


@pytest.mark.parametrize("given", ["flag", "variable", "config.toml"])
@pytest.mark.parametrize("lake, hint", MISTYPED)
def test_a_lake_of_another_scheme_is_refused_and_nothing_is_written(tmp_path, lake, hint, given):
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=1, seed=3)
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    flags, env = [], {}
    if given == "flag":
        flags = ["--lake", lake]
    elif given == "variable":
        env = {"AGENTLAKE_LAKE": lake}
    else:
        home.mkdir()
        (home / "config.toml").write_text(f'lake = "{lake}"\n')
    out = cli("ingest", "--quiet", "--no-default", "--crush-root", str(store.global_dir), *flags,
              home=home, cwd=cwd, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr == f"error: the lake '{lake}' is not a folder or an s3:// URI {hint}\n"
    assert out.stdout == ""
    assert list(cwd.iterdir()) == []  # no `S3:/team-lake/lake` folder in the working directory
    assert not (home / "warehouse.ducklake").exists() and not (home / "lake").exists()


def test_the_schedule_refuses_a_mistyped_lake_in_the_environment(tmp_path):
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    out = cli("schedule", "--kind", "systemd", "--install", home=home, cwd=cwd,
              env={"AGENTLAKE_LAKE": "S3://team-lake/lake", "HOME": str(tmp_path)})
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr == ("error: the lake 'S3://team-lake/lake' is not a folder or an s3:// URI "
                          "(did you mean s3://team-lake/lake?)\n")
    assert out.stdout == "" and not (tmp_path / ".config").exists()  # no timer written


def test_credentials_in_a_mistyped_lake_are_never_printed(tmp_path):
    out = cli("merge", "--lake", f"S3://{KEY_ID}:{SECRET}@team-lake/lake", home=tmp_path / "home",
              cwd=tmp_path / "cwd")
    assert out.returncode == 1
    assert out.stderr == ("error: the lake 'S3://***@team-lake/lake' is not a folder or an s3:// URI "
                          "(did you mean s3://***@team-lake/lake?)\n")
    out = cli("merge", "--lake", "https://ana:pw/x@minio.internal:9000/lake?sig=SIGNATURE", home=tmp_path / "home",
              cwd=tmp_path / "cwd")
    assert out.returncode == 1 and "'https://***@minio.internal:9000/lake?sig=***'" in out.stderr, out.stderr
    assert not [s for s in (KEY_ID, *SECRET.split("/"), "ana:", "pw/x", "SIGNATURE") if s in out.stderr]


@pytest.mark.parametrize("lake", ["C:/x", "C:\\x", "lake", "./S3-lake", "s3-lake/x"])
def test_folders_are_still_folders(tmp_path, monkeypatch, lake):
    """A Windows drive letter (one letter before the colon) and plain relative folders resolve
    as before, against the working directory."""
    monkeypatch.chdir(tmp_path)
    layout = Layout.resolve(home=tmp_path / "home", lake=lake, env={})
    assert layout.lake == (tmp_path / lake).absolute() and not layout.remote
    assert Layout.resolve(home=tmp_path / "home", lake="s3://team-lake/lake/", env={}).lake == "s3://team-lake/lake"


# --- 2. a new reader merging an empty or mistyped prefix ---------------------------------------

def test_a_new_reader_merging_an_empty_prefix_is_told_and_writes_nothing(s3, tmp_path):  # noqa: F811
    lake = f"s3://{BUCKET}/lake"
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=2, seed=4)
    ingested = cli("ingest", "--quiet", "--no-default", "--lake", lake, "--crush-root", str(store.global_dir),
                   home=tmp_path / "ana", cwd=tmp_path / "cwd", env=s3)
    assert ingested.returncode == 0, ingested.stderr

    reader = tmp_path / "reader"
    for wrong in (f"s3://{BUCKET}/lakee", f"s3://{BUCKET}/lake/_landing/x"):
        out = cli("merge", "--lake", wrong, home=reader, cwd=tmp_path / "cwd", env=s3)
        assert out.returncode == 1, out.stdout + out.stderr
        assert out.stderr.startswith(f"error: nothing ingested in {wrong} ") and out.stderr.count("\n") == 1, out.stderr
        assert "name a team's lake" not in out.stderr  # it named one
        assert out.stdout == "" and "merged 0 sources" not in out.stdout
        assert not (reader / "warehouse.ducklake").exists()  # nothing for a reader to open

    right = cli("merge", "--lake", lake, home=reader, cwd=tmp_path / "cwd", env=s3)
    assert right.returncode == 0, right.stderr
    assert right.stdout.startswith(f"merged 1 source (0 removed, 1 run log) from {lake} into ")
    # once merged, the lake is not listed again before the merge: the merge's own refusal speaks
    s3_client(s3).create_bucket(Bucket="empty-agentlake")
    emptied = cli("merge", "--lake", "s3://empty-agentlake/lake", home=reader, cwd=tmp_path / "cwd", env=s3)
    assert emptied.returncode == 1 and "lists no landing file" in emptied.stderr, emptied.stderr


def test_a_new_reader_merging_an_empty_folder_is_told_the_same(tmp_path):
    lake = tmp_path / "share" / "lake"
    lake.mkdir(parents=True)
    out = cli("merge", "--lake", str(lake), home=tmp_path / "reader", cwd=tmp_path / "cwd")
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith(f"error: nothing ingested in {lake} ") and out.stderr.count("\n") == 1, out.stderr
    assert "no such folder" not in out.stderr
    # a mistyped path: said to be none (a team lead's trial was only told to ingest first)
    typo = tmp_path / "share" / "lak"
    out = cli("merge", "--lake", str(typo), home=tmp_path / "reader", cwd=tmp_path / "cwd")
    assert out.returncode == 1 and out.stderr.startswith(
        f"error: nothing ingested in {typo} yet (no such folder: a mistyped path?): "), out.stderr


def test_a_machine_with_nothing_to_land_still_ingests_into_an_empty_prefix(s3, tmp_path):  # noqa: F811
    """The first machine of a team, before any agent wrote a session: "no sources found", exit 0."""
    out = cli("ingest", "--quiet", "--no-default", "--lake", f"s3://{BUCKET}/fresh", home=tmp_path / "ana",
              cwd=tmp_path / "cwd", env=s3)
    assert out.returncode == 0, out.stderr
    assert "no sources found" in out.stderr


def _sessions(home) -> int:
    from warehouse.lake.ducklake import connect
    with connect(home / "warehouse.ducklake", ours=True) as con:
        return con.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]


SHARE = "team share&co"


def _team_share_and_a_readers_home(root: Path) -> Path:
    """A team's folder lake (`share`, ana's ingest) and a reader's home merged from it (`reader`).
    The share's name holds what a shell reads as syntax (a space, an `&`): a command said with it
    must still run when pasted."""
    share, cwd, reader = root / SHARE, root / "cwd", root / "reader"
    team = generate_store(root / "crush", projects=1, sessions_per_project=2, seed=4)
    assert cli("ingest", "--quiet", "--no-default", "--lake", str(share), "--crush-root", str(team.global_dir),
               home=root / "ana", cwd=cwd).returncode == 0
    assert cli("merge", "--lake", str(share), home=reader, cwd=cwd).returncode == 0
    # compacted: the catalog's rows written out to its own data files, which a writer given this
    # home's lake as its data path cannot read (the guard read nothing there and let it through)
    assert cli("compact", home=reader, cwd=cwd).returncode == 0
    return root


@pytest.mark.parametrize("mine", [0, 1], ids=["no agents", "agents of its own"])
def test_ingest_or_a_bare_merge_in_a_readers_home_keeps_the_teams_rows(tmp_path, built_once, mine):
    """A reader's home (`merge --lake` of a team's lake) running `ingest` or `merge` with its own
    lake: that emptied the warehouse ("0 ok", exit 0), or replaced the team's rows with this
    machine's. Refused, naming the lake to merge; `merge --full` does it on purpose."""
    # the team's lake is only read from here on; the reader's home is changed, so each case has a copy
    built = built_once("team-share-and-a-readers-home", _team_share_and_a_readers_home)
    share, cwd, reader = built / SHARE, tmp_path / "cwd", copy_home(built / "reader", tmp_path / "reader")
    teams = _sessions(reader)
    assert teams > 0
    flags = ["--no-default"]
    if mine:
        own = generate_store(tmp_path / "mine", projects=1, sessions_per_project=1, seed=5)
        flags += ["--crush-root", str(own.global_dir)]
    said = (f"the warehouse {reader / 'warehouse.ducklake'} is read from the lake {share} (1 sources merged "
            f"from it), not from this home's own lake {reader / 'lake'}: merging that would replace them, and "
            f"nothing was merged. To refresh it, run `agentlake merge --lake {shlex.quote(str(share))}`")
    out = cli("ingest", *flags, home=reader, cwd=cwd)
    assert out.returncode == 1, out.stdout + out.stderr
    told = out.stdout + out.stderr  # a Dagster run's merge says it among the run's problems
    assert said in told and "Traceback" not in told and "EmptyLake" not in told, told
    assert _sessions(reader) == teams
    merged = cli("merge", home=reader, cwd=cwd)  # its own lake: with landing files of its own, or none
    assert merged.returncode == 1 and f"merges {share}; name it with --lake" in merged.stderr if not mine else \
        merged.returncode == 1 and said in merged.stderr, merged.stdout + merged.stderr
    assert _sessions(reader) == teams
    scheduled = cli("schedule", home=reader, cwd=cwd)
    assert scheduled.returncode == 2 and scheduled.stdout == ""
    assert f"is read from the lake {share}, so an ingest of this home's own lake would be refused" in scheduled.stderr
    commands = re.findall(r"`(agentlake [^`]+)`", scheduled.stderr)
    assert [shlex.split(c)[1:] for c in commands] == [["schedule", "--lake", str(share)], ["merge", "--lake", str(share)]]
    # the home named by --home, not the default: the commands to paste name it too (a team lead's trial)
    named = cli("schedule", "--home", str(reader), home=tmp_path / "elsewhere", cwd=cwd)
    assert [shlex.split(c)[1:] for c in re.findall(r"`(agentlake [^`]+)`", named.stderr)] == [
        ["schedule", "--home", str(reader), "--lake", str(share)], ["merge", "--home", str(reader), "--lake", str(share)]]
    # a new home's compaction of the team's lake: no warehouse there yet, not "nothing ingested" (a trial)
    fresh = cli("compact", "--lake", str(share), home=tmp_path / "newcomer", cwd=cwd)
    assert fresh.returncode == 1 and fresh.stderr == (
        f"error: {tmp_path / 'newcomer'} has no warehouse yet to compact: `agentlake merge --lake "
        f"{shlex.quote(str(share))}` builds it from that lake\n"), fresh.stderr
    named = cli("ingest", "--no-default", "--home", str(reader), home=tmp_path / "elsewhere", cwd=cwd)
    assert f"run `agentlake merge --home {reader} --lake {shlex.quote(str(share))}`" in named.stdout + named.stderr
    assert cli("schedule", "--lake", str(share), home=reader, cwd=cwd).returncode == 0

    assert cli("merge", "--lake", str(share), home=reader, cwd=cwd).returncode == 0  # the way to refresh
    assert _sessions(reader) == teams
    if mine:  # the home made its own lake's, on purpose
        whole = cli("merge", "--full", home=reader, cwd=cwd)
        assert whole.returncode == 0, whole.stderr
        assert 0 < _sessions(reader) != teams


def _table_files(home: Path) -> set[str]:
    return {str(p.relative_to(home)) for p in (home / "warehouse-tables").rglob("*.parquet")}


def test_a_readers_home_moved_or_copied_reads_and_compacts_its_own_tables(tmp_path, built_once):
    """A reader's home keeps its tables beside its catalog, not in a lake of its own (it has none).
    Moved, it looked for them in `<home>/lake` and failed to read; copied, its compaction wrote
    into the original's folder and `--orphans` deleted the original's newer files (a new user's
    trial). The docs: a home can be moved or copied whole."""
    built = built_once("team-share-and-a-readers-home", _team_share_and_a_readers_home)
    share, cwd = built / SHARE, tmp_path / "cwd"
    teams = _sessions(built / "reader")
    # a column read, not a count DuckLake answers from its statistics: the files are opened
    sql = ("sql", "--format", "csv", "SELECT COUNT(DISTINCT session_id) FROM sessions")

    def own_home(name: str) -> Path:  # a reader's home whose catalog names its own tables' folder
        home = copy_home(built / "reader", tmp_path / name)
        assert cli("merge", "--lake", str(share), home=home, cwd=cwd).returncode == 0
        return home

    moved = own_home("before-move").rename(tmp_path / "moved")
    out = cli(*sql, home=moved, cwd=cwd)
    assert out.returncode == 0 and out.stdout.split()[-1] == str(teams), out.stdout + out.stderr

    original = own_home("original")
    copy = copy_home(original, tmp_path / "copy")
    assert cli("merge", "--full", "--lake", str(share), home=original, cwd=cwd).returncode == 0  # it moves on
    kept = _table_files(original)
    compacted = cli("compact", "--orphans", "--keep-seconds", "0", home=copy, cwd=cwd)
    assert compacted.returncode == 0, compacted.stderr
    assert _table_files(original) == kept  # the copy's compaction left the original's files alone
    for home in (original, copy):
        out = cli(*sql, home=home, cwd=cwd)
        assert out.returncode == 0 and out.stdout.split()[-1] == str(teams), out.stdout + out.stderr


# --- 3. an endpoint with a password ------------------------------------------------------------

@pytest.mark.parametrize("name, endpoint", [
    ("AWS_ENDPOINT_URL", "http://minio:S3cretPw@127.0.0.1:5077"),
    ("AWS_ENDPOINT_URL_S3", "https://minio:S3c/retPw@minio.internal:9000/"),
    ("AWS_ENDPOINT_URL", "http://S3cretPw@127.0.0.1:5077"),
])
@pytest.mark.parametrize("kind", ["systemd", "cron", "launchd"])
def test_an_endpoint_holding_a_password_is_never_written_into_the_schedule(tmp_path, name, endpoint, kind):
    out = cli("schedule", "--kind", kind, "--every", "30", "--install", home=tmp_path / "al", cwd=tmp_path / "cwd",
              env={"HOME": str(tmp_path), name: endpoint})
    assert out.returncode == 2, out.stdout + out.stderr
    host = endpoint.rsplit("@", 1)[1]
    assert out.stderr == (f"error: ${name} '{endpoint.split('://')[0]}://***@{host}' holds credentials, which the "
                          "schedule would write into its file: put them in the AWS credentials file "
                          "(~/.aws/credentials) or a profile ($AWS_PROFILE), and give the endpoint without them\n")
    assert "S3cret" not in out.stderr + out.stdout and "retPw" not in out.stderr and "minio:" not in out.stderr
    assert out.stdout == "" and not (tmp_path / ".config").exists() and not (tmp_path / "Library").exists()


def test_an_endpoint_without_credentials_is_still_carried(tmp_path):
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:5077", "AWS_ENDPOINT_URL_S3": "http://minio.internal:9000/"}
    r = schedule.recipe("cron", 30, ["agentlake", "ingest"], tmp_path, tmp_path / "log", env=env)
    line = next(iter(r.files.values()))
    assert "AWS_ENDPOINT_URL=http://127.0.0.1:5077 AWS_ENDPOINT_URL_S3=http://minio.internal:9000/ agentlake" in line
    with pytest.raises(ValueError, match=r"^\$AWS_ENDPOINT_URL 'http://\*\*\*@127.0.0.1:5077' holds credentials"):
        schedule.recipe("cron", 30, ["agentlake"], tmp_path, tmp_path / "log",
                        env={"AWS_ENDPOINT_URL": "http://minio:pw\n@127.0.0.1:5077"})


# --- 4. a misspelt key in an agent's section ---------------------------------------------------

@pytest.mark.parametrize("section, wrong, right", [
    ("crush", "extra_store", "extra_stores"),
    ("claude", "extra_root", "extra_roots"),
    ("codex", "extra-roots", "extra_roots"),
])
def test_a_misspelt_key_in_an_agent_section_is_refused(tmp_path, section, wrong, right):
    config = tmp_path / "config.toml"
    config.write_text(f'[{section}]\n{wrong} = ["/srv/backup"]\n')
    with pytest.raises(ConfigError) as raised:
        load_config(config)
    assert str(raised.value) == (f"{config}: unknown setting {wrong!r} in [{section}] (did you mean {right}?); "
                                 "known: extra_stores, extra_roots")
    config.write_text(f'[{section}]\nfolders = ["/srv/backup"]\n')  # nothing close: the known ones only
    with pytest.raises(ConfigError, match=r"unknown setting 'folders' in \[" + section + r"\]; known: "):
        load_config(config)


@pytest.mark.parametrize("text, said", [
    ("[claud]\nextra_roots = []\n", "unknown section [claud] (did you mean [claude]?)"),
    ("[projetcs]\nx = 'y'\n", "unknown section [projetcs] (did you mean [projects]?)"),
    ("[model_alias]\nx = 'y'\n", "unknown section [model_alias] (did you mean [model_aliases]?)"),
    ("[[budget]]\nmonthly_usd = 5\n", "unknown section [[budget]] (did you mean [[budgets]]?)"),
    ("[[price]]\nmodel = 'm'\n", "unknown section [[price]] (did you mean [[prices]]?)"),
    ("[[claude]]\nextra_roots = []\n", "unknown section [[claude]] (did you mean [claude]?)"),
    ("[elsewhere]\nx = 1\n", "unknown section [elsewhere]"),
])
def test_a_misspelt_section_is_named_with_the_one_it_is_close_to(tmp_path, text, said):
    """A new user's trial: `[claud]` was refused with no suggestion, and `[[budget]]` was called an
    unknown setting whose list left out [[budgets]] (as if budgets did not exist)."""
    config = tmp_path / "config.toml"
    config.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_config(config)
    assert str(raised.value).startswith(f"{config}: {said}; known: crush, "), str(raised.value)
    assert str(raised.value).endswith(", projects, privacy, [[budgets]], [[prices]], [model_aliases]")


@pytest.mark.parametrize("text, said", [
    ('machin = "x"\n', "unknown setting 'machin' (did you mean machine?); known: lake, warehouse, machine, user, "
                       "team, use_default, tz"),
    ("tz = 5\n", "tz must be a string, in quotes (it is 5)"),
    ('team = "yes"\n', "team must be true or false (it is 'yes')"),
    # a table written as a setting: named as the table it is close to (a trial had no hint)
    ("budget = 5\n", "unknown setting 'budget' (did you mean [[budgets]]?); known: lake, warehouse, machine, user, "
                     "team, use_default, tz"),
    ("zzz = 1\n", "unknown setting 'zzz'; known: lake, warehouse, machine, user, team, use_default, tz"),
])
def test_a_misspelt_or_mistyped_setting_is_said_in_toml_s_words(tmp_path, text, said):
    """A new user's trial: a top-level setting misspelt had no suggestion (an agent's section's
    had), and a value of the wrong kind was said in Python's words (`tz must be a str`)."""
    config = tmp_path / "config.toml"
    config.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_config(config)
    assert str(raised.value) == f"{config}: {said}"


@pytest.mark.parametrize("text, said", [
    ("tz = Europe/Berlin\n", 'Invalid value (at line 1, column 6) (a text value goes in quotes: tz = "Europe/Berlin")'),
    ('lake = "/x"\nmachine = my laptop\n',
     'Invalid value (at line 2, column 11) (a text value goes in quotes: machine = "my laptop")'),
    # a URI is shown by its scheme alone: it may hold a key (a team trial had no hint for its lake at all)
    ("lake = s3://key:secret@bucket/x\n", 'Invalid value (at line 1, column 8) (a text value goes in quotes: '
                                          'lake = "s3://...")'),
    ("lake = s3://acme/lake?endpoint_override=127.0.0.1:5055&scheme=http  # the team's\n",
     'Invalid value (at line 1, column 8) (a text value goes in quotes: lake = "s3://...")'),
    ("tz = Europe/Berlin  # mine\n", 'Invalid value (at line 1, column 6) (a text value goes in quotes: tz = '
                                     '"Europe/Berlin")'),
    ("[[budgets]]\nmonthly_usd = 5\nproject = shop\n",
     'Invalid value (at line 3, column 11) (a text value goes in quotes: project = "shop")'),
    ("team = True\n", "Invalid value (at line 1, column 8)"),  # not text: quotes would be wrong too
    ("# a comment\u2028still a comment\nmachine = my laptop\n",
     'Invalid value (at line 2, column 11) (a text value goes in quotes: machine = "my laptop")'),
    ('[prices\n', "Expected ']' at the end of a table declaration (at line 1, column 8)"),
    # a key given twice: TOML's words named no key (a team lead's trial)
    ("[[budgets]]\nmonthly_usd = 5\nmonthly_usd = 6\n",
     "Cannot overwrite a value (at line 3, column 16) (monthly_usd is set twice in the same table: keep one)"),
])
def test_a_value_toml_cannot_read_is_said_with_its_quotes_when_it_lacks_them(tmp_path, text, said):
    """A new user's trial: `tz = Europe/Berlin` was "Invalid value (at line 1, column 6)", TOML's
    words for a text without its quotes, the likeliest slip in the file."""
    config = tmp_path / "config.toml"
    config.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_config(config)
    assert str(raised.value) == f"cannot read {config}: {said}"


def test_a_misspelt_extra_stores_fails_the_ingest_and_the_right_one_finds_the_store(tmp_path):
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=2, seed=5)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[crush]\nextra_store = ["{store.dbs[0].path}"]\n')
    for command in (["ingest", "--quiet", "--no-default"], ["sources", "--no-default"]):
        out = cli(*command, home=home, cwd=tmp_path / "cwd")
        assert out.returncode == 1 and out.stdout == "", out.stdout + out.stderr
        assert out.stderr == (f"error: {home / 'config.toml'}: unknown setting 'extra_store' in [crush] "
                              "(did you mean extra_stores?); known: extra_stores, extra_roots\n")
    assert not (home / "warehouse.ducklake").exists()

    (home / "config.toml").write_text(f'[crush]\nextra_stores = ["{store.dbs[0].path}"]\n')
    out = cli("ingest", "--quiet", "--no-default", home=home, cwd=tmp_path / "cwd")
    assert out.returncode == 0, out.stderr
    layout = load_layout(str(home), env={})
    from warehouse.lake.ducklake import connect

    with connect(layout.warehouse, ours=True) as con:
        assert con.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == store.sessions


# --- 6. a machine renamed, or a store copied to another machine ---------------------------------

def test_a_machine_ingested_again_under_a_new_name_is_said_and_undone_by_deleting_the_old_folder(tmp_path):
    """A machine renamed (or a store copied to a new laptop) landed every session again under the
    new name, and each copy counted with nothing said (a team lead's trial). The merge names the
    two machines; deleting the old name's landing folder and merging counts each session once."""
    share, cwd, home = tmp_path / "share", tmp_path / "cwd", tmp_path / "ben"
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=3, seed=6)
    first = cli("ingest", "--quiet", "--no-default", "--lake", str(share), "--machine", "ben-laptop",
                "--crush-root", str(store.global_dir), home=home, cwd=cwd)
    assert first.returncode == 0 and "landed by" not in first.stderr, first.stderr
    roots = _roots(home)
    again = cli("ingest", "--quiet", "--no-default", "--lake", str(share), "--machine", "ben-desktop",
                "--crush-root", str(store.global_dir), home=home, cwd=cwd)
    assert again.returncode == 0, again.stderr
    said = [ln for ln in again.stderr.splitlines() if "landed by" in ln]
    assert said == [f"warning: {roots} root sessions landed by ben-desktop were landed by ben-laptop too (the "
                    "same agent, id and start: a store copied to another machine, or a machine or user ingested "
                    "again under a new name?): each copy is counted; docs/TEAM.md, \"Renaming or retiring a "
                    "machine\""], \
        again.stderr
    assert _roots(home) == 2 * roots

    import shutil
    shutil.rmtree(share / "_landing" / "ben-laptop")  # as README says
    merged = cli("merge", "--lake", str(share), home=home, cwd=cwd)
    assert merged.returncode == 0 and "landed by" not in merged.stderr, merged.stderr
    assert _roots(home) == roots
    from warehouse.lake.ducklake import connect
    with connect(home / "warehouse.ducklake", ours=True) as con:
        assert con.execute("SELECT DISTINCT machine FROM sessions").fetchall() == [("ben-desktop",)]


def test_a_user_ingested_again_under_a_new_name_on_the_same_machine_is_said(tmp_path):
    """One machine, its user named anew (`--user`, or `user =` in config.toml after a first run
    under the login's name): every session landed again under the new user, and each copy counted
    with nothing said, where a machine renamed was said (a new user's trial). Deleting the old
    user's landing folder counts each session once."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=3, seed=7)
    common = ("ingest", "--quiet", "--no-default", "--machine", "box", "--crush-root", str(store.global_dir))
    first = cli(*common, "--user", "root", home=home, cwd=cwd)
    assert first.returncode == 0 and "landed by" not in first.stderr, first.stderr
    roots = _roots(home)
    (home / "config.toml").write_text('user = "ana"\n')
    again = cli(*common, home=home, cwd=cwd)
    assert again.returncode == 0, again.stderr
    said = [ln for ln in again.stderr.splitlines() if "landed by" in ln]
    assert said and said[0].startswith(f"warning: {roots} root sessions landed by user ana on box were landed by "
                                       "user root on box too (the same agent, id and start"), again.stderr
    assert _roots(home) == 2 * roots
    _each_copy_once(home, {"root", "ana"})

    import shutil
    shutil.rmtree(home / "lake" / "_landing" / "box" / "root")  # docs/TEAM.md
    merged = cli("merge", home=home, cwd=cwd)
    assert merged.returncode == 0 and "landed by" not in merged.stderr, merged.stderr
    assert _roots(home) == roots


def _each_copy_once(home, users: set[str]) -> None:
    """Each user's copy counts once in the marts: the same store landed under two user names on
    one machine keeps its source ids, and the marts' join of a session with its tree matched both
    copies (every session twice in session_summary and on the dashboard, messages four times: a
    team lead's trial)."""
    from warehouse.lake.ducklake import connect

    with connect(home / "warehouse.ducklake", ours=True) as con:
        def one(sql, user):
            return con.execute(sql, [user]).fetchone()

        for user in users:
            assert one("SELECT COUNT(*), SUM(messages), SUM(tool_calls), SUM(cost_usd) FROM session_summary "
                       "WHERE \"user\" = ?", user) == \
                one("SELECT (SELECT COUNT(*) FROM sessions WHERE is_root AND \"user\" = $1), "
                    "(SELECT COUNT(*) FROM messages WHERE \"user\" = $1), "
                    "(SELECT COUNT(*) FROM tool_calls WHERE has_call AND \"user\" = $1), "
                    "(SELECT SUM(CAST(cost_usd AS DECIMAL(38, 9))) FROM sessions WHERE is_root AND \"user\" = $1)",
                    user)
            assert one("SELECT SUM(cost_usd) FROM daily_costs WHERE \"user\" = ?", user) == \
                one("SELECT SUM(CAST(cost_usd AS DECIMAL(38, 9))) FROM sessions WHERE is_root AND \"user\" = ?", user)
        # the two copies' figures are alike, to the nano-dollar, whichever copy each tie takes
        assert len({one("SELECT SUM(cost_usd), SUM(messages) FROM session_summary WHERE \"user\" = ?", u)
                    for u in users}) == 1
        # a reader shows one copy of a session: the search's open query, the dashboard's page, MCP's text
        from warehouse.serve.dashboard.server import render
        from warehouse.serve.dashboard.transcript import find_session
        from warehouse.serve.search import transcript_sql

        provider, machine, source, sid = con.execute(
            "SELECT provider, machine, source_id, session_id FROM sessions WHERE is_root ORDER BY session_id LIMIT 1"
        ).fetchone()
        for user in users:
            parts = con.execute('SELECT COUNT(*) FROM parts WHERE "user" = ? AND source_id = ? AND session_id = ?',
                                [user, source, sid]).fetchone()[0]
            assert len(con.execute(transcript_sql(provider, machine, user, source, sid)).fetchall()) == parts > 0
        found = find_session(con, source, sid, None, machine)
        messages = con.execute('SELECT COUNT(*) FROM messages WHERE "user" = ? AND source_id = ? AND session_id = ?',
                               [found[-1], source, sid]).fetchone()[0]
        page, status = render(con, "/session", f"source={source}&id={sid}&machine={machine}")
        assert status == 200 and page.count('<div class="msg ') == messages > 0
        # the links name the user too, and the page shows that user's copy
        for user in users:
            assert find_session(con, source, sid, None, machine, user)[-1] == user
            page, status = render(con, "/session", f"source={source}&id={sid}&machine={machine}&session_user={user}")
            assert status == 200 and page.count('<div class="msg ') == messages
        (project,) = con.execute("SELECT project FROM sessions WHERE session_id = ?", [sid]).fetchone()
        listing, status = render(con, "/project", f"project={project}")
        assert status == 200 and all(f"&amp;session_user={user}" in listing for user in users), listing


def _roots(home) -> int:
    from warehouse.lake.ducklake import connect
    with connect(home / "warehouse.ducklake", ours=True) as con:
        return con.execute("SELECT COUNT(*) FROM sessions WHERE is_root").fetchone()[0]


# --- 7. a shared directory without team mode ----------------------------------------------------

@pytest.mark.parametrize("team", [None, "--team", "--no-team", "config"])
def test_a_folder_lake_not_the_homes_own_without_team_mode_is_said(tmp_path, team):
    """A shared directory is not redacted unless team mode is set (README): a machine that did not
    set it wrote every secret in plain text to a folder others read, and nothing said so."""
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=1, seed=7)
    home = tmp_path / "ana"
    flags = [team] if team and team.startswith("--") else []
    if team == "config":
        home.mkdir()
        (home / "config.toml").write_text("team = false\n")
    out = cli("ingest", "--quiet", "--no-default", "--lake", str(tmp_path / "share"), *flags,
              "--crush-root", str(store.global_dir), home=home, cwd=tmp_path / "cwd")
    assert out.returncode == 0, out.stderr
    said = (f"warning: the lake {tmp_path / 'share'} is a folder other than this home's own (a shared directory?) "
            "and team mode is off: rows are written as the agents hold them, secrets included. Set team = true in "
            f"{home / 'config.toml'} (or --team) to redact them, or team = false (--no-team) to say it is meant\n")
    assert (said in out.stderr) == (team is None), out.stderr


def test_the_homes_own_lake_without_team_mode_is_not_said(tmp_path):
    """The same ingest into the home's own lake (no flag, no config: as the first case above):
    its owner's, nothing to say. Once, not per case above: none of them changes this home."""
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=1, seed=7)
    own = cli("ingest", "--quiet", "--no-default", "--crush-root", str(store.global_dir), home=tmp_path / "ben",
              cwd=tmp_path / "cwd")  # the home's own lake: its owner's, nothing to say
    assert own.returncode == 0 and "team mode is off" not in own.stderr, own.stderr
    # its catalog named elsewhere (--warehouse): the lake is still the home's own
    elsewhere = cli("ingest", "--quiet", "--no-default", "--crush-root", str(store.global_dir), "--warehouse",
                    str(tmp_path / "wh" / "w.ducklake"), home=tmp_path / "cy", cwd=tmp_path / "cwd")
    assert elsewhere.returncode == 0 and "team mode is off" not in elsewhere.stderr, elsewhere.stderr


def test_a_mistyped_lake_that_replaces_a_laptops_warehouse_is_said(tmp_path):
    """A team lead's trial: `ingest --lake <a typo>` on a laptop that read the team's folder lake
    built its warehouse anew from the typo's lake, the team's rows gone, without a word."""
    share = tmp_path / "share"
    (tmp_path / "cwd").mkdir()

    def here(*args, home, cwd):  # `cli`, in this process: the process boundary is not the point here
        return run_cli(*args, env={"AGENTLAKE_HOME": str(home)}, cwd=cwd)

    for user, seed in (("ana", 1), ("cy", 2)):
        store = generate_store(tmp_path / f"crush-{user}", projects=1, sessions_per_project=1, seed=seed)
        out = here("ingest", "--quiet", "--no-default", "--lake", str(share), "--team", "--user", user,
                   "--crush-root", str(store.global_dir), home=tmp_path / user, cwd=tmp_path / "cwd")
        assert out.returncode == 0, out.stderr
    typo = tmp_path / "shar"
    out = here("ingest", "--no-default", "--lake", str(typo), "--team", "--user", "cy",
               "--crush-root", str(tmp_path / "crush-cy"), home=tmp_path / "cy", cwd=tmp_path / "cwd")
    assert out.returncode == 0, out.stderr
    said = (f"note: the warehouse {tmp_path / 'cy' / 'warehouse.ducklake'} was merged from the lake {share}: it is "
            f"built anew from {typo}, without that lake's rows (`--lake {share}` reads it again)")
    assert said in out.stdout + out.stderr, out.stdout + out.stderr
    users = query(Layout.resolve(home=tmp_path / "cy"), 'SELECT DISTINCT "user" FROM sessions')
    assert users == [("cy",)]
    back = here("merge", "--lake", str(share), home=tmp_path / "cy", cwd=tmp_path / "cwd")
    assert back.returncode == 0 and f"was merged from the lake {typo}: it is built anew from {share}" in back.stderr
    assert sorted(query(Layout.resolve(home=tmp_path / "cy"), 'SELECT DISTINCT "user" FROM sessions')) == \
        [("ana",), ("cy",)]
