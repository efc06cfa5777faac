"""Find Codebuff's chats (CodebuffAI/codebuff `cli/src/utils/config-dir.ts`, `cli/src/project-files.ts`).

Codebuff keeps everything under `os.homedir()/.config/manicode` on every OS (`manicode-<env>` when
`NEXT_PUBLIC_CB_ENVIRONMENT` names a non-prod stack: `-dev`, `-staging`), chats under
`projects/<project dir name>/chats/<chat id>/`. No variable moves it; ccusage's
`CODEBUFF_DATA_DIR` is ccusage's own. One source is one chat folder, identified by its channel,
project and chat id. The project's real path is read from the first 256 KiB of `run-state.json`
(`projectRoot`), else it is the folder's name. `credentials.json` beside it is never opened.
"""

import os
import re
from collections.abc import Mapping
from pathlib import Path

from transforms import jsontext
from transforms.projects import project_name
from transforms.sources import Discovery, Source, named_homes, user_home

PROVIDER = "codebuff"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ("NEXT_PUBLIC_CB_ENVIRONMENT",)
CHANNELS = ("manicode", "manicode-dev", "manicode-staging")
CHAT_FILES = ("chat-messages.json", "messages.json")  # the CLI's, then the older npm-app's
HEAD_BYTES = 256 * 1024
_ROOT = re.compile(r'"projectRoot"\s*:\s*("(?:[^"\\]|\\.)*")')


def channel_roots(env) -> list[Path]:
    home = user_home(env) / ".config"
    stack = env.get("NEXT_PUBLIC_CB_ENVIRONMENT")
    names = list(CHANNELS) + ([f"manicode-{stack}"] if stack and stack != "prod" else [])
    return [home / name for name in dict.fromkeys(names)]


def chat_folders(root: Path) -> list[Path]:
    projects = root / "projects" if (root / "projects").is_dir() else root
    return sorted(p for p in projects.glob("*/chats/*") if p.is_dir() and any((p / f).is_file() for f in CHAT_FILES))


def project_root(chat: Path) -> str | None:
    try:
        with open(chat / "run-state.json", "rb") as fh:
            head = fh.read(HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    found = _ROOT.search(head)
    try:
        value = jsontext.loads(found.group(1)) if found else None
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, str) and value else None


def chat_source(chat: Path, names: Mapping[str, str]) -> Source:
    project_dir = chat.parent.parent
    path = project_root(chat) or project_dir.name
    channel = project_dir.parent.parent.name
    return Source(provider=PROVIDER, path=str(chat), project_path=path, project=project_name(path, names),
                  identity=f"{channel}/{project_dir.name}/{chat.name}")


def discover(env=os.environ, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found = Discovery()
    chats: list[Path] = []
    if use_default:
        for root in channel_roots(env):
            chats += chat_folders(root)
    for here in named_homes(extra_roots, found.problems, holds="Codebuff chats", find=chat_folders,
                            lacking="no projects/*/chats/* folder"):
        chats += here
    for store in (Path(s).expanduser() for s in extra_stores):
        if store.is_dir() and any((store / f).is_file() for f in CHAT_FILES):
            chats.append(store)
        else:
            found.problems.append(f"no Codebuff chat folder at {store}")
    seen: set[str] = set()
    for chat in dict.fromkeys(Path(os.path.realpath(c)) for c in chats):
        source = chat_source(chat, project_names or {})
        if source.identity not in seen:
            seen.add(source.identity)
            found.sources.append(source)
    return found
