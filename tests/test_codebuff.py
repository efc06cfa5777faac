"""Codebuff: real chat folders (the CLI's chat-messages.json and the older npm-app's
messages.json) in tmp homes, through the lake, read back by DuckDB."""

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.conftest import ingest_tables, query, scalar
from tests.test_pi import assert_common_totals, digests, ingest_beside_fifos
from transforms.codebuff.discover import discover
from transforms.synth.codebuff import ChatBuilder, generate_home, text

T = datetime(2026, 3, 2, 8, 15, tzinfo=timezone.utc)
CHAT = "2026-03-02T08-15-00.000Z"

# chat-messages.json by hand: two runs billed 12.5 and 3 credits (1 credit = $0.01), one run
# stopped before it finished (no credits). The run state on each AI message is cumulative
# (creditsUsed 12.5, then 15.5): never added.
MESSAGES = [
    {"id": "u1", "variant": "user", "content": "Fix the login test", "timestamp": "2026-03-02T08:15:01.000Z"},
    {"id": "a1", "variant": "ai", "content": "", "timestamp": "2026-03-02T08:15:30.000Z", "credits": 12.5,
     "blocks": [{"type": "text", "content": "Checking.", "textType": "reasoning"},
                {"type": "tool", "toolCallId": "tc1", "toolName": "run_terminal_command",
                 "input": {"command": "npm test -- login"},
                 "output": "{\"command\":\"npm test -- login\",\"stdout\":\"FAIL\",\"exitCode\":1}"},
                {"type": "agent", "agentId": "ag1", "agentName": "File Picker", "agentType": "file-picker",
                 "content": "found", "status": "complete",
                 "blocks": [{"type": "tool", "toolCallId": "tc2", "toolName": "read_files",
                             "input": {"paths": ["src/login.ts"]}, "output": "..."}]},
                {"type": "tool", "toolCallId": "tc3", "toolName": "str_replace",
                 "input": {"path": "src/login.ts", "replacements": []}, "output": "ok"},
                {"type": "text", "content": "Fixed."}],
     "metadata": {"runState": {"sessionState": {"mainAgentState": {"creditsUsed": 12.5}}}}},
    {"id": "u2", "variant": "user", "content": "Now the signup test", "timestamp": "2026-03-02T08:16:00.000Z"},
    {"id": "a2", "variant": "ai", "content": "", "timestamp": "2026-03-02T08:16:10.000Z",
     "blocks": [{"type": "text", "content": "Stopped"}], "userError": "Request aborted"},
    {"id": "u3", "variant": "user", "content": "Try again", "timestamp": "2026-03-02T08:17:00.000Z"},
    {"id": "a3", "variant": "ai", "content": "", "timestamp": "2026-03-02T08:17:20.000Z", "credits": 3,
     "blocks": [{"type": "mode-divider", "mode": "DEFAULT"}, {"type": "text", "content": "Done."}],
     "metadata": {"runState": {"sessionState": {"mainAgentState": {"creditsUsed": 15.5}}}}},
]


def write_chat(root: Path, messages=MESSAGES, project="shop", chat=CHAT, name="chat-messages.json",
               project_root="/home/dev/shop") -> Path:
    folder = root / "projects" / project / "chats" / chat
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(messages))
    if project_root:
        (folder / "run-state.json").write_text(json.dumps({"sessionState": {"fileContext": {
            "projectRoot": project_root}}}))
    return folder


def test_fixture_exact_totals(layout, tmp_path):
    write_chat(tmp_path / "manicode")
    summary = ingest_tables(layout, homes={"codebuff": [tmp_path / "manicode"]})
    assert [(r.status, r.reconciled) for r in summary.results] == [("ok", True)]
    assert query(layout, "SELECT message_id, cost_usd, cost_source, total_tokens, input_uncached_tokens "
                         "FROM usage ORDER BY requested_at") == [
        (f"{CHAT}:a1", pytest.approx(0.125), "native", None, None),
        (f"{CHAT}:a3", pytest.approx(0.03), "native", None, None)]
    assert query(layout, "SELECT session_id, title, project_path, cost_source, message_count, created_at "
                         "FROM sessions") == [
        (CHAT, "Fix the login test", "/home/dev/shop", "native", 6, datetime(2026, 3, 2, 8, 15))]
    # 12.5 + 3 credits; the cumulative creditsUsed of the last run state (15.5) is not added again
    assert scalar(layout, "SELECT cost_usd FROM sessions") == pytest.approx((12.5 + 3) / 100)
    assert dict(query(layout, "SELECT part_type, COUNT(*) FROM parts GROUP BY 1")) == {
        "text": 3 + 3, "reasoning": 1, "tool_call": 4, "other": 1}
    assert query(layout, "SELECT tool_name, tool_category, command, file_path, exit_code, is_error, has_result "
                         "FROM tool_calls ORDER BY tool_call_id") == [
        ("agent:file-picker", "agent", None, None, None, None, True),
        ("run_terminal_command", "shell", "npm test -- login", None, 1, None, True),
        ("read_files", "read", None, "src/login.ts", None, None, True),
        ("str_replace", "edit", None, "src/login.ts", None, None, True)]


def test_peers_find_no_tokens_codebuff_records_credits(layout, tmp_path):
    """ChatMessageMetadata (cli/src/types/chat.ts) has no `usage`: the `metadata.usage` and
    `metadata.codebuff.usage` that ccusage and tokscale look for are never written, so a
    token-based reader prices nothing here; the spend is the per-run `credits`."""
    write_chat(tmp_path / "manicode")
    ingest_tables(layout, homes={"codebuff": [tmp_path / "manicode"]})
    assert not any("usage" in (m.get("metadata") or {}) for m in MESSAGES)
    assert scalar(layout, "SELECT COUNT(*) FROM usage WHERE total_tokens IS NOT NULL") == 0
    assert scalar(layout, "SELECT SUM(cost_usd) FROM usage") == pytest.approx(
        sum(m.get("credits", 0) for m in MESSAGES) / 100)


def test_a_chat_without_a_billed_run_is_a_known_zero(layout, tmp_path):
    write_chat(tmp_path / "manicode", messages=MESSAGES[2:4])
    ingest_tables(layout, homes={"codebuff": [tmp_path / "manicode"]})
    assert query(layout, "SELECT cost_usd, cost_source FROM sessions") == [(0.0, "native")]


def test_the_older_npm_app_layout(layout, tmp_path):
    legacy = {"id": CHAT, "updatedAt": "2026-03-02T09:00:00.000Z", "messages": [
        {"role": "user", "content": "hello (METRICS_REMOVED)"},
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "think"},
            {"type": "tool-call", "toolCallId": "c1", "toolName": "write_file", "input": {"path": "a.py"}}]},
        {"role": "tool", "content": {"type": "tool-result", "toolCallId": "c1", "toolName": "write_file",
                                     "output": [{"type": "json", "value": {"ok": True}}]}}]}
    write_chat(tmp_path / "manicode", messages=legacy, name="messages.json", project_root=None)
    summary = ingest_tables(layout, homes={"codebuff": [tmp_path / "manicode"]})
    assert [(r.status, r.reconciled) for r in summary.results] == [("ok", True)]
    assert query(layout, "SELECT project_path, cost_usd, cost_source FROM sessions") == [("shop", None, "unknown")]
    assert query(layout, "SELECT tool_name, file_path, has_result FROM tool_calls") == [("write_file", "a.py", True)]
    assert scalar(layout, "SELECT schema_version FROM sources") == 1


def test_malformed_file_is_quarantined(layout, tmp_path):
    folder = write_chat(tmp_path / "manicode")
    (folder / "chat-messages.json").write_text('[{"id": "u1", "variant"')
    summary = ingest_tables(layout, homes={"codebuff": [tmp_path / "manicode"]})
    assert summary.results[0].status == "ok"
    assert query(layout, "SELECT key, error LIKE 'not valid JSON%' FROM quarantine") == [
        (str(folder / "chat-messages.json"), True)]


def test_discovery_finds_every_channel(tmp_path):
    home = tmp_path / "user"
    for channel in ("manicode", "manicode-dev", "manicode-staging", "manicode-test"):
        write_chat(home / ".config" / channel, project=channel)
    names = sorted(s.identity for s in discover(env={"HOME": str(home)}).sources)
    assert names == sorted(f"{c}/{c}/{CHAT}" for c in ("manicode", "manicode-dev", "manicode-staging"))
    # NEXT_PUBLIC_CB_ENVIRONMENT names Codebuff's own stack suffix; on Windows the home is USERPROFILE
    found = discover(env={"USERPROFILE": str(home), "NEXT_PUBLIC_CB_ENVIRONMENT": "test"}).sources
    assert f"manicode-test/manicode-test/{CHAT}" in {s.identity for s in found}
    assert {s.project_path for s in found} == {"/home/dev/shop"}
    assert discover(env={}, extra_roots=[str(tmp_path / "none")], use_default=False).problems


def test_credentials_are_never_opened(layout, tmp_path):
    root = tmp_path / "manicode"
    write_chat(root)
    ingest_beside_fifos(layout, root, "codebuff", ("credentials.json",))
    assert scalar(layout, "SELECT COUNT(*) FROM sessions") == 1


def test_a_full_chat_warns_that_codebuff_drops_old_messages(layout, tmp_path):
    b = ChatBuilder(start=T)
    for i in range(50):
        b.user(f"q{i}")
        b.ai([text("a")], 1)
    b.write(tmp_path / "manicode")
    summary = ingest_tables(layout, homes={"codebuff": [tmp_path / "manicode"]})
    assert any("keeps the last 100 only" in w for w in summary.results[0].warnings)
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == 50


def test_generated_home_totals(layout, tmp_path):
    home = tmp_path / "user"
    truth = generate_home(home / ".config" / "manicode", sessions=9, seed=3)
    before = digests(home)
    summary = ingest_tables(layout, homes={"codebuff": [home / ".config" / "manicode"]})
    assert all(r.status == "ok" and r.reconciled for r in summary.results)
    assert_common_totals(layout, truth)
    assert scalar(layout, "SELECT COUNT(*) FROM usage") == truth.usage_rows
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE is_error") == truth.failed_agents
    assert digests(home) == before


def test_message_ids_are_unique_within_a_project_source(layout, tmp_path):
    """Codebuff numbers messages per chat (`user-1`, `ai-2`), and the chats of a project are one
    source: the lake's keys (source, message_id) and (source, message_id, part_index) must still be
    unique, and a transcript joined on them must show each part once."""
    from warehouse.catalog import checks
    from warehouse.catalog.checks import checked

    home = tmp_path / "manicode"
    truth = generate_home(home, sessions=4, seed=5, workspaces=("/home/dev/shop",))
    summary = ingest_tables(layout, homes={"codebuff": [home]})
    assert [(r.status, r.reconciled) for r in summary.results] == [("ok", True)]
    assert scalar(layout, "SELECT COUNT(DISTINCT source_id) FROM messages") == 1
    # the agent's own ids do repeat across the chats: the trap is real
    own = [m["id"] for f in home.rglob("chat-messages.json") for m in json.loads(f.read_text())]
    assert len(set(own)) < len(own)
    dupes, missing = checked(layout.warehouse, lambda con: (checks.duplicate_keys(con), checks.orphans(con)))
    assert set(dupes.values()) == {0} and set(missing.values()) == {0}
    joined = scalar(layout, "SELECT COUNT(*) FROM parts p JOIN messages m "
                            "ON m.source_id = p.source_id AND m.message_id = p.message_id")
    assert joined == scalar(layout, "SELECT COUNT(*) FROM parts") == sum(truth.parts_by_type.values())
    # each message keeps its own id, and its id says which chat it is in
    rows = query(layout, "SELECT session_id, message_id, json_extract_string(extra_columns, '$.id') FROM messages")
    assert all(mid == f"{sid}:{own}" for sid, mid, own in rows)
    assert scalar(layout, "SELECT COUNT(*) FROM usage u LEFT JOIN messages m ON m.source_id = u.source_id "
                          "AND m.message_id = u.message_id WHERE m.message_id IS NULL") == 0
