"""Aider: real `.aider.chat.history.md` files written in Aider's own format (aider/io.py,
base_coder.py), through the lake, read back by DuckDB. Expected numbers are spelled out from
each fixture's printed values, with the arithmetic shown."""

import json
import time
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from genai_prices import Usage, calc_price

from pipelines.cli import main
from tests.conftest import ingest_tables, query, scalar
from transforms.aider.discover import discover
from transforms.synth.aider import History, generate_home

HISTORY = ".aider.chat.history.md"

# one run of Aider, as it writes it: announcements, a two-line prompt, a reply that holds a
# markdown quote and an h4 heading (no trailing two spaces: not Aider's own lines), a usage report
# split over two lines (cache hit AND write), a /run command and its output, and a second turn
SMALL = """
# aider chat started at 2026-03-02 09:00:00

> Aider v0.86.1  
> Main model: anthropic/claude-sonnet-4-5 with diff edit format, prompt cache, infinite output  
> Weak model: anthropic/claude-haiku-4-5  

#### fix the login test  
#### it returns 401  

The status code is wrong.

> note: a quote in the reply
#### Plan

src/auth.ts
```
<<<<<<< SEARCH
401
=======
200
>>>>>>> REPLACE
```

> Tokens: 2.3k sent, 1.2k cache write, 15k cache hit, 340 received.  
> Cost: $0.02 message, $0.02 session.  
> Applied edit to src/auth.ts  

#### /run npm test  

> FAIL login  

#### and now?  

Done.

> Tokens: 812 sent, 12k cache hit, 96 received. Cost: $0.0071 message, $0.03 session.  
"""  # noqa: W291 (Aider ends its own lines with two spaces)


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def aider(layout, *places):
    return ingest_tables(layout, homes={"aider": list(places)})


def write(folder, text):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / HISTORY).write_text(text, encoding="utf-8")
    return folder / HISTORY


def test_the_small_history_gives_exact_totals(layout, tmp_path, utc):
    write(tmp_path / "shop", SMALL)
    (result,) = aider(layout, tmp_path / "shop").results
    assert result.status == "ok" and result.reconciled, (result.error, result.reconcile)
    # report 1: sent 2.3k = 2,300 includes the 1.2k cache write: uncached 2,300 - 1,200 = 1,100;
    #   total 1,100 + 15,000 + 1,200 + 340 = 17,640. Report 2: 812 uncached + 12,000 hit + 96 = 12,908
    assert query(layout, "SELECT input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens, output_tokens, "
                         "total_tokens, cost_usd, cost_source, model, llm_provider FROM usage "
                         "ORDER BY total_tokens") == [
        (812, 12_000, None, 96, 12_908, 0.0071, "native", "claude-sonnet-4-5", "anthropic"),
        (1_100, 15_000, 1_200, 340, 17_640, 0.02, "native", "claude-sonnet-4-5", "anthropic")]
    # the session's cost is its messages' (0.02 + 0.0071), never the running "session" figures
    # (adding those would give 0.02 + 0.03 = 0.05)
    assert query(layout, "SELECT project, cost_usd, cost_source, total_tokens, message_count, created_at, title "
                         "FROM sessions") == [
        ("shop", pytest.approx(0.0271), "native", 17_640 + 12_908, 9, datetime(2026, 3, 2, 9), None)]
    assert query(layout, "SELECT role, part_type, native_part_type FROM parts ORDER BY source_rowid, part_index") == [
        ("system", "other", "tool_output"),
        ("user", "text", "user_input"),
        ("assistant", "text", "ai_output"),
        ("system", "other", "usage_report"), ("system", "other", "tool_output"),
        ("user", "shell_command", "command"),
        ("system", "other", "tool_output"),
        ("user", "text", "user_input"),
        ("assistant", "text", "ai_output"),
        ("system", "other", "usage_report")]
    reply = scalar(layout, "SELECT text FROM parts WHERE native_part_type = 'ai_output' ORDER BY source_rowid LIMIT 1")
    assert "> note: a quote in the reply\n#### Plan" in reply and reply.endswith(">>>>>>> REPLACE\n```")
    assert scalar(layout, "SELECT text FROM parts WHERE native_part_type = 'user_input' ORDER BY source_rowid "
                          "LIMIT 1") == "fix the login test\nit returns 401"
    assert query(layout, "SELECT tool_name, tool_category, command, has_result, result_text FROM tool_calls") == [
        ("run", "shell", "npm test", True, "FAIL login")]


def test_trap_local_time_header_is_converted_to_utc(layout, tmp_path, monkeypatch):
    """The header has no offset (datetime.now()): 09:00 written in Tokyo (UTC+9) is 00:00 UTC."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        write(tmp_path / "shop", SMALL)
        aider(layout, tmp_path / "shop")
    finally:
        monkeypatch.undo()
        time.tzset()
    assert scalar(layout, "SELECT created_at FROM sessions") == datetime(2026, 3, 2, 0, 0)


def test_a_start_time_in_a_clock_change_is_read_early_and_said(layout, tmp_path, monkeypatch):
    """New York: 01:30 on 2026-11-01 happens twice (EDT, then EST), 02:30 on 2026-03-08 never. Each
    has two readings an hour apart: the earlier is taken, and the run's warnings say how many."""
    hist = History(tmp_path / "p" / HISTORY)
    for local in (datetime(2026, 11, 1, 1, 30), datetime(2026, 3, 8, 2, 30), datetime(2026, 6, 1, 12)):
        hist.start(local)
        hist.user("hi")
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        summary = aider(layout, tmp_path / "p")
    finally:
        monkeypatch.undo()
        time.tzset()
    assert [r[0] for r in query(layout, "SELECT created_at FROM sessions ORDER BY created_at")] == [
        datetime(2026, 3, 8, 6, 30), datetime(2026, 6, 1, 16), datetime(2026, 11, 1, 5, 30)]
    (warning,) = [w for r in summary.results for w in r.warnings if "daylight-saving" in w]
    assert warning.startswith("2 chat start times in a daylight-saving change")


def test_unpriced_reports_are_estimated_or_unknown(layout, tmp_path, utc):
    """No `Cost:` on the report (Aider has no price for the model): priced by us from the tokens
    as printed with the announced model, else unknown. A session with both is partial."""
    hist = History(tmp_path / "p" / HISTORY)
    hist.start(datetime(2026, 3, 2, 9))
    hist.announce("anthropic/claude-sonnet-4-5")
    hist.user("a")
    hist.assistant("b")
    hist.usage(4_000, 500)  # no cost printed
    hist.tool("Main model: ollama/qwen3-coder with whole edit format")  # /model switch
    hist.user("c")
    hist.assistant("d")
    hist.usage(800, 20)
    aider(layout, tmp_path / "p")
    p = calc_price(Usage(input_tokens=4_000, output_tokens=500), "claude-sonnet-4-5", provider_id="anthropic",
                   genai_request_timestamp=datetime(2026, 3, 2, 9, tzinfo=UTC))
    expected = float(round(Decimal(p.total_price), 9))
    assert query(layout, "SELECT model, cost_usd, cost_source FROM usage ORDER BY total_tokens DESC") == [
        ("claude-sonnet-4-5", pytest.approx(expected), "estimated"), ("qwen3-coder", None, "unknown")]
    assert query(layout, "SELECT cost_usd, cost_source FROM sessions") == [(pytest.approx(expected), "partial")]


def test_deepseek_cache_hits_are_inside_sent(layout, tmp_path, utc):
    """DeepSeek's prompt_tokens include its cache hits (base_coder.compute_costs_from_tokens):
    sent 10k with 8.0k hit is 2,000 uncached + 8,000 read."""
    hist = History(tmp_path / "p" / HISTORY)
    hist.start(datetime(2026, 3, 2, 9))
    hist.announce("deepseek/deepseek-chat")
    hist.user("a")
    hist.usage(10_000, 300, hit=8_000, cost=0.0012, session=0.0012)
    aider(layout, tmp_path / "p")
    assert query(layout, "SELECT input_uncached_tokens, cache_read_tokens, output_tokens, total_tokens FROM usage") == [
        (2_000, 8_000, 300, 10_300)]


def test_current_litellm_reports_hold_both_cache_classes_inside_sent(layout, tmp_path, utc):
    """With a current litellm, `prompt_tokens` covers cache reads and writes, and Aider adds the
    writes again: `23k sent, 1.0k cache write, 20k cache hit` is 23,000 - 20,000 - 2 x 1,000 =
    1,000 uncached. Read the older way it would be 22,000 uncached beside 20,000 cached, and a
    total of 43,300 instead of 22,300."""
    hist = History(tmp_path / "p" / HISTORY)
    hist.start(datetime(2026, 3, 2, 9))
    hist.announce("anthropic/claude-sonnet-4-5")
    hist.user("a")
    hist.usage(23_000, 300, write=1_000, hit=20_000, cost=0.02, session=0.02)
    aider(layout, tmp_path / "p")
    assert query(layout, "SELECT input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens, output_tokens, "
                         "total_tokens FROM usage") == [(1_000, 20_000, 1_000, 300, 22_300)]


def test_commands_are_tool_calls(layout, tmp_path, utc):
    """`!cmd` and `/test` run a shell, `/web` fetches a page (aider/commands.py); the output is
    the blockquote right after; other commands and plain prompts are not calls."""
    hist = History(tmp_path / "p" / HISTORY)
    hist.start(datetime(2026, 3, 2, 9))
    for command, output in (("!ls -la", "a.py"), ("/test pytest -q", "1 failed"), ("/web https://x.dev/doc", None),
                            ("/add a.py", "Added a.py to the chat"), ("/run", "usage: /run <command>")):
        hist.user(command)
        if output:
            hist.tool(output)
    aider(layout, tmp_path / "p")
    assert query(layout, "SELECT tool_name, tool_category, command, input, has_result, result_text FROM tool_calls "
                         "ORDER BY called_at, source_rowid") == [
        ("run", "shell", "ls -la", '{"command":"ls -la"}', True, "a.py"),
        ("test", "shell", "pytest -q", '{"command":"pytest -q"}', True, "1 failed"),
        ("web", "fetch", None, '{"url":"https://x.dev/doc"}', False, None)]
    assert query(layout, "SELECT part_type, shell_command FROM parts WHERE native_part_type = 'command' "
                         "ORDER BY source_rowid") == [("shell_command", "ls -la"), ("shell_command", "pytest -q"),
                                                      ("other", None)]


def test_several_runs_are_several_sessions_and_appending_keeps_their_ids(layout, tmp_path, utc):
    hist = History(tmp_path / "p" / HISTORY)
    for day in (2, 3):
        hist.start(datetime(2026, 3, day, 9))
        hist.announce("anthropic/claude-sonnet-4-5")
        hist.user("go")
        hist.assistant("ok")
        hist.usage(1_000, 10, cost=0.01, session=0.01)
    aider(layout, tmp_path / "p")
    first = query(layout, "SELECT session_id, created_at FROM sessions ORDER BY created_at")
    assert [c for _, c in first] == [datetime(2026, 3, 2, 9), datetime(2026, 3, 3, 9)]
    hist.user("more")  # the second run goes on: the file grows, the ids stay
    hist.usage(2_000, 20, cost=0.02, session=0.03)
    aider(layout, tmp_path / "p")
    assert query(layout, "SELECT session_id, created_at FROM sessions ORDER BY created_at") == first
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions") == pytest.approx(0.04)


def test_discovery_env_home_projects_and_roots(tmp_path, monkeypatch, capsys, utc):
    named = write(tmp_path / "elsewhere", SMALL)
    home_file = write(tmp_path / "home", SMALL)
    project = write(tmp_path / "work" / "api", SMALL)
    deep = write(tmp_path / "src" / "a" / "b", SMALL)
    write(tmp_path / "src" / "node_modules" / "x", SMALL)  # skipped
    write(tmp_path / "src" / ".cache", SMALL)  # hidden: skipped
    env = {"HOME": str(tmp_path / "home"), "AIDER_CHAT_HISTORY_FILE": str(named)}
    paths = lambda d: sorted(s.path for s in d.sources)  # noqa: E731
    got = discover(env, project_names={str(tmp_path / "work" / "api"): "api"})
    assert paths(got) == sorted(str(p.resolve()) for p in (named, home_file, project))
    assert {s.project for s in got.sources if s.path == str(project.resolve())} == {"api"}
    assert paths(discover({"HOME": str(tmp_path / "nobody"), "AIDER_CHAT_HISTORY_FILE": "rel.md"})) == []
    assert paths(discover({}, extra_roots=[str(tmp_path / "src")], use_default=False)) == [str(deep.resolve())]
    (tmp_path / "empty").mkdir()
    assert "no Aider chat history" in discover({}, extra_roots=[str(tmp_path / "empty")],
                                               use_default=False).problems[0]
    monkeypatch.setenv("AGENTLAKE_HOME", str(tmp_path / "al"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own Dagster instance, as a user's
    assert main(["ingest", "--no-default", "--agent-home", f"aider={tmp_path / 'src'}"]) == 0
    capsys.readouterr()
    assert main(["sql", "SELECT COUNT(*) AS n FROM usage WHERE provider = 'aider'", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 2}]


def test_generated_histories_match_their_truth(layout, tmp_path, utc):
    truth = generate_home(tmp_path / "projects", sessions=6, seed=3)
    results = aider(layout, tmp_path / "projects").results
    assert len(results) == len(truth.files) and all(r.status == "ok" and r.reconciled for r in results)
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == truth.sessions
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == truth.messages
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == truth.requests
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls") == truth.tool_calls
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == truth.tokens
    assert scalar(layout, "SELECT SUM(cost_usd) FROM usage WHERE cost_source = 'native'") == pytest.approx(
        truth.native_cost)
