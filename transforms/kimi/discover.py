"""Find Kimi CLI sessions (MoonshotAI/kimi-cli, src/kimi_cli/share.py, metadata.py, session.py).

Where: `$KIMI_SHARE_DIR`, else `~/.kimi` (`Path.home()`: HOME, then USERPROFILE on Windows).
Sessions: `sessions/<md5 of the work dir>/<session id>/` (a remote KAOS prefixes the md5 with its
name) holding `wire.jsonl` (every event, the usage), `context.jsonl` (the model-facing history,
rotated to `context_N.jsonl` on /clear and checkpoint reverts: copies, not read), `state.json`
(the title) and `subagents/<agent id>/` (`wire.jsonl`, `meta.json`). `kimi.json` maps each work
dir to its folder (the md5 cannot be reversed otherwise). ccusage's `KIMI_DATA_DIR` is not Kimi's.

A source is one work dir's folder: a `/fork` copies a session's wire lines verbatim into a new
session of the same work dir, so its sessions are read together to count each line once.
Never opened: `config.toml` (API keys), `credentials/`, and anything outside `sessions/` but
`kimi.json`.
"""

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from transforms import jsontext
from transforms.projects import project_name
from transforms.sources import Discovery, Source, named_homes, unusable, user_home, with_folder

PROVIDER = "kimi"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ("KIMI_SHARE_DIR",)


@dataclass(frozen=True)
class KimiSource(Source):
    sessions: tuple[str, ...] = ()  # the session dirs (each with a wire.jsonl)


def share_dir(env) -> Path:
    explicit = env.get("KIMI_SHARE_DIR")
    return Path(explicit).expanduser() if explicit else user_home(env) / ".kimi"


def work_dirs(share: Path) -> dict[str, str]:
    """Folder name -> work dir path, from `kimi.json` (WorkDirMeta.sessions_dir)."""
    try:
        meta = jsontext.loads((share / "kimi.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    out = {}
    for wd in meta.get("work_dirs", []) if isinstance(meta, dict) else []:
        if isinstance(wd, dict) and isinstance(wd.get("path"), str):
            digest = hashlib.md5(wd["path"].encode("utf-8")).hexdigest()
            kaos = wd.get("kaos") if isinstance(wd.get("kaos"), str) else "local"
            out[digest if kaos == "local" else f"{kaos}_{digest}"] = wd["path"]
    return out


def sources_in(share: Path, names) -> list[KimiSource]:
    paths = work_dirs(share)
    out = []
    for group in sorted(p for p in (share / "sessions").iterdir() if p.is_dir()):
        sessions = tuple(str(s) for s in sorted(group.iterdir()) if (s / "wire.jsonl").is_file())
        if sessions:
            project = paths.get(group.name, "")
            out.append(KimiSource(provider=PROVIDER, path=str(group), project_path=project,
                                  project=project_name(project, names), sessions=sessions))
    return out


def discover(env=os.environ, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found = Discovery()
    shares: list[Path] = []
    if use_default:
        shares.append(share_dir(env))
    shares += named_homes(extra_roots, found.problems, home="Kimi CLI dir", holds="Kimi CLI sessions",
                          find=lambda root: with_folder(root, "sessions"), lacking="it has no sessions/ folder")
    for store in extra_stores:
        found.problems.append(f"Kimi CLI stores are named by their share dir (--agent-home kimi=DIR), not {store}")
    for share in dict.fromkeys(Path(os.path.realpath(s)) for s in shares):
        if unusable(share / "sessions", "dir"):
            continue
        try:
            found.sources += sources_in(share, project_names or {})
        except OSError as exc:
            found.problems.append(f"cannot list Kimi CLI sessions in {share}: {exc}")
    return found
