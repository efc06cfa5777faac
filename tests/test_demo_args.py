"""`agentlake demo`'s sizes: a value no generator can make is a usage error naming the option and
its range (exit 2, argparse's), never a ZeroDivisionError or FileNotFoundError traceback from
half a demo written (a user's report: `--projects 0`, `--projects -3`, `--sessions -1`)."""

import json
import subprocess
import sys

import pytest

from transforms.demo import generate_demo

RANGE = {"--projects": (1, 100), "--sessions": (1, 100)}  # transforms.demo.LIMITS


def run_demo(*args, tmp_path):
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "AGENTLAKE_HOME": str(tmp_path / "al")}
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "demo", "--quiet", *args], env=env,
                          capture_output=True, text=True)


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

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    home = tmp_path / "al"
    assert main(["demo", "--home", str(home), "--quiet", "--projects", "1", "--sessions", "1", "--seed", "-5"]) == 0
    capsys.readouterr()
    assert main(["sql", "--home", str(home), "--format", "json",
                 "SELECT COUNT(DISTINCT provider) AS agents FROM sessions"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["agents"] >= 10
    assert (home / "demo-data" / ".generated").read_text() == "seed -5\n"


def test_a_seed_gives_the_same_numbers_wherever_the_demo_is_written(tmp_path):
    """A user's report: the demo's Crush costs differed with the home's path, seed for seed (the
    generator grew each session's context with the length of its messages, paths included)."""
    import dataclasses

    from transforms.provider import DiscoverOptions
    from warehouse.ingest import discover_sources, ingest_all
    from warehouse.layout import Layout
    from warehouse.views import build_warehouse, connect

    totals = []
    for folder in ("d", "a-folder-with-a-much-longer-name/and/deeper"):
        demo = generate_demo(tmp_path / folder / "demo", projects=2, sessions=2, seed=7)
        sources, _ = discover_sources(DiscoverOptions(env={}, extra_roots=demo.roots(), use_default=False))
        layout = dataclasses.replace(Layout.resolve(home=tmp_path / folder / "home"), machine="m", user="u")
        ingest_all(sources, layout, workers=1)
        build_warehouse(layout.lake, layout.warehouse)
        with connect(layout.warehouse) as con:
            totals.append(con.execute(
                "SELECT provider, SUM(cost_usd), SUM(total_tokens), COUNT(*) FROM sessions GROUP BY 1 ORDER BY 1"
            ).fetchall())
    assert len(totals[0]) == 18 and any(cost for _, cost, _, _ in totals[0])
    assert totals[0] == totals[1]
