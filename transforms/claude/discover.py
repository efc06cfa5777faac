"""Find Claude Code project directories: `<root>/projects/<slug>/`, root = `$CLAUDE_CONFIG_DIR`,
else `~/.claude` (plus `$XDG_CONFIG_HOME/claude`, where some versions wrote).

A project directory holds all its `*.jsonl`, sub-agent transcripts included
(`<session>/subagents/**/agent-*.jsonl`, older flat `agent-*.jsonl`). A resumed session replays
its parent's messages in a new file of the same directory: the directory's transcripts are split
into the families that share sessions, lines or requests (families.py), each a source, landed by
project (transforms.bundle), so deduping inside one family is enough. The slug is lossy
(`/home/dev/my.app` -> `-home-dev-my-app`): the project path is the `cwd` the records carry.
Only `projects/` is listed: credentials and history beside it are never opened.

The same project directory in several homes (a backup named in `extra_roots`, `~/.claude` beside
`~/.config/claude`) is one project, named by the directory's slug (`projects/<slug>`), whichever
homes hold it: it reads the larger copy of each transcript (they only grow; Claude Code deletes
old ones, so a backup may hold sessions the home lost), or the one read before when every copy
on disk is smaller. It takes over what those directories landed as sources named by their path
(`replaces`; releases before this one): each session counts once.
"""

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from transforms.claude.families import families, transcripts
from transforms.projects import project_name
from transforms.sources import (
    Discovery, Source, as_text, listing_problem, probe, source_id_for, unusable, user_home,
)

PROVIDER = "claude"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ("CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME")
HEAD_BYTES = 64 * 1024  # the first records carry the cwd
HEAD_FILES = 3  # transcripts looked at for it
_CWD = re.compile(rb'"cwd"\s*:\s*("(?:[^"\\]|\\.)*")')


@dataclass(frozen=True)
class ClaudeSource(Source):
    """A project directory, with the same directory in other homes: `copies_in` those that hold
    transcripts, `elsewhere` those that hold none now (Claude Code deleted them). A family of its
    transcripts (families.py) is one too: `rels` names them, `reader_cache` is the project's cache
    of what was read (None: none kept)."""

    copies_in: tuple[str, ...] = ()
    elsewhere: tuple[str, ...] = ()
    rels: tuple[str, ...] | None = None
    reader_cache: str | None = None
    # what the directory's listing met (a folder that cannot be listed, a named pipe), said by
    # its first family, which is read again each run until they are gone
    unlisted: tuple[str, ...] = ()
    # a family's files as discovery linked them (families.Family): their sizes, read no further,
    # and the fingerprint of those stats
    sizes: tuple[int | None, ...] = ()
    discovered_print: str | None = None
    seen: tuple[int, ...] = ()  # each file's place in the order they were first found (families.Family)

    @property
    def dirs(self) -> tuple[str, ...]:
        return (self.path, *self.copies_in)

    @property
    def folder(self) -> str:
        return self.path  # the project directory (a family's bundle is named by it)

    @property
    def replaces(self) -> tuple[str, ...]:
        """The ids its directories had as sources named by their path, in every home (releases
        before the slug named them): its families supersede them as they do the project's own id
        (family_sources; warehouse.land.bundle_folders.evict_superseded takes their sessions out)."""
        if self.identity == self.path:  # a directory outside a `projects` folder: its path names it
            return ()
        return tuple(source_id_for(PROVIDER, d) for d in (self.path, *self.copies_in, *self.elsewhere))


def family_sources(project: ClaudeSource, cache: Path | None) -> list[ClaudeSource]:
    """The project directory's families, each a source (transforms.bundle lands them by project, in
    buckets). Each takes its sessions out of what the directory landed as one source
    (`supersedes`: releases before families, and before that its copies named by their path)."""
    legacy = (project.source_id, *project.replaces)
    unlisted: list = []
    found = families(project.dirs, cache, unlisted)
    said = tuple(dict.fromkeys(listing_problem(e, "transcripts") for e in unlisted))
    return [replace(project, identity=f"{project.identity}#{family.family_id}", rels=family.rels,
                    sizes=family.sizes, discovered_print=family.fingerprint, seen=family.seen,
                    reader_cache=str(cache) if cache else None, supersedes=legacy, unlisted=said if i == 0 else (),
                    formerly=tuple(source_id_for(PROVIDER, f"{project.identity}#{f}") for f in family.formerly))
            for i, family in enumerate(found)]


def default_roots(env: Mapping[str, str]) -> list[Path]:
    """Claude Code's own config dir: `$CLAUDE_CONFIG_DIR` replaces `~/.claude` entirely."""
    explicit = env.get("CLAUDE_CONFIG_DIR")
    if explicit:
        return [Path(explicit).expanduser()]
    home = user_home(env)
    xdg = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    return [home / ".claude", xdg / "claude"]


def cwd_of(project_dir: Path) -> str | None:
    """The `cwd` of the first records of the top-level transcripts, without parsing them."""
    try:
        heads = sorted(p for p in project_dir.glob("*.jsonl") if p.is_file())[:HEAD_FILES]
    except OSError:
        return None
    for path in heads:
        try:
            with open(path, "rb") as fh:
                m = _CWD.search(fh.read(HEAD_BYTES))
        except OSError:
            continue
        if m:
            try:
                value = json.loads(m.group(1).decode("utf-8", "replace"))
            except ValueError:
                continue
            if isinstance(value, str) and value:
                return value
    return None


def project_dir_of(store: Path) -> Path:
    """A transcript's project directory: the child of a `projects` folder above it, else its folder."""
    for parent in store.parents:
        if parent.parent.name == "projects":
            return parent
    return store.parent


def identity(resolved: Path) -> str:
    """A project directory under a `projects` folder is named by its slug, whichever home holds
    it (releases before named it by its path); any other directory by its path."""
    return f"projects/{resolved.name}" if resolved.parent.name == "projects" else str(resolved)


def _source(project_dir: Path, names: Mapping[str, str], copies_in: tuple[str, ...] = (),
            elsewhere: tuple[str, ...] = ()) -> ClaudeSource:
    resolved = Path(os.path.realpath(project_dir))
    project_path = cwd_of(resolved) or as_text(resolved.name)  # the slug when no record has a cwd
    return ClaudeSource(provider=PROVIDER, path=str(resolved), project_path=project_path,
                        project=project_name(project_path, names), identity=identity(resolved), copies_in=copies_in,
                        elsewhere=elsewhere)


def project_dirs(projects: Path) -> list[Path]:
    """The project directories that hold at least one transcript."""
    return [d for d in sorted(projects.iterdir()) if d.is_dir() and _holds_transcript(d)]


def _holds_transcript(project_dir: Path) -> bool:
    """A transcript at its top (most do: told without walking the tree), else anywhere under it."""
    try:
        with os.scandir(project_dir) as entries:
            if any(e.name.endswith(".jsonl") and e.is_file() for e in entries):
                return True
    except OSError:
        pass  # the walk below says nothing either: listed where it is read (families.py)
    return bool(transcripts(project_dir))


def _stores(stores, found: Discovery) -> list[Path]:
    """Explicit stores: a config dir, a `projects` folder, a project directory or a transcript."""
    dirs = []
    for store in stores:
        p = Path(store).expanduser()
        try:
            if probe(p, "dir"):
                if (p / "projects").is_dir():
                    dirs += project_dirs(p / "projects")
                elif p.name == "projects":
                    dirs += project_dirs(p)
                else:
                    dirs.append(p)
            elif probe(p) and p.suffix == ".jsonl":
                dirs.append(project_dir_of(p))
            else:
                found.problems.append(f"no Claude Code transcripts at {p}")
        except OSError as exc:
            found.problems.append(f"cannot list Claude Code transcripts at {p}: {exc}")
    return dirs


def discover(env: Mapping[str, str], extra_roots=(), extra_stores=(), use_default=True,
             project_names=None) -> Discovery:
    found = Discovery()
    roots = [(r, False) for r in default_roots(env)] if use_default else []
    roots += [(Path(r).expanduser(), True) for r in extra_roots]
    dirs: list[Path] = []
    for root, explicit in roots:
        projects = root / "projects"
        if explicit and unusable(root, "dir"):  # named explicitly: missing is a problem
            found.problems.append(f"Claude Code home {root} {unusable(root, 'dir')}")
            continue
        try:
            if projects.is_dir():
                dirs += project_dirs(projects)
            elif explicit:
                found.problems.append(f"no Claude Code transcripts in {root}: it has no projects/ folder")
        except OSError as exc:  # a home we may not read: say so, go on with the others
            found.problems.append(f"cannot list Claude Code projects in {projects}: {exc}")
    dirs += _stores(extra_stores, found)
    # the same directory through two roots is one source; the same project's directory in two
    # homes too (keyed by its slug under a `projects` folder), the first home's
    by_key: dict[str, list[str]] = {}
    for d in dirs:
        resolved = os.path.realpath(d)
        same = by_key.setdefault(identity(Path(resolved)), [])
        if resolved not in same:
            same.append(resolved)
    homes = [root / "projects" for root, _ in roots]
    for key, (first, *more) in by_key.items():
        slug = Path(key).name if key.startswith("projects/") else None
        places = {os.path.realpath(h / slug) for h in homes} if slug else set()
        found.sources.append(_source(Path(first), project_names or {}, tuple(more),
                                     tuple(sorted(places - {first, *more}))))
    return found
