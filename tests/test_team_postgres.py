"""The team's DuckLake catalog in PostgreSQL (a real server, tests/support_postgres.py) with its
tables on S3 (moto, tests/support_s3.py): two machines land, the center merges into the
catalog, and readers attach it read-only with their own role, seeing each merge at once."""

import json
import sqlite3
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support_postgres import READER, READER_PASSWORD, WRITER, WRITER_PASSWORD, Server, postgres  # noqa: F401
from tests.support_s3 import BUCKET, run_cli_fresh, s3, s3_client, s3_server  # noqa: F401  (the moto fixtures)
from tests.test_team import ingest_here, ok
from transforms.synth.crush import add_message, generate_store
from transforms.synth.crush_parts import text_part
from warehouse.catalog.team_index import CURRENT


def center(server: Server, s3env: dict, home, *args):
    """The center's command: the writer role, its password from libpq's variable."""
    env = {**s3env, **server.env(WRITER, WRITER_PASSWORD), "AGENTLAKE_HOME": str(home)}
    return run_cli_fresh(*args, "--warehouse", server.warehouse(WRITER), env=env)


def reader(server: Server, s3env: dict, home, *args, password=READER_PASSWORD):
    """A reader's command: the read-only role, with no lake named (the catalog knows where its
    tables are)."""
    env = {**s3env, **server.env(READER, password), "AGENTLAKE_HOME": str(home)}
    return run_cli_fresh(*args, "--warehouse", server.warehouse(READER), env=env)


@contextmanager
def as_reader(server: Server):
    """This process with the reader role's libpq variables, for the calls made in it."""
    with pytest.MonkeyPatch.context() as env:
        for key, value in server.env(READER, READER_PASSWORD).items():
            env.setenv(key, value)
        yield


def sql(server, s3env, home, query):
    ran = reader(server, s3env, home, "sql", "--format", "json", query)
    assert ok(ran)
    return json.loads(ran.stdout)


def test_the_center_merges_into_postgres_and_readers_see_each_merge_at_once(postgres, s3, tmp_path):  # noqa: F811
    lake = f"s3://{BUCKET}/pg-team"
    a = generate_store(tmp_path / "a" / "crush", projects=1, sessions_per_project=4, seed=11)
    b = generate_store(tmp_path / "b" / "crush", projects=2, sessions_per_project=3, seed=12)
    assert ok(ingest_here(tmp_path / "a" / "home", lake, "ana-laptop", "ana", a.global_dir, s3))
    # ben reads the team's catalog too (config.toml): his ingest lands, and needs no database
    (tmp_path / "b" / "home").mkdir(parents=True)
    (tmp_path / "b" / "home" / "config.toml").write_text(f'warehouse = "{postgres.warehouse(READER)}"\n')
    assert ok(ingest_here(tmp_path / "b" / "home", lake, "ben-desktop", "ben", b.global_dir, s3))

    assert ok(center(postgres, s3, tmp_path / "center", "merge", "--lake", lake))
    # the tables' files are in the lake, beside the landing files: nothing on the center's disk
    keys = [o["Key"] for o in s3_client(s3).list_objects_v2(Bucket=BUCKET, Prefix="pg-team/main/")["Contents"]]
    assert "pg-team/main/_catalog.json" in keys  # the lake's tables are this catalog's: recorded there
    assert all(k.endswith(".parquet") for k in keys if k != "pg-team/main/_catalog.json")
    assert not list((tmp_path / "center").glob("*.ducklake"))

    home = tmp_path / "reader"  # a reader's home holds no warehouse and merges nothing
    rows = sql(postgres, s3, home, "SELECT machine, COUNT(*) AS n, SUM(cost_usd) FILTER (WHERE is_root) AS cost "
                                   "FROM sessions GROUP BY 1 ORDER BY 1")
    assert [(r["machine"], r["n"]) for r in rows] == [("ana-laptop", a.sessions), ("ben-desktop", b.sessions)]
    assert sum(float(r["cost"]) for r in rows) == pytest.approx(a.root_cost + b.root_cost, abs=1e-9)
    assert sql(postgres, s3, home, "SELECT COUNT(*) AS n FROM messages") == [{"n": a.messages + b.messages}]
    # the lake's credentials read the tables, and no SQL reads them back (httpfs put them in settings)
    keys = {"AWS_ACCESS_KEY_ID": "AKIAREADERONLY", "AWS_SECRET_ACCESS_KEY": "reader-secret-value",
            "AWS_SESSION_TOKEN": "reader-session-token"}
    shown = reader(postgres, {**s3, **keys}, home, "sql", "--format", "json",
                   "SELECT (SELECT COUNT(*) FROM messages) AS n, current_setting('s3_secret_access_key') AS k, "
                   "current_setting('s3_access_key_id') AS i, current_setting('s3_session_token') AS t, "
                   "(SELECT string_agg(concat(name, '=', value), ' ') FROM duckdb_settings()) AS every")
    assert ok(shown) and json.loads(shown.stdout)[0]["n"] == a.messages + b.messages
    assert not [v for v in keys.values() if v in shown.stdout], shown.stdout
    home.mkdir(parents=True, exist_ok=True)  # a reader's own prices: the center's config prices the team's catalog
    (home / "config.toml").write_text('[[prices]]\nmodel = "m"\ninput = 1\noutput = 2\n')
    report = reader(postgres, s3, home, "report", "--format", "json")
    assert ok(report) and "agentlake merge` applies them" not in report.stderr, report.stderr
    (home / "config.toml").unlink()
    totals = json.loads(report.stdout)["totals"][0]
    assert float(totals["cost_usd"]) == pytest.approx(a.root_cost + b.root_cost, abs=1e-9)
    assert not list(home.glob("**/*.ducklake"))

    # the center's search index is in the lake, and a reader searches it as the center would
    word, hits = _searched(postgres, s3, home, tmp_path / "center")
    assert hits and (home / "team.search.duckdb").exists()
    assert s3_client(s3).head_object(Bucket=BUCKET, Key=f"pg-team/{current_now(s3)}")["ContentLength"] > 0

    # a reader whose endpoint for the lake is wrong: the lake's storage named (exit 1), not a bad query
    lost = {**s3, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    for args in (("sql", "SELECT COUNT(*) FROM messages"), ("report",)):
        ran = reader(postgres, lost, home, *args)
        assert ran.returncode == 1 and ran.stderr.startswith(
            "error: cannot read the warehouse's tables from the lake's storage at http://127.0.0.1:9: "
            "Could not connect to server (") and "$AWS_ENDPOINT_URL" in ran.stderr, ran.stderr
    # a session of another role holding the writer's lock (PostgreSQL hides its address and start
    # from the center's role): named by its role and pid, not "a local socket ... since None"
    import duckdb

    from warehouse.lake.ducklake import load_packaged

    with as_reader(postgres), duckdb.connect() as held:
        load_packaged(held, "postgres_scanner")
        held.execute(f"ATTACH '{postgres.warehouse(READER).removeprefix('postgres:')}' AS pg (TYPE postgres, READ_ONLY)")
        (pid,) = held.execute("SELECT * FROM postgres_query('pg', 'SELECT pg_backend_pid() FROM "
                              "(SELECT pg_advisory_lock(1634167915, 1)) AS l')").fetchone()
        busy = center(postgres, {**s3, "AGENTLAKE_WRITER_WAIT": "0"}, tmp_path / "center", "merge", "--lake", lake)
    assert busy.returncode == 1 and f"(held by a session of the role {READER}, PostgreSQL pid {pid})" in busy.stderr, \
        busy.stderr
    # a reader's role asked to merge: said in one line, before anything is written
    said = (f"error: the role {READER} may only read the catalog at {postgres.host}:{postgres.port}: writing it "
            "(`agentlake merge`, `compact`) is the center's job, with the role that owns it (docs/TEAM.md); a reader "
            "needs neither\n")
    # with its lake named or not (not first told to name the lake, then refused: a team lead's trial)
    for args in (("merge", "--lake", lake), ("merge",), ("compact",)):
        refused = reader(postgres, s3, home, *args)
        assert refused.returncode == 1 and refused.stderr == said, (args, refused.stderr)
    refused = reader(postgres, s3, home, "sql", "DELETE FROM sessions")
    assert refused.returncode == 2 and "DELETE statements are refused" in refused.stderr
    # below agentlake's own guard, the role and the read-only attach refuse too
    from warehouse.lake.ducklake import connect
    from warehouse.lake.pg_catalog import PostgresCatalog

    with as_reader(postgres):
        with connect(PostgresCatalog.parse(postgres.warehouse(READER))) as con:
            with pytest.raises(Exception, match="read-only"):
                con.execute("DELETE FROM sessions")

    # machine A's agent ends a session: the next merge takes A's changed source only
    with sqlite3.connect(a.dbs[0].path) as db:
        db.execute("PRAGMA foreign_keys = ON")
        (gone,) = db.execute("SELECT id FROM sessions WHERE parent_session_id IS NULL LIMIT 1").fetchone()
        db.execute("DELETE FROM sessions WHERE id = ?", (gone,))
        db.execute("UPDATE sessions SET cost = cost + 1.5 WHERE id = "
                   "(SELECT id FROM sessions WHERE parent_session_id IS NULL LIMIT 1)")
    assert ok(ingest_here(tmp_path / "a" / "home", lake, "ana-laptop", "ana", a.global_dir, s3))
    again = center(postgres, s3, tmp_path / "center", "merge", "--lake", lake)
    assert ok(again) and "1 source" in again.stdout + again.stderr, again.stdout + again.stderr
    after = sql(postgres, s3, home, "SELECT SUM(cost_usd) FILTER (WHERE is_root) AS cost FROM sessions")
    assert float(after[0]["cost"]) == pytest.approx(a.root_cost + b.root_cost + 1.5, abs=1e-9)
    assert sql(postgres, s3, home, "SELECT COUNT(*) AS n FROM sessions WHERE session_id = "
                                   f"'{gone}'") == [{"n": 1}]  # history kept, as in a file catalog
    held = (home / ".team.search.duckdb.held").read_text()
    assert _searched(postgres, s3, home, tmp_path / "center", word)[1]  # the changed source's index, fetched again
    assert (home / ".team.search.duckdb.held").read_text() != held
    copies = [o["Key"] for o in s3_client(s3).list_objects_v2(Bucket=BUCKET, Prefix="pg-team/search/")["Contents"]]
    # CURRENT and the copy it names: the one before is gone (pyarrow leaves a folder's marker)
    assert sorted(k for k in copies if not k.endswith("/")) == [f"pg-team/{CURRENT}", f"pg-team/{current_now(s3)}"]
    assert f"showing {len(hits)} of" in _through_mcp(postgres, s3, home, word)

    # a second center started by mistake, in another home: it merges ben's new message and puts
    # its index; the first center then has nothing to merge, but the lake's copy is not its own:
    # its index is brought up to date before it is put (else the lake would go back to one without it)
    with sqlite3.connect(b.dbs[0].path) as db:
        sid, created = db.execute("SELECT id, created_at FROM sessions WHERE parent_session_id IS NULL LIMIT 1").fetchone()
        add_message(db, "late-message", sid, "user", [text_part("zanzibarquokka")], created_at=created + 60)
    assert ok(ingest_here(tmp_path / "b" / "home", lake, "ben-desktop", "ben", b.global_dir, s3))
    assert ok(center(postgres, s3, tmp_path / "center2", "merge", "--lake", lake))
    assert ok(center(postgres, s3, tmp_path / "center", "merge", "--lake", lake))
    assert len(_searched(postgres, s3, home, tmp_path / "center", "zanzibarquokka")[1]) == 1
    page, status = _through_the_dashboard_search(postgres, s3, home, word)
    assert status == 200 and all(session_id in page for session_id, *_ in hits)
    with as_reader(postgres):
        assert _through_sqlalchemy(postgres.warehouse(READER)) == a.sessions + b.sessions
        assert _through_the_dashboard(postgres.warehouse(READER)) == a.sessions + b.sessions
    # the BI file from the team's catalog, in a reader's home whose own ingest found nothing (it left
    # an empty lake folder: "nothing ingested", a team trial)
    (home / "lake").mkdir(exist_ok=True)
    served = reader(postgres, s3, home, "serving", str(tmp_path / "bi.duckdb"))
    assert ok(served) and served.stdout.startswith(f"{tmp_path / 'bi.duckdb'}: ") and "session_summary" in served.stdout

    # a reader's endpoint that is some other web server, which finds no file at all: its storage is
    # named, not a table file to rebuild (a team lead's trial was told to run `merge --full`)
    with _web_server_that_finds_nothing() as elsewhere:
        ran = reader(postgres, {**s3, "AWS_ENDPOINT_URL": elsewhere}, home, "sql", "SELECT COUNT(*) FROM sessions")
    assert ran.returncode == 1 and ran.stderr.startswith(
        f"error: cannot read the warehouse's tables from the lake's storage at {elsewhere}: ") and \
        "$AWS_ENDPOINT_URL" in ran.stderr and "merge --full" not in ran.stderr, ran.stderr
    # one table file gone from the lake itself, the others there: that file is what to rebuild
    files = s3_client(s3).list_objects_v2(Bucket=BUCKET, Prefix="pg-team/main/sessions/")["Contents"]
    s3_client(s3).delete_object(Bucket=BUCKET, Key=files[0]["Key"])
    ran = reader(postgres, s3, home, "sql", "SELECT COUNT(*) FROM sessions")
    assert ran.returncode == 1 and "HTTP 404" in ran.stderr and "`agentlake merge --full` builds the tables" in \
        ran.stderr and "cannot read the warehouse's tables from the lake's storage" not in ran.stderr, ran.stderr


@contextmanager
def _web_server_that_finds_nothing():
    import http.server
    import threading

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_error(404)

        do_HEAD = do_GET

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def current_now(s3env) -> str:
    """The copy of the search index the lake's CURRENT names."""
    return s3_client(s3env).get_object(Bucket=BUCKET, Key=f"pg-team/{CURRENT}")["Body"].read().decode()


def _searched(server, s3env, home, center_home, word=None) -> tuple[str, list]:
    """A reader's `agentlake search` for `word` (by default the center index's most common plain
    word), checked hit for hit against the center's own copy of the index; (word, hits)."""
    from warehouse.catalog.search_index import open_fts
    from warehouse.serve.search import search

    with open_fts(center_home / "team.search.duckdb") as con:
        word = word or con.execute("SELECT term FROM fts_main_docs.dict WHERE regexp_full_match(term, '[a-z]{4,}') "
                                   "ORDER BY df DESC, term LIMIT 1").fetchone()[0]
        want = [(h.session_id, h.message_id, h.tool_call_id, h.snippet, h.score) for h in search(con, word, limit=50)]
    ran = reader(server, s3env, home, "search", word, "--format", "json", "--limit", "50")
    assert ok(ran), ran.stderr
    got = [(h["session_id"], h["message_id"], h["tool_call_id"], h["snippet"], h["score"])
           for h in json.loads(ran.stdout)]
    assert got == want
    return word, got


def _through_mcp(server, s3env, home, word: str) -> str:
    """`agentlake mcp`'s search_history tool, as the command builds it, for a reader of the team's catalog."""
    from pipelines.reading import search_index_of
    from warehouse.lake.config import load_layout
    from warehouse.serve.dashboard.server import Reader
    from warehouse.serve.mcp_tools import Tools

    with as_reader(server), pytest.MonkeyPatch.context() as env:
        for key, value in s3env.items():
            env.setenv(key, value)
        layout = load_layout(home, None, server.warehouse(READER))
        return Tools(Reader(layout.warehouse), index=lambda: search_index_of(layout)).search_history(word, limit=50)


def _through_the_dashboard_search(server, s3env, home, word: str) -> tuple[str, int]:
    """The dashboard's /search page, given the index as `agentlake dashboard` gives it."""
    from pipelines.reading import search_index_of
    from warehouse.lake.config import load_layout
    from warehouse.serve.dashboard.server import Reader, render

    with as_reader(server), pytest.MonkeyPatch.context() as env:
        for key, value in s3env.items():
            env.setenv(key, value)
        layout = load_layout(home, None, server.warehouse(READER))
        return render(Reader(layout.warehouse).cursor(), "/search", f"q={word}", index=lambda: search_index_of(layout))


def _through_sqlalchemy(setting: str) -> int:
    """docs/BI.md's duckdb-engine connection, as written there."""
    from sqlalchemy import create_engine, event, text
    from sqlalchemy.pool import NullPool

    from warehouse.lake.ducklake import attach_team_catalog

    engine = create_engine("duckdb:///:memory:", poolclass=NullPool)

    @event.listens_for(engine, "connect")
    def attach(dbapi_con, _):
        attach_team_catalog(dbapi_con, setting)
        dbapi_con.execute("SET TimeZone = 'UTC'")

    with engine.connect() as con:
        return con.execute(text("SELECT COUNT(*) FROM sessions")).scalar()


def _through_the_dashboard(setting: str) -> int:
    from warehouse.lake.pg_catalog import PostgresCatalog
    from warehouse.serve.dashboard.server import Reader

    return Reader(PostgresCatalog.parse(setting)).cursor().execute("SELECT COUNT(*) FROM sessions").fetchone()[0]


@pytest.mark.parametrize("case", ["wrong password", "no password", "no server"])
def test_a_catalog_that_cannot_be_opened_is_one_clear_error(postgres, s3, tmp_path, case):  # noqa: F811
    server = Server("127.0.0.1", 9) if case == "no server" else postgres  # nothing listens on port 9
    password = "" if case == "no password" else "not-the-password"
    ran = reader(server, s3, tmp_path / "reader", "sql", "SELECT 1", password=password)
    assert ran.returncode == 1
    assert ran.stderr.startswith(f"error: cannot open the PostgreSQL catalog at 127.0.0.1:{server.port}")
    assert "Traceback" not in ran.stderr and "not-the-password" not in ran.stderr + ran.stdout
    assert {"wrong password": "password authentication failed", "no password": "no password supplied",
            "no server": "refused"}[case] in ran.stderr, ran.stderr
    assert ("check $PGUSER/$PGPASSWORD or ~/.pgpass" in ran.stderr) == (case != "no server"), ran.stderr


@pytest.mark.parametrize("given", ["ours", "$PGCONNECT_TIMEOUT"])
def test_a_port_where_no_postgresql_answers_is_one_error_after_the_timeout(tmp_path, monkeypatch, given):
    """Something that takes the connection and never answers (another service on that port) is an
    error once libpq's connect timeout passes: ours by default, $PGCONNECT_TIMEOUT when set (a team
    lead's trial: `agentlake sql` hung for good)."""
    import socket
    import time

    from tests.conftest import run_cli
    from warehouse.lake import pg_catalog

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # the handshake completes in the backlog; nothing ever answers
        port = silent.getsockname()[1]
        monkeypatch.setattr(pg_catalog, "CONNECT_TIMEOUT", 1 if given == "ours" else 600)
        env = {"PGCONNECT_TIMEOUT": "1"} if given != "ours" else {}
        started = time.monotonic()
        ran = run_cli("sql", "--home", tmp_path / "home", "--warehouse",
                      f"postgres:dbname=agentlake host=127.0.0.1 port={port} user={READER}", "SELECT 1", env=env)
    assert time.monotonic() - started < 60
    assert ran.returncode == 1 and ran.stderr.startswith(
        f"error: cannot open the PostgreSQL catalog at 127.0.0.1:{port}: "), ran.stderr
    assert "timeout expired" in ran.stderr and "check host= and port=" in ran.stderr, ran.stderr


def test_a_word_libpq_does_not_know_is_said_as_a_word(tmp_path):
    from tests.conftest import run_cli

    ran = run_cli("sql", "--home", tmp_path / "home", "--warehouse",
                  f"postgres:dbname=agentlake host=127.0.0.1 port=9 usr={READER}", "SELECT 1")
    assert ran.returncode == 1 and 'invalid connection option "usr"' in ran.stderr, ran.stderr
    assert "check the setting's words" in ran.stderr and "is the server running" not in ran.stderr


def test_a_database_that_is_not_there_or_holds_no_warehouse_yet_is_said_so(postgres, s3, tmp_path):  # noqa: F811
    """A misspelt dbname is said as the database, not as a server to start; a reader before the
    center's first merge is told that, not DuckLake's 'creating a new DuckLake is explicitly
    disabled' (a new user's trial)."""
    from tests.support_postgres import Database, new_database

    for db, said in ((Database(postgres.host, postgres.port, "agentlak"), '"agentlak" does not exist (the server '
                      "answered: check dbname=)"),
                     (new_database(postgres, "nothing_merged"), "holds no warehouse yet: the center's first "
                      "`agentlake merge` into it makes one")):
        env = {**s3, **db.env(READER, READER_PASSWORD), "AGENTLAKE_HOME": str(tmp_path / "reader")}
        ran = run_cli_fresh("sql", "--warehouse", db.warehouse(READER), "SELECT 1", env=env)
        assert ran.returncode == 1 and said in ran.stderr and "Traceback" not in ran.stderr, ran.stderr
        assert "is the server running" not in ran.stderr and "explicitly disabled" not in ran.stderr


@pytest.mark.parametrize("setting", ["postgres:dbname=agentlake host=db password=hunter2",
                                     "postgresql://center:hunter2@db/agentlake",
                                     "postgresql://center@db/agentlake?password=hunter2"])
def test_a_password_in_the_setting_is_refused_unprinted(tmp_path, setting):
    ran = run_cli_fresh("sql", "--warehouse", setting, "SELECT 1", env={"AGENTLAKE_HOME": str(tmp_path)})
    assert ran.returncode == 1 and "$PGPASSWORD" in ran.stderr and "hunter2" not in ran.stderr + ran.stdout


@pytest.mark.parametrize("spelt", ["postgresql:dbname=agentlake host=db.internal user=reader",
                                   "ducklake:postgres:dbname=agentlake host=db.internal user=reader",
                                   "  POSTGRES:dbname=agentlake host=db.internal user=reader"])
def test_libpqs_and_ducklakes_spellings_of_the_setting_name_the_same_catalog(spelt):
    from warehouse.lake.config import load_layout

    layout = load_layout("/tmp/home", None, spelt.strip())
    assert layout.warehouse.attach_target == "ducklake:postgres:dbname=agentlake host=db.internal user=reader"
    assert str(layout.warehouse) == "postgres:dbname=agentlake host=db.internal user=reader"


@pytest.mark.parametrize("setting", ["postgre:dbname=agentlake host=127.0.0.1 port=9 user=center",
                                     "dbname=agentlake host=127.0.0.1 port=9 user=center"])
@pytest.mark.parametrize("where", ["--warehouse", "config.toml"])
def test_connection_words_not_written_as_a_postgres_setting_are_refused_before_anything_is_written(
        tmp_path, monkeypatch, setting, where):
    """Taken as a file's name, `postgre:dbname=...` became a warehouse of that name in the working
    directory, exit 0, and the team's catalog was never written (a team lead's trial)."""
    from tests.conftest import run_cli

    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    if where == "config.toml":
        (home / "config.toml").write_text(f'warehouse = "{setting}"\n')
    flags = ("--warehouse", setting) if where == "--warehouse" else ()
    ran = run_cli("merge", "--home", home, "--lake", tmp_path / "lake", *flags)
    assert ran.returncode == 1, ran.stderr
    assert "holds PostgreSQL's connection words but is not a postgres: setting: write it " \
           "postgres:dbname=agentlake host=127.0.0.1 port=9 user=center (docs/TEAM.md)" in ran.stderr, ran.stderr
    assert not list(cwd.iterdir()) and sorted(p.name for p in home.iterdir()) == (
        ["config.toml"] if where == "config.toml" else [])


def test_a_relative_lake_or_warehouse_in_config_toml_is_taken_from_its_home(tmp_path, monkeypatch):
    """config.toml's relative paths are the home's (the file's folder), not the working directory's; a
    relative flag stays the shell's."""
    from warehouse.lake.config import load_layout

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('warehouse = "team.ducklake"\nlake = "shared/lake"\n')
    monkeypatch.chdir(tmp_path)
    layout = load_layout(home)
    assert (layout.warehouse, Path(layout.lake)) == (home / "team.ducklake", home / "shared" / "lake")
    flagged = load_layout(home, "other/lake", "other.ducklake")
    assert (flagged.warehouse, Path(flagged.lake)) == (tmp_path / "other.ducklake", tmp_path / "other" / "lake")


def test_the_setting_is_duckdbs_spelling_and_names_its_server():
    from warehouse.lake.config import load_layout

    layout = load_layout("/tmp/home", "s3://team/lake?endpoint_override=127.0.0.1:9000",
                         "postgres:dbname=agentlake host=db.internal port=6432 user=reader")
    assert layout.warehouse.attach_target == "ducklake:postgres:dbname=agentlake host=db.internal port=6432 user=reader"
    assert layout.warehouse.host == "db.internal:6432"
    assert layout.tables_path == "s3://team/lake/"  # the lake's own storage, the endpoint the connection's
    uri = load_layout("/tmp/home", None, "postgresql://reader@db.internal:6432/agentlake").warehouse
    assert (str(uri), uri.host) == ("postgresql://reader@db.internal:6432/agentlake", "db.internal:6432")


def test_a_tables_file_missing_from_the_lake_or_a_store_that_refuses_are_told_apart(s3):  # noqa: F811
    """DuckDB's own errors reading the tables' files over S3 (httpfs, from the moto server): a
    missing file (404, an `s3://` URL in DuckDB's words) is a lost table file, with what repairs
    it; a store that does not answer is the lake's storage, naming its endpoint."""
    import duckdb

    from warehouse.lake.ducklake import damage_hint, load_packaged, storage_failure
    from warehouse.lake.pg_catalog import s3_secret_sql

    def error(env):
        with duckdb.connect() as con:
            load_packaged(con, "httpfs")
            con.execute("SET http_retries = 0")
            con.execute(s3_secret_sql(env))
            with pytest.raises(duckdb.Error) as raised:
                con.execute(f"SELECT * FROM read_parquet('s3://{BUCKET}/pg-team/main/sessions/gone.parquet')")
            return raised.value

    missing = error(s3)
    assert "HTTP 404" in str(missing) and damage_hint(missing) and not storage_failure(missing), str(missing)
    lost = error({**s3, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"})  # nothing listens there (moto takes any key)
    assert storage_failure(lost).startswith("cannot read the warehouse's tables from the lake's storage at "
                                            "http://127.0.0.1:9: "), str(lost)
    assert not damage_hint(lost)


def test_a_first_merge_naming_a_bucket_that_does_not_exist_leaves_the_catalog_to_the_right_one(  # noqa: F811
        postgres, s3, tmp_path, monkeypatch):
    """A catalog records its tables' folder when its first merge makes it: a wrong bucket on that
    merge made the catalog's tables folder the wrong bucket's, for good (every later merge of the
    right lake failed on DuckLake's DATA_PATH). The bucket is asked for before the catalog is
    opened (a new user's trial)."""
    from tests.support_postgres import new_database

    db = new_database(postgres, "wrong_bucket")
    lake = f"s3://{BUCKET}/first-merge"
    store = generate_store(tmp_path / "crush", projects=1, sessions_per_project=2, seed=21)
    assert ok(ingest_here(tmp_path / "home", lake, "ana-laptop", "ana", store.global_dir, s3))
    env = {**s3, **db.env(WRITER, WRITER_PASSWORD), "AGENTLAKE_HOME": str(tmp_path / "center")}
    wrong = run_cli_fresh("merge", "--lake", f"s3://{BUCKET}-typo/first-merge", "--warehouse", db.warehouse(WRITER),
                          env=env)
    assert wrong.returncode == 1 and f"'{BUCKET}-typo', which does not exist" in wrong.stderr, wrong.stderr
    right = run_cli_fresh("merge", "--lake", lake, "--warehouse", db.warehouse(WRITER), env=env)
    assert ok(right)
    # the center's config.toml holds the prices its merges apply: one set since its last merge is
    # said by its report, as on one machine (a team trial's center said nothing)
    config = tmp_path / "center" / "config.toml"
    config.write_text('[[prices]]\nmodel = "claude-sonnet-4-5"\ninput = 1\noutput = 5\n')
    waiting = run_cli_fresh("report", "--section", "totals", "--warehouse", db.warehouse(WRITER), env=env)
    assert waiting.returncode == 0 and (f"note: the prices in {config} are not the ones the warehouse was merged "
                                        "with: the merge that writes it applies its own home's prices (the team's "
                                        "center: `agentlake merge` there)") in waiting.stderr, waiting.stderr
    assert ok(run_cli_fresh("merge", "--lake", lake, "--warehouse", db.warehouse(WRITER), env=env))
    merged = run_cli_fresh("report", "--section", "totals", "--warehouse", db.warehouse(WRITER), env=env)
    assert merged.returncode == 0 and "not the ones the warehouse was merged with" not in merged.stderr, merged.stderr
    # another prefix, or no lake named (compact): the lake to name, not DuckLake's OVERRIDE_DATA_PATH
    for args in (("merge", "--lake", f"s3://{BUCKET}/other-prefix"), ("compact",)):
        other = run_cli_fresh(*args, "--warehouse", db.warehouse(WRITER), env=env)
        assert other.returncode == 1 and f"keeps its tables in the lake {lake}, not in " in other.stderr \
            and f"name that lake (--lake {lake}," in other.stderr and "OVERRIDE" not in other.stderr, other.stderr
    # the endpoint in the lake's URI alone (docs/DEPLOYMENT.md): the center reads its tables through it
    endpoint = s3["AWS_ENDPOINT_URL"].removeprefix("http://")
    bare = {k: v for k, v in env.items() if k != "AWS_ENDPOINT_URL"}
    with monkeypatch.context() as without:
        without.delenv("AWS_ENDPOINT_URL")
        via_uri = run_cli_fresh("merge", "--lake", f"{lake}?endpoint_override={endpoint}&scheme=http",
                                "--warehouse", db.warehouse(WRITER), env=bare)
        # a file a killed merge left in the tables' folder on S3: removed through the lake's store
        # (it was given to os.remove, a trial)
        stray = "first-merge/main/sessions/year=2026/project=x/ducklake-killed-merge.parquet"
        s3_client(s3).put_object(Bucket=BUCKET, Key=stray, Body=b"PAR1")
        compacted = run_cli_fresh("compact", "--orphans", "--keep-seconds", "0",
                                  "--lake", f"{lake}?endpoint_override={endpoint}&scheme=http",
                                  "--warehouse", db.warehouse(WRITER), env=bare)  # as the merge does
        # another prefix named with the endpoint in its URI: the lake to name keeps the endpoint
        other = run_cli_fresh("merge", "--lake", f"s3://{BUCKET}/other-prefix?endpoint_override={endpoint}&scheme=http",
                              "--warehouse", db.warehouse(WRITER), env=bare)
    assert other.returncode == 1 and f"name that lake (--lake '{lake}?endpoint_override={endpoint}&scheme=http'," \
        in other.stderr, other.stderr
    assert ok(via_uri) and ok(compacted)
    assert "Contents" not in s3_client(s3).list_objects_v2(Bucket=BUCKET, Prefix=stray)
    # a second catalog given this lake is refused before it writes a file there (it would take the
    # first one's files for orphans and replace its search index: a team trial), and so is a copy
    # of this catalog (a staging center's database restored from a dump keeps the catalog's uuid)
    from tests.support_postgres import OS_USER, _sql, binaries

    second = new_database(postgres, "second_catalog")
    _sql(binaries(), postgres.port, OS_USER, "postgres", [f"CREATE DATABASE copied TEMPLATE {db.name} OWNER {WRITER}"])
    copied = type(db)(db.host, db.port, "copied")

    def listed():
        return {o["Key"] for o in s3_client(s3).list_objects_v2(Bucket=BUCKET, Prefix="first-merge/")["Contents"]}

    files = listed()
    for other, args in ((second, ("merge",)), (second, ("compact", "--orphans", "--keep-seconds", "0"))):
        refused = run_cli_fresh(*args, "--lake", lake, "--warehouse", other.warehouse(WRITER), env=env)
        assert refused.returncode == 1 and refused.stderr.startswith(
            f"error: the lake {lake} holds the tables of another catalog (postgres:dbname=wrong_bucket ") \
            and f"not of postgres:dbname={other.name} " in refused.stderr \
            and f"remove {lake}/main/_catalog.json" in refused.stderr, refused.stderr
    # the copy, and the same database under another host name, hold this catalog's own id: said as such
    # (a team lead's trial: localhost for 127.0.0.1 was "another catalog")
    for setting, args in ((copied.warehouse(WRITER), ("compact", "--orphans", "--keep-seconds", "0")),
                          (db.warehouse(WRITER).replace("host=127.0.0.1", "host=localhost"), ("merge",))):
        refused = run_cli_fresh(*args, "--lake", lake, "--warehouse", setting, env=env)
        assert refused.returncode == 1 and refused.stderr.startswith(
            f"error: the lake {lake} holds the tables of this catalog as postgres:dbname=wrong_bucket ") \
            and f"not as {setting} does: the same database under another host name" in refused.stderr \
            and f"remove {lake}/main/_catalog.json" in refused.stderr, refused.stderr
    assert listed() == files
    # a privilege the center's role loses (a hardening REVOKE) leaves the catalog the lake's own
    _sql(binaries(), postgres.port, OS_USER, db.name, ["REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC"])
    try:
        assert ok(run_cli_fresh("compact", "--lake", lake, "--warehouse", db.warehouse(WRITER), env=env))
    finally:
        _sql(binaries(), postgres.port, OS_USER, db.name, ["GRANT EXECUTE ON FUNCTION pg_control_system() TO PUBLIC"])
    # refused before it named the lake its tables' place: the lake of its own it is told to take, it takes
    own = f"s3://{BUCKET}/second-own"
    assert ok(ingest_here(tmp_path / "home2", own, "ana-laptop", "ana", store.global_dir, s3))
    assert ok(run_cli_fresh("merge", "--lake", own, "--warehouse", second.warehouse(WRITER), env=env))
    reader_env = {**s3, **db.env(READER, READER_PASSWORD), "AGENTLAKE_HOME": str(tmp_path / "reader")}
    ran = run_cli_fresh("sql", "--format", "json", "--warehouse", db.warehouse(READER),
                        "SELECT COUNT(*) AS n FROM sessions", env=reader_env)
    assert ok(ran) and json.loads(ran.stdout) == [{"n": store.sessions}]
    # a role made without docs/TEAM.md's grants: told which, not DuckDB's COPY error (a team lead's trial)
    _sql(binaries(), postgres.port, OS_USER, "postgres", ["CREATE ROLE intern LOGIN PASSWORD 'intern-secret-4'"])
    intern_env = {**reader_env, "PGUSER": "intern", "PGPASSWORD": "intern-secret-4"}
    setting = db.warehouse(READER).replace(f"user={READER}", "user=intern")
    for args in (("sql", "SELECT COUNT(*) FROM sessions"), ("report",)):
        refused = run_cli_fresh(*args, "--warehouse", setting, env=intern_env)
        assert refused.returncode == 1 and refused.stderr.startswith(
            f"error: the role intern may not read the catalog at {db.host}:{db.port}: PostgreSQL said permission "
            "denied for table ") and "GRANT SELECT ON ALL TABLES IN SCHEMA public TO intern" in refused.stderr \
            and "COPY" not in refused.stderr, refused.stderr
