"""The team's DuckLake catalog in PostgreSQL: one writer (the center) commits to it, any number
of readers attach its current snapshot read-only, and the tables' Parquet is on the lake's
storage (DuckLake's DATA_PATH: `<lake>/main/<table>/...`).

    warehouse = "postgres:dbname=agentlake host=db.internal port=5432 user=center"

The spelling is DuckLake's own (`ATTACH 'ducklake:postgres:<libpq words>'`). Credentials come
from libpq's environment (PGPASSWORD, PGPASSFILE or ~/.pgpass, PGUSER, PGSSLMODE...), never from
the setting: a `password=` in it is refused before anything opens, prints or stores it.
"""

import os
import re
from dataclasses import dataclass

PREFIX = "postgres:"
# libpq words that hold a secret: refused in the setting (the environment or ~/.pgpass has them)
_SECRET_WORDS = re.compile(r"(?:^|[\s?&])(password|sslpassword)\s*=", re.I)


class PostgresCatalogError(ValueError):
    """A PostgreSQL catalog setting that cannot be used (a password written into it)."""


class CatalogUnreachable(OSError):
    """The PostgreSQL server did not answer, or refused this role: said once, naming the host."""


def is_postgres(warehouse) -> bool:
    return isinstance(warehouse, PostgresCatalog) or (
        isinstance(warehouse, str) and warehouse.lower().startswith((PREFIX, "postgresql://")))


@dataclass(frozen=True)
class PostgresCatalog:
    """The catalog's connection words (libpq's `key=value`, or a `postgresql://` URI without a
    password). Stands where a DuckDB file's path does (Layout.warehouse): it always "exists"
    (the server says otherwise when attached), and prints as the setting, which holds no secret."""

    words: str

    @classmethod
    def parse(cls, setting: str) -> "PostgresCatalog":
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

    def exists(self) -> bool:
        return True

    def is_file(self) -> bool:
        return True


def unreachable(catalog: PostgresCatalog, exc: Exception) -> CatalogUnreachable:
    """DuckDB's long attach error, cut to libpq's reason, naming the host (no password is in it:
    the words hold none, and libpq does not repeat one)."""
    text = " ".join(str(exc).split())
    reason = re.sub(r'^.*?Unable to connect to Postgres at "[^"]*": ', "", text)
    hint = (" (check $PGUSER/$PGPASSWORD or ~/.pgpass for this role)" if "authentication" in reason
            else " (is the server running, and its address right?)" if "connect" in reason.lower() else "")
    return CatalogUnreachable(f"cannot open the PostgreSQL catalog at {catalog.host}: {reason}{hint}")


def data_path(lake) -> str:
    """Where the catalog's tables go: the lake itself (its `main/` folder), without the URI's
    query (an endpoint is the connection's, from $AWS_ENDPOINT_URL)."""
    return str(lake).split("?", 1)[0].rstrip("/") + "/"


def s3_secret_sql(env=os.environ) -> str | None:
    """A temporary DuckDB secret for the tables on S3, from the usual AWS variables (none: the
    httpfs extension's own defaults). Temporary: DuckDB writes persistent ones to disk."""
    from warehouse.lake.duckdb_settings import endpoint

    def literal(text):
        return "'" + str(text).replace("'", "''") + "'"

    url, region = endpoint("", env)
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
