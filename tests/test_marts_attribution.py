"""Costs the messages cannot carry (issue: step costs of $0, model_usage rows that do not add up,
`<synthetic>` of unknown cost). Real agent files from the generators, through the real ingest,
merge and DuckLake; every expected figure is worked out here from the lake's own `usage` rows
by the rule docs/MARTS.md states."""

from datetime import datetime, timedelta, timezone
from decimal import Decimal

from tests.conftest import ingest, query, scalar
from transforms.synth.claude import assistant_lines, base, project_slug, usage, user_line, write_jsonl
from transforms.synth.droid import SessionBuilder, token_usage

SONNET = "claude-sonnet-4-5-20250929"
NANO = Decimal("0.000000001")


def shares(total: int, steps: int) -> list[int]:
    """docs/MARTS.md's rule: equal shares in whole units, rounded half up, the last step taking
    the remainder."""
    each = (2 * total + steps) // (2 * steps)
    return [each] * (steps - 1) + [total - each * (steps - 1)]


# --- Droid: one usage row per session, naming no message ---------------------------------------

def droid_session(home, sid, start, model, provider):
    """Two reads of x.py (the second a duplicate; neither file named again), then an answer:
    three steps, and the session's running total in its settings."""
    b = SessionBuilder(sid, start=start)
    b.prompt("What does x.py print?")
    for n in range(2):
        b.call(f"{sid}-read{n}", "Read", {"file_path": "/home/dev/shop/x.py"})
        b.result(f"{sid}-read{n}", "print(1)")
    b.answer("It prints 1.")
    b.settle(model, token_usage(1000, 101, read=5000, write=200), provider=provider)
    b.write(home)


def test_steps_share_the_requests_no_message_names(layout, tmp_path):
    """Droid records one request per session with no message id: the steps used to cost a known
    $0 and 0 tokens. Now they share the session's request, and an unpriced one leaves them NULL."""
    home = tmp_path / "factory"
    t = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
    droid_session(home, "priced", t, SONNET, "anthropic")
    droid_session(home, "unpriced", t + timedelta(hours=1), "custom:My-Local-Model-[Ollama]-0",
                  "generic-chat-completion-api")
    ingest(layout, homes={"droid": [home]})
    requests = {sid: (tokens, nanos) for sid, tokens, nanos, message in query(
        layout, "SELECT session_id, total_tokens, CAST(ROUND(cost_usd * 1e9) AS HUGEINT), message_id FROM usage")
        if message is None}
    assert set(requests) == {"priced", "unpriced"} and requests["unpriced"][1] is None
    steps = dict(query(layout, "SELECT session_id, COUNT(*) FROM messages WHERE role = 'assistant' GROUP BY 1"))
    assert steps == {"priced": 3, "unpriced": 3}

    def cost(nanos):
        return None if nanos is None else nanos * NANO

    tokens, nanos = requests["priced"]
    tok, usd = shares(tokens, 3), shares(nanos, 3)
    unpriced_tok = shares(requests["unpriced"][0], 3)
    # the duplicate is the second read's step: one call, so all of its share
    assert query(layout, "SELECT session_id, reads, duplicate_reads, duplicate_step_tokens, duplicate_cost_usd "
                         "FROM insight_duplicate_reads ORDER BY 1") == [
        ("priced", 2, 1, tok[1], cost(usd[1])), ("unpriced", 2, 1, unpriced_tok[1], None)]
    assert query(layout, "SELECT session_id, reads, read_step_tokens, read_cost_usd FROM insight_unused_reads "
                         "ORDER BY 1") == [
        ("priced", 2, tok[0] + tok[1], cost(usd[0] + usd[1])), ("unpriced", 2, unpriced_tok[0] + unpriced_tok[1], None)]
    # the session's own cost is its request's, exactly; an unpriced one is unknown, never $0
    assert query(layout, "SELECT session_id, requests, cost_usd FROM insight_context_growth ORDER BY 1") == [
        ("priced", 1, cost(nanos)), ("unpriced", 1, None)]
    # model_usage: the messages (no model of their own) count under their session's request's model
    expected = sorted((model, llm, 3, 1, cost(n), source) for model, llm, n, source in query(
        layout, "SELECT model, llm_provider, CAST(ROUND(cost_usd * 1e9) AS HUGEINT), cost_source FROM usage"))
    assert query(layout, "SELECT model, llm_provider, messages, sessions, cost_usd, cost_sources FROM model_usage "
                         "ORDER BY model") == expected
    assert scalar(layout, "SELECT COUNT(*) FROM messages WHERE model IS NOT NULL") == 0  # what made it wrong


# --- Claude Code: `<synthetic>` replies and an unpriced model beside a priced one ---------------

def test_synthetic_replies_cost_a_known_zero_and_an_unpriced_model_is_unknown(layout, tmp_path):
    """P: a Sonnet request, one of a model no price table knows, and a `<synthetic>` API-error
    reply (a partial cost). U: a glm-4.6 request (unpriced) and a `<synthetic>` reply (unknown)."""
    cwd = tmp_path / "web"
    cwd.mkdir()
    w = str(cwd)
    folder = tmp_path / "claude" / "projects" / project_slug(w)
    t = datetime(2026, 2, 2, 10, tzinfo=timezone.utc)

    def answer(sid, n, at, model):
        return assistant_lines(sid, at, w, message_id=f"msg_{sid}_{n}", request_id=f"req_{sid}_{n}", model=model,
                               blocks=[{"type": "text", "text": "ok"}], final_usage=usage(100, 10),
                               stop_reason="end_turn")

    def synthetic(sid, at):
        return base("assistant", sid, at, w, isApiErrorMessage=True, message={
            "id": f"err_{sid}", "type": "message", "role": "assistant", "model": "<synthetic>",
            "content": [{"type": "text", "text": "API Error: 529 overloaded"}],
            "usage": {"input_tokens": 0, "output_tokens": 0}})

    write_jsonl(folder / "P.jsonl", [user_line("P", t, w, "go"), *answer("P", 1, t + timedelta(seconds=1), SONNET),
                                     *answer("P", 2, t + timedelta(seconds=2), "my-local-model"),
                                     synthetic("P", t + timedelta(seconds=3))])
    write_jsonl(folder / "U.jsonl", [user_line("U", t, w, "go"), *answer("U", 1, t + timedelta(seconds=1), "glm-4.6"),
                                     synthetic("U", t + timedelta(seconds=2))])
    ingest(layout, homes={"claude": [tmp_path / "claude"]})
    assert query(layout, "SELECT session_id, cost_source FROM sessions ORDER BY 1") == [("P", "partial"),
                                                                                         ("U", "unknown")]
    sonnet = scalar(layout, "SELECT CAST(ROUND(cost_usd * 1e9) AS HUGEINT) FROM usage WHERE model = ?", SONNET)
    rows = {r[0]: r[1:] for r in query(layout, "SELECT model, messages, sessions, cost_usd, cost_sources "
                                               "FROM model_usage")}
    assert rows == {
        SONNET: (1, 1, sonnet * NANO, "partial"),
        "my-local-model": (1, 1, None, "unknown"),  # its requests are unpriced: unknown, never a blank source
        "glm-4.6": (1, 1, None, "unknown"),
        "<synthetic>": (2, 2, Decimal(0), "estimated"),  # no billed request: a known $0, as the ingest says
    }
    # U's unknown cost is on the model that made its request, not shared with the error reply
    assert query(layout, "SELECT model, cost_source FROM daily_costs ORDER BY model") == [
        (SONNET, "partial"), ("glm-4.6", "unknown")]
    assert scalar(layout, "SELECT SUM(cost_usd) FROM model_usage") == \
        scalar(layout, "SELECT SUM(cost_usd) FROM daily_costs") == sonnet * NANO


# --- every agent of the demo ---------------------------------------------------------------------

def test_every_agents_costs_reach_the_step_marts_and_model_usage(built_once):
    """On the demo (every agent's generator), a session's steps sum exactly to its requests, the
    insights say unknown (NULL) where a request is unpriced and never $0, and model_usage puts
    each model's messages and cost on one row, adding up to the other cost marts."""
    from tests.support_homes import quickstart_with_a_typo
    from warehouse.catalog.marts import create_mart_views
    from warehouse.lake.ducklake import connect
    from warehouse.lake.layout import Layout

    # the default demo (every agent), generated and ingested by `agentlake quickstart` once per
    # session for the modules that read it: this test only reads it too
    built = quickstart_with_a_typo(built_once)
    assert built.code == 1 and ", 0 failed" in built.out  # 1: the place it was told of is missing
    layout = Layout.resolve(home=built.home)
    requests = """(SELECT machine, source_id, session_id, ANY_VALUE(provider) AS provider,
                          CASE WHEN COUNT(*) = COUNT(cost_usd) THEN SUM(CAST(ROUND(cost_usd * 1e9) AS HUGEINT)) END AS nanos,
                          CASE WHEN COUNT(*) = COUNT(total_tokens) THEN SUM(total_tokens) END AS tokens
                   FROM usage GROUP BY ALL) AS r"""
    # the agents whose requests name no assistant message are in the demo, with unpriced sessions
    unnamed = {r[0] for r in query(layout, "SELECT provider FROM usage AS u WHERE NOT EXISTS (SELECT 1 FROM messages AS m "
                                           "WHERE m.role = 'assistant' AND m.machine = u.machine AND m.source_id = u.source_id "
                                           "AND m.session_id = u.session_id AND m.message_id = u.message_id)")}
    assert {"aider", "copilot", "droid", "goose", "kilo", "antigravity"} <= unnamed
    with connect(layout.warehouse) as con:
        create_mart_views(con)
        wrong = con.execute(f"""
            SELECT r.provider, r.session_id, r.nanos, s.nanos, r.tokens, s.tokens
            FROM {requests}
            JOIN (SELECT machine, source_id, session_id,
                         CASE WHEN COUNT(*) = COUNT(nanos) THEN SUM(nanos) END AS nanos,
                         CASE WHEN COUNT(*) = COUNT(tokens) THEN SUM(tokens) END AS tokens
                  FROM _step_costs GROUP BY ALL) AS s USING (machine, source_id, session_id)
            WHERE r.nanos IS DISTINCT FROM s.nanos OR r.tokens IS DISTINCT FROM s.tokens""").fetchall()
        assert wrong == []
    growth = query(layout, f"SELECT r.provider, g.cost_usd, r.nanos FROM {requests} JOIN insight_context_growth AS g "
                           "USING (machine, source_id, session_id)")
    assert {p for p, *_ in growth} >= unnamed
    assert [g for g in growth if g[1] != (None if g[2] is None else g[2] * NANO)] == []
    assert any(n is None for _, _, n in growth) and any(n for _, _, n in growth)

    # model_usage: every model a request names, in a session with assistant messages, has messages
    # (a request naming a message counts it there); the messages and the costs add up
    assert query(layout, """
        SELECT DISTINCT u.provider, u.model, u.llm_provider FROM usage AS u
        WHERE u.model IS NOT NULL AND EXISTS (SELECT 1 FROM messages AS m WHERE m.role = 'assistant'
            AND m.machine = u.machine AND m.source_id = u.source_id AND m.session_id = u.session_id)
        EXCEPT SELECT provider, model, llm_provider FROM model_usage WHERE messages > 0""") == []
    assert query(layout, """
        SELECT DISTINCT u.provider, u.model, u.llm_provider FROM usage AS u JOIN messages AS m
            ON m.role = 'assistant' AND m.machine = u.machine AND m.source_id = u.source_id
            AND m.session_id = u.session_id AND m.message_id = u.message_id
        EXCEPT SELECT provider, model, llm_provider FROM model_usage WHERE messages > 0""") == []
    assert query(layout, "SELECT provider, SUM(messages) FROM model_usage GROUP BY 1 HAVING SUM(messages) > 0 ORDER BY 1") == \
        query(layout, "SELECT provider, COUNT(*) FROM messages WHERE role = 'assistant' GROUP BY 1 ORDER BY 1")
    assert query(layout, "SELECT * FROM model_usage WHERE cost_sources IS NULL "
                         "OR (cost_usd IS NULL AND cost_sources NOT LIKE '%unknown%')") == []
    assert query(layout, "SELECT cost_usd, cost_sources FROM model_usage WHERE model = '<synthetic>'") == [
        (Decimal(0), "estimated")]
    # the report counts assistant messages by model as model_usage does (Droid's, Goose's and
    # Kilo's under their requests' models, not on a row of no model beside them)
    from warehouse.serve.report import Filters, build

    with connect(layout.warehouse) as con:
        section = next(s for s in build(con, Filters(), by="model", top=0) if s.name == "by_model")
    at = {c: i for i, c in enumerate(section.columns)}
    reported = {r[at["model_name"]]: r[at["assistant_messages"]] for r in section.rows if r[at["assistant_messages"]]}
    assert reported == dict(query(layout, "SELECT model_name, SUM(messages) FROM model_usage "
                                          "GROUP BY 1 HAVING SUM(messages) > 0"))
    # (the report's rows are model_usage's, by the name; there Droid's and Kilo's messages have a model)
    assert query(layout, "SELECT DISTINCT model IS NULL FROM model_usage WHERE provider IN ('droid', 'kilo') "
                         "AND messages > 0") == [(False,)]
    total = scalar(layout, "SELECT SUM(cost_usd) FROM daily_costs")
    assert scalar(layout, "SELECT SUM(cost_usd) FROM model_usage") == total == \
        scalar(layout, "SELECT SUM(cost_usd)::DECIMAL(38, 9) FROM sessions WHERE is_root")
