"""Build the warehouse: merge what landed into the curated tables and the marts, then compact
when the merge left many small files (warehouse.catalog.merge). The catalog is then published
for readers (warehouse.lake.ducklake)."""

from contextlib import contextmanager
from pathlib import Path

from transforms.contract import ALL_TABLES
from warehouse.catalog import search_index, team_index
from warehouse.catalog.marts import MARTS
from warehouse.catalog.compaction import compact
from warehouse.catalog.merge import LAKE_TABLE, MergeResult, merge
from warehouse.lake.ducklake import WRITER_SETTINGS, one_snapshot, retried_with_more_memory
from warehouse.lake.pg_catalog import is_postgres
from warehouse.lake.prices import Prices


def build_warehouse(lake, warehouse: Path, tables=ALL_TABLES, *, full: bool = False,
                    prices: Prices = Prices(), home=None) -> list[str]:
    """Merge what landed, rebuild the marts, compact now and then; returns the public table names."""
    refresh(lake, warehouse, full=full, prices=prices, home=home)
    return [t.name for t in tables] + list(MARTS)


def refresh(lake, warehouse: Path, *, full: bool = False, marts: bool = True,
            prices: Prices = Prices(), then=None, home=None) -> MergeResult:
    """`prices`: config.toml's (`load_config(layout.config_file).prices`), applied by the merge.
    The search index follows the tables: updated when the merge replaced or removed a source,
    when it is missing, or when a merge before was cut off before updating it, on the merge's own
    connection before the catalog is published (`_AfterMerge`). The index of a team's catalog in
    PostgreSQL is kept in the center's `home` and put in the lake for the readers
    (warehouse.catalog.team_index; none without a home). Without `marts` (the tables only), the
    index is left owed with the marts: the next merge with them brings both up to date.
    `then(con, result)`: more reading on that connection after the index (the Dagster asset's
    checks), under the writer's memory limit."""
    team = is_postgres(warehouse)
    catalog = warehouse if team else Path(warehouse)
    if team:  # the center's copy, put in the lake for the readers
        index = team_index.local_index(home) if home is not None else None
    else:
        index = search_index.search_path(catalog)
    with _index_owed(index) as owed:
        after = _AfterMerge(catalog, index, full, owed.before, index is not None and marts, then,
                            readers_copy_in=lake if team else None)
        result = merge(lake, catalog, full=full, marts=marts, prices=prices, then=after, before_commit=after.stage)
        if result.crowded:
            compact(catalog, lake=str(lake))
        if after.failed:  # the merge is published; an index that failed stays owed to the next
            raise after.failed
        owed.paid = marts
    return result


class _AfterMerge:
    """What the merge runs on its writer's connection once its tables and marts are committed
    there, before the catalog is published: the search index's update, then `then`. A connection
    of their own attached the catalog and loaded it again. A failure is raised once the merge is
    published, as when these came after it. `readers_copy_in`: the lake a team catalog's index is
    put in for its readers, here, under the writer's lock: a second center's merge and put come
    after this one's, never between them."""

    def __init__(self, catalog, index: Path | None, full: bool, owed: bool, indexed: bool, then,
                 readers_copy_in=None):
        self.catalog, self.index, self.full, self.owed = catalog, index, full, owed
        self.indexed, self.then, self.lake = indexed, then, readers_copy_in
        self.failed: Exception | None = None

    def stage(self, con, result: MergeResult) -> None:
        """In the merge's transaction, when its marts share it: what the index's update will read
        (search_index.stage), kept in `result`. The team catalog's index waits on its lake copy."""
        if self.indexed and self.lake is None and self._due(result):
            result.search_staged = search_index.stage(con, self.index, self.full, result.sources)

    def __call__(self, con, result: MergeResult) -> None:
        self.failed = None  # a merge run again with more memory calls this again
        try:
            if self.indexed:
                self._index(con, result)
            if self.then:
                retried_with_more_memory(lambda limit: self._then(con, result, limit))
        except Exception as exc:
            self.failed = exc

    def _index(self, con, result: MergeResult) -> None:
        # the lake's copy another center's (or none): this one's index is brought up to date first
        ours = self.lake is None or team_index.lake_copy_is_ours(self.lake, self.index)
        if not ours or self._due(result):
            result.search = search_index.update(self.catalog, full=self.full, con=con, index=self.index,
                                                staged=result.search_staged)
        if self.lake is not None:
            team_index.publish(self.lake, self.index, ours=ours)

    def _due(self, result: MergeResult) -> bool:
        return bool(self.owed or self.full or result.merged or result.removed or not self.index.exists()
                    or search_index.of_another_format(self.index))

    def _then(self, con, result: MergeResult, memory_limit: str | None) -> None:
        con.execute(f"SET memory_limit = '{memory_limit or WRITER_SETTINGS['memory_limit']}'")
        with one_snapshot(con):  # every read sees the same catalog
            self.then(con, result)


class _Owed:
    before: bool = False  # an earlier merge left the index owed
    paid: bool = False  # this merge brought it up to date (else the marker stays for the next)


@contextmanager
def _index_owed(index: Path | None):
    """Whether an earlier merge was cut off before it updated the index, or left it owed (a merge
    of the tables only); a marker stays from here until a merge's update is done (a merge killed
    meanwhile leaves it for the next)."""
    owed = _Owed()
    if index is None:
        yield owed
        return
    marker = search_index.owed_marker(index)
    owed.before = marker.exists()
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    yield owed
    if owed.paid:
        marker.unlink(missing_ok=True)


def configured_prices(layout) -> Prices:
    """The prices in the config.toml of the home whose warehouse is merged (for the quickstart's
    demo, of the home it stands in for: warehouse.lake.config.settings_file)."""
    from warehouse.lake.config import load_config, settings_file

    return load_config(settings_file(layout)).prices


def lake_of(con) -> str | None:
    """The lake whose landing files the catalog merges (None for a catalog without one)."""
    try:
        return con.execute(f"SELECT lake FROM {LAKE_TABLE}").fetchall()[0][0]
    except Exception:
        return None
