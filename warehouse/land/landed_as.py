"""The names a home last landed into each lake as (`<home>/landed-as.json`, written by every run
that logged a source, the CLI's and Dagster's): `agentlake dev` on that home lands under the same
ones, never every source again under the host and login names (a team trial: a home ingested
with `--machine laptop-b --user bob` counted each session twice once Dagster started). The home's,
not the lake's: a folder lake is shared by every machine of a team."""

import json

from transforms.atomic import replace_file
from warehouse.lake.storage import is_remote, lake_place, masked

FILE = "landed-as.json"


def record(layout) -> None:
    """These names, for this lake; best effort (a home that cannot be written loses the guard only)."""
    path = layout.home / FILE
    names = _read(path)
    key = _key(layout)
    if names.get(key) == [layout.machine, layout.user]:
        return
    names.pop(masked(str(layout.lake)), None)  # an older release's key, by the URI as written
    names[key] = [layout.machine, layout.user]
    try:
        replace_file(path, json.dumps(names, indent=1, sort_keys=True))
    except OSError:
        pass


def recorded(layout) -> tuple[str, str] | None:
    """(machine, user) this home last landed into its lake as, None if never (or not recorded)."""
    names = _read(layout.home / FILE)
    found = names.get(_key(layout), names.get(masked(str(layout.lake))))
    return tuple(found) if isinstance(found, list) and len(found) == 2 else None


def _key(layout) -> str:
    """The lake as a place: one entry however its URI spells the endpoint (storage.lake_place)."""
    lake = str(layout.lake)
    return lake_place(lake) if is_remote(lake) else masked(lake)


def _read(path) -> dict:
    try:
        names = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return names if isinstance(names, dict) else {}
