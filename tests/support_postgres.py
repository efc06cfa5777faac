"""A real PostgreSQL server for the team-catalog tests: started once per test worker on a free
loopback port in a temporary folder, with the two roles a team gives out: the center's (it
writes the catalog) and the readers' (SELECT only). Skipped when this machine has no PostgreSQL
binaries; in CI (`CI` set, as .ci/run runs) that is a failure instead: .ci/run installs them."""

import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

# where the binaries are: on PATH (/usr/local/bin), else Debian's package (`postgresql`, as .ci/run installs)
SEARCHED = ("", "/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin")
OS_USER = "postgres"  # initdb refuses to run as root
DATABASE = "agentlake"
WRITER, READER = "center", "reader"
WRITER_PASSWORD, READER_PASSWORD = "center-secret-1", "reader-secret-2"


@dataclass(frozen=True)
class Server:
    host: str
    port: int

    def warehouse(self, user: str) -> str:
        """The warehouse setting for one role: libpq's key=value words, no password in it."""
        return f"postgres:dbname={DATABASE} host={self.host} port={self.port} user={user}"

    def env(self, user: str, password: str) -> dict[str, str]:
        """The environment a role's commands run with: the password from libpq's variable."""
        return {"PGPASSWORD": password, "PGUSER": user}


def binaries() -> Path | None:
    for folder in SEARCHED:
        found = shutil.which("initdb", path=folder or None)
        if found and shutil.which("pg_ctl", path=str(Path(found).resolve().parent)):
            return Path(found).resolve().parent
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_owner(args, **kwargs):
    """A PostgreSQL command as its own OS user when we are root (initdb and postgres refuse root)."""
    user = OS_USER if os.geteuid() == 0 else None
    return subprocess.run(args, user=user, check=True, capture_output=True, text=True, **kwargs)


def _sql(bindir: Path, port: int, user: str, database: str, statements: list[str]) -> None:
    """Each statement on its own (CREATE DATABASE runs outside a transaction), as `user`."""
    args = [str(bindir / "psql"), "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(port), "-U", user,
            "-d", database]
    try:
        _as_owner([*args, *(a for s in statements for a in ("-c", s))], cwd="/")
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"psql failed: {exc.stderr}") from None


ROLES_SQL = [f"CREATE ROLE {WRITER} LOGIN PASSWORD '{WRITER_PASSWORD}'",
             f"CREATE ROLE {READER} LOGIN PASSWORD '{READER_PASSWORD}'",
             f"CREATE DATABASE {DATABASE} OWNER {WRITER}"]
# run in the database, as docs/TEAM.md: the center owns `public` (before PostgreSQL 15 the superuser
# did), the readers may read whatever the center makes there, and nothing more
READER_SQL = [f"ALTER SCHEMA public OWNER TO {WRITER}", "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
              f"GRANT USAGE ON SCHEMA public TO {READER}",
              f"ALTER DEFAULT PRIVILEGES FOR ROLE {WRITER} IN SCHEMA public GRANT SELECT ON TABLES TO {READER}"]


@pytest.fixture(scope="session")
def postgres():
    """One server for the worker, stopped at the end."""
    bindir = binaries()
    if bindir is None:
        reason = "no PostgreSQL binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql/*/bin"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: .ci/run installs Debian's postgresql")
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="agentlake-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, OS_USER, OS_USER)
    _as_owner([str(bindir / "initdb"), "-D", str(data), "-U", OS_USER, "--auth-local=trust",
               "--auth-host=trust", "--no-sync", "-E", "UTF8"], cwd=root)
    port = _free_port()
    options = f"-h 127.0.0.1 -p {port} -k {root} -F -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    _STARTS[port] = [str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"]
    _as_owner(_STARTS[port], cwd=root)
    try:
        _sql(bindir, port, OS_USER, "postgres", ROLES_SQL)
        _sql(bindir, port, WRITER, DATABASE, READER_SQL)
        # from now on the roles log in with their passwords: the tests see a wrong one refused
        hba = data / "pg_hba.conf"
        _as_owner(["sh", "-c", f"printf 'local all all trust\\nhost all {OS_USER} 127.0.0.1/32 trust\\n"
                   f"host all all 127.0.0.1/32 scram-sha-256\\n' > {hba}"], cwd=root)
        _as_owner([str(bindir / "pg_ctl"), "-D", str(data), "reload"], cwd=root)
        time.sleep(0.2)
        yield Server("127.0.0.1", port)
    finally:
        _as_owner([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], cwd=root)
        shutil.rmtree(root, ignore_errors=True)


_STARTS: dict[int, list[str]] = {}  # each worker's server: how it was started, by port


@contextmanager
def stopped(server: Server):
    """The worker's server stopped at once, as a crash or an operator's restart stops it (its
    sessions cut off mid-command), then started again as it was."""
    start = _STARTS[server.port]
    _as_owner([start[0], "-D", start[2], "-m", "immediate", "stop"], cwd="/")
    try:
        yield
    finally:
        _as_owner(start, cwd="/")


def create_database(server: Server, name: str, owner: str, password: str) -> None:
    """Another database on the worker's server, owned by a login role of its own (as a deployment
    gives Dagster's storage one: docs/DEPLOYMENT.md), made by the superuser."""
    _sql(binaries(), server.port, OS_USER, "postgres",
         [f"CREATE ROLE {owner} LOGIN PASSWORD '{password}'", f"CREATE DATABASE {name} OWNER {owner}"])


@dataclass(frozen=True)
class Database(Server):
    """A database of its own on the worker's server, for a test whose catalog must start empty."""

    name: str = DATABASE

    def warehouse(self, user: str) -> str:
        return f"postgres:dbname={self.name} host={self.host} port={self.port} user={user}"


def new_database(server: Server, name: str) -> Database:
    """A new empty database on `server`, set up as docs/TEAM.md sets up the team's (the center
    owns it, the readers may read whatever it makes there)."""
    bindir = binaries()
    _sql(bindir, server.port, OS_USER, "postgres", [f"CREATE DATABASE {name} OWNER {WRITER}"])
    _sql(bindir, server.port, OS_USER, name, READER_SQL)  # as the superuser: the roles log in with passwords by now
    return Database(server.host, server.port, name)
