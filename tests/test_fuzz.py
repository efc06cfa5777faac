"""Fuzzed input: whatever the parts JSON or the database file holds, ingestion never crashes
or hangs; each bad row or source is reported with a reason, and all good data is kept."""

import json
import random
import sqlite3
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import T0, ingest_tables, query
from transforms.crush.normalise import RawTable, SourceContext, normalise
from transforms.synth.crush import add_session, generate_store
from transforms.synth.crush_parts import encode_parts, text_part, tool_call_part, tool_result_part

RUN_AT = datetime(2026, 2, 1, tzinfo=timezone.utc)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
part_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "reasoning", "tool_call", "tool_result", "finish", "binary", "image_url",
                              "shell_command", "weird"]) | json_values,
     "data": st.dictionaries(st.sampled_from(["text", "thinking", "id", "name", "input", "tool_call_id", "content",
                                              "is_error", "reason", "time", "Data", "MIMEType", "url", "command",
                                              "exit_code", "started_at", "metadata"]), json_values, max_size=6)
     | json_values})


def _normalise(parts_texts):
    """Run the pure normaliser on one session whose messages hold the given parts texts."""
    sessions = RawTable(["id", "parent_session_id", "title", "message_count", "prompt_tokens", "completion_tokens",
                         "cost", "updated_at", "created_at"], [(1, "s", None, "t", 0, 0, 0, 0.5, T0, T0)])
    messages = RawTable(["id", "session_id", "role", "parts", "model", "created_at", "updated_at"],
                        [(i + 1, f"m{i}", "s", "assistant", text, "m", T0 + i, T0 + i)
                         for i, text in enumerate(parts_texts)])
    rows, findings = normalise({"sessions": sessions, "messages": messages}, SourceContext("src", "/p", RUN_AT))
    return rows, findings


def _mutations(text: str, rng: random.Random) -> list:
    """Truncation, deep nesting, duplicate keys, non-finite numbers, bad escapes, wrong types."""
    cut = rng.randrange(len(text) + 1)
    return [
        text[:cut],
        "[" * 3000 + "]" * 3000,  # deeper than any parser should recurse
        '[{"type":"text","type":"tool_call","data":{"id":"a","id":"b","name":"bash","input":"{}"}}]',
        '[{"type":"text","data":{"text":NaN}}]',
        '[{"type":"text","data":{"text":Infinity}}]',
        '[{"type":"text","data":{"text":"\\ud800 lone"}}]',
        '[{"type":"text","data":{"text":"bad \\x escape"}}]',
        "{}", "null", "42", '"text"', "", "   ",
        text.replace('"', "'"),
        text.encode("utf-8")[: max(1, cut)].decode("latin-1"),
    ]


@FAST
@given(st.lists(part_like, max_size=6), st.randoms(use_true_random=False))
def test_any_parts_json_is_parsed_or_quarantined(parts, rng):
    good = encode_parts(parts)
    texts = [good, *_mutations(good, rng)]
    rows, findings = _normalise(texts)
    assert len(rows["messages"]) == len(texts)  # every message row is kept
    quarantined = {q["key"] for q in rows["quarantine"]}
    for m in rows["messages"]:
        assert m["parts_ok"] == (m["message_id"] not in quarantined)
        if not m["parts_ok"]:
            q = next(q for q in rows["quarantine"] if q["key"] == m["message_id"])
            assert q["error"] and isinstance(q["raw"], str)
    assert rows["messages"][0]["parts_ok"]  # the well-formed one always parses
    assert sum(m["part_count"] or 0 for m in rows["messages"]) == len(rows["parts"])
    for p in rows["parts"]:
        json.loads(p["raw"])  # raw is always valid JSON text


@FAST
@given(st.text(max_size=200_000).filter(lambda s: len(s) > 0), st.integers(min_value=0, max_value=2**80))
def test_huge_strings_and_numbers(big, number):
    parts = [text_part(big), tool_call_part("c", "bash", {"command": big[:100]}),
             tool_result_part("c", "bash", big), {"type": "finish", "data": {"reason": "end_turn", "time": number}}]
    rows, _ = _normalise([encode_parts(parts)])
    assert [p["part_type"] for p in rows["parts"]] == ["text", "tool_call", "tool_result", "finish"]
    assert rows["tool_calls"][0]["result_size"] == len(rows["tool_calls"][0]["result_text"].encode("utf-8", "replace"))


def test_invalid_utf8_in_the_database_is_replaced_not_fatal(layout, project):
    p = project()
    add_session(p.conn, "s", title="t", created_at=T0)
    p.conn.execute("INSERT INTO messages (id, session_id, role, parts, model, created_at, updated_at) "
                   "VALUES ('bad', 's', 'user', CAST(? AS TEXT), '', ?, ?)",
                   (b'[{"type":"text","data":{"text":"caf\xe9 \xff"}}]', T0, T0))
    p.close()
    summary = ingest_tables(layout, p.db)
    assert summary.results[0].status == "ok"
    assert query(layout, "SELECT text FROM parts") == [("caf\ufffd \ufffd",)]


def _corrupt(db, how: str, rng: random.Random):
    data = bytearray(db.read_bytes())
    if how == "truncated":
        db.write_bytes(data[: len(data) // 3])
    elif how == "garbage pages":
        for _ in range(8):
            start = rng.randrange(4096, len(data) - 4096)  # keep the header, smash pages
            data[start:start + 4096] = rng.randbytes(4096)
        db.write_bytes(data)
    elif how == "garbage header":
        db.write_bytes(rng.randbytes(100) + data[100:])
    elif how == "missing table":
        con = sqlite3.connect(db)
        con.execute("DROP TABLE messages")
        con.commit()
        con.close()


@pytest.mark.parametrize("how", ["truncated", "garbage pages", "garbage header", "missing table"])
def test_mutated_database_files_fail_alone_with_a_reason(layout, tmp_path, how):
    store = generate_store(tmp_path / "crush", projects=2, sessions_per_project=3, seed=3, stages=(7,))
    victim, healthy = store.dbs
    _corrupt(victim.path, how, random.Random(how))
    for suffix in ("-wal", "-shm"):
        victim.path.with_name(victim.path.name + suffix).unlink(missing_ok=True)
    summary = ingest_tables(layout, roots=[store.global_dir])
    by_path = {r.source.path: r for r in summary.results}
    good = by_path[str(healthy.path)]
    assert good.status == "ok" and good.rows["messages"] == healthy.messages
    bad = by_path[str(victim.path)]
    if bad.status == "failed":
        assert str(victim.path) in bad.error or "Crush database" in bad.error or "snapshot" in bad.error
    else:  # damage SQLite could read past: whatever was readable is in, and said so
        assert bad.status == "ok" and bad.reconciled


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(part_like, max_size=10), st.randoms(use_true_random=False))
def test_any_parts_json_long(parts, rng):
    test_any_parts_json_is_parsed_or_quarantined.hypothesis.inner_test(parts, rng)


def test_mutation_helpers_cover_the_listed_cases():
    cases = _mutations('[{"type":"text","data":{"text":"x"}}]', random.Random(1))
    joined = "\n".join(cases)
    for marker in ("NaN", "Infinity", "\\ud800", '"id":"a","id":"b"', "[" * 3000):
        assert marker in joined
