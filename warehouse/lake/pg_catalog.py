"""The team's DuckLake catalog in PostgreSQL: one writer (the center) commits to it, any number
of readers attach its current snapshot read-only, and the tables' Parquet is on the lake's
storage (DuckLake's DATA_PATH: `<lake>/main/<table>/...`).

    warehouse = "postgres:dbname=agentlake host=db.internal port=5432 user=center"

The spelling is DuckLake's own (`ATTACH 'ducklake:postgres:<libpq words>'`). Credentials come
from libpq's environment (PGPASSWORD, PGPASSFILE or ~/.pgpass, PGUSER, PGSSLMODE...), never from
the setting: a `password=` in it is refused before anything opens, prints or stores it.

One writer at a time, on any machine: the writer holds a lock that lives in PostgreSQL itself
(`writer_lock`). Readers never wait for it, and attach the snapshot the last writer published as
it ended (`publish`, `published_snapshot`): a merge commits its tables and then its marts, and a
reader between the two commits would otherwise see new tables beside old marts.
"""

import os
import re
import shlex
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass

from warehouse.lake.locks import holder_note

PREFIX = "postgres:"
# seconds libpq waits for a server to answer a connection (without one it waits for ever: a port
# where something else listens, an HTTP server say, hung `agentlake sql` for good); a
# `connect_timeout=` in the setting or libpq's $PGCONNECT_TIMEOUT is used instead
CONNECT_TIMEOUT = 10
# libpq words that hold a secret: refused in the setting (the environment or ~/.pgpass has them)
_SECRET_WORDS = re.compile(r"(?:^|[\s?&])(password|sslpassword)\s*=", re.I)


class PostgresCatalogError(ValueError):
    """A PostgreSQL catalog setting that cannot be used (a password written into it)."""


class CatalogUnreachable(OSError):
    """The PostgreSQL server did not answer, or refused this role: said once, naming the host."""


class CatalogReadOnly(CatalogUnreachable):
    """A role that may only read the catalog asked to write it (a reader's `agentlake merge`)."""


class CatalogBusy(CatalogUnreachable):
    """Another writer (a second center) held the catalog for longer than this one waits."""


# the spellings taken for the same setting: ours, libpq's scheme, and DuckLake's own ATTACH target
_PREFIXES = re.compile(r"(?i)(ducklake:)?(postgres|postgresql):")
# a word libpq reads (`dbname=`, `host=`, ...), as a setting that was meant for PostgreSQL holds
_LIBPQ_WORDS = re.compile(r"(?i)(?:^|[\s:])(dbname|host|hostaddr|port|user|sslmode|service)\s*=")


def is_postgres(warehouse) -> bool:
    return isinstance(warehouse, PostgresCatalog) or (
        isinstance(warehouse, str) and bool(_PREFIXES.match(warehouse)))


def holds_connection_words(setting: str) -> bool:
    """Not a `postgres:` setting, yet libpq's words."""
    return not is_postgres(setting) and bool(_LIBPQ_WORDS.search(setting))


def refuse_connection_words(setting: str) -> None:
    """A warehouse that is not a `postgres:` setting but holds libpq's words (`postgre:dbname=...`,
    words without a prefix) is refused: taken as a file's name, it built a warehouse of that name
    in the working directory, and the team's catalog was never written (a team lead's trial)."""
    if holds_connection_words(setting):
        words = re.sub(r"^[A-Za-z][\w+.-]*:(?!/)", "", setting.strip())
        raise PostgresCatalogError(f"the warehouse {setting!r} holds PostgreSQL's connection words but is not a "
                                   f"postgres: setting: write it {PREFIX}{words} (docs/TEAM.md)")


@dataclass(frozen=True)
class PostgresCatalog:
    """The catalog's connection words (libpq's `key=value`, or a `postgresql://` URI without a
    password). Stands where a DuckDB file's path does (Layout.warehouse): it always "exists"
    (the server says otherwise when attached), and prints as the setting, which holds no secret."""

    words: str

    @classmethod
    def parse(cls, setting: str) -> "PostgresCatalog":
        setting = re.sub(r"(?i)^ducklake:", "", setting.strip())
        uri = re.match(r"(?i)postgres(ql)?://", setting)
        words = setting if uri else setting.split(":", 1)[1].strip()
        if _SECRET_WORDS.search(words) or re.match(r"(?i)postgres(ql)?://[^/@]*:[^/@]*@", words):
            raise PostgresCatalogError(
                "the warehouse setting holds a password: give it in $PGPASSWORD or ~/.pgpass "
                "($PGPASSFILE) instead, never in a file or on a command line")
        return cls(words)

    def __str__(self) -> str:
        return self.words if "://" in self.words else PREFIX + self.words

    @property
    def attach_target(self) -> str:
        """What DuckLake attaches: `ducklake:postgres:<words>`."""
        return "ducklake:" + PREFIX + self.words

    @property
    def host(self) -> str:
        """The server named, for errors: `host=` (or the URI's), else libpq's $PGHOST, else local."""
        found = (re.search(r"(?:^|\s)host\s*=\s*(\S+)", self.words)
                 or re.match(r"(?i)postgres(?:ql)?://(?:[^@/]*@)?([^/?]+)", self.words))
        host = found.group(1) if found else os.environ.get("PGHOST", "the local socket")
        port = re.search(r"(?:^|\s)port\s*=\s*(\d+)", self.words)
        return f"{host}:{port.group(1)}" if port and ":" not in host else host

    @property
    def user(self) -> str | None:
        """The role named, for errors: `user=` (or the URI's), else libpq's $PGUSER."""
        found = (re.search(r"(?:^|\s)user\s*=\s*(\S+)", self.words)
                 or re.match(r"(?i)postgres(?:ql)?://([^:@/]+)(?::[^@/]*)?@", self.words))
        return found.group(1) if found else os.environ.get("PGUSER")

    def exists(self) -> bool:
        return True

    def is_file(self) -> bool:
        return True


def unreachable(catalog: PostgresCatalog, exc: Exception) -> CatalogUnreachable:
    """DuckDB's long attach error, cut to libpq's reason, naming the host (no password is in it:
    the words hold none, and libpq does not repeat one)."""
    text = " ".join(str(exc).split())
    reason = re.sub(r'^.*?Unable to connect to Postgres at "[^"]*": ', "", text)
    hint = (" (check $PGUSER/$PGPASSWORD or ~/.pgpass for this role)"
            if "authentication" in reason or "no password supplied" in reason
            else " (the server answered: check dbname=)" if re.search(r'database "[^"]*" does not exist', reason)
            else " (a word libpq does not know: check the setting's words)" if "invalid connection option" in reason
            else " (nothing answered as PostgreSQL does: check host= and port=; $PGCONNECT_TIMEOUT waits longer)"
            if "timeout expired" in reason
            else " (is the server running, and its address right?)" if "connect" in reason.lower() else "")
    return CatalogUnreachable(f"cannot open the PostgreSQL catalog at {catalog.host}: {reason}{hint}")


def data_path(lake) -> str:
    """Where the catalog's tables go: the lake itself (its `main/` folder), without the URI's
    query (an endpoint is the connection's, from $AWS_ENDPOINT_URL)."""
    return str(lake).split("?", 1)[0].rstrip("/") + "/"


def s3_secret_sql(env=os.environ, lake: str = "") -> str:
    """A temporary DuckDB secret for the tables on S3, from the usual AWS variables (none: the
    httpfs extension's own defaults), the endpoint and region the lake's URI names first (the
    center merging `s3://b/lake?endpoint_override=...`; a reader names no lake: its variables).
    Temporary: DuckDB writes persistent ones to disk."""
    from warehouse.lake.duckdb_settings import endpoint

    url, region = endpoint(str(lake or ""), env)
    parts = ["TYPE s3"]
    if env.get("AWS_ACCESS_KEY_ID"):
        parts += [f"KEY_ID {literal(env['AWS_ACCESS_KEY_ID'])}", f"SECRET {literal(env.get('AWS_SECRET_ACCESS_KEY', ''))}"]
        if env.get("AWS_SESSION_TOKEN"):
            parts.append(f"SESSION_TOKEN {literal(env['AWS_SESSION_TOKEN'])}")
    if region:
        parts.append(f"REGION {literal(region)}")
    if url:
        scheme, _, host = url.partition("://")
        parts += [f"ENDPOINT {literal(host.rstrip('/'))}", "URL_STYLE 'path'",
                  f"USE_SSL {'false' if scheme == 'http' else 'true'}"]
    return f"CREATE OR REPLACE TEMPORARY SECRET agentlake_s3 ({', '.join(parts)})"


# httpfs copies $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY and $AWS_SESSION_TOKEN into these settings
# when it loads, where any SQL reads them back (current_setting, duckdb_settings()): a reader's
# guarded SQL and an agent's MCP run_sql did. The secret (s3_secret_sql) holds them, redacted.
CREDENTIAL_SETTINGS = ("s3_access_key_id", "s3_secret_access_key", "s3_session_token")


def use_s3_credentials(con, env=os.environ, lake: str = "") -> None:
    """The lake's S3 credentials as a temporary secret of `con` (httpfs loaded), and not in its
    settings (CREDENTIAL_SETTINGS). `lake`: its URI, whose endpoint and region come first."""
    con.execute(s3_secret_sql(env, lake))
    for name in CREDENTIAL_SETTINGS:
        con.execute(f"SET {name} = ''")


def literal(text) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def attach(con, catalog: PostgresCatalog, target: str, name: str, options: str = "", lake: str = "") -> None:
    """`ATTACH target AS name (options)`; a server that cannot be reached is one clear error.
    `lake`: the lake named, for the one to name instead when the catalog's tables are in another."""
    import duckdb  # here: the layout imports this module, and `agentlake --help` loads no engine

    try:
        con.execute(f"ATTACH {literal(with_connect_timeout(target))} AS {name}{f' ({options})' if options else ''}")
    except duckdb.Error as exc:
        other = _OTHER_DATA_PATH.search(str(exc))
        if other:
            raise another_lake(catalog, *other.groups(), named=lake) from None
        if "creating a new DuckLake is explicitly disabled" in str(exc):  # a reader before the first merge
            raise CatalogUnreachable(f"the catalog at {catalog.host} holds no warehouse yet: the center's first "
                                     "`agentlake merge` into it makes one (docs/TEAM.md)") from None
        if "postgres" in str(exc).lower():
            raise unreachable(catalog, exc) from None
        raise


def with_connect_timeout(target: str) -> str:
    """The connection words with libpq's `connect_timeout`, unless they or $PGCONNECT_TIMEOUT set one."""
    if "connect_timeout" in target.lower() or os.environ.get("PGCONNECT_TIMEOUT"):
        return target
    if "://" in target:
        return f"{target}{'&' if '?' in target else '?'}connect_timeout={CONNECT_TIMEOUT}"
    return f"{target} connect_timeout={CONNECT_TIMEOUT}"


# DuckLake's words for a writer naming another tables' folder than the one the catalog recorded
_OTHER_DATA_PATH = re.compile(r'DATA_PATH parameter "([^"]*)" does not match existing data path in the catalog "([^"]*)"')


def another_lake(catalog: PostgresCatalog, given: str, recorded: str, named: str = ""):
    """The lake named is not the one whose `main/` folder holds the catalog's tables (a typo,
    another prefix, or none named: `compact` without --lake): the one to name instead, with the
    parameters of the lake `named` (its `?endpoint_override=...`: without them the hint worked only
    with $AWS_ENDPOINT_URL set, a trial)."""
    from warehouse.lake.storage import ReadFromAnotherLake, masked

    query = str(named).partition("?")[2]
    lake = masked(recorded.rstrip("/") + (f"?{query}" if query else ""))
    return ReadFromAnotherLake(
        f"the catalog at {catalog.host} keeps its tables in the lake {lake}, not in {masked(given.rstrip('/'))}: "
        f"name that lake (--lake {shlex.quote(lake)}, or lake in config.toml); nothing was written")


def _query(con, db: str, sql: str) -> list[tuple]:
    """`sql` run by PostgreSQL itself, on the attached `db`'s connection."""
    return con.execute(f"SELECT * FROM postgres_query({literal(db)}, {literal(sql)})").fetchall()


# The writer's lock: an advisory lock in the catalog's database (these two numbers: "aglk", the
# writer), which every center asks for, whatever machine it runs on. A transaction-level lock,
# on a connection of its own whose transaction stays open while the writer works: the postgres
# extension resets each pooled connection it takes back (DISCARD ALL, which drops session-level
# locks), but leaves a transaction's connection to it. PostgreSQL drops the lock when that
# transaction or its connection ends: the writer's end, or its process's death however it dies.
LOCK_KEYS = (1634167915, 1)
LOCK_DB = "agentlake_writer_lock"
WAIT_ENV = "AGENTLAKE_WRITER_WAIT"  # seconds a second writer waits before it gives up
WAIT_S = 600.0
POLL_S = 0.25
# the lock's session: an idle-in-transaction timeout set on the server would end it mid-merge,
# and a center that vanished (no FIN) is noticed after keepalives, not the system's two hours
_SESSION = {"idle_in_transaction_session_timeout": "0", "tcp_keepalives_idle": "30",
            "tcp_keepalives_interval": "10", "tcp_keepalives_count": "3"}


# In the lake's tables folder (`main/`, which the center alone writes): the one PostgreSQL catalog
# whose tables and search index the lake holds, recorded by that catalog's first writer. A second
# catalog given the same lake would take the first one's files for orphans (`compact --orphans`)
# and replace its search index.
CLAIM = "main/_catalog.json"


class LakeClaimed(RuntimeError):
    """The lake holds another PostgreSQL catalog's tables: nothing was written."""


def server_of(con, catalog: PostgresCatalog) -> str:
    """Where this catalog is, on the writer lock's connection (`writer_lock`): its server as the
    center names it (host and port) and its database. A dump restored into another database, here
    or on another server, is another catalog though it keeps its uuid; an upgrade in place is not.
    Nothing a privilege hides: a REVOKE or a GRANT must not make the catalog another."""
    return f"{catalog.host}/{_query(con, LOCK_DB, 'SELECT current_database()')[0][0]}"


def made(con) -> bool:
    """Whether the catalog's database holds DuckLake's tables yet (a first merge makes them), on
    the writer lock's connection. Asked before reading one: a failed statement would end the
    lock's transaction."""
    return bool(_query(con, LOCK_DB, "SELECT to_regclass('ducklake_schema') IS NOT NULL")[0][0])


def _claim(lake: str):
    """(the lake's store, its claim or None)."""
    import json

    from warehouse.lake.storage import open_store

    store = open_store(lake.rstrip("/"))
    try:
        held = json.loads(store.read(CLAIM))
    except (FileNotFoundError, ValueError):  # none; or cut short, edited: taken again by the next writer
        held = None
    return store, held if isinstance(held, dict) and held.get("catalog") else None


def refuse_claimed(lake: str, catalog: PostgresCatalog) -> None:
    """A catalog not made yet is refused a lake another catalog claimed, before its first attach
    records the lake as its tables' place (it could then take no other)."""
    store, held = _claim(lake)
    if held is not None:
        raise _claimed(store, held, catalog)


def claim_lake(con, meta: str, catalog: PostgresCatalog, lake: str, server: str) -> None:
    """The lake's tables are this catalog's: recorded in the lake (`CLAIM`) by the catalog's first
    writer, LakeClaimed when another catalog recorded it first. A catalog is its `main` schema's
    uuid, which DuckLake gives it once, where it is (`server_of`); `meta`: its metadata database on
    `con`, `lake`: the lake's URI or the catalog's data path."""
    import json
    from datetime import datetime, timezone

    uuid = con.execute(f"SELECT schema_uuid::VARCHAR FROM {meta}.ducklake_schema "
                       "WHERE schema_name = 'main' AND end_snapshot IS NULL").fetchone()[0]
    mine = f"{uuid}@{server}"
    store, held = _claim(lake)
    if held is not None and held["catalog"] == mine:
        return
    if held is not None:
        raise _claimed(store, held, catalog, same_uuid=str(held.get("catalog", "")).split("@", 1)[0] == uuid)
    since = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    store.put_all({CLAIM: json.dumps({"catalog": mine, "named": str(catalog), "since": since}).encode()})


def _claimed(store, held: dict, catalog: PostgresCatalog, same_uuid: bool = False) -> LakeClaimed:
    if same_uuid:  # this catalog's own id, reached at another server name: the same one, or a copy of it
        return LakeClaimed(
            f"the lake {store.uri('').rstrip('/')} holds the tables of this catalog as {held.get('named', 'unnamed')} "
            f"named it (since {held.get('since', 'its first merge')}), not as {catalog} does: the same database "
            "under another host name (localhost for 127.0.0.1, a new DNS name), or a copy of it (a restored dump), "
            "whose merges would delete the other's files as orphans. If it is the same database, name it as "
            f"before; if it moved for good, remove {store.uri(CLAIM)} and merge again (docs/TEAM.md)")
    return LakeClaimed(
        f"the lake {store.uri('').rstrip('/')} holds the tables of another catalog ({held.get('named', 'unnamed')}, "
        f"since {held.get('since', 'its first merge')}), not of {catalog}: a second catalog there would delete the "
        "first one's files as orphans and replace its search index. Merge into that catalog, or give this one a "
        f"lake of its own; if that catalog is gone for good, remove {store.uri(CLAIM)}, and this catalog's "
        "`agentlake compact --orphans` then removes the old one's files")


class BadWriterWait(ValueError):
    """$AGENTLAKE_WRITER_WAIT is no number of seconds: said as an error, as a bad $AGENTLAKE_THREADS."""


def wait_s(env=os.environ) -> float:
    try:
        wait = float(env.get(WAIT_ENV) or WAIT_S)
    except ValueError:
        wait = -1.0
    if not 0 <= wait < float("inf"):  # a negative, NaN or infinite wait is no wait a user meant
        raise BadWriterWait(f"{WAIT_ENV}={env[WAIT_ENV]!r}: give the seconds a second writer waits for the first, "
                            "a number from 0")
    return wait


@contextmanager
def writer_lock(catalog: PostgresCatalog, con):
    """Hold the catalog's writer lock on `con` (a DuckDB connection with the postgres extension
    loaded, closed at the end). Another writer holding it is waited for, said once on stderr,
    for at most `wait_s()`: then CatalogBusy, naming who holds it."""
    try:
        attach(con, catalog, catalog.words, LOCK_DB, "TYPE postgres, READ_ONLY")
        con.execute("BEGIN")  # the lock's transaction: rolled back when `con` closes
        _take(con, catalog, wait_s())
        yield
    finally:
        close(con)


def close(con) -> None:
    """Close a connection that may hold a transaction in PostgreSQL, rolled back first: when the
    server has gone, that ROLLBACK fails here as an error, where left to close() it fails inside
    DuckDB's clean-up, which aborts the whole process (SIGABRT)."""
    import duckdb

    try:
        con.execute("ROLLBACK")
    except duckdb.Error:  # no transaction open, or no server to roll it back: PostgreSQL ends it
        pass
    finally:  # (a Ctrl-C during the ROLLBACK too)
        con.close()


# libpq's words for a connection that ended under a running command
_LOST = re.compile(r"server closed the connection|no connection to the server|terminating connection|"
                   r"could not (?:receive|send) data|connection to server was lost|SSL SYSCALL error|"
                   r"SSL connection has been closed unexpectedly|connection to server at \"[^\"]*\", port \d+ failed")


def lost(catalog: PostgresCatalog, exc: Exception, doing: str) -> CatalogUnreachable | None:
    """The connection to the catalog's server ended while `doing`: said as such (None for any other
    error). PostgreSQL rolled back whatever was not committed."""
    text = " ".join(str(exc).split())
    found = _LOST.search(text)
    if found is None:
        return None
    return CatalogUnreachable(f"lost the PostgreSQL catalog at {catalog.host} while {doing}: {found.group(0)} "
                              "(did the server stop or restart?). What was not committed is rolled back, and the "
                              "next merge does it again: run it once the server answers")


def _take(con, catalog: PostgresCatalog, wait: float) -> None:
    deadline, said = time.monotonic() + wait, False
    while not _query(con, LOCK_DB, "SELECT pg_try_advisory_xact_lock({}, {})".format(*LOCK_KEYS))[0][0]:
        if time.monotonic() >= deadline:
            raise CatalogBusy(f"another merge or compaction of {catalog} is running (held by {_holder(con)}): it holds "
                              f"the catalog's writer lock, which this one waits for at most {wait:g} s (${WAIT_ENV}). "
                              "Run it again once that one has ended; if that one is stuck, end its process, or "
                              "its PostgreSQL session (pg_terminate_backend)")
        if not said:
            _name(con, f"agentlake writer waiting, {holder_note(since=False)}")
            print(f"waiting for another merge or compaction of {catalog} to end (held by {_holder(con)}), "
                  f"at most {wait:g} s (${WAIT_ENV})", file=sys.stderr, flush=True)
            said = True
        time.sleep(POLL_S)
    _name(con, f"agentlake writer, {holder_note(since=False)}")


def _name(con, name: str) -> None:
    """This session's settings, and its name as pg_stat_activity shows it to a waiting writer."""
    settings = {**_SESSION, "application_name": name}
    _query(con, LOCK_DB, "SELECT " + ", ".join(f"set_config({literal(k)}, {literal(v)}, false) AS s{i}"
                                              for i, (k, v) in enumerate(settings.items())))


def _holder(con) -> str:
    """Who holds the writer lock, as PostgreSQL knows it: its name, address and session start."""
    _query(con, LOCK_DB, "SELECT pg_stat_clear_snapshot() IS NULL")  # this transaction's view is cached
    rows = _query(con, LOCK_DB, f"""
        SELECT a.application_name AS name, coalesce(host(a.client_addr), 'a local socket') AS address,
               to_char(a.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS "UTC"') AS since, a.pid,
               a.usename AS role
        FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.classid = {LOCK_KEYS[0]}
          AND l.objid = {LOCK_KEYS[1]} AND l.objsubid = 2
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())""")
    if not rows:
        return "a session this role may not see"
    name, address, since, pid, role = rows[0]
    if since is None:  # another role's session: PostgreSQL shows its address and start to its own role only
        return f"{name or 'a session'} of the role {role}, PostgreSQL pid {pid}"
    return f"{name or 'a session'} from {address}, PostgreSQL pid {pid}, connected since {since}"


# the snapshots readers attached, each with the time it became theirs (PostgreSQL's clock): the
# last row is the one they attach now (the last writer's, as it ended). The earlier rows tell a
# sweep when each snapshot stopped being the readers' (warehouse.catalog.compaction.sweep): a day of them is kept.
PUBLISHED = "agentlake_published"
_LAST_COMMIT = "SELECT last, now() FROM (SELECT max(snapshot_id) AS last FROM ducklake_snapshot) s"


def publish(con, metadata_db: str, *, unless_published: bool = False) -> None:
    """Readers see the catalog's last commit from now on: run by the writer, holding the lock,
    on its connection (`metadata_db`: DuckLake's attached metadata), once it has committed
    everything. `unless_published`: at a writer's start, for a catalog nothing was published
    in yet (a new one, or one of an earlier release), so that its readers stay on its last
    commit (a new catalog's: empty) while this writer commits. A snapshot published again (a
    merge that changed nothing) keeps the time it was first published."""
    new = (f"INSERT INTO {PUBLISHED} {_LAST_COMMIT} WHERE NOT EXISTS (SELECT FROM {PUBLISHED})"
           if unless_published else
           f"INSERT INTO {PUBLISHED} {_LAST_COMMIT} WHERE last > (SELECT coalesce(max(snapshot_id), -1) "
           f"FROM {PUBLISHED}); DELETE FROM {PUBLISHED} WHERE published_at < now() - INTERVAL '1 day' "
           f"AND snapshot_id < (SELECT max(snapshot_id) FROM {PUBLISHED})")
    # publications of snapshots the catalog does not have (its DuckLake tables made again) are not
    # its own: they would hide its own for as long as its snapshots' numbers stay below them
    foreign = f"DELETE FROM {PUBLISHED} WHERE snapshot_id > (SELECT max(snapshot_id) FROM ducklake_snapshot)"
    sql = (f"CREATE TABLE IF NOT EXISTS {PUBLISHED} (snapshot_id bigint NOT NULL, "
           f"published_at timestamptz NOT NULL); {foreign}; {new}")
    con.execute(f"CALL postgres_execute({literal(metadata_db)}, {literal(sql)})")  # one transaction


_DENIED = re.compile(r"permission denied for (?:schema|table|relation|sequence) [\w.\"]+")


def read_only_role(catalog: PostgresCatalog, exc: Exception) -> CatalogReadOnly | None:
    """A writer's first write refused for want of privileges: the role is a reader's (or one given
    none: it may not read either, and is told so by a reader's command)."""
    if not _DENIED.search(str(exc)):
        return None  # (for a database: the role may not even connect, said as CatalogUnreachable)
    return read_only(catalog)


def read_only(catalog: PostgresCatalog) -> CatalogReadOnly:
    role = catalog.user or "this role"
    return CatalogReadOnly(f"the role {role} may only read the catalog at {catalog.host}: writing it (`agentlake "
                           "merge`, `compact`) is the center's job, with the role that owns it (docs/TEAM.md); a "
                           "reader needs neither")


def may_write(con, db: str) -> bool:
    """Whether the role on the attached `db` may make tables in the catalog's schema: the center's
    (it owns the schema: docs/TEAM.md), not a reader's."""
    return bool(_query(con, db, "SELECT has_schema_privilege(current_user, 'public', 'CREATE')")[0][0])


def not_granted(catalog: PostgresCatalog, exc: Exception) -> CatalogUnreachable | None:
    """A reader's attach refused for want of SELECT on the catalog's tables (a role made without
    docs/TEAM.md's grants, or before them): said with the grants, not as DuckDB's COPY error."""
    denied = _DENIED.search(" ".join(str(exc).split()))
    if denied is None:
        return None
    role = catalog.user or "this role"
    return CatalogUnreachable(
        f"the role {role} may not read the catalog at {catalog.host}: PostgreSQL said {denied.group(0)}. A reader's "
        "role needs SELECT on the tables the center's merges make: docs/TEAM.md, step 1 (ALTER DEFAULT PRIVILEGES "
        f"... GRANT SELECT ON TABLES TO {role}, which covers the tables made after it; for those made before, "
        f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role})")


def publications(con, metadata_db: str) -> list[tuple]:
    """(snapshot, when it was published) for the publications kept, oldest first, on
    PostgreSQL's clock."""
    return _query(con, metadata_db, f"SELECT snapshot_id, published_at FROM {PUBLISHED} ORDER BY snapshot_id")


def server_now(con, metadata_db: str):
    """The time on PostgreSQL's clock: DuckLake's own times in the catalog are on it (its NOW()
    is sent to the server as text), and so are the publications'."""
    return _query(con, metadata_db, "SELECT now()")[0][0]


PROBE_DB = "agentlake_published_probe"


def published_snapshot(con, catalog: PostgresCatalog) -> int | None:
    """The snapshot the last writer published; None for a catalog no writer of this release has
    written to yet (its readers see its last commit)."""
    attach(con, catalog, catalog.words, PROBE_DB, "TYPE postgres, READ_ONLY")
    try:
        if _query(con, PROBE_DB, f"SELECT to_regclass({literal(PUBLISHED)}) IS NULL AS missing")[0][0]:
            return None
        return _query(con, PROBE_DB, f"SELECT max(snapshot_id) FROM {PUBLISHED}")[0][0]
    finally:
        con.execute(f"DETACH {PROBE_DB}")
