"""Prices a team sets in config.toml (`[[prices]]`, `[model_aliases]`), applied at the merge: the
merged `usage` rows, their sessions, `daily_costs` and `agentlake report` agree, a changed price
re-prices the history at the next merge, an unchanged one rebuilds nothing, bad ones are refused.

On a copy of the small demo (every agent, one session each): Qwen Code's model
(`qwen3-coder-plus`) and OpenCode's local `qwen3-coder:30b` are unpriced by the bundled table."""

import json
import shutil
from datetime import date, datetime, timedelta, timezone
from decimal import ROUND_HALF_UP, Decimal

import pyarrow.parquet as pq
import pytest

from tests.conftest import query, run_cli
from tests.support_homes import copy_demo_home, small_demo_home
from warehouse.lake.config import ConfigError, load_config
from warehouse.lake.layout import Layout
from warehouse.lake.prices import Price, Prices

MODEL, LOCAL = "qwen3-coder-plus", "qwen3-coder:30b"  # unknown to the bundled table; LOCAL an alias of MODEL
BUCKETS = {"input_uncached_tokens": "input", "cache_read_tokens": "cache_read",
           "cache_write_5m_tokens": "cache_write", "cache_write_1h_tokens": "cache_write", "output_tokens": "output"}
NANO = Decimal("0.000000001")


def _landed(home, table: str, provider: str) -> list[dict]:
    """The rows as the agent recorded them: the lake's landing files, which the merge never changes."""
    return [row for path in sorted((home / "lake" / "_landing").glob(f"*/*/{provider}/*/{table}.parquet"))
            for row in pq.read_table(path).to_pylist()]


def _cost(row: dict, rates: dict) -> Decimal:
    """tokens x USD per million tokens, to the nano-dollar."""
    usd = sum(Decimal(row[col] or 0) * Decimal(str(rates[rate])) for col, rate in BUCKETS.items()) / 1_000_000
    return usd.quantize(NANO, ROUND_HALF_UP)


def _toml(prices: list[dict], aliases: dict) -> str:
    out = []
    for price in prices:
        out.append("[[prices]]\n" + "".join(f"{k} = {v.isoformat() if isinstance(v, date) else json.dumps(v)}\n"
                                             for k, v in price.items()))
    return "\n".join(out) + "\n[model_aliases]\n" + "".join(f'"{k}" = "{v}"\n' for k, v in aliases.items())


def _merge(home) -> str:
    ran = run_cli("merge", "--home", home)
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


def _usage(layout, provider: str) -> list[tuple]:
    return query(layout, "SELECT source_rowid, request_id, cost_usd, cost_source, pricing_note FROM usage "
                         "WHERE provider = ? ORDER BY ALL", provider)


def _by_key(rows: list[dict]) -> dict:
    return {(r["source_rowid"], r["request_id"]): r for r in rows}


def _dec(value) -> Decimal | None:
    return None if value is None else Decimal(str(value)).quantize(NANO)


@pytest.fixture
def demo(tmp_path, built_once):
    built = small_demo_home(built_once)
    assert built.code == 0, built.err
    home = copy_demo_home(built.home, tmp_path / "home")
    return home, Layout.resolve(home=home)


def test_configured_prices_reprice_usage_sessions_marts_and_report(demo):
    home, layout = demo
    config = home / "config.toml"
    original = config.read_text()
    qwen, local = _landed(home, "usage", "qwen"), [r for r in _landed(home, "usage", "opencode") if r["model"] == LOCAL]
    assert qwen and local and {r["cost_source"] for r in qwen + local} == {"unknown"}
    since = min(r["date"] for r in local)  # the second price holds from the local model's day on
    assert max(r["date"] for r in qwen) < since
    first = {"input": 1, "output": 5, "cache_read": 0.1, "cache_write": 1.25}
    second = {"input": 2, "output": 8, "cache_read": 0.2, "cache_write": 2}
    config.write_text(original + "\n" + _toml([{"model": MODEL, **first}, {"model": MODEL, "since": since, **second}],
                                              {LOCAL: MODEL}))
    assert _merge(home).startswith("merged ")

    # usage: each re-priced request at the price in force on its day; native rows as landed
    want = {**{k: _cost(r, first) for k, r in _by_key(qwen).items()},
            **{k: _cost(r, second) for k, r in _by_key(local).items()}}
    got = {(rowid, rid): (_dec(cost), source, note) for provider in ("qwen", "opencode")
           for rowid, rid, cost, source, note in _usage(layout, provider) if source == "configured"}
    assert {k: v[0] for k, v in got.items()} == want
    assert {v[2] for v in got.values()} == {f"configured price for {MODEL}",
                                            f"configured price for {MODEL} since {since.isoformat()}"}
    native = [r for r in _landed(home, "usage", "opencode") if r["model"] != LOCAL]
    assert {(r["source_rowid"], r["request_id"]): _dec(r["cost_usd"]) for r in native} == {
        (rowid, rid): _dec(cost) for rowid, rid, cost, source, _ in _usage(layout, "opencode") if source != "configured"}

    # sessions: Qwen's root was unknown (every request unpriced): now the sum of its tree's requests;
    # OpenCode's root was partial: its recorded cost plus the local model's request
    qwen_cost = sum(_cost(r, first) for r in qwen)
    local_cost = sum(_cost(r, second) for r in local)
    root = next(s for s in _landed(home, "sessions", "opencode") if s["is_root"])
    assert root["cost_source"] == "partial" and root["cost_includes_subagents"]
    opencode_cost = _dec(root["cost_usd"]) + local_cost
    roots = dict(((p, src), (_dec(c), src2)) for p, src, c, src2 in query(
        layout, "SELECT provider, session_id, cost_usd, cost_source FROM sessions WHERE is_root AND provider IN "
                "('qwen', 'opencode')"))
    assert sorted(roots.values()) == sorted([(qwen_cost, "configured"), (opencode_cost, "configured")])

    # daily_costs and the report: the same figures, to the nano-dollar
    daily = dict(query(layout, "SELECT provider, SUM(cost_usd) FROM daily_costs WHERE provider IN ('qwen', 'opencode') "
                               "GROUP BY ALL"))
    assert daily == {"qwen": qwen_cost, "opencode": opencode_cost}
    ran = run_cli("report", "--home", home, "--by", "agent", "--top", "0", "--format", "json",
                 "--section", "by_agent")
    assert ran.returncode == 0, ran.stderr
    report = {r["provider"]: r for r in json.loads(ran.stdout)["by_agent"]}
    assert (_dec(report["qwen"]["cost_usd"]), report["qwen"]["cost_source"]) == (qwen_cost, "configured")
    assert _dec(report["opencode"]["cost_usd"]) == opencode_cost

    # an unchanged config.toml merges nothing again, and says nothing of prices
    again = _merge(home)
    assert again.startswith("merged 0 sources") and "priced again" not in again

    # a changed price re-prices the history at the next merge
    first["output"] = 6
    config.write_text(original + "\n" + _toml([{"model": MODEL, **first}, {"model": MODEL, "since": since, **second}],
                                              {LOCAL: MODEL, "qwen3-codr": MODEL}))  # and an alias of a typo
    ran = run_cli("merge", "--home", home)
    assert ran.returncode == 0 and "changed: the history was priced again with them" in ran.stdout
    assert "config.toml prices the model 'qwen3-codr', which no request in `usage` names" in ran.stderr
    assert ran.stderr.count("which no request") == 1  # the priced and aliased names are recorded ones
    assert {(r, i): _dec(c) for r, i, c, *_ in _usage(layout, "qwen")} == {k: _cost(r, first)
                                                                          for k, r in _by_key(qwen).items()}
    assert query(layout, "SELECT SUM(cost_usd) FROM daily_costs WHERE provider = 'qwen'")[0][0] == sum(
        _cost(r, first) for r in qwen)

    # prices gone: the requests and sessions are as the agents recorded them
    config.write_text(original)
    _merge(home)
    assert {s for *_, s, _ in _usage(layout, "qwen")} == {"unknown"}
    assert query(layout, "SELECT cost_usd, cost_source FROM sessions WHERE is_root AND provider = 'qwen'") == [
        (None, "unknown")]


def _prices(tmp_path, text: str) -> Prices:
    """The prices of a config.toml holding this text."""
    (tmp_path / "config.toml").write_text(text)
    return load_config(tmp_path / "config.toml").prices


def test_prices_are_read_with_their_defaults(tmp_path):
    prices = _prices(tmp_path, '[[prices]]\nmodel = "m"\ninput = 2\noutput = 8\n\n[[prices]]\nmodel = "m"\n'
                               'since = 2026-03-01\ninput = 1\noutput = 4\ncache_read = 0.1\ncache_write = 1.5\n'
                               'cache_write_1h = 3\n\n[model_aliases]\n"a" = "b"\n"b" = "M"\n')
    d = Decimal
    assert prices.prices == (Price("m", None, d(2), d(8), d(2), d(2), d(2)),
                             Price("m", date(2026, 3, 1), d(1), d(4), d("0.1"), d("1.5"), d(3)))
    assert sorted(m for m, _ in prices.by_recorded_model()) == ["a", "a", "b", "b", "m", "m"]
    # the fingerprint the merge compares: the same prices in another order are the same, a rate is not
    reordered = _prices(tmp_path, '[[prices]]\nmodel = "m"\nsince = 2026-03-01\ninput = 1\noutput = 4\n'
                                  'cache_read = 0.1\ncache_write = 1.5\ncache_write_1h = 3\n\n[[prices]]\n'
                                  'model = "m"\ninput = 2\noutput = 8\n[model_aliases]\n"b" = "M"\n"a" = "b"\n')
    assert reordered.fingerprint() == prices.fingerprint()
    changed = (tmp_path / "config.toml").read_text().replace("output = 8", "output = 8.5")
    assert _prices(tmp_path, changed).fingerprint() not in ("", prices.fingerprint())
    assert _prices(tmp_path, 'user = "ana"\n').fingerprint() == ""


def test_a_price_reached_through_an_alias_only_is_not_called_a_typo(tmp_path):
    """CONFIG.md's pattern: a local model priced under a name of the team's own, reached through
    the name its agent records. The warning is for a name nothing reaches (a new user's trial:
    every merge called the used price a typo)."""
    import duckdb

    from warehouse.catalog.prices import unmatched_prices

    prices = _prices(tmp_path, '[[prices]]\nmodel = "llama-3.3-70b-internal"\ninput = 0.7\noutput = 1.8\n\n'
                               '[[prices]]\nmodel = "never-used"\ninput = 1\noutput = 2\n\n[model_aliases]\n'
                               '"vllm/my-local" = "llama-3.3-70b-internal"\n"vllm/typo" = "never-used"\n')
    with duckdb.connect() as con:
        con.execute("CREATE TABLE usage AS SELECT * FROM (VALUES ('vllm/my-local', NULL), ('gpt-5', 'openai'), "
                    "(NULL, NULL)) AS t(model, llm_provider)")
        said = unmatched_prices(con, prices)
    assert [line.split(",")[0] for line in said] == [
        "config.toml prices the model 'never-used'", "config.toml prices the model 'vllm/typo'"]
    assert all("(a typo? `agentlake sql" in line for line in said)  # nothing recorded is close to either
    # an alias spelt nearly as the agent records its model is named with it (a trial's qwen3-coder-30b)
    near = _prices(tmp_path, '[[prices]]\nmodel = "local"\ninput = 1\noutput = 2\n\n[model_aliases]\n'
                             '"qwen3-coder-30b" = "local"\n')
    with duckdb.connect() as con:
        con.execute("CREATE TABLE usage AS SELECT 'qwen3-coder:30b' AS model, 'ollama' AS llm_provider")
        assert unmatched_prices(con, near) == [
            "config.toml prices the model 'local', which no request in `usage` names (a typo? `agentlake sql "
            "\"SELECT DISTINCT model FROM usage\"` lists them)",
            "config.toml prices the model 'qwen3-coder-30b', which no request in `usage` names (did you mean "
            "'qwen3-coder:30b'? `agentlake sql \"SELECT DISTINCT model FROM usage\"` lists them)"]


@pytest.mark.parametrize("text, said", [
    ('[[prices]]\nmodel = "m"\ninput = 1\noutput = 2\nouput = 3\n', "price 1 (m): unknown setting 'ouput' (did you mean output?); known: model"),
    ('[[prices]]\nmodel = "m"\ninput = -1\noutput = 2\n', "price 1 (m): input must be a number of USD per million"),
    ('[[prices]]\nmodel = "m"\ninput = "1"\noutput = 2\n', "price 1 (m): input must be a number of USD per million"),
    ('[[prices]]\nmodel = "m"\ninput = 1\noutput = true\n', "price 1 (m): output must be a number of USD per million"),
    ('[[prices]]\nmodel = "m"\ninput = 1\n', "price 1 (m): output is required (USD per million tokens)"),
    ('[[prices]]\ninput = 1\noutput = 2\n', "price 1: model must be a model name"),
    ('[[prices]]\nmodel = "m"\nsince = "2026-01-01"\ninput = 1\noutput = 2\n', "price 1 (m): since must be a date"),
    ('[[prices]]\nmodel = "m"\nsince = 2026-01-01\ninput = 1\noutput = 2\n[[prices]]\nmodel = "M"\n'
     'since = 2026-01-01\ninput = 3\noutput = 4\n', "price 2: a second price for M from 2026-01-01 (price 1)"),
    ('[[prices]]\nmodel = "m"\ninput = 1\noutput = 2\n[[prices]]\nmodel = "m"\ninput = 3\noutput = 4\n',
     "price 2: a second price for m without a since date (price 1)"),
    ('[prices]\nmodel = "m"\n', "prices are [[prices]] tables (double brackets"),
    ('[[prices]]\nmodel = "m"\ninput = 1\noutput = 2\n[model_aliases]\n"x" = "x"\n',
     "[model_aliases] 'x': an alias to itself (x -> x)"),
    ('[[prices]]\nmodel = "m"\ninput = 1\noutput = 2\n[model_aliases]\n"x" = "y"\n"y" = "x"\n',
     "[model_aliases] 'x': aliases in a cycle (x -> y -> x)"),
    ('[[prices]]\nmodel = "m"\ninput = 1\noutput = 2\n[model_aliases]\n"x" = "claude-sonnet-4-5"\n',
     "[model_aliases] 'x': 'claude-sonnet-4-5' has no [[prices]] entry"),
    ('[[prices]]\nmodel = "m"\ninput = 1\noutput = 2\n[model_aliases]\n"M" = "m"\n',
     "[model_aliases] 'M': the model has a price of its own"),
    ('[model_aliases]\n"x" = 3\n', "[model_aliases] maps a recorded model name to a model priced in [[prices]]"),
])
def test_a_bad_price_is_a_config_error_naming_it(tmp_path, text, said):
    with pytest.raises(ConfigError) as exc:
        _prices(tmp_path, text)
    assert said in str(exc.value)


def test_prices_in_the_home_apply_to_the_quickstart_demo_standing_in_for_it(tmp_path, built_once):
    """After a quickstart that found no agent data, the commands use <home>/demo and read the
    budgets from <home>/config.toml, the file the README and docs/CONFIG.md point at; prices put
    there were ignored (a new user's trial): `merge` said the demo's own config.toml changed, the
    model stayed unpriced, and the report gave no note. They apply now, and the note names it."""
    built = small_demo_home(built_once)
    assert built.code == 0, built.err
    home = tmp_path / "home"
    copy_demo_home(built.home, home / "demo")  # as a quickstart leaves it: <home> itself holds no data
    rates = {"input": 1, "output": 5, "cache_read": 0.1, "cache_write": 1.25}
    (home / "config.toml").write_text(_toml([{"model": MODEL, **rates}], {}))
    env = {"AGENTLAKE_HOME": home}
    waiting = run_cli("report", env=env)
    assert waiting.returncode == 0 and f"note: the prices in {home / 'config.toml'} are not the ones the warehouse " \
        "was merged with: `agentlake merge` applies them" in waiting.stderr, waiting.stderr
    # a budget's spend, and so its status, changes with the prices too: said there as well (a trial)
    with (home / "config.toml").open("a") as config:
        config.write("\n[[budgets]]\nmonthly_usd = 500\n")
    budgets = run_cli("report", "--budgets", env=env)
    assert budgets.returncode == 0 and f"note: the prices in {home / 'config.toml'} are not the ones the " \
        "warehouse was merged with" in budgets.stderr, budgets.stderr
    assert "stands in for" not in budgets.stderr
    # budgets put in the demo's own file, the demo named with --home: which file counts is said (a trial)
    with (home / "demo" / "config.toml").open("a") as config:
        config.write("\n[[budgets]]\nmonthly_usd = 7\n")
    named = run_cli("report", "--budgets", "--home", home / "demo", env=env)
    assert named.returncode == 0 and f"note: the budgets are those of {home / 'config.toml'}, the home this " \
        f"quickstart demo stands in for until that home holds data of its own; {home / 'demo' / 'config.toml'}'s " \
        "are not read" in named.stderr, named.stderr
    assert "500.00" in named.stdout and "7.00" not in named.stdout, named.stdout
    ran = run_cli("merge", env=env)
    assert ran.returncode == 0 and "using the quickstart demo" in ran.stderr, ran.stderr
    assert f"the prices in {home / 'config.toml'} changed: the history was priced again with them" in ran.stdout
    demo = Layout.resolve(home=home / "demo")
    qwen = _landed(home / "demo", "usage", "qwen")
    assert qwen and {(_dec(r[2]), r[3]) for r in _usage(demo, "qwen")} == {(_cost(r, rates), "configured") for r in qwen}
    assert "not the ones the warehouse was merged with" not in run_cli("report", env=env).stderr
    # the prices taken out again: the report still shows them until a merge, and says so (a trial)
    (home / "config.toml").write_text("[[budgets]]\nmonthly_usd = 500\n")
    for args in (("report",), ("report", "--budgets")):
        waiting = run_cli(*args, env=env)
        assert waiting.returncode == 0 and f"note: {home / 'config.toml'} sets no prices, and configured prices are " \
            "the ones the warehouse was merged with: `agentlake merge` prices the history without them" \
            in waiting.stderr, waiting.stderr
    assert run_cli("merge", env=env).returncode == 0
    assert {r[3] for r in _usage(demo, "qwen")} != {"configured"}
    assert "the warehouse was merged with" not in run_cli("report", env=env).stderr


def test_a_home_named_demo_beside_another_tools_config_keeps_its_own_prices(tmp_path, built_once):
    """A home of one's own named `demo` (`agentlake demo --home proj/demo`) in a folder whose
    config.toml is another tool's (Hugo's): merging read that file as the home it stands in for,
    and failed on its `baseURL` (a review). It is no agentlake home: the demo's own file prices it."""
    built = small_demo_home(built_once)
    home = copy_demo_home(built.home, tmp_path / "proj" / "demo")
    (tmp_path / "proj" / "config.toml").write_text('baseURL = "https://example.org/"\ntitle = "site"\n')
    (home / "config.toml").write_text((home / "config.toml").read_text() + "\n" + _toml(
        [{"model": MODEL, "input": 1, "output": 5}], {}))
    ran = run_cli("merge", "--home", home)
    assert ran.returncode == 0 and f"the prices in {home / 'config.toml'} changed" in ran.stdout, ran.stderr


def test_a_home_of_ones_own_named_demo_keeps_its_own_prices_and_budgets(tmp_path):
    """A home named with --home whose folder is called `demo`, holding the user's own agent data
    (no stores `agentlake demo` generated), in a folder that holds nothing: after its first merge it
    was taken for the quickstart's demo standing in for that folder. Its budgets were read from the
    folder's config.toml, which does not exist (exit 2), and the next ingest said the prices
    "changed" and left every request unpriced (a team lead's trial). Its own file applies."""
    from transforms.synth.claude import assistant_lines, project_slug, usage, user_line, write_jsonl

    from pipelines.command_args import command_for

    # this month's first day: the budget counts this month's spend
    at = datetime.now(timezone.utc).replace(day=1, hour=9, minute=0, second=0, microsecond=0)
    cwd, sid = "/home/ana/shop", "11111111-2222-4333-8444-555555555555"
    claude = tmp_path / "claude"
    write_jsonl(claude / "projects" / project_slug(cwd) / f"{sid}.jsonl", [user_line(sid, at, cwd, "go")] + assistant_lines(
        sid, at + timedelta(seconds=5), cwd, message_id="msg_1", request_id="req_1", model="acme-internal-1",
        blocks=[{"type": "text", "text": "ok"}], final_usage=usage(1_000_000, 200_000), stop_reason="end_turn"))
    home = tmp_path / "team" / "demo"
    home.mkdir(parents=True)
    (home / "config.toml").write_text(_toml([{"model": "acme-internal-1", "input": 1, "output": 5}], {})
                                      + "\n[[budgets]]\nmonthly_usd = 1\n")
    flags = ("--home", home, "--no-default", "--agent-home", f"claude={claude}")
    layout = Layout.resolve(home=home)
    for _ in range(2):  # the second ingest changes nothing
        ran = run_cli("ingest", *flags)
        assert ran.returncode == 0 and "changed: the history was priced again" not in ran.stdout + ran.stderr, \
            ran.stdout + ran.stderr
        # 1M input tokens at $1 and 200k output at $5 a million
        assert [(r[1], r[2], r[3]) for r in _usage(layout, "claude")] == [("req_1", Decimal("2"), "configured")]
    budgets = run_cli("report", "--home", home, "--budgets")
    assert budgets.returncode == 3 and str(tmp_path / "team" / "config.toml") not in budgets.stderr, budgets.stderr
    # the commands it prints (search's `open:`, the ingest summary's) read this home, not its folder
    assert command_for(layout, "sql").endswith(f"sql --home {home}")
    found = run_cli("search", "--home", home, "ok")
    assert found.returncode == 0 and f"sql --home {home} " in found.stdout, found.stdout + found.stderr


def test_a_price_under_the_name_the_report_shows_covers_the_names_grouped_under_it(demo):
    """The report and the dashboard group `claude-sonnet-4-5-20250929` and `claude-sonnet-4.5` under
    `claude-sonnet-4-5`. A price copied from them re-priced the requests recorded under that exact
    name only, whose costs are native and stay: nothing, and no warning (a new user's trial). It
    covers the names grouped under it; a price for a recorded name itself comes first; native
    costs and other models stay as landed."""
    home, layout = demo
    config = home / "config.toml"
    group = {"input": 1, "output": 5, "cache_read": 0.1, "cache_write": 1.25}
    own = {"input": 2, "output": 7, "cache_read": 0.2, "cache_write": 2.5}
    config.write_text(config.read_text() + "\n" + _toml([{"model": "claude-sonnet-4-5", **group},
                                                        {"model": "claude-sonnet-4.5", **own}], {}))
    ran = run_cli("merge", "--home", home)
    assert ran.returncode == 0 and "which no request" not in ran.stderr, ran.stderr
    landed = {(r["provider"], r["source_rowid"], r["request_id"]): r for provider in ("claude", "droid", "copilot", "pi", "amp")
              for r in _landed(home, "usage", provider)}
    merged = query(layout, "SELECT provider, source_rowid, request_id, cost_usd, cost_source, pricing_note FROM usage "
                           "WHERE provider IN ('claude', 'droid', 'copilot', 'pi', 'amp')")
    assert len(merged) == len(landed)
    want, got = {}, {}
    for provider, rowid, rid, cost, source, note in merged:
        row = landed[(provider, rowid, rid)]
        got[(provider, rowid, rid)] = (_dec(cost), source, note)
        if row["cost_source"] == "native" or row["model"].startswith("claude-haiku"):
            want[(provider, rowid, rid)] = (_dec(row["cost_usd"]), row["cost_source"], row["pricing_note"])
        elif row["model"] == "claude-sonnet-4.5":
            want[(provider, rowid, rid)] = (_cost(row, own), "configured", "configured price for claude-sonnet-4.5")
        else:
            assert row["model"] == "claude-sonnet-4-5-20250929", row
            want[(provider, rowid, rid)] = (_cost(row, group), "configured", "configured price for claude-sonnet-4-5")
    assert got == want
    assert {v[1] for v in got.values()} == {"native", "estimated", "configured"}


def test_a_change_of_how_prices_find_their_requests_prices_the_history_again(demo, monkeypatch):
    """A release that changes which requests a price covers (RULES: the grouped names) left the
    history merged before as it was, and priced only the sources landed after: a mix (a review).
    The fingerprint holds the rules and the genai-prices release, so the next merge re-prices."""
    from warehouse.lake import prices

    home, _ = demo
    config = home / "config.toml"
    config.write_text(config.read_text() + "\n" + _toml([{"model": MODEL, "input": 1, "output": 5}], {}))
    monkeypatch.setattr(prices, "RULES", prices.RULES - 1)  # the release before
    assert "priced again" in _merge(home)
    assert "priced again" not in _merge(home)
    monkeypatch.undo()
    assert "the history was priced again" in _merge(home)


def test_the_first_merge_with_prices_does_not_say_they_changed(demo):
    """A home's first merge prices its requests with config.toml's prices: nothing was priced
    otherwise before it, so it says nothing of a change (it said "the prices ... changed", a new
    user's trial); the next change of a price is said."""
    home, layout = demo
    for catalog in home.glob("warehouse*"):
        shutil.rmtree(catalog) if catalog.is_dir() else catalog.unlink()
    config = home / "config.toml"
    config.write_text(config.read_text() + "\n" + _toml([{"model": MODEL, "input": 1, "output": 5}], {}))
    first = _merge(home)
    assert first.startswith("merged ") and "priced again" not in first
    config.write_text(config.read_text().replace("output = 5", "output = 6"))
    # the report, before the merge: its figures are the old prices', and it says so (a new user's trial)
    waiting = run_cli("report", "--home", home, "--section", "totals")
    assert waiting.returncode == 0 and (f"note: the prices in {config} are not the ones the warehouse was merged "
                                        "with: `agentlake merge` applies them") in waiting.stderr, waiting.stderr
    assert "changed: the history was priced again with them" in _merge(home)
    assert "not the ones the warehouse was merged with" not in run_cli("report", "--home", home).stderr
    # an ingest's merge says it too: `0 ok, 4 unchanged` alone hid it (a new user's trial)
    config.write_text(config.read_text().replace("output = 6", "output = 7"))
    ran = run_cli("ingest", "--home", home)
    assert ran.returncode == 0 and " ok, " in ran.stdout, ran.stderr
    assert f"note: the prices in {config} changed: the history was priced again with them" in ran.stdout, ran.stdout


def test_one_store_landed_under_two_user_names_is_priced_once_per_copy(tmp_path):
    """The same store landed on one machine under two user names (a user renamed, docs/TEAM.md)
    keeps its source ids: the session's repricing matched both copies' requests, and each copy
    took both deltas."""
    from transforms.synth.claude import assistant_lines, project_slug, usage, user_line, write_jsonl

    at = datetime(2026, 1, 5, 9, tzinfo=timezone.utc)
    cwd, sid = "/home/ana/shop", "11111111-2222-4333-8444-666666666666"
    claude = tmp_path / "claude"
    write_jsonl(claude / "projects" / project_slug(cwd) / f"{sid}.jsonl", [user_line(sid, at, cwd, "go")] + assistant_lines(
        sid, at + timedelta(seconds=5), cwd, message_id="msg_1", request_id="req_1", model="acme-internal-1",
        blocks=[{"type": "text", "text": "ok"}], final_usage=usage(1_000_000, 200_000), stop_reason="end_turn"))
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(_toml([{"model": "acme-internal-1", "input": 1, "output": 5}], {}))
    for user in ("root", "ana"):
        ran = run_cli("ingest", "--home", home, "--no-default", "--agent-home", f"claude={claude}",
                      "--machine", "box", "--user", user)
        assert ran.returncode == 0, ran.stderr
    layout = Layout.resolve(home=home)
    # 1M input tokens at $1 and 200k output at $5 a million: $2 for each copy, not $4
    assert query(layout, 'SELECT "user", cost_usd, cost_source FROM sessions ORDER BY 1') == \
        [("ana", 2.0, "configured"), ("root", 2.0, "configured")]
    assert query(layout, 'SELECT "user", SUM(cost_usd) FROM daily_costs GROUP BY 1 ORDER BY 1') == \
        [("ana", Decimal("2")), ("root", Decimal("2"))]
    # a new price re-prices the whole history, both copies in one statement: $3 each ($2 + $1)
    (home / "config.toml").write_text(_toml([{"model": "acme-internal-1", "input": 2, "output": 5}], {}))
    _merge(home)
    assert query(layout, 'SELECT "user", cost_usd, cost_source FROM sessions ORDER BY 1') == \
        [("ana", 3.0, "configured"), ("root", 3.0, "configured")]
    assert query(layout, 'SELECT "user", SUM(cost_usd) FROM daily_costs GROUP BY 1 ORDER BY 1') == \
        [("ana", Decimal("3")), ("root", Decimal("3"))]
