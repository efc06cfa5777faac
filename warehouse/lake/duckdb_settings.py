"""Settings every DuckDB connection shares, and where an object-storage lake is.

No connection downloads anything at run time (`NO_DOWNLOADS`): the extensions come from pinned
packages (warehouse.ducklake). The lake's landing files on S3 are read through pyarrow
(warehouse.lake.storage); readers query the catalog's tables, which are on local disk.

Credentials come from the usual AWS chain (`AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`,
`AWS_PROFILE`, `~/.aws/credentials`); the endpoint and region from the lake URI
(`?endpoint_override=host:port&scheme=http&region=...`) or `AWS_ENDPOINT_URL`, `AWS_REGION`.
"""

import os
from urllib.parse import parse_qs

# fail at once instead of trying to download an extension when something asks for one
NO_DOWNLOADS = {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
THREADS_VARIABLE = "AGENTLAKE_THREADS"


class BadThreads(ValueError):
    """AGENTLAKE_THREADS is not a whole number of at least 1."""


def connection_config(env=os.environ) -> dict:
    """The settings every agentlake connection opens with: no downloads, and at most
    $AGENTLAKE_THREADS threads when it is set (a server shared with people's work, a cron job
    that should stay in the background, the test suite's workers on a small machine); DuckDB's
    default, one per core, otherwise."""
    wanted = (env.get(THREADS_VARIABLE) or "").strip()
    if not wanted:
        return dict(NO_DOWNLOADS)
    if not wanted.isdigit() or int(wanted) < 1:
        raise BadThreads(f"{THREADS_VARIABLE}={wanted!r}: give a whole number of threads, at least 1, "
                         "or unset it for one per core")
    return {**NO_DOWNLOADS, "threads": wanted}


def endpoint(lake: str, env=os.environ) -> tuple[str | None, str | None]:
    """(endpoint URL, region) for the lake."""
    query = {k: v[-1] for k, v in parse_qs(lake.split("?", 1)[1] if "?" in lake else "").items()}
    url = None
    if query.get("endpoint_override"):
        host = query["endpoint_override"]
        url = host if "://" in host else f"{query.get('scheme', 'https')}://{host}"
    url = url or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    region = query.get("region") or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    return url, region
