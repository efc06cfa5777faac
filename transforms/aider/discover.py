"""Find Aider chat histories. Aider (Aider-AI/aider `aider/args.py`) appends every chat to
`.aider.chat.history.md` in the git root of the project it runs in (the working dir outside a
repo), or to `--chat-history-file` / `$AIDER_CHAT_HISTORY_FILE` (every option has an `AIDER_`
variable: configargparse `auto_env_var_prefix`). Aider keeps no list of its projects, so the
places looked at are: `$AIDER_CHAT_HISTORY_FILE` when absolute (a relative one is relative to
wherever Aider ran), `~/.aider.chat.history.md` (Aider run in the home dir), the project dirs
named in config.toml `[projects]`, and every `--agent-home aider=DIR` / `[aider] extra_roots`
dir, searched three levels deep (hidden dirs and `node_modules` skipped) for history files.

One source is one history file; its project is the directory that holds it. Discovery opens no
file: names and stats only.
"""

import os
from pathlib import Path

from transforms.projects import project_name
from transforms.sources import Discovery, Source, probe, unusable, user_home

PROVIDER = "aider"
# the environment variables discovery reads (transforms.providers.env_vars)
ENV_VARS = ("AIDER_CHAT_HISTORY_FILE",)
HISTORY_NAME = ".aider.chat.history.md"
DEPTH = 3
SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", "target", "dist", "build"})


def histories_under(root: Path, depth: int = DEPTH) -> list[Path]:
    """`.aider.chat.history.md` files in `root` and its subdirs, `depth` levels down."""
    found, level = [], [root]
    for _ in range(depth + 1):
        below = []
        for folder in level:
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if entry.name == HISTORY_NAME and entry.is_file():
                    found.append(Path(entry.path))
                elif entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".") \
                        and entry.name not in SKIP_DIRS:
                    below.append(Path(entry.path))
        level = below
    return found


def default_histories(env, project_names) -> list[Path]:
    out = []
    named = env.get("AIDER_CHAT_HISTORY_FILE")
    if named and os.path.isabs(named):
        out.append(Path(named))
    out.append(user_home(env) / HISTORY_NAME)
    out += [Path(p) / HISTORY_NAME for p in project_names if os.path.isabs(p)]
    return [p for p in out if probe(p) and p.exists()]


def discover(env, extra_roots=(), extra_stores=(), use_default=True, project_names=None) -> Discovery:
    found, seen = Discovery(), set()
    names = dict(project_names or {})

    def add(path: Path) -> None:
        real = os.path.realpath(path)
        if real in seen:
            return
        seen.add(real)
        folder = os.path.dirname(real)
        found.sources.append(Source(provider=PROVIDER, path=real, project_path=folder,
                                    project=project_name(folder, names), identity=real))

    if use_default:
        for path in default_histories(env, names):
            add(path)
    for place in (Path(p).expanduser() for p in (*extra_roots, *extra_stores)):
        if not unusable(place, "file"):
            add(place)
        elif not unusable(place, "dir"):
            files = histories_under(place)
            if not files:
                found.problems.append(f"no Aider chat history ({HISTORY_NAME}) in {place} or {DEPTH} levels below")
            for path in files:
                add(path)
        else:
            found.problems.append(f"Aider chat history {place} {unusable(place, 'file')}")
    return found
