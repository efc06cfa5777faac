"""The search index of a team catalog in PostgreSQL, shared through the lake.

A catalog in PostgreSQL has no file for the index to sit beside (warehouse.catalog.search_index).
The center, its one writer, keeps the index in its home (`local_index`), updates it at each merge
as beside a file catalog, and puts a copy in the lake at PUBLISHED (one object, or a file renamed
into place: a reader gets the old copy or the new one, whole). A reader, who reads the lake for
the tables already, fetches that copy into its own home when its version changed (`fetch`) and
searches it there. Each copy's version, as the lake gave it, is kept beside it (`.version`)."""

import os
import uuid
from pathlib import Path

from warehouse.lake.storage import open_store

PUBLISHED = "search/warehouse.search.duckdb"  # the index's place in the lake


class NoPublishedIndex(FileNotFoundError):
    """The lake holds no search index yet: the center's next merge puts one there."""


def local_index(home) -> Path:
    """The home's copy of the team's index: the center's own, or a reader's fetched one."""
    return Path(home) / "team.search.duckdb"


def _version_file(index: Path) -> Path:
    return index.with_name("." + index.name + ".version")


def _recorded(index: Path) -> str | None:
    try:
        return _version_file(index).read_text().strip() or None
    except OSError:
        return None


def _record(index: Path, version: str | None) -> None:
    _version_file(index).write_text(version or "")


def publish(lake, index: Path, *, changed: bool) -> bool:
    """Put the center's `index` in the lake when it `changed`, or when the lake's copy is not
    the one this home put there last (gone, or a put cut short). Returns whether it put it."""
    store = open_store(lake)
    held = _recorded(index)
    if not changed and held is not None and store.version(PUBLISHED) == held:
        return False
    store.put_file(PUBLISHED, index)
    _record(index, store.version(PUBLISHED))
    return True


def fetch(lake, index: Path) -> Path:
    """The lake's copy of the team's index in the local file `index`, fetched only when the lake's
    version is not the one held; NoPublishedIndex when the center has put none there yet."""
    store = open_store(lake)
    version = store.version(PUBLISHED)
    if version is None:
        raise NoPublishedIndex(f"no search index in the lake {lake} yet: the center's next merge "
                               f"(`agentlake merge` into the team's catalog) puts it at {PUBLISHED}")
    if index.exists() and _recorded(index) == version:
        return index
    index.parent.mkdir(parents=True, exist_ok=True)
    part = index.with_name(f".{index.name}.{uuid.uuid4().hex}.part")  # a server's threads may fetch at once
    try:
        store.get_file(PUBLISHED, part)
        os.replace(part, index)  # a search running here keeps the file it opened
    finally:
        part.unlink(missing_ok=True)
    _record(index, version)
    return index


def for_reader(catalog, home) -> Path:
    """The index a reader of the team's `catalog` searches: the lake's copy (the lake the catalog
    merges, as it records it), fetched into `home` when it changed."""
    import duckdb

    from warehouse.catalog.merge import LAKE_TABLE
    from warehouse.lake.ducklake import connect

    with connect(catalog, ours=True) as con:
        try:
            lake = con.execute(f"SELECT lake FROM {LAKE_TABLE}").fetchone()[0]
        except duckdb.CatalogException:  # made by a merge: none yet
            lake = None
    if lake is None:
        raise NoPublishedIndex(f"the team's catalog at {catalog} has not been merged yet: no search index")
    return fetch(lake, local_index(home))
