"""DuckDB over a lake on object storage, with nothing downloaded at run time.

DuckDB's own S3 support (the httpfs extension) is downloaded on first use, and no package
ships it for this DuckDB version. Instead each connection gets the lake's filesystem from
s3fs (an fsspec filesystem, a pinned dependency) through `register_filesystem`. s3fs checks
every ranged read against the object's ETag, so a reader racing an overwrite gets an error to
retry, never a mix of two versions.

Credentials come from the usual AWS chain (`AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`,
`AWS_PROFILE`, `~/.aws/credentials`); the endpoint and region from the lake URI
(`?endpoint_override=host:port&scheme=http&region=...`) or `AWS_ENDPOINT_URL`, `AWS_REGION`.
"""

import os
from urllib.parse import parse_qs

from warehouse.store import is_remote

# fail at once instead of trying to download httpfs when something asks for it
NO_DOWNLOADS = {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}


def root_uri(lake: str) -> str:
    """The lake's URI as paths inside views name it: no query string."""
    return lake.split("?", 1)[0].rstrip("/")


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


def reader_filesystem(lake: str):
    import s3fs

    url, region = endpoint(lake)
    client = {"region_name": region} if region else {}
    return s3fs.S3FileSystem(endpoint_url=url, client_kwargs=client)


def attach_lake(con, lake) -> None:
    """Let this connection read the lake (nothing to do for a directory)."""
    if is_remote(lake):
        con.register_filesystem(reader_filesystem(lake))
