"""`agentlake mcp`, end to end: a real `python -m pipelines.cli mcp` process over stdio, driven by
the MCP SDK's own client, on a demo home; each tool's answer checked against `agentlake report
--format json` and `agentlake sql` run independently. One server process serves the module
(starting Python and its imports costs seconds); the HTTP transport gets one of its own."""

import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import run_cli
from tests.support_homes import Built, small_demo_home
from warehouse.serve.report_options import BREAKDOWNS

ROOT = Path(__file__).resolve().parents[1]
KEY = "concat_ws('/', machine, \"user\", provider, source_id, session_id)"


@dataclass
class Served:
    call: object  # call(tool, **arguments) -> (first line, rest, is_error)
    built: Built
    server_info: object = None  # what the server said of itself at start (its name and version)
    tools: list = ()  # the tools it lists


def _user_env(tmp_path_factory, shared_duckdb_dir) -> dict:
    """A HOME of its own (the machine's agents unread), with the suite's DuckDB extensions."""
    home = tmp_path_factory.mktemp("mcp-user")
    (home / ".duckdb").symlink_to(shared_duckdb_dir, target_is_directory=True)
    return {"HOME": str(home), "AGENTLAKE_HOME": str(home / "agentlake"), "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def served(built_once, tmp_path_factory, shared_duckdb_dir):
    built = small_demo_home(built_once)
    assert built.code == 0, built.err
    params = StdioServerParameters(command=sys.executable, cwd=ROOT,
                                   args=["-m", "pipelines.cli", "mcp", "--home", str(built.home)],
                                   env=_user_env(tmp_path_factory, shared_duckdb_dir))
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(Client(params)) as client:
        def call(tool: str, /, **arguments):  # positional: an argument may be named `tool`
            result = portal.call(client.call_tool, tool, arguments)
            text = result.content[0].text
            first, _, rest = text.partition("\n")
            return first, rest, result.is_error

        yield Served(call, built, client.server_info, portal.call(client.list_tools).tools)


def _cli_json(built: Built, *args):
    ran = run_cli(*args, "--home", built.home, "--format", "json")
    assert ran.returncode == 0, ran.stderr
    return ran.stdout.rstrip("\n")


def test_usage_report_is_the_reports_json(served):
    first, body, error = served.call("usage_report", by="agent", top=5)
    assert not error and first.startswith("agentlake report --by agent --format json, UTC days; top 5 rows")
    assert body == _cli_json(served.built, "report", "--by", "agent", "--top", "5")
    filtered = served.call("usage_report", by="day", project="webshop", agent="claude", top=3)[1]
    assert filtered == _cli_json(served.built, "report", "--by", "day", "--project", "webshop", "--agent", "claude",
                                 "--top", "3")
    first, body, error = served.call("usage_report", project="websop")
    assert error and "no project 'websop'" in first and "webshop" in first
    windowed = served.call("usage_report", by="day", since="2026-01-05", until="2026-01-06")[1]
    assert windowed == _cli_json(served.built, "report", "--by", "day", "--since", "2026-01-05", "--until", "2026-01-06")
    first, _, error = served.call("usage_report", since="2026-13-01")  # said as the report says it
    assert error and "since wants a date, YYYY-MM-DD: '2026-13-01'" in first and "pydantic" not in first
    first, _, error = served.call("usage_report", by="person")
    assert error and first.endswith("by must be one of " + ", ".join(BREAKDOWNS)) and "pydantic" not in first
    [schema] = [t.input_schema for t in served.tools if t.name == "usage_report"]
    assert schema["properties"]["by"]["enum"] == list(BREAKDOWNS)  # the choices, for the agent
    # a machine, as the report's --machine takes it (the tools took none: a review)
    [[machine]] = json.loads(served.call("run_sql", query="SELECT MIN(machine) FROM sessions")[1])["rows"]
    for tool in ("usage_report", "insights", "search_history"):
        assert "machine" in next(t.input_schema for t in served.tools if t.name == tool)["properties"]
    mine = served.call("usage_report", by="agent", machine=machine)[1]
    assert mine == _cli_json(served.built, "report", "--by", "agent", "--machine", machine)
    first, _, error = served.call("usage_report", machine="nowhere")
    assert error and "no machine 'nowhere'" in first


def test_insights_are_the_reports(served):
    first, body, error = served.call("insights", top=2)
    assert not error and "report --insights" in first
    assert body == _cli_json(served.built, "report", "--insights", "--top", "2")


def test_run_sql_answers_as_agentlake_sql_and_states_its_bounds(served):
    first, body, error = served.call("run_sql", query="SELECT provider, COUNT(*) AS n FROM sessions GROUP BY 1 ORDER BY 1")
    expected = json.loads(_cli_json(served.built, "sql", "SELECT provider, COUNT(*) AS n FROM sessions GROUP BY 1 "
                                                         "ORDER BY 1"))
    assert not error and json.loads(body)["rows"] == [[r["provider"], r["n"]] for r in expected]
    assert first.startswith(f"showing {len(expected)} of {len(expected)} rows")
    assert first.endswith("; no value cut (at most 2,000 characters, 100 items each)")  # not "values cut": none were

    first, body, _ = served.call("run_sql", query="SELECT range AS i FROM range(1234)", limit=50)
    assert first.startswith("showing 50 of 1,234 rows (limit 50; at most 500)")
    assert len(json.loads(body)["rows"]) == 50

    first, body, _ = served.call("run_sql", query="SELECT repeat('x', 5000) AS long FROM range(30)")
    rows = json.loads(body)["rows"]
    assert "cut to stay under 20,000 characters" in first and f"showing {len(rows)} of 30 rows" in first
    assert first.endswith(f"; {len(rows)} values cut at 2,000 characters or 100 items")
    assert rows[0][0] == "x" * 2000 + "… [3,000 more characters]"
    assert len(first) + len(body) < 20_000

    # inside lists and structs too, and a list cut at 100 items; a row larger than the answer shows
    # its beginning, not nothing (a trial's `list(text)` showed 0 of 1 row, "no value cut")
    first, body, _ = served.call("run_sql", query="SELECT [repeat('y', 5000)] AS l, {'s': repeat('z', 3000)} AS st")
    [[listed, struct]] = json.loads(body)["rows"]
    assert listed == ["y" * 2000 + "… [3,000 more characters]"] and struct == {"s": "z" * 2000 + "… [1,000 more characters]"}
    assert first.endswith("; 2 values cut at 2,000 characters or 100 items"), first
    first, body, _ = served.call("run_sql", query="SELECT list(repeat('w', 300)) AS many FROM range(1000)")
    assert first.startswith("showing the beginning of 1 of 1 row (the row is larger than 20,000 characters)"), first
    assert body.startswith('{"columns": ["many"], "rows": [[["' + "w" * 300) and len(first) + len(body) < 20_000
    first, body, _ = served.call("run_sql", query="SELECT list(range) AS many FROM range(250)")
    assert json.loads(body)["rows"][0][0][-1] == "… [150 more items]" and "1 value cut" in first
    # many rows: the first ones at once, the rest counted only so far
    first, body, _ = served.call("run_sql", query="SELECT * FROM range(400000000)", limit=5)
    assert first.startswith("showing 5 of more than 1,000,005 rows (limit 5; at most 500)"), first


@pytest.mark.parametrize("query, refused", [
    ("INSERT INTO sessions SELECT * FROM sessions", "INSERT statements are refused"),
    ("COPY (SELECT * FROM sessions) TO '/tmp/agentlake-mcp-leak.csv'", "COPY statements are refused"),
    ("ATTACH '/tmp/agentlake-mcp.duckdb' AS other", "ATTACH statements are refused"),
    ("SELECT * FROM read_text('/etc/hostname')", "file system operations are disabled"),
    ("SELECT 1; DROP TABLE sessions", "2 statements"),
    # a statement that does not parse: the parser's reason, not "Error executing tool" (a new user's trial)
    ("SELEC 1", 'Parser Error: syntax error at or near "SELEC"'),
    ("SELECT (1", "Parser Error: syntax error at end of input"),
    # not DuckDB's advice to SET max_expression_depth, which run_sql refuses
    ("SELECT " + " + ".join(["1"] * 1500), "write it flatter"),
])
def test_run_sql_refuses_what_agentlake_sql_refuses(served, query, refused):
    first, _, error = served.call("run_sql", query=query)
    assert error and refused in first
    assert not Path("/tmp/agentlake-mcp-leak.csv").exists() and not Path("/tmp/agentlake-mcp.duckdb").exists()


@pytest.mark.parametrize("tool, arguments, said", [
    # the CLI's words, which the SDK ignored, answering as if unfiltered (a new user's trial)
    ("search_history", {"query": "npm", "tool": "shell"},
     "no argument 'tool': the arguments are query, since, until, project, agent, user, machine, limit, offset"),
    ("usage_report", {"by": "agent", "last": "7d"},
     "no argument 'last': the arguments are since, until, project, agent, user, machine, by, top"),
    # a wrong value in one line, not pydantic's lines and its link
    ("usage_report", {"top": 0}, "top should be greater than or equal to 1"),
    ("open_session", {"session": "x", "offset": -1}, "offset should be greater than or equal to 0"),
    ("search_history", {}, "query is required"),
    # past DuckDB's BIGINT: said, not the SDK's bare "Error executing tool" (a trial)
    ("search_history", {"query": "login", "offset": 10**20},
     "offset wants 0 or the number of best hits to skip, from 0 to 1,000,000,000,000"),
    ("open_session", {"session": "x", "offset": 10**20}, "offset wants 0 or a later message index, from 0 to "
                                                           "1,000,000,000,000"),
])
def test_an_unknown_or_wrong_argument_is_refused_in_one_line(served, tool, arguments, said):
    first, rest, error = served.call(tool, **arguments)
    assert error and first.endswith(said) and not rest, first + rest


def test_open_session_stays_within_its_answer_and_says_where_a_long_message_goes_on(layout, project):
    """A title of 30,000 characters made the answer 30,534 characters and, with offset 1, 81,375; a
    message larger than the answer was cut without a word and its rest could not be reached (a
    trial). The title is cut as any value; a message too long shows its parts that fit and the
    run_sql query that reads the rest."""
    from tests.conftest import T0, ingest
    from transforms.synth.crush import add_message, add_session
    from transforms.synth.crush_parts import finish_part, text_part, tool_call_part
    from warehouse.serve.dashboard.server import Reader
    from warehouse.serve.mcp_tools import Tools

    p = project("shop")
    add_session(p.conn, "s", title="T" * 30_000, created_at=T0, cost=0.5)
    add_message(p.conn, "m0", "s", "user", [text_part("go")], created_at=T0)
    calls = [tool_call_part(f"c{i}", "bash", {"command": f"echo {i} " + "x" * 1_990}) for i in range(30)]
    add_message(p.conn, "m1", "s", "assistant", calls + [finish_part("tool_use", T0 + 2)], created_at=T0 + 1,
                finished_at=T0 + 2, model="claude-sonnet-4-5", provider="anthropic")
    add_message(p.conn, "m2", "s", "user", [text_part("thanks")], created_at=T0 + 3)
    p.conn.commit()
    ingest(layout, p.db)
    tools = Tools(Reader(layout.warehouse))
    key = tools.reader.cursor().execute("SELECT session_key FROM session_summary").fetchone()[0]
    for offset in (0, 1):
        answer = tools.open_session(key, offset)
        assert len(answer) <= 20_000 and "title: " + "T" * 2_000 + "… [28,000 more characters]" in answer
        assert answer.splitlines()[0].endswith(f"more: open_session with offset {offset + 1}"), answer[:300]
    # message #1 alone is larger than the answer: what fits, then where the rest is
    assert "[the answer is full: this message's parts from part " in answer and "run_sql reads them: SELECT " \
        in answer and answer.splitlines()[0].startswith("showing messages #1 to #1: 1 of 3"), answer[:300]
    rest = re.search(r"run_sql reads them: (SELECT .*)\]$", answer, re.MULTILINE)[1]
    part = int(re.search(r"part_index >= (\d+)", rest)[1])
    first, body, *_ = tools.run_sql(rest).split("\n", 1) + [""]
    assert 0 < part < 30 and json.loads(body)["rows"][0][0] == part and f"of {30 - part + 1:,} rows" in first


def test_a_report_of_days_without_sessions_names_the_days_there_are(served):
    """As `agentlake report` notes it (a trial's empty rankings came without a word)."""
    first, body, error = served.call("usage_report", since="2030-01-01", until="2030-12-31")
    assert not error and re.search(r"; no session from 2030-01-01 to 2030-12-31; the sessions are from "
                                   r"\d{4}-\d\d-\d\d to \d{4}-\d\d-\d\d \(since= and until= take them\)$", first), first
    assert "no session from" not in served.call("usage_report")[0]


def test_a_search_without_hits_offers_nothing_to_open(served):
    first, _, error = served.call("search_history", query="zzzqqq")
    assert not error and first == "showing 0 of 0 hits; nothing matches with these filters", first
    # days that hold no document are named with those that do, as `agentlake search` names them
    first, _, error = served.call("search_history", query="login", since="2030-01-01")
    assert not error and re.search(r"; the index holds nothing in these days: its messages and tool calls are from "
                                   r"\d{4}-\d\d-\d\d to \d{4}-\d\d-\d\d$", first), first
    first = served.call("search_history", query="login", since="2030-01-01", agent="claude")[0]
    assert "its messages and tool calls of these filters are from" in first, first  # as the CLI says it


def test_open_session_shows_the_transcript(served):
    row = json.loads(_cli_json(served.built, "sql", f"SELECT {KEY} AS k, session_id, (SELECT COUNT(*) FROM messages m "
                                                    "WHERE m.source_id = s.source_id AND m.session_id = s.session_id) "
                                                    "AS n, (SELECT text FROM parts p WHERE p.source_id = s.source_id "
                                                    "AND p.session_id = s.session_id AND p.role = 'user' AND text "
                                                    "IS NOT NULL ORDER BY created_at LIMIT 1) AS said FROM sessions s "
                                                    "WHERE provider = 'claude' AND is_root"))[0]
    first, body, error = served.call("open_session", session=row["k"])
    assert not error and first.startswith(f"showing messages #0 to #{row['n'] - 1}: {row['n']} of {row['n']}")
    assert f"session {row['k']}\n" in body and "agent: claude" in body and row["said"] in body
    # times to the second, as every agent's read (a Codex session's read `10:00:00.100000`: a trial)
    fraction = json.loads(_cli_json(served.built, "sql", f"SELECT {KEY} AS k FROM sessions s WHERE "
                                                          "epoch_us(created_at) % 1000000 <> 0 ORDER BY k LIMIT 1"))[0]["k"]
    body = served.call("open_session", session=fraction)[1]
    assert re.search(r"started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", body), body[:600]
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", body), body[:600]
    first, _, error = served.call("open_session", session=row["session_id"])  # the demo's agents share ids
    assert error and "several sessions have the id" in first and row["k"] in first
    first, _, _ = served.call("open_session", session=row["k"], offset=row["n"] - 1)
    assert f"1 of {row['n']}, from offset {row['n'] - 1}" in first
    # past the last message: said, not `showing messages none to none: 0 of 7` (a trial)
    first, _, error = served.call("open_session", session=row["k"], offset=999)
    assert error and first.endswith(f"no message at offset 999 or after: the session's {row['n']} messages are "
                               f"#0 to #{row['n'] - 1}"), first


def test_a_sub_agents_session_gives_its_own_figures(served):
    """The tree's figures are a root session's: a sub-agent's transcript says its cost is its own
    requests', names its root, and prints no empty figure."""
    row = json.loads(_cli_json(served.built, "sql", f"SELECT {KEY} AS k, root_session_id AS root FROM sessions s "
                                                    "WHERE NOT is_root ORDER BY k LIMIT 1"))[0]
    first, body, error = served.call("open_session", session=row["k"])
    assert not error, first
    assert "its own requests" in body and f"a sub-agent of the session {row['root']}" in body
    assert "None" not in body.split("\n\n")[0]


def test_a_search_hit_opens_its_session(served):
    first, body, error = served.call("search_history", query="login", limit=3)
    # the demo's Claude sub-agent looks for the login handler
    assert not error and first.startswith("showing 3 of 3 hits;"), first
    best = json.loads(body)["rows"][0]
    assert "**login**" in best[7]
    # as the answer says to open one (the argument's name, as open_session takes it)
    said = re.search(r"open one with open_session\((\w+)=<its session_key>\)", first)
    assert said and not served.call("open_session", **{said[1]: best[0]})[2], first
    # a limit that cuts: the first line counts every hit, as the CLI finds them
    total = len(json.loads(_cli_json(served.built, "search", "test", "--limit", "1000")))
    first = served.call("search_history", query="test", limit=2)[0]
    assert total > 2 and first.startswith(f"showing 2 of {total:,} hits (limit 2; at most 500)"), first


def test_hits_an_answer_cut_short_are_asked_for_with_the_offset_it_gives(served):
    """`limit 100000` showed the 93 best of 359 hits, cut to stay under the answer's characters,
    and no argument reached the others (a trial). The first line gives the next offset; pages
    asked with it hold every hit once, in the CLI's order."""
    every = [(h["machine"], h["source_id"], h["session_id"], h["snippet"]) for h in
             json.loads(_cli_json(served.built, "search", "test", "--limit", "500"))]
    seen, offset, pages = [], 0, 0
    while True:
        first, body, error = served.call("search_history", query="test", limit=7, offset=offset)
        assert not error, first
        rows = json.loads(body)["rows"]
        seen += [(r[7]) for r in rows]
        pages += 1
        said = re.search(r"; the next ones: offset=(\d+)", first)
        if not said:
            assert first.startswith(f"showing hits {offset + 1} to {offset + len(rows)} of {len(every)}"), first
            break
        assert int(said[1]) == offset + len(rows), first
        offset = int(said[1])
    assert pages > 1 and seen == [snippet for *_, snippet in every]
    first, _, error = served.call("search_history", query="test", offset=len(every))
    assert not error and first.startswith(f"no hit past the first {len(every)} (offset {len(every)})"), first
    assert served.call("search_history", query="test", offset=-1)[2]


def test_the_server_says_its_version_and_describes_its_tools_without_indentation(served):
    from importlib.metadata import version

    assert served.server_info.name == "agentlake" and served.server_info.version == version("agentlake")
    described = {t.name: t.description for t in served.tools}
    assert set(described) == {"search_history", "open_session", "usage_report", "insights", "run_sql"}
    for name, text in described.items():
        assert text and not any(line.startswith(" ") for line in text.splitlines()), (name, text)
    assert "\neach with its session_key" in described["search_history"]  # a docstring's second line, dedented
    # what an agent could not know: the part of a long message searched, the query's syntax
    from warehouse.catalog.search_index import BODY_CHARS

    assert f"first\n{BODY_CHARS:,} characters" in described["search_history"] and "-word" in described["search_history"]
    schema = {t.name: t.input_schema["properties"] for t in served.tools}
    assert schema["search_history"]["since"]["description"].startswith("the first day")
    assert schema["search_history"]["until"]["description"].startswith("the last day")
    assert (schema["run_sql"]["limit"]["minimum"], schema["run_sql"]["limit"]["maximum"]) == (1, 500)


def _post(url: str, token: str) -> int:
    request = urllib.request.Request(url, method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream"}, data=json.dumps({
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"}}}).encode())
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_http_needs_its_token(served, tmp_path_factory, shared_duckdb_dir):
    """Port 0 is any free one, and the banner names the port bound (it said 8766, a trial)."""
    env = _user_env(tmp_path_factory, shared_duckdb_dir) | {"AGENTLAKE_MCP_TOKEN": "right-token", "PATH": "/usr/bin:/bin"}
    server = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "mcp", "--http", "--port", "0",
                               "--home", str(served.built.home)], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    banner = ""
    try:
        while "MCP over streamable HTTP on " not in banner and server.poll() is None:
            banner += server.stderr.readline()
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)/mcp", banner)[1])
        assert port not in (0, 8766), banner
        url, deadline = f"http://127.0.0.1:{port}/mcp", time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, server.stderr.read()
                time.sleep(0.1)
        assert _post(url, "wrong-token") == 401
        assert _post(url, "") == 401
        assert _post(url, "right-token") == 200
    finally:
        server.terminate()
        server.wait(timeout=10)
    said = banner + server.stderr.read()
    # a token the user chose is named, never printed (it would reach the logs)
    assert "send `Authorization: Bearer $AGENTLAKE_MCP_TOKEN`" in said and "right-token" not in said, said


def test_a_port_in_use_is_said_before_any_banner_with_exit_2(served):
    """A trial: the banner said it served, uvicorn then logged "address already in use" and the
    command exited 3, the code of a budget exceeded. As the dashboard says it: exit 2, one line."""
    from tests.conftest import run_cli

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        ran = run_cli("mcp", "--http", "--port", port, "--home", served.built.home)
    assert ran.returncode == 2 and ran.stderr.startswith(f"error: cannot listen on 127.0.0.1:{port}: "), ran.stderr
    assert "MCP over streamable HTTP" not in ran.stderr and ran.stdout == ""


def test_a_call_its_client_cancelled_stops_its_query(lake):
    """A trial cancelled a `run_sql` of a query without end: no answer came (right), and the
    server's query ran on to the 30-second deadline, a core busy. Cancelled, the call's query is
    interrupted: this process's CPU stays still once the call is given up."""
    import anyio

    from warehouse.serve.dashboard.server import Reader
    from warehouse.serve.mcp_server import build_server
    from warehouse.serve.mcp_tools import Tools

    server = build_server(Tools(Reader(lake.warehouse)))

    async def given_up_after(seconds: float) -> None:
        with anyio.move_on_after(seconds) as scope:
            await server.call_tool("run_sql", {"query": "SELECT count(*) FROM range(100000000000) a, range(10) b"})
        assert scope.cancelled_caught

    anyio.run(given_up_after, 0.5)
    before = time.process_time()
    time.sleep(1.0)
    spent = time.process_time() - before
    assert spent < 0.5, f"the query ran on: {spent:.2f} s of CPU in the second after its call was cancelled"


def test_a_call_cancelled_between_two_queries_stops_the_second():
    """DuckDB drops an interrupt sent while no query runs: a call cancelled between two of its
    queries (run_sql's check and its query, the report's sections) ran the second to its end, and
    past the deadline too (a review). The interrupt is sent again until the block ends."""
    import duckdb

    from warehouse.serve.mcp_tools import CALL, ToolError, _deadline

    stop = threading.Event()
    CALL.stop = stop
    try:
        with duckdb.connect(config={"threads": "1"}) as con, pytest.raises(ToolError, match="cancelled by the client"):
            with _deadline(con, 30):
                con.execute("SELECT 1").fetchall()
                stop.set()
                time.sleep(0.2)  # the watcher's first interrupt lands between the two queries
                con.execute("SELECT sum(hash(range)) FROM range(500000000)").fetchall()  # seconds, uninterrupted
    finally:
        CALL.stop = None


def test_host_or_port_without_http_is_a_usage_error(tmp_path):
    from tests.conftest import run_cli

    ran = run_cli("mcp", "--home", tmp_path / "home", "--host", "0.0.0.0")
    assert ran.returncode == 2 and "give them with --http" in ran.stderr
