"""Gemini CLI: real chat recordings (JSONL and the legacy JSON) in tmp homes, through the lake,
read back by DuckDB. Expected numbers are spelled out from each fixture's own records."""

import hashlib
import json
import os
import threading
from datetime import datetime, timezone

import pytest
from genai_prices import Usage, calc_price

from tests.conftest import ingest_tables, query, scalar
from transforms.gemini.discover import discover
from transforms.synth.gemini import (
    ChatWriter, generate_home, project_hash, register_project, tokens, write_legacy,
)

SID = "5f0c2a9e-1b7d-4c3e-9a2f-6d8e0b1c2d3e"
ROOT = "/home/dev/shop"
H = project_hash(ROOT)
SHELL = {"id": "run_shell_command-1", "name": "run_shell_command", "args": {"command": "npm test -- login"},
         "result": [{"functionResponse": {"id": "run_shell_command-1", "name": "run_shell_command",
                                          "response": {"output": "Output: FAIL src/login.test.ts\nExit Code: 1"}}}],
         "status": "success", "timestamp": "2026-03-02T08:15:09.000Z", "displayName": "Shell",
         "description": "npm test -- login", "resultDisplay": "FAIL src/login.test.ts",
         "renderOutputAsMarkdown": False}
EDIT = {"id": "replace-2", "name": "replace",
        "args": {"file_path": "/home/dev/shop/src/auth.ts", "old_string": "401", "new_string": "200"},
        "result": [{"functionResponse": {"id": "replace-2", "name": "replace",
                                         "response": {"error": "could not find the string to replace"}}}],
        "status": "error", "timestamp": "2026-03-02T08:15:09.500Z", "displayName": "Edit", "description": "",
        "renderOutputAsMarkdown": False}
G1 = {"id": "g1", "timestamp": "2026-03-02T08:15:06.000Z", "type": "gemini", "content": "",
      "thoughts": [{"subject": "Running the test", "description": "I will run the login test first.",
                    "timestamp": "2026-03-02T08:15:05.500Z"}],
      "tokens": {"input": 9000, "output": 120, "cached": 6000, "thoughts": 200, "tool": 0, "total": 9320},
      "model": "gemini-2.5-pro"}
G2 = {"id": "g2", "timestamp": "2026-03-02T08:15:16.000Z", "type": "gemini",
      "content": "Fixed: the handler returned 401.", "thoughts": [], "tokens": None, "model": "gemini-2.5-pro"}
G2_TOKENS = {"input": 10500, "output": 80, "cached": 9000, "thoughts": 40, "tool": 12, "total": 10632}
# The chat as chatRecordingService.ts appends it: g1 once with its (queued) tokens, again when its
# tool calls complete; g2 first without tokens, again when they arrive (recordMessageTokens).
LINES = [
    {"sessionId": SID, "projectHash": H, "startTime": "2026-03-02T08:15:00.000Z",
     "lastUpdated": "2026-03-02T08:15:00.000Z"},
    {"id": "u1", "timestamp": "2026-03-02T08:15:02.000Z", "type": "user",
     "content": [{"text": "Fix the failing login test"}]},
    {"$set": {"lastUpdated": "2026-03-02T08:15:02.000Z"}},
    G1,
    {"$set": {"lastUpdated": "2026-03-02T08:15:06.000Z"}},
    {**G1, "toolCalls": [SHELL, EDIT]},
    {"id": "u2", "timestamp": "2026-03-02T08:15:10.000Z", "type": "user",
     "content": SHELL["result"] + EDIT["result"]},
    G2,
    {**G2, "tokens": G2_TOKENS},
    {"id": "i1", "timestamp": "2026-03-02T08:15:17.000Z", "type": "info", "content": "Checkpoint saved"},
    {"$set": {"summary": "Fix the login test", "lastUpdated": "2026-03-02T08:15:17.000Z"}},
]
NAME = f"session-2026-03-02T08-15-{SID[:8]}.jsonl"
PROMPTS = "SELECT COUNT(*) FROM parts WHERE part_type = 'text' AND role = 'user'"


def write_chat(home, lines=LINES, folder="shop", name=NAME):
    register_project(home, ROOT, "shop")
    chats = home / "tmp" / folder / "chats"
    chats.mkdir(parents=True, exist_ok=True)
    (chats / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
    return chats / name


def digests(root) -> dict:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def by_hand(input_tokens, cached, output, at, model="gemini-2.5-pro") -> float:
    """genai-prices on the TOTAL input with its cached part, as Google bills it."""
    price = calc_price(Usage(input_tokens=input_tokens, cache_read_tokens=cached, output_tokens=output), model,
                       provider_id="google", genai_request_timestamp=at)
    return float(price.total_price)


def test_a_chat_by_hand(layout, tmp_path):
    home = tmp_path / ".gemini"
    write_chat(home)
    before = digests(home)
    (result,) = ingest_tables(layout, homes={"gemini": [home]}).results
    assert result.status == "ok" and result.reconciled, (result.error, result.reconcile)
    # g1: uncached 9000 - 6000 + tool 0 = 3000, output 120 + thoughts 200 = 320, total 9320;
    # g2: uncached 10500 - 9000 + tool 12 = 1512, output 80 + 40 = 120, total 10632
    assert query(layout, "SELECT message_id, input_uncached_tokens, cache_read_tokens, cache_write_5m_tokens, "
                         "output_tokens, reasoning_tokens, total_tokens, model, is_sidechain FROM usage "
                         "ORDER BY requested_at") == [
        ("g1", 3000, 6000, None, 320, 200, 9320, "gemini-2.5-pro", False),
        ("g2", 1512, 9000, None, 120, 40, 10632, "gemini-2.5-pro", False)]
    t1, t2 = (datetime(2026, 3, 2, 8, 15, s, tzinfo=timezone.utc) for s in (6, 16))
    cost = by_hand(9000, 6000, 320, t1) + by_hand(10500 + 12, 9000, 120, t2)
    session = query(layout, "SELECT cost_usd, cost_source, title, model, llm_provider, total_tokens, "
                            "message_count, created_at, is_root, project_path FROM sessions")[0]
    assert session[0] == pytest.approx(cost, abs=1e-9)
    assert session[1:] == ("estimated", "Fix the login test", "gemini-2.5-pro", "google", 9320 + 10632, 5,
                           datetime(2026, 3, 2, 8, 15), True, ROOT)
    assert query(layout, "SELECT role, COUNT(*) FROM messages GROUP BY 1 ORDER BY 1") == [
        ("assistant", 2), ("system", 1), ("user", 2)]
    # u1 text; g1 a thought and two tool calls ("" is no part); u2 two functionResponses; g2, i1 text
    assert dict(query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1")) == {
        "text": 3, "reasoning": 1, "tool_call": 2, "tool_result": 2}
    assert scalar(layout, PROMPTS) == 1
    assert query(layout, "SELECT tool_name, tool_category, command, file_path, exit_code, is_error, has_result, "
                         "result_text FROM tool_calls ORDER BY tool_call_id") == [
        ("replace", "edit", None, "/home/dev/shop/src/auth.ts", None, True, True,
         "could not find the string to replace"),
        ("run_shell_command", "shell", "npm test -- login", None, 1, False, True,
         "Output: FAIL src/login.test.ts\nExit Code: 1")]
    assert query(layout, "SELECT DISTINCT native_part_type FROM parts WHERE part_type = 'tool_call'") == [("toolCall",)]
    assert digests(home) == before  # never written to


def test_streamed_duplicates_count_once(layout, tmp_path):
    """Every line holding tokens, summed (what a line-by-line reader gets): g1's twice."""
    home = tmp_path / ".gemini"
    write_chat(home)
    per_line = sum(line["tokens"]["total"] for line in LINES if isinstance(line.get("tokens"), dict))
    assert per_line == 2 * 9320 + 10632
    ingest_tables(layout, homes={"gemini": [home]})
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == 9320 + 10632
    # the last copy wins: g1 has its tool calls, g2 its tokens
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE message_id = 'g1'") == 2


def test_tokscale_counts_cached_input_twice(layout, tmp_path):
    """Who is right: `total` is Gemini's own totalTokenCount. chatRecordingService.ts
    recordMessageTokens stores promptTokenCount as `input`, cachedContentTokenCount as `cached`;
    the Gemini API counts the cached content INSIDE promptTokenCount, and totalTokenCount =
    prompt + candidates + thoughts + toolUsePrompt (9000 + 120 + 200 + 0 = 9320). tokscale
    (gemini.rs) keeps `input` as input and adds `cached` as cache reads: 6000 + 9000 tokens too many
    here. ccusage (normalize_session_input) subtracts the overlap, as we do."""
    home = tmp_path / ".gemini"
    write_chat(home)
    ingest_tables(layout, homes={"gemini": [home]})
    records = [G1["tokens"], G2_TOKENS]
    tokscale = sum(t["input"] + t["output"] + t["cached"] + t["thoughts"] for t in records)
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == sum(t["total"] for t in records) == 19952
    assert tokscale - 19952 == 6000 + 9000 - 12  # the cached input counted twice, the tool prompt missed


def test_rewound_and_replaced_messages_still_count(layout, tmp_path):
    """`$rewindTo` and a `$set.messages` checkpoint (compression) drop messages from Gemini's
    view, but their requests were made: they stay, flagged `dropped`, and their tokens count."""
    home = tmp_path / ".gemini"
    extra = [
        {"id": "u3", "timestamp": "2026-03-02T08:16:00.000Z", "type": "user", "content": [{"text": "also docs"}]},
        {"id": "g3", "timestamp": "2026-03-02T08:16:05.000Z", "type": "gemini", "content": "Done.",
         "tokens": tokens(4000, 30), "model": "gemini-2.5-pro"},
        {"$rewindTo": "u3"},
        {"$set": {"messages": [
            {"id": "s1", "timestamp": "2026-03-02T08:17:00.000Z", "type": "user",
             "content": [{"text": "<state_snapshot>login fixed</state_snapshot>"}]},
            {**LINES[9]}], "lastUpdated": "2026-03-02T08:17:00.000Z"}},
        {"id": "g4", "timestamp": "2026-03-02T08:17:05.000Z", "type": "gemini", "content": "Next?",
         "tokens": tokens(2000, 10, cached=1000), "model": "gemini-2.5-pro"},
    ]
    write_chat(home, LINES + extra)
    (result,) = ingest_tables(layout, homes={"gemini": [home]}).results
    assert result.reconciled, result.reconcile
    assert dict(query(layout, "SELECT message_id, json_extract_string(extra_columns, '$.dropped') FROM messages")) == {
        "u1": "replaced", "g1": "replaced", "u2": "replaced", "g2": "replaced", "u3": "rewound", "g3": "rewound",
        "s1": None, "i1": None, "g4": None}
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == 9320 + 10632 + 4030 + 2010
    assert scalar(layout, "SELECT message_count FROM sessions") == 9


def test_copies_of_a_session_count_once(layout, tmp_path):
    """The slug migration copies `tmp/<hash>/` (storageMigration.ts uses fs.cp) and a resumed
    legacy `.json` gets a `.jsonl` beside it (chatRecordingService.initialize): three files, one
    session. ccusage and tokscale read each file, so they count this session's tokens three times."""
    home = tmp_path / ".gemini"
    legacy = {"sessionId": SID, "projectHash": H, "startTime": "2026-03-02T08:15:00.000Z",
              "lastUpdated": "2026-03-02T08:15:16.000Z",
              "messages": [LINES[1], {**G1, "toolCalls": [SHELL, EDIT]}, LINES[6], {**G2, "tokens": G2_TOKENS}]}
    register_project(home, ROOT, "shop")
    write_legacy(home, "shop", legacy)
    write_legacy(home, H, legacy)  # the hash folder's copy
    resumed = [{k: v for k, v in legacy.items() if k != "messages"}, *legacy["messages"],
               {"$set": {"sessionId": SID}},
               {"id": "g5", "timestamp": "2026-03-03T10:00:00.000Z", "type": "gemini", "content": "Back.",
                "tokens": tokens(3000, 20), "model": "gemini-2.5-flash"},
               {"$set": {"lastUpdated": "2026-03-03T10:00:00.000Z"}}]
    write_chat(home, resumed)
    found = discover(env={}, extra_roots=[str(home)], use_default=False)
    assert [len(s.members) for s in found.sources] == [3]
    ingest_tables(layout, homes={"gemini": [home]})
    assert query(layout, "SELECT COUNT(*), SUM(message_count) FROM sessions") == [(1, 5)]
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == 9320 + 10632 + 3020
    assert scalar(layout, "SELECT project_path FROM sessions") == ROOT


def test_legacy_parts_lists_are_read(layout, tmp_path):
    """The legacy record's messages hold `content` as a string OR a Part list (a user prompt with
    an attached file, tool responses): tokscale's reader types it `Option<String>`, so serde
    rejects the whole file and its usage is lost; ccusage and we read it."""
    home = tmp_path / ".gemini"
    register_project(home, ROOT, "shop")
    write_legacy(home, "shop", {
        "sessionId": SID, "projectHash": H, "startTime": "2025-09-01T10:00:00.000Z",
        "lastUpdated": "2025-09-01T10:00:09.000Z", "messages": [
            {"id": "a", "timestamp": "2025-09-01T10:00:00.000Z", "type": "user",
             "content": [{"text": "what is in this picture?"},
                         {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]},
            {"id": "b", "timestamp": "2025-09-01T10:00:09.000Z", "type": "gemini", "content": "A cat.",
             "thoughts": [], "tokens": tokens(1200, 8), "model": "gemini-2.5-flash"},
            # a synthetic model turn (recordSyntheticMessage): the response's own Parts
            {"id": "c", "timestamp": "2025-09-01T10:00:10.000Z", "type": "gemini", "content": [
                {"functionCall": {"id": "ls-1", "name": "list_directory", "args": {"dir_path": "."}}}]}]})
    ingest_tables(layout, homes={"gemini": [home]})
    assert query(layout, "SELECT part_type, native_part_type, mime_type, binary_size FROM parts "
                         "WHERE part_type = 'binary'") == [("binary", "inlineData", "image/png", 8)]
    assert query(layout, "SELECT native_part_type, tool_name, tool_input FROM parts WHERE part_type = 'tool_call'") \
        == [("functionCall", "list_directory", '{"dir_path":"."}')]
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == 1208


def test_a_sub_agent_is_a_child_session_whose_cost_the_root_includes(layout, tmp_path):
    home = tmp_path / ".gemini"
    write_chat(home)
    start = datetime(2026, 3, 2, 8, 15, 8, tzinfo=timezone.utc)
    sub = ChatWriter(home, "shop", "7a1b2c3d-0000-4000-8000-000000000001", project_root=ROOT, start=start,
                     kind="subagent", parent=SID)
    sub.user("Investigate the login handler")
    sub.gemini("It returns 401.", model="gemini-2.5-flash", usage=tokens(12000, 300, cached=4000))
    sub.write()
    (result,) = ingest_tables(layout, homes={"gemini": [home]}).results
    assert result.reconciled
    rows = query(layout, "SELECT session_id, parent_session_id, root_session_id, is_root, cost_usd, "
                         "cost_includes_subagents FROM sessions ORDER BY is_root")
    (child, root) = rows
    assert child[:4] == (sub.sid, SID, SID, False)
    answered = datetime.fromisoformat(list(sub.messages.values())[-1]["timestamp"])
    child_cost = by_hand(12000, 4000, 300, answered, model="gemini-2.5-flash")
    assert child[4] == pytest.approx(child_cost, abs=1e-9)
    own = scalar(layout, "SELECT SUM(cost_usd) FROM usage WHERE session_id = ?", SID)
    assert root[4] == pytest.approx(own + child_cost, abs=1e-9) and root[5] is True
    assert query(layout, "SELECT is_sidechain, COUNT(*) FROM usage GROUP BY 1 ORDER BY 1") == [(False, 2), (True, 1)]


def _whole_record(folder, sid, messages, *, start, kind="subagent"):
    """A chat as Gemini CLI 0.37-0.38 wrote it: the whole ConversationRecord, pretty-printed, rewritten
    on each change (writeConversation); a sub-agent's also names its workspace `directories`."""
    folder.mkdir(parents=True, exist_ok=True)
    record = {"sessionId": sid, "projectHash": H, "startTime": start, "lastUpdated": messages[-1]["timestamp"],
              "messages": messages, "directories": [ROOT], "kind": kind}
    (folder / f"{sid}.json").write_text(json.dumps(record, indent=2))
    return record


def test_nested_json_chats_of_sub_agents_and_skill_extraction_are_read(layout, tmp_path):
    """Gemini CLI 0.37-0.38 wrote a sub-agent's chat as `chats/<parent session id>/<agent id>.json`
    (a whole record, like the main chat of that era), and 0.38's background memory service its
    skill extraction as `chats/skill-extraction-<8 hex>/<agent id>.json`, a folder named after the
    service's own prompt id, not after a session: that chat has no parent, it is a root of its own.
    The sub-agent's cost is inside its parent's, the skill extraction's is not inside anyone's."""
    home = tmp_path / ".gemini"
    write_chat(home)
    chats = home / "tmp" / "shop" / "chats"
    sub_usage, skill_usage = tokens(12000, 300, cached=4000, thoughts=50), tokens(30000, 900, cached=20000)
    sub = _whole_record(chats / SID, "k3j9x2", [
        {"id": "s1", "timestamp": "2026-03-02T08:15:08.000Z", "type": "user",
         "content": [{"text": "Investigate the login handler"}]},
        {"id": "s2", "timestamp": "2026-03-02T08:15:09.000Z", "type": "gemini", "content": "It returns 401.",
         "thoughts": [], "tokens": sub_usage, "model": "gemini-2.5-flash",
         "toolCalls": [{**SHELL, "id": "run_shell_command-9"}]}], start="2026-03-02T08:15:07.000Z")
    skill = _whole_record(chats / "skill-extraction-1f2e3d4c", "p0q8r7", [
        {"id": "x1", "timestamp": "2026-03-02T09:00:01.000Z", "type": "user",
         "content": [{"text": "Extract reusable skills from recent sessions"}]},
        {"id": "x2", "timestamp": "2026-03-02T09:00:30.000Z", "type": "gemini", "content": "No new skill.",
         "thoughts": [], "tokens": skill_usage, "model": "gemini-2.5-pro"}], start="2026-03-02T09:00:00.000Z")
    found = discover(env={}, extra_roots=[str(home)], use_default=False)
    assert sorted(len(s.members) for s in found.sources) == [1, 2] and not found.problems
    (result,) = ingest_tables(layout, homes={"gemini": [home]}).results
    assert result.status == "ok" and result.reconciled, (result.error, result.reconcile)
    rows = query(layout, "SELECT session_id, parent_session_id, root_session_id, is_root, cost_includes_subagents, "
                         "message_count FROM sessions ORDER BY session_id")
    assert rows == [(SID, None, SID, True, True, 5),
                    ("k3j9x2", SID, SID, False, False, len(sub["messages"])),
                    ("p0q8r7", None, "p0q8r7", True, True, len(skill["messages"]))]
    own = {sid: scalar(layout, "SELECT SUM(cost_usd) FROM usage WHERE session_id = ?", sid)
           for sid in (SID, "k3j9x2", "p0q8r7")}
    at = datetime(2026, 3, 2, 8, 15, 9, tzinfo=timezone.utc)
    assert own["k3j9x2"] == pytest.approx(by_hand(12000, 4000, 350, at, model="gemini-2.5-flash"), abs=1e-9)
    costs = dict(query(layout, "SELECT session_id, cost_usd FROM sessions"))
    assert costs[SID] == pytest.approx(own[SID] + own["k3j9x2"], abs=1e-9)  # the sub-agent rolled in
    assert costs["p0q8r7"] == pytest.approx(own["p0q8r7"], abs=1e-9)
    # every request once: the roots' costs sum to the requests' (no sub-agent counted twice)
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(sum(own.values()))
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == 9320 + 10632 + sub_usage["total"] \
        + skill_usage["total"]
    assert query(layout, "SELECT session_id, is_sidechain FROM usage WHERE session_id <> ? ORDER BY 1", SID) == [
        ("k3j9x2", True), ("p0q8r7", False)]
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE session_id = 'k3j9x2'") == 1


def test_an_unpriced_model_is_unknown_never_zero(layout, tmp_path):
    home = tmp_path / ".gemini"
    w = ChatWriter(home, "shop", SID, project_root=ROOT, start=datetime(2026, 3, 2, tzinfo=timezone.utc))
    w.user("hi")
    w.gemini("hello", model="gemini-internal-exp", usage=tokens(100, 5))
    w.write()
    ingest_tables(layout, homes={"gemini": [home]})
    assert query(layout, "SELECT cost_usd, cost_source FROM usage") == [(None, "unknown")]
    assert query(layout, "SELECT cost_usd, cost_source FROM sessions") == [(None, "unknown")]


def test_bad_lines_and_files_are_quarantined(layout, tmp_path):
    home = tmp_path / ".gemini"
    path = write_chat(home)
    path.write_text(path.read_text() + "{\"id\": \"torn\", \"timest\n")  # a torn last line
    chats = path.parent
    (chats / "session-2026-03-03T00-00-deadbeef.json").write_text("{not json")
    # a whole record of 0.37-0.38, pretty-printed, cut short: one row with its text, said as a
    # damaged record (not as a file of another kind, nor by its last line as one being written)
    cut = chats / "session-2026-03-04T00-00-cafef00d.json"
    record = json.dumps({"sessionId": "cafef00d-0000", "projectHash": H, "messages": [
        {"id": "m1", "type": "user", "timestamp": "2026-03-04T00:00:00Z", "content": "hi"}],
        "directories": ["/work/shop", "/work/lib"]}, indent=2)
    text = record[:record.index('"/work/lib"') + len('"/work/lib"') + 1]  # cut after a line JSON alone reads
    assert text.splitlines()[-1] == '    "/work/lib"' and json.loads(text.splitlines()[-1]) == "/work/lib"
    cut.write_text(text)
    summary = ingest_tables(layout, homes={"gemini": [home]})
    assert {r.status for r in summary.results} == {"ok"}  # the project's sessions are one source
    assert scalar(layout, "SELECT COUNT(*) FROM quarantine") == 3
    errors = dict(query(layout, "SELECT split_part(key, ':', 1), error FROM quarantine WHERE key LIKE '%.json:%'"))
    assert sorted(errors) == sorted([str(chats / "session-2026-03-03T00-00-deadbeef.json"), str(cut)])
    assert all("not valid JSON, a whole chat record cut short or damaged" in e for e in errors.values()), errors
    assert query(layout, "SELECT raw FROM quarantine WHERE key LIKE ?", f"{cut}:%") == [(text,)]
    assert scalar(layout, "SELECT SUM(total_tokens) FROM usage") == 19952  # the rest was read


def test_homes_are_honoured(tmp_path):
    write_chat(tmp_path / "user" / ".gemini")
    write_chat(tmp_path / "cli-home" / ".gemini", [{**LINES[0], "sessionId": "other"}])
    write_chat(tmp_path / "win" / ".gemini", [{**LINES[0], "sessionId": "win"}])
    ids = lambda env: [s.identity for s in discover(env=env).sources]  # noqa: E731
    assert ids({"HOME": str(tmp_path / "user")}) == [SID]
    assert ids({"HOME": str(tmp_path / "user"), "GEMINI_CLI_HOME": str(tmp_path / "cli-home")}) == ["other"]
    assert ids({"USERPROFILE": str(tmp_path / "win")}) == ["win"]
    # --agent-home / [gemini] extra_roots: a `.gemini` dir or a GEMINI_CLI_HOME-style dir
    for root in (tmp_path / "user" / ".gemini", tmp_path / "user"):
        assert [s.identity for s in discover(env={}, extra_roots=[str(root)], use_default=False).sources] == [SID]
    assert "no Gemini CLI chats" in discover(env={}, extra_roots=[str(tmp_path)], use_default=False).problems[0]


def through_the_cli(tmp_path, monkeypatch, capsys, provider: str, home) -> list:
    """`agentlake ingest --no-default --agent-home PROVIDER=DIR`, then tokens by provider; and a
    `[PROVIDER]` section of config.toml naming the same dir."""
    from pipelines.cli import main
    from warehouse.lake.config import load_config

    monkeypatch.setenv("AGENTLAKE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own Dagster instance, as a user's
    assert main(["ingest", "--no-default", "--agent-home", f"{provider}={home}"]) == 0
    capsys.readouterr()
    assert main(["sql", "SELECT provider, SUM(total_tokens) AS t FROM usage GROUP BY 1", "--format", "json"]) == 0
    tokens = json.loads(capsys.readouterr().out)
    (tmp_path / "config.toml").write_text(f'[{provider}]\nextra_roots = ["{home}"]\n')
    assert load_config(tmp_path / "config.toml").extra_roots[provider] == (str(home),)
    return tokens


def test_agent_home_flag_and_config_section(tmp_path, monkeypatch, capsys):
    write_chat(tmp_path / "g" / ".gemini")
    # a GEMINI_CLI_HOME-style dir (with .gemini/) works as well as the .gemini dir itself
    assert through_the_cli(tmp_path, monkeypatch, capsys, "gemini", tmp_path / "g") == [
        {"provider": "gemini", "t": 19952}]


def ingest_with_fifos(layout, provider: str, home, names) -> None:
    """Ingest `home` with each of `names` made a FIFO, which an open would block on forever."""
    for name in names:
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(home / name)
    done = threading.Event()

    def run():
        ingest_tables(layout, homes={provider: [home]})
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(60), "ingestion blocked: it opened a credential file"


def test_a_chat_name_on_a_pipe_or_a_link_loop_is_said_and_the_rest_landed(layout, tmp_path):
    """A trial: a chat file turned into a symlink loop or a named pipe was skipped without a
    word (its session's messages gone from the tables). Each is a problem naming it."""
    home = tmp_path / ".gemini"
    chat = write_chat(home)
    loop = chat.with_name("session-2026-03-02T09-00-aaaaaaaa.jsonl")
    loop.symlink_to(loop.with_suffix(".json"))
    loop.with_suffix(".json").symlink_to(loop)
    pipe = chat.with_name("session-2026-03-02T10-00-bbbbbbbb.jsonl")
    os.mkfifo(pipe)
    found = discover(env={"GEMINI_CLI_HOME": str(tmp_path)})
    looped = "cannot be read: Too many levels of symbolic links: not read"  # both links of the loop
    assert found.problems == [f"Gemini CLI chat file {loop.with_suffix('.json')} {looped}",
                              f"Gemini CLI chat file {loop} {looped}",
                              f"Gemini CLI chat file {pipe} is a named pipe, not a regular file: not read"]
    assert [s.path for s in found.sources] == [str(chat)]


def test_credentials_are_never_opened(layout, tmp_path):
    home = tmp_path / ".gemini"
    write_chat(home)
    ingest_with_fifos(layout, "gemini", home, ("oauth_creds.json", "google_accounts.json", "mcp-oauth-tokens.json",
                                               "settings.json"))
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 1


def ingest_generated(layout, provider: str, home, truth) -> None:
    """Ingest a generated home, read-only and reconciled, and compare what the generator counted
    it wrote (sessions, roots, messages, requests and each token bucket) with the lake."""
    before = digests(home)
    summary = ingest_tables(layout, homes={provider: [home]})
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    assert query(layout, "SELECT COUNT(*), COUNT(*) FILTER (WHERE is_root) FROM sessions") == [
        (truth.sessions, truth.roots)]
    assert scalar(layout, "SELECT COUNT(*) FROM messages") == truth.messages
    cols = ("input_uncached_tokens", "cache_read_tokens", "output_tokens", "reasoning_tokens", "total_tokens")
    assert query(layout, f"SELECT COUNT(*), {', '.join(f'SUM({c})' for c in cols)} FROM usage") == [
        (truth.requests, *(truth.tokens[c] for c in cols))]
    assert digests(home) == before


def test_generated_home_totals(layout, tmp_path):
    home = tmp_path / ".gemini"
    truth = generate_home(home, sessions=8, seed=3)
    ingest_generated(layout, "gemini", home, truth)
    assert scalar(layout, "SELECT SUM(cost_usd) FROM sessions WHERE is_root") == pytest.approx(truth.cost_usd)
    assert dict(query(layout, "SELECT project_path, SUM(cost_usd) FROM sessions WHERE is_root GROUP BY 1")) == \
        pytest.approx(dict(truth.by_project))
    assert dict(query(layout, "SELECT tool_name, COUNT(*) FROM tool_calls GROUP BY 1")) == truth.tool_calls
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE is_error") == truth.tool_errors
    # a call's result is recorded once it completed, after the response asking for it (the
    # generator stamped it before: an analyst's trial found results earlier than their calls)
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE has_result AND result_at > called_at") == \
        sum(truth.tool_calls.values()) > 0


def test_a_negative_count_leaves_its_response_unpriced_and_is_said_as_it_lands(layout, tmp_path):
    """A negative output was read as not recorded: the response was priced on its input alone.
    It is kept, not priced, and nulled with the source's warning; the other response is priced."""
    home = tmp_path / ".gemini"
    w = ChatWriter(home, "shop", SID, project_root=ROOT, start=datetime(2026, 3, 2, tzinfo=timezone.utc))
    w.user("hi")
    w.gemini("hello", model="gemini-2.5-pro", usage=tokens(100, -5))
    w.user("again")
    w.gemini("hello again", model="gemini-2.5-pro", usage=tokens(100, 5))
    w.write()
    [result] = ingest_tables(layout, homes={"gemini": [home]}).results
    assert query(layout, "SELECT input_uncached_tokens, output_tokens, total_tokens, cost_source FROM usage "
                         "ORDER BY requested_at") == [(100, None, 100, "unknown"), (100, 5, 105, "estimated")]
    assert scalar(layout, "SELECT cost_source FROM sessions") == "partial"
    assert [w for w in result.warnings if "out of range nulled" in w and "output_tokens" in w], result.warnings
