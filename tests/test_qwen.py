"""Qwen Code: real chat files (ChatRecord JSONL) in tmp homes, through the lake, read back by
DuckDB. Expected numbers are spelled out from each fixture's own records."""

import json
from datetime import datetime, timezone

import pytest
from genai_prices import Usage, calc_price

from tests.conftest import ingest_tables, query, scalar
from tests.test_gemini import digests, ingest_generated, ingest_with_fifos, through_the_cli
from transforms.qwen.discover import discover
from transforms.synth.qwen import QwenChat, generate_home, project_id, usage

SID = "3c1d9e2a-5b6f-4a7c-8d9e-0f1a2b3c4d5e"
CWD = "/home/dev/shop"
T0 = datetime(2026, 3, 2, 8, 15, tzinfo=timezone.utc)
PROMPTS = "SELECT COUNT(*) FROM parts WHERE part_type = 'text' AND role = 'user'"


def base_record(uuid, parent, ts, type_, **fields) -> dict:
    return {"uuid": uuid, "parentUuid": parent, "sessionId": SID, "timestamp": ts, "type": type_, "cwd": CWD,
            "version": "0.9.0", "gitBranch": "main", **fields}


SHELL_OUT = "Command: npm test -- login\nDirectory: (root)\nOutput: FAIL src/login.test.ts\nExit Code: 1"
# As chatRecordingService.ts appends them. r2's usage came through the OpenAI converter (completion
# 300 holds reasoning 120: total = 12000 + 300); r5's through Google's API (total = 5000 + 50 + 30).
RECORDS = [
    base_record("r1", None, "2026-03-02T08:15:02.000Z", "user", provenance="real_user",
                message={"role": "user", "parts": [{"text": "Fix the failing login test"}]}),
    base_record("r2", "r1", "2026-03-02T08:15:06.000Z", "assistant", model="gpt-4.1",
                message={"role": "model", "parts": [
                    {"text": "Run the test first.", "thought": True},
                    {"functionCall": {"id": "call_1", "name": "run_shell_command",
                                      "args": {"command": "npm test -- login"}}}]},
                usageMetadata={"promptTokenCount": 12000, "candidatesTokenCount": 300, "totalTokenCount": 12300,
                               "cachedContentTokenCount": 8000, "thoughtsTokenCount": 120}),
    base_record("r3", "r2", "2026-03-02T08:15:09.000Z", "tool_result",
                message={"role": "user", "parts": [{"functionResponse": {
                    "id": "call_1", "name": "run_shell_command", "response": {"output": SHELL_OUT}}}]},
                toolCallResult={"callId": "call_1", "status": "success", "resultDisplay": "FAIL", "error": None}),
    base_record("r4", "r3", "2026-03-02T08:15:10.000Z", "user", subtype="notification", provenance="system",
                message={"role": "user", "parts": [{"text": "<background-task> lint finished"}]}),
    base_record("r5", "r4", "2026-03-02T08:15:16.000Z", "assistant", model="gpt-4.1",
                message={"role": "model", "parts": [{"text": "Fixed: the handler returned 401."}]},
                usageMetadata={"promptTokenCount": 5000, "candidatesTokenCount": 50, "totalTokenCount": 5080,
                               "thoughtsTokenCount": 30}),
    base_record("r6", "r5", "2026-03-02T08:15:17.000Z", "system", subtype="custom_title",
                systemPayload={"customTitle": "Fix login", "titleSource": "auto"}),
    base_record("r7", "r6", "2026-03-02T08:15:18.000Z", "system", subtype="ui_telemetry",
                systemPayload={"uiEvent": {"event.name": "qwen-code.api_response"}}),
    base_record("r8", "r7", "2026-03-02T08:20:00.000Z", "system", subtype="custom_title",
                systemPayload={"customTitle": "Fix the login test", "titleSource": "manual"}),
]


def write_chat(base, records=RECORDS, sid=SID, cwd=CWD):
    path = base / "projects" / project_id(cwd) / "chats" / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def by_hand(input_tokens, cached, output, at, model="gpt-4.1") -> float:
    price = calc_price(Usage(input_tokens=input_tokens, cache_read_tokens=cached, output_tokens=output), model,
                       genai_request_timestamp=at)
    return float(price.total_price)


def test_a_chat_by_hand(layout, tmp_path):
    base = tmp_path / ".qwen"
    write_chat(base)
    before = digests(base)
    (result,) = ingest_tables(layout, homes={"qwen": [base]}).results
    assert result.status == "ok" and result.reconciled, (result.error, result.reconcile)
    # r2: uncached 12000 - 8000 = 4000, output 300 (reasoning 120 inside), total 12300;
    # r5: uncached 5000, output 50 + thoughts 30 = 80 (Google's count: reasoning apart), total 5080
    assert query(layout, "SELECT message_id, input_uncached_tokens, cache_read_tokens, output_tokens, "
                         "reasoning_tokens, total_tokens, model FROM usage ORDER BY requested_at") == [
        ("r2", 4000, 8000, 300, 120, 12300, "gpt-4.1"), ("r5", 5000, None, 80, 30, 5080, "gpt-4.1")]
    cost = by_hand(12000, 8000, 300, T0.replace(second=6)) + by_hand(5000, 0, 80, T0.replace(second=16))
    session = query(layout, "SELECT cost_usd, cost_source, title, model, total_tokens, message_count, "
                            "created_at, is_root, project_path FROM sessions")[0]
    assert session[0] == pytest.approx(cost, abs=1e-9)
    # the title: the last custom_title record wins (Qwen re-appends it to stay in its tail window)
    assert session[1:] == ("estimated", "Fix the login test", "gpt-4.1", 12300 + 5080, 8,
                           datetime(2026, 3, 2, 8, 15, 2), True, CWD)
    assert query(layout, "SELECT role, COUNT(*) FROM messages GROUP BY 1 ORDER BY 1") == [
        ("assistant", 2), ("system", 3), ("tool", 1), ("user", 2)]
    assert dict(query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1")) == {
        "text": 2, "reasoning": 1, "tool_call": 1, "tool_result": 1, "injected_context": 1, "other": 3}
    assert scalar(layout, PROMPTS) == 1  # the notification is not a prompt
    assert query(layout, "SELECT tool_name, tool_category, command, exit_code, is_error, has_result, "
                         "result_message_id FROM tool_calls") == [
        ("run_shell_command", "shell", "npm test -- login", 1, False, True, "r3")]
    assert digests(base) == before


def test_ccusage_counts_cached_input_twice(layout, tmp_path):
    """Who is right: Qwen records its own `totalTokenCount` (12300 for r2). The converter
    (openaiContentGenerator/converter.ts) sets promptTokenCount = prompt_tokens, which in the
    OpenAI usage INCLUDES prompt_tokens_details.cached_tokens, copied to cachedContentTokenCount.
    ccusage (adapter/qwen/parser.rs) reports promptTokenCount as input AND the cached count as
    cache reads: 8000 tokens counted twice for r2."""
    base = tmp_path / ".qwen"
    write_chat(base)
    ingest_tables(layout, homes={"qwen": [base]})
    records = [r["usageMetadata"] for r in RECORDS if "usageMetadata" in r]
    ccusage_r2 = 12000 + 8000 + 300  # input + cache read + output, as ccusage shows them
    assert scalar(layout, "SELECT total_tokens FROM usage WHERE message_id = 'r2'") == 12300 == \
        records[0]["totalTokenCount"] == ccusage_r2 - 8000
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == sum(r["totalTokenCount"] for r in records)


def test_qwens_own_models_are_unknown_never_zero(layout, tmp_path):
    """ccusage prices a model LiteLLM does not know at $0.00; no table prices Qwen's
    `qwen3-coder-plus` or the OAuth `coder-model`: unknown, with NULL cost."""
    base = tmp_path / ".qwen"
    chat = QwenChat(base, SID, cwd=CWD, start=T0)
    chat.user("hi")
    chat.assistant(model="coder-model", tokens=usage(1000, 10), text="hello")
    chat.assistant(model="qwen3-coder-plus", tokens=usage(2000, 10), text="again")
    chat.write()
    ingest_tables(layout, homes={"qwen": [base]})
    assert query(layout, "SELECT DISTINCT cost_usd, cost_source FROM usage") == [(None, "unknown")]
    assert query(layout, "SELECT cost_usd, cost_source FROM sessions") == [(None, "unknown")]


def test_a_fork_drops_its_copied_records(layout, tmp_path):
    """/branch copies every record under the new session id with `forkedFrom`: the copies are the
    parent's requests. ccusage keys its dedup on the session id, so it counts them twice."""
    base = tmp_path / ".qwen"
    parent = QwenChat(base, SID, cwd=CWD, start=T0)
    parent.user("first question")
    parent.assistant(model="gpt-4.1", tokens=usage(8000, 200, cached=2000), text="first answer")
    parent.write()
    fork = parent.branch("99999999-9999-4999-8999-999999999999")
    fork.user("second question")
    fork.assistant(model="gpt-4.1", tokens=usage(9000, 100, cached=8000), text="second answer")
    fork.write()
    ingest_tables(layout, homes={"qwen": [base]})
    rows = dict(query(layout, "SELECT session_id, COUNT(*) FROM usage GROUP BY 1"))
    assert rows == {SID: 1, fork.sid: 1}
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == 8200 + 9100  # the copy's 8200 once
    at = datetime.fromisoformat(parent.records[1]["timestamp"])
    (forked, inherited, messages) = query(layout, "SELECT forked_from_session_id, inherited_cost_usd, "
                                                  "message_count FROM sessions WHERE session_id = ?", fork.sid)[0]
    assert (forked, messages) == (SID, 2)
    assert inherited == pytest.approx(by_hand(8000, 2000, 200, at), abs=1e-9)


def test_rewound_records_still_count(layout, tmp_path):
    base = tmp_path / ".qwen"
    chat = QwenChat(base, SID, cwd=CWD, start=T0)
    chat.user("go")
    asked = chat.user("also the docs")
    answer = chat.assistant(model="gpt-4.1", tokens=usage(4000, 30), text="Done.")
    chat.rewind_to(asked)
    chat.user("never mind")
    chat.assistant(model="gpt-4.1", tokens=usage(4100, 5), text="OK.")
    chat.write()
    (result,) = ingest_tables(layout, homes={"qwen": [base]}).results
    assert result.reconciled
    assert dict(query(layout, "SELECT message_id, json_extract_string(extra_columns, '$.dropped') FROM messages "
                              "WHERE extra_columns LIKE '%dropped%'")) == {asked["uuid"]: "rewound",
                                                                           answer["uuid"]: "rewound"}
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == 4030 + 4105


def test_the_first_schema_is_read(layout, tmp_path):
    """The first recorder stored Gemini CLI's summary `{input, output, cached, thoughts, tool,
    total}`; ccusage reads only `promptTokenCount`..., so this usage is lost there."""
    base = tmp_path / ".qwen"
    write_chat(base, [RECORDS[0], {**RECORDS[1], "usageMetadata": {"input": 12000, "output": 300, "cached": 8000,
                                                                    "thoughts": 0, "tool": 0, "total": 12300}}])
    ingest_tables(layout, homes={"qwen": [base]})
    assert query(layout, "SELECT input_uncached_tokens, cache_read_tokens, output_tokens, total_tokens "
                         "FROM usage") == [(4000, 8000, 300, 12300)]


def test_a_sub_session_is_a_child_of_its_spawner(layout, tmp_path):
    base = tmp_path / ".qwen"
    root = QwenChat(base, SID, cwd=CWD, start=T0)
    root.user("spawn a helper")
    root.assistant(model="gpt-4.1", tokens=usage(3000, 50), text="spawning")
    root.write()
    child = QwenChat(base, "77777777-7777-4777-8777-777777777777", cwd=CWD, start=T0)
    child.system("parent_session", {"parentSessionId": SID})
    child.user("helper task")
    child.assistant(model="gpt-4.1", tokens=usage(6000, 70, cached=1000), text="helped")
    child.write()
    (result,) = ingest_tables(layout, homes={"qwen": [base]}).results
    assert result.reconciled
    rows = query(layout, "SELECT session_id, parent_session_id, is_root, cost_usd FROM sessions ORDER BY is_root")
    assert [r[:3] for r in rows] == [(child.sid, SID, False), (SID, None, True)]
    assert rows[1][3] == pytest.approx(rows[0][3] + scalar(layout, "SELECT cost_usd FROM usage WHERE session_id = ?",
                                                           SID), abs=1e-9)


def test_bad_lines_are_quarantined(layout, tmp_path):
    base = tmp_path / ".qwen"
    path = write_chat(base)
    path.write_text(path.read_text() + '{"uuid": "torn", "ty\n')
    ingest_tables(layout, homes={"qwen": [base]})
    assert scalar(layout, "SELECT COUNT(*) FROM quarantine") == 1
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == 12300 + 5080


def test_homes_are_honoured(tmp_path):
    for where, sid in (("user/.qwen", "u"), ("home-env", "h"), ("runtime", "r"), ("win/.qwen", "w")):
        write_chat(tmp_path / where, [{**RECORDS[0], "sessionId": sid}], sid=sid)
    ids = lambda env: sorted(s.identity for s in discover(env=env).sources)  # noqa: E731
    assert ids({"HOME": str(tmp_path / "user")}) == ["u"]
    assert ids({"HOME": str(tmp_path / "user"), "QWEN_HOME": str(tmp_path / "home-env")}) == ["h"]
    assert ids({"HOME": str(tmp_path / "user"), "QWEN_RUNTIME_DIR": str(tmp_path / "runtime")}) == ["r", "u"]
    assert ids({"HOME": str(tmp_path), "QWEN_HOME": "~/home-env"}) == ["h"]  # `~` expanded as Qwen does
    assert ids({"USERPROFILE": str(tmp_path / "win")}) == ["w"]
    assert "relative" in discover(env={"QWEN_HOME": "rel/dir"}).problems[0]
    assert [s.identity for s in discover(env={}, extra_roots=[str(tmp_path / "runtime")], use_default=False).sources] \
        == ["r"]
    assert "no Qwen Code chats" in discover(env={}, extra_roots=[str(tmp_path)], use_default=False).problems[0]


def test_agent_home_flag_and_config_section(tmp_path, monkeypatch, capsys):
    write_chat(tmp_path / "q")
    assert through_the_cli(tmp_path, monkeypatch, capsys, "qwen", tmp_path / "q") == [
        {"provider": "qwen", "t": 12300 + 5080}]


def test_credentials_are_never_opened(layout, tmp_path):
    base = tmp_path / ".qwen"
    write_chat(base)
    ingest_with_fifos(layout, "qwen", base, ("oauth_creds.json", "settings.json", "mcp-oauth-tokens.json",
                                             "google_accounts.json"))
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 1


def test_generated_home_totals(layout, tmp_path):
    base = tmp_path / ".qwen"
    truth = generate_home(base, sessions=6, seed=5)
    ingest_generated(layout, "qwen", base, truth)
    assert query(layout, "SELECT COUNT(*) FILTER (WHERE cost_usd IS NULL), SUM(cost_usd) FROM usage") == [
        (truth.unpriced_requests, pytest.approx(truth.priced_cost_usd))]
    assert dict(query(layout, "SELECT tool_name, COUNT(*) FROM tool_calls GROUP BY 1")) == truth.tool_calls
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE is_error") == truth.tool_errors
