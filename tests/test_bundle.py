"""Agents that keep a file per session are landed as one source per project (transforms.bundle):
real Codex and Gemini homes, a real lake, real DuckDB."""

import re
from datetime import datetime, timezone

import pytest

from tests.conftest import ingest_tables, options_for, query, scalar
from transforms.bundle import Bundle
from transforms.codex.provider import CodexProvider
from transforms.synth.codex import RolloutBuilder, generate_home
from transforms.providers import PROVIDERS
from warehouse.land.ingest import landed_files
from warehouse.lake.layout import LANDING


def _totals(layout):
    """Rows per table, tokens, and the cost to the nano-dollar (a sum's last bits follow its order)."""
    return query(layout, "SELECT COUNT(*), ROUND(SUM(cost_usd), 9), SUM(total_tokens) FROM sessions"), \
        query(layout, "SELECT COUNT(*) FROM messages"), query(layout, "SELECT COUNT(*) FROM parts")


def _new_session(home, cwd: str) -> RolloutBuilder:
    new = RolloutBuilder("0000aaaa-0000-4000-8000-000000000001", start=datetime(2026, 2, 1, tzinfo=timezone.utc),
                         cwd=cwd)
    new.turn("gpt-5.3-codex")
    new.prompt("one more")
    new.say("done")
    new.tokens(1000, 0, 10)
    new.write(home)
    return new


@pytest.fixture
def reads(monkeypatch):
    """The Codex sources (sessions) actually read by each run."""
    seen = []
    extract = CodexProvider.extract

    def counted(self, source, *args, **kwargs):
        seen.append(source.identity)
        return extract(self, source, *args, **kwargs)

    monkeypatch.setattr(CodexProvider, "extract", counted)
    return seen


def test_a_project_is_one_source_and_its_totals_are_the_homes(layout, tmp_path, reads):
    truth = generate_home(tmp_path / "codex", sessions=9)
    summary = ingest_tables(layout, homes={"codex": [tmp_path / "codex"]})
    assert [type(r.source) for r in summary.results] == [Bundle, Bundle]  # two workspaces
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == truth.sessions
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == truth.messages
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(truth.cost_usd)
    assert dict(query(layout, "SELECT project_path, SUM(cost_usd) FROM sessions WHERE is_root GROUP BY 1")) == \
        pytest.approx(dict(truth.by_workspace))
    # one landing folder per project, and every row says so
    folders = {rel.rsplit("/", 1)[0] for rel in landed_files(layout) if "/_runs/" not in rel}
    assert len(folders) == 2
    assert query(layout, "SELECT COUNT(DISTINCT source_id) FROM messages") == [(2,)]
    assert len(reads) == len(set(reads)) == 9  # each root session read once, its sub-agents with it


def test_a_new_session_reads_that_session_only(layout, tmp_path, reads):
    home = tmp_path / "codex"
    generate_home(home, sessions=6, workspaces=("/home/dev/shop",))
    ingest_tables(layout, homes={"codex": [home]})
    before = _totals(layout)
    reads.clear()
    new = _new_session(home, "/home/dev/shop")
    summary = ingest_tables(layout, homes={"codex": [home]})
    assert reads == [new.sid]
    assert [r.status for r in summary.results] == ["ok"] and summary.results[0].reconciled
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == before[0][0][0] + 1
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == before[1][0][0] + 2
    reads.clear()
    again = ingest_tables(layout, homes={"codex": [home]})
    assert reads == [] and [r.status for r in again.results] == ["unchanged"]


def test_a_bad_session_is_quarantined_and_its_project_lands(layout, tmp_path, reads):
    home = tmp_path / "codex"
    generate_home(home, sessions=3, workspaces=("/home/dev/shop",))
    ingest_tables(layout, homes={"codex": [home]})
    sessions = scalar(layout, "SELECT COUNT(*) FROM sessions")
    # a root's rollout rewritten as garbage: Codex only appends, so this is damage, not a new
    # session. Its project cannot be read from it any more: it becomes a source of its own.
    victim = next(p for p in sorted((home / "sessions").rglob("rollout-*.jsonl")) if "subagent" not in p.read_text())
    victim_sid = victim.stem[-36:]
    victim.write_text("\x00\x01 not a rollout\n")
    summary = ingest_tables(layout, homes={"codex": [home]})
    assert [r.status for r in summary.results] == ["ok", "ok"]
    assert scalar(layout, "SELECT COUNT(*) FROM quarantine") == 1
    # the sessions it held before are kept, nothing lost; the warning says so
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == sessions
    assert scalar(layout, "SELECT COUNT(*) FROM sessions WHERE session_id = ?", victim_sid) == 1
    assert any(re.search(r"no longer in the source (was|were) kept", w) for r in summary.results for w in r.warnings)
    reads.clear()
    again = ingest_tables(layout, homes={"codex": [home]})
    assert [r.status for r in again.results] == ["unchanged", "unchanged"] and reads == []


def test_a_deleted_session_is_said_by_the_run_that_keeps_it_not_by_each_later_rewrite(layout, tmp_path):
    """A session whose rollout was deleted keeps its rows, and the run that first keeps it says so;
    each later run that rewrote the project said it again (a new user's trial). The count stays in
    the run's `retained_sessions`, and a second deletion is said with how many are kept in all."""
    home = tmp_path / "codex"
    generate_home(home, sessions=4, workspaces=("/home/dev/shop",))
    ingest_tables(layout, homes={"codex": [home]})
    rollouts = sorted((home / "sessions").rglob("rollout-*.jsonl"))
    # roots without sub-agents: a deleted parent's sub-agents are kept in its tree (test_codex's own tests)
    roots = [p for p in rollouts if "subagent" not in p.read_text()
             and not any(p.stem[-36:] in other.read_text() for other in rollouts if other != p)]
    sessions = scalar(layout, "SELECT COUNT(*) FROM sessions")

    def kept_said(summary) -> list[str]:
        return [w for r in summary.results for w in r.warnings if "no longer in the source" in w]

    def delete(rollout):  # every copy Codex keeps of it (archived_sessions/ too)
        for copy in home.rglob(f"*{rollout.stem[-36:]}.jsonl"):
            copy.unlink()

    delete(roots[0])
    first = ingest_tables(layout, homes={"codex": [home]})
    assert kept_said(first) == ["1 session no longer in the source was kept in the lake"]
    assert [r.retained_sessions for r in first.results] == [1]
    _new_session(home, "/home/dev/shop")  # the project is rewritten: the kept session is carried again
    later = ingest_tables(layout, homes={"codex": [home]})
    assert [r.status for r in later.results] == ["ok"] and kept_said(later) == []
    assert [r.retained_sessions for r in later.results] == [1]
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == sessions + 1  # nothing lost, the new one added
    delete(roots[1])
    second = ingest_tables(layout, homes={"codex": [home]})
    assert kept_said(second) == ["1 session no longer in the source was kept in the lake (2 in all)"]
    assert [r.retained_sessions for r in second.results] == [2]
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == sessions + 1


@pytest.mark.parametrize("error, cached", [(ValueError("a shape no Codex writes"), True),
                                           (PermissionError(13, "Permission denied"), False)])
def test_a_session_whose_reader_fails_does_not_fail_its_project(layout, tmp_path, monkeypatch, error, cached):
    """The session becomes a quarantine row and a warning. A failure of its bytes is remembered
    (not read again until they change); one of the environment is retried on the next run."""
    home = tmp_path / "codex"
    generate_home(home, sessions=3, workspaces=("/home/dev/shop",))
    victim = sorted(CodexProvider().discover(options_for(homes={"codex": [home]})).sources, key=lambda s: s.source_id)[0]
    tried = []
    extract = CodexProvider.extract

    def failing(self, source, *args, **kwargs):
        if source.identity == victim.identity:
            tried.append(source.identity)
            raise error
        return extract(self, source, *args, **kwargs)

    monkeypatch.setattr(CodexProvider, "extract", failing)
    summary = ingest_tables(layout, homes={"codex": [home]})
    [result] = summary.results
    assert result.status == "ok" and result.reconciled
    assert scalar(layout, "SELECT COUNT(DISTINCT root_session_id) FROM sessions") == 2
    assert query(layout, "SELECT key FROM quarantine") == [(victim.path,)]
    assert str(error.args[-1]) in scalar(layout, "SELECT error FROM quarantine")
    assert any("1 of 3 sessions could not be read" in w and victim.path in w for w in result.warnings)
    assert not [w for w in result.warnings if "unparseable" in w], result.warnings  # said once, by that note
    again = ingest_tables(layout, homes={"codex": [home]})
    assert len(tried) == (1 if cached else 2)
    assert [r.status for r in again.results] == (["unchanged"] if cached else ["ok"])


def test_a_lake_landed_per_session_moves_to_one_source_per_project(layout, tmp_path, monkeypatch):
    """An upgrade: the sessions' own landing files are replaced by their project's, once; no row
    is counted twice, and their state files go."""
    home = tmp_path / "codex"
    generate_home(home, sessions=8)
    monkeypatch.setitem(PROVIDERS, "codex", CodexProvider())  # the release before bundling
    old = ingest_tables(layout, homes={"codex": [home]})
    assert len(old.results) > 2
    before = _totals(layout)
    old_ids = {r.source.source_id for r in old.results}
    assert all((layout.state_dir / f"codex-{i}.json").exists() for i in old_ids)
    monkeypatch.undo()
    new = ingest_tables(layout, homes={"codex": [home]})
    assert len(new.results) == 2 and all(r.status == "ok" and r.reconciled for r in new.results)
    assert not any("no longer in the source" in w for r in new.results for w in r.warnings)
    assert _totals(layout) == before
    landed = {rel.split("/")[4] for rel in landed_files(layout) if rel.startswith(LANDING) and "/_runs/" not in rel}
    assert landed == {r.source.source_id for r in new.results}
    assert not any((layout.state_dir / f"codex-{i}.json").exists() for i in old_ids)


def test_an_older_release_run_after_the_upgrade_is_undone_by_the_next_run(layout, tmp_path, monkeypatch):
    """A release before bundling run again on an upgraded home (an old `agentlake` left on the
    PATH) lands every session alone beside its project's folder: each counted twice. The next
    run of this release finds them, reads the projects again and takes them over; then it is a
    no-op again."""
    home = tmp_path / "codex"
    generate_home(home, sessions=8)
    first = ingest_tables(layout, homes={"codex": [home]})
    assert len(first.results) == 2
    before = _totals(layout)
    monkeypatch.setitem(PROVIDERS, "codex", CodexProvider())  # the older release
    old = ingest_tables(layout, homes={"codex": [home]})
    old_ids = {r.source.source_id for r in old.results}
    assert len(old_ids) > 2 and all(r.status == "ok" for r in old.results)
    assert _totals(layout)[1][0][0] == 2 * before[1][0][0]  # the double count this undoes
    monkeypatch.undo()
    again = ingest_tables(layout, homes={"codex": [home]})
    assert [r.status for r in again.results] == ["ok", "ok"] and all(r.reconciled for r in again.results)
    assert _totals(layout) == before
    landed = {rel.split("/")[4] for rel in landed_files(layout) if rel.startswith(LANDING) and "/_runs/" not in rel}
    assert landed == {r.source.source_id for r in first.results}
    assert not any((layout.state_dir / f"codex-{i}.json").exists() for i in old_ids)
    assert [r.status for r in ingest_tables(layout, homes={"codex": [home]}).results] == ["unchanged", "unchanged"]


def test_the_same_project_in_two_agents_is_two_sources(layout, tmp_path):
    from transforms.synth.gemini import generate_home as gemini_home

    generate_home(tmp_path / "codex", sessions=3, workspaces=("/home/dev/shop",))
    gemini_home(tmp_path / ".gemini", sessions=3, workspaces=("/home/dev/shop",))
    summary = ingest_tables(layout, homes={"codex": [tmp_path / "codex"], "gemini": [tmp_path / ".gemini"]})
    assert sorted((r.source.provider, r.source.project, r.status) for r in summary.results) == [
        ("codex", "shop", "ok"), ("gemini", "shop", "ok")]
    assert query(layout, "SELECT provider, COUNT(DISTINCT source_id), COUNT(*) FROM sessions WHERE is_root "
                         "GROUP BY 1 ORDER BY 1") == [("codex", 1, 3), ("gemini", 1, 3)]


def test_a_session_whose_project_changes_moves_and_is_counted_once(layout, tmp_path):
    """Kilo reads a task's workspace from its history: rewritten, the task leaves its project's
    source for another one. The source it left does not keep it (it would be counted twice)."""
    from transforms.synth.kilo import generate_home as kilo_home

    storage = tmp_path / "kilo"
    kilo_home(storage, sessions=3, workspaces=("/home/dev/shop",))
    ingest_tables(layout, homes={"kilo": [storage]})
    before = _totals(layout)
    task = sorted((storage / "tasks").iterdir())[0]
    for path in task.iterdir():
        path.write_text(path.read_text().replace("/home/dev/shop", "/home/dev/other"))
    summary = ingest_tables(layout, homes={"kilo": [storage]})
    assert sorted((r.source.project, r.status) for r in summary.results) == [("other", "ok"), ("shop", "ok")]
    assert not any("no longer in the source" in w for r in summary.results for w in r.warnings)
    assert _totals(layout) == before
    assert query(layout, "SELECT project, COUNT(*) FROM sessions GROUP BY 1 ORDER BY 1") == [("other", 1), ("shop", 2)]


def _move(task, to: str) -> None:
    for path in task.iterdir():
        path.write_text(path.read_text().replace("/home/dev/shop", to))


def _kilo_shop(layout, tmp_path):
    from transforms.synth.kilo import generate_home as kilo_home

    storage = tmp_path / "kilo"
    kilo_home(storage, sessions=3, workspaces=("/home/dev/shop",))
    [shop] = ingest_tables(layout, homes={"kilo": [storage]}).results
    return storage, sorted((storage / "tasks").iterdir()), shop.source.source_id


def _landed_sources(layout) -> set[str]:
    return {rel.split("/")[4] for rel in landed_files(layout) if rel.startswith(LANDING) and "/_runs/" not in rel}


def test_a_project_whose_every_session_moves_is_counted_once(layout, tmp_path):
    """No source of the old project is discovered any more: the bundles its sessions moved to
    take them out of its folder, which goes with its state once empty."""
    storage, tasks, shop = _kilo_shop(layout, tmp_path)
    before = _totals(layout)
    _move(tasks[0], "/home/dev/other")
    for task in tasks[1:]:
        _move(task, "/home/dev/third")
    summary = ingest_tables(layout, homes={"kilo": [storage]})
    assert sorted((r.source.project, r.status) for r in summary.results) == [("other", "ok"), ("third", "ok")]
    assert not any("no longer in the source" in w for r in summary.results for w in r.warnings)
    assert _totals(layout) == before
    assert query(layout, "SELECT project, COUNT(*) FROM sessions GROUP BY 1 ORDER BY 1") == [("other", 1), ("third", 2)]
    assert _landed_sources(layout) == {r.source.source_id for r in summary.results}
    assert not (layout.state_dir / f"kilo-{shop}.json").exists()
    assert ingest_tables(layout, homes={"kilo": [storage]}).by_status["unchanged"] == 2


def test_a_session_deleted_with_its_project_gone_stays_in_its_folder_once(layout, tmp_path):
    """The old project's session deleted from the disk stays in the lake (history outlives the
    agent) in the old project's folder; the sessions that moved leave it."""
    import shutil

    storage, tasks, shop = _kilo_shop(layout, tmp_path)
    before = _totals(layout)
    shutil.rmtree(tasks[0])
    for task in tasks[1:]:
        _move(task, "/home/dev/other")
    [other] = ingest_tables(layout, homes={"kilo": [storage]}).results
    assert other.status == "ok" and "2 sessions that moved here were taken out of their old project's files" \
        in other.warnings
    assert _totals(layout) == before
    assert query(layout, "SELECT project, COUNT(*) FROM sessions GROUP BY 1 ORDER BY 1") == [("other", 2), ("shop", 1)]
    assert _landed_sources(layout) == {other.source.source_id, shop}


def test_a_session_outside_one_run_and_back_is_counted_once(layout, tmp_path):
    """A run that does not find the old project's last session (another discovery, a folder
    away for a while) must not hand it to the bundles its other sessions moved to: when it is
    found again, its project's bundle lands it, and nothing else holds it."""
    storage, tasks, shop = _kilo_shop(layout, tmp_path)
    before = _totals(layout)
    away = tmp_path / "away"
    tasks[0].rename(away)
    for task in tasks[1:]:
        _move(task, "/home/dev/other")
    ingest_tables(layout, homes={"kilo": [storage]})
    away.rename(tasks[0])
    summary = ingest_tables(layout, homes={"kilo": [storage]})
    assert sorted((r.source.project, r.status) for r in summary.results) == [("other", "unchanged"), ("shop", "ok")]
    assert _totals(layout) == before
    assert query(layout, "SELECT project, COUNT(*) FROM sessions GROUP BY 1 ORDER BY 1") == [("other", 2), ("shop", 1)]


def test_a_state_of_the_previous_release_names_its_sessions_by_its_cache(layout, tmp_path):
    """A bundle last written by the previous release has no sessions in its state: its cache
    says which are which."""
    import json

    storage, tasks, shop = _kilo_shop(layout, tmp_path)
    before = _totals(layout)
    path = layout.state_dir / f"kilo-{shop}.json"
    state = json.loads(path.read_text())
    del state["parts"]
    path.write_text(json.dumps(state))
    for task in tasks:
        _move(task, "/home/dev/other")
    ingest_tables(layout, homes={"kilo": [storage]})
    assert _totals(layout) == before
    assert query(layout, "SELECT project, COUNT(*) FROM sessions GROUP BY 1 ORDER BY 1") == [("other", 3)]
    assert not path.exists()


def test_a_new_session_in_a_landed_project_lists_no_landing_files(layout, tmp_path, monkeypatch):
    """Its project's own sessions are in its state: the lake is listed only on a first write (to
    take over sessions landed alone before), not on every run (a LIST per run on S3)."""
    import warehouse.land.ingest as ingest_module

    home = tmp_path / "codex"
    generate_home(home, sessions=4, workspaces=("/home/dev/shop",))
    listings = []
    listed = ingest_module.landed_files
    monkeypatch.setattr(ingest_module, "landed_files", lambda layout: listings.append(1) or listed(layout))
    ingest_tables(layout, homes={"codex": [home]})
    assert listings == [1]
    _new_session(home, "/home/dev/shop")
    [result] = ingest_tables(layout, homes={"codex": [home]}).results
    assert result.status == "ok" and listings == [1]


def test_a_state_with_a_key_of_a_newer_release_is_still_read(layout, tmp_path):
    """A downgrade (a daemon still on the older release) must not take every source for new."""
    import json

    storage, tasks, shop = _kilo_shop(layout, tmp_path)
    path = layout.state_dir / f"kilo-{shop}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "a_later_field": 1}))
    assert ingest_tables(layout, homes={"kilo": [storage]}).by_status["unchanged"] == 1


def test_a_vanished_project_of_the_previous_release_keeps_its_sessions_not_found(layout, tmp_path):
    """Its state does not name its sessions: they are named from its cache, the moved ones
    leave, and its state names the one left (later writes do not read its cache again)."""
    import json
    import shutil

    storage, tasks, shop = _kilo_shop(layout, tmp_path)
    path = layout.state_dir / f"kilo-{shop}.json"
    state = json.loads(path.read_text())
    sessions = state.pop("parts")
    path.write_text(json.dumps(state))
    shutil.rmtree(tasks[0])  # the rest moves: shop is not found any more
    for task in tasks[1:]:
        _move(task, "/home/dev/other")
    ingest_tables(layout, homes={"kilo": [storage]})
    [(part, named)] = json.loads(path.read_text())["parts"].items()  # the one not found, by its cache
    assert sessions[part] == named
    assert query(layout, "SELECT session_id FROM sessions WHERE project = 'shop'") == [(s,) for s in named]
    assert query(layout, "SELECT project, COUNT(*) FROM sessions GROUP BY 1 ORDER BY 1") == [("other", 2), ("shop", 1)]


def test_a_large_project_lands_in_buckets_and_a_new_session_rewrites_its_own(layout, tmp_path, reads, monkeypatch):
    """Past BUCKET_SESSIONS a project is split into buckets, each a bundle: a new session rewrites
    its bucket's landing files alone, and growing past the next power of two moves every session
    to its new bucket once, counted once."""
    import transforms.bundle as bundle

    monkeypatch.setattr(bundle, "BUCKET_SESSIONS", 2)
    home = tmp_path / "codex"
    truth = generate_home(home, sessions=7, workspaces=("/home/dev/shop",))
    first = ingest_tables(layout, homes={"codex": [home]})
    ids = {r.source.identity for r in first.results}
    assert len(first.results) == 4 and all(i.startswith("project:/home/dev/shop#") and i.endswith("/4") for i in ids)
    assert all(r.status == "ok" and r.reconciled for r in first.results)
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == truth.sessions
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == truth.messages
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(truth.cost_usd)
    assert query(layout, "SELECT COUNT(DISTINCT source_id), COUNT(DISTINCT project) FROM sessions") == [(4, 1)]
    before, files = _totals(layout), layout.store().versions(LANDING)
    reads.clear()
    new = _new_session(home, "/home/dev/shop")
    summary = ingest_tables(layout, homes={"codex": [home]})
    assert reads == [new.sid]
    [changed] = [r for r in summary.results if r.status == "ok"]
    assert summary.by_status["unchanged"] == 3 and changed.reconciled
    now = layout.store().versions(LANDING)
    rewritten = {rel for rel in now if now[rel] != files.get(rel) and "/_runs/" not in rel}
    assert rewritten and {rel.split("/")[4] for rel in rewritten} == {changed.source.source_id}
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == before[0][0][0] + 1
    # 9 sessions: eight buckets now, every session moved to its own once
    monkeypatch.setattr(bundle, "BUCKET_SESSIONS", 1)
    grown = ingest_tables(layout, homes={"codex": [home]})
    assert {r.source.identity.rsplit("/", 1)[1] for r in grown.results} == {"8"}
    assert not any("no longer in the source" in w for r in grown.results for w in r.warnings)
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == before[0][0][0] + 1
    assert scalar(layout, "SELECT COUNT(DISTINCT session_id) FROM sessions") == before[0][0][0] + 1
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == before[1][0][0] + 2
    assert _landed_sources(layout) == {r.source.source_id for r in grown.results}


def test_a_session_unreadable_when_its_project_splits_keeps_its_rows_in_the_folder_it_left(layout, tmp_path,
                                                                                           monkeypatch):
    """Every session moves when the bucket count changes; one its new bucket cannot read (a
    failure that is cached) stays in the folder it left, counted once, until it is read again."""
    import os

    import transforms.bundle as bundle

    home = tmp_path / "codex"
    generate_home(home, sessions=7, workspaces=("/home/dev/shop",))
    [one] = ingest_tables(layout, homes={"codex": [home]}).results
    before = _totals(layout)
    victim = sorted(CodexProvider().discover(options_for(homes={"codex": [home]})).sources,
                    key=lambda s: s.source_id)[0]
    extract = CodexProvider.extract

    def failing(self, source, *args, **kwargs):
        if source.identity == victim.identity:
            raise ValueError("bytes now unreadable")
        return extract(self, source, *args, **kwargs)

    monkeypatch.setattr(CodexProvider, "extract", failing)
    monkeypatch.setattr(bundle, "BUCKET_SESSIONS", 2)
    split = ingest_tables(layout, homes={"codex": [home]})
    assert len(split.results) >= 2 and all(r.status == "ok" for r in split.results)
    assert _totals(layout) == before  # nothing lost, nothing twice
    assert scalar(layout, "SELECT COUNT(*) FROM sessions WHERE session_id = ?", victim.identity) == 1
    assert _landed_sources(layout) == {r.source.source_id for r in split.results} | {one.source.source_id}
    # readable again: its bucket lands it, and the folder it left goes
    monkeypatch.setattr(CodexProvider, "extract", extract)
    victim_file = next(p for p in (home / "sessions").rglob("*.jsonl") if victim.identity in p.name)
    os.utime(victim_file, (1, 1))  # the same bytes, another mtime: read again
    again = ingest_tables(layout, homes={"codex": [home]})
    assert _totals(layout) == before
    assert _landed_sources(layout) == {r.source.source_id for r in again.results}


def test_a_folder_another_run_holds_is_left_for_the_next_run_not_waited_for_forever(layout, tmp_path, monkeypatch):
    """Two runs at once whose discoveries fall on either side of a bucket count would wait on
    each other's locks: the new buckets wait EVICT_WAIT for the old folder, then land without
    taking their sessions out of it, say so, and stay unsettled; the next run takes them out."""
    import transforms.bundle as bundle
    import warehouse.land.bundle_folders as bundle_folders
    from warehouse.land.source_state import SourceStates

    home = tmp_path / "codex"
    generate_home(home, sessions=7, workspaces=("/home/dev/shop",))
    [old] = ingest_tables(layout, homes={"codex": [home]}).results
    before = _totals(layout)
    monkeypatch.setattr(bundle, "BUCKET_SESSIONS", 2)
    monkeypatch.setattr(bundle_folders, "EVICT_WAIT", 0.2)
    with SourceStates(layout).lock("codex", old.source.source_id):  # the other run
        split = ingest_tables(layout, homes={"codex": [home]})
    assert all(r.status == "ok" for r in split.results)
    said = [w for r in split.results for w in r.warnings if "another run held 1 folder" in w]
    assert said and "until the next run takes them out" in said[0]
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 2 * before[0][0][0]  # said: counted twice
    again = ingest_tables(layout, homes={"codex": [home]})
    assert not any("another run held" in w for r in again.results for w in r.warnings)
    assert _totals(layout) == before
    assert _landed_sources(layout) == {r.source.source_id for r in again.results}
    assert {r.status for r in ingest_tables(layout, homes={"codex": [home]}).results} == {"unchanged"}


def test_a_project_split_into_buckets_leaves_no_source_said_not_found(layout, tmp_path, monkeypatch):
    """A project past the bucket size lands in buckets of new ids; the bundle it leaves keeps its
    state while it holds a session deleted from disk (its carried rows). That state is no store
    moved or deleted: `agentlake ingest` said "1 source landed before was not found" for it."""
    import transforms.bundle as bundle
    from warehouse.land.source_state import SourceStates

    monkeypatch.setattr(bundle, "BUCKET_SESSIONS", 8)
    home = tmp_path / "codex"
    generate_home(home, sessions=4, workspaces=("/home/dev/shop",))
    ingest_tables(layout, homes={"codex": [home]})
    for rollout in sorted(home.rglob("rollout-*.jsonl"))[:3]:  # rows kept in the lake, carried by the bundle
        rollout.unlink()
    ingest_tables(layout, homes={"codex": [home]})
    monkeypatch.setattr(bundle, "BUCKET_SESSIONS", 1)  # the project splits into buckets of new ids
    grown = ingest_tables(layout, homes={"codex": [home]})
    found = {(r.source.provider, r.source.source_id) for r in grown.results}
    assert all(r.source.identity.startswith("project:/home/dev/shop#") for r in grown.results)
    states = SourceStates(layout)
    left = [i for i in states.ids("codex") if ("codex", i) not in found]
    assert left and all(states.of("codex", i).parts == {} for i in left)  # the bundle it left, holding no part
    assert states.not_found(found, PROVIDERS) == {}
    # a home moved away is not found: its buckets are said
    home.rename(tmp_path / "moved")
    assert sorted(SourceStates(layout).not_found(set(), PROVIDERS)) == ["codex"]
