"""What the benchmarks share: the generated corpus's options (benchmarks/run.py's `_corpus`
reads them), landing and merging it with the library, and timing a call."""

import time
from pathlib import Path


def corpus_arguments(ap, projects: int, repeat: int) -> None:
    """The corpus's size and seed, the repeats, and where to keep it, on the parser `ap`."""
    ap.add_argument("--projects", type=int, default=projects)
    ap.add_argument("--sessions", type=int, default=40, help="root sessions per project")
    ap.add_argument("--days", type=int, default=180, help="days each project's sessions spread over")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=repeat)
    ap.add_argument("--workdir", help="keep the corpus here (default: a temp dir)")


def ingest_corpus(corpus: Path, layout):
    """Land the corpus's Crush stores and merge them (the search index too), with the library;
    returns the merge's result."""
    from transforms.provider import DiscoverOptions
    from warehouse.catalog.build import refresh
    from warehouse.land.ingest import discover_sources, ingest_all

    sources, _ = discover_sources(DiscoverOptions(env={}, extra_roots={"crush": (str(corpus),)}, use_default=False))
    ingest_all(sources, layout)
    return refresh(layout.lake, layout.warehouse)


def timed(call):
    """(seconds, result) of `call()`."""
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result
