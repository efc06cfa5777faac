"""Commands in processes of their own, forked from one that has imported agentlake already.

A test whose point is the process boundary (two machines at once, a signal, a SIGKILL) needs a
process per command, and a new interpreter pays its imports (Dagster, DuckDB, pyarrow) each time.
The standard library's forkserver imports them once per test worker and forks each command from
there: the command gets its own pid, memory, environment, working directory, signals and exit
status, as `python -m pipelines.cli` does. Tests where the interpreter's own start is the point
(a scheduler's environment, the installed entry point, a query on standard input) still start one.

`context()` is that forkserver's multiprocessing context, for a test's own processes;
`cli(ARGS, env=..., cwd=...)` stands for `subprocess.Popen([sys.executable, "-m", "pipelines.cli",
*ARGS], stdout=PIPE, stderr=PIPE, text=True, ...)`, `code(CODE, ARGS, ...)` for `python -c CODE
ARGS`, and `run_cli(...)` and `finished(...)` for `subprocess.run(..., capture_output=True, text=True)`. A command's
output goes to files (read when it ends): there is no pipe to read while it runs."""

import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# what the commands import, once per worker: the CLI, the Dagster definitions (and with them the
# landing, the merge and every agent), DuckDB and Arrow
PRELOAD = ["pipelines.cli", "pipelines.commands", "pipelines.runner", "pipelines.definitions", "duckdb",
           "pyarrow.parquet", "tests.support_forked"]
_STARTED: dict = {}
_ENV_AT_START = dict(os.environ)  # the forkserver starts with the session's environment, not a test's


def context():
    if "context" not in _STARTED:
        from multiprocessing import forkserver

        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        saved_env, saved_cwd = dict(os.environ), os.getcwd()
        os.environ.clear()
        os.environ.update(_ENV_AT_START)
        os.chdir(REPO)  # a test's folder may be gone before the server is
        try:
            forkserver.ensure_running()
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
        _STARTED["context"] = context
    return _STARTED["context"]


def _child(argv: list[str], code: str | None, env: dict, cwd: str, out: str, err: str, new_session: bool) -> None:
    """In the forked process: the environment, folder and output files, then the command as
    `python -m pipelines.cli` (or `python -c`) runs it; its exit status is the process's."""
    if new_session:  # Popen's start_new_session: a group of its own, as a terminal's job
        os.setsid()
    from multiprocessing import forkserver, resource_tracker

    # the command's own workers are its children, tracked by a tracker of its own, as in a new
    # interpreter: not the test worker's forkserver and tracker, which this process inherited
    resource_tracker._resource_tracker = resource_tracker.ResourceTracker()
    forkserver._forkserver = forkserver.ForkServer()
    for fd, path in ((1, out), (2, err)):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    tempfile.tempdir = None  # $TMPDIR as the command's environment has it
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    import atexit

    try:
        if code is None:
            from pipelines import cli

            sys.argv = [cli.__file__, *argv]
            cli.entry()
        else:
            sys.argv = ["-c", *argv]
            exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})
    finally:
        atexit._run_exitfuncs()  # as an interpreter's exit runs them; the forked one ends with os._exit


class Forked:
    """A forked command, with the part of `subprocess.Popen`'s interface the tests use."""

    def __init__(self, argv: list[str], code: str | None, env: dict | None, cwd, new_session: bool = False) -> None:
        self.args = [sys.executable, *(["-c", code] if code is not None else ["-m", "pipelines.cli"]), *argv]
        self._out = tempfile.NamedTemporaryFile(prefix="forked-out-", delete=False).name
        self._err = tempfile.NamedTemporaryFile(prefix="forked-err-", delete=False).name
        self._process = context().Process(target=_child, args=(
            [str(a) for a in argv], code, {k: str(v) for k, v in (os.environ if env is None else env).items()},
            str(cwd or os.getcwd()), self._out, self._err, new_session))
        self._process.start()
        self.pid = self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self._process.exitcode

    def stderr_so_far(self) -> str:
        """What the process has written to stderr until now (it may still be running)."""
        return Path(self._err).read_text(errors="replace")

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        texts = []
        for path in (self._out, self._err):
            texts.append(Path(path).read_text(errors="replace"))
            os.unlink(path)
        return texts[0], texts[1]

    def send_signal(self, sig: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def cli(*args, env: dict | None = None, cwd=None, new_session: bool = False) -> Forked:
    """`python -m pipelines.cli ARGS` in a forked process (`env`: its whole environment)."""
    return Forked(list(args), None, env, cwd, new_session)


def code(source: str, *args, env: dict | None = None, cwd=None, new_session: bool = False) -> Forked:
    """`python -c SOURCE ARGS` in a forked process."""
    return Forked(list(args), source, env, cwd, new_session)


def finished(forked: Forked, timeout: float = 300) -> subprocess.CompletedProcess:
    """`forked` waited for: what `subprocess.run(..., capture_output=True, text=True)` returns."""
    try:
        out, err = forked.communicate(timeout)
    except subprocess.TimeoutExpired:
        forked.kill()
        raise
    return subprocess.CompletedProcess(forked.args, forked.returncode, out, err)


def run_cli(*args, env: dict | None = None, cwd=None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`cli`, waited for."""
    return finished(cli(*args, env=env, cwd=cwd), timeout)
