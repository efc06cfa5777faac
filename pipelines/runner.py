"""`agentlake ingest`: land the new and changed sources, then merge, in this process, without
Dagster (neither imported nor run: its start and its run were most of a small ingest's time,
docs/BENCHMARKS.md). Unchanged and skipped sources are settled without reading them; the others
are read by the worker pool. A run merges even when nothing changed: the run log is new, and a
shared lake may hold what other machines landed. Dagster learns of the run from what it leaves
in the home (pipelines.cli_runs), reported by a sensor of `agentlake dev`.

Also what the Dagster home needs from agentlake (`dagster_env`), and the partition batching the
sensor and the schedule share.
"""

import hashlib
import os
import signal
import sys
import threading
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from pipelines import cli_runs
from transforms.atomic import replace_file
from transforms.provider import DiscoverOptions
from transforms.providers import PROVIDERS
from warehouse.lake.ducklake import interrupted
from warehouse.lake.layout import Layout, NotACatalog, NotAHome
from warehouse.lake.storage import LakeUnreachable
from warehouse.land.ingest import (Run, RunSummary, clean_stale_staging, discover_sources, land,
                                   mark_pending, merged_since, new_run_id, pending_token, record_run, settle)
from warehouse.land.landing_files import landed_files

PROVIDER_WIDTH = max(map(len, PROVIDERS))  # the progress lines' columns line up


# the dagster.yaml earlier releases wrote (dagster_config), replaced by this one's; a file its user
# edited is kept (line ends as Python wrote them on Windows do not count as an edit). In agentlake's
# own Dagster home:
SHIPPED_BEFORE = {
    "a4f9f33bba6f6a780984eb76ddb9e517be2e42f4d4a6cc217dd2f1f4b7e83374",  # before the kept-open storage
    "59bef102a8ed8639489e1307bb1f70c04d1af931988fa1c8a32836daa9ea0d41",  # before the UI's pop-up was off
    "c94400e5e355846a9ee56ba0106d2c707d3cb7e4135034075b8b75b302239d06",  # while `ingest` wrote it too
}
# in a DAGSTER_HOME set elsewhere (the same text the first release wrote everywhere, then the text
# of the release before `ingest` stopped writing it)
SHIPPED_ELSEWHERE_BEFORE = {"a4f9f33bba6f6a780984eb76ddb9e517be2e42f4d4a6cc217dd2f1f4b7e83374",
                            "8a172275027f5f175409bca0bc50fee823fd4fd6607320b64467d0ddceaa6109"}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes().replace(b"\r\n", b"\n")).hexdigest()


def dagster_config(own: bool) -> str:
    """The dagster.yaml agentlake writes; in its own Dagster home, with Dagster's SQLite storage
    kept open (pipelines/dagster_storage.py). A DAGSTER_HOME set elsewhere may be shared with
    other projects' Dagster, which could not import that storage: it gets the rest only."""
    files = resources.files("pipelines")
    text = files.joinpath("dagster.yaml").read_text()
    return text + files.joinpath("dagster_storage.yaml").read_text() if own else text


def _own_home(layout: Layout, dagster_home) -> bool:
    """`dagster_home` is agentlake's own (the home's `dagster/`), not one the user set elsewhere."""
    return Path(dagster_home).expanduser().absolute() == layout.dagster_home.expanduser().absolute()


def dagster_env(layout: Layout) -> dict:
    """The environment for Dagster: a persistent DAGSTER_HOME (ours unless the user set one)."""
    env = dict(os.environ)
    home = Path(env.get("DAGSTER_HOME") or layout.dagster_home).expanduser().absolute()
    own = _own_home(layout, home)
    if home.exists() and not home.is_dir():  # a raw FileExistsError from mkdir (a trial)
        given = "$DAGSTER_HOME" if env.get("DAGSTER_HOME") else "the home's Dagster folder"
        raise NotAHome(f"the Dagster home {home} ({given}) is a file, not a folder: give a folder (Dagster makes "
                       "its files there)")
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists() or _sha256(config) in (SHIPPED_BEFORE if own else SHIPPED_ELSEWHERE_BEFORE):
        replace_file(config, dagster_config(own))  # an ingest beside this one may be reading it
    env["DAGSTER_HOME"] = str(home)
    env["AGENTLAKE_HOME"] = str(layout.home)
    return env


class PrintingReporter:
    def __init__(self, quiet: bool = False, stream=None):
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.results = []
        self.reported = set()
        self.done = 0
        self.total = 0

    def source_done(self, index, total, result) -> None:
        self.results.append(result)
        self.reported.add(result.source.partition_key)
        self.done += 1
        if self.quiet:
            return
        s = result.source
        detail = result.error or (landed(result.rows) if result.status == "ok" else "")
        width = len(str(self.total))
        print(f"[{self.done:>{width}}/{self.total}] {result.status:<9} {s.provider:<{PROVIDER_WIDTH}} {s.project:<24} "
              f"{detail} ({result.duration_s:.2f}s)", file=self.stream, flush=True)

    def merging(self, layout: Layout) -> None:
        """Said before the merge: its tables, marts and search index took seconds of silence after
        the last source's line (a heavy user's trial: 6 s after `[231/231]`)."""
        if not self.quiet:
            print(f"merging into {layout.warehouse} (tables, marts, search index) ...", file=self.stream, flush=True)


def landed(rows: dict) -> str:
    """What a source landed, for its progress line: its messages and parts; for an agent that
    records none (Antigravity keeps only its requests), its sessions and requests instead."""
    if rows.get("messages") or rows.get("parts") or not rows.get("usage"):
        return f"{rows.get('messages', 0):,} messages, {rows.get('parts', 0):,} parts"
    sessions, requests = rows.get("sessions", 0), rows["usage"]
    return f"{sessions:,} session{'s' if sessions != 1 else ''}, {requests:,} request{'s' if requests != 1 else ''}"


def contiguous_batches(keys: list[str], order: list[str]) -> list[list[str]]:
    """Group partition keys into runs of neighbours in the partition order.

    One Dagster run can cover a range of partitions, so a cold ingest (every key new, hence
    adjacent) is a single run, and a few changed sources are a few small runs.
    """
    position = {k: i for i, k in enumerate(order)}
    batches: list[list[str]] = []
    for key in sorted(keys, key=position.__getitem__):
        if batches and position[key] == position[batches[-1][-1]] + 1:
            batches[-1].append(key)
        else:
            batches.append([key])
    return batches


def partition_tags(batch: list[str]) -> dict:
    return {"dagster/partition": batch[0]} if len(batch) == 1 else {
        "dagster/asset_partition_range_start": batch[0], "dagster/asset_partition_range_end": batch[-1]}


def run_ingest(layout: Layout, options: DiscoverOptions, *, full_refresh: bool = False,
               quiet: bool = False) -> RunSummary:
    sources, problems = discover_sources(options)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    reporter = PrintingReporter(quiet)
    reporter.total = len(sources)
    summary = RunSummary(new_run_id(), problems=problems)
    try:
        landed = landed_files(layout) if layout.remote else None  # one listing, not a request per file
    except OSError as exc:  # a dead endpoint: one clear error now, not one per source after retries
        raise LakeUnreachable(str(layout.lake), exc) from None
    run = Run(layout, summary.run_id, full_refresh)
    read, merged = [], None  # the results of the sources read; the merge's
    try:
        with _signals_interrupt() as signalled:
            settled, to_run = settle(sources, run, landed)
            for result in settled:
                reporter.source_done(0, len(sources), result)
            problem = record_run(layout, summary.run_id, settled)
            if problem:
                summary.problems.append(problem)
            if to_run:
                _land(run, to_run, reporter, summary, read)
                reporter.merging(layout)
            merged = _merge(layout, summary, landed=bool(to_run), signalled=signalled)
        if signalled:  # one DuckDB turned into an error of its own, caught on the way
            raise KeyboardInterrupt
    finally:  # for Dagster's sensor, interrupted or not: what landed shows in `agentlake dev`
        summary.results = reporter.results
        landed_before = cli_runs.landed_by_a_stopped_run(layout, summary, merged)
        summary.landed_before = len(landed_before)
        summary.into_new_warehouse = bool(merged and merged.first)
        cli_runs.keep(layout, summary, read, merged, landed_before)
    return summary


def _land(run: Run, to_run: list, reporter: PrintingReporter, summary: RunSummary, results: list) -> None:
    """The sources to read, by the worker pool, each reported as it is done and appended to
    `results` (those done are there when a signal cuts the run off); their rows of the run log
    written once all are. What landed waits for the merge (`land`): a run killed before it is
    merged by the next."""
    clean_stale_staging(run.layout)
    for result in land(to_run, run):
        results.append(result)
        reporter.source_done(0, reporter.total, result)
    problem = record_run(run.layout, run.run_id, results)
    if problem:
        summary.problems.append(problem)
    elif results:  # the run log's own file waits for a merge too
        mark_pending(run.layout)


def _merge(layout: Layout, summary: RunSummary, landed: bool, signalled: list):
    """The merge of what landed (and of what other machines landed into a shared lake). One that
    fails is a `problem:` line of the run, after the sources it landed; with nothing landed, a
    lake that cannot be reached is an error of its own. A catalog refused stays an error, and a
    merge cut off by a signal ends the run as interrupted. Returns the merge's result, None when
    it failed."""
    from warehouse.catalog.build import configured_prices, refresh

    token = pending_token(layout)
    try:
        result = refresh(layout.lake, layout.warehouse, prices=configured_prices(layout), home=layout.home)
    except (NotACatalog, KeyboardInterrupt):  # said as errors by the CLI
        raise
    except LakeUnreachable as exc:
        if not landed:
            raise
        summary.problems.append(f"could not merge into the warehouse at {layout.warehouse}: {exc}")
        return None
    except Exception as exc:
        if signalled or interrupted(exc):  # DuckDB's "Query interrupted"
            raise KeyboardInterrupt from None
        summary.problems.append(f"could not merge into the warehouse at {layout.warehouse}: "
                                + " ".join(str(exc).split()))
        return None
    merged_since(layout, token)  # what landed is merged
    if result.repriced:  # `0 ok, 4 unchanged` alone hid it (a new user's trial)
        summary.notes.append(repriced(layout))
    if result.replaced_from:  # a mistyped --lake replaced a team's warehouse without a word (a trial)
        summary.notes.append(replaced_lake(layout, result.replaced_from))
    return result


def replaced_lake(layout: Layout, before: str) -> str:
    """What a merge into a warehouse made anew from another lake says (`ingest` and `merge` alike)."""
    import shlex

    return (f"the warehouse {layout.warehouse} was merged from the lake {before}: it is built anew from "
            f"{layout.lake}, without that lake's rows (`--lake {shlex.quote(before)}` reads it again)")


def repriced(layout: Layout) -> str:
    """What a merge that applied changed prices says (`ingest` and `merge` alike)."""
    from warehouse.lake.config import settings_file

    return f"the prices in {settings_file(layout)} changed: the history was priced again with them"


@contextmanager
def _signals_interrupt():
    """Ctrl-C and a scheduler's SIGTERM stop the run: each raises KeyboardInterrupt, the CLI exits
    130 and says `interrupted`, and what landed is merged by the next run (a merge cut off
    publishes nothing). DuckDB turns one that comes during a query into an error of its own
    ("Query interrupted"), which a merge may catch on its way, and one raised inside a garbage
    collector's callback is printed as ignored: the list yielded holds the signals that came (the
    run ends as interrupted all the same), and such an interrupt is not printed. Only in the main
    thread, where Python runs signal handlers."""
    noted: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return

    def interrupt(signo, _frame):
        noted.append(signo)
        raise KeyboardInterrupt

    def unraisable(info) -> None:
        if info.exc_type is None or not issubclass(info.exc_type, KeyboardInterrupt):
            previous_hook(info)

    previous = {signo: signal.signal(signo, interrupt) for signo in (signal.SIGINT, signal.SIGTERM)}
    previous_hook, sys.unraisablehook = sys.unraisablehook, unraisable
    try:
        yield noted
    finally:
        sys.unraisablehook = previous_hook
        for signo, handler in previous.items():
            signal.signal(signo, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
