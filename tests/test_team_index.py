"""The team catalog's search index, shared through the lake (warehouse.catalog.team_index): the
center puts its copy there when it changed, and a reader fetches it only when the lake's changed.
With PostgreSQL and S3 end to end: tests/test_team_postgres.py."""

import pytest

from warehouse.catalog import team_index
from warehouse.catalog.team_index import PUBLISHED, NoPublishedIndex, fetch, local_index, publish


def test_a_reader_fetches_the_centers_index_only_when_the_lake_holds_a_new_one(tmp_path, monkeypatch):
    lake, center, reader = tmp_path / "lake", local_index(tmp_path / "center"), local_index(tmp_path / "reader")
    lake.mkdir()
    center.parent.mkdir()
    with pytest.raises(NoPublishedIndex, match="no search index in the lake .* the center's next merge"):
        fetch(lake, reader)
    assert not reader.exists()

    center.write_bytes(b"first index")
    assert publish(lake, center, changed=True)
    assert (lake / PUBLISHED).read_bytes() == b"first index"
    assert not publish(lake, center, changed=False)  # nothing new: the lake's copy is this one's
    assert fetch(lake, reader).read_bytes() == b"first index"

    gets = []
    monkeypatch.setattr(type(team_index.open_store(lake)), "get_file",
                        lambda store, rel, path, get=type(team_index.open_store(lake)).get_file:
                        gets.append(rel) or get(store, rel, path))
    assert fetch(lake, reader).read_bytes() == b"first index" and gets == []  # the same version: kept

    center.write_bytes(b"second index, longer")
    assert publish(lake, center, changed=True)
    assert fetch(lake, reader).read_bytes() == b"second index, longer" and gets == [PUBLISHED]

    (lake / PUBLISHED).unlink()  # the lake's copy lost: the center puts it back though unchanged
    assert publish(lake, center, changed=False)
    assert (lake / PUBLISHED).read_bytes() == b"second index, longer"
    assert not list((lake / "_staging").iterdir())  # no part left behind
