"""A Claude Code project directory's transcripts in families, so that a project of thousands of
sessions is landed in buckets (transforms.bundle) and one grown transcript costs its family, not
its project.

A family is the files that share a session, a line or a request: a session with its sub-agents
(by path or by their `sessionId`), the sessions resumed from it (they replay its lines, same uuids
and `message.id`s) and its side files. Every rule of normalise.py that looks across files (which
copy of a request counts, which session owns a line, a root's cost over its sub-agents) looks only
inside one family, so the families of a project can be read, cached and landed apart and give the
project's rows.

The links are read from the transcripts' lines at discovery: a file whose size, mtime or inode
changed is read from where the last discovery stopped, and the index (`families.pkl`, beside the
reader's cache) keeps each file's links as 64-bit digests and its offset. A transcript Claude
Code deleted keeps its links and its family, as the reader's cache keeps its records (what the
cache holds and the index does not gives its links from its records). A family is named by its
first session's transcript; the ids its files had before (two families a later session joined)
are its `formerly`. The index also keeps the order the files were first found (`seen`): the
normaliser ranks an original before the copies that replay it by it, since their lines' times
alone cannot tell them apart once the original goes on after its resume.
"""

import hashlib
import os
import pickle
import stat
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from transforms.atomic import replace_file
from transforms.claude.normalise import session_of
from transforms.claude.reader import cache_name, cached_files, head_digest, parse_line
from transforms.sources import files_under, not_a_file

INDEX = "families.pkl"
INDEX_VERSION = 1


@dataclass
class _Entry:
    sig: tuple | None  # (size, mtime_ns, device, inode) of the copy read; None: not read
    keys: bytes = b""  # array('q') of the link digests
    offset: int = 0  # read up to here: past its last complete line
    head: str = ""  # reader.head_digest up to `offset`: the same file grown keeps it
    # its place in the order the files were first found (None: found now, numbered once read; 0:
    # in an index written before it kept the order)
    seen: int | None = 0
    span: tuple = ()  # the first and last times of the lines first read (to order files found together)


@dataclass
class _Index:
    version: int = INDEX_VERSION
    entries: dict[str, _Entry] = field(default_factory=dict)  # by path in the project directory
    family_of: dict[str, str] = field(default_factory=dict)  # path -> family id
    absorbed: dict[str, tuple[str, ...]] = field(default_factory=dict)  # family id -> the ids it took in
    found: int = 0  # the files found so far (the next one's `seen`)


@dataclass(frozen=True)
class Family:
    family_id: str
    rels: tuple[str, ...]  # its transcripts, on disk or only in the reader's cache
    formerly: tuple[str, ...] = ()  # family ids it took in
    # each file's place in the order the files were first found: a resumed copy comes after its
    # original (normalise.to_lines), whichever goes on longer
    seen: tuple[int, ...] = ()
    # each transcript's size as discovery stat'ed the copy it linked (None: only in the cache): the
    # extract reads no further, and the lines appended since wait for the next discovery's links
    sizes: tuple[int | None, ...] = ()
    # its files' fingerprint (transforms.sources.file_fingerprint) from those same stats: what was
    # read is what is settled, so the lines appended after discovery change the next run's
    fingerprint: str | None = None


def transcripts(project_dir: Path, suffix: str = ".jsonl", errors: list | None = None) -> list[Path]:
    """Every `*.jsonl` under the directory, sorted (symlinked folders too: `files_under`).
    Folders that cannot be listed go to `errors` when given."""
    return files_under(project_dir, lambda name: name.endswith(suffix), errors)


def larger_copies(dirs: tuple[str, ...], unlisted: list, rels=None,
                  seen: dict | None = None) -> dict[str, tuple[tuple | None, Path]]:
    """Each transcript by its path in the project directory, with its (size, mtime_ns, device,
    inode) and path: of its copies in several homes (the first dir is the discovered one), the
    larger (a transcript only grows: the smaller is an older copy of it). `rels`: only those
    (one family's), stat'ed without listing the folders. `seen`: filled with every copy's
    stat, by (the index of its dir, rel)."""
    chosen: dict[str, tuple[tuple | None, Path]] = {}
    for i, d in enumerate(dirs):
        root = Path(d)
        if i and not root.is_dir():  # a backup unmounted since discovery
            continue
        if rels is None:
            skip = len(str(root)) + 1  # the path below the directory, without a Path made for it
            paths = [(str(p)[skip:].replace(os.sep, "/"), p) for p in transcripts(root, errors=unlisted)]
        else:
            paths = [(rel, root / rel) for rel in rels]
        for rel, path in paths:
            try:
                st = path.stat()
            except OSError:
                if rel in chosen or (rels is not None and not os.path.lexists(path)):  # not in this copy
                    continue
                sig = None  # there, but not to be read (a dangling link): the read says why
            else:
                odd = None if stat.S_ISREG(st.st_mode) else not_a_file(str(path))
                if odd:  # a named pipe put there since the listing: never opened (its open would wait)
                    unlisted.append(odd)
                    continue
                sig = (st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino)
                if seen is not None:
                    seen[i, rel] = sig
            if rel not in chosen or (sig and (chosen[rel][0] is None or sig[0] > chosen[rel][0][0])):
                chosen[rel] = (sig, path)
    return dict(sorted(chosen.items()))


def _digest(kind: str, value: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{kind}:{value}".encode("utf-8", "surrogatepass"),
                                          digest_size=8).digest(), "little", signed=True)


def links(rel: str, records) -> set[int]:
    """What ties a file to others: the sessions its lines belong to and their callers, and its
    message lines' uuids and responses' `message.id`s (a replay copies them)."""
    out: set[int] = set()
    for _, rec in records:
        session, parent, _ = session_of(rel, rec)
        out.add(_digest("s", session))
        if parent:
            out.add(_digest("s", parent))
        message = rec.get("message")
        if rec.get("type") in ("user", "assistant") and isinstance(message, dict):
            if isinstance(rec.get("uuid"), str):
                out.add(_digest("u", rec["uuid"]))
            if rec.get("type") == "assistant" and isinstance(message.get("id"), str):
                out.add(_digest("m", message["id"]))
    return out


def _load(cache: Path | None) -> _Index:
    if cache is None:
        return _Index()
    try:
        with open(cache / INDEX, "rb") as fh:
            index = pickle.load(fh)
    except Exception:  # none yet, damaged, or another version's: every file is read for its links
        return _Index()
    return index if isinstance(index, _Index) and index.version == INDEX_VERSION else _Index()


def _save(cache: Path, index: _Index) -> None:
    try:
        cache.mkdir(parents=True, exist_ok=True)
        replace_file(cache / INDEX, pickle.dumps(index, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError:
        pass  # the next discovery reads the links again


def families(dirs: tuple[str, ...], cache: Path | None, unlisted: list | None = None) -> list[Family]:
    """The families of one project directory (`dirs`: it, then its copies in other homes), with
    the files only the reader's cache holds (`cache`: the project's; None: none kept). What could
    not be listed goes to `unlisted` (OSErrors)."""
    index = _load(cache)
    seen: dict = {}
    on_disk = larger_copies(dirs, unlisted if unlisted is not None else [], seen=seen)
    changed = _adopt_cached(index, cache, on_disk)
    for rel, (sig, path) in on_disk.items():
        entry = index.entries.get(rel)
        if entry is not None and entry.sig == sig and sig is not None:
            continue
        try:
            index.entries[rel] = _read_links(path, rel, sig, entry)
        except OSError:  # the extract says why; its links are those read before, if any
            index.entries.setdefault(rel, _Entry(None, seen=None))
        changed = True
    if changed or set(index.family_of) != set(index.entries):
        _number_new(index)
        _regroup(index)
        if cache is not None:
            _save(cache, index)
    members: dict[str, list[str]] = {}
    for rel, fid in index.family_of.items():
        members.setdefault(fid, []).append(rel)
    out = []
    for fid, rels in sorted(members.items()):
        rels.sort()
        sizes = tuple(on_disk[rel][0][0] if on_disk.get(rel, (None,))[0] else None for rel in rels)
        out.append(Family(fid, tuple(rels), index.absorbed.get(fid, ()), tuple(index.entries[r].seen for r in rels),
                          sizes, _fingerprint(len(dirs), rels, seen)))
    return out


def _number_new(index: _Index) -> None:
    """The files found now, numbered after those found before: those with fewer links first (a
    resumed copy holds its originals' lines and more), then by their lines' first and last times
    and path, as the normaliser ranks files otherwise."""
    new = [rel for rel, entry in index.entries.items() if entry.seen is None]
    last = ("\uffff",)  # no time: after the others
    for rel in sorted(new, key=lambda r: (len(index.entries[r].keys), *(index.entries[r].span or last * 2), r)):
        index.found += 1
        index.entries[rel].seen = index.found


def _fingerprint(dirs: int, rels: list[str], seen: dict) -> str:
    """transforms.sources.file_fingerprint of every copy of the files (dir by dir), from the
    stats discovery took: the same string, so a family is not read again for being discovered."""
    return "|".join(f"{sig[0]}:{sig[1]}" if (sig := seen.get((i, rel))) and sig[0] else "-"
                    for i in range(dirs) for rel in rels)


def _read_links(path: Path, rel: str, sig: tuple | None, entry: _Entry | None) -> _Entry:
    """A file's links: those of the lines appended since `entry` was read (the same file grown:
    same inode, the same bytes up to where it was read), else of all its lines; with those read
    before. Its own read, apart from the extract's (reader.py, which says the notes of what it
    reads): parsing a line twice cost less than pickling each transcript's records twice."""
    with open(path, "rb") as fh:
        grown = (entry is not None and entry.sig is not None and sig is not None and entry.sig[2:] == sig[2:]
                 and sig[0] >= entry.offset and head_digest(fh.fileno(), entry.offset) == entry.head)
        offset = entry.offset if grown else 0
        fh.seek(offset)
        records = []
        for raw in fh:
            record, _ = parse_line(raw)
            if record is not None:
                records.append((0, record))
            if not raw.endswith(b"\n"):
                break  # still being written: its links now (the extract reads it), read again once complete
            offset += len(raw)
        head = head_digest(fh.fileno(), offset)
    # the links read before stay, whatever was read now: a file read again whole (rewritten, or an
    # older copy of it in a backup, the larger one deleted) must not lose a link its rows may need
    keys = links(rel, records) | (set(array("q", entry.keys)) if entry is not None else set())
    return _Entry(sig, array("q", sorted(keys)).tobytes(), offset, head, entry.seen if entry is not None else None,
                  entry.span if entry is not None and entry.span else _span(records))


def _span(records) -> tuple:
    """The first and last `timestamp` of the records, as written (ISO 8601: their order is the
    strings'); () when none has one."""
    times = [t for _, rec in records if isinstance(t := rec.get("timestamp"), str)]
    return (min(times), max(times)) if times else ()


def _adopt_cached(index: _Index, cache: Path | None, on_disk: dict) -> bool:
    """The transcripts the reader's cache holds (its records, as an extract last read them) that
    the index does not, and the disk no longer does (Claude Code deleted them): they join their
    families from their records. A cache written before families has no index; a discovery
    that saved its index over another's may have left one out."""
    try:
        names = set(os.listdir(cache / "files")) if cache is not None else set()
    except OSError:
        return False
    names -= {cache_name(rel) for rel in index.entries}
    found = [f for f in cached_files(cache, names=names) if f.rel not in on_disk and f.rel not in index.entries]
    for f in found:
        index.entries[f.rel] = _Entry(None, array("q", sorted(links(f.rel, f.records))).tobytes(), seen=None,
                                      span=_span(f.records))
    return bool(found)


def _side_last(rel: str) -> tuple[bool, str]:
    """A family is named by its first session's own transcript, not a sub-agent's or side file's."""
    return "/" in rel or rel.startswith("agent-"), rel


def _regroup(index: _Index) -> None:
    """The files joined by the links they share (a union-find), each group named by its first
    session's transcript, and knowing the ids its files had before (`absorbed`: its formerly)."""
    parent: dict[str, str] = {rel: rel for rel in index.entries}

    def root(rel: str) -> str:
        while parent[rel] != rel:
            parent[rel] = parent[parent[rel]]
            rel = parent[rel]
        return rel

    owner: dict[int, str] = {}
    for rel, entry in sorted(index.entries.items()):
        for key in array("q", entry.keys):
            other = owner.setdefault(key, rel)
            if other != rel:
                a, b = root(rel), root(other)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    groups: dict[str, list[str]] = {}
    for rel in sorted(index.entries):
        groups.setdefault(root(rel), []).append(rel)
    before = index.family_of
    family_of: dict[str, str] = {}
    absorbed: dict[str, tuple[str, ...]] = {}
    for rels in groups.values():
        # named by its files alone, so that an index built again (a cache deleted) names it alike
        fid = min(rels, key=_side_last)
        known = {before[r] for r in rels if r in before}
        took = known | {a for k in known for a in index.absorbed.get(k, ())}
        absorbed[fid] = tuple(sorted(took - {fid}))
        for rel in rels:
            family_of[rel] = fid
    index.family_of = family_of
    index.absorbed = {fid: ids for fid, ids in absorbed.items() if ids}
