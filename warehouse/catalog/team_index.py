"""The search index of a team catalog in PostgreSQL, shared through the lake.

A catalog in PostgreSQL has no file for the index to sit beside (warehouse.catalog.search_index).
The center, its one writer, keeps the index in its home (`local_index`) and updates it at each
merge as beside a file catalog. `publish` puts a copy in the lake under a name of its own
(`search/warehouse.search.<id>.duckdb`), then points CURRENT (`search/CURRENT`, a one-line object)
at it, and removes the other copies there: an upload cut short is never pointed at (and is removed
by the next put), and a reader reads one whole copy or the one before. A reader, who reads the lake for the tables
already, fetches the copy CURRENT names into its own home when it is not the one held (`fetch`),
and searches it there. What each home holds is kept beside its copy (`.team.search.duckdb.held`):
the copy's name in the lake and, for the center, its local file's size and time when it was put."""

import json
import os
import uuid
from functools import lru_cache
from pathlib import Path

from warehouse.lake.locks import held
from warehouse.lake.storage import open_store

CURRENT = "search/CURRENT"  # the name of the copy readers fetch
COPIES = "search/"


class NoPublishedIndex(FileNotFoundError):
    """The lake holds no search index yet: the center's next merge puts one there."""


def local_index(home) -> Path:
    """The home's copy of the team's index: the center's own, or a reader's fetched one."""
    return Path(home) / "team.search.duckdb"


def _held_file(index: Path) -> Path:
    return index.with_name("." + index.name + ".held")


def _held(index: Path) -> dict:
    """What this home holds: {"name": the lake's copy it has or put, "local": its file's stat when put}."""
    try:
        return json.loads(_held_file(index).read_text())
    except (OSError, ValueError):
        return {}


def _hold(index: Path, **held_now) -> None:
    _held_file(index).write_text(json.dumps(held_now))


def _stat(path: Path) -> str | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return f"{st.st_size}-{st.st_mtime_ns}"


def _current(store) -> str | None:
    """The name CURRENT gives, None when the lake has no copy yet."""
    try:
        return store.read(CURRENT).decode().strip() or None
    except FileNotFoundError:
        return None


def lake_copy_is_ours(lake, index: Path) -> bool:
    """Whether the lake's copy is the one this home put last (not another center's, not gone)."""
    name = _held(index).get("name")
    return name is not None and _current(open_store(lake)) == name


def publish(lake, index: Path, *, ours: bool | None = None) -> bool:
    """Put the center's `index` in the lake when it is not the file this home put there last, or
    the lake's copy is not that one (gone, or another center's: `ours` False, asked of the lake
    when not given); returns whether it put it. A put cut short leaves CURRENT on the copy
    before, and the next merge puts it again."""
    store = open_store(lake)
    before, local = _held(index), _stat(index)  # before the upload: a change meanwhile goes next time
    if ours is None:
        ours = lake_copy_is_ours(lake, index)
    if ours and before.get("local") == local:
        return False
    name = f"{COPIES}warehouse.search.{uuid.uuid4().hex}.duckdb"
    store.put_file(name, index)
    store.put_all({CURRENT: name.encode()})
    _hold(index, name=name, local=local)
    # the copy before, and any a put cut short left unnamed (one center puts at a time: the merge's
    # writer lock); a reader fetching the one before fails this once, and fetches CURRENT's next time
    for old in store.list(COPIES, ".duckdb"):
        if old != name:
            store.delete(old)
    return True


def fetch(lake, index: Path) -> Path:
    """The lake's copy of the team's index in the local file `index`, fetched only when it is not
    the one held; NoPublishedIndex when the center has put none there yet. One fetch at a time
    per home: a dashboard's requests wait for the one fetching, then find the copy held."""
    store = open_store(lake)
    index.parent.mkdir(parents=True, exist_ok=True)
    with held(index.with_name("." + index.name + ".lock")):
        name = _current(store)
        if name is None:
            raise NoPublishedIndex(f"no search index in the lake {lake} yet: the center's next merge "
                                   f"(`agentlake merge` into the team's catalog) puts it under {COPIES}")
        if index.exists() and _held(index).get("name") == name:
            return index
        for left in index.parent.glob(f".{index.name}.*.part"):  # a fetch killed half-way (this lock is free)
            left.unlink(missing_ok=True)
        part = index.with_name(f".{index.name}.{uuid.uuid4().hex}.part")
        try:
            store.get_file(name, part)
            os.replace(part, index)  # a search running here keeps the file it opened
        finally:
            part.unlink(missing_ok=True)
        _hold(index, name=name)
    return index


def for_reader(catalog, home) -> Path:
    """The index a reader of the team's `catalog` searches: the lake's copy (the lake the catalog
    merges, as it records it), fetched into `home` when it changed."""
    return fetch(_lake_of(catalog), local_index(home))


@lru_cache(maxsize=4)
def _lake_of(catalog) -> str:
    """The lake a team catalog merges, asked once per process (a dashboard's searches would each
    attach the catalog again): it changes only with a new catalog."""
    import duckdb

    from warehouse.catalog.merge import LAKE_TABLE
    from warehouse.lake.ducklake import connect

    with connect(catalog, ours=True) as con:
        try:
            return con.execute(f"SELECT lake FROM {LAKE_TABLE}").fetchone()[0]
        except duckdb.CatalogException:  # a catalog the tables were never merged into
            raise NoPublishedIndex(f"the team's catalog at {catalog} has not been merged yet: no search index")
