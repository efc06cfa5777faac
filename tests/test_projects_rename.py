"""A `[projects]` rename in config.toml is applied by the next plain ingest: exactly the sources
whose project name changed are landed again, their rows replaced under the new name, never
duplicated; every other source stays unchanged."""

import json
from dataclasses import replace

import pytest

from tests.conftest import ingest_tables, options_for, query
from transforms.synth.claude import generate_home as claude_home
from transforms.synth.codex import generate_home as codex_home
from transforms.synth.crush import generate_store
from transforms.synth.opencode import generate_home as opencode_home
from warehouse.land.ingest import discover_sources, ingest_all
from warehouse.catalog.build import refresh
from warehouse.lake.config import ConfigError, load_config

WEBSHOP = "/home/dev/webshop"  # a workspace of every synthetic home (Claude, Codex, OpenCode)


def _ingest(layout, options):
    sources, problems = _found(options)
    summary = ingest_all(sources, layout, problems=problems, workers=1)
    refresh(layout.lake, layout.warehouse, marts=False)  # the tests read the sessions table only
    return {r.source.source_id: r for r in summary.results}


def _found(options):
    sources, problems = discover_sources(options)
    assert not problems
    return sources, problems


def _projects(layout):
    return dict(query(layout, "SELECT provider || ':' || project, COUNT(*) FROM sessions GROUP BY 1"))


def test_a_rename_relands_exactly_the_renamed_sources(layout, tmp_path):
    crush = generate_store(tmp_path / "crush", projects=2, sessions_per_project=2)
    claude_home(tmp_path / "claude", sessions=4)
    codex_home(tmp_path / "codex", sessions=4)  # landed by project (transforms.bundle)
    opencode_home(tmp_path / "opencode", sessions=4)  # one store, each session names its project
    options = options_for(roots=[crush.global_dir], homes={"claude": [tmp_path / "claude"],
                                                            "codex": [tmp_path / "codex"],
                                                            "opencode": [tmp_path / "opencode"]})
    crush_project = next(s.project_path for s in _found(options)[0] if s.provider == "crush")
    first = _ingest(layout, options)
    assert {r.status for r in first.values()} == {"ok"}
    before = _projects(layout)
    assert {"claude:webshop", "codex:webshop", "opencode:webshop"} <= set(before)

    renamed = replace(options, project_names={WEBSHOP: "shop", crush_project: "Renamed Crush"})
    second = _ingest(layout, renamed)
    old_keys = {r.source.source_id: r.source.partition_key for r in first.values()}
    expected = {sid for sid, r in second.items()
                if r.source.partition_key != old_keys[sid] or r.source.project_names}  # OpenCode: any name change
    assert {sid for sid, r in second.items() if r.status == "ok"} == expected
    assert {r.source.provider for sid, r in second.items() if sid in expected} == {"crush", "claude", "codex", "opencode"}
    assert {r.status for sid, r in second.items() if sid not in expected} == {"unchanged"}
    assert set(second) == set(first)  # a rename keeps each source (and so its landing folder)

    after = _projects(layout)
    old_crush = next(r.source.project for r in first.values() if r.source.project_path == crush_project)
    moves = {f"{p}:webshop": f"{p}:shop" for p in ("claude", "codex", "opencode")} | {
        f"crush:{old_crush}": "crush:renamed-crush"}
    assert after == {moves.get(key, key): n for key, n in before.items()}  # replaced, not duplicated

    third = _ingest(layout, renamed)
    assert {r.status for r in third.values()} == {"unchanged"}


def test_a_name_the_mapping_already_gave_lands_nothing_again(layout, project):
    """A mapping entry that gives a project the name it had (or names a project not here) is no
    rename: nothing is read again."""
    p = project("webshop")
    p.close()
    ingest_tables(layout, p.db)
    options = options_for(p.db)
    for names in ({str(p.path): "webshop"}, {"/elsewhere/api": "billing"}):
        results = _ingest(layout, replace(options, project_names=names))
        assert {r.status for r in results.values()} == {"unchanged"}


def test_the_command_applies_a_rename_from_config_toml(tmp_path, monkeypatch, capsys):
    """As reported: after adding `"/home/dev/webshop" = "shop"` to config.toml, `agentlake ingest`
    said every source was unchanged and `report` still said `webshop`."""
    from pipelines.cli import main

    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own Dagster instance, as a user's
    claude_home(tmp_path / "claude", sessions=4)
    home = tmp_path / "home"
    args = ["--home", str(home), "--no-default", "--agent-home", f"claude={tmp_path / 'claude'}"]
    assert main(["ingest", *args, "--quiet"]) == 0
    assert "2 ok, 0 unchanged" in capsys.readouterr().out
    (home / "config.toml").write_text(f'[projects]\n"{WEBSHOP}" = "shop"\n')
    assert main(["ingest", *args, "--quiet"]) == 0
    assert "1 ok, 1 unchanged" in capsys.readouterr().out  # the renamed project's source alone
    assert main(["sql", "--home", str(home), "SELECT DISTINCT project FROM sessions ORDER BY 1",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"project": "infra-tools"}, {"project": "shop"}]
    assert main(["ingest", *args, "--quiet"]) == 0
    assert "0 ok, 2 unchanged" in capsys.readouterr().out


def test_project_names_in_other_scripts_are_projects_of_their_own(layout, tmp_path, monkeypatch):
    """A project directory named only in letters outside a-z was `unknown`, every one of them the
    same project (a new user's trial): its name is written in a-z first (anyascii). A lake landed
    before lands those sources again under their names, as a rename does: replaced, not duplicated."""
    from transforms import projects
    from transforms.sources import slugify

    assert [projects.project_slug(n) for n in ("проект", "東京アプリ", "Größe café", "acme/platform", "")] == [
        "proekt", "dongjingapuri", "grosse-cafe", "acme-platform", "unnamed"]
    workspaces = ("/home/dev/проект", "/home/dev/東京アプリ", "/home/dev/Größe café")
    truth = codex_home(tmp_path / "codex", sessions=6, workspaces=workspaces)
    options = options_for(homes={"codex": [tmp_path / "codex"]})

    with monkeypatch.context() as before:  # the slugs of the release before: a-z and 0-9 kept, the rest dropped
        before.setattr(projects, "project_slug", lambda name, default="unnamed": slugify(name, default))
        _ingest(layout, options)
    assert set(_projects(layout)) == {"codex:unknown", "codex:gr-e-caf"}
    first = sum(_projects(layout).values())

    again = _ingest(layout, options)
    assert {r.status for r in again.values()} == {"ok"}  # every source's name changed: each landed again
    after = _projects(layout)
    assert set(after) == {"codex:proekt", "codex:dongjingapuri", "codex:grosse-cafe"}
    assert sum(after.values()) == first == truth.sessions


@pytest.mark.parametrize("setting", ['machine = "ana-laptop"', 'tz = "Europe/Berlin"', 'user = "ana"'])
def test_a_setting_of_the_whole_file_below_projects_is_refused_not_read_as_a_project(tmp_path, setting):
    """`tz = ...` appended to a file whose last table is [projects] is, in TOML, a project named tz:
    the machine name and the time zone were silently not applied (a trial). Refused as below any
    other table, with where it goes, and how a folder of that name is named instead."""
    path = tmp_path / "config.toml"
    path.write_text(f'[projects]\n"/home/dev/myapp" = "my-app"\n{setting}\n')
    key = setting.split()[0]
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(exc.value) == (f"{path}: {key!r} in [projects]: {key} is a setting of the whole file: put it above "
                              "the first [section] or [[...]]; below one, TOML reads it as that one's (a project "
                              f"folder named {key} is named by its path or remote)")
    path.write_text(f'{setting}\n[projects]\n"/home/dev/myapp" = "my-app"\n"users" = "people"\n')
    assert load_config(path).project_names == {"/home/dev/myapp": "my-app", "users": "people"}
