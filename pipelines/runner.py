"""Run the Dagster assets in-process for the CLI, with progress and a summary.

Unchanged and skipped sources are settled without Dagster (it is not even imported when
nothing changed). Changed sources are materialised in their partitions of `landing` (one per
agent and project), neighbours in the partition order sharing one run; the last run also
merges them into the curated tables and the marts (a cold ingest is a single run). A run that
finds landed files not yet merged (a run killed before its merge) merges them even when no
source changed.
"""

import hashlib
import os
import sys
import warnings
from collections import defaultdict
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from transforms.atomic import replace_file
from transforms.provider import DiscoverOptions
from transforms.providers import PROVIDERS
from warehouse.lake.layout import Layout, NotACatalog
from warehouse.lake.locks import held
from warehouse.lake.storage import LakeUnreachable
from warehouse.land.ingest import INTERRUPTED, Run, RunSummary, SourceResult, discover_sources, new_run_id, record_run, settle
from warehouse.land.landing_files import landed_files

QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
PROVIDER_WIDTH = max(map(len, PROVIDERS))  # the progress lines' columns line up


# the dagster.yaml earlier releases wrote (dagster_config), replaced by this one's; a file its user
# edited is kept (line ends as Python wrote them on Windows do not count as an edit). In agentlake's
# own Dagster home:
SHIPPED_BEFORE = {
    "a4f9f33bba6f6a780984eb76ddb9e517be2e42f4d4a6cc217dd2f1f4b7e83374",  # before the kept-open storage
    "59bef102a8ed8639489e1307bb1f70c04d1af931988fa1c8a32836daa9ea0d41",  # before the UI's pop-up was off
}
# in a DAGSTER_HOME set elsewhere (the same text the first release wrote everywhere)
SHIPPED_ELSEWHERE_BEFORE = {"a4f9f33bba6f6a780984eb76ddb9e517be2e42f4d4a6cc217dd2f1f4b7e83374"}


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
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists() or _sha256(config) in (SHIPPED_BEFORE if own else SHIPPED_ELSEWHERE_BEFORE):
        replace_file(config, dagster_config(own))  # an ingest beside this one may be reading it
    env["DAGSTER_HOME"] = str(home)
    env["AGENTLAKE_HOME"] = str(layout.home)
    return env


class PrintingReporter:
    discovered = None  # (sources by partition key, problems): what the run lands (pipelines.defs.resources.Reporter)

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
        detail = result.error or (f"{result.rows.get('messages', 0):,} messages, {result.rows.get('parts', 0):,} parts"
                                  if result.status == "ok" else "")
        width = len(str(self.total))
        print(f"[{self.done:>{width}}/{self.total}] {result.status:<9} {s.provider:<{PROVIDER_WIDTH}} {s.project:<24} "
              f"{detail} ({result.duration_s:.2f}s)", file=self.stream, flush=True)


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
    INTERRUPTED.clear()  # an earlier run in this process that was interrupted (a notebook's) is not this one
    sources, problems = discover_sources(options)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    reporter = PrintingReporter(quiet)
    reporter.total = len(sources)
    reporter.discovered = ({s.partition_key: s for s in sources}, problems)
    summary = RunSummary(new_run_id(), problems=problems)
    try:
        landed = landed_files(layout) if layout.remote else None  # one listing, not a request per file
    except OSError as exc:  # a dead endpoint: one clear error now, not one per source after retries
        raise LakeUnreachable(str(layout.lake), exc) from None
    settled, to_run = settle(sources, Run(layout, summary.run_id, full_refresh), landed)  # without Dagster
    for result in settled:
        reporter.source_done(0, len(sources), result)
    problem = record_run(layout, summary.run_id, settled)
    if problem:
        summary.problems.append(problem)
    pending = layout.merge_due
    if to_run or pending:
        _materialise(CliRun(layout, options, sources, reporter, summary, full_refresh), to_run)
    else:
        # only the run log is new (and, on a shared lake, what other machines landed): merged
        # without Dagster; the marts are rebuilt only when some source's rows changed
        _merge_alone(layout, summary)
    summary.results = reporter.results
    return summary


def _merge_alone(layout: Layout, summary: RunSummary) -> None:
    """The merge of a run with nothing to land: one that fails is a `problem:` line of the run, as
    the merge in Dagster's run is (a lake that cannot be reached or is refused stays an error)."""
    from warehouse.catalog.build import configured_prices, refresh

    try:
        refresh(layout.lake, layout.warehouse, prices=configured_prices(layout))
    except (LakeUnreachable, NotACatalog, KeyboardInterrupt):  # said as errors by the CLI
        raise
    except Exception as exc:
        if type(exc).__name__ == "InterruptException":  # DuckDB's Ctrl-C
            raise KeyboardInterrupt from None
        summary.problems.append(f"could not merge into the warehouse at {layout.warehouse}: "
                                + " ".join(str(exc).split()))


class DagsterStorageError(RuntimeError):
    """Dagster's own storage (runs, events) cannot be written: a full or read-only disk."""


@dataclass
class CliRun:
    """What the CLI's Dagster runs share: the home, what discovery found, and where results go."""

    layout: Layout
    options: DiscoverOptions
    sources: list  # every source found (the partitions to register), not only those to read
    reporter: PrintingReporter
    summary: RunSummary
    full_refresh: bool


def _materialise(cli: CliRun, to_run: list) -> None:
    """The changed sources' partitions in as few runs as possible, then the tables and marts.
    Dagster's storage failing (a full disk under DAGSTER_HOME) is said in one line, not a traceback."""
    home = os.environ.get("DAGSTER_HOME") or str(cli.layout.dagster_home)
    try:
        _materialise_runs(cli, to_run)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        if not _is_storage_error(exc):
            raise
        raise DagsterStorageError(f"cannot write Dagster's storage in {home}: {_root_cause(exc)} "
                                  "(free space there, or set DAGSTER_HOME to another disk); "
                                  "what was landed is merged by the next run") from None


def _is_storage_error(exc: BaseException) -> bool:
    import sqlite3

    seen = exc
    while seen is not None:
        if isinstance(seen, (sqlite3.OperationalError, OSError)) or type(seen).__name__ == "OperationalError":
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _root_cause(exc: BaseException) -> str:
    while exc.__cause__ or exc.__context__:
        exc = exc.__cause__ or exc.__context__
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _materialise_runs(cli: CliRun, to_run: list) -> None:
    """Dagster's runs with this home's DAGSTER_HOME, and the caller's put back after: left set, a
    second ingest in the same process (a notebook, the tests) ran in the first one's instance."""
    previous = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = dagster_env(cli.layout)["DAGSTER_HOME"]
    try:
        _materialise_in_dagster(cli, to_run)
    finally:
        if previous is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = previous


def _materialise_in_dagster(cli: CliRun, to_run: list) -> None:
    warnings.filterwarnings("ignore")  # Dagster's beta/preview notices are not for end users
    import dagster as dg

    from pipelines.defs.lake.assets import landing
    from pipelines.defs.resources import AgentlakeResource
    from pipelines.defs.warehouse.assets import tables_and_marts

    layout, options, sources, reporter, summary = cli.layout, cli.options, cli.sources, cli.reporter, cli.summary
    resource = AgentlakeResource(
        home=str(layout.home), lake=str(layout.lake), warehouse=str(layout.warehouse),
        machine=layout.machine, user=layout.user, team=layout.team,
        extra_stores={p: list(v) for p, v in options.extra_stores.items()},
        extra_roots={p: list(v) for p, v in options.extra_roots.items()},
        use_default=options.use_default,
    )
    by_partition = defaultdict(list)
    for source in to_run:
        by_partition[source.dagster_partition].append(source)
    home = os.environ["DAGSTER_HOME"]
    with _instance_with_partitions(dg, home, sources, own=_own_home(layout, home)) as instance, _signals_watched() as signalled:
        batches = contiguous_batches(list(by_partition), instance.get_dynamic_partitions("sources"))
        tables = None
        for n, batch in enumerate(batches, 1):
            todo = [s for key in batch for s in by_partition[key]]
            # the run reads these sources only: the unchanged ones of its partitions are settled
            # (no list when it is all of them: a cold ingest's run config stays small)
            in_batch = set(batch)
            whole = len(todo) == sum(s.dagster_partition in in_batch for s in sources)
            config = {"full_refresh": cli.full_refresh, "run_id": summary.run_id,
                      "sources": [] if whole else [s.partition_key for s in todo]}
            # the last run merges too: a run of its own costs Dagster's run set-up and a dozen events
            last = n == len(batches)
            run = dg.materialize(
                [landing, tables_and_marts] if last else [landing], instance=instance, raise_on_error=False,
                tags=partition_tags(batch), resources={"agentlake": resource, "reporter": reporter},
                run_config={**QUIET_LOGS, "ops": {"landing": {"config": config}}},
            )
            if INTERRUPTED.is_set() or _interrupted(run) or signalled():
                raise KeyboardInterrupt  # the CLI exits 130; what landed is merged by the next run
            for source in todo:
                if source.partition_key not in reporter.reported:  # the run died before reaching it
                    reporter.source_done(0, len(sources), SourceResult(
                        source, "failed", error=f"Dagster run {run.run_id} failed before ingesting the source"))
            if last and _merged(run):
                tables = run
        if tables is None:  # nothing to land (a run killed before its merge), or the landing step failed
            tables = dg.materialize([tables_and_marts], instance=instance, resources={"agentlake": resource},
                                    run_config=QUIET_LOGS, raise_on_error=False)
        if _interrupted(tables) or signalled():
            raise KeyboardInterrupt
        if not tables.success:  # (a merge that succeeded took the pending marker away itself)
            summary.problems.append(f"could not merge into the warehouse at {layout.warehouse}: "
                                    + _failure(tables))


@contextmanager
def _signals_watched():
    """Yields whether Ctrl-C (SIGINT) or SIGTERM came since. Dagster handles both while a run
    executes, and what then happens depends on the moment: a step fails (DuckDB's "Query
    interrupted", which reads as a failed merge), or the interrupt is raised inside a garbage
    collector's callback, printed as ignored, and the run goes on to the end. The interpreter
    writes each signal it handles to its wakeup fd, whichever handler runs: read after each run,
    any of them ends the ingest as interrupted (exit 130). Dagster's interrupts raised where
    nobody can catch them are not printed meanwhile."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    read_end, write_end = os.pipe()
    for fd in (read_end, write_end):
        os.set_blocking(fd, False)
    previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    previous_hook = sys.unraisablehook
    seen = set()

    def signalled() -> bool:
        try:
            while data := os.read(read_end, 512):
                seen.update(data)
        except BlockingIOError:
            pass
        return bool(seen & {signal.SIGINT, signal.SIGTERM})

    def unraisable(info) -> None:
        if info.exc_type is None or "Interrupt" not in info.exc_type.__name__:
            previous_hook(info)

    sys.unraisablehook = unraisable
    try:
        yield signalled
    finally:
        sys.unraisablehook = previous_hook
        signal.set_wakeup_fd(previous_fd)
        os.close(read_end)
        os.close(write_end)


def _merged(run) -> bool:
    """The run's merge step ran, whether or not it succeeded (its landing step failing skips it)."""
    return any(e.step_key == "tables_and_marts" and (e.is_step_success or e.is_step_failure) for e in run.all_events)


@contextmanager
def _instance_with_partitions(dg, home: str, sources, *, own: bool = True):
    """The CLI's instance, with a partition per agent and project found. Two ingests can share one
    DAGSTER_HOME (the user's own, or a scheduled run beside a manual one), and Dagster is not safe
    there: its first use creates its tables, and its partition add reads then inserts. Both are
    done under a lock in that home; the runs themselves may overlap."""
    with ExitStack() as stack:
        with held(Path(home) / ".agentlake-setup.lock", required=False):
            instance = stack.enter_context(_cli_instance(dg, home))
            _complete_storage(instance, home, own)
            _register_partitions(dg, instance, sources)
        yield instance


def _complete_storage(instance, home: str, own: bool) -> None:
    """A first run killed while Dagster created its tables leaves its event index without the
    partitions table (and without a schema version), and every later run failed on it. In
    agentlake's own Dagster home the tables are completed (`dagster instance migrate`); a
    DAGSTER_HOME set elsewhere is the user's, maybe shared with an older Dagster: said, not done."""
    has_table = getattr(instance.event_log_storage, "has_table", None)
    if has_table is None or has_table("dynamic_partitions"):
        return
    if not own:
        raise DagsterStorageError(
            f"Dagster's storage in {home} has no partitions table (a first run interrupted while it "
            f"was created, or an older Dagster's storage): run `DAGSTER_HOME={home} dagster instance "
            "migrate`, then ingest again")
    instance.upgrade(print_fn=lambda *_: None)


def _register_partitions(dg, instance, sources) -> None:
    """A partition per agent and project found; an older version's per-source partitions deleted
    (the nightly run over every partition would fail on them)."""
    from pipelines.defs.partitions import partition_changes

    registered = set(instance.get_dynamic_partitions("sources"))
    for request in partition_changes(registered, {s.dagster_partition for s in sources}):
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions("sources", list(request.partition_keys))
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition("sources", key)


# The CLI's runs print their own progress: no per-step stdout capture, which starts a `tail`
# and a Python watcher process for every step (slow, and a traceback on every Ctrl-C).
NO_COMPUTE_LOGS = {"compute_logs": {"module": "dagster._core.storage.noop_compute_log_manager",
                                    "class": "NoOpComputeLogManager"}}


def _cli_instance(dg, home: str):
    """The persistent instance (runs and events show in `agentlake dev`), minus compute logs."""
    from dagster._core.instance.ref import InstanceRef

    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(home, overrides=NO_COMPUTE_LOGS))


def _interrupted(result) -> bool:
    """Dagster catches Ctrl-C inside a run and reports a failed step instead of raising."""
    for event in result.all_events:
        error = getattr(event.event_specific_data, "error", None) if event.is_failure else None
        if error is not None and ("Interrupt" in (error.cls_name or "") or "KeyboardInterrupt" in error.message):
            return True
    return False


def _failure(result) -> str:
    for event in result.all_events:
        if event.is_failure and event.event_specific_data is not None:
            error = getattr(event.event_specific_data, "error", None)
            if error is not None:
                # Dagster's own wrappers say only that a step failed: what went wrong is the first
                # cause that is not one of them (ours say what to do; DuckDB's below them do not)
                while error.cause is not None and (error.cls_name or "").startswith("Dagster"):
                    error = error.cause
                lines = error.message.strip().splitlines()
                if not lines:
                    return error.cls_name or "see the Dagster run's log"
                # "warehouse.lake.storage.EmptyLake: the warehouse ...": the sentence, not the class's path
                name, sep, said = lines[0].partition(": ")
                return said if sep and error.cls_name and name.split(".")[-1] == error.cls_name else lines[0]
    return "see the Dagster run's log"
