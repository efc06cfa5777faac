"""Kilo Code: real task folders (the VS Code extension's format, Kilo-Org/kilocode-legacy) and a
real Kilo CLI database (OpenCode's schema) in tmp homes, through the lake, read back by DuckDB."""

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.conftest import ingest_tables, query, scalar
from tests.test_pi import assert_common_totals, digests, ingest_beside_fifos
from transforms.kilo.discover import EXTENSION_ID, discover
from transforms.synth.kilo import TaskBuilder, environment_details, generate_home, storage_in
from transforms.synth.opencode import (add_message, add_session, assistant_info, create_opencode_db, session_info,
                                       tokens, user_info)
from transforms.pricing import Buckets, price_buckets

TASK = "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
T0 = 1772439300000  # 2026-03-02T08:15:00Z in ms, as Kilo writes `ts`
ENV = environment_details("/home/dev/shop", "anthropic/claude-sonnet-4.5")


def ui(ts, **m):
    return {"ts": T0 + ts, **m}


def req(ts, **info):
    return ui(ts, type="say", say="api_req_started", text=json.dumps(info))


# ui_messages.json by hand. tokensIn is the TOTAL input (Kilo >= 4.119), so uncached = tokensIn - reads - writes:
#   #1: 9003 - 0 - 9000 = 3;   #5: 9205 - 9000 - 200 = 5;   #9 (openai protocol): 9204 - 9200 - 0 = 4
# Costs: #1 0.035559 and #5 0.004665 (Kilo's own); the fast-apply edit 0.0021 and the condensation
# 0.0123 (Kilo's own, outside api_req_started); #8 is a placeholder (no numbers: never finished);
# #9 recorded cost 0: priced from genai-prices.
UI = [
    ui(0, type="say", say="text", text="Fix the login test", images=[]),
    req(1000, apiProtocol="anthropic", tokensIn=9003, tokensOut=120, cacheWrites=9000, cacheReads=0, cost=0.035559),
    ui(2000, type="say", say="text", text="Let me run it.", partial=False),
    ui(2500, type="ask", ask="command", text="npm test -- login"),
    req(4000, apiProtocol="anthropic", tokensIn=9205, tokensOut=80, cacheWrites=200, cacheReads=9000, cost=0.004665),
    ui(5000, type="ask", ask="tool", text=json.dumps({"tool": "editedExistingFile", "path": "src/login.ts",
                                                      "fastApplyResult": {"tokensIn": 900, "tokensOut": 300,
                                                                          "cost": 0.0021}})),
    ui(6000, type="say", say="condense_context", partial=False,
       contextCondense={"cost": 0.0123, "prevContextTokens": 90000, "newContextTokens": 9000, "summary": "s"}),
    ui(6500, type="say", say="checkpoint_saved", text="abc123"),
    req(7000, apiProtocol="anthropic"),
    req(9000, apiProtocol="openai", tokensIn=9204, tokensOut=30, cacheWrites=0, cacheReads=9200, cost=0),
]
API = [
    {"role": "user", "ts": T0 + 500, "content": [{"type": "text", "text": "<task>\nFix the login test\n</task>"},
                                                 {"type": "text", "text": ENV}]},
    {"role": "assistant", "ts": T0 + 2000, "content": [
        {"type": "text", "text": "Let me run it."},
        {"type": "tool_use", "id": "toolu_01", "name": "execute_command", "input": {"command": "npm test -- login"}}]},
    {"role": "user", "ts": T0 + 3000, "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01",
         "content": "Command executed in terminal within working directory '/home/dev/shop'. Exit code: 1\nOutput:\nFAIL"},
        {"type": "text", "text": ENV}]},
    {"role": "assistant", "ts": T0 + 4500, "content": [
        {"type": "tool_use", "id": "toolu_02", "name": "edit_file",
         "input": {"target_file": "src/login.ts", "instructions": "fix", "code_edit": "b"}}]},
    {"role": "user", "ts": T0 + 5500, "content": [
        {"type": "tool_result", "tool_use_id": "toolu_02", "content": [{"type": "text", "text": "Applied"}]},
        {"type": "text", "text": ENV}]},
    {"type": "reasoning", "ts": T0 + 8000, "summary": [{"type": "summary_text", "text": "Check the test."}],
     "encrypted_content": "gAAA"},
    {"role": "assistant", "ts": T0 + 9500, "content": [{"type": "text", "text": "Fixed."}]},
]


def write_task(storage: Path, task=TASK, api=API, ui_messages=UI) -> Path:
    folder = storage / "tasks" / task
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "api_conversation_history.json").write_text(json.dumps(api))
    (folder / "ui_messages.json").write_text(json.dumps(ui_messages))
    (folder / "task_metadata.json").write_text(json.dumps({"files_in_context": []}))
    return folder


def at(ts) -> datetime:
    return datetime.fromtimestamp((T0 + ts) / 1000, timezone.utc)


def test_fixture_exact_totals(layout, tmp_path):
    storage = tmp_path / "kilo"
    write_task(storage)
    summary = ingest_tables(layout, homes={"kilo": [storage]})
    assert [(r.status, r.reconciled) for r in summary.results] == [("ok", True)]
    estimated = price_buckets(Buckets(4, 9200, 0, None, 30), "claude-sonnet-4.5", "anthropic", at(9000))
    assert estimated.cost_usd and estimated.cost_usd > 0
    assert query(layout, "SELECT input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens, output_tokens, "
                         "cost_usd, cost_source, model FROM usage ORDER BY requested_at") == [
        (3, 0, 9000, 120, pytest.approx(0.035559), "native", "anthropic/claude-sonnet-4.5"),
        (5, 9000, 200, 80, pytest.approx(0.004665), "native", "anthropic/claude-sonnet-4.5"),
        (900, None, None, 300, pytest.approx(0.0021), "native", "anthropic/claude-sonnet-4.5"),
        (None, None, None, None, pytest.approx(0.0123), "native", None),
        (4, 9200, 0, 30, pytest.approx(estimated.cost_usd), "estimated", "anthropic/claude-sonnet-4.5")]
    own = 0.035559 + 0.004665 + 0.0021 + 0.0123
    assert query(layout, "SELECT session_id, title, is_root, cost_source, project_path, message_count, "
                         "total_tokens FROM sessions") == [
        (TASK, "Fix the login test", True, "estimated", "/home/dev/shop", 7,
         (3 + 9000 + 120) + (5 + 9000 + 200 + 80) + (900 + 300) + (4 + 9200 + 30))]
    assert scalar(layout, "SELECT cost_usd FROM sessions") == pytest.approx(own + estimated.cost_usd)
    # what a reader of api_req_started alone (ccusage, tokscale) sums; Kilo's own total
    # (consolidateTokenUsage) also adds the condensation and the fast-apply edit
    api_req_only = sum(json.loads(m["text"]).get("cost", 0) for m in UI if m.get("say") == "api_req_started")
    assert api_req_only == pytest.approx(0.035559 + 0.004665) and api_req_only < own
    assert dict(query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1")) == {
        "text": 3, "injected_context": 3, "tool_call": 2, "tool_result": 2, "reasoning": 1}
    assert query(layout, "SELECT tool_name, tool_category, command, file_path, exit_code, is_error, has_result "
                         "FROM tool_calls ORDER BY called_at") == [
        ("execute_command", "shell", "npm test -- login", None, 1, None, True),
        ("edit_file", "edit", None, "src/login.ts", None, None, True)]


def test_tokscale_counts_the_cache_twice_on_current_files(layout, tmp_path):
    """Task.ts since Kilo v4.119.0 (#8954) writes `tokensIn: costResult.totalInputTokens`, the
    input WITH cache reads and writes; tokscale's roocode.rs adds cacheReads and cacheWrites to it."""
    write_task(tmp_path / "kilo")
    ingest_tables(layout, homes={"kilo": [tmp_path / "kilo"]})
    started = [json.loads(m["text"]) for m in UI if m.get("say") == "api_req_started" and "tokensIn" in m["text"]]
    tokscale = sum(r["tokensIn"] + r["tokensOut"] + r["cacheReads"] + r["cacheWrites"] for r in started)
    ours = scalar(layout, "SELECT SUM(total_tokens) FROM usage WHERE cache_read_tokens IS NOT NULL")
    assert ours == sum(r["tokensIn"] + r["tokensOut"] for r in started)
    assert tokscale - ours == sum(r["cacheReads"] + r["cacheWrites"] for r in started)


def test_before_4_119_anthropic_tokens_in_was_uncached(layout, tmp_path):
    old = 1749000000000  # 2025-06-04, before Kilo v4.119.0
    b_ui = [{"ts": old, "type": "say", "say": "text", "text": "old task"},
            {"ts": old + 1, "type": "say", "say": "api_req_started",
             "text": json.dumps({"apiProtocol": "anthropic", "tokensIn": 3, "tokensOut": 10, "cacheWrites": 9000,
                                 "cacheReads": 500, "cost": 0.05})},
            # a legacy api_req_finished holds the numbers of the request started before it
            {"ts": old + 2, "type": "say", "say": "api_req_started", "text": json.dumps({"request": "go"})},
            {"ts": old + 3, "type": "say", "say": "api_req_finished",
             "text": json.dumps({"tokensIn": 7, "tokensOut": 1, "cost": 0.01})}]
    write_task(tmp_path / "kilo", api=[], ui_messages=b_ui)
    # a current file whose tokensIn is below its cache: cannot hold the cache, so it is uncached
    write_task(tmp_path / "kilo", task="t2", api=[], ui_messages=[
        req(0, apiProtocol="anthropic", tokensIn=3, tokensOut=10, cacheWrites=9000, cacheReads=0, cost=0.04)])
    ingest_tables(layout, homes={"kilo": [tmp_path / "kilo"]})
    assert query(layout, "SELECT session_id, input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens, "
                         "output_tokens, cost_usd FROM usage ORDER BY session_id, requested_at") == [
        (TASK, 3, 500, 9000, 10, pytest.approx(0.05)), (TASK, 7, None, None, 1, pytest.approx(0.01)),
        ("t2", 3, 0, 9000, 10, pytest.approx(0.04))]


def test_unpriced_model_is_unknown_never_zero(layout, tmp_path):
    b = TaskBuilder("t-local", start=at(0), model="local/qwen3-coder")
    b.task("hi")
    b.request(1000, 10, cost=0.0)
    b.write(tmp_path / "kilo")
    ingest_tables(layout, homes={"kilo": [tmp_path / "kilo"]})
    assert query(layout, "SELECT cost_usd, cost_source FROM usage") == [(None, "unknown")]
    assert query(layout, "SELECT cost_usd, cost_source FROM sessions") == [(None, "unknown")]


def test_a_task_without_requests_is_a_known_zero(layout, tmp_path):
    write_task(tmp_path / "kilo", api=API[:1], ui_messages=UI[:1] + [req(7000, apiProtocol="anthropic")])
    ingest_tables(layout, homes={"kilo": [tmp_path / "kilo"]})
    assert query(layout, "SELECT cost_usd, cost_source FROM sessions") == [(0.0, "native")]
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == 0


def test_malformed_files_are_quarantined(layout, tmp_path):
    folder = write_task(tmp_path / "kilo")
    (folder / "ui_messages.json").write_text('[{"ts": 1, "type": "say"')  # cut off mid-write
    summary = ingest_tables(layout, homes={"kilo": [tmp_path / "kilo"]})
    assert summary.results[0].status == "ok"
    assert query(layout, "SELECT key, error LIKE 'not valid JSON%' FROM quarantine") == [
        (str(folder / "ui_messages.json"), True)]
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == len(API)  # the conversation is still read
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == 0


def test_discovery_finds_every_editor_and_os_and_the_cli(tmp_path):
    home = tmp_path / "user"
    places = {"linux": home / ".config" / "Code" / "User" / "globalStorage" / EXTENSION_ID,
              "mac": home / "Library" / "Application Support" / "Cursor" / "User" / "globalStorage" / EXTENSION_ID,
              "win": tmp_path / "roaming" / "VSCodium" / "User" / "globalStorage" / EXTENSION_ID,
              "cli": home / ".kilocode" / "cli" / "global"}
    for n, storage in enumerate(places.values()):
        write_task(storage, task=f"task-{n}")
    write_task(places["linux"], task="task-1")  # the same task in two places: one source
    conn = create_opencode_db(home / ".local" / "share" / "kilo" / "kilo.db")
    conn.close()
    found = discover(env={"HOME": str(home), "APPDATA": str(tmp_path / "roaming")})
    assert sorted(Path(s.path).name for s in found.sources) == ["kilo.db", "task-0", "task-1", "task-2", "task-3"]
    assert {s.project_path for s in found.sources if s.identity} == {"/home/dev/shop"}
    conn = create_opencode_db(tmp_path / "elsewhere" / "mine.db")  # KILO_DB names any database
    conn.close()
    found = discover(env={"HOME": str(tmp_path / "nobody"), "KILO_DB": str(tmp_path / "elsewhere" / "mine.db")})
    assert [Path(s.path).name for s in found.sources] == ["mine.db"]
    xdg = tmp_path / "xdg"
    write_task(storage_in(xdg), task="task-x")
    assert [Path(s.path).name for s in discover(env={"HOME": str(tmp_path / "nobody"),
                                                     "XDG_CONFIG_HOME": str(xdg)}).sources] == ["task-x"]
    assert discover(env={}, extra_roots=[str(tmp_path / "none")], use_default=False).problems


def test_the_kilo_cli_database_is_read_with_opencodes_schema(layout, tmp_path):
    data = tmp_path / "kilo-data"
    conn = create_opencode_db(data / "kilo.db")
    created = T0
    add_session(conn, session_info("ses_1", directory="/home/dev/shop", title="cli task", created=created))
    add_message(conn, user_info("msg_1", "ses_1", created + 1))
    add_message(conn, assistant_info("msg_2", "ses_1", created + 2, parent_id="msg_1", cost=0.25,
                                     tokens=tokens(input=100, output=20, read=3000, write=50), completed=created + 9))
    conn.close()
    summary = ingest_tables(layout, homes={"kilo": [data]})
    assert [(r.status, r.reconciled) for r in summary.results] == [("ok", True)]
    assert query(layout, "SELECT provider, input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens, "
                         "output_tokens, cost_usd, cost_source FROM usage") == [
        ("kilo", 100, 3000, 50, 20, 0.25, "native")]
    assert query(layout, "SELECT provider, title, project_path FROM sessions") == [("kilo", "cli task", "/home/dev/shop")]
    # each row filed under its own session's project, not the database's (`kilo-cli`)
    assert query(layout, "SELECT DISTINCT project FROM messages") == [("shop",)]


def test_credentials_and_editor_state_are_never_opened(layout, tmp_path):
    storage = tmp_path / "kilo"
    write_task(storage)
    # VS Code's state (its secrets live beside it) and the CLI's auth.json
    ingest_beside_fifos(layout, storage, "kilo", ("state.vscdb", "auth.json"))
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 1


def test_generated_home_totals(layout, tmp_path):
    config = tmp_path / "config"
    truth = generate_home(storage_in(config), sessions=9, seed=3)
    before = digests(config)
    summary = ingest_tables(layout, homes={"kilo": [storage_in(config)]})
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    assert_common_totals(layout, truth)
    assert query(layout, "SELECT COUNT(*), COUNT(*) FILTER (WHERE cost_usd IS NULL), "
                         "COALESCE(SUM(input_uncached_tokens), 0), COALESCE(SUM(cache_read_tokens), 0), "
                         "COALESCE(SUM(cache_write_5m_tokens), 0), SUM(output_tokens) FROM usage") == [
        (truth.usage_rows, truth.unpriced_rows, truth.input_tokens, truth.cache_read, truth.cache_write,
         truth.output_tokens)]
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE is_error") == truth.tool_errors
    assert digests(config) == before


def test_agent_home_flag_and_config_section(tmp_path, monkeypatch, capsys):
    from pipelines.cli import main

    monkeypatch.setenv("AGENTLAKE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own Dagster instance, as a user's
    # one run (a Dagster run each is most of the test): a task named by the flag, another by config.toml
    write_task(tmp_path / "flag")
    write_task(tmp_path / "config", task="t-config")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text(f'[kilo]\nextra_roots = ["{tmp_path / "config"}"]\n')
    assert main(["ingest", "--no-default", "--agent-home", f"kilo={tmp_path / 'flag'}"]) == 0
    assert "rows written: sessions 2," in capsys.readouterr().out  # both places' tasks (one project: one source)
    assert main(["sql", "SELECT session_id FROM sessions WHERE provider = 'kilo' ORDER BY 1", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"session_id": TASK}, {"session_id": "t-config"}]


def test_a_subtask_is_its_own_root_and_nothing_counts_twice(layout, tmp_path):
    """`new_task` starts a child task in its own folder; the parent link is only in VS Code's
    global state (HistoryItem.parentTaskId), not read: both are roots, each with its own requests."""
    storage = tmp_path / "kilo"
    parent = TaskBuilder("parent", start=at(0))
    parent.task("split the work")
    parent.request(1200, 30, cost=0.02)
    parent.tool("toolu_n", "new_task", {"mode": "code", "message": "lint"}, "Subtask completed: lint ok")
    parent.write(storage)
    child = TaskBuilder("child", start=at(5000))
    child.task("lint")
    child.request(800, 10, cost=0.01)
    child.write(storage)
    ingest_tables(layout, homes={"kilo": [storage]})
    assert query(layout, "SELECT session_id, is_root, cost_usd FROM sessions ORDER BY 1") == [
        ("child", True, pytest.approx(0.01)), ("parent", True, pytest.approx(0.02))]
    assert query(layout, "SELECT tool_name, tool_category FROM tool_calls") == [("new_task", "agent")]


def test_the_tool_vocabulary_reads_kilos_own_call_shapes():
    from transforms.kilo.tools import TOOLS

    # native read_file takes several files: the first names the call's file
    assert TOOLS.file_path("read_file", {"files": [{"path": "a.py"}, {"path": "b.py"}]}) == "a.py"
    assert TOOLS.file_path("read_file", {"files": []}) is None
    assert TOOLS.file_path("write_to_file", {"path": "c.py"}) == "c.py"
    assert TOOLS.category("mcp--github--create_issue") == "mcp"
    assert TOOLS.command("execute_command", {"command": "make test"}) == "make test"
    assert TOOLS.command("read_file", {"command": "x"}) is None
    assert TOOLS.exit_code("execute_command", "Exit code: 2\nOutput: ...") == 2
    assert TOOLS.exit_code("read_file", "Exit code: 2") is None
