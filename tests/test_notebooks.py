"""Every marimo notebook runs headless against the fixture warehouse and computes what it shows;
a session is picked by a lake-wide key; the HTML export renders with no network; running or
exporting a notebook leaves nothing in the repository."""

import functools
import http.server
import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.conftest import scalar
from tests.support_browser import CHROMIUM

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def warehouse_env(lake, monkeypatch):
    monkeypatch.setenv("AGENTLAKE_WAREHOUSE", str(lake.warehouse))
    return lake


def test_cost_overview(warehouse_env):
    from notebooks import cost_overview

    _, defs = cost_overview.app.run()
    daily = defs["daily"]
    assert round(daily.filter(daily["provider"] == "crush")["cost_usd"].sum(), 9) == 1.3
    assert defs["cost_over_time"].to_dict()["mark"]["type"] == "bar"
    assert set(defs["by_project_model"]["project"].to_list()) == {"shop"}


def test_cost_overview_names_models_as_the_report_does(layout, built_once, monkeypatch, capsys):
    """The notebook grouped daily_costs by the recorded name (`claude-sonnet-4-5-20250929` apart
    from `claude-sonnet-4-5`) and wrote `(session-level)` where the report says `no model
    recorded`: on every agent of the demo it now has the report's rows by model, name for name."""
    from decimal import Decimal

    from notebooks import cost_overview
    from pipelines.cli import main
    from tests.test_five_agents import ingested_demo
    from warehouse.serve.labels import NO_MODEL, model_label

    ingested_demo(built_once, layout)
    monkeypatch.setenv("AGENTLAKE_WAREHOUSE", str(layout.warehouse))
    assert main(["report", "--home", str(layout.home), "--by", "model", "--top", "0", "--format", "json"]) == 0
    # the rows with a cost (daily_costs'): the others only count messages (Claude Code's `<synthetic>`)
    report = {model_label(r["model_name"]): r["cost_usd"] for r in json.loads(capsys.readouterr().out)["by_model"]
              if r["cost_source"] is not None}
    assert NO_MODEL in report and "claude-sonnet-4-5-20250929" not in report

    _, defs = cost_overview.app.run()
    for frame in (defs["daily"], defs["by_project_model"]):
        costs = {}
        for name, cost in frame.select("model_name", "cost_usd").iter_rows():
            costs.setdefault(name, []).append(cost)
        assert set(costs) == set(report)  # the same names: none raw, none said otherwise
        for name, cost in report.items():
            if cost is not None:  # an unknown cost: no figure to compare
                assert sum(c for c in costs[name] if c is not None) == pytest.approx(float(Decimal(str(cost))),
                                                                                      abs=1e-6), name
    # a cell's list is sorted, as the report's (`estimated, native` was `native, estimated` too: a trial)
    sources = [v for v in defs["by_project_model"]["cost_source"].to_list() if v and ", " in v]
    assert sources and all(v.split(", ") == sorted(v.split(", ")) for v in sources)
    assert defs["split"].value == "project"
    assert "model_name" in json.dumps(cost_overview.app.run(
        defs={"split": _model_split()})[1]["cost_over_time"].to_dict()["encoding"]["color"])


def _model_split():
    import marimo as mo

    return mo.ui.dropdown({"project": "project", "model": "model_name", "provider": "provider"}, value="model")


def test_tool_usage(warehouse_env):
    from notebooks import tool_usage

    _, defs = tool_usage.app.run()
    tools = {r["tool_name"]: r for r in defs["tools"].iter_rows(named=True)}
    assert tools["edit"]["calls"] == 2 and tools["edit"]["errors"] == 1
    # the chart reaches the page as JSON: a SUM over BIGINT is a DuckDB HUGEINT, a Decimal in
    # Python, and marimo then drew no chart ("Object of type Decimal is not JSON serializable")
    assert json.loads(json.dumps(defs["calls_and_errors"].to_dict()))["mark"]["type"] == "bar"
    assert defs["failing_commands"]["command"].to_list() == ["npm test -- --watch"]
    # a bar as long as the calls, split into failed and the rest (errors and non-zero exits were
    # stacked on the calls: a trial's bash bar reached 63 for 46 calls)
    assert all(t["succeeded"] + t["failed"] == t["calls"] for t in tools.values())
    assert (tools["bash"]["calls"], tools["bash"]["failed"], tools["edit"]["failed"]) == (2, 1, 1)
    chart = defs["calls_and_errors"].to_dict()
    assert chart["transform"][0]["fold"] == ["succeeded", "failed"]
    # one row per command line, whatever agents and projects ran it
    assert defs["failing_commands"].select("calls", "failures", "projects", "agents").rows() == [(1, 1, "shop", "crush")]


def test_session_explorer_walks_one_session_in_order(warehouse_env):
    from notebooks import session_explorer
    from tests.conftest import scalar

    _, defs = session_explorer.app.run()
    transcript = defs["transcript"]
    provider, machine, _, source_id, session_id = defs["choice"].value  # the newest session with messages
    assert (provider, machine, session_id) == ("crush", "laptop", "S")
    assert transcript.height == scalar(warehouse_env, "SELECT COUNT(*) FROM parts WHERE session_id = 'S'")
    assert transcript["message_index"].to_list() == sorted(transcript["message_index"].to_list())


def _built_copy(layout, built_once, monkeypatch, name, build):
    """A copy of a lake built once per session (the tests only read it), in $AGENTLAKE_WAREHOUSE
    as the notebooks read it."""
    from tests.conftest import copy_home

    copy_home(built_once(name, build).home, layout.home)
    monkeypatch.setenv("AGENTLAKE_WAREHOUSE", str(layout.warehouse))
    return layout


@pytest.fixture
def shared_id_lake(layout, built_once, monkeypatch):
    """Two agents whose sessions have the same id, "dup": Crush (three messages, the newer
    session) and CodeWhale (two messages)."""
    return _built_copy(layout, built_once, monkeypatch, "notebooks-shared-id", _shared_id)


def _shared_id(tmp_path: Path):
    from tests.conftest import T0, Project, assistant, ingest
    from transforms.synth.codewhale import session_doc, text_block, write_session
    from transforms.synth.crush import add_message, add_session
    from transforms.synth.crush_parts import text_part
    from warehouse.lake.layout import Layout

    layout = Layout.resolve(home=tmp_path / "home", machine="laptop", user="dev")
    p = Project(tmp_path / "projects", "shared")
    add_session(p.conn, "dup", title="crush dup", created_at=T0 + 3600, cost=0.5)
    add_message(p.conn, "u1", "dup", "user", [text_part("hello crush")], created_at=T0 + 3600)
    assistant(p.conn, "a1", "dup", T0 + 3601)
    assistant(p.conn, "a2", "dup", T0 + 3602)
    p.close()
    msgs = [{"role": "user", "content": [text_block("hello whale")]},
            {"role": "assistant", "content": [text_block("ok")]}]
    write_session(tmp_path / "cw" / "sessions",
                  session_doc("dup", title="whale dup", created_at=datetime.fromtimestamp(T0, timezone.utc),
                              workspace=p.path, messages=msgs, total_tokens=10, cost=None))
    ingest(layout, p.db, codewhale_homes=[tmp_path / "cw"])
    return layout


def test_session_explorer_tells_apart_sessions_that_share_an_id(shared_id_lake):
    """Crashed with "Duplicate option name" when two agents share a session id, and its
    transcript mixed both sessions' messages."""
    from notebooks import session_explorer
    from tests.conftest import query

    keys = query(shared_id_lake, 'SELECT provider, machine, "user", source_id, session_id FROM session_summary '
                                 "ORDER BY provider")
    assert [(k[0], k[4]) for k in keys] == [("codewhale", "dup"), ("crush", "dup")]
    _, defs = session_explorer.app.run()
    choice, transcript = defs["choice"], defs["transcript"]
    assert len(choice.options) == 2  # one option per session, each with its own label
    assert choice.value == keys[1]  # the newest: Crush's
    assert set(transcript["provider"].to_list()) == {"crush"}
    assert set(transcript["source_id"].to_list()) == {keys[1][3]}
    assert transcript.height == 3 + 2  # user text; two assistant messages of text + finish
    assert "hello whale" not in transcript["summary"].to_list()

    import marimo as mo

    whale = next(label for label, key in choice.options.items() if key == keys[0])
    _, defs = session_explorer.app.run(defs={"choice": mo.ui.dropdown(choice.options, value=whale)})
    transcript = defs["transcript"]
    assert set(transcript["provider"].to_list()) == {"codewhale"} and transcript.height == 2
    assert "hello whale" in transcript["summary"].to_list()


@pytest.fixture
def two_machine_lake(layout, built_once, monkeypatch):
    """One Crush store landed by two machines (a team lake: the same store, so the same source id
    and session ids, from the laptop and the desktop), with tool calls and their results."""
    return _built_copy(layout, built_once, monkeypatch, "notebooks-two-machines", _two_machines)


def _two_machines(tmp_path: Path):
    import dataclasses

    from tests.conftest import ingest, ingest_tables

    layout, store = _shared_store(tmp_path)
    ingest_tables(layout, store)  # the laptop: the desktop's merge next builds the marts of both
    ingest(dataclasses.replace(layout, machine="desktop"), store)
    return layout


def _shared_store(tmp_path: Path):
    """The laptop's layout, and a Crush store of one session with tool calls and their results."""
    from tests.conftest import T0, Project, assistant
    from transforms.synth.crush import add_message, add_session
    from transforms.synth.crush_parts import bash_output, finish_part, text_part, tool_call_part, tool_result_part
    from warehouse.lake.layout import Layout

    layout = Layout.resolve(home=tmp_path / "home", machine="laptop", user="dev")
    p = Project(tmp_path / "projects", "shared")
    add_session(p.conn, "R", title="on both machines", created_at=T0, cost=0.5)
    add_message(p.conn, "u1", "R", "user", [text_part("run the tests")], created_at=T0)
    for i in range(3):
        add_message(p.conn, f"call-{i}", "R", "assistant",
                    [tool_call_part(f"b{i}", "bash", {"command": "npm test"}), finish_part("tool_use", T0 + 10 * i + 1)],
                    created_at=T0 + 10 * i + 1, model="claude-sonnet-4-5", provider="anthropic")
        add_message(p.conn, f"res-{i}", "R", "tool", [tool_result_part(f"b{i}", "bash", bash_output("ok"))],
                    created_at=T0 + 10 * i + 2)
    assistant(p.conn, "a1", "R", T0 + 40)
    p.close()
    return layout, p.db


def test_session_explorer_keeps_each_machine_apart(two_machine_lake):
    """The transcript joined messages to parts (and tool calls) without `machine`: on a lake with
    two machines each row came back once per copy of the session (184 rows for 18)."""
    import marimo as mo

    from notebooks import session_explorer
    from tests.conftest import query

    assert sorted(query(two_machine_lake, "SELECT machine FROM session_summary")) == [("desktop",), ("laptop",)]
    _, defs = session_explorer.app.run()
    choice = defs["choice"]
    assert len(choice.options) == 2  # one option per machine's copy
    for label, key in choice.options.items():
        provider, machine, _, source_id, session_id = key
        _, defs = session_explorer.app.run(defs={"choice": mo.ui.dropdown(choice.options, value=label)})
        transcript = defs["transcript"]
        parts = query(two_machine_lake, "SELECT COUNT(*) FROM parts WHERE provider = ? AND machine = ? "
                      "AND source_id = ? AND session_id = ?", provider, machine, source_id, session_id)[0][0]
        assert transcript.height == parts  # each part once
        assert set(transcript["machine"].to_list()) == {machine}
        steps = list(zip(transcript["message_index"].to_list(), transcript["part_index"].to_list()))
        assert len(set(steps)) == len(steps)
        calls = transcript.filter(transcript["command"].is_not_null())
        assert calls.height == scalar(two_machine_lake, "SELECT COUNT(*) FROM tool_calls WHERE machine = ?", machine)


def test_bi_transcript_query_keeps_each_machine_apart(two_machine_lake):
    """docs/BI.md's one-session query, run as written with this lake's values: one row per part of
    the one machine's session."""
    import re

    from tests.conftest import query

    text = (ROOT / "docs" / "BI.md").read_text()
    block = re.search(r"\*\*Fast queries on the raw tables\.\*\*.*?```sql\n(.*?)```", text, re.S).group(1)
    sql = next(s for s in block.split(";") if "JOIN parts" in s)
    source_id, user = query(two_machine_lake, "SELECT DISTINCT source_id, \"user\" FROM sessions")[0]
    values = {"'webshop'": "'shared'", "'4e7c41d67537802b'": f"'{source_id}'", "'dev'": f"'{user}'", "'...'": "'R'"}
    for placeholder, value in values.items():
        assert placeholder in sql
        sql = sql.replace(placeholder, value)
    rows = query(two_machine_lake, sql)
    expected = scalar(two_machine_lake, "SELECT COUNT(*) FROM parts WHERE machine = 'laptop' AND session_id = 'R'")
    assert len(rows) == expected and expected < scalar(two_machine_lake, "SELECT COUNT(*) FROM parts")


# docs/LAKE.md's "one session, in order" query (once the README's), its literals as parameters
README_TRANSCRIPT = """
SELECT m.provider, m.machine, m.message_index, m.role, p.part_type,
  COALESCE(p.text, p.reasoning, NULLIF(concat_ws(chr(10), p.shell_command, p.shell_output), ''),
  NULLIF(concat_ws(chr(10), p.tool_name, p.tool_input, p.tool_result), ''), p.finish_reason) AS what
FROM messages m JOIN parts p ON p.provider = m.provider AND p.machine = m.machine AND p."user" = m."user"
  AND p.source_id = m.source_id AND p.session_id = m.session_id AND p.message_id = m.message_id
WHERE m.provider = ? AND m.machine = ? AND m."user" = ? AND m.source_id = ? AND m.session_id = ?
ORDER BY m.message_index, p.part_index"""


def test_readme_style_transcript_query_needs_the_source(shared_id_lake):
    """The lake-wide key, in SQL: by session_id alone the two sessions mix; with provider and
    source_id they do not (the query the README should show)."""
    from tests.conftest import query

    by_id_only = query(shared_id_lake, """
        SELECT DISTINCT m.provider FROM messages m JOIN parts p USING (message_id) WHERE m.session_id = 'dup'""")
    assert len(by_id_only) == 2
    source = query(shared_id_lake, "SELECT source_id FROM sessions WHERE provider = 'crush' AND session_id = 'dup'")[0][0]
    rows = query(shared_id_lake, README_TRANSCRIPT, "crush", "laptop", "dev", source, "dup")
    assert {r[0] for r in rows} == {"crush"} and len(rows) == 5
    assert [r[2] for r in rows] == sorted(r[2] for r in rows)


def test_readme_style_transcript_query_keeps_each_machine_apart(two_machine_lake):
    """The same query on a lake that holds the session from two machines: one machine's parts,
    each once."""
    from tests.conftest import query

    source = query(two_machine_lake, "SELECT DISTINCT source_id FROM sessions")[0][0]
    for machine in ("laptop", "desktop"):
        rows = query(two_machine_lake, README_TRANSCRIPT, "crush", machine, "dev", source, "R")
        assert {r[1] for r in rows} == {machine}
        assert len(rows) == scalar(two_machine_lake, "SELECT COUNT(*) FROM parts WHERE machine = ?", machine)


@pytest.fixture
def two_user_lake(layout, built_once, monkeypatch):
    """One Crush store landed on one machine under two user names (a user's rename): the same
    source and session ids, told apart by `user` only."""
    return _built_copy(layout, built_once, monkeypatch, "notebooks-two-users", _two_users)


def _two_users(tmp_path: Path):
    import dataclasses

    from tests.conftest import ingest, ingest_tables

    layout, store = _shared_store(tmp_path)
    ingest_tables(layout, store)
    ingest(dataclasses.replace(layout, user="ana"), store)
    return layout


def test_session_explorer_and_the_lake_docs_query_keep_each_user_apart(two_user_lake):
    """The explorer's key left `user` out: of one store landed under two user names, one user's
    sessions were missing from its list, and each transcript row came back once per copy (an
    analyst's trial: 48 rows for 5). docs/LAKE.md's query, as written, keeps them apart too."""
    import marimo as mo

    from notebooks import session_explorer
    from tests.conftest import query

    assert sorted(query(two_user_lake, 'SELECT "user" FROM session_summary')) == [("ana",), ("dev",)]
    _, defs = session_explorer.app.run()
    choice = defs["choice"]
    assert sorted(key[2] for key in choice.options.values()) == ["ana", "dev"]
    for label, (provider, machine, user, source_id, session_id) in choice.options.items():
        transcript = session_explorer.app.run(defs={"choice": mo.ui.dropdown(choice.options, value=label)})[1][
            "transcript"]
        parts = scalar(two_user_lake, 'SELECT COUNT(*) FROM parts WHERE "user" = ? AND session_id = ?', user, session_id)
        assert transcript.height == parts and set(transcript["user"].to_list()) == {user}
        assert len(query(two_user_lake, README_TRANSCRIPT, provider, machine, user, source_id, session_id)) == parts


def test_no_marimo_session_cache_in_the_repository():
    """notebooks/__marimo__/session/*.json held absolute paths from another machine and was
    rewritten by every run: gone from the tree, and ignored."""
    assert not list((ROOT / "notebooks").glob("__marimo__/session/*.json"))
    ignored = (ROOT / ".gitignore").read_text().split("\n")
    assert "__marimo__/" in ignored


# no network: every name but 127.0.0.1 fails to resolve
OFFLINE = ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
VIRTUAL_TIME_BUDGET = 20_000  # ms of the page's own clock: its scripts run to the end, whatever the load


def served(directory: Path):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def offline_chromium():
    """One offline browser for the module's exports, each test in a context of its own."""
    from tests.support_browser import Browser

    browser = Browser(*OFFLINE)
    yield browser
    browser.close()


def rendered_offline(url: str, browser) -> str:
    tab = browser.context()
    try:
        error, dom = tab.dom(url, virtual_time_budget=VIRTUAL_TIME_BUDGET)
    finally:
        tab.close()
    assert error is None, error
    return dom


@pytest.mark.skipif(not CHROMIUM and not os.environ.get("CI"), reason="no chromium: apt-get install chromium")
def test_html_export_renders_offline(warehouse_env, offline_chromium, tmp_path):
    """`marimo export html` pages load marimo's frontend from cdn.jsdelivr.net and stay blank
    offline; `python -m notebooks.export` points them at the frontend bundled in the marimo wheel."""
    from notebooks.export import export_all

    site = tmp_path / "site"
    pages = export_all(site, ["cost_overview"])
    assert [p.name for p in pages] == ["cost_overview.html"]
    text = pages[0].read_text()
    assert "cdn.jsdelivr.net" not in text.split("<body", 1)[0]
    assert not list((ROOT / "notebooks").glob("__marimo__/**/*"))  # the export left no session cache
    server = served(site)
    try:
        dom = rendered_offline(f"http://127.0.0.1:{server.server_address[1]}/cost_overview.html", offline_chromium)
    finally:
        server.shutdown()
        server.server_close()
    # the frontend ran: the notebook's outputs are in the DOM as elements, not only as JSON
    assert '<h1 id="cost-overview"' in dom
    assert "Split cost by" in dom


@pytest.mark.skipif(not CHROMIUM and not os.environ.get("CI"), reason="no chromium: apt-get install chromium")
def test_plain_marimo_export_is_blank_offline(warehouse_env, offline_chromium, tmp_path):
    """Why the exports rendered blank: `marimo export html` (asset_url unset) loads its script
    from the CDN, so with no network the page has the data as JSON but nothing renders it."""
    from notebooks.export import export_notebook

    page = export_notebook("cost_overview", tmp_path / "site", asset_url=None)
    assert "cdn.jsdelivr.net/npm/@marimo-team/frontend" in page.read_text()
    server = served(tmp_path / "site")
    try:
        dom = rendered_offline(f"http://127.0.0.1:{server.server_address[1]}/cost_overview.html", offline_chromium)
    finally:
        server.shutdown()
        server.server_close()
    assert "cost-overview" in dom  # the data is there...
    assert '<h1 id="cost-overview"' not in dom  # ...but nothing rendered it


def test_export_without_the_notebooks_extra_says_what_to_install(monkeypatch, capsys, tmp_path):
    """A plain `pip install -e .` has no marimo: the export names the extra, with no traceback."""
    import sys

    from notebooks.export import main

    monkeypatch.setitem(sys.modules, "marimo", None)  # what an environment without it imports
    assert main(["-o", str(tmp_path / "out")]) == 2
    assert "-e '.[notebooks]'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_export_without_a_warehouse_is_one_error_and_writes_nothing(monkeypatch, capsys, tmp_path):
    """A new user's trial: each notebook failed on the missing warehouse, a traceback apiece,
    and the output folder was left with the frontend's assets and no page."""
    from notebooks.export import main

    monkeypatch.setenv("AGENTLAKE_WAREHOUSE", str(tmp_path / "nope.ducklake"))
    assert main(["-o", str(tmp_path / "out"), "cost_overview"]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"error: no warehouse at {tmp_path / 'nope.ducklake'}: run `agentlake ingest`")
    assert said.count("\n") == 1 and "Traceback" not in said
    assert not (tmp_path / "out").exists()


def test_a_notebook_that_fails_is_named_and_leaves_no_half_written_folder(monkeypatch, capsys, tmp_path):
    """A warehouse that is there but cannot be read (not a catalog): the notebook's error as
    marimo prints it, then one line naming it, exit 1; the new folder is removed."""
    from notebooks.export import main

    (tmp_path / "notes.ducklake").write_text("not a catalog\n")
    monkeypatch.setenv("AGENTLAKE_WAREHOUSE", str(tmp_path / "notes.ducklake"))
    assert main(["-o", str(tmp_path / "out"), "cost_overview"]) == 1
    assert capsys.readouterr().err.endswith("error: notebook cost_overview failed while exporting\n")
    assert not (tmp_path / "out").exists()


def test_export_with_a_config_it_cannot_read_exits_1_as_the_cli_does(monkeypatch, capsys, tmp_path):
    """A config.toml that cannot be read is the environment's error (exit 1, agentlake sql's),
    not a usage error; nothing is written."""
    from notebooks.export import main

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("warehouse = [\n")
    monkeypatch.setenv("AGENTLAKE_HOME", str(home))
    assert main(["-o", str(tmp_path / "out"), "cost_overview"]) == 1
    assert capsys.readouterr().err.startswith(f"error: cannot read {home / 'config.toml'}")
    assert not (tmp_path / "out").exists()
