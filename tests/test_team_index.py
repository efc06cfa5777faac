"""The team catalog's search index, shared through the lake (warehouse.catalog.team_index): the
center puts its copy there under a new name and points CURRENT at it, and a reader fetches it
only when CURRENT names another copy. With PostgreSQL and S3 end to end: tests/test_team_postgres.py."""

import threading
import time

import pytest

from warehouse.catalog.team_index import CURRENT, NoPublishedIndex, fetch, lake_copy_is_ours, local_index, publish
from warehouse.lake import storage


def _current(lake):
    return (lake / CURRENT).read_text()


@pytest.fixture
def homes(tmp_path):
    lake, center, reader = tmp_path / "lake", local_index(tmp_path / "center"), local_index(tmp_path / "reader")
    lake.mkdir()
    center.parent.mkdir()
    return lake, center, reader


def _gets(monkeypatch, seconds: float = 0) -> list:
    """The copies fetched from the lake, each taking at least `seconds`."""
    got, get = [], storage.LocalStore.get_file

    def slow_get(store, rel, path):
        got.append(rel)
        time.sleep(seconds)
        get(store, rel, path)

    monkeypatch.setattr(storage.LocalStore, "get_file", slow_get)
    return got


def test_a_reader_fetches_the_centers_index_only_when_the_lake_holds_a_new_one(homes, monkeypatch):
    lake, center, reader = homes
    with pytest.raises(NoPublishedIndex, match="no search index in the lake .* the center's next merge"):
        fetch(lake, reader)
    assert not reader.exists() and not lake_copy_is_ours(lake, center)

    center.write_bytes(b"first index")
    assert publish(lake, center) and lake_copy_is_ours(lake, center)
    first = _current(lake)
    assert (lake / first).read_bytes() == b"first index"
    assert not publish(lake, center)  # nothing new: the lake's copy is this one
    gets = _gets(monkeypatch)
    assert fetch(lake, reader).read_bytes() == b"first index" and gets == [first]
    assert fetch(lake, reader).read_bytes() == b"first index" and gets == [first]  # the same copy: kept

    center.write_bytes(b"second index, longer")
    assert publish(lake, center)
    second = _current(lake)
    assert second != first and not (lake / first).exists()  # the copy before is removed
    killed = reader.with_name(f".{reader.name}.0123.part")  # what a fetch killed half-way left
    killed.write_bytes(b"sec")
    assert fetch(lake, reader).read_bytes() == b"second index, longer" and gets == [first, second]
    assert not killed.exists()
    assert not list((lake / "_staging").iterdir())  # nothing left half-way


def test_a_put_cut_short_is_never_read_and_the_next_merge_puts_it_again(homes, monkeypatch):
    lake, center, reader = homes
    center.write_bytes(b"first index")
    publish(lake, center)
    first = _current(lake)
    center.write_bytes(b"second index")

    def cut_short(store, rel, path):
        (lake / rel).write_bytes(b"sec")  # as an interrupted upload leaves an object
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(storage.LocalStore, "put_file", cut_short)
        with pytest.raises(KeyboardInterrupt):
            publish(lake, center)
    assert _current(lake) == first and fetch(lake, reader).read_bytes() == b"first index"
    assert publish(lake, center)  # the local file is not the one put last: put, though no merge changed it
    assert fetch(lake, reader).read_bytes() == b"second index"
    assert sorted(p.name for p in (lake / "search").iterdir()) == sorted(["CURRENT", _current(lake).split("/")[-1]])


def test_another_centers_copy_or_a_lost_one_is_replaced_by_this_ones(homes, tmp_path):
    lake, center, reader = homes
    center.write_bytes(b"this center's index")
    publish(lake, center)
    other = local_index(tmp_path / "other-center")
    other.parent.mkdir()
    other.write_bytes(b"another center's index")
    publish(lake, other)
    assert not lake_copy_is_ours(lake, center)  # its merge brings its index up to date, then puts it
    assert publish(lake, center) and fetch(lake, reader).read_bytes() == b"this center's index"
    (lake / CURRENT).unlink()  # lost
    assert not lake_copy_is_ours(lake, center) and publish(lake, center)


def test_readers_fetching_at_once_download_one_copy(homes, monkeypatch):
    lake, center, reader = homes
    center.write_bytes(b"x" * 100_000)
    publish(lake, center)
    gets = _gets(monkeypatch, seconds=0.2)  # long enough for every thread to ask meanwhile
    threads = [threading.Thread(target=fetch, args=(lake, reader)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert gets == [_current(lake)] and reader.read_bytes() == b"x" * 100_000
