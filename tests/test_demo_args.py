"""`agentlake demo`'s sizes: a value no generator can make is a usage error naming the option and
its range (exit 2, argparse's), never a ZeroDivisionError or FileNotFoundError traceback from
half a demo written (a user's report: `--projects 0`, `--projects -3`, `--sessions -1`)."""

import json

import pytest

from pipelines.cli import main
from tests.conftest import run_cli
from tests.support_homes import copy_demo_home, small_demo_home
from transforms.providers import PROVIDERS
from transforms.synth.demo import generate_demo

RANGE = {"--projects": (1, 100), "--sessions": (1, 100)}  # transforms.synth.demo.LIMITS


def run_demo(*args, tmp_path):
    # in this process: the usage errors are argparse's, with no interpreter's exit to check
    return run_cli("demo", "--quiet", *args, env={"AGENTLAKE_HOME": tmp_path / "al"})


@pytest.mark.parametrize("option, value", [
    ("--projects", "0"), ("--projects", "-3"), ("--projects", "101"), ("--projects", "two"), ("--projects", "1.5"),
    ("--sessions", "-1"), ("--sessions", "0"), ("--sessions", "1000000"), ("--sessions", ""),
])
def test_a_size_out_of_range_is_a_usage_error(tmp_path, option, value):
    low, high = RANGE[option]
    done = run_demo(option, value, tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"argument {option}: wants a whole number from {low} to {high}: {value!r}" in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.startswith("usage: agentlake demo")
    assert not (tmp_path / "al").exists()  # nothing generated, nothing half-written


def test_the_seed_is_any_whole_number_and_a_word_is_a_usage_error(tmp_path):
    done = run_demo("--seed", "x", tmp_path=tmp_path)
    assert done.returncode == 2 and "argument --seed: invalid int value: 'x'" in done.stderr
    assert "Traceback" not in done.stderr
    for seed in (-(10**30), 0, 10**30):  # random.Random takes any integer
        demo = generate_demo(tmp_path / f"seed{seed}", projects=1, sessions=1, seed=seed)
        assert len(demo.workspaces) == 1


def test_the_library_refuses_the_same_sizes_before_writing(tmp_path):
    for sizes in ({"projects": 0}, {"projects": -3}, {"sessions": -1}, {"sessions": 0}, {"projects": True}):
        with pytest.raises(ValueError, match=f"--{next(iter(sizes))} must be a whole number from 1 to 100"):
            generate_demo(tmp_path / "demo", **sizes)
        assert not (tmp_path / "demo").exists()


def test_the_smallest_demo_runs_end_to_end(tmp_path, monkeypatch, capsys):
    """The bottom of each range works: one project, one session per project, a negative seed."""
    from pipelines.cli import main

    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own Dagster instance
    home = tmp_path / "al"
    assert main(["demo", "--home", str(home), "--quiet", "--projects", "1", "--sessions", "1", "--seed", "-5"]) == 0
    capsys.readouterr()
    assert main(["sql", "--home", str(home), "--format", "json",
                 "SELECT COUNT(DISTINCT provider) AS agents FROM sessions"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["agents"] >= 10
    assert (home / "demo-data" / ".generated").read_text() == "seed -5 projects 1 sessions 1\n"

    # the home's [projects] names the demo's project too (a new user's trial: a rename is what one
    # tries on the demo, and the demo's run read none)
    def projects():
        assert main(["sql", "--home", str(home), "--format", "json",
                     "SELECT DISTINCT project FROM sessions WHERE provider = 'crush'"]) == 0
        return [r["project"] for r in json.loads(capsys.readouterr().out)]

    (first,) = projects()
    with open(home / "config.toml", "a") as config:  # the demo's own config.toml, and a section of the user's
        config.write(f'\n[projects]\n"{first}" = "Renamed Shop"\n')
    assert main(["demo", "--home", str(home), "--quiet", "--projects", "1", "--sessions", "1", "--seed", "-5"]) == 0
    capsys.readouterr()
    assert projects() == ["renamed-shop"]


def test_a_seed_gives_the_same_numbers_wherever_the_demo_is_written(tmp_path):
    """A user's report: the demo's Crush costs differed with the home's path, seed for seed (the
    generator grew each session's context with the length of its messages, paths included)."""
    import dataclasses

    from transforms.provider import DiscoverOptions
    from warehouse.land.ingest import discover_sources, ingest_all
    from warehouse.lake.layout import Layout
    from warehouse.catalog.build import refresh
    from warehouse.lake.ducklake import connect

    totals = []
    for folder in ("d", "a-folder-with-a-much-longer-name/and/deeper"):
        demo = generate_demo(tmp_path / folder / "demo", projects=2, sessions=2, seed=7)
        sources, _ = discover_sources(DiscoverOptions(env={}, extra_roots=demo.roots(), use_default=False))
        layout = dataclasses.replace(Layout.resolve(home=tmp_path / folder / "home"), machine="m", user="u")
        ingest_all(sources, layout, workers=1)
        refresh(layout.lake, layout.warehouse, marts=False)  # the sessions table is all it reads
        with connect(layout.warehouse) as con:
            totals.append(con.execute(
                "SELECT provider, SUM(cost_usd), SUM(total_tokens), COUNT(*) FROM sessions GROUP BY 1 ORDER BY 1"
            ).fetchall())
    assert len(totals[0]) == len(PROVIDERS) and any(cost for _, cost, _, _ in totals[0])
    assert totals[0] == totals[1]


def _sessions(capsys, home):
    """What a home's warehouse holds, per agent: sessions, distinct session ids and their cost (summed
    exactly: a sum of doubles depends on the order DuckDB adds them in)."""
    from pipelines.cli import main

    capsys.readouterr()
    assert main(["sql", "--home", str(home), "--format", "json",
                 "SELECT provider, COUNT(*) AS n, COUNT(DISTINCT session_id) AS ids, SUM(cost_usd::DECIMAL(18, 9)) AS usd, "
                 "STRING_AGG(DISTINCT project, ',' ORDER BY project) AS projects "
                 "FROM sessions GROUP BY 1 ORDER BY 1"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_demo_never_mixes_into_a_home_holding_real_data(tmp_path, monkeypatch, capsys, project):
    """A user's report: `agentlake demo` on a copy of a home holding their own sessions added the
    demo's fifteen agents to it, its `infra-tools` merged with their own project of that name. It
    is refused (exit 2, one line saying where a demo can go) and the home is left as it was; the
    place it names (quickstart's, <home>/demo) takes the demo, apart from the home's own data."""
    import shutil

    from pipelines.cli import main
    from tests.conftest import T0
    from transforms.synth.crush import add_message, add_session
    from transforms.synth.crush_parts import text_part

    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own Dagster instance
    p = project("infra-tools")  # a name the demo's projects have too
    add_session(p.conn, "s", title="t", created_at=T0, cost=0.5)
    add_message(p.conn, "m", "s", "user", [text_part("hi")], created_at=T0)
    p.close()
    assert main(["ingest", "--home", str(tmp_path / "home"), "--quiet", "--no-default", "--db", str(p.path)]) == 0
    home = tmp_path / "homecopy"
    shutil.copytree(tmp_path / "home", home, symlinks=True)  # `cp -a home homecopy`
    own = _sessions(capsys, home)
    landed = sorted(str(f.relative_to(home)) for f in (home / "lake").rglob("*"))

    monkeypatch.setenv("AGENTLAKE_HOME", str(home))
    assert main(["demo", "--quiet", "--projects", "1", "--sessions", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {home} holds agent data that is not a demo's "
                                                    f"(1 source, e.g. {p.db}): ")
    assert f"`agentlake demo --home {home / 'demo'}`" in err and "Traceback" not in err
    assert not (home / "demo-data").exists() and not (home / "demo").exists()
    assert sorted(str(f.relative_to(home)) for f in (home / "lake").rglob("*")) == landed
    assert _sessions(capsys, home) == own

    # the way it names works: the demo in its own home, the home's own data as it was
    assert main(["demo", "--quiet", "--home", str(home / "demo"), "--projects", "1", "--sessions", "1"]) == 0
    out = capsys.readouterr().out
    assert f"report --home {home / 'demo'}" in out  # the next commands name the demo's home
    assert len(_sessions(capsys, home / "demo")) == len(PROVIDERS)
    assert _sessions(capsys, home) == own
    # the demo's home given a team's lake by mistake: told to keep its own, not to nest a demo in it
    assert main(["demo", "--quiet", "--home", str(home / "demo"), "--lake", "s3://bucket/team"]) == 2
    said = capsys.readouterr().err
    assert said.endswith(f"run it with the home's own lake: `agentlake demo --home {home / 'demo'} "
                         f"--lake {home / 'demo' / 'lake'}`\n") and "demo/demo" not in said, said
    # ... and an empty folder of a lake (a trial: it took the demo's warehouse with it, and the
    # next `demo` without the flag was refused)
    (tmp_path / "empty-lake").mkdir()
    assert main(["demo", "--quiet", "--home", str(home / "demo"), "--lake", str(tmp_path / "empty-lake")]) == 2
    assert capsys.readouterr().err == (
        f"error: {home / 'demo'} holds a demo already, in its own lake {home / 'demo' / 'lake'}: another lake "
        f"({tmp_path / 'empty-lake'}) would take its warehouse with it; run it with the home's own lake: "
        f"`agentlake demo --home {home / 'demo'} --lake {home / 'demo' / 'lake'}`\n")
    assert list((tmp_path / "empty-lake").iterdir()) == []

    # the other way round (a new user's trial): the user's own store ingested into the demo's
    # home lands, and is said to be mixed with generated sessions
    crush = {r["provider"]: r["n"] for r in _sessions(capsys, home / "demo")}["crush"]
    assert main(["ingest", "--home", str(home / "demo"), "--quiet", "--no-default", "--db", str(p.path)]) == 0
    said = capsys.readouterr().err
    assert f"warning: {home / 'demo'} also holds `agentlake demo`'s generated sessions" in said, said
    assert "to the 1 source of your own this run landed" in said
    assert {r["provider"]: r["n"] for r in _sessions(capsys, home / "demo")}["crush"] == crush + 1
    # that demo's home holds data of its own now: not suggested for a demo, given another lake
    assert main(["demo", "--quiet", "--home", str(home / "demo"), "--lake", "s3://bucket/team"]) == 2
    assert f"`agentlake demo --home {home / 'demo' / 'demo'} --lake {home / 'demo' / 'demo' / 'lake'}`" \
        in capsys.readouterr().err


def test_a_demo_of_another_seed_or_size_replaces_the_one_there(tmp_path, monkeypatch, capsys, built_once):
    """A user's report: `agentlake demo --seed 3 --sessions 8` on a home with the demo of seed 7
    kept the old data, saying nothing. The options say which demo the home holds: another seed
    or size replaces the one there (one line says so), every row of the old one gone from the
    warehouse (the lake keeps what a source no longer holds, so its sources are dropped first):
    the home then holds what a new home given the same options holds."""
    from pipelines.cli import main

    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own Dagster instance
    # the home after `agentlake demo --home HOME --quiet --projects 1 --sessions 1`
    built = small_demo_home(built_once)
    assert built.code == 0
    home = copy_demo_home(built.home, tmp_path / "home")
    assert (home / "demo-data" / ".generated").read_text() == "seed 7 projects 1 sessions 1\n"
    old = _sessions(capsys, home)
    assert main(["demo", "--home", str(home), "--quiet", "--projects", "2", "--sessions", "2", "--seed", "3"]) == 0
    err = capsys.readouterr().err
    assert (f"replacing the demo of seed 7, 1 project, 1 session per project in {home / 'demo-data'} with "
            "seed 3, 2 projects, 2 sessions per project") in err and "--regenerate" in err
    assert (home / "demo-data" / ".generated").read_text() == "seed 3 projects 2 sessions 2\n"
    replaced = _sessions(capsys, home)

    fresh = tmp_path / "fresh"
    assert main(["demo", "--home", str(fresh), "--quiet", "--projects", "2", "--sessions", "2", "--seed", "3"]) == 0
    assert replaced == _sessions(capsys, fresh) != old

    # the same options again keep the demo as it is: nothing generated, nothing read again
    assert main(["demo", "--home", str(home), "--quiet", "--projects", "2", "--sessions", "2", "--seed", "3"]) == 0
    out, err = capsys.readouterr()
    assert "generating" not in err and "replacing" not in err and " 0 ok," in out
    assert _sessions(capsys, home) == replaced

    # the first demo again, in the same folders: none of the replaced one's sessions comes back
    # (Claude Code's families kept the transcripts they had read in a cache of their own)
    assert main(["demo", "--home", str(home), "--quiet", "--projects", "1", "--sessions", "1"]) == 0
    assert _sessions(capsys, home) == old


def test_a_demo_is_never_written_into_a_lake_on_object_storage(tmp_path, monkeypatch, capsys):
    """A team's bucket (`$AGENTLAKE_LAKE`, `--lake s3://...`) is nobody's place for generated
    sessions: refused before anything is generated or the bucket is asked anything."""
    from pipelines.cli import main

    home = tmp_path / "home"
    monkeypatch.setenv("AGENTLAKE_LAKE", "s3://team-agentlake/lake")
    assert main(["demo", "--home", str(home), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: the lake s3://team-agentlake/lake is on object storage")
    assert f"`agentlake demo --home {home / 'demo'} --lake {home / 'demo' / 'lake'}`" in err
    assert not (home / "demo-data").exists()


def test_an_agent_without_a_demo_generator_is_said_with_what_it_needs(tmp_path, monkeypatch):
    """The demo holds every agent of transforms.providers: a new one without its generator is
    told what the demo calls, not an ImportError."""
    from transforms.synth import demo

    monkeypatch.setattr(demo, "HOMES", {**demo.HOMES, "toyagent": "toyagent"})
    with pytest.raises(RuntimeError, match=r"the demo has no generator for toyagent: transforms/synth/toyagent\.py "
                                           r"needs generate_home\(home, \*, sessions, seed, workspaces\)"):
        generate_demo(tmp_path / "demo", projects=1, sessions=1)


def test_a_generator_that_is_there_but_fails_to_import_is_its_own_error(monkeypatch):
    """Only the generator's module, or its function, missing is 'no generator': a generator that
    fails on an import of its own says so itself."""
    from transforms.synth import demo

    def broken(name):
        raise ModuleNotFoundError("No module named 'some_dependency'", name="some_dependency")

    monkeypatch.setattr(demo, "import_module", broken)
    with pytest.raises(ModuleNotFoundError, match="some_dependency"):
        demo._generator("codex")


def test_a_demo_made_where_the_quickstart_keeps_it_takes_the_project_names_of_the_home_it_stands_in_for(
        tmp_path, monkeypatch, capsys, built_once):
    """`agentlake demo` in a home holding no data goes to the quickstart's <home>/demo: the
    `[projects]` of <home>/config.toml, the file the user edits, still name its projects (they were
    read from the demo's own config.toml, which has none: a review)."""
    home = tmp_path / "home"
    copy_demo_home(small_demo_home(built_once).home, home / "demo")
    before = {p for r in _sessions(capsys, home / "demo") for p in r["projects"].split(",")}
    assert "webshop" in before
    (home / "config.toml").write_text('[projects]\n"webshop" = "shop"\n')
    monkeypatch.setenv("AGENTLAKE_HOME", str(home))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    assert main(["demo", "--quiet", "--projects", "1", "--sessions", "1"]) == 0
    assert "note: the quickstart's demo is in" in capsys.readouterr().err
    after = {p for r in _sessions(capsys, home / "demo") for p in r["projects"].split(",")}
    assert after == before - {"webshop"} | {"shop"}
