"""Incremental reading of Claude Code transcripts, which are append-only JSONL files.

For each file the cache keeps the byte offset just past the last COMPLETE line and the records
parsed up to there, so the next run reads only the bytes appended since. The cache is trusted
only while the file is visibly the same one grown longer: same inode, not shorter than the
offset, and the same bytes at its head and just before the offset. Otherwise it is read again
from 0. A last line without its newline may still be being written: it is never consumed (the
offset stops before it), but it is returned for this run, parsed or as a bad line.
"""

import hashlib
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path

from transforms import jsontext
from transforms.atomic import replace_file

CACHE_VERSION = 2  # 2: the count of lines that are not UTF-8
HEAD_BYTES = 4096  # the head that must not change for an append-only file
TAIL_BYTES = 4096  # and the bytes just before the offset


@dataclass
class FileRead:
    """One file's lines: parsed records and bad lines, both with their 1-based line number."""

    rel: str  # path relative to the project directory
    records: list[tuple[int, dict]] = field(default_factory=list)
    bad: list[tuple[int, str, str]] = field(default_factory=list)  # (line, raw text, why)
    read_from: int = 0  # byte offset this run started reading at (0: a full read)
    offset: int = 0  # byte offset past the last complete line
    from_cache_only: bool = False  # the file is gone: its records come from the cache
    not_utf8: int = 0  # lines holding bytes that are not UTF-8 (read with U+FFFD in their place)
    inode: tuple[int, int] | None = None  # (device, inode) of the file it was read from, when cached
    # of `bad` and `not_utf8`, those of lines an earlier run read (kept in the cache): it said them
    bad_before: int = 0
    not_utf8_before: int = 0
    lines_before: int = 0  # its lines up to this number were read by an earlier run, which said their notes
    cached: "_Cached | None" = field(default=None, repr=False, compare=False)  # as loaded (cached_files)


@dataclass
class _Cached:
    version: int
    rel: str
    inode: tuple[int, int]
    offset: int
    lines: int  # line number of the last consumed line
    head_sha: str
    tail_sha: str
    records: list
    bad: list
    not_utf8: int = 0


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def head_digest(fd: int, offset: int) -> str:
    """The digest of a file's first bytes up to `offset` (at most HEAD_BYTES): an append-only
    file grown past `offset` keeps it."""
    return _sha(os.pread(fd, min(HEAD_BYTES, offset), 0))


def cache_name(rel: str) -> str:
    """The name of a file's cache in the cache dir's `files/`."""
    return f"{_sha(rel.encode('utf-8', 'surrogateescape'))[:24]}.pkl"


def _cache_file(cache_dir: Path, rel: str) -> Path:
    return cache_dir / "files" / cache_name(rel)


def _load(path: Path) -> _Cached | None:
    try:
        with open(path, "rb") as fh:
            cached = pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError):
        return None  # no cache, or one from another version: read from 0
    return cached if isinstance(cached, _Cached) and cached.version == CACHE_VERSION else None


def _save(path: Path, cached: _Cached) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, pickle.dumps(cached, protocol=pickle.HIGHEST_PROTOCOL))


def _still_valid(cached: _Cached | None, fd: int, st: os.stat_result) -> bool:
    if cached is None or cached.inode != (st.st_dev, st.st_ino) or st.st_size < cached.offset:
        return False
    tail_at = max(0, cached.offset - TAIL_BYTES)
    tail = os.pread(fd, cached.offset - tail_at, tail_at)
    return head_digest(fd, cached.offset) == cached.head_sha and _sha(tail) == cached.tail_sha


def _text(raw: bytes) -> tuple[str, bool]:
    """The line as text, and whether it held bytes that are not UTF-8 (replaced by U+FFFD)."""
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace"), True


def parse_line(raw: bytes) -> tuple[dict | None, str | None]:
    """A record, or None and why not."""
    return jsontext.parse_object(_text(raw)[0].rstrip("\r\n"))


def _add(out: FileRead, lineno: int, raw: bytes) -> None:
    if not raw.strip():
        return
    text, not_utf8 = _text(raw)
    out.not_utf8 += not_utf8
    record, error = jsontext.parse_object(text.rstrip("\r\n"))
    if record is not None:
        out.records.append((lineno, record))
    else:
        out.bad.append((lineno, text.rstrip("\r\n"), error))


def _store(cache_path: Path, fd: int, st: os.stat_result, rel: str, offset: int, lineno: int,
           out: FileRead) -> None:
    tail_at = max(0, offset - TAIL_BYTES)
    entry = _Cached(CACHE_VERSION, rel, (st.st_dev, st.st_ino), offset, lineno, head_digest(fd, offset),
                    _sha(os.pread(fd, offset - tail_at, tail_at)), list(out.records), list(out.bad), out.not_utf8)
    try:
        _save(cache_path, entry)
    except OSError:
        pass  # no cache this time: the next run reads the file whole again


_LOAD = object()  # read_jsonl's `loaded` when the caller did not load the cache


def read_jsonl(path: Path, rel: str, cache_dir: Path | None, *, fresh: bool = False, loaded=_LOAD,
               limit: int | None = None) -> FileRead:
    """Every line of one transcript, reading only what was appended since the cached offset
    (`fresh`: from its first byte, whatever the cache holds: a full refresh, after an edit the
    checks of an appended file cannot see). `loaded`: its cache as the caller loaded it already
    (`FileRead.cached` of cached_files; None: it has none). `limit`: the lines that end within
    its first `limit` bytes only (the rest is left, unread, to the next read)."""
    cache_path = _cache_file(cache_dir, rel) if cache_dir else None
    with open(path, "rb") as fh:
        fd = fh.fileno()
        st = os.fstat(fd)
        cached = None if fresh or not cache_path else _load(cache_path) if loaded is _LOAD else loaded
        # a cache past the limit (another run read further since this one's discovery) holds
        # lines this read must not see: read from the start, up to the limit
        if not _still_valid(cached, fd, st) or (limit is not None and cached.offset > limit):
            cached = None
        out = FileRead(rel, list(cached.records) if cached else [], list(cached.bad) if cached else [],
                       not_utf8=cached.not_utf8 if cached else 0, bad_before=len(cached.bad) if cached else 0,
                       not_utf8_before=cached.not_utf8 if cached else 0, lines_before=cached.lines if cached else 0)
        out.read_from = offset = cached.offset if cached else 0
        lineno = cached.lines if cached else 0
        fh.seek(offset)
        partial = None
        for raw in fh:
            if limit is not None and offset + len(raw) > limit:
                break
            if not raw.endswith(b"\n"):
                partial = raw  # still being written, or cut short by a crash: not consumed
                break
            lineno += 1
            offset += len(raw)
            _add(out, lineno, raw)
        out.offset = offset
        if cache_path and (cached is None or offset != cached.offset):
            _store(cache_path, fd, st, rel, offset, lineno, out)
    if partial is not None and partial.strip():  # this run sees it; the cache does not keep it
        record, _ = parse_line(partial)
        if record is not None:
            out.records.append((lineno + 1, record))
        else:
            out.bad.append((lineno + 1, partial.decode("utf-8", "replace"), jsontext.UNFINISHED))
    return out


def cached_files(cache_dir: Path | None, rels=None, names=None) -> list[FileRead]:
    """Every file the cache knows (`rels`: those of them; `names`: those cached under these
    names), as last read (for transcripts Claude Code has since deleted)."""
    if cache_dir is None or not (cache_dir / "files").is_dir():
        return []
    out = []
    if rels is not None:
        paths = [_cache_file(cache_dir, r) for r in rels]
    else:
        paths = sorted(p for p in (cache_dir / "files").glob("*.pkl") if names is None or p.name in names)
    for path in paths:
        cached = _load(path)
        if cached is not None and (rels is None or cached.rel in rels):
            out.append(FileRead(cached.rel, list(cached.records), list(cached.bad), cached.offset,
                                cached.offset, from_cache_only=True, not_utf8=cached.not_utf8, inode=cached.inode,
                                bad_before=len(cached.bad), not_utf8_before=cached.not_utf8,
                                lines_before=cached.lines, cached=cached))
    return out
