"""Issue 12, item 19: after `agentlake quickstart` on a machine without agent data (it ingests a
demo into <home>/demo), every command the README lists works as written, with no --home, and
says it is using the demo; the user's own data takes over as soon as there is some."""

import json
import os

from pipelines.cli import main
from tests.conftest import T0
from transforms.synth.crush import add_message, add_session, write_registry
from transforms.synth.crush_parts import text_part


def test_the_readme_commands_work_after_a_quickstart_demo_then_own_data_takes_over(
        tmp_path, monkeypatch, capsys, project):
    home = tmp_path / "home"
    monkeypatch.setenv("AGENTLAKE_HOME", str(home))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # each home's own Dagster instance
    monkeypatch.delenv("AGENTLAKE_WAREHOUSE", raising=False)
    assert main(["quickstart", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert f"in {home / 'demo'}" in err
    next_line = next(line for line in out.splitlines() if line.startswith("Next:"))
    assert "--home" not in next_line  # the command it suggests works as printed
    # the demo's days, not --week: its sessions are on fixed days, months before today (a trial)
    since, until = next_line.split("the demo's days, and one either side for time zones: --since ")[1].rstrip(
        ")").split(" --until ")
    assert main(["report", "--since", since, "--until", until, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"][0]["root_sessions"] > 0
    # the Dagster UI on the demo's home (`agentlake dev --home <home>/demo`) finds its stores
    from pipelines.defs.resources import AgentlakeResource

    found, problems = AgentlakeResource(home=str(home / "demo")).discover()
    assert found and not problems
    # the notebooks open what `agentlake sql` opens: the demo, until the home holds data
    from warehouse.lake.config import reader_layout

    assert reader_layout().warehouse == home / "demo" / "warehouse.ducklake"

    assert main(["report", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["totals"][0]["root_sessions"] > 0
    assert f"using the quickstart demo in {home / 'demo'}" in err

    assert main(["sql", "SELECT COUNT(*) AS n FROM sessions", "--format", "csv"]) == 0
    assert int(capsys.readouterr().out.splitlines()[1]) > 0

    assert main(["search", "login handler", "--agent", "claude", "--format", "json"]) == 0  # the README's
    hit = json.loads(capsys.readouterr().out)[0]
    assert "**login**" in hit["snippet"]
    # its open command reads the demo it searched, also once the user's own data takes over (a trial:
    # it read the home's own warehouse then, and printed no row)
    assert f"sql --home {home / 'demo'} " in hit["open_command"]

    assert main(["sources"]) == 0
    out, err = capsys.readouterr()
    assert "crush-" in out and "codex-" in out and "no sources found" not in err

    # `agentlake dev` (which execs Dagster on the home it settles on) takes the demo's home too
    from pipelines.cli import parser
    from pipelines.command_args import use_demo_if_empty

    dev = parser().parse_args(["dev"])
    use_demo_if_empty(dev)
    assert dev.home == str(home / "demo") and "quickstart demo" in capsys.readouterr().err

    assert main(["ingest", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "0 failed" in out and "no sources found" not in err and "quickstart demo" in err

    assert main(["views"]) == 0
    assert main(["compact"]) == 0
    capsys.readouterr()
    assert main(["serving", str(tmp_path / "bi.duckdb")]) == 0
    assert "session_summary" in capsys.readouterr().out
    assert not (home / "lake").exists()  # the demo never leaks into the home's own lake
    # `agentlake demo` refreshes that demo, not a second one in <home> (which would then hold data
    # of its own, and take the user's sessions beside generated ones: a trial)
    assert main(["demo", "--quiet"]) == 0
    assert f"note: the quickstart's demo is in {home / 'demo'}: this demo goes there" in capsys.readouterr().err
    assert not (home / "lake").exists() and not (home / "demo-data").exists()

    # a mistyped agent home finds nothing: the run fails, and the demo stays the one read
    assert main(["ingest", "--quiet", "--agent-home", f"claude={tmp_path / 'typo' / '.claude'}"]) == 1
    capsys.readouterr()
    assert main(["sql", "SELECT COUNT(*) AS n FROM sessions", "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    assert int(out.splitlines()[1]) > 0 and "quickstart demo" in err

    # an agent writes its first session: ingest reads it into the home, and the demo steps aside
    p = project("mine")
    add_session(p.conn, "s", title="t", created_at=T0, cost=0.5)
    add_message(p.conn, "m", "s", "user", [text_part("hi")], created_at=T0)
    p.close()
    write_registry(os.environ["CRUSH_GLOBAL_DATA"], [{"path": str(p.path), "data_dir": ".crush",
                                                      "last_accessed": "2026-01-01T00:00:00Z"}])
    assert main(["ingest", "--quiet"]) == 0
    assert "quickstart demo" not in capsys.readouterr().err
    assert main(["sql", "SELECT project, cost_usd FROM sessions", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == [{"project": "mine", "cost_usd": 0.5}] and "demo" not in err
    assert reader_layout().warehouse == home / "warehouse.ducklake"
    import shlex

    assert main([*shlex.split(hit["open_command"])[1:], "--format", "json"]) == 0
    assert any("login" in str(row["what"]) for row in json.loads(capsys.readouterr().out))


def test_quickstart_says_which_place_it_could_not_read(built_once):
    from tests.support_homes import quickstart_with_a_typo

    # run once per session: test_newuser_output reads the demo it generates
    ran = quickstart_with_a_typo(built_once)
    assert ran.code == 1
    assert f"warning: CodeWhale home {ran.root / 'typo'} does not exist" in ran.err


def test_a_demo_in_a_home_named_with_home_is_what_dagster_finds_there(tmp_path, monkeypatch, capsys, built_once):
    """`agentlake demo --home X` writes X's config.toml naming the demo's stores, so the Dagster UI
    on X (`agentlake dev --home X`) discovers and materialises them; a demo in the defaulted home
    writes none (it may be where the user's own agents' data goes later)."""
    from pipelines.defs.resources import AgentlakeResource
    from tests.support_homes import small_demo_home

    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own Dagster instance
    monkeypatch.delenv("AGENTLAKE_WAREHOUSE", raising=False)
    # `agentlake demo --home HOME --projects 1 --sessions 1 --quiet`, built once: this test only reads it
    built = small_demo_home(built_once)
    home = built.home
    assert built.code == 0
    assert f"wrote {home / 'config.toml'}" in built.err
    # its first line says which command wrote it (`quickstart` said so when `demo` had: a new user's trial)
    assert (home / "config.toml").read_text().startswith("# written by `agentlake demo` (which `agentlake quickstart`")
    found, problems = AgentlakeResource(home=str(home)).discover()
    assert found and not problems and {s.provider for s in found.values()} >= {"crush", "claude", "codex"}
    monkeypatch.setenv("AGENTLAKE_HOME", str(tmp_path / "default"))
    assert main(["demo", "--projects", "1", "--sessions", "1", "--quiet"]) == 0
    assert not (tmp_path / "default" / "config.toml").exists()
