"""Shared fixtures: real crush.db files, a real lake in tmp_path, real DuckDB queries."""

from pathlib import Path

import pytest

from transforms.crush.synth import create_crush_db
from transforms.provider import DiscoverOptions
from warehouse.ingest import discover_sources, ingest_all
from warehouse.layout import Layout
from warehouse.views import build_warehouse, connect

T0 = 1767225600  # 2026-01-01T00:00:00Z, in seconds as Crush writes it


@pytest.fixture
def layout(tmp_path) -> Layout:
    return Layout.resolve(home=tmp_path / "home")


class Project:
    """A project directory with a Crush data dir and an open crush.db."""

    def __init__(self, root: Path, name: str, stage: int = 7):
        self.path = root / name
        self.data_dir = self.path / ".crush"
        self.data_dir.mkdir(parents=True)
        self.db = self.data_dir / "crush.db"
        self.conn = create_crush_db(self.db, stage)

    def close(self):
        self.conn.commit()
        self.conn.close()


@pytest.fixture
def project(tmp_path):
    made = []

    def make(name="proj", stage=7) -> Project:
        p = Project(tmp_path / "projects", name, stage)
        made.append(p)
        return p

    yield make
    for p in made:
        try:
            p.conn.close()
        except Exception:
            pass


def ingest(layout: Layout, *stores, roots=(), force=False, codewhale_homes=(), workers=1):
    """Discover the named stores only (never the machine's own data) and ingest them.
    One worker by default, so that monkeypatched code is the code that runs."""
    options = DiscoverOptions(
        env={},
        extra_stores={"crush": tuple(map(str, stores))},
        extra_roots={"crush": tuple(map(str, roots)), "codewhale": tuple(map(str, codewhale_homes))},
        use_default=False,
    )
    sources, problems = discover_sources(options)
    summary = ingest_all(sources, layout, force=force, problems=problems, workers=workers)
    build_warehouse(layout.lake, layout.warehouse)
    return summary


def query(layout: Layout, sql: str, *params):
    with connect(layout.warehouse) as con:
        return con.execute(sql, list(params)).fetchall()


def scalar(layout: Layout, sql: str, *params):
    return query(layout, sql, *params)[0][0]
