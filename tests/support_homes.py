"""Homes that tests in several modules build the same way: each is built once per session
(`built_once`) by the CLI as a user runs it, and a test that writes copies it (`copy_home`)."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import T0, Project, run_cli
from transforms.synth.crush import add_message, add_session
from transforms.synth.crush_parts import text_part

ONE_SESSION_COST = 0.125  # the one session's cost in `one_session_home`


@dataclass
class Built:
    home: Path  # the agentlake home (lake and catalog)
    dagster: Path  # the Dagster instance its ingest ran in
    err: str  # what the building command said on stderr


def _check(ran) -> str:
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return ran.stderr


def one_session_home(built_once) -> Built:
    """`agentlake ingest --no-default --db` of one Crush project, `cli-proj`, holding one session
    (cost ONE_SESSION_COST, one user message), with DAGSTER_HOME set outside the home."""
    def build(root: Path) -> Built:
        p = Project(root / "projects", "cli-proj")
        add_session(p.conn, "s", title="t", created_at=T0, cost=ONE_SESSION_COST)
        add_message(p.conn, "m", "s", "user", [text_part("hi")], created_at=T0)
        p.close()
        err = _check(run_cli("ingest", "--home", root / "home", "--no-default", "--db", p.db,
                             env={"DAGSTER_HOME": root / "dagster"}))
        return Built(root / "home", root / "dagster", err)

    return built_once("one-session-home", build)


def small_demo_home(built_once) -> Built:
    """`agentlake demo --home HOME --quiet --projects 1 --sessions 1` (seed 7) in a new home,
    DAGSTER_HOME unset (the home's own Dagster instance)."""
    def build(root: Path) -> Built:
        with pytest.MonkeyPatch.context() as mp:
            mp.delenv("DAGSTER_HOME", raising=False)
            err = _check(run_cli("demo", "--home", root / "home", "--quiet", "--projects", "1", "--sessions", "1"))
        return Built(root / "home", root / "home" / "dagster", err)

    return built_once("small-demo-home", build)
