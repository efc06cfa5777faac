"""Homes that tests in several modules build the same way: each is built once per session
(`built_once`) by the CLI as a user runs it, and a test that writes copies it (`copy_home`)."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import T0, Project, copy_home, run_cli
from transforms.synth.crush import add_message, add_session
from transforms.synth.crush_parts import text_part

ONE_SESSION_COST = 0.125  # the one session's cost in `one_session_home`


@dataclass
class Built:
    root: Path  # the folder it was built in
    home: Path  # the agentlake home (lake and catalog)
    dagster: Path  # the Dagster instance its ingest ran in
    code: int  # the building command's exit status (each test that reads the home checks it)
    out: str  # what it printed
    err: str  # what it said on stderr


def one_session_home(built_once) -> Built:
    """`agentlake ingest --no-default --db` of one Crush project, `cli-proj`, holding one session
    (cost ONE_SESSION_COST, one user message), with DAGSTER_HOME set outside the home."""
    def build(root: Path) -> Built:
        p = Project(root / "projects", "cli-proj")
        add_session(p.conn, "s", title="t", created_at=T0, cost=ONE_SESSION_COST)
        add_message(p.conn, "m", "s", "user", [text_part("hi")], created_at=T0)
        p.close()
        ran = run_cli("ingest", "--home", root / "home", "--no-default", "--db", p.db,
                      env={"DAGSTER_HOME": root / "dagster"})
        return Built(root, root / "home", root / "dagster", ran.returncode, ran.stdout, ran.stderr)

    return built_once("one-session-home", build)


def small_demo_home(built_once) -> Built:
    """`agentlake demo --home HOME --quiet --projects 1 --sessions 1` (seed 7) in a new home,
    DAGSTER_HOME unset (the home's own Dagster instance)."""
    def build(root: Path) -> Built:
        with pytest.MonkeyPatch.context() as mp:
            mp.delenv("DAGSTER_HOME", raising=False)
            ran = run_cli("demo", "--home", root / "home", "--quiet", "--projects", "1", "--sessions", "1")
        return Built(root, root / "home", root / "home" / "dagster", ran.returncode, ran.stdout, ran.stderr)

    return built_once("small-demo-home", build)


def quickstart_with_a_typo(built_once) -> Built:
    """`agentlake quickstart --quiet --codewhale-home ROOT/typo` with $AGENTLAKE_HOME set to
    ROOT/home, on a machine without agent data: it says which place it could not read, and
    generates and ingests the default demo (every agent, seed 7, 4 projects of 6 sessions) into
    ROOT/home/demo (`home`)."""
    def build(root: Path) -> Built:
        with pytest.MonkeyPatch.context() as mp:
            for var in ("DAGSTER_HOME", "AGENTLAKE_LAKE", "AGENTLAKE_WAREHOUSE"):
                mp.delenv(var, raising=False)
            ran = run_cli("quickstart", "--quiet", "--codewhale-home", root / "typo",
                          env={"AGENTLAKE_HOME": root / "home"})
        demo = root / "home" / "demo"
        return Built(root, demo, demo / "dagster", ran.returncode, ran.stdout, ran.stderr)

    return built_once("quickstart-with-a-typo", build, workers=True)  # its readers only read it


def copy_demo_home(template: Path, home: Path) -> Path:
    """`copy_home` for a home a demo was generated in: its config.toml, which names the demo's
    stores (for `agentlake dev`), names the copy's own, as a demo generated there wrote it. With
    the template's config.toml, the Dagster run of the copy's next ingest read the template's
    demo stores as well as the copy's."""
    copy_home(template, home)
    config = home / "config.toml"
    config.write_text(config.read_text().replace(str(template), str(home)))
    return home
