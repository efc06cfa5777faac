"""Two demos of other seeds are other sessions. A new user's report: two team members ran
`agentlake demo` with seeds 7 and 11 and landed them in one team lake as two machines; every
ingest and merge then said `7 root sessions landed by ana-laptop were landed by bob-desktop too`,
the warning of a store copied to another machine (warehouse.catalog.checks.copied_sessions: the
same agent, session id and start). Codebuff's chat ids are their start times, and the demo's
Codebuff and Goose sessions started at the same times whatever the seed. The warning also sent
the reader to a README section that is in docs/TEAM.md."""

import dataclasses
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from transforms.synth import aider, codebuff, cursor, goose
from transforms.providers import PROVIDERS
from transforms.synth.demo import generate_demo

# agents whose own ids repeat across machines: Goose numbers a day's sessions (`20260302_1`);
# Aider's come from the history file's path and line (the same path in both demos here)
IDS_REPEAT = {"goose", "aider"}


# -- each generator's sessions, read from the files it wrote -----------------------------------

def codebuff_sessions(home: Path) -> set:
    """The chats' ids: their folders' names, the chats' start times (`chat_id`)."""
    return {p.name for p in (home / "projects").glob("*/chats/*")}


def cursor_sessions(home: Path) -> set:
    """Transcript ids: `<uuid>.txt`, `<uuid>/<uuid>.jsonl` and its `subagents/<id>.jsonl`."""
    return {p.stem for p in (home / "projects").rglob("agent-transcripts/**/*") if p.is_file()}


def goose_sessions(home: Path) -> set:
    """(id, start) of sessions.db's rows and of each JSONL file's session."""
    with sqlite3.connect(home / "sessions" / "sessions.db") as conn:
        rows = set(conn.execute("SELECT id, created_at FROM sessions").fetchall())
    conn.close()
    for path in (home / "sessions").glob("*.jsonl"):
        first = json.loads(path.read_text().splitlines()[1])  # after the metadata line
        rows.add((path.stem, first["created"]))
    return rows


def aider_sessions(home: Path) -> set:
    """(history file, line, start) of each run: the reader's id is the file and the line."""
    out = set()
    for path in home.rglob(aider.HISTORY_NAME):
        for line, text in enumerate(path.read_text().splitlines(), 1):
            if text.startswith("# aider chat started at "):
                out.add((str(path.relative_to(home)), line, text.removeprefix("# aider chat started at ")))
    return out


GENERATORS = {"codebuff": (codebuff, codebuff_sessions), "cursor": (cursor, cursor_sessions),
              "goose": (goose, goose_sessions), "aider": (aider, aider_sessions)}


@pytest.mark.parametrize("agent", sorted(GENERATORS))
def test_a_generator_s_sessions_follow_its_seed(tmp_path, agent):
    """The same seed writes the same sessions; another seed none of them (ids, or for an agent
    whose ids repeat across machines, ids and starts), in the same place. Seeds 7 and 11 are the
    report's; Aider's runs of seeds 7 and 13 started at the same hours."""
    module, sessions = GENERATORS[agent]
    written = {}
    for seed in (7, 11, 13, 7):
        home = tmp_path / "home"  # one path: what differs is the seed alone
        shutil.rmtree(home, ignore_errors=True)
        module.generate_home(home, sessions=6, seed=seed)
        assert written.setdefault(seed, sessions(home)) == sessions(home)  # seed 7 twice: the same
    assert len(written[7]) >= 6
    for other in (11, 13):
        assert written[7].isdisjoint(written[other]), (other, written[7] & written[other])


# -- two demos in one team lake ----------------------------------------------------------------

def _land(demo_root: Path, seed: int, lake: Path, home: Path, machine: str):
    """`agentlake demo --seed SEED` written at `demo_root` and landed in the team's `lake` by
    `machine`, then that machine's merge of the whole lake: its result."""
    from transforms.provider import DiscoverOptions
    from warehouse.catalog.build import refresh
    from warehouse.land.ingest import discover_sources, ingest_all
    from warehouse.lake.layout import Layout

    shutil.rmtree(demo_root, ignore_errors=True)
    demo = generate_demo(demo_root, projects=2, sessions=3, seed=seed)  # small: every agent, a few sessions
    sources, _ = discover_sources(DiscoverOptions(env={}, extra_roots=demo.roots(), use_default=False))
    layout = dataclasses.replace(Layout.resolve(home=home, lake=lake), machine=machine, user=machine.split("-")[0])
    ingest_all(sources, layout, workers=1)
    return refresh(layout.lake, layout.warehouse, marts=False), layout


def _roots(layout) -> dict[str, set]:
    """machine -> its root sessions' (agent, id, start)."""
    from warehouse.lake.ducklake import connect

    out: dict[str, set] = {}
    with connect(layout.warehouse, ours=True) as con:
        for machine, provider, sid, start in con.execute(
                "SELECT machine, provider, session_id, created_at FROM sessions WHERE is_root").fetchall():
            out.setdefault(machine, set()).add((provider, sid, start))
    return out


def test_two_seeds_demos_in_one_team_lake_are_no_copies(tmp_path):
    lake, demo_root = tmp_path / "share", tmp_path / "demo"  # the same demo path on both machines
    first, _ = _land(demo_root, 7, lake, tmp_path / "ana", "ana-laptop")
    assert first.problems == []
    second, layout = _land(demo_root, 11, lake, tmp_path / "bob", "bob-desktop")
    assert [p for p in second.problems if "landed by" in p] == []

    roots = _roots(layout)
    ana, bob = roots["ana-laptop"], roots["bob-desktop"]
    agents = {provider for provider, _, _ in ana}
    assert len(agents) == len(PROVIDERS) and agents == {provider for provider, _, _ in bob}
    assert ana.isdisjoint(bob), sorted(ana & bob)  # what copied_sessions matches
    for agent in sorted(agents - IDS_REPEAT):  # ids of their own: other seeds, other ids
        ids = [{sid for provider, sid, _ in side if provider == agent} for side in (ana, bob)]
        assert ids[0].isdisjoint(ids[1]), (agent, ids[0] & ids[1])
    # (a real copy is still said: tests/test_team_mistakes.py)
