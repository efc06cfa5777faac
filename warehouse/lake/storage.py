"""Where the lake's files live: a local (or shared) directory, or S3-compatible object storage.

Both offer the same few operations on paths relative to the lake root, and both replace a file
atomically: locally a staged, fsynced file is renamed into place; on object storage a PUT
replaces the whole object, so readers see the old object or the new one, never half of one.
Object storage goes through pyarrow's own S3 filesystem: no extra client library.

    s3://bucket/prefix                         credentials and region from the usual AWS_* env
    s3://bucket/prefix?endpoint_override=http://127.0.0.1:9000   an S3-compatible server
    $AWS_ENDPOINT_URL                          the same (pyarrow itself does not read it)

Readers query the tables through the catalog: see warehouse.catalog.build.
"""

from __future__ import annotations  # `list` is also a method name below

import os
import re
import shutil
import time
import uuid
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

REMOTE_SCHEMES = ("s3://",)


def is_remote(lake) -> bool:
    return isinstance(lake, str) and lake.startswith(REMOTE_SCHEMES)


# The parameters pyarrow's S3 URI takes (S3Options::FromUri; tests/test_lake_uri.py asks pyarrow).
# Any other is an error there, and may be a credential (`access_key=`, `session_token=`): it is
# refused before pyarrow sees it, and its value is never printed.
LAKE_PARAMETERS = ("endpoint_override", "scheme", "region", "allow_bucket_creation", "allow_bucket_deletion",
                   "allow_delayed_open", "tls_ca_file_path", "tls_ca_dir_path", "tls_verify_certificates")
# a parameter named like one of these is a credential written into the URI
_SECRET_NAMES = re.compile(r"key|secret|token|password|passwd|credential|signature|session", re.I)


class CredentialsInURI(ValueError):
    """A lake URI that holds credentials, or a parameter object storage does not take (which may be
    one): refused before anything opens, prints or stores it (config.load_layout: exit 1)."""


class UnknownLakeParameter(CredentialsInURI):
    """A query parameter not in LAKE_PARAMETERS (`?endpoint=`, `&session_token=`): refused where a
    URI with credentials is, as it may be one."""


class NotALakeURI(CredentialsInURI):
    """A lake that looks like a URI of another scheme (`S3://`, `s3:/`, `s3a://`, `gs://`): it
    was taken as a folder, and wrote an unredacted local lake under `<cwd>/S3:/...`. Refused where
    a URI with credentials is, and masked as one (it may hold some)."""


def lake_place(lake: str) -> str:
    """A remote lake as the place it is: its bucket and prefix at its endpoint, however the endpoint
    is given (in the URI, or $AWS_ENDPOINT_URL as the AWS tools read it) and whatever else the URI
    says of how to reach it (scheme, region). Two spellings of one lake are one place: a machine's
    state of it is one (a team lead's trial landed every source again for the endpoint written in
    the URI, after landing them with it in the variable)."""
    from warehouse.lake.duckdb_settings import endpoint as lake_endpoint

    where = lake.split("?", 1)[0].rstrip("/")
    url = lake_endpoint(lake)[0]
    return f"{where} at {masked_url(url.rstrip('/')) if url else 'the AWS default endpoint'}"


def _endpoint_name(lake: str) -> str:
    if "endpoint_override=" in lake or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"):
        from warehouse.lake.duckdb_settings import endpoint as lake_endpoint

        return lake_endpoint(lake)[0]
    return "the AWS default endpoint"


class LakeUnreachable(OSError):
    """Object storage that does not answer, or refuses (access denied): said once, naming the
    endpoint, not once per source (pipelines.cli: `error: ...`, exit 1)."""

    def __init__(self, lake: str, exc: Exception):
        if isinstance(exc, LakeUnreachable):  # said already, by the store
            super().__init__(str(exc))
            return
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        refused = _CREDENTIALS_REFUSED.search(reason)
        verb = "read" if refused or re.search(r"ACCESS_DENIED|AccessDenied|\b403\b", reason) else "reach"  # it answered: no
        hint = (" (the store refused the credentials this machine has: see $AWS_PROFILE, ~/.aws/credentials, "
                "$AWS_ACCESS_KEY_ID)") if refused else ""
        super().__init__(f"cannot {verb} the lake {masked(lake)} at {_endpoint_name(lake)}: {reason}{hint}")


# the store answered, and refused the key, its signature or its session token: not "cannot reach"
_CREDENTIALS_REFUSED = re.compile(r"INVALID_ACCESS_KEY_ID|InvalidAccessKeyId|SIGNATURE_DOES_NOT_MATCH|"
                                  r"SignatureDoesNotMatch|EXPIRED_TOKEN|ExpiredToken|INVALID_TOKEN|InvalidToken|"
                                  r"\b401\b")


class NoSuchBucket(LakeUnreachable):
    """The lake's bucket does not exist: said, naming it (pyarrow lists nothing there, which
    looked like an empty lake: "merged 0 sources", exit 0)."""

    def __init__(self, lake: str, bucket: str):
        OSError.__init__(self, f"the lake {masked(lake)} is in the bucket {bucket!r}, which does not exist at "
                               f"{_endpoint_name(lake)}: create it, or correct the lake's URI or endpoint")


class NotObjectStorage(LakeUnreachable):
    """The endpoint answers HTTP, but not as S3 (a web server, the console's port instead of the
    API's): pyarrow takes its 404s for a bucket that does not exist, which was said as that."""

    def __init__(self, lake: str, url: str, what: str):
        OSError.__init__(self, f"the lake {masked(lake)}'s endpoint {url} answered, but not as S3 object storage "
                               f"({what}): is it the S3 API's address and port?")

    @classmethod
    def probed(cls, lake: str, bucket: str) -> "NotObjectStorage | None":
        """Asked only once pyarrow found no bucket at a named endpoint: S3 answers any request
        for a bucket, signed or not, with an XML error or listing; anything else is not S3."""
        import urllib.error
        import urllib.request

        from warehouse.lake.duckdb_settings import endpoint as lake_endpoint

        url = lake_endpoint(lake)[0]
        if not url:
            return None
        try:
            with urllib.request.urlopen(f"{url.rstrip('/')}/{bucket}?list-type=2&max-keys=0", timeout=5) as r:
                status, kind, body = r.status, r.headers.get("Content-Type") or "", r.read(512)
        except urllib.error.HTTPError as exc:
            status, kind, body = exc.code, exc.headers.get("Content-Type") or "", exc.read(512)
        except (OSError, ValueError):  # no answer over plain HTTP(S) at all: pyarrow's finding stands
            return None
        if b"<?xml" in body[:64] or body.lstrip().startswith((b"<Error", b"<ListBucketResult")) or "xml" in kind:
            return None
        return cls(lake, url, f"HTTP {status}, {kind.split(';')[0] or 'no content type'}")


class ReadFromAnotherLake(LakeUnreachable):
    """A reader's home (its warehouse merged from a team's lake) asked to merge its own lake: that
    would replace the team's rows (warehouse.catalog.merge._refuse_replacing)."""

    def __init__(self, message: str):
        OSError.__init__(self, message)


class EmptyLake(LakeUnreachable):
    """The lake lists no landing file, while the warehouse holds sources merged from it: a wrong
    bucket, prefix or endpoint, or a bucket emptied. Not taken as every source removed."""

    def __init__(self, message: str):
        OSError.__init__(self, message)


def under(lake, rel: str) -> str:
    """A path below a lake, written as the lake is: before an s3:// URI's query
    (`s3://b/lake/export?endpoint_override=...`, not `s3://b/lake?endpoint_override=.../export`)."""
    where, q, query = str(lake).partition("?")
    return f"{where.rstrip('/')}/{rel}{q}{query}"


def masked(uri: str) -> str:
    """The URI safe to print: any `key:secret@` replaced by `***@` (a secret may hold a `/`, as
    half of AWS's do), and the value of any query parameter not in LAKE_PARAMETERS by `***`."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return uri
    where, q, query = rest.partition("?")
    host = where.split("/", 1)[0]
    if "@" in host:
        where = "***@" + where[host.rindex("@") + 1:]
    elif ":" in host:  # no bucket name holds a `:`: `key:secret` whose secret holds a `/`, up to its `@`
        at = where.find("@")
        where = "***@" + where[at + 1:] if at >= 0 else "***"
    if query:
        query = "&".join(p if p.partition("=")[0] in LAKE_PARAMETERS or "=" not in p else p.partition("=")[0] + "=***"
                         for p in query.split("&"))
    return f"{scheme}{sep}{where}{q}{query}"


def refuse_credentials(uri: str) -> None:
    """Keys written into a lake URI would be printed, logged and stored with it: refused. So is a
    query parameter object storage does not take (pyarrow's own error is a traceback), naming it
    and the ones it takes, its value masked."""
    from urllib.parse import parse_qsl

    where = uri.split("?", 1)[0]
    if masked(where) != where:
        raise CredentialsInURI(
            f"the lake URI {masked(uri)} holds credentials; give them as AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), never in the URI")
    query = uri.split("?", 1)[1] if "?" in uri else ""
    unknown = [name for name, _ in parse_qsl(query, keep_blank_values=True) if name not in LAKE_PARAMETERS]
    if not unknown:
        return
    secret = [name for name in unknown if _SECRET_NAMES.search(name)]
    if secret:
        raise UnknownLakeParameter(
            f"the lake URI {masked(uri)} holds credentials ({', '.join(secret)}); give them as AWS_ACCESS_KEY_ID, "
            "AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (or AWS_PROFILE), never in the URI")
    from warehouse.lake.setting_names import close_to

    hints = [name + close_to(name, {p: p for p in LAKE_PARAMETERS}) for name in unknown]
    raise UnknownLakeParameter(
        f"the lake URI {masked(uri)} has a parameter object storage does not take: {', '.join(hints)}; "
        f"it takes {', '.join(LAKE_PARAMETERS)} (an S3-compatible server: "
        "?endpoint_override=host:port&scheme=http, or $AWS_ENDPOINT_URL)")


# a scheme of two or more characters, then `:/`; a Windows drive (`C:\x`, `C:/x`) has one letter
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):/+")


def refuse_other_scheme(lake: str) -> None:
    """A lake that is not `s3://` but looks like a URI (`S3://`, `s3:/`, `s3a://`, `gs://`) is
    refused, naming the `s3://` one it likely meant: a folder by that name is never meant."""
    found = _SCHEME.match(lake)
    if not found:
        return
    rest = lake[found.end():]
    if found[1].lower() in ("s3", "s3a", "s3n"):
        shown = lake[:found.end()] + masked(f"s3://{rest}")[len("s3://"):]
        hint = f"did you mean {masked(f's3://{rest}')}?"
    else:
        shown = masked_url(lake)
        hint = ("object storage is s3://bucket/prefix; an S3-compatible one also takes "
                "?endpoint_override=host:port or $AWS_ENDPOINT_URL")
    raise NotALakeURI(f"the lake {shown!r} is not a folder or an s3:// URI ({hint})")


def masked_url(url: str) -> str:
    """A URL other than an s3:// lake's (an endpoint, a lake of another scheme) safe to print:
    whatever precedes its last `@` (`user:password@`; a password may hold a `/`) replaced by
    `***@`, and the value of every query parameter by `***` (a signature, a token)."""
    found = _SCHEME.match(url)
    head, rest = (url[:found.end()], url[found.end():]) if found else ("", url)
    where, q, query = rest.partition("?")
    if "@" in where:
        where = "***@" + where[where.rindex("@") + 1:]
    if query:
        query = "&".join(p.partition("=")[0] + "=***" if "=" in p else p for p in query.split("&"))
    return f"{head}{where}{q}{query}"


CHUNK = 8 << 20  # bytes a whole file is copied in (`put_file`, `get_file`): a search index may be large


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

    def _staging_file(self) -> Path:
        self.staging.mkdir(parents=True, exist_ok=True)
        return self.staging / f"{os.getpid()}-{uuid.uuid4().hex}.tmp"  # pid: leftovers of dead runs are found

    def _stage(self, rel: str, data: bytes) -> Path:
        tmp = self._staging_file()
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())  # the rename must never publish a file whose bytes are not on disk
        return tmp

    def put_file(self, rel: str, path: Path) -> None:
        """A local file put at `rel` whole (staged, then renamed: readers see the old file or the
        new one), its bytes streamed, never held in memory."""
        tmp = self._staging_file()
        try:
            with open(path, "rb") as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst, CHUNK)
                dst.flush()
                os.fsync(dst.fileno())
            (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, self.root / rel)
        finally:
            tmp.unlink(missing_ok=True)

    def get_file(self, rel: str, path: Path) -> None:
        """The file at `rel` copied to the local `path` (FileNotFoundError when it is not there)."""
        shutil.copyfile(self.root / rel, path)

    def delete(self, rel: str) -> None:
        path = self.root / rel
        path.unlink(missing_ok=True)
        for parent in (path.parent, path.parent.parent):  # tidy empty project=/date= dirs
            try:
                parent.rmdir()
            except OSError:
                break

    def list(self, prefix: str = "", suffix: str = ".parquet") -> list[str]:
        base = self.root / prefix
        if not base.is_dir():
            return []
        return sorted(str(p.relative_to(self.root)) for p in base.rglob(f"*{suffix}") if "_staging" not in p.parts)

    def uri(self, rel: str) -> str:
        return str(self.root / rel)

    def copy(self, src: str, dst: str) -> None:
        """`dst` made the same file as `src` without copying its bytes (a hard link), where the
        file system allows it; files here are replaced, never changed in place."""
        target = self.root / dst
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(self.root / src, target)
        except FileExistsError:
            target.unlink()
            os.link(self.root / src, target)
        except OSError:  # no hard links on this file system
            self.put_all({dst: self.read(src)})

    def delete_tree(self, prefix: str) -> None:
        shutil.rmtree(self.root / prefix, ignore_errors=True)

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

        refuse_credentials(uri)  # before pyarrow, whose errors print the URI
        self.lake = uri
        self.uri_root = uri.split("?", 1)[0].rstrip("/")
        try:  # without a region in the URI, pyarrow asks the bucket's
            self.fs, self.base = fs.FileSystem.from_uri(_with_endpoint(uri))
        except OSError as exc:
            raise LakeUnreachable(uri, exc) from None
        self.fs = _with_timeouts(self.fs, uri)
        self.base = self.base.rstrip("/")
        self._bucket_seen = False
        self._dead: tuple[float, LakeUnreachable] | None = None  # (until when, why)

    @contextmanager
    def _request(self):
        """One call to the store. A store found not answering fails every call of this process at
        once, for DEAD_FOR seconds, with the first one's LakeUnreachable: each would otherwise wait
        out pyarrow's three tries again, source after source (docs/BENCHMARKS.md, "Figures behind
        the code's choices")."""
        if self._dead and time.monotonic() < self._dead[0]:
            raise LakeUnreachable(self.lake, self._dead[1])
        try:
            yield
        except LakeUnreachable:
            raise
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) or not _NOT_ANSWERING.search(str(exc)):
                raise
            dead = LakeUnreachable(self.lake, exc)
            self._dead = (time.monotonic() + DEAD_FOR, dead)
            raise dead from None

    def _key(self, rel: str) -> str:
        return f"{self.base}/{rel}"

    def size(self, rel: str) -> int | None:
        from pyarrow import fs

        with self._request():
            info = self.fs.get_file_info(self._key(rel))
        return info.size if info.type == fs.FileType.File else None

    def read(self, rel: str) -> bytes:
        with self._request(), self.fs.open_input_stream(self._key(rel)) as fh:
            return fh.read()

    def put_all(self, items: dict[str, bytes]) -> None:
        for rel, data in items.items():
            with self._request(), self.fs.open_output_stream(self._key(rel)) as fh:  # one PUT: the object appears whole
                fh.write(data)

    def put_file(self, rel: str, path: Path) -> None:
        """A local file put at `rel` as one object, streamed in CHUNK pieces. An upload cut short
        may still be completed, truncated (pyarrow's stream completes it on close): name such a
        key for readers only once this returns (warehouse.catalog.team_index)."""
        with open(path, "rb") as src, self._request(), self.fs.open_output_stream(self._key(rel)) as dst:
            shutil.copyfileobj(src, dst, CHUNK)

    def get_file(self, rel: str, path: Path) -> None:
        """The object at `rel` copied to the local `path` (FileNotFoundError when it is not there)."""
        with self._request(), self.fs.open_input_stream(self._key(rel)) as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)

    def delete(self, rel: str) -> None:
        try:
            with self._request():
                self.fs.delete_file(self._key(rel))
        except FileNotFoundError:
            pass

    def _files(self, prefix: str, suffix: str = ".parquet") -> list:
        """The objects under `prefix`, in one listing. A store that does not answer is one
        LakeUnreachable naming its endpoint; an empty listing of a bucket that does not exist is
        NoSuchBucket (pyarrow lists nothing there), not an empty lake."""
        from pyarrow import fs

        selector = fs.FileSelector(self._key(prefix).rstrip("/"), recursive=True, allow_not_found=True)
        try:
            with self._request():
                found = self.fs.get_file_info(selector)
        except OSError as exc:  # denied, too: said as one error naming the store
            raise LakeUnreachable(self.lake, exc) from None
        if not found and not self._bucket_seen:
            bucket = self.base.split("/", 1)[0]
            try:
                missing = self.fs.get_file_info(bucket).type == fs.FileType.NotFound
            except OSError:  # a HeadBucket this identity may not make: the listing answered, so go on
                missing = False
            if missing:
                raise NotObjectStorage.probed(self.lake, bucket) or NoSuchBucket(self.lake, bucket)
            self._bucket_seen = True
        return [i for i in found if i.type == fs.FileType.File and i.path.endswith(suffix)]

    def check_bucket(self) -> None:
        """The lake's bucket, asked for (HeadBucket): NoSuchBucket when the store says it does
        not exist, LakeUnreachable when the store does not answer; an identity that may not ask
        is let through (its listing says more)."""
        from pyarrow import fs

        bucket = self.base.split("/", 1)[0]
        try:
            with self._request():
                missing = self.fs.get_file_info(bucket).type == fs.FileType.NotFound
        except LakeUnreachable:  # not answering (_request)
            raise
        except OSError:  # an identity that may not ask: the merge's listing says more
            return
        if missing:
            raise NotObjectStorage.probed(self.lake, bucket) or NoSuchBucket(self.lake, bucket)
        self._bucket_seen = True

    def list(self, prefix: str = "", suffix: str = ".parquet") -> list[str]:
        start = len(self.base) + 1
        return sorted(i.path[start:] for i in self._files(prefix, suffix))

    def uri(self, rel: str) -> str:
        return f"{self.uri_root}/{rel}"

    def copy(self, src: str, dst: str) -> None:
        """A server-side copy (S3's CopyObject): the bytes never leave the store."""
        with self._request():
            self.fs.copy_file(self._key(src), self._key(dst))

    def delete_tree(self, prefix: str) -> None:
        """Every object under `prefix`, in batches (deleting them one by one left a directory
        marker object behind each last one)."""
        try:
            with self._request():
                self.fs.delete_dir(self._key(prefix))
        except FileNotFoundError:
            pass

    def versions(self, prefix: str) -> dict[str, str]:
        """Every Parquet object under `prefix` with its version (size and mtime): one listing."""
        start = len(self.base) + 1
        return {i.path[start:]: f"{i.size}-{i.mtime_ns}" for i in self._files(prefix)}


# pyarrow's (the AWS SDK's) words for a store that did not answer, after its own three tries
_NOT_ANSWERING = re.compile(r"NETWORK_CONNECTION|curlCode|Could not connect|Connection refused|Timeout was reached")
DEAD_FOR = 60.0  # seconds a store that did not answer is not asked again (per process)


# An endpoint that takes the connection and never answers waited out the SDK's own timeouts on each
# of pyarrow's three tries: minutes, then curlCode 28 (docs/BENCHMARKS.md, "Figures behind the
# code's choices"). Connecting may take 5 s, and a request may stall (no byte moving, not a slow
# transfer) 10 s: about 30 s in all before the one error.
CONNECT_TIMEOUT, STALL_TIMEOUT = 5.0, 10.0
# parameters pyarrow's URI takes and its S3FileSystem constructor does not: a store opened with
# them keeps the SDK's timeouts rather than lose them
_URI_ONLY = ("tls_verify_certificates=", "tls_ca_dir_path=")


def _with_timeouts(store, uri: str):
    """The S3 filesystem pyarrow made from the URI, made again with its own options and ours."""
    from pyarrow import fs

    if not isinstance(store, fs.S3FileSystem) or any(p in uri for p in _URI_ONLY):
        return store
    _, (options,) = store.__reduce__()  # every option from_uri set, as pickling carries them
    return fs.S3FileSystem(**{**options, "connect_timeout": CONNECT_TIMEOUT, "request_timeout": STALL_TIMEOUT})


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


def release_object_stores() -> None:
    """At the end of a short script that read a lake on object storage: its stores dropped, then
    pyarrow's S3 client shut down (pyarrow asks for finalize_s3 before a program ends), in that
    order: finalized while a store was still held, the script aborted at exit ("terminate called
    without an active exception", status 134). Left to the interpreter's end, a trial saw
    deploy/trino/ddl.py abort so in 3 runs of 10."""
    import gc

    _object_store.cache_clear()
    gc.collect()
    from pyarrow import fs

    fs.finalize_s3()


def open_store(lake, staging: Path | None = None):
    if is_remote(lake):
        return _object_store(lake)
    return LocalStore(Path(lake), staging or Path(lake) / "_staging")
