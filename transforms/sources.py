"""What every provider's discovery returns: sources, their ids, slugs and fingerprints."""

import errno
import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Source:
    """One store of one agent on this machine (a crush.db, a session folder, ...)."""

    provider: str
    path: str  # the store itself, resolved
    project_path: str
    project: str  # hive key: a slug of the project's name
    skip_reason: str | None = None  # set when the store cannot be read at all (project gone)
    # what makes two paths the same source: the path itself, or an id the agent gives the
    # store (a CodeWhale session id, found under a current or a legacy home)
    identity: str | None = None
    # project names by path, remote or name (config.toml [projects]), for a store that spans
    # several projects and names them at extract time (OpenCode)
    project_names: tuple[tuple[str, str], ...] = ()
    # the ids this store was landed under before (a Codex rollout is keyed by its path while its
    # first line cannot be read): the bundle that lands it now takes it out of the folder it was
    # landed in (warehouse.land.bundle_folders), so that folder's quarantine row goes with it
    formerly: tuple[str, ...] = ()
    # whole sources whose sessions this one lands now (a Claude Code project directory landed as
    # one source by a release before its families were bundled): each session it lands is taken
    # out of their folders (warehouse.land.bundle_folders.evict_superseded)
    supersedes: tuple[str, ...] = ()

    @property
    def source_id(self) -> str:
        return source_id_for(self.provider, self.identity or self.path)

    @property
    def folder(self) -> str:
        """The folder that holds it: a bundle of such sources is named by theirs in common."""
        return os.path.dirname(self.path)

    @property
    def partition_key(self) -> str:
        """The source's own slug: its name in progress lines, warnings and the `sources` log."""
        return f"{self.provider}-{self.project}-{self.source_id[:8]}"

    @property
    def dagster_partition(self) -> str:
        """The Dagster partition that lands it: one per agent and project. An agent that keeps a
        file per session (Codex, Gemini CLI, ...) has thousands of sources; a partition each cost
        Dagster time and two events per source (docs/BENCHMARKS.md, "Figures behind the code's
        choices"), and crowded its UI."""
        return f"{self.provider}-{self.project}"


@dataclass
class Discovery:
    """Sources found, plus problems with the places we looked (never fatal)."""

    sources: list[Source] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def source_id_for(provider: str, path: str) -> str:
    # a file name that is not UTF-8 (an old disk's Latin-1) is its bytes: `surrogateescape`
    return hashlib.sha256(f"{provider}:{path}".encode("utf-8", "surrogateescape")).hexdigest()[:16]


def as_text(path: str) -> str:
    """A path as text a table can hold: a name that is not UTF-8 (its bytes kept by Python as
    surrogates) shows its odd bytes as U+FFFD; the source id keeps the path exact."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def slugify(name: str, default: str = "unnamed") -> str:
    """`[a-z0-9-]` only: safe in hive paths, file names and Dagster partition keys."""
    slug = _NOT_SLUG.sub("-", name.lower()).strip("-")
    return slug[:60].strip("-") or default


def file_fingerprint(*paths: str) -> str:
    """Size and mtime of each file ('-' when absent). Cheap: no file is opened.

    A WAL database changes its -wal long before the main file, so callers pass both. An empty
    file counts as absent: a reader opening a WAL database creates an empty -wal, which holds
    nothing new.
    """
    parts = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            parts.append("-")
            continue
        parts.append(f"{st.st_size}:{st.st_mtime_ns}" if st.st_size else "-")
    return "|".join(parts)


HOME_VARS = ("HOME", "USERPROFILE", "HOMEDRIVE", "HOMEPATH")  # what user_home reads


def user_home(env) -> Path:
    """The user's home as the agents resolve it: HOME, then the Windows variables."""
    for value in (env.get("HOME"), env.get("USERPROFILE")):
        if value:
            return Path(value)
    if env.get("HOMEDRIVE") and env.get("HOMEPATH"):
        return Path(env["HOMEDRIVE"] + env["HOMEPATH"])
    return Path.home()


def probe(path, kind: str = "file") -> bool:
    """`is_file`/`is_dir` that answers True when it cannot tell (no permission to look).

    The read that follows then fails with the operating system's own reason, recorded for that
    source, instead of discovery crashing or quietly skipping the store.
    """
    try:
        return path.is_file() if kind == "file" else path.is_dir()
    except OSError:
        return True


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a file"))


def unusable(path, kind: str = "dir") -> str | None:
    """Why `path` cannot be read as a `kind` ("dir" or "file"), or None when it can. A stat
    only, nothing is opened (a link to /dev/zero or a FIFO is never read). The answer reads
    after the path: "does not exist", "cannot be read: Too many levels of symbolic links",
    "is a directory, not a file", ..."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.islink(path):
            return f"is a broken symlink (to {os.readlink(path)})"
        return "does not exist"
    except OSError as exc:  # a symlink loop, no permission to look, a file where a folder should be
        return f"cannot be read: {exc.strerror or exc}"
    if (stat.S_ISDIR if kind == "dir" else stat.S_ISREG)(mode):
        return None
    what = next((name for test, name in _KINDS if test(mode)), "something else")
    link = f" (a symlink to {os.path.realpath(path)})" if os.path.islink(path) else ""
    return f"is {what}{link}, not {'a directory' if kind == 'dir' else 'a regular file'}"


def names_carried(project_names) -> tuple[tuple[str, str], ...]:
    """The configured project names (config.toml [projects]) as a source of a store that spans
    projects carries them: each of its rows is named at extract time."""
    return tuple(sorted((project_names or {}).items()))


def with_folder(root: Path, *names: str) -> Path | None:
    """`root` when one of the folders `names` in it is a folder (see `unusable`), else None."""
    return root if any(not unusable(root / name, "dir") for name in names) else None


def named_homes(roots, problems: list[str], *, home: str | None = None, holds: str = "",
                find: Callable[[Path], T | None] = lambda root: root, lacking: str | Callable[[Path], str] = ""
                ) -> Iterator[T]:
    """What `find(root)` finds in each home a flag or the config names (`--agent-home`,
    `extra_roots`), in order. Named explicitly, a home is a problem when it cannot be read
    (`<home> <root> does not exist`, or `no <holds> in <root>: does not exist` for an agent that
    gives its home no name) or when `find` finds nothing in it (`no <holds> in <root>: <lacking>`,
    `lacking` the text or a function of the root). A problem is said before the next home is
    looked at: an agent that looks into each home as it is given says its own problems in order."""
    for root in (Path(r).expanduser() for r in roots):
        why = unusable(root, "dir")
        found = None if why else find(root)
        if why and home:
            problems.append(f"{home} {root} {why}")
        elif not found:
            problems.append(f"no {holds} in {root}: {why or (lacking(root) if callable(lacking) else lacking)}")
        else:
            yield found


def named_stores(stores, problems: list[str], what: str, files_in: Callable[[Path], list[Path]] | None = None
                 ) -> list[Path]:
    """The files the config names as stores (`extra_stores`): a file itself, or a folder's files
    by `files_in` (for an agent whose folder of files may be named). Named explicitly, anything
    else is a problem: `no <what> at <path>`."""
    files: list[Path] = []
    for path in (Path(s).expanduser() for s in stores):
        if files_in is not None and path.is_dir():
            files += files_in(path)
        elif path.is_file():
            files.append(path)
        else:
            problems.append(f"no {what} at {path}")
    return files


def regular_files(paths, problems: list[str] | None, what: str) -> list[Path]:
    """Of `paths` (names a session file would have), the regular files; anything else there (a
    named pipe, whose open would wait for a writer for ever, a folder, a broken link) is never
    opened, and said in `problems` when given: `<what> <path> <why>: not read`."""
    files = []
    for path in paths:
        why = unusable(path, "file")
        if why is None:
            files.append(Path(path))
        elif problems is not None:
            problems.append(f"{what} {path} {why}: not read")
    return files


class NotAFile(OSError):
    """A name a session file would have, given to something that is not one (a named pipe, a
    socket, a device): never opened, as a named pipe's open would wait for a writer forever."""


def not_a_file(path) -> NotAFile | None:
    """Why `path` is no regular file, when it is there and is something else (a named pipe, a
    folder), found by a stat alone; None for a file, and for a path the stat cannot follow."""
    try:
        mode = os.stat(path).st_mode
    except OSError:  # a broken link or a loop: the read says why, for that session
        return None
    if stat.S_ISREG(mode):
        return None
    return NotAFile(errno.EINVAL, unusable(path, "file"), path)


def listing_problem(exc: OSError, what: str) -> str:
    """A line for what `files_under` put in its `errors`: a folder of `what` it could not list,
    or a name it left out for not being a file."""
    if isinstance(exc, NotAFile):
        return f"{exc.filename} {exc.strerror}" + ("" if exc.errno == errno.EISDIR else ": not read")
    return f"cannot list {what} in {exc.filename}: {exc.strerror or exc}"


def files_under(folder: Path, matches, errors: list | None = None) -> list[Path]:
    """Every file under `folder` whose name `matches(name)`, sorted. Symlinked folders are
    followed (old months moved to another disk and linked back), each real folder once, so a
    link loop ends; folders that cannot be listed go to `errors` when given, and so does a
    matching name that is no regular file (`NotAFile`: a folder, a named pipe), left out."""
    found, followed, root = [], set(), os.path.realpath(folder)

    def within(path: str, tree: str) -> bool:
        return path == tree or path.startswith(tree.rstrip(os.sep) + os.sep)

    for top, dirs, files in _walk(str(folder), errors.append if errors is not None else None):
        linked = [d for d in dirs if os.path.islink(os.path.join(top, d))]
        if linked:  # only a link can make a loop or a second visit: followed once, to outside the tree
            here = os.path.realpath(top)
            for d in linked:
                real = os.path.realpath(os.path.join(top, d))
                if real in followed or within(here, real) or within(real, root):
                    dirs.remove(d)
                else:
                    followed.add(real)
        dirs.sort()
        if errors is not None:  # a folder by a session file's name: its session is not there
            errors += [NotAFile(errno.EISDIR, "is a directory, not a regular file (the files in it are read)",
                                os.path.join(top, d)) for d in dirs if matches(d)]
        for entry in files:
            if not matches(entry.name):
                continue
            # a regular file is told by the listing itself; only the others are looked at
            odd = None if _regular(entry) else not_a_file(entry.path)
            if odd is None:
                found.append(Path(top) / entry.name)
            elif errors is not None:
                errors.append(odd)
    return sorted(found)


def _regular(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _walk(top: str, onerror):
    """os.walk(top, followlinks=True), top down, with each folder's files as its DirEntry items:
    their kind comes with the listing, so a file needs no stat of its own (docs/BENCHMARKS.md,
    "Figures behind the code's choices"). `dirs` may be pruned in place, as os.walk's."""
    stack = [top]
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as listing:
                entries = list(listing)
        except OSError as exc:
            if onerror is not None:
                onerror(exc)
            continue
        dirs, files = [], []
        for entry in entries:
            try:
                folder = entry.is_dir()  # a symlinked folder too (followlinks)
            except OSError:
                folder = False
            (dirs if folder else files).append(entry)
        names = [d.name for d in dirs]
        yield here, names, files
        stack += [os.path.join(here, name) for name in reversed(names)]


def members(source: Source) -> tuple[str, ...]:
    """The files of a source that spans several (a discovery's Source subclass with `members`: a
    session with its copies or its sub-agents' files), else its own path."""
    return getattr(source, "members", ()) or (source.path,)
