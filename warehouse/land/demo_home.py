"""A home's demo: what `agentlake demo` may write into, and what it leaves behind.

A demo's generated sessions never go into a lake that holds anything else (the user's agents'
data, another machine's, a lake on object storage): they would mix with the user's own, a
project of the same name merged, fake agents in the totals. And a demo written again (another
seed or size) takes its old sources out of the lake, which otherwise keeps what a source no
longer holds (warehouse.land.retention). Pure: no Dagster.
"""

import os
import shlex
import shutil
from dataclasses import replace
from pathlib import Path

from warehouse.land.source_state import SourceStates
from warehouse.lake.config import DEMO, DEMO_DATA
from warehouse.lake.layout import LANDING, RUNS, Layout


class NotADemoHome(ValueError):
    """The home's lake holds data a demo must not mix into (pipelines.cli: a usage error)."""


def landed_sources(layout: Layout) -> list[tuple[Path, Path | None, str | None]]:
    """Each source landed in a local lake (a landing folder holding Parquet; the run logs are not
    sources): its folder, its state file, and the path its state says it was read from (None
    when there is no state: landed by another machine or user, or the state was lost)."""
    out = []
    landing = Path(layout.lake) / LANDING
    for folder, dirs, files in os.walk(landing):
        dirs.sort()
        parts = Path(folder).relative_to(landing).parts
        if RUNS in parts or not any(f.endswith(".parquet") for f in files):
            continue
        path = state_file = None
        if len(parts) == 4:  # <machine>/<user>/<provider>/<source_id>
            machine, user, provider, source_id = parts
            states = SourceStates(layout, Path(layout.lake) / "_state" / f"{machine}-{user}")
            state_file = states.file(provider, source_id)
            path = states.of(provider, source_id).path
        out.append((Path(folder), state_file, path))
    return out


def is_demos(path: str | None) -> bool:
    """A source `agentlake demo` generated: read from inside a `demo-data` folder (this home's,
    or the one of the home this one was moved or copied from)."""
    return path is not None and DEMO_DATA in Path(path).parts


def refuse_real_data(layout: Layout) -> None:
    """NotADemoHome, saying where to run the demo instead, when the lake holds anything but a demo."""
    other_lake = layout.remote or Path(layout.lake) != layout.home / "lake"  # a flag's, $AGENTLAKE_LAKE, config.toml's
    # a home that is a demo's already (quickstart's, or one `demo --home` wrote) given another lake
    # is the place, with its own lake, unless that holds data of its own too; any other keeps its
    # demo in <home>/demo, as quickstart does
    suggestion = layout.home / DEMO
    if other_lake and (layout.home.name == DEMO or (layout.home / DEMO_DATA).is_dir()):
        own = replace(layout, lake=layout.home / "lake")
        if all(is_demos(path) for _, _, path in landed_sources(own)):
            suggestion = layout.home
    flags = f"--home {shlex.quote(str(suggestion))}"
    if other_lake:
        flags += f" --lake {shlex.quote(str(suggestion / 'lake'))}"
    how = (f"run it with the home's own lake: `agentlake demo {flags}`" if suggestion == layout.home else
           f"run it in a home of its own: `agentlake demo {flags}` (where quickstart keeps its demo), "
           "or another --home")
    if layout.remote:
        raise NotADemoHome(f"the lake {layout.lake} is on object storage, maybe a team's: `agentlake demo` writes "
                           f"generated sessions only into a lake of its own; {how}")
    if other_lake and suggestion == layout.home and (layout.home / DEMO_DATA).is_dir():
        # an empty lake elsewhere took the demo's warehouse with it: the next `demo` without the
        # flag was refused, as every reader of the home (a trial)
        raise NotADemoHome(f"{layout.home} holds a demo already, in its own lake {layout.home / 'lake'}: another "
                           f"lake ({layout.lake}) would take its warehouse with it; {how}")
    others = [(folder, path) for folder, _, path in landed_sources(layout) if not is_demos(path)]
    if others:
        folder, path = others[0]
        example = path or f"landed as {folder.relative_to(layout.lake)}"
        where = layout.home if Path(layout.lake) == layout.home / "lake" else f"the lake {layout.lake}"
        sources = f"{len(others)} source{'s' if len(others) > 1 else ''}"
        raise NotADemoHome(f"{where} holds agent data that is not a demo's ({sources}, e.g. {example}): "
                           f"`agentlake demo` never mixes generated sessions into it; {how}")


def forget_demo_sources(layout: Layout, root: Path, everything: bool) -> int:
    """Remove from the lake the demo's sources that are not this demo's as it is now (all of
    them when it was just written again: a session of another seed is gone from the stores, and
    the lake keeps what a source no longer holds, warehouse.land.retention), with their state and
    cache; the next merge drops their rows. Returns how many."""
    from warehouse.land.ingest import mark_pending

    removed = 0
    for folder, state_file, path in landed_sources(layout):
        if not is_demos(path):
            continue
        if not (everything or not Path(path).is_relative_to(root) or not Path(path).exists()):
            continue  # a store of the demo as it is
        shutil.rmtree(folder)
        state_file.unlink(missing_ok=True)
        state_file.with_suffix(".lock").unlink(missing_ok=True)
        provider, source_id = folder.parent.name, folder.name
        shutil.rmtree(layout.source_cache(provider, source_id), ignore_errors=True)
        removed += 1
    if everything:  # every cache here is the demo's (refuse_real_data): those a discovery keeps beside the
        shutil.rmtree(layout.cache_dir, ignore_errors=True)  # sources' own too (Claude Code's families)
    if removed:
        mark_pending(layout)  # a run that lands nothing new merges all the same
    return removed


def demo_made(done: Path) -> dict[str, int]:
    """What `.generated` says the demo in a folder was made with: {"seed": 7, "projects": 4,
    "sessions": 6}; an older agentlake wrote only the seed."""
    try:
        words = done.read_text().split()
    except OSError:
        return {}
    made = {}
    for key, value in zip(words[::2], words[1::2]):
        try:
            made[key] = int(value)
        except ValueError:
            pass
    return made


def describe(made: dict[str, int]) -> str:
    words = [f"{made['projects']} project{'' if made['projects'] == 1 else 's'}"] if "projects" in made else []
    words += [f"{made['sessions']} session{'' if made['sessions'] == 1 else 's'} per project"] if "sessions" in made else []
    return ", ".join([f"seed {made.get('seed', '?')}", *words])
