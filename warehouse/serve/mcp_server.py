"""`agentlake mcp`: the tools of warehouse.serve.mcp_tools served by the MCP Python SDK, over
stdio or, with a token, streamable HTTP on loopback. Imported by the command only: the SDK is
not loaded for `agentlake --help` or any other command."""

import functools
import inspect
import socket
import threading
from typing import Annotated

import anyio.to_thread

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError as SaidToAgent
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp_types import ToolAnnotations
from pydantic import ConfigDict, Field, ValidationError

from warehouse.serve.mcp_tools import CALL, Tools, ToolError
from warehouse.serve.report_options import BREAKDOWNS

TOKEN_ENV = "AGENTLAKE_MCP_TOKEN"
PATH = "/mcp"

INSTRUCTIONS = (
    "The history of this machine's (or team's) AI coding-agent sessions, as agentlake's warehouse "
    "holds it: sessions, messages, parts, tool_calls, usage and the marts (docs/TABLES.md, docs/MARTS.md). "
    "Read-only. Every answer's first line says how much of the result it shows. A session is named by its "
    "session_key (machine/user/agent/source_id/session_id), or by its session_id when only one has it. "
    "Root sessions' cost includes their sub-agents': sum `cost_usd` over `sessions WHERE is_root`.")

# a day as text: a bad one is said as `agentlake report` says it, not as the SDK's validation does
Since = Annotated[str | None, Field(description="the first day included, YYYY-MM-DD (UTC)")]
Until = Annotated[str | None, Field(description="the last day included, YYYY-MM-DD (UTC)")]
Project = Annotated[str | None, Field(description="one project, by its slug")]
Agent = Annotated[str | None, Field(description="one agent: claude, codex, crush, opencode, gemini, ...")]
User = Annotated[str | None, Field(description="the user whose machine ingested the sessions")]
Machine = Annotated[str | None, Field(description="the machine that ingested the sessions")]
Rows = Annotated[int | None, Field(description="rows to show (default 50, at most 500)",
                                   json_schema_extra={"minimum": 1, "maximum": 500})]


def agentlake_version() -> str:
    """The installed package's version, which the server reports to its clients."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentlake")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def build_server(tools: Tools) -> MCPServer:
    made = []  # the tools, handed to the server made
    reads = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)

    def tool(fn):
        checked = {}  # the SDK's model of the arguments, which the tool now applies itself

        def run(stop: threading.Event, given: dict):
            CALL.stop = stop  # this thread's call, which _deadline interrupts when it is cancelled
            try:
                return fn(**_arguments(checked["model"], given.get(RAW, given)))
            except ToolError as exc:  # a refusal or a caller's mistake: said to the agent as it is
                raise SaidToAgent(str(exc)) from None
            finally:
                CALL.stop = None

        # async, its work in a thread it can leave: the SDK ran a tool in a thread it waited out, and
        # a call its client cancelled ran its query on to the deadline (a trial)
        @functools.wraps(fn)
        async def answered(**given):
            stop = threading.Event()
            try:
                return await anyio.to_thread.run_sync(functools.partial(run, stop, given), abandon_on_cancel=True)
            finally:
                stop.set()  # cancelled: the query stops; answered: nothing left to stop

        # the docstring without its indentation: the agent reads it as the tool's description
        one = Tool.from_function(answered, description=inspect.cleandoc(fn.__doc__), annotations=reads,
                                 structured_output=False)
        # the schema the clients see stays the SDK's; the arguments reach `answered` as sent (the
        # SDK reads `arg_model` at each call), to be refused in one line there when unknown or
        # wrong: the SDK ignored an unknown one (`tool`, `last`: the CLI's words) and answered as
        # if unfiltered, and said a wrong one in pydantic's lines
        checked["model"], one.fn_metadata.arg_model = one.fn_metadata.arg_model, _AsSent
        made.append(one)
        return fn

    @tool
    def search_history(query: Annotated[str, Field(description="words to find in messages, tool calls and results")],
                       since: Since = None, until: Until = None, project: Project = None, agent: Agent = None,
                       user: User = None, machine: Machine = None, limit: Rows = None,
                       offset: Annotated[int, Field(description="best hits to skip: the first line of an answer "
                                                                "cut short gives the next offset", ge=0)] = 0) -> str:
        """Find where past sessions spoke of something: the best matching messages and tool calls,
        each with its session_key (open it with open_session). Words are matched stemmed and
        case-folded; "a phrase" in double quotes must appear as written, -word must not appear;
        English stop words (the, of, to, ...) are left out. A message is searched in its first
        20,000 characters."""
        return tools.search_history(query, since, until, project, agent, user, limit, offset, machine=machine)

    @tool
    def open_session(session: Annotated[str, Field(description="a session_key, or a session_id")],
                     offset: Annotated[int, Field(description="the first message index shown", ge=0)] = 0) -> str:
        """A session's transcript: its facts (agent, project, times, cost, models), then each
        message's text, reasoning, tool calls and results, and cost, from message `offset` on."""
        return tools.open_session(session, offset)

    @tool
    def usage_report(since: Since = None, until: Until = None, project: Project = None, agent: Agent = None,
                     user: User = None, machine: Machine = None,
                     # the schema lists the choices; a value outside them is the report's own error, not
                     # pydantic's validation dump (a new user's trial)
                     by: Annotated[str, Field(description="the main breakdown",
                                              json_schema_extra={"enum": list(BREAKDOWNS)})] = "project",
                     top: Annotated[int, Field(description="rows per ranking (at most 500)", ge=1)] = 10) -> str:
        """Cost and use: totals, cost and use by the breakdown, top projects, models, tools and
        failing tools, exactly as `agentlake report --by BY --format json`."""
        return tools.usage_report(since, until, project, agent, user, by, top, machine=machine)

    @tool
    def insights(since: Since = None, until: Until = None, project: Project = None, agent: Agent = None,
                 user: User = None, machine: Machine = None,
                 top: Annotated[int, Field(description="findings per insight (at most 500)", ge=1)] = 3) -> str:
        """Money that buys nothing (duplicate and unused reads, idle sessions, retry loops, context
        growth, cache, sub-agents, usage blocks): each insight's top findings and the SQL giving
        them all, as `agentlake report --insights --format json`."""
        return tools.insights(since, until, project, agent, user, top, machine=machine)

    @tool
    def run_sql(query: Annotated[str, Field(description="one SELECT (or EXPLAIN, CALL) over the tables and marts")],
                limit: Rows = None) -> str:
        """One read-only SQL statement (DuckDB) over the warehouse, as `agentlake sql` runs it: a
        write, ATTACH, COPY, or reading another file is refused."""
        return tools.run_sql(query, limit)

    return MCPServer("agentlake", instructions=INSTRUCTIONS, version=agentlake_version(), tools=made)


RAW = "arguments_as_sent"


class _AsSent(ArgModelBase):
    """Any arguments, handed on as sent (_arguments checks them against the tool's own model)."""

    model_config = ConfigDict(extra="allow")

    def model_dump_one_level(self) -> dict:
        return {RAW: dict(self.__pydantic_extra__ or {})}


def _arguments(model, given: dict) -> dict:
    """`given` checked against the tool's model: an unknown argument or a wrong value is a
    ToolError of one line naming it; else the arguments, with the defaults of those not given."""
    known = list(model.model_fields)
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ToolError(f"no argument {unknown[0]!r}: the arguments are {', '.join(known)}")
    try:
        return model.model_validate(given).model_dump_one_level()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the arguments"
        said = "is required" if first["type"] == "missing" else first["msg"].removeprefix("Input ")
        raise ToolError(f"{where} {said}") from None


def serve_stdio(tools: Tools) -> None:
    build_server(tools).run("stdio")


def serve_http(tools: Tools, host: str, port: int, token: str | None, log) -> None:
    """Streamable HTTP at http://HOST:PORT/mcp, every request carrying `Authorization: Bearer
    TOKEN` (else 401): $AGENTLAKE_MCP_TOKEN's, else (`token` None) a random one, printed. A token
    the user chose is never printed (it would reach logs). The SDK's own check of the Host and
    Origin headers (DNS rebinding) is on for a loopback host, the only kind the command takes."""
    from warehouse.serve.dashboard.server import new_token

    said = f"${TOKEN_ENV}" if token else None
    token = token or new_token()
    import uvicorn

    app = _with_token(build_server(tools).streamable_http_app(streamable_http_path=PATH, host=host), token)
    # bound here, before the banner: an address in use is the caller's OSError (exit 2), where
    # uvicorn logged it after the banner said it served, and exited 1 from inside
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    shown, port = f"[{host}]" if ":" in host else host, sock.getsockname()[1]  # port 0: the one bound
    log(f"MCP over streamable HTTP on http://{shown}:{port}{PATH}; send `Authorization: Bearer {said or token}`; "
        "Ctrl-C stops it")
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


def _with_token(app, token: str):
    """`app` answering only requests that carry the token (warehouse.serve.dashboard.server's
    comparison, in constant time)."""
    from warehouse.serve.dashboard.server import token_matches

    expected = token.encode()

    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not token_matches(value.strip(), expected):
                body = b'{"error": "agentlake mcp needs its token: Authorization: Bearer TOKEN"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b"Bearer"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded
