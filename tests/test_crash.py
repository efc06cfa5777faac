"""Ingestion killed (SIGKILL) at random points, landing or merging: readers never see a
half-written file, and the next run converges to exactly the lake of an uninterrupted run, with
no staging left over."""

import os
import random
import signal
import time

import pyarrow.parquet as pq
import pytest

from tests import support_forked as forked
from tests.conftest import ingest, query, scalar
from transforms.synth.crush import generate_store
from warehouse.lake.layout import Layout
from warehouse.lake.scratch_dirs import OWNER, sweep
from warehouse.catalog.build import refresh
from warehouse.lake.ducklake import connect

INGEST = """
import sys
from transforms.provider import DiscoverOptions
from warehouse.land.ingest import discover_sources, ingest_all
from warehouse.lake.layout import Layout
from warehouse.catalog.build import build_warehouse
from warehouse.lake.ducklake import connect
sources, _ = discover_sources(DiscoverOptions(env={}, extra_roots={"crush": (sys.argv[1],)}, use_default=False))
layout = Layout.resolve(home=sys.argv[2], machine="vm")
ingest_all(sources, layout, full_refresh=True, workers=1)
build_warehouse(layout.lake, layout.warehouse)  # a kill may land in the merge too
"""


def data_files(layout: Layout) -> dict[str, bytes]:
    """The landed files (the run log aside) and every table's rows, as readers see them."""
    landed = {str(p.relative_to(layout.lake)): p.read_bytes() for p in layout.lake.glob("_landing/*/*/*/*/*.parquet")}
    tables = {t: sorted(query(layout, f"SELECT * EXCLUDE (machine) FROM {t}"), key=repr)
              for t in ("sessions", "messages", "parts", "tool_calls", "file_versions", "usage", "daily_costs")}
    return {"landed": {rel.split("/", 2)[2]: data for rel, data in landed.items()}, **tables}


def _kill_and_converge(tmp_path, kills: int, seed: int):
    store = generate_store(tmp_path / "crush", projects=8, sessions_per_project=40, seed=seed)
    reference = Layout.resolve(home=tmp_path / "reference", machine="vm")
    ingest(reference, roots=[store.global_dir])
    crashed = Layout.resolve(home=tmp_path / "crashed", machine="vm")
    tmp = tmp_path / "tmp"  # where the killed runs' snapshots stay (warehouse.lake.scratch_dirs)
    tmp.mkdir()
    rng = random.Random(seed)
    killed_mid_run = 0
    for _ in range(kills):
        proc = forked.code(INGEST, store.global_dir, crashed.home, env={**os.environ, "TMPDIR": str(tmp)})
        time.sleep(rng.uniform(0.4, 1.4))  # forked with its imports done: the whole wait is the ingest's
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed_mid_run += 1
        proc.wait()
        # a reader right now: every landed file is whole, every file the published catalog
        # names is whole, and the tables answer (a merge killed mid-write may leave files the
        # catalog never committed: no reader sees them)
        for path in crashed.lake.glob("_landing/**/*.parquet"):
            pq.read_metadata(path)
        if crashed.warehouse.exists():
            with connect(crashed.warehouse) as con:
                for table in ("sessions", "messages", "parts"):
                    for (path,) in con.execute(f"SELECT data_file FROM ducklake_list_files('lake', '{table}')").fetchall():
                        pq.read_metadata(path)
        if crashed.lake.exists():
            refresh(crashed.lake, crashed.warehouse, marts=False)  # the tables answer (the runs build the marts)
            assert scalar(crashed, "SELECT COUNT(*) FROM messages") >= 0
    summary = ingest(crashed, roots=[store.global_dir])  # an ordinary run after the crashes
    assert all(r.status in ("ok", "unchanged") for r in summary.results)
    assert data_files(crashed) == data_files(reference)
    assert not any(crashed.staging_dir.rglob("*")) if crashed.staging_dir.exists() else True
    # every folder a killed run left is known to be dead (but for one killed before it could lock
    # it, a window of microseconds: that one waits a day)
    sweep(tmp, min_age_s=0)
    assert not [p for p in tmp.iterdir() if (p / OWNER).exists()]
    return killed_mid_run


def test_sigkill_during_ingest_then_converge(tmp_path):
    assert _kill_and_converge(tmp_path, kills=4, seed=11) >= 1


@pytest.mark.slow
def test_sigkill_during_ingest_many_times(tmp_path):
    assert _kill_and_converge(tmp_path, kills=30, seed=12) >= 10
