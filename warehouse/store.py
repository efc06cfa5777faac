"""Where the lake's files live: a local (or shared) directory, or S3-compatible object storage.

Both offer the same few operations on paths relative to the lake root, and both replace a file
atomically: locally a staged, fsynced file is renamed into place; on object storage a PUT
replaces the whole object, so readers see the old object or the new one, never half of one.
Object storage goes through pyarrow's own S3 filesystem: no extra client library.

    s3://bucket/prefix                         credentials and region from the usual AWS_* env
    s3://bucket/prefix?endpoint_override=http://127.0.0.1:9000   an S3-compatible server
    $AWS_ENDPOINT_URL                          the same (pyarrow itself does not read it)

Readers query the tables through the catalog: see warehouse.views.
"""

from __future__ import annotations  # `list` is also a method name below

import os
import uuid
from functools import lru_cache
from pathlib import Path

REMOTE_SCHEMES = ("s3://",)


def is_remote(lake) -> bool:
    return isinstance(lake, str) and lake.startswith(REMOTE_SCHEMES)


class CredentialsInURI(ValueError):
    pass


class LakeUnreachable(OSError):
    """Object storage that does not answer: said once, naming the endpoint, not once per source."""

    def __init__(self, lake: str, exc: Exception):
        endpoint = "the AWS default endpoint"
        if "endpoint_override=" in lake or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"):
            from warehouse.lakefs import endpoint as lake_endpoint

            endpoint = lake_endpoint(lake)[0]
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        super().__init__(f"cannot reach the lake {masked(lake)} at {endpoint}: {reason}")


def masked(uri: str) -> str:
    """The URI with any `user:secret@` replaced by `***@`: safe to print."""
    scheme, sep, rest = uri.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}{sep}***@{host.rsplit('@', 1)[1]}{slash}{path}" if sep and "@" in host else uri


def refuse_credentials(uri: str) -> None:
    """Keys written into a lake URI would be printed, logged and stored with it: refused."""
    if masked(uri) != uri:
        raise CredentialsInURI(
            f"the lake URI {masked(uri)} holds credentials; give them as AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), never in the URI")


class LocalStore:
    def __init__(self, root: Path, staging: Path):
        self.root, self.staging = Path(root), Path(staging)

    def size(self, rel: str) -> int | None:
        try:
            return (self.root / rel).stat().st_size
        except OSError:
            return None

    def read(self, rel: str) -> bytes:
        return (self.root / rel).read_bytes()

    def put_all(self, items: dict[str, bytes]) -> None:
        """Stage every file first, so a full disk leaves the lake as it was; renames need no space."""
        staged = []
        try:
            for rel, data in items.items():
                staged.append((self._stage(rel, data), self.root / rel))
        except BaseException:
            for tmp, _ in staged:
                tmp.unlink(missing_ok=True)
            raise
        for tmp, path in staged:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, path)  # atomic: readers see the old file or the new one

    def _stage(self, rel: str, data: bytes) -> Path:
        self.staging.mkdir(parents=True, exist_ok=True)
        tmp = self.staging / f"{os.getpid()}-{uuid.uuid4().hex}.tmp"  # pid: leftovers of dead runs are found
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())  # the rename must never publish a file whose bytes are not on disk
        return tmp

    def delete(self, rel: str) -> None:
        path = self.root / rel
        path.unlink(missing_ok=True)
        for parent in (path.parent, path.parent.parent):  # tidy empty project=/date= dirs
            try:
                parent.rmdir()
            except OSError:
                break

    def list(self, prefix: str = "") -> list[str]:
        base = self.root / prefix
        if not base.is_dir():
            return []
        return sorted(str(p.relative_to(self.root)) for p in base.rglob("*.parquet") if "_staging" not in p.parts)

    def uri(self, rel: str) -> str:
        return str(self.root / rel)

    def versions(self, prefix: str) -> dict[str, str]:
        """Every Parquet file under `prefix` with its version (size and mtime), in one walk."""
        out = {}
        base = self.root / prefix
        for dirpath, _, names in os.walk(base):
            for name in names:
                if name.endswith(".parquet"):
                    st = os.stat(os.path.join(dirpath, name))
                    out[os.path.relpath(os.path.join(dirpath, name), self.root)] = f"{st.st_size}-{st.st_mtime_ns}"
        return out


class ObjectStore:
    def __init__(self, uri: str):
        from pyarrow import fs

        self.uri_root = uri.split("?", 1)[0].rstrip("/")
        self.fs, self.base = fs.FileSystem.from_uri(_with_endpoint(uri))
        self.base = self.base.rstrip("/")

    def _key(self, rel: str) -> str:
        return f"{self.base}/{rel}"

    def size(self, rel: str) -> int | None:
        from pyarrow import fs

        info = self.fs.get_file_info(self._key(rel))
        return info.size if info.type == fs.FileType.File else None

    def read(self, rel: str) -> bytes:
        with self.fs.open_input_stream(self._key(rel)) as fh:
            return fh.read()

    def put_all(self, items: dict[str, bytes]) -> None:
        for rel, data in items.items():
            with self.fs.open_output_stream(self._key(rel)) as fh:  # one PUT: the object appears whole
                fh.write(data)

    def delete(self, rel: str) -> None:
        try:
            self.fs.delete_file(self._key(rel))
        except FileNotFoundError:
            pass

    def list(self, prefix: str = "") -> list[str]:
        from pyarrow import fs

        selector = fs.FileSelector(self._key(prefix).rstrip("/"), recursive=True, allow_not_found=True)
        start = len(self.base) + 1
        return sorted(i.path[start:] for i in self.fs.get_file_info(selector)
                      if i.type == fs.FileType.File and i.path.endswith(".parquet"))

    def uri(self, rel: str) -> str:
        return f"{self.uri_root}/{rel}"

    def versions(self, prefix: str) -> dict[str, str]:
        """Every Parquet object under `prefix` with its version (size and mtime): one listing."""
        from pyarrow import fs

        selector = fs.FileSelector(self._key(prefix).rstrip("/"), recursive=True, allow_not_found=True)
        start = len(self.base) + 1
        return {i.path[start:]: f"{i.size}-{i.mtime_ns}" for i in self.fs.get_file_info(selector)
                if i.type == fs.FileType.File and i.path.endswith(".parquet")}


def _with_endpoint(uri: str) -> str:
    """pyarrow reads the endpoint from the URI; the AWS tools' own variable names it too."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if "endpoint_override=" in uri or not endpoint:
        return uri
    scheme = "http" if endpoint.startswith("http://") else "https"
    host = endpoint.split("://", 1)[-1].rstrip("/")
    sep = "&" if "?" in uri else "?"
    return f"{uri}{sep}endpoint_override={host}&scheme={scheme}"


@lru_cache(maxsize=8)
def _object_store(uri: str) -> ObjectStore:
    return ObjectStore(uri)  # one client per process and lake


def open_store(lake, staging: Path | None = None):
    if is_remote(lake):
        return _object_store(lake)
    return LocalStore(Path(lake), staging or Path(lake) / "_staging")
