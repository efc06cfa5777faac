"""The suite's own set-up (tests/conftest.py): the workers' allocator, preloaded into them alone."""

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest


def _options(workers: int, dist: str = "worksteal"):
    return SimpleNamespace(option=SimpleNamespace(numprocesses=workers, dist=dist))


@pytest.fixture
def controller(monkeypatch):
    """The environment as the controller has it before it starts its workers."""
    for name in ("PYTEST_XDIST_WORKER", "LD_PRELOAD", conftest.PRELOADED):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AGENTLAKE_TEST_MALLOC", "libexample.so.2")
    yield monkeypatch
    for name in ("LD_PRELOAD", conftest.PRELOADED):  # set by the code under test, not by monkeypatch
        os.environ.pop(name, None)


def test_the_controller_preloads_the_allocator_for_its_workers_only_when_it_starts_some(controller):
    conftest._preload_for_workers(_options(0))
    assert "LD_PRELOAD" not in os.environ  # `-n 0`: the tests run in this process, started already
    conftest._preload_for_workers(_options(2))
    assert os.environ["LD_PRELOAD"] == os.environ[conftest.PRELOADED] == "libexample.so.2"


def test_a_preload_set_by_the_user_is_left_as_it_is(controller):
    controller.setenv("LD_PRELOAD", "libmine.so")
    conftest._preload_for_workers(_options(2))
    assert os.environ["LD_PRELOAD"] == "libmine.so" and conftest.PRELOADED not in os.environ


def test_an_empty_choice_keeps_the_systems_allocator(controller):
    controller.setenv("AGENTLAKE_TEST_MALLOC", "")
    conftest._preload_for_workers(_options(2))
    assert "LD_PRELOAD" not in os.environ


def test_a_worker_takes_the_preload_out_of_what_it_passes_on(controller):
    controller.setenv("PYTEST_XDIST_WORKER", "gw0")
    controller.setenv("LD_PRELOAD", "libexample.so.2")
    controller.setenv(conftest.PRELOADED, "libexample.so.2")
    conftest._preload_for_workers(_options(2))
    assert "LD_PRELOAD" not in os.environ and conftest.PRELOADED not in os.environ


def test_this_worker_runs_on_the_allocator_and_what_it_starts_does_not():
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("no worker: `-n 0` runs the tests in the process pytest started")
    lib = conftest._worker_allocator()
    if lib is None:
        pytest.skip("no jemalloc on this machine (.ci/run installs Debian's libjemalloc2)")
    name = Path(lib).name.split(".so")[0]
    assert name in Path("/proc/self/maps").read_text()
    assert "LD_PRELOAD" not in os.environ
    child = subprocess.run([sys.executable, "-c", "print(open('/proc/self/maps').read())"],
                           capture_output=True, text=True, check=True)
    assert "libpython" in child.stdout or "python" in child.stdout
    assert name not in child.stdout
