"""Project identity: the same repository gets the same project name on every machine and in
every checkout. The name comes from the repository's git remote (read from its git config,
never by running git), else the directory's name; a configured mapping overrides both."""

import os
import re
from collections.abc import Mapping
from pathlib import Path

from transforms.sources import slugify

_SECTION = re.compile(r'^\s*\[\s*remote\s+"([^"]+)"\s*\]')
_URL = re.compile(r"^\s*url\s*=\s*(.+?)\s*$")


def _git_dir(project: Path) -> Path | None:
    dot_git = project / ".git"
    try:
        if dot_git.is_dir():
            return dot_git
        if dot_git.is_file():  # a worktree or submodule: "gitdir: <path>"
            text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
            if text.startswith("gitdir:"):
                git_dir = Path(text[len("gitdir:"):].strip())
                return git_dir if git_dir.is_absolute() else (project / git_dir)
    except OSError:
        pass
    return None


def git_remote(project: Path) -> str | None:
    """The URL of the `origin` remote (else of the first remote) in the project's git config."""
    git_dir = _git_dir(Path(project))
    if git_dir is None:
        return None
    config = git_dir / "config"
    try:
        common = (git_dir / "commondir").read_text(encoding="utf-8").strip()  # worktrees share it
        config = (git_dir / common / "config") if not os.path.isabs(common) else Path(common) / "config"
    except OSError:
        pass
    try:
        lines = config.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    remotes: dict[str, str] = {}
    current = None
    for line in lines:
        if line.lstrip().startswith("["):
            m = _SECTION.match(line)
            current = m.group(1) if m else None
        elif current and current not in remotes:
            m = _URL.match(line)
            if m:
                remotes[current] = m.group(1).strip('"')
    return remotes.get("origin") or next(iter(remotes.values()), None)


def remote_name(url: str) -> str:
    """`owner/repo` from any remote URL form: https, ssh, scp-like `git@host:owner/repo.git`."""
    text = url.strip()
    scheme = re.match(r"^[a-z][a-z0-9+.-]*://", text)
    if scheme:
        text = text[scheme.end():]
        if not url.startswith("file://"):
            text = text.split("/", 1)[1] if "/" in text else ""  # drop user@host:port
    elif re.match(r"^[^/]+:", text):  # scp-like: user@host:owner/repo
        text = text.split(":", 1)[1]
    parts = [p for p in text.rstrip("/").removesuffix(".git").split("/") if p]
    return "/".join(parts[-2:]) if parts else url


def project_name(project_path: str, mapping: Mapping[str, str] | None = None) -> str:
    """The project's hive key. The mapping may name a project by its path, its remote URL, its
    `owner/repo`, or its directory name."""
    mapping = mapping or {}
    path = Path(project_path) if project_path else None
    remote = git_remote(path) if path else None
    keys = [project_path, remote, remote_name(remote) if remote else None, path.name if path else None]
    for key in keys:
        if key and key in mapping:
            return project_slug(mapping[key])
    if remote:
        return project_slug(remote_name(remote))
    return project_slug(path.name if path else "", default="unknown")


# A run of characters long enough to be a token (an AWS key is 20, a GitHub token 40) that mixes
# letters and digits or both cases, or a private key's first line: only such a name is looked at
# for secrets (`_without_secrets`: the rules' import costs a quarter of a second, which
# `agentlake_warehouse_tools` need not pay; `hf_AbCd...` and `glpat-...` must)
_LONG_RUN = re.compile(r"[A-Za-z0-9_-]{16,}")


def _mixed(run: str) -> bool:
    digit, lower, upper = (any(test(c) for c in run) for test in (str.isdigit, str.islower, str.isupper))
    return (digit and (lower or upper)) or (lower and upper)


def project_slug(name: str, default: str = "unnamed") -> str:
    """A project's name as a slug, its letters outside a-z written in a-z first (anyascii:
    `Größe café` is grosse-cafe, `проект` proekt, `東京アプリ` dongjingapuri): slugify alone dropped
    them, so projects named in another script were all `unknown`, one project in every report (a
    new user's trial). Machine and user names keep slugify's: transliterating them would land a
    machine's history again under a new name. A secret in the name never becomes the slug."""
    name = _without_secrets(name)
    if not name.isascii():
        from anyascii import anyascii  # slow to import (docs/ARCHITECTURE.md): only for a name that needs it

        name = anyascii(name)
    return slugify(name, default)


def _without_secrets(name: str) -> str:
    """`name` with each secret in it written `[REDACTED:<kind>]` (its slug `redacted-<kind>`): a
    token pasted into a folder's name became the project's slug, the redaction's `project_path`
    aside, and lower case gave an AWS key back whole (a team lead's trial). In every mode, so that
    a project has one name on every machine of a team. The rules load only for a name that may
    hold one."""
    if "-----BEGIN" not in name and not any(_mixed(run) for run in _LONG_RUN.findall(name)):
        return name
    from transforms.redact import redact_text

    return redact_text(name)[0]
